// test_tokenizer.cpp — the C++ tokenizer reproduces Hugging Face `tokenizers` exactly.
//
// Fixtures (tests/fixtures/tokenizer/, made by tests/fixtures/tokenizer/make_test_tokenizer.py with HF tokenizers):
// two small byte-level BPE tokenizer.json files in GLM-ASR's layout (glm_style: GLM-4 Split regex
// + ByteLevel; gpt2_style: ByteLevel with GPT-2's regex, legacy "a b" merges, ignore_merges), and
// cases.json with HF's encode ids (add_special_tokens=False) and decode strings for each text,
// decode-only id lists that cut UTF-8 characters apart, and variants of glm_style that exercise
// every pre-tokenizer option the loader accepts. Bad files must fail with an InputError that
// names the file.
//
//   ./build/tests/test_tokenizer [--gtest_filter=TokenizerFixture.*]
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "glmasr/error.h"
#include "glmasr/tokenizer.h"

namespace fs = std::filesystem;
using glmasr::Tokenizer;
using nlohmann::json;

namespace {

fs::path source_dir() {
    const char* dir = std::getenv("GLMASR_SOURCE_DIR");
    return dir ? fs::path(dir) : fs::current_path();
}

fs::path fixture_dir() { return source_dir() / "tests/fixtures/tokenizer"; }

json read_json(const fs::path& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path.string());
    return json::parse(in);
}

const json& cases() {
    static const json all = read_json(fixture_dir() / "cases.json");
    return all;
}

std::string tokenizer_path(const std::string& style) {
    return (fixture_dir() / style / "tokenizer.json").string();
}

// A scratch file under the build's temp dir, removed with the test.
class TempFile {
public:
    explicit TempFile(const std::string& name)
        : path_(fs::temp_directory_path() /
                ("glmasr_test_tokenizer_" + std::to_string(::getpid()) + "_" + name)) {}
    ~TempFile() { fs::remove(path_); }
    std::string write(const std::string& text) const {
        std::ofstream(path_, std::ios::binary) << text;
        return path_.string();
    }
    std::string path() const { return path_.string(); }

private:
    fs::path path_;
};

std::string show_ids(const std::vector<int>& ids) { return json(ids).dump(); }

// Encode and decode one text and compare with what HF computed for it.
void check_encode_case(const Tokenizer& tok, const json& c) {
    const std::string text = c["text"];
    const std::vector<int> expected = c["ids"];
    const std::vector<int> ids = tok.encode(text);
    EXPECT_EQ(ids, expected) << "text " << json(text).dump() << "\n  got      " << show_ids(ids)
                             << "\n  expected " << show_ids(expected);
    EXPECT_EQ(tok.decode(expected, true), c["skip_special"].get<std::string>())
        << json(text).dump();
    EXPECT_EQ(tok.decode(expected, false), c["keep_special"].get<std::string>())
        << json(text).dump();
}

class TokenizerFixture : public testing::TestWithParam<std::string> {
protected:
    const json& spec() const { return cases()["tokenizers"][GetParam()]; }
};

TEST_P(TokenizerFixture, EncodeAndDecodeMatchHF) {
    const Tokenizer tok = Tokenizer::load(tokenizer_path(GetParam()));
    ASSERT_GE(spec()["encode"].size(), 40u);
    for (const json& c : spec()["encode"]) check_encode_case(tok, c);
}

TEST_P(TokenizerFixture, DecodeBrokenUtf8MatchesHF) {
    const Tokenizer tok = Tokenizer::load(tokenizer_path(GetParam()));
    for (const json& c : spec()["decode"]) {
        const std::vector<int> ids = c["ids"];
        EXPECT_EQ(tok.decode(ids, true), c["skip_special"].get<std::string>()) << show_ids(ids);
        EXPECT_EQ(tok.decode(ids, false), c["keep_special"].get<std::string>()) << show_ids(ids);
    }
}

