// config.cpp — ModelConfig from a Hugging Face GLM-ASR config.json (GlmAsrConfig with a
// GlmAsrEncoderConfig "audio_config" and a LlamaConfig "text_config").
//
// Missing keys take transformers' defaults (for text_config: GlmAsrConfig's Nano defaults).
// Values this engine does not implement (another activation, RoPE scaling, biases in the
// decoder) are refused with the key's name, never silently ignored.
#include "glmasr/config.h"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <tuple>

#include "glmasr/error.h"
#include "glmasr/json_limits.h"

namespace glmasr {

namespace {

using json = nlohmann::json;

// A float as JSON prints it best: the shortest decimal that reads back as the same float
// (1e-05, not 9.999999747378752e-06 as the widened double would print).
double tidy(float value) {
    char text[32];
    const auto [end, ec] = std::to_chars(text, text + sizeof text, value);
    return std::strtod(std::string(text, end).c_str(), nullptr);
}

struct Reader {
    const std::string& file;

    [[noreturn]] void fail(const std::string& key, const std::string& problem) const {
        throw InputError(file + ": " + key + ": " + problem);
    }

    template <class T>
    T get(const json& obj, const std::string& section, const char* key, T fallback) const {
        if (!obj.contains(key) || obj[key].is_null()) return fallback;
        const json& v = obj[key];
        const std::string name = section.empty() ? key : section + "." + key;
        try {
            if constexpr (std::is_same_v<T, bool>) {
                if (!v.is_boolean()) fail(name, "expected true or false");
            } else if constexpr (std::is_integral_v<T>) {
                // json's get<int>() silently truncates 64-bit values: check the range first.
                if (!v.is_number_integer()) fail(name, "expected an integer, got " + v.dump());
                const bool fits =
                    v.is_number_unsigned()
                        ? v.get<uint64_t>() <= uint64_t(std::numeric_limits<T>::max())
                        : v.get<int64_t>() >= int64_t(std::numeric_limits<T>::min()) &&
                              v.get<int64_t>() <= int64_t(std::numeric_limits<T>::max());
                if (!fits) fail(name, v.dump() + " is out of range");
            } else if constexpr (std::is_floating_point_v<T>) {
                if (!v.is_number()) fail(name, "expected a number, got " + v.dump());
                if (!std::isfinite(v.get<T>())) fail(name, v.dump() + " is out of range");
            } else {
                if (!v.is_string()) fail(name, "expected a string, got " + v.dump());
            }
            return v.get<T>();
        } catch (const json::exception& e) {
            fail(name, e.what());
        }
    }

    void require_value(const json& obj, const std::string& section, const char* key,
                       const std::string& expected) const {
        const std::string v = get<std::string>(obj, section, key, expected);
        if (v != expected)
            fail(section + "." + key, "'" + v + "' is not supported (only '" + expected + "')");
    }

    void require_false(const json& obj, const std::string& section, const char* key) const {
        if (get<bool>(obj, section, key, false)) fail(section + "." + key, "true is not supported");
    }

    // head_dim, or hidden_size / num_attention_heads as transformers derives it when the key is
    // absent; the derived form only makes sense when the heads split the width evenly.
    int head_dim(const json& obj, const std::string& section, int hidden, int heads) const {
        if (obj.contains("head_dim") && !obj["head_dim"].is_null())
            return get<int>(obj, section, "head_dim", 0);
        if (heads <= 0) return 0;  // validate() names the bad head count
        if (hidden % heads)
            fail(section + ".num_attention_heads",
                 std::to_string(heads) + " heads do not divide hidden_size " +
                     std::to_string(hidden) + " (and there is no head_dim)");
        return hidden / heads;
    }

    // A sub-config's model_type, when given, must name the architecture this engine implements.
    void require_model_type(const json& obj, const std::string& section,
                            const std::string& expected) const {
        const std::string v = get<std::string>(obj, section, "model_type", expected);
        if (v != expected)
            fail(section + ".model_type", "'" + v + "' is not supported (only '" + expected + "')");
    }

