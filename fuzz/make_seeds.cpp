// make_seeds.cpp — the fuzzers' seed corpora, made from the files the repository ships.
//
//   make_seeds SOURCE_DIR OUT_DIR     (`make fuzz` runs it; docs/testing.md)
//
// writes OUT_DIR/{audio,safetensors,config,tokenizer,bpe}/. Seeds are kept small (a few KB) so
// that they fit the fuzzers' -max_len and mutate fast, and they are made at run time so that no
// corpus is committed:
//   audio        the first 0.25 s of shipped clips, re-encoded by libsndfile into every
//                container and codec it writes here (WAV PCM/float/ADPCM/GSM, FLAC, AIFF, Ogg...)
//   safetensors  each shipped file's header alone, and the same tensors shrunk to shape [1, ..]
//   config       the shipped config.json files
//   tokenizer    the shipped tokenizer.json files
//   bpe          the test texts of tests/fixtures/tokenizer/cases.json and the clip transcripts
#include <sndfile.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <stdexcept>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error(path.string() + ": cannot open");
    return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_file(const fs::path& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

// One container/codec libsndfile can write, with the channel count and rate to declare.
struct AudioFormat {
    const char* name;
    int format;
    int channels;
    int rate;
};

void audio_seeds(const fs::path& src, const fs::path& out) {
    const AudioFormat formats[] = {
        {"wav16", SF_FORMAT_WAV | SF_FORMAT_PCM_16, 1, 16000},
        {"wav24_stereo", SF_FORMAT_WAV | SF_FORMAT_PCM_24, 2, 44100},
        {"wav32", SF_FORMAT_WAV | SF_FORMAT_PCM_32, 1, 22050},
        {"wav_float", SF_FORMAT_WAV | SF_FORMAT_FLOAT, 1, 16000},
        {"wav_double", SF_FORMAT_WAV | SF_FORMAT_DOUBLE, 2, 48000},
        {"wav_u8", SF_FORMAT_WAV | SF_FORMAT_PCM_U8, 1, 8000},
        {"wav_ulaw", SF_FORMAT_WAV | SF_FORMAT_ULAW, 1, 8000},
        {"wav_alaw", SF_FORMAT_WAV | SF_FORMAT_ALAW, 1, 8000},
        {"wav_ima_adpcm", SF_FORMAT_WAV | SF_FORMAT_IMA_ADPCM, 1, 16000},
        {"wav_ms_adpcm", SF_FORMAT_WAV | SF_FORMAT_MS_ADPCM, 2, 16000},
        {"wav_gsm", SF_FORMAT_WAV | SF_FORMAT_GSM610, 1, 8000},
        {"wavex", SF_FORMAT_WAVEX | SF_FORMAT_PCM_16, 2, 16000},
        {"rf64", SF_FORMAT_RF64 | SF_FORMAT_PCM_16, 1, 16000},
        {"w64", SF_FORMAT_W64 | SF_FORMAT_PCM_16, 1, 16000},
        {"flac16", SF_FORMAT_FLAC | SF_FORMAT_PCM_16, 1, 16000},
        {"flac24_stereo", SF_FORMAT_FLAC | SF_FORMAT_PCM_24, 2, 48000},
        {"aiff", SF_FORMAT_AIFF | SF_FORMAT_PCM_16, 1, 16000},
        {"au", SF_FORMAT_AU | SF_FORMAT_PCM_16, 1, 16000},
        {"caf_alac", SF_FORMAT_CAF | SF_FORMAT_ALAC_16, 1, 16000},
        {"ogg_vorbis", SF_FORMAT_OGG | SF_FORMAT_VORBIS, 1, 16000},
        {"ogg_opus", SF_FORMAT_OGG | SF_FORMAT_OPUS, 1, 16000},
    };
    SF_INFO info{};
    SNDFILE* in = sf_open(src.c_str(), SFM_READ, &info);
    if (!in) throw std::runtime_error(src.string() + ": " + sf_strerror(nullptr));
    std::vector<float> frames(4000 * static_cast<size_t>(info.channels));  // 0.25 s at 16 kHz
    const sf_count_t n = sf_readf_float(in, frames.data(), 4000);
    sf_close(in);
    std::vector<float> mono(static_cast<size_t>(n));
    for (sf_count_t i = 0; i < n; ++i) mono[i] = frames[i * info.channels];

    for (const AudioFormat& f : formats) {
        SF_INFO o{};
        o.format = f.format;
        o.channels = f.channels;
        o.samplerate = f.rate;
        const fs::path path = out / (src.stem().string() + "_" + f.name);
        SNDFILE* file = sf_format_check(&o) ? sf_open(path.c_str(), SFM_WRITE, &o) : nullptr;
        if (!file) {
            std::cerr << "make_seeds: libsndfile here cannot write " << f.name << ", skipped\n";
            continue;
        }
        std::vector<float> interleaved;
        for (float v : mono) interleaved.insert(interleaved.end(), f.channels, v);
        sf_writef_float(file, interleaved.data(), n);
        sf_close(file);
    }
}

// `src`'s header alone (name.header), and its tensors with every dimension 1 (name.small).
void safetensors_seeds(const fs::path& src, const fs::path& out, const std::string& name) {
    const std::string bytes = read_file(src);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);
    write_file(out / (name + ".header"), bytes.substr(0, 8 + header_len));

    json header = json::parse(bytes.substr(8, header_len));
    uint64_t offset = 0;
    for (auto& [key, entry] : header.items()) {
        if (key == "__metadata__") continue;
        const uint64_t size = entry["dtype"] == "F32" ? 4 : 2;
        entry["shape"] = std::vector<int64_t>(entry["shape"].size(), 1);
        entry["data_offsets"] = {offset, offset + size};
        offset += size;
    }
    std::string text = header.dump();
    std::string small(8, '\0');
    for (int i = 0; i < 8; ++i) small[i] = static_cast<char>(text.size() >> (8 * i));
    write_file(out / (name + ".small"), small + text + std::string(offset, '\x3c'));
}

}  // namespace

