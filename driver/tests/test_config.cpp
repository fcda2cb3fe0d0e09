// test_config.cpp — config.json parsing: the real Nano config, a small one, transformers'
// defaults for missing keys, the JSON written back by to_json(), and one InputError naming the
// file and the key for every kind of bad or unsupported config.
//
// Fixtures: tests/fixtures/configs/nano.json (Nano-2512's config.json as docs/model.md §3.1
// and §5 document it) and small.json (the same architecture, tiny). Bad configs are variations
// of those, written to a scratch file by each test.
//
//   ./build/tests/test_config [--gtest_filter=ConfigBad.*]
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "glmasr/config.h"
#include "glmasr/error.h"

namespace fs = std::filesystem;
using glmasr::InputError;
using glmasr::ModelConfig;
using nlohmann::json;

namespace {

fs::path source_dir() {
    const char* dir = std::getenv("GLMASR_SOURCE_DIR");
    return dir ? fs::path(dir) : fs::current_path();
}

std::string fixture(const std::string& name) {
    return (source_dir() / "tests/fixtures/configs" / name).string();
}

json read_json(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot open " + path);
    return json::parse(in);
}

// A scratch config file for one test, removed with it.
class ScratchFile {
public:
    ScratchFile() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = (fs::temp_directory_path() / ("glmasr_test_config_" + std::to_string(::getpid()) +
                                              "_" + info->name() + ".json"))
                    .string();
    }
    ~ScratchFile() { fs::remove(path_); }
    const std::string& write(const std::string& text) const {
        std::ofstream(path_) << text;
        return path_;
    }
    const std::string& write_json(const json& j) const { return write(j.dump(2)); }

private:
    std::string path_;
};

void expect_same(const ModelConfig& a, const ModelConfig& b) {
    EXPECT_EQ(a.audio.hidden_size, b.audio.hidden_size);
    EXPECT_EQ(a.audio.intermediate_size, b.audio.intermediate_size);
    EXPECT_EQ(a.audio.num_layers, b.audio.num_layers);
    EXPECT_EQ(a.audio.num_heads, b.audio.num_heads);
    EXPECT_EQ(a.audio.num_kv_heads, b.audio.num_kv_heads);
    EXPECT_EQ(a.audio.head_dim, b.audio.head_dim);
    EXPECT_EQ(a.audio.num_mel_bins, b.audio.num_mel_bins);
    EXPECT_EQ(a.audio.max_positions, b.audio.max_positions);
    EXPECT_EQ(a.audio.partial_rotary_factor, b.audio.partial_rotary_factor);
    EXPECT_EQ(a.audio.rope_theta, b.audio.rope_theta);
    EXPECT_EQ(a.audio.layer_norm_eps, b.audio.layer_norm_eps);
    EXPECT_EQ(a.text.vocab_size, b.text.vocab_size);
    EXPECT_EQ(a.text.hidden_size, b.text.hidden_size);
    EXPECT_EQ(a.text.intermediate_size, b.text.intermediate_size);
    EXPECT_EQ(a.text.num_layers, b.text.num_layers);
    EXPECT_EQ(a.text.num_heads, b.text.num_heads);
    EXPECT_EQ(a.text.num_kv_heads, b.text.num_kv_heads);
    EXPECT_EQ(a.text.head_dim, b.text.head_dim);
    EXPECT_EQ(a.text.max_positions, b.text.max_positions);
    EXPECT_EQ(a.text.rms_norm_eps, b.text.rms_norm_eps);
    EXPECT_EQ(a.text.rope_theta, b.text.rope_theta);
    EXPECT_EQ(a.text.eos_token_ids, b.text.eos_token_ids);
    EXPECT_EQ(a.audio_token_id, b.audio_token_id);
    EXPECT_EQ(a.merge_factor, b.merge_factor);
    EXPECT_EQ(a.tie_word_embeddings, b.tie_word_embeddings);
}

