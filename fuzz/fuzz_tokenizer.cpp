// fuzz_tokenizer.cpp — libFuzzer harness for tokenizer.json (driver/src/tokenizer.cpp): any
// bytes as a tokenizer file through glmasr::Tokenizer::load, i.e. the JSON parse, the BPE model
// (vocab, merges), added tokens, the pre-tokenizer's regexes (PCRE2) and the decoder section.
//
// Run by `make fuzz` (docs/testing.md). A tokenizer that loads is then used as the driver uses
// one: encoding the prompt must give ids inside its vocabulary, and decoding them must work.
#include "fuzz_input.h"
#include "glmasr/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static fuzz::MemFile file;
    const std::string& path = file.write(data, size);
    fuzz::expect_only_input_errors([&] {
        const glmasr::Tokenizer tok = glmasr::Tokenizer::load(path);
        const std::vector<int> ids = tok.encode(
            "<|user|>\nPlease transcribe this audio into text<|assistant|>\nHello, world! 123");
        for (int id : ids)
            if (id < 0 || id >= tok.vocab_size())
                fuzz::finding("encode gave id " + std::to_string(id) + " outside [0, " +
                              std::to_string(tok.vocab_size()) + ")");
        tok.decode(ids, /*skip_special_tokens=*/false);
        tok.decode(ids, /*skip_special_tokens=*/true);
    });
    return 0;
}