TEST_P(TokenizerFixture, SpecialTokensAndVocab) {
    const Tokenizer tok = Tokenizer::load(tokenizer_path(GetParam()));
    EXPECT_EQ(tok.vocab_size(), spec()["vocab_size"].get<int>());
    const int base = spec()["base_vocab_size"];
    int index = 0;
    for (const json& entry : spec()["special_tokens"]) {  // [content, id] in GLM order
        const std::string content = entry[0];
        const int id = entry[1];
        EXPECT_EQ(id, base + index++) << content;  // the 18 special tokens follow the base vocab
        EXPECT_TRUE(tok.has_token(content)) << content;
        EXPECT_EQ(tok.token_to_id(content), id) << content;
        EXPECT_TRUE(tok.is_special(id)) << content;
    }
    EXPECT_EQ(index, 18);
    // Byte-level tokens sit at id = byte value, as in GLM-ASR ("\n" -> 10; "Ġ" is the space).
    EXPECT_EQ(tok.token_to_id("\xC4\x8A"), 10);
    EXPECT_EQ(tok.token_to_id("\xC4\xA0"), 32);
    EXPECT_EQ(tok.token_to_id("!"), 33);
    EXPECT_FALSE(tok.is_special(10));
    EXPECT_FALSE(tok.is_special(-1));
    EXPECT_FALSE(tok.is_special(tok.vocab_size()));
    EXPECT_FALSE(tok.has_token("no such token"));
    EXPECT_THROW(tok.token_to_id("no such token"), glmasr::InputError);
}

TEST_P(TokenizerFixture, DecodeUnknownIdThrows) {
    const Tokenizer tok = Tokenizer::load(tokenizer_path(GetParam()));
    for (int id : {-1, tok.vocab_size(), 1 << 30}) {
        try {
            tok.decode({33, id});
            ADD_FAILURE() << "decode accepted id " << id;
        } catch (const glmasr::Error& e) {
            EXPECT_NE(std::string(e.what()).find(std::to_string(id)), std::string::npos)
                << e.what();
        }
    }
}

TEST_P(TokenizerFixture, EncodeRejectsInvalidUtf8) {
    const Tokenizer tok = Tokenizer::load(tokenizer_path(GetParam()));
    EXPECT_THROW(tok.encode("caf\xC3"), glmasr::InputError);
    EXPECT_THROW(tok.encode("\xED\xA0\x80"), glmasr::InputError);  // a UTF-16 surrogate
}

TEST_P(TokenizerFixture, MovedTokenizerStillWorks) {
    Tokenizer tok = Tokenizer::load(tokenizer_path(GetParam()));
    const std::vector<int> ids = tok.encode("Please transcribe this audio into text");
    Tokenizer moved = std::move(tok);
    EXPECT_EQ(moved.encode("Please transcribe this audio into text"), ids);
}

INSTANTIATE_TEST_SUITE_P(Styles, TokenizerFixture, testing::Values("glm_style", "gpt2_style"),
                         [](const testing::TestParamInfo<std::string>& info) {
                             return info.param;
                         });

// The prompt: added tokens are cut out first and "\n" stays its own token (docs/model.md §6.2).
TEST(TokenizerPrompt, GlmAsrPromptLayout) {
    const Tokenizer tok = Tokenizer::load(tokenizer_path("glm_style"));
    const int user = tok.token_to_id("<|user|>"), pad = tok.token_to_id("<|pad|>");
    const int boa = tok.token_to_id("<|begin_of_audio|>"),
              eoa = tok.token_to_id("<|end_of_audio|>");
    const int assistant = tok.token_to_id("<|assistant|>");
    const std::vector<int> text_ids = tok.encode("Please transcribe this audio into text");
    std::vector<int> expected = {user, 10, boa, pad, pad, pad, eoa, user, 10};
    expected.insert(expected.end(), text_ids.begin(), text_ids.end());
    expected.insert(expected.end(), {assistant, 10});
    EXPECT_EQ(
        tok.encode("<|user|>\n<|begin_of_audio|><|pad|><|pad|><|pad|><|end_of_audio|><|user|>\n"
                   "Please transcribe this audio into text<|assistant|>\n"),
        expected);
}

// glm_style with another pre-tokenizer or extra added tokens, as the generator patched it.
TEST(TokenizerVariants, MatchHF) {
    const json base = read_json(tokenizer_path("glm_style"));
    const int first_extra_id = base["model"]["vocab"].size() + base["added_tokens"].size();
    ASSERT_GE(cases()["variants"].size(), 10u);
    for (const json& variant : cases()["variants"]) {
        const std::string name = variant["name"];
        SCOPED_TRACE(name);
        json spec = base;
        if (variant.contains("pre_tokenizer")) spec["pre_tokenizer"] = variant["pre_tokenizer"];
        if (variant.contains("extra_added_tokens")) {
            int id = first_extra_id;
            for (json token : variant["extra_added_tokens"]) {
                token["id"] = id++;
                spec["added_tokens"].push_back(token);
            }
        }
        TempFile file(name + ".json");
        const Tokenizer tok = Tokenizer::load(file.write(spec.dump()));
        for (const json& c : variant["encode"]) check_encode_case(tok, c);
    }
}

// ---------------------------------------------------------------------------------------------
// Bad files: each is an InputError whose message starts with the path.