int main(int argc, char** argv) {
    if (argc != 3) {
        std::cerr << "usage: make_seeds SOURCE_DIR OUT_DIR\n";
        return 2;
    }
    const fs::path root = argv[1], out = argv[2];
    for (const char* dir : {"audio", "safetensors", "config", "tokenizer", "bpe"})
        fs::create_directories(out / dir);

    for (const char* clip : {"assets/audio/concord.wav", "assets/audio/clip_03.wav",
                             "tests/fixtures/features/chirp.wav"})
        audio_seeds(root / clip, out / "audio");

    safetensors_seeds(root / "assets/models/glm-asr-tiny/model.safetensors", out / "safetensors",
                      "tiny_model");
    for (const char* name : {"awkward", "mini_nano"}) {
        safetensors_seeds(root / "tests/fixtures/parity" / name / "model/model.safetensors",
                          out / "safetensors", std::string(name) + "_model");
        safetensors_seeds(root / "tests/fixtures/parity" / name / "expected.safetensors",
                          out / "safetensors", std::string(name) + "_expected");
    }
    safetensors_seeds(root / "tests/fixtures/features/features.safetensors", out / "safetensors",
                      "features");

    int n = 0;
    for (const char* config :
         {"assets/models/glm-asr-tiny/config.json", "tests/fixtures/configs/nano.json",
          "tests/fixtures/configs/small.json", "tests/fixtures/parity/awkward/model/config.json",
          "tests/fixtures/parity/mini_nano/model/config.json"})
        fs::copy_file(root / config, out / "config" / std::to_string(n++),
                      fs::copy_options::overwrite_existing);
    for (const char* tokenizer : {"assets/models/glm-asr-tiny/tokenizer.json",
                                  "tests/fixtures/tokenizer/glm_style/tokenizer.json",
                                  "tests/fixtures/tokenizer/gpt2_style/tokenizer.json"})
        fs::copy_file(root / tokenizer, out / "tokenizer" / std::to_string(n++),
                      fs::copy_options::overwrite_existing);

    const json cases = json::parse(read_file(root / "tests/fixtures/tokenizer/cases.json"));
    for (const auto& [style, tok] : cases["tokenizers"].items())
        for (const auto& c : tok["encode"])
            write_file(out / "bpe" / std::to_string(n++), c["text"].get<std::string>());
    std::ifstream tsv(root / "assets/audio/transcripts.tsv");
    for (std::string line; std::getline(tsv, line);)
        write_file(out / "bpe" / std::to_string(n++), line.substr(line.find('\t') + 1));
    return 0;
}
