// weights.cpp — every tensor of GLM-ASR, from a checkpoint or drawn at random, into one
// allocation on the track's device.
//
// One table (`layout`) lists each tensor's Hugging Face name, its shape as config.json implies
// it, the dtype the consuming op wants and the ModelWeights field it fills. Loading and random
// initialisation both walk that table, so the two can never disagree about the model.
//
// Loading streams: the whole header is checked first (every tensor present, every shape as
// config.json implies), so a bad checkpoint fails before anything is allocated; then each
// tensor goes from the memory-mapped file to the device on its own, straight when the file
// already holds the dtype the track wants (bf16 Nano → bf16 track), otherwise converted
// (bf16/f16/f32 → f32 → storage dtype) in place in host memory, or through one reused staging
// buffer on the way to a GPU. The model never sits twice in host memory.
//
// Measured with the Nano's shapes on the H100 machine (16 cores): bf16 file → GPU bf16 3.8 s,
// → GPU f32 9.3 s (both bound by pageable host-to-device copies, about 1.2 GB/s), → host f32
// 0.8 s; random weights 3-4 s.
#include "glmasr/weights.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>

#include "glmasr/error.h"
#include "glmasr/checkpoint.h"

namespace glmasr {

namespace {

struct Slot {
    std::string name;  // canonical (Hub) name
    std::vector<int64_t> shape;
    DType dtype;  // storage dtype on the device
    Tensor* field;
    enum Init { kMatrix, kOnes, kZeros } init;  // for random weights
};

int64_t numel(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// docs/model.md §7.1, in the order transformers' state dict lists it. The lm_head is handled apart
// because it may be absent (tied) or share the embeddings' memory.
std::vector<Slot> layout(const ModelConfig& c, const OpTable& table, ModelWeights& w) {
    const EncoderConfig& e = c.audio;
    const DecoderConfig& d = c.text;
    const DType lin = table.weight_dtype(OpId::linear);
    const DType conv = table.weight_dtype(OpId::conv1d);
    const DType emb = table.weight_dtype(OpId::embedding);
    const int64_t De = e.hidden_size, Fe = e.intermediate_size,
                  qe = int64_t(e.num_heads) * e.head_dim,
                  kve = int64_t(e.num_kv_heads) * e.head_dim;
    const int64_t Dt = d.hidden_size, Ft = d.intermediate_size,
                  qd = int64_t(d.num_heads) * d.head_dim,
                  kvd = int64_t(d.num_kv_heads) * d.head_dim, V = d.vocab_size;
    std::vector<Slot> s;
    auto add = [&](std::string name, std::vector<int64_t> shape, DType dtype, Tensor* field,
                   Slot::Init init) {
        s.push_back({std::move(name), std::move(shape), dtype, field, init});
    };
    // Vectors (biases, norm weights) stay f32 on every track: they are tiny and every op reads
    // them in f32.
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
    add("multi_modal_projector.linear_2.weight", {Dt, c.projector_hidden()}, lin, &w.proj2_w,
        Slot::kMatrix);
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

const char* const kLmHead = "language_model.lm_head.weight";
const char* const kEmbed = "language_model.model.embed_tokens.weight";

// A name as a checkpoint spells it → the Hub's canonical name (docs/model.md §7.2). The layouts
// transformers 5.x reads or writes differ only in how many "model." they put around the parts:
//   the Hub's files             audio_tower.X  language_model.model.X        language_model.lm_head.weight
//   the in-memory state dict    model.audio_tower.X  model.language_model.X  lm_head.weight
//   save_pretrained (5.17)      audio_tower.X  language_model.model.model.X  language_model.lm_head.weight
// so an optional leading "model." is dropped, and inside the language model every "model."
// before the layer names collapses into one. Names of no known part come back unchanged (and
// end up unused); two names of one weight are refused by load_weights.
std::string canonical_name(const std::string& name) {
    auto starts = [](const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; };
    const std::string n = starts(name, "model.") ? name.substr(6) : name;
    if (starts(n, "audio_tower.") || starts(n, "multi_modal_projector.")) return n;
    if (starts(n, "lm_head.")) return "language_model." + n;
    if (starts(n, "language_model.")) {
        std::string rest = n.substr(15);
        while (starts(rest, "model.")) rest = rest.substr(6);
        return starts(rest, "lm_head.") ? "language_model." + rest : "language_model.model." + rest;
    }
    return name;
}

// The order in which the slots take their place in the arena: every matrix (two or more
// dimensions) in the table's order, then every vector. So the products a layer runs on one
// input lie back to back (wherever a matrix's bytes are a multiple of the arena's 256-byte
// alignment, as every GLM-ASR shape's are): the encoder's and the decoder's q, k and v
// projections form one (Hq·hd + 2·Hkv·hd, D) matrix, the decoder's gate and up one (2·F, D),
// which a track may run as a single product (the reference does: reference/linear.cu). Only
// placement changes: random weights are still drawn per table index.
std::vector<size_t> placement_order(const std::vector<Slot>& slots) {
    std::vector<size_t> order;
    for (bool matrices : {true, false})
        for (size_t i = 0; i < slots.size(); ++i)
            if ((slots[i].shape.size() >= 2) == matrices) order.push_back(i);
    return order;
}

// One device allocation holding every tensor, each at a 256-byte aligned offset (what cuBLAS
// and vector loads like; cudaMalloc itself returns 256-byte aligned memory).
struct Arena {
    static constexpr size_t kAlign = 256;
    Backend& backend;
    const bool on_host;  // host memory: convert in place, no staging copy
    std::shared_ptr<void> storage;
    char* base = nullptr;
    size_t capacity = 0;
    size_t used = 0;
    std::vector<float> staging;     // one tensor's f32 values on their way to the device
    std::vector<uint16_t> scratch;  // the same, converted to bf16

    Arena(Backend& b, size_t bytes)
        : backend(b), on_host(b.device() == Device::Host), capacity(bytes) {
        base = static_cast<char*>(backend.alloc(capacity));
        Backend* owner = &backend;
        storage = std::shared_ptr<void>(base, [owner](void* p) { owner->free(p); });
    }
    static size_t align(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
    static size_t bytes_of(const std::vector<int64_t>& shape, DType dtype) {
        return static_cast<size_t>(numel(shape)) * dtype_size(dtype);
    }

    // The next free region, as a view of `shape` in `dtype`.
    Tensor take(const std::vector<int64_t>& shape, DType dtype) {
        const size_t bytes = bytes_of(shape, dtype);
        if (used + bytes > capacity) throw Error("weights: arena overflow (layout bug)");
        Tensor t(base + used, dtype, backend.device(), {});
        for (int64_t d : shape) t.shape[t.ndim++] = d;
        used += align(bytes);
        return t;
    }

    // Bytes already in the storage dtype (e.g. bf16 straight from the mapped file). On the host
    // the copy runs in parallel blocks: one thread alone page-faults through a 4.5 GB mapping
    // at about 2 GB/s.
    void upload_raw(const Tensor& t, const void* host) {
        if (on_host) {
            constexpr int64_t kBlock = 1 << 20;
            const int64_t bytes = static_cast<int64_t>(t.bytes());
            char* dst = static_cast<char*>(t.data);
            const char* src = static_cast<const char*>(host);
#pragma omp parallel for schedule(static)
            for (int64_t b = 0; b < bytes; b += kBlock)
                std::memcpy(dst + b, src + b, std::min(kBlock, bytes - b));
            return;
        }
        backend.upload(t.data, host, t.bytes(), backend.stream());
        backend.synchronize(backend.stream());  // the source may be a reused staging buffer
    }

    // Fill `t` with the f32 values `produce(out)` writes (t.numel() of them), converted to t's
    // dtype. Host memory is written in place; device memory through the staging buffers.
    void put_f32(const Tensor& t, const std::function<void(float*)>& produce) {
        const int64_t n = t.numel();
        if (t.dtype == DType::F32) {
            if (on_host) return produce(static_cast<float*>(t.data));
            staging.resize(static_cast<size_t>(n));
            produce(staging.data());
            return upload_raw(t, staging.data());
        }
        if (t.dtype != DType::BF16)
            throw Error(std::string("weights: unsupported storage dtype ") + dtype_name(t.dtype));
        staging.resize(static_cast<size_t>(n));
        produce(staging.data());
        if (!on_host) scratch.resize(static_cast<size_t>(n));
        uint16_t* out = on_host ? static_cast<uint16_t*>(t.data) : scratch.data();
        const float* in = staging.data();
#pragma omp parallel for schedule(static)
        for (int64_t i = 0; i < n; ++i) out[i] = f32_to_bf16(in[i]);
        if (!on_host) upload_raw(t, out);
    }
};

// The first element of a tensor that is NaN or ±Inf (its exponent bits all ones), or -1. A
// checkpoint holding one would make every transcription garbage while exiting 0; the scan reads
// the mapped bytes as integers, in parallel, once per tensor (its cost on Nano's 4.5 GB is not
// measured yet).
int64_t first_non_finite(const SafeTensorEntry& e) {
    const int64_t n = e.numel();
    auto scan = [n](const auto* bits, auto exponent_mask) {
        int64_t first = n;
#pragma omp parallel for schedule(static) reduction(min : first)
        for (int64_t i = 0; i < n; ++i)
            if ((bits[i] & exponent_mask) == exponent_mask && i < first) first = i;
        return first == n ? int64_t{-1} : first;
    };
    switch (e.dtype) {
        case DType::F32: return scan(static_cast<const uint32_t*>(e.data), uint32_t{0x7f800000u});
        case DType::BF16: return scan(static_cast<const uint16_t*>(e.data), uint16_t{0x7f80u});
        case DType::F16: return scan(static_cast<const uint16_t*>(e.data), uint16_t{0x7c00u});
        case DType::I32: break;
    }
    return -1;
}

uint64_t splitmix64(uint64_t& state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Deterministic N(0, std²) values, independent of the thread count: chunk c of tensor t is
// drawn from its own splitmix64 stream, seeded by hashing (seed, t, c). Marsaglia's polar form
// of Box-Muller: no sin/cos, about twice as fast, which matters for the Nano's 2.26 B values.
void fill_normal(float* out, int64_t n, float stddev, uint64_t seed, uint64_t tensor_index) {
    constexpr int64_t kChunk = 1 << 16;
    constexpr float kInv23 = 1.0f / 8388608.0f;  // 24 random bits → a float in [-1, 1)
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < (n + kChunk - 1) / kChunk; ++c) {
        uint64_t state = seed;
        state = splitmix64(state) ^ tensor_index;
        state = splitmix64(state) ^ static_cast<uint64_t>(c);
        const int64_t end = std::min(n, (c + 1) * kChunk);
        for (int64_t i = c * kChunk; i < end;) {
            const uint64_t bits = splitmix64(state);
            const float u = static_cast<float>(bits >> 40) * kInv23 - 1.0f;
            const float v = static_cast<float>((bits >> 8) & 0xffffffu) * kInv23 - 1.0f;
            const float s = u * u + v * v;
            if (s >= 1.0f || s == 0.0f) continue;  // keep points inside the unit disc
            const float f = stddev * std::sqrt(-2.0f * std::log(s) / s);
            out[i++] = u * f;
            if (i < end) out[i++] = v * f;
        }
    }
}

void set_counts(ModelWeights& w, const ModelConfig& c) {
    const auto [unique, stored] = count_parameters(c);
    w.unique_parameters = unique;
    w.stored_parameters = stored;
}

}  // namespace

std::pair<int64_t, int64_t> count_parameters(const ModelConfig& c) {
    const EncoderConfig& e = c.audio;
    const DecoderConfig& d = c.text;
    const int64_t De = e.hidden_size, Fe = e.intermediate_size,
                  qe = int64_t(e.num_heads) * e.head_dim,
                  kve = int64_t(e.num_kv_heads) * e.head_dim;
    const int64_t Dt = d.hidden_size, Ft = d.intermediate_size,
                  qd = int64_t(d.num_heads) * d.head_dim,
                  kvd = int64_t(d.num_kv_heads) * d.head_dim, V = d.vocab_size;
    const int64_t encoder_layer = 4 * De                           // two LayerNorms
                                  + qe * De + qe + kve * De        // q (bias), k (no bias)
                                  + kve * De + kve + De * qe + De  // v, o
                                  + Fe * De + Fe + De * Fe + De;   // fc1, fc2
    const int64_t encoder =
        De * e.num_mel_bins * 3 + De + De * De * 3 + De + encoder_layer * e.num_layers + 2 * De;
    const int64_t projector = int64_t(c.projector_hidden()) * c.projector_input() +
                              c.projector_hidden() + Dt * c.projector_hidden() + Dt;
    const int64_t decoder_layer = 2 * Dt + qd * Dt + 2 * kvd * Dt + Dt * qd + 3 * Dt * Ft;
    const int64_t decoder = V * Dt + decoder_layer * d.num_layers + Dt;
    const int64_t unique = encoder + projector + decoder;
    return {unique, unique + V * Dt};
}

ModelWeights load_weights(const std::string& path, const ModelConfig& config, const OpTable& table,
                          Backend& backend) {
    const Checkpoint file(path);
    std::map<std::string, std::string> by_canonical;  // canonical name → name in the file
    bool original_layout = false;
    for (const std::string& name : file.names()) {
        const std::string canon = canonical_name(name);
        if (!by_canonical.emplace(canon, name).second)
            throw InputError(path + ": tensors '" + by_canonical[canon] + "' and '" + name +
                             "' are the same weight under two names");
        original_layout |= name.rfind("audio_encoder.", 0) == 0;
    }
    // The tensor a canonical name refers to, checked against the shape config.json implies.
    auto entry_for = [&](const std::string& canon, const std::vector<int64_t>& shape) {
        auto it = by_canonical.find(canon);
        if (it == by_canonical.end())
            throw InputError(path + ": tensor '" + canon + "' is missing" +
                             (original_layout ? " (this file has the original GLM-ASR layout, "
                                                "audio_encoder.*; use the current Hub revision)"
                                              : ""));
        const SafeTensorEntry* e = file.find(it->second);
        if (e->shape != shape)
            throw InputError(path + ": tensor '" + it->second + "' has shape " +
                             shape_text(e->shape) + ", config.json implies " + shape_text(shape));
        if (const int64_t bad = first_non_finite(*e); bad >= 0)
            throw InputError(path + ": tensor '" + it->second +
                             "' holds a non-finite value (NaN or "
                             "Inf) at element " +
                             std::to_string(bad));
        return e;
    };

    ModelWeights w;
    const std::vector<Slot> slots = layout(config, table, w);
    std::vector<const SafeTensorEntry*> entries;
    for (const Slot& s : slots) entries.push_back(entry_for(s.name, s.shape));

    // The lm_head: the file's own, or the embeddings when config.json ties them. It needs space
    // of its own unless it can share the embeddings' memory: same storage dtype, and either tied
    // or bitwise the same values (the Nano checkpoint stores an identical copy, docs/model.md §5).
    const std::vector<int64_t> head_shape = {config.text.vocab_size, config.text.hidden_size};
    const DType head_dtype = table.weight_dtype(OpId::linear);
    // The embeddings are one of the slots: their entry was found (and checked) above.
    const SafeTensorEntry* embed = nullptr;
    for (size_t i = 0; i < slots.size(); ++i)
        if (slots[i].name == kEmbed) embed = entries[i];
    const SafeTensorEntry* head = nullptr;
    if (by_canonical.count(kLmHead)) head = entry_for(kLmHead, head_shape);
    else if (!config.tie_word_embeddings)
        throw InputError(path + ": tensor '" + std::string(kLmHead) +
                         "' is missing and config.json does not tie it to the embeddings");
    w.lm_head_is_separate = head != nullptr;
    const bool share = head_dtype == table.weight_dtype(OpId::embedding) &&
                       (!head || (head->dtype == embed->dtype &&
                                  std::memcmp(head->data, embed->data, head->nbytes) == 0));

    size_t total = 0;
    for (const Slot& s : slots) total += Arena::align(Arena::bytes_of(s.shape, s.dtype));
    if (!share) total += Arena::align(Arena::bytes_of(head_shape, head_dtype));
    Arena arena(backend, total);

    auto load = [&](const SafeTensorEntry& e, const Tensor& t) {
        if (e.dtype == t.dtype) {
            arena.upload_raw(t, e.data);
            file.mark_used(e.name);
        } else {  // read_f32 marks it used
            arena.put_f32(t, [&](float* out) { file.read_f32(e.name, e.shape, out); });
        }
    };
    for (size_t i : placement_order(slots)) {
        *slots[i].field = arena.take(slots[i].shape, slots[i].dtype);
        load(*entries[i], *slots[i].field);
    }
    if (share) {
        w.lm_head = w.embed;
        if (head) file.mark_used(head->name);
    } else {
        w.lm_head = arena.take(head_shape, head_dtype);
        load(head ? *head : *embed, w.lm_head);
    }
    w.unused_tensors = file.unused();
    w.storage = arena.storage;
    set_counts(w, config);
    return w;
}

ModelWeights random_weights(const ModelConfig& config, const OpTable& table, Backend& backend,
                            uint64_t seed) {
    constexpr float kStd = 0.02f;  // transformers' initializer_range
    ModelWeights w;
    const std::vector<Slot> slots = layout(config, table, w);
    const std::vector<int64_t> head_shape = {config.text.vocab_size, config.text.hidden_size};
    const DType head_dtype = table.weight_dtype(OpId::linear);
    const bool share =
        config.tie_word_embeddings && head_dtype == table.weight_dtype(OpId::embedding);

    size_t total = 0;
    for (const Slot& s : slots) total += Arena::align(Arena::bytes_of(s.shape, s.dtype));
    if (!share) total += Arena::align(Arena::bytes_of(head_shape, head_dtype));
    Arena arena(backend, total);

    uint64_t embed_index = 0;
    for (size_t i : placement_order(slots)) {
        const Slot& s = slots[i];
        if (s.field == &w.embed) embed_index = i;
        const int64_t n = numel(s.shape);
        *s.field = arena.take(s.shape, s.dtype);
        arena.put_f32(*s.field, [&](float* out) {
            if (s.init == Slot::kMatrix) fill_normal(out, n, kStd, seed, i);
            else std::fill(out, out + n, s.init == Slot::kOnes ? 1.0f : 0.0f);
        });
    }
    if (share) {
        w.lm_head = w.embed;
    } else {
        // Tied: the embeddings' values again (their stream), in the linear dtype; untied: a
        // stream of its own.
        const uint64_t stream = config.tie_word_embeddings ? embed_index : slots.size();
        w.lm_head = arena.take(head_shape, head_dtype);
        arena.put_f32(w.lm_head,
                      [&](float* out) { fill_normal(out, numel(head_shape), kStd, seed, stream); });
    }
    w.lm_head_is_separate = !config.tie_word_embeddings;
    w.storage = arena.storage;
    set_counts(w, config);
    return w;
}

}  // namespace glmasr
