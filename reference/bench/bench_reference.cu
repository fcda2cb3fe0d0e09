// bench_reference.cu — reproduces the numbers quoted in reference/README.md and in the kernels'
// file comments: the reference kernels at GLM-ASR-Nano shapes, both ladders, and whole
// Nano-shaped passes (encoder window, decoder prefill, one decode step as a CUDA graph)
// assembled from the launchers exactly as driver/src/model.cpp calls the ops.
//
//   build/reference_bench [kernels|ladders|model]     (no argument: all three)
//
// Method: CUDA events around each measured region, one untimed warm-up, the median of several
// runs; a 256 MiB memset before every run flushes L2, so weights come from DRAM as they do in a
// real decode step. Short kernels are timed as a run of launches over distinct weights (the way
// a decode step issues them) divided by the count, so launch latency overlaps as it does there.
// Weights are a constant bf16 pattern (timing does not depend on values); activations are
// uniform in [−1, 1]. Needs ~5 GB of GPU memory.
#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "../kernels.h"
#include "glmasr/cuda_check.h"

namespace {

using namespace glmasr::reference;

// (elems) bf16 filled with 0x3c3c ≈ 0.0115
bf16* weights(size_t elems) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, elems * sizeof(bf16)));
    CUDA_CHECK(cudaMemset(p, 0x3c, elems * sizeof(bf16)));
    return static_cast<bf16*>(p);
}

// (n) f32 uniform in [−1, 1]
float* activations(size_t n) {
    std::vector<float> host(n);
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (float& x : host) x = dist(rng);
    float* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, n * sizeof(float)));
    CUDA_CHECK(cudaMemcpy(p, host.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    return p;
}

int* iota_positions(int n) {
    std::vector<int> host(n);
    for (int i = 0; i < n; ++i) host[i] = i;
    int* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, n * sizeof(int)));
    CUDA_CHECK(cudaMemcpy(p, host.data(), n * sizeof(int), cudaMemcpyHostToDevice));
    return p;
}

// Median milliseconds of `run` over `reps` L2-flushed repetitions, after one warm-up.
double time_ms(cudaStream_t s, const std::function<void()>& run, int reps = 20) {
    constexpr size_t kFlushBytes = 256ull << 20;
    static void* flush = nullptr;
    if (!flush) CUDA_CHECK(cudaMalloc(&flush, kFlushBytes));
    run();
    CUDA_CHECK(cudaStreamSynchronize(s));
    cudaEvent_t begin, end;
    CUDA_CHECK(cudaEventCreate(&begin));
    CUDA_CHECK(cudaEventCreate(&end));
    std::vector<float> times;
    for (int i = 0; i < reps; ++i) {
        CUDA_CHECK(cudaMemsetAsync(flush, i, kFlushBytes, s));
        CUDA_CHECK(cudaEventRecord(begin, s));
        run();
        CUDA_CHECK(cudaEventRecord(end, s));
        CUDA_CHECK(cudaEventSynchronize(end));
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, begin, end));
        times.push_back(ms);
    }
    cudaEventDestroy(begin);
    cudaEventDestroy(end);
    std::sort(times.begin(), times.end());
    return times[times.size() / 2];
}

