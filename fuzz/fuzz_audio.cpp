// fuzz_audio.cpp — libFuzzer harness for the audio reader (driver/src/audio.cpp): any bytes as
// an audio file through glmasr::load_audio, i.e. libsndfile's format detection and codecs
// (WAV, FLAC, AIFF, Ogg, ...), the header checks, mixing to mono and libsoxr's resampling.
//
// Run by `make fuzz` (docs/testing.md); by hand: build-fuzz/fuzz/fuzz_audio CORPUS_DIR SEED_DIR.
// Bad audio must end as an InputError; an accepted clip must be finite 16 kHz samples.
#include <cmath>

#include "fuzz_input.h"
#include "glmasr/audio.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static fuzz::MemFile file;
    const std::string& path = file.write(data, size);
    fuzz::expect_only_input_errors([&] {
        const glmasr::AudioClip clip = glmasr::load_audio(path, 16000);
        if (clip.sample_rate != 16000)
            fuzz::finding("clip at " + std::to_string(clip.sample_rate) + " Hz");
        for (float v : clip.samples)
            if (!std::isfinite(v)) fuzz::finding("accepted clip holds a non-finite sample");
    });
    return 0;
}
