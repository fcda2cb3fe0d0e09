// config.cpp — ModelConfig from a Hugging Face GLM-ASR config.json (GlmAsrConfig with a
// GlmAsrEncoderConfig "audio_config" and a LlamaConfig "text_config").
//
// Missing keys take transformers' defaults (for text_config: GlmAsrConfig's Nano defaults).
// Values this engine does not implement (another activation, RoPE scaling, biases in the
// decoder) are refused with the key's name, never silently ignored.
#include "glmasr/config.h"

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "glmasr/error.h"

namespace glmasr {

namespace {

using json = nlohmann::json;

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
                if (!v.is_number_integer()) fail(name, "expected an integer, got " + v.dump());
            } else if constexpr (std::is_floating_point_v<T>) {
                if (!v.is_number()) fail(name, "expected a number, got " + v.dump());
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
        if (v != expected) fail(section + "." + key, "'" + v + "' is not supported (only '" + expected + "')");
    }

    void require_false(const json& obj, const std::string& section, const char* key) const {
        if (get<bool>(obj, section, key, false)) fail(section + "." + key, "true is not supported");
    }

    // rope_parameters (transformers ≥ 5) or the older top-level keys.
    void read_rope(const json& obj, const std::string& section, float* theta, float* partial) const {
        if (obj.contains("rope_scaling") && !obj["rope_scaling"].is_null())
            fail(section + ".rope_scaling", "RoPE scaling is not supported");
        *theta = get<float>(obj, section, "rope_theta", *theta);
        if (partial) *partial = get<float>(obj, section, "partial_rotary_factor", *partial);
        if (obj.contains("rope_parameters") && !obj["rope_parameters"].is_null()) {
            const json& rope = obj["rope_parameters"];
            if (!rope.is_object()) fail(section + ".rope_parameters", "expected an object");
            const std::string sub = section + ".rope_parameters";
            require_value(rope, sub, "rope_type", "default");
            *theta = get<float>(rope, sub, "rope_theta", *theta);
            if (partial) *partial = get<float>(rope, sub, "partial_rotary_factor", *partial);
        }
    }
};

}  // namespace

ModelConfig ModelConfig::nano() { return ModelConfig{}; }

