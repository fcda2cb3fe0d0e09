// tokenizer.cpp — Hugging Face `tokenizer.json` for byte-level BPE (GPT-2, GLM-4, GLM-ASR):
// load, encode, decode, reproducing HF `tokenizers` (checked against it by
// driver/tests/test_tokenizer.cpp with fixtures from tests/fixtures/tokenizer/make_test_tokenizer.py).
//
// Encoding is HF's pipeline, step by step:
//   1. Added tokens are cut out of the text first: leftmost match, longest among those starting
//      there (HF's Aho-Corasick LeftmostLongest). Tokens with "normalized": false are matched
//      first, then those with "normalized": true in the remaining pieces (the order HF uses; with
//      the null normalizer both see the same text).
//   2. Each remaining piece goes through the pre-tokenizer: Split steps cut it with a regex
//      (run by PCRE2; HF uses Oniguruma, and the two agree on these patterns), ByteLevel steps
//      optionally split with GPT-2's regex and map every byte to a printable character (GPT-2's
//      bytes_to_unicode table), so the BPE vocabulary never sees raw bytes.
//   3. Each word is merged by BPE: the lowest-ranked adjacent pair first, ties to the left; HF's
//      priority-queue algorithm is copied exactly, including how stale queue entries are skipped.
// The post_processor is ignored: encode() is HF's encode(text, add_special_tokens=False).
//
// Decoding maps each token's characters back to bytes (ByteLevel decoder), concatenates them and
// reads the bytes as UTF-8, replacing each maximal invalid subsequence with U+FFFD like Rust's
// String::from_utf8_lossy. Each id's bytes are computed once at load, so decode is a lookup.
//
// Supported: model BPE (merges as "a b" strings or [a, b] pairs; ignore_merges; dropout null;
// byte_fallback false; no subword prefix/suffix), normalizer null, pre_tokenizer ByteLevel,
// Split (Regex or String pattern, all five behaviours, invert) and Sequence of those with at
// least one ByteLevel, decoder ByteLevel, added tokens with single_word/lstrip/rstrip false,
// truncation and padding null. Anything else is an InputError naming the file, never an
// approximation. Not read because they cannot change ids or text here: post_processor (see
// above), unk_token/fuse_unk (every byte has a token, checked at load), trim_offsets (offsets).
//
// Known engine differences (PCRE2 10.42 vs HF's Oniguruma, measured over all code points):
// PCRE2's \s also matches U+180E (MONGOLIAN VOWEL SEPARATOR), and PCRE2 10.42 knows Unicode 14,
// so ~9k letters and ~120 digits assigned in Unicode 15-16 (rare scripts, CJK extensions H/I)
// are not \p{L}/\p{N} to it. Text containing them may split into words differently, giving
// other (still valid, identically decoding) ids. Decoding never uses a regex.
#include "glmasr/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <queue>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "glmasr/error.h"
#include "glmasr/json_limits.h"

namespace glmasr {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// UTF-8

// One step through UTF-8 at s[i]: a valid sequence's length, or the length of the maximal
// invalid subpart there (a lead byte plus the continuation bytes that still fit it, else one
// byte). Rust's from_utf8_lossy replaces each such subpart with one U+FFFD; we do the same.
struct Utf8Step {
    size_t length;
    bool valid;
};

Utf8Step utf8_step(std::string_view s, size_t i) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    if (b0 < 0x80) return {1, true};
    size_t continuation;           // bytes that must follow the lead byte
    uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the first continuation byte
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        continuation = 1;
    } else if (b0 >= 0xE0 && b0 <= 0xEF) {
        continuation = 2;
        if (b0 == 0xE0) lo = 0xA0;  // no overlong forms
        if (b0 == 0xED) hi = 0x9F;  // no UTF-16 surrogates
    } else if (b0 >= 0xF0 && b0 <= 0xF4) {
        continuation = 3;
        if (b0 == 0xF0) lo = 0x90;  // no overlong forms
        if (b0 == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
        return {1, false};  // a stray continuation byte, C0/C1, or F5..FF
    }
    for (size_t k = 1; k <= continuation; ++k) {
        if (i + k >= s.size()) return {k, false};
        const auto b = static_cast<uint8_t>(s[i + k]);
        if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) return {k, false};
    }
    return {continuation + 1, true};
}

std::string utf8_lossy(std::string_view bytes) {
    static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
    std::string out;
    out.reserve(bytes.size());
    for (size_t i = 0; i < bytes.size();) {
        const Utf8Step step = utf8_step(bytes, i);
        if (step.valid) {
            out.append(bytes.substr(i, step.length));
        } else {
            out.append(kReplacement);
        }
        i += step.length;
    }
    return out;
}

