// tokenizer.h — Hugging Face `tokenizer.json`, byte-level BPE (the GPT-2 / GLM family).
//
// Encoding reproduces HF `tokenizers` for this family: added (special) tokens are split out
// first; the rest goes through the pre-tokenizer (Split regex and/or ByteLevel), the byte→unicode
// map, then BPE merges by rank. Decoding maps tokens back to bytes and assembles UTF-8, skipping
// special tokens on request. Unsupported tokenizer.json features are an InputError, never a
// silent approximation.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace glmasr {

class Tokenizer {
public:
    static Tokenizer load(const std::string& path);  // throws InputError
    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    // HF `tokenizer.encode(text, add_special_tokens=False)`.
    std::vector<int> encode(const std::string& text) const;
    // HF `tokenizer.decode(ids, skip_special_tokens=...)`; invalid UTF-8 becomes U+FFFD.
    std::string decode(const std::vector<int>& ids, bool skip_special_tokens = true) const;

    int token_to_id(const std::string& token) const;  // throws InputError if absent
    bool has_token(const std::string& token) const;
    bool is_special(int id) const;
    int vocab_size() const;  // largest id + 1, added tokens included

private:
    Tokenizer();
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace glmasr
