// model.cpp — the GLM-ASR forward pass, written once against the kernel contract (ops.h).
//
// Read it top to bottom like llama2.c's forward(): every block is preceded by the PyTorch
// expression of transformers' GlmAsrForConditionalGeneration it mirrors (docs/model.md §3–§6).
// All buffers are allocated when the Model is built (encoder), when a clip first has more audio
// tokens (its embeddings) or when a prompt first needs more context (decoder); the decode step
// itself only enqueues ops, so on a GPU it is recorded once as a CUDA graph and replayed for
// every token.
#include "glmasr/model.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>

#include "glmasr/dispatch.h"
#include "glmasr/error.h"

namespace glmasr {

std::vector<int> build_prompt(const Tokenizer& tokenizer, int n_audio_tokens,
                              const std::string& instruction) {
    // GlmAsrProcessor renders the chat template with one <|pad|> and then repeats it
    // n_audio_tokens times; the whole string is tokenised at once (special tokens split first).
    std::string text = "<|user|>\n<|begin_of_audio|>";
    text.reserve(text.size() + 7 * static_cast<size_t>(n_audio_tokens) + 128);
    for (int i = 0; i < n_audio_tokens; ++i) text += "<|pad|>";
    text += "<|end_of_audio|><|user|>\n" + instruction + "<|assistant|>\n";
    return tokenizer.encode(text);
}

const char* stage_name(Stage stage) {
    switch (stage) {
        case Stage::encoder: return "encoder";
        case Stage::projector: return "projector";
        case Stage::prefill: return "prefill";
        case Stage::decode: return "decode";
    }
    return "?";
}

namespace {

// A buffer of the backend's memory owned by the Model (freed with it).
struct Buffer {
    Backend* backend = nullptr;
    void* ptr = nullptr;
    Buffer() = default;
    Buffer(Backend& b, size_t bytes) : backend(&b), ptr(b.alloc(bytes)) {}
    Buffer(Buffer&& o) noexcept : backend(o.backend), ptr(o.ptr) { o.ptr = nullptr; }
    Buffer& operator=(Buffer&& o) noexcept {
        std::swap(backend, o.backend);
        std::swap(ptr, o.ptr);
        return *this;
    }
    ~Buffer() {
        if (ptr) backend->free(ptr);
    }
};

// Where generate() finds the audio embeddings: (n, Dt) floats on the host, or already in the
// backend's memory (the model's own encode_audio result).
struct AudioSource {
    const float* rows;
    bool on_host;
};

}  // namespace

struct Model::Impl {
    Backend& backend;
    Stream stream;
    std::vector<Buffer> owned;

    Tensor make(DType dtype, std::initializer_list<int64_t> dims) {
        Tensor t(nullptr, dtype, backend.device(), dims);
        owned.emplace_back(backend, t.bytes());
        t.data = owned.back().ptr;
        return t;
    }

    // ---- encoder activations for one 30 s window (T_mel = 3000 frames, T = 1500 after conv2)
    Tensor mel;           // (T_mel, n_mels)   the window's log-mel, time-major
    Tensor conv1_out;     // (T_mel, De)
    Tensor enc_x;         // (T, De)           residual stream
    Tensor enc_normed;    // (T, De)           layernorm output; after the last layer, the
                          //                   encoder output, read as (T/4, 4·De) by the projector
    Tensor enc_q;         // (T, Hq·hd)
    Tensor enc_k, enc_v;  // (T, Hkv·hd)
    Tensor enc_attn;      // (T, Hq·hd)
    Tensor enc_proj;      // (T, De)           attention / MLP output before the residual add
    Tensor enc_ffn;       // (T, F)
    Tensor enc_scores;    // (Hq, T, T)        only if the attention op is the 3-kernel composition
    Tensor enc_pos;       // (T) i32           0..T−1: positions restart in every window
    Tensor enc_cos, enc_sin;  // (T, rotary/2)
    Tensor proj_hidden;       // (T/4, 2·Dt)

    // ---- the audio embeddings of the last encode_audio call, every window's valid tokens
    Buffer audio_buffer;            // grown to the longest clip so far
    int64_t audio_capacity = -1;    // rows audio_buffer holds
    Tensor audio_emb;               // (N_total, Dt) in audio_buffer
    uint64_t audio_generation = 0;  // the last encode_audio call's number (AudioEmbeddings)