    // RoPE settings as transformers 5 resolves them: the dict is `rope_scaling` (transformers 4's
    // name) if given, else `rope_parameters`, else the section's default dict; a top-level
    // rope_theta / partial_rotary_factor only fills a key the dict lacks. GlmAsrConfig's default
    // text dict carries rope_theta 10000, so there a lone top-level rope_theta is NOT used by
    // transformers: a top-level value the dict overrides is refused here, not silently dropped.
    // Only plain ("default") RoPE is implemented; any scaling type is refused.
    void read_rope(const json& obj, const std::string& section, bool default_dict_has_theta,
                   float* theta, float* partial) const {
        std::string key = "rope_parameters";
        if (obj.contains("rope_scaling") && !obj["rope_scaling"].is_null() &&
            !obj["rope_scaling"].empty())
            key = "rope_scaling";
        std::string sub = section + "." + key;
        std::optional<float> dict_theta, dict_partial;
        if (obj.contains(key) && !obj[key].is_null()) {
            const json& rope = obj[key];
            if (!rope.is_object()) fail(sub, "expected an object");
            require_value(rope, sub, "rope_type", "default");
            require_value(rope, sub, "type", "default");  // transformers 4's name for rope_type
            if (rope.contains("rope_theta"))
                dict_theta = get<float>(rope, sub, "rope_theta", *theta);
            if (rope.contains("partial_rotary_factor"))
                dict_partial = get<float>(rope, sub, "partial_rotary_factor", *partial);
        } else if (default_dict_has_theta) {
            dict_theta = *theta;
            sub = "GlmAsrConfig's default " + sub;
        }
        auto resolve = [&](const char* name, const std::optional<float>& from_dict, float* value) {
            if (obj.contains(name) && !obj[name].is_null()) {
                const float top = get<float>(obj, section, name, *value);
                if (from_dict && *from_dict != top)
                    fail(section + "." + name,
                         json(tidy(top)).dump() + " contradicts " + sub + "." + name + " " +
                             json(tidy(*from_dict)).dump() +
                             ", which transformers uses (set it in rope_parameters)");
                *value = top;
            }
            if (from_dict) *value = *from_dict;
        };
        resolve("rope_theta", dict_theta, theta);
        resolve("partial_rotary_factor", dict_partial, partial);
    }
};

}  // namespace

ModelConfig ModelConfig::nano() { return ModelConfig{}; }

ModelConfig ModelConfig::load(const std::string& path) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        throw InputError(path + ": is a directory, not a config.json file");
    std::ifstream in(path);
    if (!in) throw InputError(path + ": cannot open (" + std::strerror(errno) + ")");
    json root;
    try {
        root = parse_json_limited(path, in);
    } catch (const json::exception& e) {
        throw InputError(path + ": not valid JSON (" + std::string(e.what()) + ")");
    }
    if (!root.is_object()) throw InputError(path + ": expected a JSON object");
    const Reader r{path};
    ModelConfig c;

    const std::string model_type = r.get<std::string>(root, "", "model_type", "glmasr");
    if (model_type != "glmasr")
        r.fail("model_type", "'" + model_type + "' is not a GLM-ASR config (expected 'glmasr')");
    for (const char* key : {"audio_config", "text_config"})
        if (!root.contains(key) || !root[key].is_object()) r.fail(key, "missing or not an object");
    c.audio_token_id = r.get<int>(root, "", "audio_token_id", c.audio_token_id);
    c.tie_word_embeddings = r.get<bool>(root, "", "tie_word_embeddings", c.tie_word_embeddings);
    r.require_value(root, "", "projector_hidden_act", "gelu");

    const json& a = root["audio_config"];
    EncoderConfig& e = c.audio;
    r.require_model_type(a, "audio_config", "glmasr_encoder");
    e.hidden_size = r.get<int>(a, "audio_config", "hidden_size", e.hidden_size);
    e.intermediate_size = r.get<int>(a, "audio_config", "intermediate_size", e.intermediate_size);
    e.num_layers = r.get<int>(a, "audio_config", "num_hidden_layers", e.num_layers);
    e.num_heads = r.get<int>(a, "audio_config", "num_attention_heads", e.num_heads);
    e.num_kv_heads = r.get<int>(a, "audio_config", "num_key_value_heads", e.num_heads);
    e.head_dim = r.head_dim(a, "audio_config", e.hidden_size, e.num_heads);
    e.num_mel_bins = r.get<int>(a, "audio_config", "num_mel_bins", e.num_mel_bins);
    e.max_positions = r.get<int>(a, "audio_config", "max_position_embeddings", e.max_positions);
    r.require_value(a, "audio_config", "hidden_act", "gelu");
    r.read_rope(a, "audio_config", false, &e.rope_theta, &e.partial_rotary_factor);