// The code point of the valid UTF-8 sequence at s[i] (length from utf8_step).
uint32_t code_point(std::string_view s, size_t i, size_t length) {
    const auto b0 = static_cast<uint8_t>(s[i]);
    uint32_t cp = length == 1   ? b0
                  : length == 2 ? (b0 & 0x1F)
                  : length == 3 ? (b0 & 0x0F)
                                : (b0 & 0x07);
    for (size_t k = 1; k < length; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
    return cp;
}

std::string encode_utf8(uint32_t cp) {
    std::string out;
    if (cp < 0x80) {
        out += static_cast<char>(cp);
    } else if (cp < 0x800) {
        out += static_cast<char>(0xC0 | (cp >> 6));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {  // the byte-level alphabet stays far below U+10000
        out += static_cast<char>(0xE0 | (cp >> 12));
        out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
        out += static_cast<char>(0x80 | (cp & 0x3F));
    }
    return out;
}

// ---------------------------------------------------------------------------------------------
// GPT-2's bytes_to_unicode: printable bytes stand for themselves, the other 68 bytes (controls,
// space, 0x7F..0xA0, 0xAD) take the code points 256, 257, ... in byte order. Every byte thus
// becomes one visible character and "Ġ" (U+0120) is the space.

struct ByteAlphabet {
    std::array<std::string, 256> byte_to_char;  // UTF-8 of the character standing for a byte
    std::unordered_map<uint32_t, uint8_t> char_to_byte;

    ByteAlphabet() {
        uint32_t next_unprintable = 256;
        for (int b = 0; b < 256; ++b) {
            const bool printable =
                (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
            const uint32_t cp = printable ? static_cast<uint32_t>(b) : next_unprintable++;
            byte_to_char[b] = encode_utf8(cp);
            char_to_byte[cp] = static_cast<uint8_t>(b);
        }
    }
};

const ByteAlphabet& byte_alphabet() {
    static const ByteAlphabet alphabet;
    return alphabet;
}

// Ids index dense per-id tables; this bound (far above GLM-ASR's 59264 ids) keeps a corrupt id
// from allocating gigabytes, and build_id_tables allows ids up to twice the token count plus
// kIdSlack (holes are legal, a few ids far out are not).
constexpr int kMaxTokenId = 1 << 24;
constexpr size_t kIdSlack = 1024;

// GPT-2's pre-tokenizer regex, as in HF's ByteLevel (use_regex = true).
constexpr const char* kGpt2Regex =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// ---------------------------------------------------------------------------------------------
// Regex: PCRE2 standing in for HF's Oniguruma.

class Regex {
public:
    // `literal` escapes the whole pattern (HF's Split with a String pattern).
    Regex(const std::string& pattern, bool literal, const std::string& where)
        : where_(where), context_(pcre2_match_context_create(nullptr), &pcre2_match_context_free) {
        if (!context_) throw Error("tokenizer: out of memory for a PCRE2 match context");
        // A pattern that backtracks catastrophically (e.g. (a+)+$ on a long run of a's) stops at
        // these limits with an InputError instead of running for minutes; the shipped
        // pre-tokenizer needs a few dozen steps per match.
        pcre2_set_match_limit(context_.get(), kMatchLimit);
        pcre2_set_depth_limit(context_.get(), kDepthLimit);
        // UTF + UCP: \s, \w, \d and \p{..} are Unicode-aware as in Oniguruma with UTF-8.
        // MULTILINE: Oniguruma's Ruby syntax (HF's) makes ^ and $ match at every line end.
        const uint32_t options =
            literal ? (PCRE2_UTF | PCRE2_LITERAL) : (PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE);
        int error_code = 0;
        PCRE2_SIZE error_offset = 0;
        code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                              &error_code, &error_offset, nullptr);
        if (!code_) {
            std::array<PCRE2_UCHAR, 256> message{};
            pcre2_get_error_message(error_code, message.data(), message.size());
            throw InputError(where + ": regex " + json(pattern).dump() +
                             " does not compile at offset " + std::to_string(error_offset) + ": " +
                             reinterpret_cast<const char*>(message.data()));
        }
    }
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;
    ~Regex() { pcre2_code_free(code_); }

    // HF's Pattern::find_matches: slices covering all of `text`, each flagged match or not.
    // Matches are enumerated like the onig crate's find_iter: search on from the end of the last
    // match; an empty match right where the previous match ended is skipped by one character.
    struct Slice {
        size_t begin, end;
        bool is_match;
    };
    std::vector<Slice> find_matches(std::string_view text) const {
        if (text.empty()) return {{0, 0, false}};
        std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
            pcre2_match_data_create_from_pattern(code_, nullptr), &pcre2_match_data_free);
        if (!match) throw Error("tokenizer: out of memory for PCRE2 match data");
        std::vector<Slice> slices;
        size_t previous = 0;  // end of the last slice emitted
        size_t search_from = 0;
        bool have_match = false;  // whether `previous` is the end of a match
        while (search_from <= text.size()) {
            // encode() validated the UTF-8 once; re-checking the subject on every call would
            // make the search quadratic in the text's length.
            const int rc =
                pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(),
                            search_from, PCRE2_NO_UTF_CHECK, match.get(), context_.get());
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT)
                throw InputError(where_ + ": a pre-tokenizer regex backtracks past PCRE2's " +
                                 (rc == PCRE2_ERROR_MATCHLIMIT ? "match" : "depth") +
                                 " limit on this text (a catastrophic pattern)");
            if (rc < 0) {
                std::array<PCRE2_UCHAR, 256> message{};
                pcre2_get_error_message(rc, message.data(), message.size());
                throw Error(std::string("tokenizer: PCRE2 match failed: ") +
                            reinterpret_cast<const char*>(message.data()));
            }
            const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match.get());
            const size_t begin = ovector[0], end = ovector[1];
            if (begin == end && have_match && previous == end) {
                search_from += search_from < text.size() ? utf8_step(text, search_from).length : 1;
                continue;
            }
            if (previous != begin) slices.push_back({previous, begin, false});
            slices.push_back({begin, end, true});
            previous = search_from = end;
            have_match = true;
        }
        if (previous != text.size()) slices.push_back({previous, text.size(), false});
        return slices;
    }

