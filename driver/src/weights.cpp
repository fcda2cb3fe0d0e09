// weights.cpp — every GLM-ASR tensor, loaded from a checkpoint or drawn at random, into one
// allocation on the track's device.
//
// One table (`layout`) lists each tensor's Hugging Face name, its shape as config.json implies
// it, the dtype the consuming op wants and the ModelWeights field it fills. Loading and random
// initialisation both walk that table, so the two can never disagree about the model.
#include "glmasr/weights.h"

#include <cmath>
#include <map>

#include "glmasr/error.h"
#include "glmasr/safetensors.h"

namespace glmasr {

namespace {

struct Slot {
    std::string name;             // canonical (Hub) name
    std::vector<int64_t> shape;
    DType dtype;                  // storage dtype on the device
    Tensor* field;
    enum Init { kMatrix, kOnes, kZeros } init;
};

std::vector<Slot> layout(const ModelConfig& c, const OpTable& table, ModelWeights& w) {
    const EncoderConfig& e = c.audio;
    const DecoderConfig& d = c.text;
    const DType lin = table.weight_dtype(OpId::linear);
    const DType conv = table.weight_dtype(OpId::conv1d);
    const DType emb = table.weight_dtype(OpId::embedding);
    const int64_t De = e.hidden_size, Fe = e.intermediate_size, qe = int64_t(e.num_heads) * e.head_dim,
                  kve = int64_t(e.num_kv_heads) * e.head_dim;
    const int64_t Dt = d.hidden_size, Ft = d.intermediate_size, qd = int64_t(d.num_heads) * d.head_dim,
                  kvd = int64_t(d.num_kv_heads) * d.head_dim, V = d.vocab_size;
    std::vector<Slot> s;
    auto add = [&](std::string name, std::vector<int64_t> shape, DType dtype, Tensor* field, Slot::Init init) {
        s.push_back({std::move(name), std::move(shape), dtype, field, init});
    };
    auto vec = [&](const std::string& name, int64_t n, Tensor* field, Slot::Init init) {
        add(name, {n}, DType::F32, field, init);
    };

    add("audio_tower.conv1.weight", {De, e.num_mel_bins, 3}, conv, &w.conv1_w, Slot::kMatrix);
    vec("audio_tower.conv1.bias", De, &w.conv1_b, Slot::kZeros);
    add("audio_tower.conv2.weight", {De, De, 3}, conv, &w.conv2_w, Slot::kMatrix);
    vec("audio_tower.conv2.bias", De, &w.conv2_b, Slot::kZeros);
    w.encoder.assign(e.num_layers, {});
    for (int l = 0; l < e.num_layers; ++l) {
        EncoderLayerWeights& L = w.encoder[l];
        const std::string p = "audio_tower.layers." + std::to_string(l) + ".";
        vec(p + "input_layernorm.weight", De, &L.ln1_w, Slot::kOnes);
        vec(p + "input_layernorm.bias", De, &L.ln1_b, Slot::kZeros);
        add(p + "self_attn.q_proj.weight", {qe, De}, lin, &L.q_w, Slot::kMatrix);
        vec(p + "self_attn.q_proj.bias", qe, &L.q_b, Slot::kZeros);
        add(p + "self_attn.k_proj.weight", {kve, De}, lin, &L.k_w, Slot::kMatrix);
        add(p + "self_attn.v_proj.weight", {kve, De}, lin, &L.v_w, Slot::kMatrix);
        vec(p + "self_attn.v_proj.bias", kve, &L.v_b, Slot::kZeros);
        add(p + "self_attn.o_proj.weight", {De, qe}, lin, &L.o_w, Slot::kMatrix);
        vec(p + "self_attn.o_proj.bias", De, &L.o_b, Slot::kZeros);
        vec(p + "post_attention_layernorm.weight", De, &L.ln2_w, Slot::kOnes);
        vec(p + "post_attention_layernorm.bias", De, &L.ln2_b, Slot::kZeros);
        add(p + "mlp.fc1.weight", {Fe, De}, lin, &L.fc1_w, Slot::kMatrix);
        vec(p + "mlp.fc1.bias", Fe, &L.fc1_b, Slot::kZeros);
        add(p + "mlp.fc2.weight", {De, Fe}, lin, &L.fc2_w, Slot::kMatrix);
        vec(p + "mlp.fc2.bias", De, &L.fc2_b, Slot::kZeros);
    }
    vec("audio_tower.norm.weight", De, &w.enc_norm_w, Slot::kOnes);
    vec("audio_tower.norm.bias", De, &w.enc_norm_b, Slot::kZeros);
    add("multi_modal_projector.linear_1.weight", {c.projector_hidden(), c.projector_input()}, lin,
        &w.proj1_w, Slot::kMatrix);
    vec("multi_modal_projector.linear_1.bias", c.projector_hidden(), &w.proj1_b, Slot::kZeros);
    add("multi_modal_projector.linear_2.weight", {Dt, c.projector_hidden()}, lin, &w.proj2_w, Slot::kMatrix);
    vec("multi_modal_projector.linear_2.bias", Dt, &w.proj2_b, Slot::kZeros);
    add("language_model.model.embed_tokens.weight", {V, Dt}, emb, &w.embed, Slot::kMatrix);
    w.decoder.assign(d.num_layers, {});
    for (int l = 0; l < d.num_layers; ++l) {
        DecoderLayerWeights& L = w.decoder[l];
        const std::string p = "language_model.model.layers." + std::to_string(l) + ".";
        vec(p + "input_layernorm.weight", Dt, &L.norm1_w, Slot::kOnes);
        add(p + "self_attn.q_proj.weight", {qd, Dt}, lin, &L.q_w, Slot::kMatrix);
        add(p + "self_attn.k_proj.weight", {kvd, Dt}, lin, &L.k_w, Slot::kMatrix);
        add(p + "self_attn.v_proj.weight", {kvd, Dt}, lin, &L.v_w, Slot::kMatrix);
        add(p + "self_attn.o_proj.weight", {Dt, qd}, lin, &L.o_w, Slot::kMatrix);
        vec(p + "post_attention_layernorm.weight", Dt, &L.norm2_w, Slot::kOnes);
        add(p + "mlp.gate_proj.weight", {Ft, Dt}, lin, &L.gate_w, Slot::kMatrix);
        add(p + "mlp.up_proj.weight", {Ft, Dt}, lin, &L.up_w, Slot::kMatrix);
        add(p + "mlp.down_proj.weight", {Dt, Ft}, lin, &L.down_w, Slot::kMatrix);
    }
    vec("language_model.model.norm.weight", Dt, &w.final_norm_w, Slot::kOnes);
    return s;
}

// Names as re-saved checkpoints spell them (model-spec §7.2) → the Hub's canonical names.
std::string canonical_name(const std::string& n) {
    auto starts = [&](const char* p) { return n.rfind(p, 0) == 0; };
    if (starts("model.audio_tower.") || starts("model.multi_modal_projector.")) return n.substr(6);
    if (starts("lm_head.")) return "language_model." + n;
    if (starts("model.language_model.")) return "language_model.model." + n.substr(21);
    if (starts("language_model.model.model.")) return "language_model.model." + n.substr(28);
    return n;
}

// One device allocation holding every tensor, 256-byte aligned.
struct Arena {
    Backend& backend;
    std::shared_ptr<void> storage;
    char* base = nullptr;
    size_t used = 0;

