// config.h — the model's shape, read from a Hugging Face GLM-ASR config.json.
//
// Every model fact the driver uses lives here, with the real GLM-ASR-Nano-2512 values as
// defaults (docs/model.md §3, §5). Smaller configs of the same architecture load the same way.
#pragma once

#include <string>
#include <vector>

namespace glmasr {

struct EncoderConfig {  // "audio_config"  (GlmAsrEncoderConfig)
    int hidden_size = 1280;
    int intermediate_size = 5120;  // also the projector's input width (4 stacked frames)
    int num_layers = 32;
    int num_heads = 20;
    int num_kv_heads = 20;
    int head_dim = 64;  // hidden_size / num_heads unless "head_dim" is given
    int num_mel_bins = 128;
    int max_positions = 1500;
    float partial_rotary_factor = 0.5f;
    float rope_theta = 10000.0f;
    float layer_norm_eps = 1e-5f;  // nn.LayerNorm default; the config has no key for it
    int rotary_dim() const { return static_cast<int>(head_dim * partial_rotary_factor); }
};

struct DecoderConfig {  // "text_config"  (LlamaConfig)
    int vocab_size = 59264;
    int hidden_size = 2048;
    int intermediate_size = 6144;
    int num_layers = 28;
    int num_heads = 16;
    int num_kv_heads = 4;
    int head_dim = 128;
    int max_positions = 8192;
    float rms_norm_eps = 1e-5f;
    float rope_theta = 10000.0f;
    std::vector<int> eos_token_ids = {59246, 59253, 59255};
};

// Upper limits on the sizes config.json may declare, checked by validate() before anything is
// allocated from them (a hostile num_hidden_layers of 2^31-1 must not reach operator new). Far
// above any GLM-ASR or Llama checkpoint (Nano: 32/28 layers, width 2048, 59264 tokens).
struct ConfigLimits {
    static constexpr int kMaxLayers = 1024;  // num_hidden_layers
    static constexpr int kMaxWidth =
        65536;  // hidden_size, intermediate_size, head_dim, num_mel_bins
    static constexpr int kMaxHeads = 1024;         // num_attention_heads, num_key_value_heads
    static constexpr int kMaxVocab = 1 << 24;      // vocab_size
    static constexpr int kMaxPositions = 1 << 20;  // max_position_embeddings
};

struct ModelConfig {
    EncoderConfig audio;
    DecoderConfig text;
    int audio_token_id = 59260;
    int merge_factor = 4;  // hard-coded in transformers' GlmAsr model and processor
    bool tie_word_embeddings = true;
    int projector_hidden() const { return 2 * text.hidden_size; }
    int projector_input() const { return audio.intermediate_size; }

    // The real GLM-ASR-Nano-2512 (the defaults above).
    static ModelConfig nano();
    // Parse and validate config.json; throws InputError naming the file and the key.
    static ModelConfig load(const std::string& path);
    // The same JSON layout transformers writes (used by tools and tests).
    std::string to_json() const;
    // Consistency checks (head sizes divide, merge width = intermediate_size, ...).
    void validate(const std::string& origin) const;
};

}  // namespace glmasr