private:
    static constexpr uint32_t kMatchLimit = 1000000, kDepthLimit = 100000;
    std::string where_;
    std::unique_ptr<pcre2_match_context, decltype(&pcre2_match_context_free)> context_;
    pcre2_code* code_ = nullptr;
};

// ---------------------------------------------------------------------------------------------
// Pre-tokenizer: a flat list of Split and ByteLevel steps (a Sequence is flattened).

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

struct PreTokenizerStep {
    enum class Kind { Split, ByteLevel } kind = Kind::Split;
    std::shared_ptr<const Regex> regex;  // Split's pattern, or GPT-2's for ByteLevel+use_regex
    SplitBehavior behavior = SplitBehavior::Isolated;
    bool invert = false;            // Split: the pattern marks what is kept apart
    bool add_prefix_space = false;  // ByteLevel: prepend " " unless the piece starts with one
};

// HF's NormalizedString::split: turn match/non-match slices into pieces by the behaviour.
std::vector<std::string> split_pieces(std::string_view text, const Regex& regex,
                                      SplitBehavior behavior, bool invert) {
    std::vector<Regex::Slice> slices = regex.find_matches(text);
    if (invert)
        for (auto& slice : slices) slice.is_match = !slice.is_match;

    struct Kept {
        size_t begin, end;
        bool remove;
    };
    std::vector<Kept> kept;
    bool previous_match = false;
    switch (behavior) {
        case SplitBehavior::Isolated:
            for (const auto& s : slices) kept.push_back({s.begin, s.end, false});
            break;
        case SplitBehavior::Removed:
            for (const auto& s : slices) kept.push_back({s.begin, s.end, s.is_match});
            break;
        case SplitBehavior::Contiguous:  // runs of matches, and of non-matches, become one piece
            for (const auto& s : slices) {
                if (s.is_match == previous_match && !kept.empty()) {
                    kept.back().end = s.end;
                } else {
                    kept.push_back({s.begin, s.end, false});
                }
                previous_match = s.is_match;
            }
            break;
        case SplitBehavior::MergedWithPrevious:  // a match joins the piece before it
            for (const auto& s : slices) {
                if (s.is_match && !previous_match && !kept.empty()) {
                    kept.back().end = s.end;
                } else {
                    kept.push_back({s.begin, s.end, false});
                }
                previous_match = s.is_match;
            }
            break;
        case SplitBehavior::MergedWithNext:  // a match joins the piece after it (scan backwards)
            for (auto s = slices.rbegin(); s != slices.rend(); ++s) {
                if (s->is_match && !previous_match && !kept.empty()) {
                    kept.back().begin = s->begin;
                } else {
                    kept.push_back({s->begin, s->end, false});
                }
                previous_match = s->is_match;
            }
            std::reverse(kept.begin(), kept.end());
            break;
    }
    std::vector<std::string> pieces;
    for (const auto& k : kept)
        if (!k.remove && k.end > k.begin)
            pieces.emplace_back(text.substr(k.begin, k.end - k.begin));
    return pieces;
}