    // ---- decoder state, sized for `capacity` positions (prompt + generated tokens)
    int capacity = 0;
    int max_rows = 0;  // largest prompt (prefill rows) the buffers hold
    std::vector<Buffer> dec_owned;
    std::vector<Tensor> k_cache, v_cache;  // per layer (capacity, Hkv·hd)
    Tensor dec_x, dec_normed;              // (rows, Dt)
    Tensor dec_q, dec_attn;                // (rows, Hq·hd)
    Tensor dec_k, dec_v;                   // (rows, Hkv·hd)
    Tensor dec_proj;                       // (rows, Dt)
    Tensor dec_gate, dec_up;               // (rows, F)
    Tensor dec_scores;                     // (Hq, rows, capacity) for the 3-kernel composition
    Tensor dec_ids, dec_pos;               // (rows) i32
    Tensor dec_cos, dec_sin;               // (capacity, hd/2)
    Tensor logits;                         // (1, V)
    Tensor next_id;                        // (1) i32: argmax output, next step's input id
    Backend::Graph decode_graph;           // the recorded decode step (GPU only)
    bool graph_persistent = false;         // ... recorded with the persistent decode step

    StageTimes last_encode;  // encoder_ms, projector_ms of the last encode_audio
    std::function<void(Stage)> stage_hook;
    OpTable::PrefetchHint prefetch_hint = nullptr;   // the attention's track's (track.h)
    Track::DecodeLayers decode_layers_fn = nullptr;  // the table's persistent decode step, if any

    void enter(Stage stage) const {
        if (stage_hook) stage_hook(stage);
    }

    explicit Impl(Backend& b) : backend(b), stream(b.stream()) {}

    // Encoder steps of one 30 s window, in the order encode_audio runs them.
    void upload_window(const AudioFeatures& features, int win);
    void encode_window(const ModelConfig& config, const ModelWeights& w, const Ops& ops);
    void project_window(const ModelConfig& config, const ModelWeights& w, const Ops& ops,
                        const Tensor& out);
    void download_encoder_output(float* host_out);
    void reserve_audio(int64_t rows, int64_t width);
    void check_current(const AudioEmbeddings& audio) const;

    // Decoder steps, in the order generate runs them.
    void reserve_decoder(const DecoderConfig& d, const Ops& ops, int rows, int positions);
    GenerateResult generate(const ModelConfig& config, const ModelWeights& w, const Ops& ops,
                            const std::vector<int>& prompt_ids, AudioSource audio, size_t n_audio,
                            const GenerateOptions& options);
    void prefill(const ModelConfig& config, const ModelWeights& w, const Ops& ops,
                 const std::vector<int>& prompt_ids, AudioSource audio,
                 const std::vector<int>& audio_rows);
    void decode_step(const ModelConfig& config, const ModelWeights& w, const Ops& ops,
                     bool persistent);
    void decode(const ModelConfig& config, const ModelWeights& w, const Ops& ops, int S,
                const GenerateOptions& options, GenerateResult& result);

    // One decoder pass over `rows` tokens whose embeddings are in dec_x and positions in
    // dec_pos; leaves the final-norm output in dec_normed. Enqueue only: capture-safe. With
    // `persistent` (one row), the layers are one call of decode_layers_fn.
    void decoder_layers(const ModelConfig& config, const ModelWeights& w, const Ops& ops, int rows,
                        bool persistent = false);