void bench_kernels(Context& ctx, cudaStream_t s) {
    float* x = activations(8192ull * 6144);
    float* out = activations(8192ull * 6144);
    float* out2 = activations(8192ull * 6144);
    bf16* w = weights(59264ull * 2048);  // lm_head-sized pool, sliced for smaller matrices
    float* bias = activations(65536);

    struct Shape {
        int M, N, K;
        const char* name;
    };
    for (Shape g : {Shape{1, 2048, 2048, "q/o"}, Shape{1, 512, 2048, "k/v"},
                    Shape{1, 2048, 6144, "down"}, Shape{1, 59264, 2048, "lm_head"},
                    Shape{4, 2048, 2048, "q, M=4"}, Shape{8, 2048, 2048, "q, M=8"}}) {
        const size_t mat = static_cast<size_t>(g.N) * g.K;
        const int copies = static_cast<int>(std::min<size_t>(10, 59264ull * 2048 / mat));
        const double ms =
            time_ms(s,
                    [&] {
                        for (int i = 0; i < copies; ++i)
                            gemv_bf16(out, x, w + i * mat, nullptr, nullptr, GemvNorm{}, g.M, g.N,
                                      g.K, GemvEpilogue::kBias, s);
                    }) /
            copies;
        printf("gemv %-8s %5d x %5d x %5d: %8.2f us  %6.0f GB/s\n", g.name, g.M, g.N, g.K, ms * 1e3,
               2.0 * g.N * g.K / ms / 1e6);
    }
    {
        const size_t mat = 6144ull * 2048;
        const int pairs = static_cast<int>(59264ull * 2048 / (2 * mat));
        const double ms =
            time_ms(s,
                    [&] {
                        for (int i = 0; i < pairs; ++i)
                            gemv_bf16(out, x, w + 2 * i * mat, w + (2 * i + 1) * mat, nullptr,
                                      GemvNorm{}, 1, 6144, 2048, GemvEpilogue::kSiluMul, s);
                    }) /
            pairs;
        printf("gemv gate+up+silu 1 x 6144 x 2048: %8.2f us  %6.0f GB/s\n", ms * 1e3,
               4.0 * 6144 * 2048 / ms / 1e6);
        const double ms_norm =
            time_ms(s,
                    [&] {
                        for (int i = 0; i < pairs; ++i)
                            gemv_bf16(out, x, w + 2 * i * mat, w + (2 * i + 1) * mat, nullptr,
                                      GemvNorm{bias, 1e-5f}, 1, 6144, 2048, GemvEpilogue::kSiluMul,
                                      s);
                    }) /
            pairs;
        printf("gemv rmsnorm+gate+up+silu 1 x 6144 x 2048: %8.2f us  %6.0f GB/s\n", ms_norm * 1e3,
               4.0 * 6144 * 2048 / ms_norm / 1e6);
    }
    for (Shape g : {Shape{1500, 1280, 1280, "enc q/k/v/o"}, Shape{1500, 5120, 1280, "enc fc1"},
                    Shape{1500, 1280, 5120, "enc fc2"}, Shape{375, 4096, 5120, "projector 1"},
                    Shape{400, 2048, 2048, "prefill q"}, Shape{400, 6144, 2048, "prefill gate"},
                    Shape{400, 2048, 6144, "prefill down"}}) {
        const double ms =
            time_ms(s, [&] { linear(ctx, out, x, w, bias, g.M, g.N, g.K, Epilogue::kNone, s); });
        printf("linear %-12s %5d x %5d x %5d: %8.2f us  %6.1f TFLOP/s\n", g.name, g.M, g.N, g.K,
               ms * 1e3, 2.0 * g.M * g.N * g.K / ms / 1e9);
    }
    double ms =
        time_ms(s, [&] { linear(ctx, out, x, w, bias, 1500, 5120, 1280, Epilogue::kGelu, s); });
    printf("linear_gelu enc fc1: %8.2f us\n", ms * 1e3);
    const bf16* normed = weights(1500ull * 1280);  // the encoder's bf16 rows (values do not matter)
    ms = time_ms(s, [&] {
        linear_gelu_linear(ctx, out, out2, normed, w, bias, w, bias, 1500, 5120, 1280, 1280, s);
    });
    printf("linear_gelu_linear enc MLP 1500 x 1280 -> 5120 -> 1280: %8.2f us  %6.1f TFLOP/s\n",
           ms * 1e3, 4.0 * 1500 * 5120 * 1280 / ms / 1e9);
    // fc1 and its GELU into fc2's bf16 operand: cuBLASLt and the GELU pass, and on Hopper the GELU
    // in the GEMM's epilogue (gemm_bias_gelu_sm90.cu)
    bf16* fc2_operand = reinterpret_cast<bf16*>(out2);
    ms = time_ms(s, [&] {
        gemm_cublas(ctx, out, normed, w, bias, 1500, 5120, 1280, false, s);
        gelu_to_bf16(fc2_operand, out, 1500 * 5120, s);
    });
    printf("fc1 + GELU 1500 x 5120 x 1280, cuBLASLt + the GELU pass: %8.2f us\n", ms * 1e3);
#if GLMASR_CUTLASS_GEMM
    if (gelu_epilogue_supported()) {
        ms = time_ms(s, [&] {
            gemm_bias_gelu_sm90(ctx, fc2_operand, normed, w, bias, 1500, 5120, 1280, s);
        });
        printf("fc1 + GELU 1500 x 5120 x 1280, the GELU epilogue (CUTLASS): %8.2f us\n", ms * 1e3);
    }
#endif
    ms = time_ms(s, [&] { conv1d(ctx, out, x, w, bias, 3000, 128, 1280, 3, 1, 1, 3000, s); });
    printf("conv1 3000 x 128 -> 1280: %8.2f us\n", ms * 1e3);
    ms = time_ms(s, [&] { conv1d(ctx, out, x, w, bias, 3000, 1280, 1280, 3, 2, 1, 1500, s); });
    printf("conv2 3000 x 1280 -> 1280, stride 2: %8.2f us  %6.1f TFLOP/s\n", ms * 1e3,
           2.0 * 1500 * 1280 * 3840 / ms / 1e9);
    ms = time_ms(s, [&] { convert_to_bf16(ctx.staging, x, 1500 * 5120, s); });
    printf("convert_to_bf16 1500 x 5120: %8.2f us  %6.0f GB/s\n", ms * 1e3,
           6.0 * 1500 * 5120 / ms / 1e6);
    ms = time_ms(s, [&] { add_layernorm(out, out2, x, bias, bias, 1500, 1280, 1e-5f, s); });
    printf("add_layernorm 1500 x 1280: %8.2f us  %6.0f GB/s\n", ms * 1e3,
           16.0 * 1500 * 1280 / ms / 1e6);
    // The encoder's residual add after o and fc2: in add_layernorm, as the driver runs it, or in
    // the product's epilogue (β = 1) before a plain LayerNorm, as a linear_residual with a bias
    // would (docs/performance.md, "Floors").
    {
        const bf16* operand = weights(1500ull * 5120);
        bf16* normed_rows = weights(1500ull * 1280);
        for (Shape g : {Shape{1500, 1280, 1280, "o"}, Shape{1500, 1280, 5120, "fc2"}}) {
            const double apart = time_ms(s, [&] {
                gemm_cublas(ctx, out2, operand, w, bias, g.M, g.N, g.K, false, s);
                add_layernorm(out, normed_rows, out2, bias, bias, g.M, g.N, 1e-5f, s);
            });
            const double in_epilogue = time_ms(s, [&] {
                gemm_cublas(ctx, out, operand, w, bias, g.M, g.N, g.K, true, s);
                layernorm(normed_rows, out, bias, bias, g.M, g.N, 1e-5f, s);
            });
            printf(
                "enc %-3s + residual + LayerNorm: add_layernorm %8.2f us, the add in the "
                "epilogue %8.2f us\n",
                g.name, apart * 1e3, in_epilogue * 1e3);
        }
    }
    ms = time_ms(s, [&] { rmsnorm(out2, x, bias, 1, 2048, 1e-5f, s); });
    printf("rmsnorm 1 x 2048: %8.2f us\n", ms * 1e3);
    ms = time_ms(s, [&] { gelu(out, x, 1500 * 5120, s); });
    printf("gelu 1500 x 5120: %8.2f us  %6.0f GB/s\n", ms * 1e3, 8.0 * 1500 * 5120 / ms / 1e6);
    ms = time_ms(s, [&] { argmax(ctx, reinterpret_cast<int*>(out2), x, 1, 59264, s); });
    printf("argmax 1 x 59264: %8.2f us\n", ms * 1e3);

    float *q = activations(2048), *k = activations(8192ull * 512), *v = activations(8192ull * 512);
    int* pos = iota_positions(8192);
    for (int p : {500, 4000, 8000}) {
        ms = time_ms(s,
                     [&] {
                         for (int i = 0; i < 10; ++i)
                             decode_attention(out, ctx.decode_partials, q, k, v, pos + p - 1, 8192,
                                              16, 4, 128, 0.088f, L2Prefetch{}, s);
                     }) /
             10;
        printf("decode attention, 16/4 heads x 128, position %d of 8192: %8.2f us  %6.0f GB/s\n", p,
               ms * 1e3, 2.0 * p * 512 * 4 / ms / 1e6);
    }
}