std::string to_byte_level(std::string_view text) {
    const ByteAlphabet& alphabet = byte_alphabet();
    std::string out;
    out.reserve(text.size() * 2);
    for (unsigned char b : text) out += alphabet.byte_to_char[b];
    return out;
}

// ---------------------------------------------------------------------------------------------
// tokenizer.json parsing helpers

std::string type_of(const json& node) {
    return node.is_object() && node.contains("type") && node["type"].is_string()
               ? node["type"].get<std::string>()
               : std::string("(no type)");
}

bool flag(const json& node, const char* key, bool fallback) {
    return node.contains(key) && !node[key].is_null() ? node[key].get<bool>() : fallback;
}

struct AddedToken {
    std::string content;
    int id;
};

// Cut `text` at the added tokens: leftmost match first, the longest of those starting there.
// Pieces are appended to `out` as (text, -1) or (token content, id); empty pieces are dropped.
void split_added_tokens(std::string_view text, const std::vector<AddedToken>& tokens,
                        std::vector<std::pair<std::string, int>>& out) {
    size_t piece_begin = 0;
    for (size_t i = 0; i < text.size();) {
        const AddedToken* best = nullptr;
        for (const AddedToken& token : tokens)
            if (text.compare(i, token.content.size(), token.content) == 0 &&
                (!best || token.content.size() > best->content.size()))
                best = &token;
        if (!best) {
            ++i;
            continue;
        }
        if (i > piece_begin)
            out.emplace_back(std::string(text.substr(piece_begin, i - piece_begin)), -1);
        out.emplace_back(best->content, best->id);
        i += best->content.size();
        piece_begin = i;
    }
    if (text.size() > piece_begin) out.emplace_back(std::string(text.substr(piece_begin)), -1);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

struct Tokenizer::Impl {
    std::string path;  // for error messages

    // BPE model
    std::unordered_map<std::string, int> vocab;                // token -> id
    std::unordered_map<uint64_t, std::pair<int, int>> merges;  // (left, right) -> (rank, new id)
    bool ignore_merges = false;

    // Added tokens, in the two groups HF matches one after the other.
    std::vector<AddedToken> added_not_normalized, added_normalized;
    std::unordered_map<std::string, int> added_ids;    // content -> id
    std::unordered_set<std::string> special_contents;  // HF tests "special" by content

    std::vector<PreTokenizerStep> pre_tokenizer;

    // Per id (holes in the id range have present = false): bytes for decode, special flag.
    std::vector<std::string> id_bytes;
    std::vector<uint8_t> present, special;

    // BPE results per word, as HF caches them; encode() is const and may run on several threads.
    static constexpr size_t kCacheCapacity = 10000;
    mutable std::mutex cache_mutex;
    mutable std::unordered_map<std::string, std::vector<int>> cache;

    static uint64_t pair_key(int left, int right) {
        return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
               static_cast<uint32_t>(right);
    }

    // A token id as the file writes it: a JSON integer in [0, kMaxTokenId] (not 3.7, not 2^32 + 5
    // that would wrap to 5); `what` names it in the error.
    int token_id(const json& node, const std::string& what) const {
        if (!node.is_number_integer())
            throw InputError(path + ": " + what + " is " + node.dump() + ", not an integer");
        if (node.is_number_unsigned()
                ? node.get<uint64_t>() > static_cast<uint64_t>(kMaxTokenId)
                : (node.get<int64_t>() < 0 || node.get<int64_t>() > kMaxTokenId))
            throw InputError(path + ": " + what + " is " + node.dump() + ", outside [0, " +
                             std::to_string(kMaxTokenId) + "]");
        return static_cast<int>(node.get<int64_t>());
    }

    void parse_model(const json& model);
    void parse_pre_tokenizer(const json& node);
    void parse_added_tokens(const json& list);
    void build_id_tables();

    std::vector<std::string> pre_tokenize(const std::string& piece) const;
    std::vector<int> bpe(const std::string& word) const;
    std::vector<int> bpe_cached(const std::string& word) const;
};

void Tokenizer::Impl::parse_model(const json& model) {
    if (!model.is_object()) throw InputError(path + ": \"model\" is not an object");
    const std::string type = type_of(model);
    if (type != "BPE")
        throw InputError(path + ": model type \"" + type + "\" is not supported (only BPE)");
    if (model.contains("dropout") && !model["dropout"].is_null())
        throw InputError(path + ": BPE dropout is not supported (must be null)");
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
        if (model.contains(key) && !model[key].is_null())
            throw InputError(path + ": BPE " + key + " is not supported (must be null)");
    if (flag(model, "byte_fallback", false))
        throw InputError(path + ": BPE byte_fallback is not supported (byte-level BPE needs none)");
    ignore_merges = flag(model, "ignore_merges", false);

    if (!model.contains("vocab") || !model["vocab"].is_object())
        throw InputError(path + ": model has no \"vocab\" object");
    std::unordered_set<int> seen_ids;
    for (const auto& [token, id_node] : model["vocab"].items()) {
        const int id = token_id(id_node, "vocab id of " + json(token).dump());
        if (!seen_ids.insert(id).second)
            throw InputError(path + ": vocab id " + std::to_string(id) + " is repeated");
        vocab.emplace(token, id);
    }
    // Byte-level BPE can spell any text only if every byte's character is a token.
    for (int b = 0; b < 256; ++b)
        if (!vocab.count(byte_alphabet().byte_to_char[b]))
            throw InputError(path + ": vocab lacks the byte-level token for byte " +
                             std::to_string(b));

    if (!model.contains("merges") || !model["merges"].is_array())
        throw InputError(path + ": model has no \"merges\" list");
    int rank = 0;
    for (const json& merge : model["merges"]) {
        std::string left, right;
        if (merge.is_string()) {  // legacy "a b"; HF skips a "#version" header line
            const std::string line = merge.get<std::string>();
            if (line.rfind("#version", 0) == 0) continue;
            const size_t space = line.find(' ');
            if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos)
                throw InputError(path + ": merge " + std::to_string(rank + 1) + " \"" + line +
                                 "\" is not two tokens separated by one space");
            left = line.substr(0, space);
            right = line.substr(space + 1);
        } else if (merge.is_array() && merge.size() == 2) {
            left = merge[0].get<std::string>();
            right = merge[1].get<std::string>();
        } else {
            throw InputError(path + ": merge " + std::to_string(rank + 1) +
                             " is neither \"a b\" nor [a, b]");
        }
        const auto l = vocab.find(left), r = vocab.find(right), m = vocab.find(left + right);
        if (l == vocab.end() || r == vocab.end() || m == vocab.end())
            throw InputError(path + ": merge " + std::to_string(rank + 1) + " (" + left + ", " +
                             right + ") uses a token that is not in the vocab");
        // A repeated pair keeps its last rank, as HF's map does.
        merges[pair_key(l->second, r->second)] = {rank, m->second};
        ++rank;
    }
}