    const json& t = root["text_config"];
    DecoderConfig& d = c.text;
    r.require_model_type(t, "text_config", "llama");
    d.vocab_size = r.get<int>(t, "text_config", "vocab_size", d.vocab_size);
    d.hidden_size = r.get<int>(t, "text_config", "hidden_size", d.hidden_size);
    d.intermediate_size = r.get<int>(t, "text_config", "intermediate_size", d.intermediate_size);
    d.num_layers = r.get<int>(t, "text_config", "num_hidden_layers", d.num_layers);
    d.num_heads = r.get<int>(t, "text_config", "num_attention_heads", d.num_heads);
    d.num_kv_heads = r.get<int>(t, "text_config", "num_key_value_heads", d.num_kv_heads);
    d.head_dim = r.head_dim(t, "text_config", d.hidden_size, d.num_heads);
    d.max_positions = r.get<int>(t, "text_config", "max_position_embeddings", d.max_positions);
    d.rms_norm_eps = r.get<float>(t, "text_config", "rms_norm_eps", d.rms_norm_eps);
    r.require_value(t, "text_config", "hidden_act", "silu");
    r.require_false(t, "text_config", "attention_bias");
    r.require_false(t, "text_config", "mlp_bias");
    float text_rotary_factor = 1.0f;  // the decoder rotates every dim of a head (docs/model.md §5)
    r.read_rope(t, "text_config", true, &d.rope_theta, &text_rotary_factor);
    if (text_rotary_factor != 1.0f)
        r.fail("text_config.partial_rotary_factor",
               "only full rotary (1.0) is supported in the decoder");
    if (t.contains("eos_token_id") && !t["eos_token_id"].is_null()) {
        const json& eos = t["eos_token_id"];
        d.eos_token_ids.clear();
        if (eos.is_number_integer())
            d.eos_token_ids.push_back(r.get<int>(t, "text_config", "eos_token_id", 0));
        else if (eos.is_array()) {
            for (const json& id : eos) {
                if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
                    id.get<int64_t>() >= d.vocab_size)
                    r.fail("text_config.eos_token_id",
                           id.dump() + " is not a token id of the vocabulary");
                d.eos_token_ids.push_back(id.get<int>());
            }
        } else {
            r.fail("text_config.eos_token_id", "expected an integer or a list");
        }
    }
    c.validate(path);
    return c;
}

