// op_profiler.cpp — the timing shims of `glmasr profile`, and what every op of the contract costs.
//
// A shim has exactly the type of the Ops entry it replaces. While recording it
//   1. asks the backend to idle the stream for delay_us (GPU only; see OpProfiler),
//   2. records a mark, calls the real op, records a mark — on the op's own stream,
//   3. computes the call's cost from the Tensors it received,
// and keeps the two marks; stop() reads them all at once, so no call waits for the GPU
// (except the attention calls, whose cost needs the positions: see visible_keys).
// With an observer set, a shim instead computes the cost, packs the call into an OpCall (its
// Tensors, its scalars, and a closure that runs the real op on other Tensors) and hands it over.
#include "op_profiler.h"

#include <algorithm>
#include <chrono>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "glmasr/error.h"

namespace glmasr::cli {

namespace {

struct OpCost {
    double bytes = 0, flops = 0;
};

using Clock = std::chrono::steady_clock;

}  // namespace

struct ProfileRecorder {
    OpTable real;          // what the shims call
    OpTable instrumented;  // what the model calls
    Backend& backend;
    double delay_us;
    bool recording = false;
    std::function<void(const OpCall&)> observer;  // set: hand calls over instead of timing them
    Stage stage = Stage::encoder;
    bool stage_range_open = false;  // an NVTX range named after the stage

    struct Call {
        OpId op;
        Stage stage;
        Backend::Mark begin, end;
        OpCost cost;
    };
    std::vector<Call> pending;  // marks not read yet (reading one waits for the GPU)
    std::array<std::array<OpStats, kNumOps>, kNumStages> stats{};
    std::array<int64_t, kNumStages> entries{};
    int64_t late_calls = 0;

    // The keys the last attention_scores call let its queries see, for the attention_output
    // call that reads the same probabilities (attention_output receives no positions).
    const void* last_scores = nullptr;
    double last_pairs = 0;
    int64_t last_key_rows = 0;