// Loading `path` must fail with one line naming the file and containing `needle` (the key).
void expect_bad(const std::string& path, const std::string& needle) {
    try {
        ModelConfig::load(path);
        FAIL() << "accepted: " << path;
    } catch (const InputError& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
        EXPECT_NE(what.find(needle), std::string::npos) << "'" << needle << "' not in: " << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
}

// small.json with one edit applied, written to a scratch file, must fail naming `needle`.
void expect_bad_edit(const std::function<void(json&)>& edit, const std::string& needle) {
    json j = read_json(fixture("small.json"));
    edit(j);
    ScratchFile file;
    expect_bad(file.write_json(j), needle);
}

}  // namespace

// ------------------------------------------------------------------------------ good configs

TEST(Config, NanoJsonIsTheNano) {
    const ModelConfig c = ModelConfig::load(fixture("nano.json"));
    // docs/model.md §3.1
    EXPECT_EQ(c.audio.hidden_size, 1280);
    EXPECT_EQ(c.audio.intermediate_size, 5120);
    EXPECT_EQ(c.audio.num_layers, 32);
    EXPECT_EQ(c.audio.num_heads, 20);
    EXPECT_EQ(c.audio.num_kv_heads, 20);
    EXPECT_EQ(c.audio.head_dim, 64);
    EXPECT_EQ(c.audio.num_mel_bins, 128);
    EXPECT_EQ(c.audio.max_positions, 1500);
    EXPECT_EQ(c.audio.partial_rotary_factor, 0.5f);
    EXPECT_EQ(c.audio.rotary_dim(), 32);
    EXPECT_EQ(c.audio.rope_theta, 10000.0f);
    EXPECT_EQ(c.audio.layer_norm_eps, 1e-5f);
    // docs/model.md §4
    EXPECT_EQ(c.merge_factor, 4);
    EXPECT_EQ(c.projector_input(), 5120);
    EXPECT_EQ(c.projector_hidden(), 4096);
    // docs/model.md §5
    EXPECT_EQ(c.text.vocab_size, 59264);
    EXPECT_EQ(c.text.hidden_size, 2048);
    EXPECT_EQ(c.text.intermediate_size, 6144);
    EXPECT_EQ(c.text.num_layers, 28);
    EXPECT_EQ(c.text.num_heads, 16);
    EXPECT_EQ(c.text.num_kv_heads, 4);
    EXPECT_EQ(c.text.head_dim, 128);
    EXPECT_EQ(c.text.max_positions, 8192);
    EXPECT_EQ(c.text.rms_norm_eps, 1e-5f);
    EXPECT_EQ(c.text.rope_theta, 10000.0f);
    EXPECT_EQ(c.text.eos_token_ids, (std::vector<int>{59246, 59253, 59255}));
    EXPECT_EQ(c.audio_token_id, 59260);
    EXPECT_TRUE(c.tie_word_embeddings);  // no key in the file: GlmAsrConfig's default
    expect_same(c, ModelConfig::nano());
}

TEST(Config, NanoJsonHasTheHubFileLayout) {
    const json j = read_json(fixture("nano.json"));
    EXPECT_EQ(j["model_type"], "glmasr");
    EXPECT_EQ(j["architectures"], json::array({"GlmAsrForConditionalGeneration"}));
    EXPECT_EQ(j["dtype"], "bfloat16");
    EXPECT_FALSE(j.contains("tie_word_embeddings"));
    EXPECT_EQ(j["text_config"]["rope_parameters"]["rope_type"], "default");
    EXPECT_EQ(j["audio_config"]["rope_parameters"]["partial_rotary_factor"], 0.5);
}