void Tokenizer::Impl::parse_pre_tokenizer(const json& node) {
    const std::string type = type_of(node);
    if (type == "Sequence") {
        if (!node.contains("pretokenizers") || !node["pretokenizers"].is_array())
            throw InputError(path + ": pre_tokenizer Sequence has no \"pretokenizers\" list");
        for (const json& child : node["pretokenizers"]) parse_pre_tokenizer(child);
    } else if (type == "ByteLevel") {
        PreTokenizerStep step;
        step.kind = PreTokenizerStep::Kind::ByteLevel;
        step.add_prefix_space = flag(node, "add_prefix_space", true);
        if (flag(node, "use_regex", true))
            step.regex = std::make_shared<Regex>(kGpt2Regex, false, path);
        pre_tokenizer.push_back(std::move(step));
    } else if (type == "Split") {
        PreTokenizerStep step;
        const json& pattern = node.at("pattern");
        if (pattern.contains("Regex")) {
            step.regex = std::make_shared<Regex>(pattern["Regex"].get<std::string>(), false, path);
        } else if (pattern.contains("String")) {
            step.regex = std::make_shared<Regex>(pattern["String"].get<std::string>(), true, path);
        } else {
            throw InputError(path +
                             ": Split pattern is neither {\"Regex\": ..} nor {\"String\": ..}");
        }
        static const std::unordered_map<std::string, SplitBehavior> behaviors = {
            {"Removed", SplitBehavior::Removed},
            {"Isolated", SplitBehavior::Isolated},
            {"MergedWithPrevious", SplitBehavior::MergedWithPrevious},
            {"MergedWithNext", SplitBehavior::MergedWithNext},
            {"Contiguous", SplitBehavior::Contiguous}};
        const std::string behavior = node.at("behavior").get<std::string>();
        if (!behaviors.count(behavior))
            throw InputError(path + ": Split behavior \"" + behavior + "\" is unknown");
        step.behavior = behaviors.at(behavior);
        step.invert = node.at("invert").get<bool>();
        pre_tokenizer.push_back(std::move(step));
    } else {
        throw InputError(path + ": pre_tokenizer \"" + type +
                         "\" is not supported (only ByteLevel, Split and Sequence of them)");
    }
}