    Arena(Backend& b, const std::vector<Slot>& slots, size_t extra_bytes) : backend(b) {
        size_t total = extra_bytes + 256;
        for (const Slot& s : slots) total += align(bytes_of(s));
        base = static_cast<char*>(backend.alloc(total));
        Backend* owner = &backend;
        storage = std::shared_ptr<void>(base, [owner](void* p) { owner->free(p); });
    }
    static size_t align(size_t n) { return (n + 255) / 256 * 256; }
    static size_t bytes_of(const Slot& s) {
        int64_t n = 1;
        for (int64_t d : s.shape) n *= d;
        return static_cast<size_t>(n) * dtype_size(s.dtype);
    }
    // Place `values` (f32 on the host) on the device in `dtype` and return the view.
    Tensor put(const std::vector<int64_t>& shape, DType dtype, const std::vector<float>& values,
               std::vector<uint16_t>& scratch) {
        Tensor t(base + used, dtype, backend.device(), {});
        for (int64_t d : shape) t.shape[t.ndim++] = d;
        const void* src = values.data();
        if (dtype == DType::BF16) {
            scratch.resize(values.size());
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < static_cast<int64_t>(values.size()); ++i) scratch[i] = f32_to_bf16(values[i]);
            src = scratch.data();
        } else if (dtype != DType::F32) {
            throw Error("weights: unsupported storage dtype " + std::string(dtype_name(dtype)));
        }
        backend.upload(t.data, src, t.bytes(), backend.stream());
        used += align(t.bytes());
        return t;
    }
};

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Deterministic N(0, std²) values, independent of the thread count: chunk c of tensor t is
// drawn from its own stream seeded by (seed, t, c).
void fill_normal(std::vector<float>& out, float stddev, uint64_t seed, uint64_t tensor_index) {
    constexpr int64_t kChunk = 1 << 16;
    const int64_t n = static_cast<int64_t>(out.size());
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < (n + kChunk - 1) / kChunk; ++c) {
        uint64_t state = seed * 0x100000001b3ull ^ (tensor_index << 32) ^ static_cast<uint64_t>(c);
        for (int64_t i = c * kChunk; i < std::min(n, (c + 1) * kChunk); i += 2) {
            const double u1 = (static_cast<double>(splitmix64(state) >> 11) + 0.5) * 0x1.0p-53;
            const double u2 = static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53;
            const double r = std::sqrt(-2.0 * std::log(u1));
            out[i] = static_cast<float>(stddev * r * std::cos(2 * M_PI * u2));
            if (i + 1 < n) out[i + 1] = static_cast<float>(stddev * r * std::sin(2 * M_PI * u2));
        }
    }
}