TEST(Config, SmallConfig) {
    const ModelConfig c = ModelConfig::load(fixture("small.json"));
    EXPECT_EQ(c.audio.hidden_size, 32);
    EXPECT_EQ(c.audio.intermediate_size, 128);
    EXPECT_EQ(c.audio.num_layers, 2);
    EXPECT_EQ(c.audio.num_heads, 4);
    EXPECT_EQ(c.audio.num_kv_heads, 2);
    EXPECT_EQ(c.audio.head_dim, 8);  // 32 / 4: no head_dim key
    EXPECT_EQ(c.audio.rotary_dim(), 4);
    EXPECT_EQ(c.audio.num_mel_bins, 16);
    EXPECT_EQ(c.audio.rope_theta, 5000.0f);
    EXPECT_EQ(c.text.vocab_size, 96);
    EXPECT_EQ(c.text.hidden_size, 48);
    EXPECT_EQ(c.text.intermediate_size, 80);
    EXPECT_EQ(c.text.num_layers, 3);
    EXPECT_EQ(c.text.num_heads, 6);
    EXPECT_EQ(c.text.num_kv_heads, 2);
    EXPECT_EQ(c.text.head_dim, 8);  // 48 / 6
    EXPECT_EQ(c.text.max_positions, 256);
    EXPECT_EQ(c.text.rms_norm_eps, 1e-6f);
    EXPECT_EQ(c.text.rope_theta, 500000.0f);
    EXPECT_EQ(c.text.eos_token_ids, std::vector<int>{91});  // a single int
    EXPECT_EQ(c.audio_token_id, 90);
    EXPECT_FALSE(c.tie_word_embeddings);
    EXPECT_EQ(c.projector_input(), 128);
    EXPECT_EQ(c.projector_hidden(), 96);
}

TEST(Config, MissingKeysTakeTransformersDefaults) {
    // GlmAsrConfig merges the Nano's text defaults under text_config; GlmAsrEncoderConfig's own
    // defaults are the Nano's encoder.
    ScratchFile file;
    expect_same(ModelConfig::load(file.write(R"({"audio_config": {}, "text_config": {}})")),
                ModelConfig::nano());

    // Derived defaults: kv heads = heads (encoder), head_dim = hidden / heads.
    const ModelConfig c = ModelConfig::load(file.write(R"({
        "audio_config": {"hidden_size": 64, "intermediate_size": 256, "num_attention_heads": 2},
        "text_config": {"hidden_size": 256, "num_attention_heads": 8, "num_key_value_heads": 8}})"));
    EXPECT_EQ(c.audio.num_kv_heads, 2);
    EXPECT_EQ(c.audio.head_dim, 32);
    EXPECT_EQ(c.audio.partial_rotary_factor, 0.5f);
    EXPECT_EQ(c.audio.num_layers, 32);
    EXPECT_EQ(c.text.head_dim, 32);
    EXPECT_EQ(c.text.vocab_size, 59264);
    EXPECT_EQ(c.text.intermediate_size, 6144);
    EXPECT_EQ(c.text.eos_token_ids, (std::vector<int>{59246, 59253, 59255}));
}

TEST(Config, RopeKeysOfEitherTransformersVersion) {
    ScratchFile file;
    // transformers 4 style: top-level keys in the encoder (no default dict there).
    ModelConfig c = ModelConfig::load(file.write(R"({
        "audio_config": {"rope_theta": 20000.0, "partial_rotary_factor": 0.25},
        "text_config": {"rope_scaling": null, "rope_theta": 10000}})"));
    EXPECT_EQ(c.audio.rope_theta, 20000.0f);
    EXPECT_EQ(c.audio.rotary_dim(), 16);
    EXPECT_EQ(c.text.rope_theta, 10000.0f);
    // A dict without rope_theta takes the top-level value; "rope_scaling" (transformers 4's
    // name) is read like rope_parameters.
    c = ModelConfig::load(file.write(R"({
        "audio_config": {"rope_theta": 30000.0, "rope_parameters": {"rope_type": "default"}},
        "text_config": {"rope_scaling": {"type": "default", "rope_theta": 40000.0}}})"));
    EXPECT_EQ(c.audio.rope_theta, 30000.0f);
    EXPECT_EQ(c.audio.partial_rotary_factor, 0.5f);
    EXPECT_EQ(c.text.rope_theta, 40000.0f);
}