    Tensor make_decoder(DType dtype, std::initializer_list<int64_t> dims) {
        Tensor t(nullptr, dtype, backend.device(), dims);
        dec_owned.emplace_back(backend, t.bytes());
        t.data = dec_owned.back().ptr;
        return t;
    }
};

Model::Model(ModelConfig config, ModelWeights weights, OpTable table)
    : config_(std::move(config)), weights_(std::move(weights)), table_(std::move(table)) {
    Backend& backend = backend_for(table_.device);
    impl_ = std::make_unique<Impl>(backend);
    Impl& m = *impl_;
    table_.setup(m.stream);
    m.prefetch_hint = table_.prefetch_hint();
    m.decode_layers_fn = table_.decode_layers();

    const EncoderConfig& e = config_.audio;
    const FeatureConfig features;
    const int t_mel = features.window_frames();
    const int t_enc = (t_mel + 2 * 1 - 3) / 2 + 1;  // conv2: kernel 3, stride 2, padding 1
    if (t_enc > e.max_positions)
        throw InputError("config.json: audio_config.max_position_embeddings (" +
                         std::to_string(e.max_positions) + ") is smaller than the " +
                         std::to_string(t_enc) + " encoder frames of a 30 s window");
    const int q_width = e.num_heads * e.head_dim, kv_width = e.num_kv_heads * e.head_dim;
    m.mel = m.make(DType::F32, {t_mel, e.num_mel_bins});
    m.conv1_out = m.make(DType::F32, {t_mel, e.hidden_size});
    m.enc_x = m.make(DType::F32, {t_enc, e.hidden_size});
    const DType act = table_.encoder_activations();  // bf16 on the reference alone (track.h)
    m.enc_normed = m.make(act, {t_enc, e.hidden_size});
    m.enc_q = m.make(DType::F32, {t_enc, q_width});
    m.enc_k = m.make(act, {t_enc, kv_width});
    m.enc_v = m.make(act, {t_enc, kv_width});
    m.enc_attn = m.make(act, {t_enc, q_width});
    m.enc_proj = m.make(DType::F32, {t_enc, e.hidden_size});
    m.enc_ffn = m.make(DType::F32, {t_enc, e.intermediate_size});
    if (!table_.ops.attention) m.enc_scores = m.make(DType::F32, {e.num_heads, t_enc, t_enc});
    m.enc_pos = m.make(DType::I32, {t_enc});
    m.enc_cos = m.make(DType::F32, {t_enc, e.rotary_dim() / 2});
    m.enc_sin = m.make(DType::F32, {t_enc, e.rotary_dim() / 2});
    const int tokens_per_window = t_enc / config_.merge_factor;
    m.proj_hidden = m.make(DType::F32, {tokens_per_window, config_.projector_hidden()});

    std::vector<int32_t> positions(t_enc);
    std::iota(positions.begin(), positions.end(), 0);
    backend.upload(m.enc_pos.data, positions.data(), m.enc_pos.bytes(), m.stream);
    table_.ops.rope_freqs(m.enc_cos, m.enc_sin, e.rope_theta, m.stream);
    backend.synchronize(m.stream);
}

Model::~Model() = default;

AudioEmbeddings Model::encode_audio(const AudioFeatures& features,
                                    std::vector<float>* encoder_out) {
    Impl& m = *impl_;
    const EncoderConfig& e = config_.audio;
    const int t_mel = static_cast<int>(m.mel.dim(0)), n_mels = static_cast<int>(m.mel.dim(1));
    const int t_enc = static_cast<int>(m.enc_x.dim(0));
    const int d_text = config_.text.hidden_size;
    if (features.n_mels != n_mels || features.n_frames != t_mel)
        throw InputError("features are (" + std::to_string(features.n_mels) + " mels, " +
                         std::to_string(features.n_frames) + " frames) but the model expects (" +
                         std::to_string(n_mels) + ", " + std::to_string(t_mel) + ")");

    // From here on the buffer no longer holds the last call's embeddings, even if this call throws.
    // Numbers come from one process-wide count, so no other model's handle can match.
    static std::atomic<uint64_t> encode_calls{0};
    m.audio_generation = ++encode_calls;
    const int64_t n_audio = features.total_audio_tokens();
    m.reserve_audio(n_audio, d_text);
    if (encoder_out)
        encoder_out->resize(static_cast<size_t>(features.n_windows) * t_enc * e.hidden_size);
    int64_t rows_done = 0;
    std::vector<Backend::Mark> projector_marks;  // (begin, end) pairs, one per window
    const Backend::Mark begin = m.backend.mark(m.stream);

    for (int win = 0; win < features.n_windows; ++win) {
        m.enter(Stage::encoder);
        m.upload_window(features, win);
        m.encode_window(config_, weights_, table_.ops);
        if (encoder_out)
            m.download_encoder_output(encoder_out->data() +
                                      static_cast<size_t>(win) * t_enc * e.hidden_size);

        // The projector on this window's valid tokens, appended to the audio embeddings.
        const int n_tokens = features.audio_tokens[win];
        if (n_tokens == 0) continue;
        m.enter(Stage::projector);
        projector_marks.push_back(m.backend.mark(m.stream));
        m.project_window(config_, weights_, table_.ops, m.audio_emb.rows(rows_done, n_tokens));
        projector_marks.push_back(m.backend.mark(m.stream));
        rows_done += n_tokens;
    }
    const Backend::Mark end = m.backend.mark(m.stream);
    m.last_encode = StageTimes{};
    for (size_t i = 0; i + 1 < projector_marks.size(); i += 2)
        m.last_encode.projector_ms +=
            m.backend.elapsed_ms(projector_marks[i], projector_marks[i + 1]);
    m.last_encode.encoder_ms = m.backend.elapsed_ms(begin, end) - m.last_encode.projector_ms;
    return AudioEmbeddings(this, m.audio_generation, n_audio);
}

// Room for `rows` audio embeddings of `width` floats; grown only, like the decoder's buffers.
void Model::Impl::reserve_audio(int64_t rows, int64_t width) {
    Tensor view(nullptr, DType::F32, backend.device(), {rows, width});
    if (rows > audio_capacity) {  // a failed allocation throws before anything here changes
        audio_buffer = Buffer(backend, view.bytes());
        audio_capacity = rows;
    }
    view.data = audio_buffer.ptr;
    audio_emb = view;
}

void Model::Impl::check_current(const AudioEmbeddings& audio) const {
    if (audio.generation_ != audio_generation)
        throw Error(
            "audio embeddings of an earlier encode_audio call: the model has encoded other audio since");
}

std::vector<float> AudioEmbeddings::host() const {
    const Model::Impl& m = *model_->impl_;
    m.check_current(*this);
    std::vector<float> out(static_cast<size_t>(rows_) * model_->config().text.hidden_size);
    m.backend.download(out.data(), m.audio_emb.data, out.size() * sizeof(float), m.stream);
    return out;
}

// features.mel[win] (T_mel, n_mels), already time-major, uploaded to `mel` straight from the
// vector: from pageable memory the CUDA driver stages the copy itself and returns once it has,
// which measured faster than a copy into page-locked memory first (docs/performance.md,
// "Around the kernels").
void Model::Impl::upload_window(const AudioFeatures& features, int win) {
    const float* window = features.mel.data() + static_cast<size_t>(win) * mel.numel();
    backend.upload(mel.data, window, mel.bytes(), stream);
}

// The encoder over the window in `mel`: conv stem, then the pre-LN layers; leaves the final-norm
// output (T, De) in enc_normed.
void Model::Impl::encode_window(const ModelConfig& config, const ModelWeights& w, const Ops& ops) {
    Impl& m = *this;
    const EncoderConfig& e = config.audio;
    const float scale = 1.0f / std::sqrt(static_cast<float>(e.head_dim));

    // x = gelu(conv1(input_features)); x = gelu(conv2(x)).transpose(1, 2)
    ops.conv1d(m.conv1_out, m.mel, w.conv1_w, w.conv1_b, 1, 1, m.stream);
    ops.gelu(m.conv1_out, m.conv1_out, m.stream);
    ops.conv1d(m.enc_x, m.conv1_out, w.conv2_w, w.conv2_b, 2, 1, m.stream);
    ops.gelu(m.enc_x, m.enc_x, m.stream);

    // for layer in layers: pre-LN attention and MLP blocks (docs/model.md §3.3)
    ops.layernorm(m.enc_normed, m.enc_x, w.encoder[0].ln1_w, w.encoder[0].ln1_b, e.layer_norm_eps,
                  m.stream);
    for (size_t l = 0; l < w.encoder.size(); ++l) {
        const EncoderLayerWeights& L = w.encoder[l];
        // q, k, v = q_proj(h), k_proj(h) (no bias), v_proj(h); partial RoPE on q and k
        run_qkv_rope(ops, m.enc_q, m.enc_k, m.enc_v, m.enc_normed, L.q_w, L.q_b, L.k_w, Tensor{},
                     L.v_w, L.v_b, m.enc_cos, m.enc_sin, m.enc_pos, e.num_heads, e.num_kv_heads,
                     m.stream);
        // attn = softmax(q kᵀ / √hd) v over all 1500 frames: bidirectional, no mask
        run_attention(ops, m.enc_attn, m.enc_q, m.enc_k, m.enc_v, Tensor{}, m.enc_scores,
                      e.num_heads, e.num_kv_heads, scale, m.stream);
        // x = x + o_proj(attn); h = post_attention_layernorm(x)
        ops.linear(m.enc_proj, m.enc_attn, L.o_w, L.o_b, m.stream);
        run_add_layernorm(ops, m.enc_x, m.enc_normed, m.enc_proj, L.ln2_w, L.ln2_b,
                          e.layer_norm_eps, m.stream);
        // x = x + fc2(gelu(fc1(h))); h = next layer's input_layernorm(x), or the final norm
        run_linear_gelu_linear(ops, m.enc_proj, m.enc_normed, L.fc1_w, L.fc1_b, L.fc2_w, L.fc2_b,
                               m.enc_ffn, m.stream);
        const bool last = l + 1 == w.encoder.size();
        const Tensor& norm_w = last ? w.enc_norm_w : w.encoder[l + 1].ln1_w;
        const Tensor& norm_b = last ? w.enc_norm_b : w.encoder[l + 1].ln1_b;
        run_add_layernorm(ops, m.enc_x, m.enc_normed, m.enc_proj, norm_w, norm_b, e.layer_norm_eps,
                          m.stream);
    }
}

// Projector on the window's first `n_tokens` (valid) tokens only, rows being independent:
// merged = h.reshape(T/4, 4·De); emb = linear_2(gelu(linear_1(merged))) into `out`
// (n_tokens, Dt), the window's rows of the audio embeddings.
void Model::Impl::project_window(const ModelConfig& config, const ModelWeights& w, const Ops& ops,
                                 const Tensor& out) {
    Impl& m = *this;
    const int t_enc = static_cast<int>(m.enc_x.dim(0));
    const int64_t n_tokens = out.dim(0);
    const Tensor merged = m.enc_normed.reshape(
        {t_enc / config.merge_factor, config.merge_factor * config.audio.hidden_size});
    run_linear_gelu_linear(ops, out, merged.rows(0, n_tokens), w.proj1_w, w.proj1_b, w.proj2_w,
                           w.proj2_b, m.proj_hidden.rows(0, n_tokens), m.stream);
}

// The window's encoder output (enc_normed, T × De) into host_out as f32: widened from bf16
// where the encoder's activations are bf16 (exact).
void Model::Impl::download_encoder_output(float* host_out) {
    const size_t n = static_cast<size_t>(enc_normed.numel());
    if (enc_normed.dtype == DType::F32) {
        backend.download(host_out, enc_normed.data, enc_normed.bytes(), stream);
        return;
    }
    std::vector<uint16_t> bits(n);
    backend.download(bits.data(), enc_normed.data, enc_normed.bytes(), stream);
    std::transform(bits.begin(), bits.end(), host_out, bf16_to_f32);
}

StageTimes Model::last_encode_times() const { return impl_->last_encode; }

void Model::set_stage_hook(std::function<void(Stage)> hook) { impl_->stage_hook = std::move(hook); }

namespace {

// generate's checks on its options, made before anything is enqueued: at least one step,
// teacher-forcing inputs that cover every decode step and are token ids, and room for the
// prompt (S tokens) and every new token in the decoder's positions.
void check_generate_options(const DecoderConfig& d, int S, const GenerateOptions& options) {
    if (S == 0) throw InputError("empty prompt");
    if (options.max_new_tokens < 1) throw InputError("--max-new-tokens must be at least 1");
    if (!options.forced_inputs.empty()) {
        if (static_cast<int>(options.forced_inputs.size()) < options.max_new_tokens - 1)
            throw InputError("forced inputs: " + std::to_string(options.forced_inputs.size()) +
                             " tokens for " + std::to_string(options.max_new_tokens) +
                             " decode steps");
        for (int id : options.forced_inputs)
            if (id < 0 || id >= d.vocab_size)
                throw InputError("forced input token id " + std::to_string(id) +
                                 " is outside the vocabulary");
    }
    if (S + options.max_new_tokens > d.max_positions)
        throw InputError("prompt (" + std::to_string(S) + " tokens) + max new tokens (" +
                         std::to_string(options.max_new_tokens) + ") exceed the decoder's " +
                         std::to_string(d.max_positions) + " positions");
}

// Where the audio rows go: the k-th <|pad|> takes the k-th audio embedding (masked_scatter).
// Returns the prompt rows holding <|pad|>, in order, after checking that every id is in the
// vocabulary and that there is one placeholder per embedding (n_audio of them).
std::vector<int> audio_rows_of(const ModelConfig& config, const std::vector<int>& prompt_ids,
                               size_t n_audio) {
    const int vocab_size = config.text.vocab_size;
    std::vector<int> audio_rows;
    for (int i = 0; i < static_cast<int>(prompt_ids.size()); ++i) {
        if (prompt_ids[i] < 0 || prompt_ids[i] >= vocab_size)
            throw InputError("prompt token id " + std::to_string(prompt_ids[i]) +
                             " is outside the vocabulary");
        if (prompt_ids[i] == config.audio_token_id) audio_rows.push_back(i);
    }
    if (audio_rows.size() != n_audio)
        throw InputError("the prompt has " + std::to_string(audio_rows.size()) +
                         " audio placeholders but the audio gave " + std::to_string(n_audio) +
                         " embeddings");
    return audio_rows;
}

// Whether generation ends after `token`, the step-th new one (from 0): a stop token (unless
// eos is ignored), or the last of max_new_tokens.
bool stops_after(const DecoderConfig& d, const GenerateOptions& options, int step, int32_t token) {
    const std::vector<int>& eos = d.eos_token_ids;
    const bool stop = std::find(eos.begin(), eos.end(), token) != eos.end();
    return (stop && !options.ignore_eos) || step + 1 == options.max_new_tokens;
}

}  // namespace

void check_persistent_decode(const OpTable& table) {
    if (!table.decode_layers())
        throw InputError("--decode persistent: " + table.describe() +
                         " has no persistent decode step (the reference has one, with every op "
                         "its own and a fused attention)");
}

GenerateResult Model::generate(const std::vector<int>& prompt_ids, const AudioEmbeddings& audio,
                               const GenerateOptions& options) {
    if (audio.model_ != this) throw Error("generate: audio embeddings of another model");
    if (options.persistent_decode) check_persistent_decode(table_);
    impl_->check_current(audio);
    return impl_->generate(config_, weights_, table_.ops, prompt_ids,
                           {impl_->audio_emb.f32(), false}, static_cast<size_t>(audio.rows()),
                           options);
}

GenerateResult Model::generate(const std::vector<int>& prompt_ids,
                               const std::vector<float>& audio_embeddings,
                               const GenerateOptions& options) {
    if (options.persistent_decode) check_persistent_decode(table_);
    return impl_->generate(config_, weights_, table_.ops, prompt_ids,
                           {audio_embeddings.data(), true},
                           audio_embeddings.size() / config_.text.hidden_size, options);
}

GenerateResult Model::Impl::generate(const ModelConfig& config, const ModelWeights& w,
                                     const Ops& ops, const std::vector<int>& prompt_ids,
                                     AudioSource audio, size_t n_audio,
                                     const GenerateOptions& options) {
    Impl& m = *this;
    const DecoderConfig& d = config.text;
    const int S = static_cast<int>(prompt_ids.size());
    check_generate_options(d, S, options);
    const std::vector<int> audio_rows = audio_rows_of(config, prompt_ids, n_audio);
    m.reserve_decoder(d, ops, S, S + options.max_new_tokens);

    GenerateResult result;
    m.enter(Stage::prefill);
    auto t0 = m.backend.mark(m.stream);
    m.prefill(config, w, ops, prompt_ids, audio, audio_rows);
    auto t1 = m.backend.mark(m.stream);
    result.times.prefill_ms = m.backend.elapsed_ms(t0, t1);

    m.decode(config, w, ops, S, options, result);
    return result;
}

// Size the decoder state for `rows` prompt rows and `positions` positions (prompt + new
// tokens). Buffers are only ever grown: when this prompt needs more than the last one, all of
// them are reallocated (dropping the recorded decode graph, which points into the old ones).
void Model::Impl::reserve_decoder(const DecoderConfig& d, const Ops& ops, int rows, int positions) {
    Impl& m = *this;
    if (positions <= m.capacity && rows <= m.max_rows) return;
    m.decode_graph.reset();
    m.dec_owned.clear();
    m.k_cache.clear();
    m.v_cache.clear();
    m.capacity = std::max(positions, m.capacity);
    m.max_rows = std::max(rows, m.max_rows);
    const int max_rows = m.max_rows, cap = m.capacity;
    const int q_width = d.num_heads * d.head_dim, kv_width = d.num_kv_heads * d.head_dim;
    for (int l = 0; l < d.num_layers; ++l) {
        m.k_cache.push_back(m.make_decoder(DType::F32, {cap, kv_width}));
        m.v_cache.push_back(m.make_decoder(DType::F32, {cap, kv_width}));
        // Rows past the current position are masked out, but a 3-kernel attention still
        // multiplies them by a zero probability: they must hold numbers, not garbage.
        m.backend.zero(m.k_cache.back().data, m.k_cache.back().bytes(), m.stream);
        m.backend.zero(m.v_cache.back().data, m.v_cache.back().bytes(), m.stream);
    }
    m.dec_x = m.make_decoder(DType::F32, {max_rows, d.hidden_size});
    m.dec_normed = m.make_decoder(DType::F32, {max_rows, d.hidden_size});
    m.dec_q = m.make_decoder(DType::F32, {max_rows, q_width});
    m.dec_attn = m.make_decoder(DType::F32, {max_rows, q_width});
    m.dec_k = m.make_decoder(DType::F32, {max_rows, kv_width});
    m.dec_v = m.make_decoder(DType::F32, {max_rows, kv_width});
    m.dec_proj = m.make_decoder(DType::F32, {max_rows, d.hidden_size});
    m.dec_gate = m.make_decoder(DType::F32, {max_rows, d.intermediate_size});
    m.dec_up = m.make_decoder(DType::F32, {max_rows, d.intermediate_size});
    if (!ops.attention) m.dec_scores = m.make_decoder(DType::F32, {d.num_heads, max_rows, cap});
    m.dec_ids = m.make_decoder(DType::I32, {max_rows});
    m.dec_pos = m.make_decoder(DType::I32, {max_rows});
    m.dec_cos = m.make_decoder(DType::F32, {cap, d.head_dim / 2});
    m.dec_sin = m.make_decoder(DType::F32, {cap, d.head_dim / 2});
    m.logits = m.make_decoder(DType::F32, {1, d.vocab_size});
    m.next_id = m.make_decoder(DType::I32, {1});
    ops.rope_freqs(m.dec_cos, m.dec_sin, d.rope_theta, m.stream);
}

// The prompt's S tokens in one decoder pass, filling the KV cache at positions 0..S−1; leaves
// the first new token in next_id and its logits in `logits`.
void Model::Impl::prefill(const ModelConfig& config, const ModelWeights& w, const Ops& ops,
                          const std::vector<int>& prompt_ids, AudioSource audio,
                          const std::vector<int>& audio_rows) {
    Impl& m = *this;
    const DecoderConfig& d = config.text;
    const int S = static_cast<int>(prompt_ids.size());

    // inputs_embeds = embed_tokens(input_ids), audio rows scattered in
    std::vector<int32_t> positions(S);
    std::iota(positions.begin(), positions.end(), 0);
    m.backend.upload(m.dec_ids.data, prompt_ids.data(), S * sizeof(int32_t), m.stream);
    m.backend.upload(m.dec_pos.data, positions.data(), S * sizeof(int32_t), m.stream);
    ops.embedding(m.dec_x.rows(0, S), w.embed, m.dec_ids.rows(0, S), m.stream);
    for (size_t k = 0; k < audio_rows.size();) {
        size_t run = 1;  // the placeholders are consecutive: copy each run at once
        while (k + run < audio_rows.size() &&
               audio_rows[k + run] == audio_rows[k] + static_cast<int>(run))
            ++run;
        void* dst = m.dec_x.rows(audio_rows[k], static_cast<int64_t>(run)).data;
        const float* src = audio.rows + k * d.hidden_size;
        const size_t bytes = run * d.hidden_size * sizeof(float);
        if (audio.on_host) m.backend.upload(dst, src, bytes, m.stream);
        else m.backend.copy(dst, src, bytes, m.stream);
        k += run;
    }
    m.decoder_layers(config, w, ops, S);
    // logits = lm_head(norm(h))[-1]; next = argmax(logits)
    ops.linear(m.logits, m.dec_normed.rows(S - 1, 1), w.lm_head, Tensor{}, m.stream);
    ops.argmax(m.next_id, m.logits, m.stream);
}

// One decode step through the KV cache: the token in next_id at the position in dec_pos in,
// the next token (and its logits) out, in the same buffers. Enqueue only: capture-safe.
void Model::Impl::decode_step(const ModelConfig& config, const ModelWeights& w, const Ops& ops,
                              bool persistent) {
    Impl& m = *this;
    ops.embedding(m.dec_x.rows(0, 1), w.embed, m.next_id, m.stream);
    m.decoder_layers(config, w, ops, 1, persistent);
    ops.linear(m.logits, m.dec_normed.rows(0, 1), w.lm_head, Tensor{}, m.stream);
    ops.argmax(m.next_id, m.logits, m.stream);
}

// The decode loop after a prefill of S tokens: read each new token (from next_id) into
// result.tokens until stops_after says so, running one decode step per further token — the
// recorded graph where the backend has them, the ops otherwise. Times the steps.
void Model::Impl::decode(const ModelConfig& config, const ModelWeights& w, const Ops& ops, int S,
                         const GenerateOptions& options, GenerateResult& result) {
    Impl& m = *this;
    const DecoderConfig& d = config.text;
    auto step = [&]() { m.decode_step(config, w, ops, options.persistent_decode); };
    const bool graphs = options.use_graphs && m.backend.supports_graphs();
    if (m.decode_graph && m.graph_persistent != options.persistent_decode) m.decode_graph.reset();
    m.graph_persistent = options.persistent_decode;
    std::vector<float> host_logits;
    double decode_ms = 0;
    for (int i = 0; i < options.max_new_tokens; ++i) {
        int32_t token = 0;
        if (options.on_logits) {
            host_logits.resize(d.vocab_size);
            m.backend.download(host_logits.data(), m.logits.data, m.logits.bytes(), m.stream);
            options.on_logits(i, host_logits);
        }
        m.backend.download(&token, m.next_id.data, sizeof token, m.stream);
        result.tokens.push_back(token);
        if (stops_after(d, options, i, token)) break;

        m.enter(Stage::decode);
        auto s0 = m.backend.mark(m.stream);
        const int32_t position = S + i;  // position of the token just produced
        m.backend.upload(m.dec_pos.data, &position, sizeof position, m.stream);
        if (!options.forced_inputs.empty())
            m.backend.upload(m.next_id.data, &options.forced_inputs[i], sizeof(int32_t), m.stream);
        if (graphs) {
            if (!m.decode_graph) m.decode_graph = m.backend.capture(m.stream, step);
            m.backend.replay(m.decode_graph, m.stream);
        } else {
            step();
        }
        auto s1 = m.backend.mark(m.stream);
        decode_ms += m.backend.elapsed_ms(s0, s1);
        ++result.times.decode_steps;
    }
    result.times.decode_ms = decode_ms;
}

void Model::Impl::decoder_layers(const ModelConfig& config, const ModelWeights& w, const Ops& ops,
                                 int rows, bool persistent) {
    Impl& m = *this;
    const DecoderConfig& d = config.text;
    const float scale = 1.0f / std::sqrt(static_cast<float>(d.head_dim));
    const Tensor x = m.dec_x.rows(0, rows), normed = m.dec_normed.rows(0, rows);
    if (persistent) {  // the same layers in one call of the track (track.h, DecodeStep)
        DecodeStep step;
        step.x = x;
        step.q = m.dec_q.rows(0, 1);
        step.attn = m.dec_attn.rows(0, 1);
        step.gate = m.dec_gate.rows(0, 1);
        step.up = m.dec_up.rows(0, 1);
        step.normed = normed;
        step.k = m.dec_k.rows(0, 1);
        step.v = m.dec_v.rows(0, 1);
        step.proj = m.dec_proj.rows(0, 1);
        step.cos = m.dec_cos;
        step.sin = m.dec_sin;
        step.positions = m.dec_pos.rows(0, 1);
        step.num_heads = d.num_heads;
        step.num_kv_heads = d.num_kv_heads;
        step.eps = d.rms_norm_eps;
        step.scale = scale;
        for (size_t l = 0; l < w.decoder.size(); ++l) {
            const DecoderLayerWeights& L = w.decoder[l];
            step.layers.push_back({L.norm1_w, L.q_w, L.k_w, L.v_w, L.o_w, L.norm2_w, L.gate_w,
                                   L.up_w, L.down_w, m.k_cache[l], m.v_cache[l]});
        }
        m.decode_layers_fn(step, m.stream);
    } else {
        const Tensor q = m.dec_q.rows(0, rows), k = m.dec_k.rows(0, rows),
                     v = m.dec_v.rows(0, rows);
        const Tensor attn = m.dec_attn.rows(0, rows), proj = m.dec_proj.rows(0, rows);
        const Tensor gate = m.dec_gate.rows(0, rows), up = m.dec_up.rows(0, rows);
        const Tensor pos = m.dec_pos.rows(0, rows);
        const Tensor scores = m.dec_scores.empty()
                                  ? Tensor{}
                                  : Tensor(m.dec_scores.data, DType::F32, m.dec_scores.device,
                                           {d.num_heads, rows, m.capacity});

        // Pre-norm Llama layers. Each RMSNorm is part of the product that consumes it and each
        // residual add part of the product that feeds it (ops.h), so `normed` is only scratch.
        for (size_t l = 0; l < w.decoder.size(); ++l) {
            const DecoderLayerWeights& L = w.decoder[l];
            // input_layernorm, then the q, k, v projections (no biases), full half-split RoPE, and
            // k, v appended to the cache
            run_rmsnorm_qkv_rope_cache(ops, q, m.k_cache[l], m.v_cache[l], x, L.norm1_w, L.q_w,
                                       L.k_w, L.v_w, m.dec_cos, m.dec_sin, pos, normed, k, v,
                                       d.rms_norm_eps, d.num_heads, d.num_kv_heads, m.stream);
            // the weights read after the attention, hinted to the track that runs it (track.h)
            if (m.prefetch_hint) {
                m.prefetch_hint(L.gate_w, m.stream);
                m.prefetch_hint(L.up_w, m.stream);
            }
            // causal attention over the cache (key j visible to query i iff j ≤ pos[i]), GQA
            run_attention(ops, attn, q, m.k_cache[l], m.v_cache[l], pos, scores, d.num_heads,
                          d.num_kv_heads, scale, m.stream);
            // x += o_proj(attn)
            run_linear_residual(ops, x, attn, L.o_w, proj, m.stream);
            // x += down(silu(gate(n)) · up(n)), n = post_attention_layernorm(x)
            run_rmsnorm_gate_up_silu(ops, gate, x, L.norm2_w, L.gate_w, L.up_w, normed, up,
                                     d.rms_norm_eps, m.stream);
            run_linear_residual(ops, x, gate, L.down_w, proj, m.stream);
        }
    }
    ops.rmsnorm(normed, x, w.final_norm_w, d.rms_norm_eps, m.stream);
}

GenerateResult Model::transcribe(const AudioFeatures& features, const Tokenizer& tokenizer,
                                 const GenerateOptions& options) {
    const AudioEmbeddings audio = encode_audio(features);
    const std::vector<int> prompt = build_prompt(tokenizer, features.total_audio_tokens());
    GenerateResult result = generate(prompt, audio, options);
    result.times.encoder_ms = impl_->last_encode.encoder_ms;
    result.times.projector_ms = impl_->last_encode.projector_ms;
    return result;
}

}  // namespace glmasr