void expect_input_error(const std::string& path, const std::string& needle) {
    try {
        Tokenizer::load(path);
        ADD_FAILURE() << "loaded " << path;
    } catch (const glmasr::InputError& e) {
        const std::string message = e.what();
        EXPECT_EQ(message.rfind(path + ": ", 0), 0u) << message;
        EXPECT_NE(message.find(needle), std::string::npos) << message;
        EXPECT_EQ(e.exit_code(), glmasr::kExitBadInput);
    }
}

TEST(TokenizerBadFiles, MissingEmptyNotJson) {
    TempFile missing("missing.json");
    expect_input_error(missing.path(), "cannot open");
    expect_input_error(fixture_dir().string(), "cannot open");  // a directory
    TempFile empty("empty.json");
    expect_input_error(empty.write(""), "not valid JSON");
    TempFile garbage("garbage.json");
    expect_input_error(garbage.write("{\"model\": {\"type\": \"BPE\""), "not valid JSON");
    TempFile array("array.json");
    expect_input_error(array.write("[1, 2, 3]"), "not a tokenizer.json object");
    TempFile no_model("no_model.json");
    expect_input_error(no_model.write("{\"version\": \"1.0\", \"normalizer\": null}"),
                       "no \"model\"");
}

// Each entry: how to break a copy of glm_style/tokenizer.json, and a word the error must contain.
struct Breakage {
    const char* name;
    void (*edit)(json&);
    const char* needle;
};

const Breakage kBreakages[] = {
    {"wordpiece", [](json& j) { j["model"]["type"] = "WordPiece"; }, "WordPiece"},
    {"model_not_object", [](json& j) { j["model"] = 3; }, "model"},
    {"normalizer_nfc",
     [](json& j) {
         j["normalizer"] = {{"type", "NFC"}};
     },
     "normalizer \"NFC\""},
    {"pre_tokenizer_whitespace",
     [](json& j) {
         j["pre_tokenizer"] = {{"type", "Whitespace"}};
     },
     "Whitespace"},
    {"pre_tokenizer_null", [](json& j) { j["pre_tokenizer"] = nullptr; }, "pre_tokenizer"},
    {"no_byte_level", [](json& j) { j["pre_tokenizer"] = j["pre_tokenizer"]["pretokenizers"][0]; },
     "ByteLevel"},
    {"bad_regex",
     [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "(unclosed"; },
     "regex"},
    {"bad_behavior",
     [](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Sideways"; }, "Sideways"},
    {"decoder_wordpiece",
     [](json& j) {
         j["decoder"] = {{"type", "WordPiece"}};
     },
     "decoder"},
    {"decoder_null", [](json& j) { j["decoder"] = nullptr; }, "decoder"},
    {"byte_fallback", [](json& j) { j["model"]["byte_fallback"] = true; }, "byte_fallback"},
    {"dropout", [](json& j) { j["model"]["dropout"] = 0.1; }, "dropout"},
    {"subword_prefix", [](json& j) { j["model"]["continuing_subword_prefix"] = "##"; },
     "continuing_subword_prefix"},
    {"no_vocab", [](json& j) { j["model"].erase("vocab"); }, "vocab"},
    {"missing_byte", [](json& j) { j["model"]["vocab"].erase("!"); }, "byte 33"},
    {"merge_unknown_token",
     [](json& j) {
         j["model"]["merges"][0] = {"x", "no-such-token"};
     },
     "merge 1"},
    {"merge_bad_legacy", [](json& j) { j["model"]["merges"][0] = "abc"; }, "merge 1"},
    {"lstrip", [](json& j) { j["added_tokens"][0]["lstrip"] = true; }, "lstrip"},
    {"added_id_mismatch", [](json& j) { j["added_tokens"][3]["id"] = 5; }, "would give it id"},
    {"truncation",
     [](json& j) {
         j["truncation"] = {{"max_length", 8}};
     },
     "truncation"},
    {"vocab_id_huge", [](json& j) { j["model"]["vocab"]["!"] = 2000000000; },
     "outside [0, 16777216]"},
    {"vocab_id_not_int", [](json& j) { j["model"]["vocab"]["!"] = "zero"; }, "not an integer"},
};

TEST(TokenizerBadFiles, UnsupportedOrBrokenContent) {
    const json base = read_json(tokenizer_path("glm_style"));
    for (const Breakage& b : kBreakages) {
        SCOPED_TRACE(b.name);
        json broken = base;
        b.edit(broken);
        TempFile file(std::string(b.name) + ".json");
        expect_input_error(file.write(broken.dump()), b.needle);
    }
}

}  // namespace
