// fuzz_bpe.cpp — libFuzzer harness for the BPE encoder (driver/src/tokenizer.cpp): any bytes as
// text through the shipped model's tokenizer (assets/models/glm-asr-tiny/tokenizer.json), i.e.
// the added-token split, the pre-tokenizer regex, the byte map and the merges.
//
// Run by `make fuzz` (docs/testing.md), from the repository root (GLMASR_SOURCE_DIR overrides).
// Text that is not UTF-8 must be an InputError. Byte-level BPE loses nothing, so valid text must
// come back unchanged from decode(encode(text)) with the special tokens kept (as in HF tokenizers).
#include <cstdlib>

#include "fuzz_input.h"
#include "glmasr/tokenizer.h"

static const glmasr::Tokenizer& shipped_tokenizer() {
    static const glmasr::Tokenizer tok = [] {
        const char* root = std::getenv("GLMASR_SOURCE_DIR");
        return glmasr::Tokenizer::load(std::string(root ? root : ".") +
                                       "/assets/models/glm-asr-tiny/tokenizer.json");
    }();
    return tok;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const glmasr::Tokenizer& tok = shipped_tokenizer();
    const std::string text(reinterpret_cast<const char*>(data), size);
    fuzz::expect_only_input_errors([&] {
        const std::vector<int> ids = tok.encode(text);
        for (int id : ids)
            if (id < 0 || id >= tok.vocab_size())
                fuzz::finding("encode gave id " + std::to_string(id));
        const std::string back = tok.decode(ids, /*skip_special_tokens=*/false);
        if (back != text) fuzz::finding("decode(encode(text)) differs from the text");
    });
    return 0;
}