ModelConfig ModelConfig::load(const std::string& path) {
    std::ifstream in(path);
    if (!in) throw InputError(path + ": cannot open config.json");
    json root;
    try {
        root = json::parse(in);
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
    e.hidden_size = r.get<int>(a, "audio_config", "hidden_size", e.hidden_size);
    e.intermediate_size = r.get<int>(a, "audio_config", "intermediate_size", e.intermediate_size);
    e.num_layers = r.get<int>(a, "audio_config", "num_hidden_layers", e.num_layers);
    e.num_heads = r.get<int>(a, "audio_config", "num_attention_heads", e.num_heads);
    e.num_kv_heads = r.get<int>(a, "audio_config", "num_key_value_heads", e.num_heads);
    e.head_dim = e.num_heads > 0 ? e.hidden_size / e.num_heads : 0;
    e.head_dim = r.get<int>(a, "audio_config", "head_dim", e.head_dim);
    e.num_mel_bins = r.get<int>(a, "audio_config", "num_mel_bins", e.num_mel_bins);
    e.max_positions = r.get<int>(a, "audio_config", "max_position_embeddings", e.max_positions);
    r.require_value(a, "audio_config", "hidden_act", "gelu");
    r.read_rope(a, "audio_config", &e.rope_theta, &e.partial_rotary_factor);

    const json& t = root["text_config"];
    DecoderConfig& d = c.text;
    d.vocab_size = r.get<int>(t, "text_config", "vocab_size", d.vocab_size);
    d.hidden_size = r.get<int>(t, "text_config", "hidden_size", d.hidden_size);
    d.intermediate_size = r.get<int>(t, "text_config", "intermediate_size", d.intermediate_size);
    d.num_layers = r.get<int>(t, "text_config", "num_hidden_layers", d.num_layers);
    d.num_heads = r.get<int>(t, "text_config", "num_attention_heads", d.num_heads);
    d.num_kv_heads = r.get<int>(t, "text_config", "num_key_value_heads", d.num_kv_heads);
    d.head_dim = d.num_heads > 0 ? d.hidden_size / d.num_heads : 0;
    d.head_dim = r.get<int>(t, "text_config", "head_dim", d.head_dim);
    d.max_positions = r.get<int>(t, "text_config", "max_position_embeddings", d.max_positions);
    d.rms_norm_eps = r.get<float>(t, "text_config", "rms_norm_eps", d.rms_norm_eps);
    r.require_value(t, "text_config", "hidden_act", "silu");
    r.require_false(t, "text_config", "attention_bias");
    r.require_false(t, "text_config", "mlp_bias");
    r.read_rope(t, "text_config", &d.rope_theta, nullptr);
    if (t.contains("eos_token_id") && !t["eos_token_id"].is_null()) {
        const json& eos = t["eos_token_id"];
        d.eos_token_ids.clear();
        if (eos.is_number_integer()) d.eos_token_ids.push_back(eos.get<int>());
        else if (eos.is_array()) {
            for (const json& id : eos) {
                if (!id.is_number_integer()) r.fail("text_config.eos_token_id", "expected integers");
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
             {"audio_config.hidden_size", e.hidden_size}, {"audio_config.intermediate_size", e.intermediate_size},
             {"audio_config.num_hidden_layers", e.num_layers}, {"audio_config.num_attention_heads", e.num_heads},
             {"audio_config.num_key_value_heads", e.num_kv_heads}, {"audio_config.head_dim", e.head_dim},
             {"audio_config.num_mel_bins", e.num_mel_bins}, {"audio_config.max_position_embeddings", e.max_positions},
             {"text_config.vocab_size", d.vocab_size}, {"text_config.hidden_size", d.hidden_size},
             {"text_config.intermediate_size", d.intermediate_size}, {"text_config.num_hidden_layers", d.num_layers},
             {"text_config.num_attention_heads", d.num_heads}, {"text_config.num_key_value_heads", d.num_kv_heads},
             {"text_config.head_dim", d.head_dim}, {"text_config.max_position_embeddings", d.max_positions}})
        if (v <= 0) fail(std::string(name) + " must be positive");
    if (e.num_heads % e.num_kv_heads) fail("audio_config: num_attention_heads must be a multiple of num_key_value_heads");
    if (d.num_heads % d.num_kv_heads) fail("text_config: num_attention_heads must be a multiple of num_key_value_heads");
    const int rot = e.rotary_dim();
    if (rot <= 0 || rot % 2 || rot > e.head_dim)
        fail("audio_config: partial_rotary_factor gives a rotary dim of " + std::to_string(rot) +
             " (it must be even and at most head_dim " + std::to_string(e.head_dim) + ")");
    if (d.head_dim % 2) fail("text_config.head_dim must be even for RoPE");
    if (e.intermediate_size != merge_factor * e.hidden_size)
        fail("audio_config.intermediate_size (" + std::to_string(e.intermediate_size) +
             ") must be " + std::to_string(merge_factor) + " x hidden_size: the projector reads " +
             std::to_string(merge_factor) + " stacked encoder frames");
    if (audio_token_id < 0 || audio_token_id >= d.vocab_size) fail("audio_token_id is outside the vocabulary");
    for (int id : d.eos_token_ids)
        if (id < 0 || id >= d.vocab_size) fail("text_config.eos_token_id " + std::to_string(id) + " is outside the vocabulary");
    if (!(d.rms_norm_eps > 0) || !(e.layer_norm_eps > 0)) fail("norm epsilons must be positive");
    if (!(e.rope_theta > 0) || !(d.rope_theta > 0)) fail("rope_theta must be positive");
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
         {{"model_type", "glmasr_encoder"}, {"hidden_size", e.hidden_size},
          {"intermediate_size", e.intermediate_size}, {"num_hidden_layers", e.num_layers},
          {"num_attention_heads", e.num_heads}, {"num_key_value_heads", e.num_kv_heads},
          {"head_dim", e.head_dim}, {"num_mel_bins", e.num_mel_bins},
          {"max_position_embeddings", e.max_positions}, {"hidden_act", "gelu"},
          {"partial_rotary_factor", e.partial_rotary_factor},
          {"rope_parameters", {{"rope_theta", e.rope_theta}, {"rope_type", "default"},
                               {"partial_rotary_factor", e.partial_rotary_factor}}}}},
        {"text_config",
         {{"model_type", "llama"}, {"vocab_size", d.vocab_size}, {"hidden_size", d.hidden_size},
          {"intermediate_size", d.intermediate_size}, {"num_hidden_layers", d.num_layers},
          {"num_attention_heads", d.num_heads}, {"num_key_value_heads", d.num_kv_heads},
          {"head_dim", d.head_dim}, {"max_position_embeddings", d.max_positions},
          {"rms_norm_eps", d.rms_norm_eps}, {"hidden_act", "silu"}, {"attention_bias", false},
          {"mlp_bias", false}, {"eos_token_id", d.eos_token_ids},
          {"rope_parameters", {{"rope_theta", d.rope_theta}, {"rope_type", "default"}}}}}};
    return root.dump(2);
}

}  // namespace glmasr