    ProfileRecorder(const OpTable& table, double delay)
        : real(table), instrumented(table), backend(backend_for(table.device)), delay_us(delay) {}
};

namespace {

ProfileRecorder* active =
    nullptr;  // the shims' way to the one OpProfiler (they are plain pointers)

// ---------------------------------------------------------------- costs
//
// bytes: the least traffic a call needs — every input read once, every output written once, in
// the dtypes it received (an in-place op reads and writes its tensor). flops: n is the number of
// elements; a multiply-add counts 2; exp, erf, rsqrt, cos and sin count 1 each. These are the
// figures a roofline needs: GB/s against the memory bandwidth, TFLOP/s against the peak.

template <typename... T>
double bytes(const T&... tensors) {
    return (0.0 + ... + (tensors.empty() ? 0.0 : static_cast<double>(tensors.bytes())));
}

// The keys the queries of one attention call may see. Without positions (the encoder) every
// query sees all Tk keys; with positions (the decoder's KV cache) query i sees keys
// 0..positions[i]. The positions live in device memory, so this copies Tq ints to the host —
// a synchronising copy, made after the op's end mark, outside the op's time.
struct Visible {
    double pairs = 0;      // Σ over queries of the keys each sees (per head)
    int64_t key_rows = 0;  // rows of k and v the call needs: keys 0..max(positions)
};

Visible visible_keys(const Tensor& positions, int64_t tq, int64_t tk, Stream stream) {
    if (positions.empty()) return {static_cast<double>(tq) * tk, tk};
    std::vector<int32_t> pos(tq);
    active->backend.download(pos.data(), positions.data, pos.size() * sizeof(int32_t), stream);
    Visible v;
    for (int32_t p : pos) {
        const int64_t seen = std::clamp<int64_t>(static_cast<int64_t>(p) + 1, 0, tk);
        v.pairs += static_cast<double>(seen);
        v.key_rows = std::max(v.key_rows, seen);
    }
    return v;
}

// out(M, N) = x(M, K)·Wᵀ + b: M·N dot products of length K, plus the bias.
OpCost linear_cost(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   Stream) {
    const double K = x.dim(-1), M = x.numel() / K, N = weight.dim(0);
    return {bytes(out, x, weight, bias), 2 * M * N * K + (bias.empty() ? 0 : M * N)};
}

// out(T_out, C_out): every output is a dot product over C_in channels × K taps, plus the bias.
OpCost conv1d_cost(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                   int, int, Stream) {
    const double outputs = out.numel(), C_in = weight.dim(1), K = weight.dim(2);
    return {bytes(out, x, weight, bias), 2 * outputs * C_in * K + (bias.empty() ? 0 : outputs)};
}

// mean 1, variance 3 (subtract, square, add), normalise 2, scale and shift 2: 8 per element.
OpCost layernorm_cost(const Tensor& out, const Tensor& x, const Tensor& weight, const Tensor& bias,
                      float, Stream) {
    return {bytes(out, x, weight, bias), 8.0 * x.numel()};
}

// square and add 2, times rsqrt and weight 2: 4 per element.
OpCost rmsnorm_cost(const Tensor& out, const Tensor& x, const Tensor& weight, float, Stream) {
    return {bytes(out, x, weight), 4.0 * x.numel()};
}

// x · ½ · (1 + erf(x / √2)): 5 per element.
OpCost gelu_cost(const Tensor& out, const Tensor& x, Stream) {
    return {bytes(out, x), 5.0 * x.numel()};
}

// g / (1 + exp(−g)) · u: negate, exp, add, divide, multiply — 5 per element.
OpCost silu_mul_cost(const Tensor& out, const Tensor& gate, const Tensor& up, Stream) {
    return {bytes(out, gate, up), 5.0 * out.numel()};
}

// max 1, subtract and exp 2, sum 1, divide 1: 5 per element (masked −inf entries included).
OpCost softmax_cost(const Tensor& out, const Tensor& x, Stream) {
    return {bytes(out, x), 5.0 * x.numel()};
}

// angle = p · inv_freq, then cos and sin: 3 per table entry; the tables are only written.
OpCost rope_freqs_cost(const Tensor& cos, const Tensor& sin, float, Stream) {
    return {bytes(cos, sin), 3.0 * cos.numel()};
}

// The first rotary_dim = 2·half dims of every head are read and written in place (the rest pass
// through untouched); each rotated value is x·c ∓ y·s: 3 flops. Plus one cos and one sin row
// and one position per token.
OpCost rope_apply_cost(const Tensor& x, const Tensor& cos, const Tensor& /*sin: as cos*/,
                       const Tensor& positions, int n_heads, Stream) {
    const double T = x.dim(0), half = cos.dim(1), rotated = T * n_heads * 2 * half;
    const double cos_sin_rows = 2 * T * half * dtype_size(cos.dtype);
    return {2 * rotated * dtype_size(x.dtype) + cos_sin_rows + bytes(positions), 3 * rotated};
}

// Per head and visible (query, key) pair: a D-long dot product and the scale. The scores are
// written in full (masked entries get −inf); k is read up to the last visible key.
OpCost attention_scores_cost(const Tensor& scores, const Tensor& q, const Tensor& k,
                             const Tensor& positions, int n_heads, int, float, Stream stream) {
    const double D = q.dim(1) / n_heads;
    const Visible v = visible_keys(positions, q.dim(0), k.dim(0), stream);
    active->last_scores = scores.data;
    active->last_pairs = v.pairs;
    active->last_key_rows = v.key_rows;
    const double k_bytes = static_cast<double>(v.key_rows) * k.dim(1) * dtype_size(k.dtype);
    return {bytes(scores, q, positions) + k_bytes, n_heads * v.pairs * (2 * D + 1)};
}

// Per head and visible pair, one multiply-add over D. Every probability is read; v only up to
// the last visible key (the keys are those of the attention_scores call that made `probs`).
OpCost attention_output_cost(const Tensor& out, const Tensor& probs, const Tensor& v, int n_heads,
                             int n_kv_heads, Stream) {
    const double D = v.dim(1) / n_kv_heads;
    double pairs = static_cast<double>(probs.dim(1)) * probs.dim(2);
    int64_t key_rows = v.dim(0);
    if (probs.data == active->last_scores) {
        pairs = active->last_pairs;
        key_rows = active->last_key_rows;
    }
    const double v_bytes = static_cast<double>(key_rows) * v.dim(1) * dtype_size(v.dtype);
    return {bytes(out, probs) + v_bytes, 2 * n_heads * pairs * D};
}

// A gather: T rows of the table copied to out, no arithmetic.
OpCost embedding_cost(const Tensor& out, const Tensor& table, const Tensor& ids, Stream) {
    return {bytes(out, ids) + static_cast<double>(out.numel()) * dtype_size(table.dtype), 0};
}

OpCost add_cost(const Tensor& out, const Tensor& a, const Tensor& b, Stream) {
    return {bytes(out, a, b), static_cast<double>(out.numel())};
}

// One comparison per element (counted as a flop).
OpCost argmax_cost(const Tensor& out, const Tensor& x, Stream) {
    return {bytes(out, x), static_cast<double>(x.numel())};
}

// T rows copied into the cache, no arithmetic.
OpCost cache_write_cost(const Tensor& cache, const Tensor& rows, const Tensor& positions, Stream) {
    return {bytes(rows, positions) + static_cast<double>(rows.numel()) * dtype_size(cache.dtype),
            0};
}

// The whole of softmax(q·kᵀ·scale)·v per head and visible pair: two D-long multiply-adds, the
// scale and the softmax's 5. q, out and the visible rows of k and v are moved once; the
// (Hq, Tq, Tk) scratch is not counted — a fused kernel need not touch it.
OpCost attention_cost(const Tensor& out, const Tensor& q, const Tensor& k, const Tensor& v,
                      const Tensor& positions, const Tensor&, int n_heads, int, float,
                      Stream stream) {
    const double D = q.dim(1) / n_heads;
    const Visible vis = visible_keys(positions, q.dim(0), k.dim(0), stream);
    const double kv_bytes = static_cast<double>(vis.key_rows) *
                            (k.dim(1) * dtype_size(k.dtype) + v.dim(1) * dtype_size(v.dtype));
    return {bytes(out, q, positions) + kv_bytes, n_heads * vis.pairs * (4 * D + 6)};
}

// add (1) then layernorm (8); the residual is read and written.
OpCost add_layernorm_cost(const Tensor& residual, const Tensor& normed, const Tensor& x,
                          const Tensor& weight, const Tensor& bias, float, Stream) {
    return {bytes(residual, residual, normed, x, weight, bias), 9.0 * x.numel()};
}

// linear, then gelu (5) on its M·N outputs; the intermediate never leaves the kernel.
OpCost linear_gelu_cost(const Tensor& out, const Tensor& x, const Tensor& weight,
                        const Tensor& bias, Stream stream) {
    const OpCost gemm = linear_cost(out, x, weight, bias, stream);
    return {gemm.bytes, gemm.flops + 5.0 * out.numel()};
}

// Two linears of F outputs over K (gate and up), then silu_mul (5) on the (M, F) result.
OpCost gate_up_silu_cost(const Tensor& out, const Tensor& x, const Tensor& w_gate,
                         const Tensor& w_up, const Tensor&, Stream) {
    const double K = x.dim(-1), M = x.numel() / K, F = w_gate.dim(0);
    return {bytes(out, x, w_gate, w_up), 4 * M * F * K + 5 * M * F};
}

// The three products of linear_cost, then RoPE's 6 flops per rotated pair of q and k; x, the
// weights, q, the cos/sin rows of the positions and the new cache rows are moved once.
OpCost qkv_rope_cache_cost(const Tensor& q, const Tensor& k_cache, const Tensor&, const Tensor& x,
                           const Tensor& w_q, const Tensor& w_k, const Tensor& w_v,
                           const Tensor& cos, const Tensor&, const Tensor& positions, const Tensor&,
                           const Tensor&, int, int, Stream) {
    const double K = x.dim(-1), M = x.numel() / K, width_kv = k_cache.dim(1);
    const double N = q.dim(1) + 2 * width_kv;
    const double new_rows = M * (q.dim(1) + 2 * width_kv + 2 * cos.dim(1)) * sizeof(float);
    return {bytes(x, w_q, w_k, w_v, positions) + new_rows,
            2 * M * N * K + 3 * M * (q.dim(1) + width_kv)};
}

// linear, then the add (1) into the residual, which is read and written; scratch is not counted.
OpCost linear_residual_cost(const Tensor& residual, const Tensor& x, const Tensor& weight,
                            const Tensor&, Stream stream) {
    const OpCost gemm = linear_cost(residual, x, weight, Tensor{}, stream);
    return {gemm.bytes + bytes(residual), gemm.flops + static_cast<double>(residual.numel())};
}

// rmsnorm (4 per element of x) before gate_up_silu; the normed rows need not leave the kernel.
OpCost rmsnorm_gate_up_silu_cost(const Tensor& out, const Tensor& x, const Tensor& norm_weight,
                                 const Tensor& w_gate, const Tensor& w_up, const Tensor&,
                                 const Tensor& scratch, float, Stream stream) {
    const OpCost mlp = gate_up_silu_cost(out, x, w_gate, w_up, scratch, stream);
    return {mlp.bytes + bytes(norm_weight), mlp.flops + 4.0 * x.numel()};
}

// rmsnorm (4 per element of x) before qkv_rope_cache; the normed rows need not leave the kernel.
OpCost rmsnorm_qkv_rope_cache_cost(const Tensor& q, const Tensor& k_cache, const Tensor& v_cache,
                                   const Tensor& x, const Tensor& norm_weight, const Tensor& w_q,
                                   const Tensor& w_k, const Tensor& w_v, const Tensor& cos,
                                   const Tensor& sin, const Tensor& positions, const Tensor&,
                                   const Tensor& k, const Tensor& v, float, int n_heads,
                                   int n_kv_heads, Stream stream) {
    const OpCost qkv = qkv_rope_cache_cost(q, k_cache, v_cache, x, w_q, w_k, w_v, cos, sin,
                                           positions, k, v, n_heads, n_kv_heads, stream);
    return {qkv.bytes + bytes(norm_weight), qkv.flops + 4.0 * x.numel()};
}

// linear_gelu into hidden, then linear out of it; hidden is scratch (a fused kernel need not
// move it), so only x, the weights, the biases and out are counted.
OpCost linear_gelu_linear_cost(const Tensor& out, const Tensor& x, const Tensor& w1,
                               const Tensor& b1, const Tensor& w2, const Tensor& b2,
                               const Tensor& hidden, Stream stream) {
    const OpCost first = linear_gelu_cost(hidden, x, w1, b1, stream);
    const OpCost second = linear_cost(out, hidden, w2, b2, stream);
    return {first.bytes + second.bytes - 2.0 * bytes(hidden), first.flops + second.flops};
}

// The three products of linear_cost (x counted once), then RoPE's 6 flops per rotated pair of
// q and k with the cos/sin rows of the positions; the rotation need not re-read its rows.
OpCost qkv_rope_cost(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& x,
                     const Tensor& w_q, const Tensor& b_q, const Tensor& w_k, const Tensor& b_k,
                     const Tensor& w_v, const Tensor& b_v, const Tensor& cos, const Tensor&,
                     const Tensor& positions, int n_heads, int n_kv_heads, Stream stream) {
    const OpCost pq = linear_cost(q, x, w_q, b_q, stream), pk = linear_cost(k, x, w_k, b_k, stream);
    const OpCost pv = linear_cost(v, x, w_v, b_v, stream);
    const double M = x.dim(0), rotated = M * (n_heads + n_kv_heads) * 2.0 * cos.dim(1);
    const double cos_sin_rows = 2 * M * cos.dim(1) * dtype_size(cos.dtype);
    return {pq.bytes + pk.bytes + pv.bytes - 2 * bytes(x) + cos_sin_rows + bytes(positions),
            pq.flops + pk.flops + pv.flops + 3 * rotated};
}

// ---------------------------------------------------------------- shims

// An argument of an entry, sorted into an OpCall: Tensors and scalars kept, the stream not.
template <typename Arg>
void collect(OpCall& call, const Arg& arg) {
    if constexpr (std::is_same_v<Arg, Tensor>) call.tensors.push_back(arg);
    else if constexpr (std::is_arithmetic_v<Arg>) call.scalars.push_back(arg);
}

// An argument of a replayed call: the next of `tensors` for a Tensor, `stream` for the stream,
// the recorded value for a scalar.
template <typename Arg>
Arg substitute(const Arg& recorded, const std::vector<Tensor>& tensors, size_t& next,
               Stream stream) {
    if constexpr (std::is_same_v<Arg, Tensor>) return tensors.at(next++);
    else if constexpr (std::is_same_v<Arg, Stream>) return stream;
    else return recorded;
}

// Every Ops entry is a `void (*)(Args...)` whose last argument is the stream; Shim<...>::call
// has exactly that type, so it can stand in the table for the real entry.
template <OpId id, auto entry, auto cost,
          typename Fn = std::remove_cvref_t<decltype(std::declval<Ops>().*entry)>>
struct Shim;

template <OpId id, auto entry, auto cost, typename... Args>
struct Shim<id, entry, cost, void (*)(Args...)> {
    static void call(Args... args) {
        ProfileRecorder& r = *active;
        const Stream stream = std::get<sizeof...(Args) - 1>(std::forward_as_tuple(args...));
        if (r.observer) {
            r.observer(observed(args...));
            return;
        }
        if (!r.recording) {
            (r.real.ops.*entry)(args...);
            return;
        }
        const Clock::time_point host_begin = Clock::now();
        r.backend.delay(stream, r.delay_us);
        r.backend.range_push(op_name(id));
        Backend::Mark begin = r.backend.mark(stream);
        (r.real.ops.*entry)(args...);
        Backend::Mark end = r.backend.mark(stream);
        const double host_us =
            std::chrono::duration<double, std::micro>(Clock::now() - host_begin).count();
        r.backend.range_pop();
        if (r.backend.device() == Device::Cuda && host_us > r.delay_us) ++r.late_calls;
        r.pending.push_back({id, r.stage, std::move(begin), std::move(end), cost(args...)});
    }

