// weights.h — every tensor of GLM-ASR, as typed views into one allocation on the track's device.
//
// Names follow the Hugging Face checkpoint (docs/model.md §7.1). Matrix weights are stored in the
// dtype their consuming op's track wants (f32 or bf16); vectors (biases, norm weights) are f32.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "glmasr/config.h"
#include "glmasr/tensor.h"
#include "glmasr/track.h"

namespace glmasr {

struct EncoderLayerWeights {  // audio_tower.layers.N.
    Tensor ln1_w, ln1_b;      // input_layernorm           (D)
    Tensor q_w, q_b;          // self_attn.q_proj          (Hq·hd, D), (Hq·hd)
    Tensor k_w;               // self_attn.k_proj          (Hkv·hd, D)   no bias
    Tensor v_w, v_b;          // self_attn.v_proj          (Hkv·hd, D), (Hkv·hd)
    Tensor o_w, o_b;          // self_attn.o_proj          (D, Hq·hd), (D)
    Tensor ln2_w, ln2_b;      // post_attention_layernorm  (D)
    Tensor fc1_w, fc1_b;      // mlp.fc1                   (F, D), (F)
    Tensor fc2_w, fc2_b;      // mlp.fc2                   (D, F), (D)
};

struct DecoderLayerWeights {    // language_model.model.layers.N.
    Tensor norm1_w;             // input_layernorm           (D)
    Tensor q_w, k_w, v_w, o_w;  // self_attn.{q,k,v,o}_proj  (Hq·hd, D) (Hkv·hd, D) ×2 (D, Hq·hd)
    Tensor norm2_w;             // post_attention_layernorm  (D)
    Tensor gate_w, up_w, down_w;  // mlp.{gate,up,down}_proj   (F, D) ×2, (D, F)
};

struct ModelWeights {
    // audio_tower
    Tensor conv1_w, conv1_b;  // (De, n_mels, 3), (De)
    Tensor conv2_w, conv2_b;  // (De, De, 3), (De)
    std::vector<EncoderLayerWeights> encoder;
    Tensor enc_norm_w, enc_norm_b;  // audio_tower.norm (De)
    // multi_modal_projector
    Tensor proj1_w, proj1_b;  // linear_1 (2·Dt, 4·De), (2·Dt)
    Tensor proj2_w, proj2_b;  // linear_2 (Dt, 2·Dt), (Dt)
    // language_model
    Tensor embed;  // model.embed_tokens (V, Dt), embedding's dtype
    std::vector<DecoderLayerWeights> decoder;
    Tensor final_norm_w;  // model.norm (Dt)
    Tensor lm_head;       // lm_head (V, Dt), linear's dtype; may alias `embed`

    // Parameter counts as the checkpoint defines them (lm_head counted once if tied/identical).
    int64_t unique_parameters = 0;
    int64_t stored_parameters = 0;     // with a separate lm_head
    bool lm_head_is_separate = false;  // the checkpoint carries its own lm_head tensor

    std::vector<std::string> unused_tensors;  // in the file but not part of the model

    // Owns the device memory of every tensor above.
    std::shared_ptr<void> storage;
};

// Load and validate every tensor of `config` from a safetensors file or a shard index
// (Checkpoint; HF names in any layout of docs/model.md §7.2), converting to the dtypes `table`
// asks for. Throws InputError for a missing tensor, a shape that contradicts the config, or a
// bad file.
ModelWeights load_weights(const std::string& checkpoint_path, const ModelConfig& config,
                          const OpTable& table, Backend& backend);

// Seeded random weights of any config (normal, std 0.02; norm weights 1, biases 0), for
// timing without a checkpoint.
ModelWeights random_weights(const ModelConfig& config, const OpTable& table, Backend& backend,
                            uint64_t seed);

// The parameter count a config implies: {unique, with separate lm_head}.
std::pair<int64_t, int64_t> count_parameters(const ModelConfig& config);

}  // namespace glmasr