void ModelConfig::validate(const std::string& origin) const {
    auto fail = [&](const std::string& what) { throw InputError(origin + ": " + what); };
    const EncoderConfig& e = audio;
    const DecoderConfig& d = text;
    for (auto [name, v] : std::initializer_list<std::pair<const char*, int>>{
             {"audio_config.hidden_size", e.hidden_size},
             {"audio_config.intermediate_size", e.intermediate_size},
             {"audio_config.num_hidden_layers", e.num_layers},
             {"audio_config.num_attention_heads", e.num_heads},
             {"audio_config.num_key_value_heads", e.num_kv_heads},
             {"audio_config.head_dim", e.head_dim},
             {"audio_config.num_mel_bins", e.num_mel_bins},
             {"audio_config.max_position_embeddings", e.max_positions},
             {"text_config.vocab_size", d.vocab_size},
             {"text_config.hidden_size", d.hidden_size},
             {"text_config.intermediate_size", d.intermediate_size},
             {"text_config.num_hidden_layers", d.num_layers},
             {"text_config.num_attention_heads", d.num_heads},
             {"text_config.num_key_value_heads", d.num_kv_heads},
             {"text_config.head_dim", d.head_dim},
             {"text_config.max_position_embeddings", d.max_positions}})
        if (v <= 0) fail(std::string(name) + " must be positive");
    using L = ConfigLimits;
    for (auto [name, v, limit] : std::initializer_list<std::tuple<const char*, int, int>>{
             {"audio_config.hidden_size", e.hidden_size, L::kMaxWidth},
             {"audio_config.intermediate_size", e.intermediate_size, L::kMaxWidth},
             {"audio_config.num_hidden_layers", e.num_layers, L::kMaxLayers},
             {"audio_config.num_attention_heads", e.num_heads, L::kMaxHeads},
             {"audio_config.num_key_value_heads", e.num_kv_heads, L::kMaxHeads},
             {"audio_config.head_dim", e.head_dim, L::kMaxWidth},
             {"audio_config.num_mel_bins", e.num_mel_bins, L::kMaxWidth},
             {"audio_config.max_position_embeddings", e.max_positions, L::kMaxPositions},
             {"text_config.vocab_size", d.vocab_size, L::kMaxVocab},
             {"text_config.hidden_size", d.hidden_size, L::kMaxWidth},
             {"text_config.intermediate_size", d.intermediate_size, L::kMaxWidth},
             {"text_config.num_hidden_layers", d.num_layers, L::kMaxLayers},
             {"text_config.num_attention_heads", d.num_heads, L::kMaxHeads},
             {"text_config.num_key_value_heads", d.num_kv_heads, L::kMaxHeads},
             {"text_config.head_dim", d.head_dim, L::kMaxWidth},
             {"text_config.max_position_embeddings", d.max_positions, L::kMaxPositions}})
        if (v > limit)
            fail(std::string(name) + " " + std::to_string(v) + " exceeds this engine's limit of " +
                 std::to_string(limit));
    if (e.num_heads % e.num_kv_heads)
        fail("audio_config: num_attention_heads must be a multiple of num_key_value_heads");
    if (d.num_heads % d.num_kv_heads)
        fail("text_config: num_attention_heads must be a multiple of num_key_value_heads");
    const int rot = e.rotary_dim();
    if (rot <= 0 || rot % 2 || rot > e.head_dim)
        fail("audio_config: partial_rotary_factor gives a rotary dim of " + std::to_string(rot) +
             " (it must be even and at most head_dim " + std::to_string(e.head_dim) + ")");
    if (d.head_dim % 2) fail("text_config.head_dim must be even for RoPE");
    if (e.intermediate_size != merge_factor * e.hidden_size)
        fail("audio_config.intermediate_size (" + std::to_string(e.intermediate_size) +
             ") must be " + std::to_string(merge_factor) + " x hidden_size: the projector reads " +
             std::to_string(merge_factor) + " stacked encoder frames");
    if (audio_token_id < 0 || audio_token_id >= d.vocab_size)
        fail("audio_token_id is outside the vocabulary");
    for (int id : d.eos_token_ids)
        if (id < 0 || id >= d.vocab_size)
            fail("text_config.eos_token_id " + std::to_string(id) + " is outside the vocabulary");
    if (!(d.rms_norm_eps > 0)) fail("text_config.rms_norm_eps must be positive");
    if (!(e.layer_norm_eps > 0)) fail("audio_config.layer_norm_eps must be positive");
    if (!(d.rope_theta > 0)) fail("text_config's rope_theta must be positive");
    if (!(e.rope_theta > 0)) fail("audio_config's rope_theta must be positive");
}

std::string ModelConfig::to_json() const {
    const EncoderConfig& e = audio;
    const DecoderConfig& d = text;
    json root = {
        {"architectures", {"GlmAsrForConditionalGeneration"}},
        {"model_type", "glmasr"},
        {"audio_token_id", audio_token_id},
        {"projector_hidden_act", "gelu"},
        {"tie_word_embeddings", tie_word_embeddings},
        {"audio_config",
         {{"model_type", "glmasr_encoder"},
          {"hidden_size", e.hidden_size},
          {"intermediate_size", e.intermediate_size},
          {"num_hidden_layers", e.num_layers},
          {"num_attention_heads", e.num_heads},
          {"num_key_value_heads", e.num_kv_heads},
          {"head_dim", e.head_dim},
          {"num_mel_bins", e.num_mel_bins},
          {"max_position_embeddings", e.max_positions},
          {"hidden_act", "gelu"},
          {"partial_rotary_factor", tidy(e.partial_rotary_factor)},
          {"rope_parameters",
           {{"rope_theta", tidy(e.rope_theta)},
            {"rope_type", "default"},
            {"partial_rotary_factor", tidy(e.partial_rotary_factor)}}}}},
        {"text_config",
         {{"model_type", "llama"},
          {"vocab_size", d.vocab_size},
          {"hidden_size", d.hidden_size},
          {"intermediate_size", d.intermediate_size},
          {"num_hidden_layers", d.num_layers},
          {"num_attention_heads", d.num_heads},
          {"num_key_value_heads", d.num_kv_heads},
          {"head_dim", d.head_dim},
          {"max_position_embeddings", d.max_positions},
          {"rms_norm_eps", tidy(d.rms_norm_eps)},
          {"hidden_act", "silu"},
          {"attention_bias", false},
          {"mlp_bias", false},
          {"eos_token_id", d.eos_token_ids},
          {"rope_parameters", {{"rope_theta", tidy(d.rope_theta)}, {"rope_type", "default"}}}}}};
    return root.dump(2);
}

}  // namespace glmasr