void finish(ModelWeights& w, const ModelConfig& c) {
    const auto [unique, stored] = count_parameters(c);
    w.unique_parameters = unique;
    w.stored_parameters = stored;
}

}  // namespace

std::pair<int64_t, int64_t> count_parameters(const ModelConfig& c) {
    const EncoderConfig& e = c.audio;
    const DecoderConfig& d = c.text;
    const int64_t De = e.hidden_size, Fe = e.intermediate_size, qe = int64_t(e.num_heads) * e.head_dim,
                  kve = int64_t(e.num_kv_heads) * e.head_dim;
    const int64_t Dt = d.hidden_size, Ft = d.intermediate_size, qd = int64_t(d.num_heads) * d.head_dim,
                  kvd = int64_t(d.num_kv_heads) * d.head_dim, V = d.vocab_size;
    const int64_t encoder_layer = 4 * De                       // two LayerNorms
                                  + qe * De + qe + kve * De    // q (bias), k (no bias)
                                  + kve * De + kve + De * qe + De  // v, o
                                  + Fe * De + Fe + De * Fe + De;   // fc1, fc2
    const int64_t encoder = De * e.num_mel_bins * 3 + De + De * De * 3 + De +
                            encoder_layer * e.num_layers + 2 * De;
    const int64_t projector = int64_t(c.projector_hidden()) * c.projector_input() + c.projector_hidden() +
                              Dt * c.projector_hidden() + Dt;
    const int64_t decoder_layer = 2 * Dt + qd * Dt + 2 * kvd * Dt + Dt * qd + 3 * Dt * Ft;
    const int64_t decoder = V * Dt + decoder_layer * d.num_layers + Dt;
    const int64_t unique = encoder + projector + decoder;
    return {unique, unique + V * Dt};
}