TEST(Config, ToJsonRoundTrips) {
    ScratchFile file;
    for (const char* name : {"nano.json", "small.json"}) {
        const ModelConfig c = ModelConfig::load(fixture(name));
        const std::string text = c.to_json();
        const json j = json::parse(text);
        EXPECT_EQ(j["model_type"], "glmasr") << name;
        EXPECT_EQ(j["architectures"], json::array({"GlmAsrForConditionalGeneration"})) << name;
        expect_same(ModelConfig::load(file.write(text)), c);
    }
    // Floats print as written (1e-05), not as their widened double.
    const json nano = json::parse(ModelConfig::nano().to_json());
    EXPECT_EQ(nano["text_config"]["rms_norm_eps"].dump(), "1e-05");
}

TEST(Config, ValidateAcceptsTheNano) { EXPECT_NO_THROW(ModelConfig::nano().validate("nano")); }

// ------------------------------------------------------------------------------ bad configs

TEST(ConfigBad, MissingFile) {
    const std::string path = (fs::temp_directory_path() / "glmasr_no_such_config.json").string();
    expect_bad(path, "cannot open");
}

TEST(ConfigBad, NotJson) {
    ScratchFile file;
    expect_bad(file.write("{ \"audio_config\": "), "not valid JSON");
    expect_bad(file.write(""), "not valid JSON");
}

TEST(ConfigBad, NotAnObject) {
    ScratchFile file;
    expect_bad(file.write("[1, 2]"), "JSON object");
}

TEST(ConfigBad, MissingSections) {
    expect_bad_edit([](json& j) { j.erase("audio_config"); }, "audio_config");
    expect_bad_edit([](json& j) { j["text_config"] = 3; }, "text_config");
}

TEST(ConfigBad, WrongTypes) {
    expect_bad_edit([](json& j) { j["audio_config"]["hidden_size"] = "32"; },
                    "audio_config.hidden_size");
    expect_bad_edit([](json& j) { j["text_config"]["num_hidden_layers"] = 2.5; },
                    "text_config.num_hidden_layers");
    expect_bad_edit([](json& j) { j["tie_word_embeddings"] = "yes"; }, "tie_word_embeddings");
    expect_bad_edit([](json& j) { j["text_config"]["rms_norm_eps"] = "small"; },
                    "text_config.rms_norm_eps");
    expect_bad_edit([](json& j) { j["text_config"]["eos_token_id"] = "</s>"; },
                    "text_config.eos_token_id");
    expect_bad_edit(
        [](json& j) {
            j["text_config"]["eos_token_id"] = json::array({1, "x"});
        },
        "text_config.eos_token_id");
    expect_bad_edit([](json& j) { j["audio_config"]["rope_parameters"] = "default"; },
                    "audio_config.rope_parameters");
}

TEST(ConfigBad, IntegerOutOfRange) {
    expect_bad_edit([](json& j) { j["text_config"]["vocab_size"] = 4294967396LL; },
                    "text_config.vocab_size");
    expect_bad_edit([](json& j) { j["text_config"]["rope_parameters"]["rope_theta"] = 1e300; },
                    "rope_theta");
}

TEST(ConfigBad, NonPositiveSizes) {
    expect_bad_edit([](json& j) { j["audio_config"]["num_hidden_layers"] = 0; },
                    "audio_config.num_hidden_layers");
    expect_bad_edit([](json& j) { j["text_config"]["vocab_size"] = -5; }, "text_config.vocab_size");
    expect_bad_edit([](json& j) { j["text_config"]["num_attention_heads"] = 0; },
                    "text_config.num_attention_heads");
}