    static OpCall observed(Args... args) {
        const OpCost c = cost(args...);
        OpCall call;
        call.op = id;
        call.stage = active->stage;
        call.bytes = c.bytes;
        call.flops = c.flops;
        (collect(call, args), ...);
        call.stream = std::get<sizeof...(Args) - 1>(std::forward_as_tuple(args...));
        using Saved = std::tuple<std::remove_cvref_t<Args>...>;
        call.run = [real = active->real.ops.*entry, saved = Saved(args...)](
                       const std::vector<Tensor>& tensors, Stream stream) {
            size_t next = 0;
            std::apply(
                [&](const auto&... recorded) {
                    // A braced list evaluates left to right, so the Tensors are taken in order.
                    const Saved replaced{substitute(recorded, tensors, next, stream)...};
                    std::apply(real, replaced);
                },
                saved);
        };
        return call;
    }
};

// Replace one entry by its shim; a null (fused) entry stays null.
template <OpId id, auto entry, auto cost>
void instrument(Ops& ops) {
    if (ops.*entry) ops.*entry = &Shim<id, entry, cost>::call;
}

}  // namespace

OpProfiler::OpProfiler(const OpTable& table, double delay_us)
    : recorder_(std::make_unique<ProfileRecorder>(table, delay_us)) {
    if (active) throw Error("only one OpProfiler may exist at a time");
    active = recorder_.get();
    Ops& ops = recorder_->instrumented.ops;
#define GLMASR_INSTRUMENT(name) \
    instrument<OpId::name, &Ops::name, name##_cost>(ops);  // every entry: its cost
    GLMASR_OP_ENTRIES(GLMASR_INSTRUMENT)
#undef GLMASR_INSTRUMENT
}

OpProfiler::~OpProfiler() {
    if (recorder_->stage_range_open) recorder_->backend.range_pop();
    active = nullptr;
}

const OpTable& OpProfiler::table() const { return recorder_->instrumented; }

void OpProfiler::set_stage(Stage stage) {
    ProfileRecorder& r = *recorder_;
    r.stage = stage;
    if (!r.recording) return;
    ++r.entries[static_cast<int>(stage)];
    if (r.stage_range_open) r.backend.range_pop();
    r.backend.range_push(stage_name(stage));
    r.stage_range_open = true;
}

void OpProfiler::start() { recorder_->recording = true; }

void OpProfiler::stop() {
    ProfileRecorder& r = *recorder_;
    r.recording = false;
    if (r.stage_range_open) r.backend.range_pop();
    r.stage_range_open = false;
    for (const ProfileRecorder::Call& call : r.pending) {
        OpStats& s = r.stats[static_cast<int>(call.stage)][static_cast<int>(call.op)];
        s.calls += 1;
        s.ms += r.backend.elapsed_ms(call.begin, call.end);
        s.bytes += call.cost.bytes;
        s.flops += call.cost.flops;
    }
    r.pending.clear();
}

void OpProfiler::observe(std::function<void(const OpCall&)> observer) {
    recorder_->observer = std::move(observer);
}

const OpStats& OpProfiler::stats(Stage stage, OpId op) const {
    return recorder_->stats[static_cast<int>(stage)][static_cast<int>(op)];
}

int64_t OpProfiler::entries(Stage stage) const {
    return recorder_->entries[static_cast<int>(stage)];
}

int64_t OpProfiler::late_calls() const { return recorder_->late_calls; }

}  // namespace glmasr::cli