ModelWeights load_weights(const std::string& path, const ModelConfig& config, const OpTable& table,
                          Backend& backend) {
    const SafeTensorsFile file(path);
    std::map<std::string, std::string> by_canonical;  // canonical name → name in the file
    for (const std::string& name : file.names()) {
        const std::string canon = canonical_name(name);
        if (!by_canonical.emplace(canon, name).second)
            throw InputError(path + ": tensors '" + by_canonical[canon] + "' and '" + name +
                             "' are the same weight under two names");
    }
    auto file_name = [&](const std::string& canon) -> const std::string* {
        auto it = by_canonical.find(canon);
        return it == by_canonical.end() ? nullptr : &it->second;
    };

    ModelWeights w;
    std::vector<Slot> slots = layout(config, table, w);
    const DType head_dtype = table.weight_dtype(OpId::linear);
    const std::vector<int64_t> head_shape = {config.text.vocab_size, config.text.hidden_size};
    const std::string* head_name = file_name("language_model.lm_head.weight");
    w.lm_head_is_separate = head_name != nullptr;
    if (!head_name && !config.tie_word_embeddings)
        throw InputError(path + ": tensor 'language_model.lm_head.weight' is missing and config.json "
                         "does not tie it to the embeddings");
    // A separate lm_head, or a tied one stored in another dtype than the embedding table, needs
    // its own space; a tied head of the same dtype is a view of the embeddings.
    const bool own_head = head_name || head_dtype != table.weight_dtype(OpId::embedding);
    const size_t head_bytes = own_head ? Arena::align(size_t(head_shape[0]) * head_shape[1] * dtype_size(head_dtype)) : 0;

    for (const Slot& s : slots)
        if (!file_name(s.name)) throw InputError(path + ": tensor '" + s.name + "' is missing");
    Arena arena(backend, slots, head_bytes);
    std::vector<float> host;
    std::vector<uint16_t> scratch;
    for (const Slot& s : slots) {
        int64_t n = 1;
        for (int64_t d : s.shape) n *= d;
        host.resize(n);
        file.read_f32(*file_name(s.name), s.shape, host.data());
        *s.field = arena.put(s.shape, s.dtype, host, scratch);
        backend.synchronize(backend.stream());  // the staging buffers are reused next
    }
    if (own_head) {
        host.resize(head_shape[0] * head_shape[1]);
        file.read_f32(head_name ? *head_name : *file_name("language_model.model.embed_tokens.weight"),
                      head_shape, host.data());
        w.lm_head = arena.put(head_shape, head_dtype, host, scratch);
        backend.synchronize(backend.stream());
    } else {
        w.lm_head = w.embed;
    }
    w.unused_tensors = file.unused();
    w.storage = arena.storage;
    finish(w, config);
    return w;
}

ModelWeights random_weights(const ModelConfig& config, const OpTable& table, Backend& backend,
                            uint64_t seed) {
    ModelWeights w;
    std::vector<Slot> slots = layout(config, table, w);
    const DType head_dtype = table.weight_dtype(OpId::linear);
    const std::vector<int64_t> head_shape = {config.text.vocab_size, config.text.hidden_size};
    const bool own_head = !config.tie_word_embeddings || head_dtype != table.weight_dtype(OpId::embedding);
    const size_t head_bytes = own_head ? Arena::align(size_t(head_shape[0]) * head_shape[1] * dtype_size(head_dtype)) : 0;
    constexpr float kStd = 0.02f;  // transformers' initializer_range
    Arena arena(backend, slots, head_bytes);
    std::vector<float> host;
    std::vector<uint16_t> scratch;
    uint64_t index = 0, embed_index = 0;
    for (const Slot& s : slots) {
        if (s.field == &w.embed) embed_index = index;
        int64_t n = 1;
        for (int64_t d : s.shape) n *= d;
        host.assign(n, s.init == Slot::kOnes ? 1.0f : 0.0f);
        if (s.init == Slot::kMatrix) fill_normal(host, kStd, seed, index);
        ++index;
        *s.field = arena.put(s.shape, s.dtype, host, scratch);
        backend.synchronize(backend.stream());
    }
    if (own_head) {
        host.resize(head_shape[0] * head_shape[1]);
        // Tied: the same values as the embeddings (same seed stream); untied: a stream of its own.
        fill_normal(host, kStd, seed, config.tie_word_embeddings ? embed_index : index);
        w.lm_head = arena.put(head_shape, head_dtype, host, scratch);
        backend.synchronize(backend.stream());
    } else {
        w.lm_head = w.embed;
    }
    w.lm_head_is_separate = !config.tie_word_embeddings;
    w.storage = arena.storage;
    finish(w, config);
    return w;
}

}  // namespace glmasr