void bench_ladders(Context& ctx, cudaStream_t s) {
    const int M = 1500, N = 1280, K = 5120;
    float* out = activations(static_cast<size_t>(M) * N);
    bf16* w = weights(static_cast<size_t>(N) * K);
    float* bias = activations(N);
    for (GemmRung r :
         {GemmRung::naive, GemmRung::smem, GemmRung::regtile, GemmRung::wmma, GemmRung::cublas}) {
        const double ms = time_ms(
            s, [&] { gemm_for(r)(ctx, out, ctx.staging, w, bias, M, N, K, false, s); },
            r == GemmRung::naive ? 3 : 10);
        printf("gemm %-8s %d x %d x %d: %9.3f ms  %6.1f TFLOP/s\n", rung_name(r), M, N, K, ms,
               2.0 * M * N * K / ms / 1e9);
    }

    // Encoder self-attention (1500 × 1500, 20 heads × 64) and causal decoder prefill (16/4 × 128).
    const int T = 1500;
    float *q = activations(8192ull * 2048), *k = activations(8192ull * 512),
          *v = activations(8192ull * 512);
    float* o = activations(8192ull * 2048);
    float* scores = activations(20ull * T * T);
    int* pos = iota_positions(8192);
    const double flops = 4.0 * T * T * 64 * 20;
    double ms = time_ms(
        s,
        [&] {
            attention_scores(scores, q, k, nullptr, T, T, 20, 20, 64, 0.125f, s);
            softmax(scores, scores, 20 * T, T, s);
            attention_output(o, scores, k, T, T, 20, 20, 64, s);
        },
        5);
    printf("attention three_kernel, encoder: %8.3f ms\n", ms);
    ms = time_ms(s, [&] { flash_attention(o, q, k, k, nullptr, T, T, 20, 20, 64, 0.125f, s); });
    printf("attention flash_simt,   encoder: %8.3f ms  %6.1f TFLOP/s\n", ms, flops / ms / 1e9);
    // f32 k and v (converted by the kernel's first pass), then bf16 ones read in place (the
    // model's encoder); flash_bf16 is flash_mma on wgmma where the GPU has it.
    const AttentionPath chosen = ctx.attention;
    bf16 *k16 = weights(size_t{T} * 1280), *o16 = weights(size_t{T} * 1280);
    for (AttentionPath path :
         {AttentionPath::flash_split, AttentionPath::flash_mma, AttentionPath::flash_bf16}) {
        ctx.attention = path;
        const bool split = path == AttentionPath::flash_split;
        ms = time_ms(s, [&] {
            flash_attention_tc(ctx, o, q, k, k, nullptr, T, T, 20, 20, 64, 0.125f, split, s);
        });
        printf("attention %-11s encoder: %8.3f ms  %6.1f TFLOP/s\n", attention_name(path), ms,
               flops / ms / 1e9);
        if (split) continue;
        ms = time_ms(s, [&] {
            flash_attention_tc(ctx, o16, q, k16, k16, nullptr, T, T, 20, 20, 64, 0.125f, false, s);
        });
        printf("attention %-11s encoder, bf16 k/v/out in place: %8.3f ms  %6.1f TFLOP/s%s\n",
               attention_name(path), ms, flops / ms / 1e9,
               path == AttentionPath::flash_bf16 && ctx.wgmma_attention ? " (wgmma)" : "");
    }
    ctx.attention = chosen;
    for (int S : {400, 2000}) {
        const double causal_flops = 2.0 * S * S * 128 * 16;
        ms = time_ms(s,
                     [&] { flash_attention(o, q, k, v, pos, S, S + 100, 16, 4, 128, 0.088f, s); });
        printf("attention flash_simt,   prefill %4d: %8.3f ms  %6.1f TFLOP/s\n", S, ms,
               causal_flops / ms / 1e9);
        for (bool split : {false, true}) {
            ms = time_ms(s, [&] {
                flash_attention_tc(ctx, o, q, k, v, pos, S, S + 100, 16, 4, 128, 0.088f, split, s);
            });
            printf("attention %-12s prefill %4d: %8.3f ms  %6.1f TFLOP/s\n",
                   split ? "flash_split," : "flash_bf16,", S, ms, causal_flops / ms / 1e9);
        }
    }
}