TEST(ConfigBad, InconsistentHeads) {
    // 6 query heads cannot share 4 kv heads.
    expect_bad_edit([](json& j) { j["text_config"]["num_key_value_heads"] = 4; }, "text_config");
    expect_bad_edit([](json& j) { j["audio_config"]["num_key_value_heads"] = 3; }, "audio_config");
    // 5 heads do not split 48 wide, and there is no head_dim to say otherwise.
    expect_bad_edit([](json& j) { j["text_config"]["num_attention_heads"] = 5; },
                    "text_config.num_attention_heads");
    // An odd decoder head_dim cannot be rotated in pairs.
    expect_bad_edit([](json& j) { j["text_config"]["head_dim"] = 7; }, "text_config.head_dim");
}

TEST(ConfigBad, RotaryDimMustBeEvenAndFit) {
    // head_dim 8 · 0.25 = 2 is fine; · 0.375 = 3 is odd; · 1.5 = 12 > 8.
    expect_bad_edit(
        [](json& j) { j["audio_config"]["rope_parameters"]["partial_rotary_factor"] = 0.375; },
        "partial_rotary_factor");
    expect_bad_edit(
        [](json& j) { j["audio_config"]["rope_parameters"]["partial_rotary_factor"] = 1.5; },
        "partial_rotary_factor");
    expect_bad_edit([](json& j) { j["text_config"]["partial_rotary_factor"] = 0.5; },
                    "text_config.partial_rotary_factor");
}

TEST(ConfigBad, ProjectorWidthMustBeFourFrames) {
    expect_bad_edit([](json& j) { j["audio_config"]["intermediate_size"] = 96; },
                    "audio_config.intermediate_size");
}

TEST(ConfigBad, UnsupportedActivations) {
    expect_bad_edit([](json& j) { j["audio_config"]["hidden_act"] = "gelu_new"; },
                    "audio_config.hidden_act");
    expect_bad_edit([](json& j) { j["text_config"]["hidden_act"] = "gelu"; },
                    "text_config.hidden_act");
    expect_bad_edit([](json& j) { j["projector_hidden_act"] = "relu"; }, "projector_hidden_act");
}

TEST(ConfigBad, UnsupportedFeatures) {
    expect_bad_edit([](json& j) { j["text_config"]["attention_bias"] = true; },
                    "text_config.attention_bias");
    expect_bad_edit([](json& j) { j["text_config"]["mlp_bias"] = true; }, "text_config.mlp_bias");
    expect_bad_edit([](json& j) { j["text_config"]["rope_parameters"]["rope_type"] = "llama3"; },
                    "text_config.rope_parameters.rope_type");
    expect_bad_edit(
        [](json& j) {
            j["text_config"]["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
        },
        "text_config.rope_scaling.type");
    expect_bad_edit([](json& j) { j["text_config"]["model_type"] = "qwen2"; },
                    "text_config.model_type");
    expect_bad_edit([](json& j) { j["audio_config"]["model_type"] = "whisper"; },
                    "audio_config.model_type");
    expect_bad_edit([](json& j) { j["model_type"] = "llava"; }, "model_type");
}

TEST(ConfigBad, TopLevelRopeThetaThatTransformersWouldIgnore) {
    // GlmAsrConfig's text defaults carry rope_parameters {rope_theta: 10000}: transformers would
    // run with 10000 and drop this key, so it is refused rather than obeyed or ignored.
    expect_bad_edit(
        [](json& j) {
            j["text_config"].erase("rope_parameters");
            j["text_config"]["rope_theta"] = 500000.0;
        },
        "text_config.rope_theta");
    expect_bad_edit([](json& j) { j["audio_config"]["rope_theta"] = 7.0; },
                    "audio_config.rope_theta");
}

TEST(ConfigBad, TokenIdsOutsideTheVocabulary) {
    expect_bad_edit([](json& j) { j["audio_token_id"] = 96; }, "audio_token_id");
    expect_bad_edit([](json& j) { j["text_config"]["eos_token_id"] = 200; },
                    "text_config.eos_token_id");
    expect_bad_edit(
        [](json& j) {
            j["text_config"]["eos_token_id"] = json::array({1, -1});
        },
        "text_config.eos_token_id");
}