void Tokenizer::Impl::parse_added_tokens(const json& list) {
    if (!list.is_array()) throw InputError(path + ": \"added_tokens\" is not a list");
    // HF ignores the ids written in the file and numbers added tokens itself: a token already in
    // the vocab keeps its id, the others count up from the vocab's size. A file whose ids differ
    // would make HF and us disagree with the file, so it is refused.
    int next_id = static_cast<int>(vocab.size());
    for (const json& token : list) {
        const std::string content = token.at("content").get<std::string>();
        const int id = token_id(token.at("id"), "added token id of " + json(content).dump());
        if (content.empty()) throw InputError(path + ": an added token has empty content");
        for (const char* key : {"single_word", "lstrip", "rstrip"})
            if (flag(token, key, false))
                throw InputError(path + ": added token \"" + content + "\" sets " + key +
                                 ", which is not supported");
        int expected;
        if (added_ids.count(content)) {
            expected = added_ids.at(content);
        } else if (vocab.count(content)) {
            expected = vocab.at(content);
        } else {
            expected = next_id++;
        }
        if (id != expected)
            throw InputError(path + ": added token \"" + content + "\" has id " +
                             std::to_string(id) + " but Hugging Face tokenizers would give it id " +
                             std::to_string(expected));
        if (added_ids.count(content)) continue;
        added_ids.emplace(content, id);
        const bool is_special = flag(token, "special", false);
        if (is_special) special_contents.insert(content);
        // HF's default for "normalized" is the opposite of "special".
        const bool normalized = flag(token, "normalized", !is_special);
        (normalized ? added_normalized : added_not_normalized).push_back({content, id});
    }
}

void Tokenizer::Impl::build_id_tables() {
    int max_id = -1;
    for (const auto& [token, id] : vocab) max_id = std::max(max_id, id);
    for (const auto& [content, id] : added_ids) max_id = std::max(max_id, id);
    // The tables below have one entry per id up to the largest: real files number their tokens
    // densely, and a few ids far out would cost memory the file does not pay for.
    const size_t tokens = vocab.size() + added_ids.size();
    if (static_cast<size_t>(max_id) >= 2 * tokens + kIdSlack)
        throw InputError(path + ": token ids reach " + std::to_string(max_id) + " for only " +
                         std::to_string(tokens) + " tokens (ids must be dense, from 0)");
    const size_t size = static_cast<size_t>(max_id + 1);

    // Added tokens shadow model tokens with the same id, as in HF's decode.
    std::vector<const std::string*> token_of(size, nullptr);
    for (const auto& [token, id] : vocab) token_of[id] = &token;
    for (const auto& [content, id] : added_ids) token_of[id] = &content;

    const ByteAlphabet& alphabet = byte_alphabet();
    id_bytes.assign(size, std::string());
    present.assign(size, 0);
    special.assign(size, 0);
    for (size_t id = 0; id < size; ++id) {
        if (!token_of[id]) continue;
        const std::string& token = *token_of[id];
        present[id] = 1;
        special[id] = special_contents.count(token) ? 1 : 0;
        // HF's ByteLevel decoder: a token whose characters all belong to the byte alphabet
        // becomes those bytes; any other token (e.g. "<|user|>" with a space in it) stays as is.
        std::string bytes;
        bool all_bytes = true;
        for (size_t i = 0; i < token.size() && all_bytes;) {
            const Utf8Step step = utf8_step(token, i);
            const auto byte = step.valid
                                  ? alphabet.char_to_byte.find(code_point(token, i, step.length))
                                  : alphabet.char_to_byte.end();
            all_bytes = byte != alphabet.char_to_byte.end();
            if (all_bytes) bytes += static_cast<char>(byte->second);
            i += step.length;
        }
        id_bytes[id] = all_bytes ? bytes : token;
    }
}