// Nano-shaped passes built from the launchers exactly as driver/src/model.cpp calls the ops
// (docs/model.md: encoder 32 × 1280, 20 heads × 64, FFN 5120; decoder 28 × 2048, 16/4 heads
// × 128, FFN 6144, vocab 59264). Every layer has its own weights, so nothing stays in L2.
void bench_model(Context& ctx, cudaStream_t s) {
    // ---- decoder
    constexpr int kLayers = 28, kD = 2048, kHq = 16, kHkv = 4, kHd = 128, kKv = kHkv * kHd;
    constexpr int kFfn = 6144, kVocab = 59264, kCap = 1024, kRows = 512;
    struct Layer {
        bf16 *q, *k, *v, *o, *gate, *up, *down;
        float *norm1, *norm2, *k_cache, *v_cache;
    };
    std::vector<Layer> layers(kLayers);
    for (Layer& l : layers) {
        l.q =
            weights(size_t{kD + 2 * kKv} * kD);  // q, k, v back to back, as the driver places them
        l.k = l.q + size_t{kD} * kD;
        l.v = l.k + size_t{kKv} * kD;
        l.o = weights(size_t{kD} * kD);
        l.gate = weights(size_t{2 * kFfn} * kD);  // gate and up back to back, likewise
        l.up = l.gate + size_t{kFfn} * kD;
        l.down = weights(size_t{kD} * kFfn);
        l.norm1 = activations(kD);
        l.norm2 = activations(kD);
        l.k_cache = activations(size_t{kCap} * kKv);
        l.v_cache = activations(size_t{kCap} * kKv);
    }
    bf16* embed = weights(size_t{kVocab} * kD);  // also the lm_head, as in the checkpoint
    float* final_norm = activations(kD);
    float *x = activations(size_t{kRows} * kD), *normed = activations(size_t{kRows} * kD);
    float *q = activations(size_t{kRows} * kD), *attn = activations(size_t{kRows} * kD);
    float* gate = activations(size_t{kRows} * kFfn);
    float* logits = activations(kVocab);
    float *cos = activations(size_t{kCap} * kHd / 2), *sin = activations(size_t{kCap} * kHd / 2);
    rope_freqs(cos, sin, kCap, kHd / 2, 10000.0f, s);
    int* positions = iota_positions(kRows);
    int* ids = iota_positions(kRows);  // ids[kRows − 1] doubles as the decode step's token
    int* next_id = ids + kRows - 1;
    const float scale = 1.0f / sqrtf(static_cast<float>(kHd));

    auto decoder_layers = [&](int rows, const int* pos) {
        for (const Layer& l : layers) {
            const QkvRopeCacheArgs qkv{q,
                                       l.k_cache,
                                       l.v_cache,
                                       x,
                                       l.q,
                                       l.k,
                                       l.v,
                                       cos,
                                       sin,
                                       pos,
                                       rows,
                                       kD,
                                       kHq,
                                       kHkv,
                                       kHd,
                                       kHd / 2,
                                       kCap,
                                       kCap,
                                       GemvNorm{l.norm1, 1e-5f}};
            qkv_rope_cache(ctx, qkv, normed, s);
            attention(ctx, attn, q, l.k_cache, l.v_cache, pos, rows, kCap, kHq, kHkv, kHd, scale,
                      s);
            linear_residual(ctx, x, attn, l.o, rows, kD, kD, s);
            gate_up_silu(ctx, gate, nullptr, normed, x, GemvNorm{l.norm2, 1e-5f}, l.gate, l.up,
                         rows, kFfn, kD, s);
            linear_residual(ctx, x, gate, l.down, rows, kD, kFfn, s);
        }
        rmsnorm(normed, x, final_norm, rows, kD, 1e-5f, s);
    };
    auto logits_and_argmax = [&](int last_row) {
        linear(ctx, logits, normed + size_t{kD} * last_row, embed, nullptr, 1, kVocab, kD,
               Epilogue::kNone, s);
        argmax(ctx, next_id, logits, 1, kVocab, s);
    };

    constexpr int kPrompt = 400;
    double ms = time_ms(
        s,
        [&] {
            embedding_bf16(x, embed, ids, kPrompt, kD, kVocab, s);
            decoder_layers(kPrompt, positions);
            logits_and_argmax(kPrompt - 1);
        },
        5);
    printf("decoder prefill, %d tokens (attention %s): %8.3f ms\n", kPrompt,
           attention_name(ctx.attention), ms);

    // One decode step at position 500 of the cache, recorded once and replayed, as the driver does.
    const int* step_pos = positions + 500;
    auto step = [&] {
        embedding_bf16(x, embed, next_id, 1, kD, kVocab, s);
        decoder_layers(1, step_pos);
        logits_and_argmax(0);
    };
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    step();
    CUDA_CHECK(cudaStreamEndCapture(s, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    size_t nodes = 0;
    CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &nodes));
    constexpr double kDecoderWeightBytes = 2.94e9;
    ms = time_ms(
             s,
             [&] {
                 for (int i = 0; i < 10; ++i) CUDA_CHECK(cudaGraphLaunch(exec, s));
             },
             5) /
         10;
    printf("decode step, one CUDA graph of %zu kernels: %8.3f ms/token  (%.0f GB/s of weights)\n",
           nodes, ms, kDecoderWeightBytes / ms / 1e6);
    ms = time_ms(
             s,
             [&] {
                 for (int i = 0; i < 3; ++i) step();
             },
             3) /
         3;
    printf("decode step, launched one by one:       %8.3f ms/token\n", ms);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);

    // ---- encoder (one 30 s window) and projector
    constexpr int kEncLayers = 32, kE = 1280, kT = 1500, kMel = 128, kFrames = 3000, kEffn = 5120;
    constexpr int kHeads = 20, kEhd = 64, kTokens = kT / 4, kProj = 2 * kD;
    struct EncLayer {
        bf16 *q, *k, *v, *o, *fc1, *fc2;
        float* vec;  // stands in for every bias and norm vector of the layer
    };
    std::vector<EncLayer> enc(kEncLayers);
    for (EncLayer& l : enc) {
        l.q = weights(size_t{3 * kE} * kE);  // q, k, v back to back, as the driver places them
        l.k = l.q + size_t{kE} * kE;
        l.v = l.k + size_t{kE} * kE;
        l.o = weights(size_t{kE} * kE);
        l.fc1 = weights(size_t{kEffn} * kE);
        l.fc2 = weights(size_t{kE} * kEffn);
        l.vec = activations(kEffn);
    }
    bf16 *conv1_w = weights(size_t{kE} * kMel * 3), *conv2_w = weights(size_t{kE} * kE * 3);
    bf16 *proj1_w = weights(size_t{kProj} * kEffn), *proj2_w = weights(size_t{kD} * kProj);
    float *mel = activations(size_t{kFrames} * kMel),
          *conv1_out = activations(size_t{kFrames} * kE);
    float *ex = activations(size_t{kT} * kE), *en = activations(size_t{kT} * kE);
    float *eq = activations(size_t{kT} * kE), *ek = activations(size_t{kT} * kE),
          *ev = activations(size_t{kT} * kE);
    float *ea = activations(size_t{kT} * kE), *ep = activations(size_t{kT} * kE);
    float *effn = activations(size_t{kT} * kEffn),
          *proj_hidden = activations(size_t{kTokens} * kProj);
    float* proj_out = activations(size_t{kTokens} * kD);
    float *ecos = activations(size_t{kT} * 16), *esin = activations(size_t{kT} * 16);
    int* enc_pos = iota_positions(kT);
    rope_freqs(ecos, esin, kT, 16, 10000.0f, s);  // partial RoPE: 32 of 64 dims

    // The encoder and projector as model.cpp calls them, with the activations ops.h marks [act]
    // (normed rows, k, v, the attention's output) in f32 or, as the driver runs the reference by
    // default, in bf16 (float or bf16 pointers).
    auto encoder_with = [&](auto* normed, auto* k, auto* v, auto* attn) {
        conv1d(ctx, conv1_out, mel, conv1_w, enc[0].vec, kFrames, kMel, kE, 3, 1, 1, kFrames, s);
        gelu(conv1_out, conv1_out, static_cast<long long>(kFrames) * kE, s);
        conv1d(ctx, ex, conv1_out, conv2_w, enc[0].vec, kFrames, kE, kE, 3, 2, 1, kT, s);
        gelu(ex, ex, static_cast<long long>(kT) * kE, s);
        layernorm(normed, ex, enc[0].vec, enc[0].vec, kT, kE, 1e-5f, s);
        for (const EncLayer& l : enc) {
            qkv_rope(ctx, QkvRopeArgs{eq,      k,      v,      normed, l.q,  l.vec,   l.k,
                                      nullptr, l.v,    l.vec,  ecos,   esin, enc_pos, kT,
                                      kE,      kHeads, kHeads, kEhd,   16,   kT},
                     s);
            attention(ctx, attn, eq, k, v, nullptr, kT, kT, kHeads, kHeads, kEhd, 0.125f, s);
            linear(ctx, ep, attn, l.o, l.vec, kT, kE, kE, Epilogue::kNone, s);
            add_layernorm(ex, normed, ep, l.vec, l.vec, kT, kE, 1e-5f, s);
            linear_gelu_linear(ctx, ep, effn, normed, l.fc1, l.vec, l.fc2, l.vec, kT, kEffn, kE, kE,
                               s);
            add_layernorm(ex, normed, ep, l.vec, l.vec, kT, kE, 1e-5f, s);
        }
        linear_gelu_linear(ctx, proj_out, proj_hidden, normed, proj1_w, enc[0].vec, proj2_w,
                           enc[0].vec, kTokens, kProj, kD, kEffn, s);
    };
    auto encoder = [&] { encoder_with(en, ek, ev, ea); };
    bf16 *en16 = weights(size_t{kT} * kE), *ek16 = weights(size_t{kT} * kE),
         *ev16 = weights(size_t{kT} * kE);
    bf16* ea16 = weights(size_t{kT} * kE);
    auto encoder_bf16 = [&] { encoder_with(en16, ek16, ev16, ea16); };
    const AttentionPath chosen = ctx.attention;
    ctx.attention = AttentionPath::flash_bf16;
    printf(
        "encoder + projector, one 30 s window (attention flash_bf16, bf16 activations: the default): %8.3f ms\n",
        time_ms(s, encoder_bf16, 3));
    ctx.attention = AttentionPath::flash_mma;
    printf(
        "encoder + projector, one 30 s window (attention flash_mma, bf16 activations): %8.3f ms\n",
        time_ms(s, encoder_bf16, 3));
    for (AttentionPath path : {AttentionPath::flash_bf16, AttentionPath::flash_mma,
                               AttentionPath::flash_split, AttentionPath::flash_simt}) {
        ctx.attention = path;
        const double attn_ms = time_ms(
            s,
            [&] {
                for (int i = 0; i < kEncLayers; ++i)
                    attention(ctx, ea, eq, ek, ev, nullptr, kT, kT, kHeads, kHeads, kEhd, 0.125f,
                              s);
            },
            3);
        ms = time_ms(s, encoder, 3);
        printf(
            "encoder + projector, one 30 s window (attention %s, f32 activations): %8.3f ms, attention %8.3f ms of it\n",
            attention_name(path), ms, attn_ms);
    }
    ctx.attention = chosen;
}
}  // namespace

int main(int argc, char** argv) {
    const std::string what = argc > 1 ? argv[1] : "all";
    if (what != "all" && what != "kernels" && what != "ladders" && what != "model") {
        fprintf(stderr, "usage: reference_bench [kernels|ladders|model]\n");
        return 2;
    }
    try {
        cudaStream_t s;
        CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        Context& ctx = Context::get(s);
        if (what == "all" || what == "kernels") bench_kernels(ctx, s);
        if (what == "all" || what == "ladders") bench_ladders(ctx, s);
        if (what == "all" || what == "model") bench_model(ctx, s);
    } catch (const glmasr::Error& e) {
        fprintf(stderr, "reference_bench: %s\n", e.what());
        return e.exit_code();
    }
    return 0;
}