// The pre-tokenizer steps applied in order to one piece of text; returns the words BPE sees.
std::vector<std::string> Tokenizer::Impl::pre_tokenize(const std::string& piece) const {
    std::vector<std::string> words{piece};
    for (const PreTokenizerStep& step : pre_tokenizer) {
        std::vector<std::string> next;
        for (const std::string& word : words) {
            if (step.kind == PreTokenizerStep::Kind::Split) {
                for (std::string& part :
                     split_pieces(word, *step.regex, step.behavior, step.invert))
                    next.push_back(std::move(part));
                continue;
            }
            // ByteLevel: prefix space, GPT-2 split (if use_regex), then bytes -> characters.
            const std::string text = step.add_prefix_space && word[0] != ' ' ? " " + word : word;
            if (!step.regex) {
                next.push_back(to_byte_level(text));
                continue;
            }
            for (const std::string& part :
                 split_pieces(text, *step.regex, SplitBehavior::Isolated, false))
                next.push_back(to_byte_level(part));
        }
        words = std::move(next);
    }
    return words;
}

// HF's BPE::merge_word + Word::merge_all: symbols start as single characters; a priority queue
// holds every adjacent pair that has a merge, best = lowest rank, then leftmost position.
// Entries made stale by an earlier merge are recognised and skipped when popped.
std::vector<int> Tokenizer::Impl::bpe(const std::string& word) const {
    if (ignore_merges) {
        const auto whole = vocab.find(word);
        if (whole != vocab.end()) return {whole->second};
    }
    struct Symbol {
        int id;
        int prev, next;  // neighbours still alive, -1 at the ends
        bool removed;
    };
    std::vector<Symbol> symbols;
    for (size_t i = 0; i < word.size();) {
        const size_t length = utf8_step(word, i).length;
        const auto id = vocab.find(word.substr(i, length));
        if (id == vocab.end())  // load() checked that all 256 byte characters are tokens
            throw Error(path + ": BPE symbol " + json(word.substr(i, length)).dump() +
                        " is not in the vocab");
        const int index = static_cast<int>(symbols.size());
        symbols.push_back({id->second, index - 1, -1, false});
        if (index > 0) symbols[index - 1].next = index;
        i += length;
    }

    struct Merge {
        int pos, rank, new_id;
    };
    const auto worse = [](const Merge& a, const Merge& b) {
        return a.rank != b.rank ? a.rank > b.rank : a.pos > b.pos;
    };
    std::priority_queue<Merge, std::vector<Merge>, decltype(worse)> queue(worse);
    const auto push_pair = [&](int pos, int left, int right) {
        const auto merge = merges.find(pair_key(left, right));
        if (merge != merges.end()) queue.push({pos, merge->second.first, merge->second.second});
    };
    for (size_t i = 0; i + 1 < symbols.size(); ++i)
        push_pair(static_cast<int>(i), symbols[i].id, symbols[i + 1].id);

    while (!queue.empty()) {
        const Merge top = queue.top();
        queue.pop();
        Symbol& left = symbols[top.pos];
        if (left.removed || left.next == -1) continue;
        const Symbol right = symbols[left.next];
        // Stale entry: the pair at this position is no longer the one this merge was made for.
        const auto current = merges.find(pair_key(left.id, right.id));
        if (current == merges.end() || current->second.second != top.new_id) continue;

        left.id = top.new_id;
        symbols[left.next].removed = true;
        left.next = right.next;
        if (right.next != -1) symbols[right.next].prev = top.pos;
        if (left.prev != -1) push_pair(left.prev, symbols[left.prev].id, left.id);
        if (left.next != -1) push_pair(top.pos, left.id, symbols[left.next].id);
    }

    std::vector<int> ids;
    for (const Symbol& s : symbols)
        if (!s.removed) ids.push_back(s.id);
    return ids;
}

std::vector<int> Tokenizer::Impl::bpe_cached(const std::string& word) const {
    {
        std::lock_guard<std::mutex> lock(cache_mutex);
        const auto hit = cache.find(word);
        if (hit != cache.end()) return hit->second;
    }
    std::vector<int> ids = bpe(word);
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache.size() < kCacheCapacity) cache.emplace(word, ids);
    return ids;
}

// ---------------------------------------------------------------------------------------------

Tokenizer::Tokenizer() : impl_(std::make_unique<Impl>()) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in || std::filesystem::is_directory(path))
        throw InputError(path + ": cannot open tokenizer file");
    json root;
    try {
        root = parse_json_limited(path, in);
    } catch (const json::parse_error& e) {
        throw InputError(path + ": not valid JSON (" + e.what() + ")");
    }

    Tokenizer tokenizer;
    Impl& impl = *tokenizer.impl_;
    impl.path = path;
    try {
        if (!root.is_object()) throw InputError(path + ": not a tokenizer.json object");
        if (!root.contains("model")) throw InputError(path + ": no \"model\" section");
        impl.parse_model(root["model"]);

        // A normalizer would rewrite the text before pre-tokenization; byte-level BPE uses none.
        if (root.contains("normalizer") && !root["normalizer"].is_null())
            throw InputError(path + ": normalizer \"" + type_of(root["normalizer"]) +
                             "\" is not supported (only null)");
        // HF's encode() would truncate or pad; prompts need neither.
        for (const char* key : {"truncation", "padding"})
            if (root.contains(key) && !root[key].is_null())
                throw InputError(path + ": \"" + key + "\" is not supported (must be null)");

        if (!root.contains("pre_tokenizer") || root["pre_tokenizer"].is_null())
            throw InputError(path + ": no pre_tokenizer (byte-level BPE needs ByteLevel)");
        impl.parse_pre_tokenizer(root["pre_tokenizer"]);
        if (std::none_of(impl.pre_tokenizer.begin(), impl.pre_tokenizer.end(),
                         [](const PreTokenizerStep& s) {
                             return s.kind == PreTokenizerStep::Kind::ByteLevel;
                         }))
            throw InputError(
                path + ": pre_tokenizer has no ByteLevel step (only byte-level BPE is supported)");

        const json decoder = root.value("decoder", json());
        if (type_of(decoder) != "ByteLevel")
            throw InputError(path + ": decoder \"" + type_of(decoder) +
                             "\" is not supported (only ByteLevel)");

        if (root.contains("added_tokens") && !root["added_tokens"].is_null())
            impl.parse_added_tokens(root["added_tokens"]);
        // post_processor is not read: encode() is HF's encode(text, add_special_tokens=False).
        impl.build_id_tables();
    } catch (const json::exception& e) {
        throw InputError(path + ": malformed tokenizer.json (" + e.what() + ")");
    }
    return tokenizer;
}

std::vector<int> Tokenizer::encode(const std::string& text) const {
    const Impl& impl = *impl_;
    // HF takes a Python str, always valid Unicode; PCRE2 in UTF mode needs valid UTF-8 too.
    for (size_t i = 0; i < text.size();) {
        const Utf8Step step = utf8_step(text, i);
        if (!step.valid)
            throw InputError("tokenizer: text to encode is not valid UTF-8 (byte " +
                             std::to_string(i) + ")");
        i += step.length;
    }

    // Added tokens first: not-normalized ones, then normalized ones in what is left.
    std::vector<std::pair<std::string, int>> first, pieces;
    split_added_tokens(text, impl.added_not_normalized, first);
    for (auto& [piece, id] : first) {
        if (id >= 0) {
            pieces.emplace_back(std::move(piece), id);
        } else {
            split_added_tokens(piece, impl.added_normalized, pieces);
        }
    }

    std::vector<int> ids;
    for (const auto& [piece, id] : pieces) {
        if (id >= 0) {
            ids.push_back(id);
            continue;
        }
        for (const std::string& word : impl.pre_tokenize(piece)) {
            const std::vector<int> word_ids = impl.bpe_cached(word);
            ids.insert(ids.end(), word_ids.begin(), word_ids.end());
        }
    }
    return ids;
}

std::string Tokenizer::decode(const std::vector<int>& ids, bool skip_special_tokens) const {
    const Impl& impl = *impl_;
    std::string bytes;
    for (int id : ids) {
        if (id < 0 || id >= vocab_size() || !impl.present[id])
            throw InputError(
                impl.path + ": the model produced token id " + std::to_string(id) +
                ", which this tokenizer does not have (a tokenizer of another model?)");
        if (skip_special_tokens && impl.special[id]) continue;
        bytes += impl.id_bytes[id];
    }
    return utf8_lossy(bytes);
}

int Tokenizer::token_to_id(const std::string& token) const {
    const auto added = impl_->added_ids.find(token);
    if (added != impl_->added_ids.end()) return added->second;
    const auto model = impl_->vocab.find(token);
    if (model != impl_->vocab.end()) return model->second;
    throw InputError(impl_->path + ": token " + json(token).dump() + " is not in the vocabulary");
}

bool Tokenizer::has_token(const std::string& token) const {
    return impl_->added_ids.count(token) || impl_->vocab.count(token);
}

bool Tokenizer::is_special(int id) const {
    return id >= 0 && id < vocab_size() && impl_->special[id];
}

int Tokenizer::vocab_size() const { return static_cast<int>(impl_->id_bytes.size()); }

}  // namespace glmasr
