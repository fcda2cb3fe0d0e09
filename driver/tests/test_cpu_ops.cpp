// test_cpu_ops.cpp — the cpu track (driver/cpu/), the oracle every GPU track is judged against,
// checked on its own: small cases worked out by hand from the PyTorch definitions, slightly
// larger random cases against straightforward double-precision loops written here, contract
// violations (wrong dtype, shape, device, out-of-range index) that must throw glmasr::Error
// naming the op, the cpu op table, and the dispatch.h compositions run on it.
//
//   cmake --build build --target test_cpu_ops && build/tests/test_cpu_ops
//   build/tests/test_cpu_ops --gtest_filter='Attention*'
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#ifdef _OPENMP
#include <omp.h>
#endif

#include "glmasr/dispatch.h"
#include "glmasr/error.h"
#include "glmasr/track.h"

namespace glmasr {
namespace {

const Ops& ops() { return cpu_track().ops; }

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// ------------------------------------------------------------------ helpers

// Host views of test vectors (the vectors own the memory). A view may cover only the front of
// its vector, so that one buffer can be offered to an op under a wrong shape.
Tensor f32(std::vector<float>& v, std::initializer_list<int64_t> dims) {
    Tensor t(v.data(), DType::F32, Device::Host, dims);
    if (t.numel() > static_cast<int64_t>(v.size())) throw std::logic_error("test: view too large");
    return t;
}
Tensor i32(std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
    Tensor t(v.data(), DType::I32, Device::Host, dims);
    if (t.numel() > static_cast<int64_t>(v.size())) throw std::logic_error("test: view too large");
    return t;
}

std::vector<float> random_vector(size_t n, uint32_t seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, scale);
    std::vector<float> v(n);
    for (float& x : v) x = dist(rng);
    return v;
}

// |got − want| ≤ atol + rtol·|want| element by element; the first mismatches are reported.
::testing::AssertionResult near(const std::vector<float>& got, const std::vector<double>& want,
                                double rtol = 1e-6, double atol = 1e-6) {
    if (got.size() != want.size())
        return ::testing::AssertionFailure() << "size " << got.size() << " vs " << want.size();
    int bad = 0;
    std::string report;
    for (size_t i = 0; i < got.size(); ++i) {
        const double err = std::abs(got[i] - want[i]);
        if (!(err <= atol + rtol * std::abs(want[i]))) {
            if (++bad <= 5)
                report += "\n  [" + std::to_string(i) + "] got " + std::to_string(got[i]) +
                          ", want " + std::to_string(want[i]);
        }
    }
    if (bad) return ::testing::AssertionFailure() << bad << " mismatches:" << report;
    return ::testing::AssertionSuccess();
}

// `call` must throw glmasr::Error whose message names `op` (a contract violation).
void expect_contract_error(const char* op, const std::function<void()>& call) {
    try {
        call();
        ADD_FAILURE() << op << ": the call was accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find(op), std::string::npos)
            << "message does not name " << op << ": " << e.what();
    }
}

// ------------------------------------------------------------------ direct references (double)

std::vector<double> ref_linear(const std::vector<float>& x, const std::vector<float>& w,
                               const std::vector<float>* b, int64_t M, int64_t N, int64_t K) {
    std::vector<double> y(M * N);
    for (int64_t m = 0; m < M; ++m)
        for (int64_t n = 0; n < N; ++n) {
            double acc = b ? (*b)[n] : 0.0;
            for (int64_t k = 0; k < K; ++k) acc += double(x[m * K + k]) * w[n * K + k];
            y[m * N + n] = acc;
        }
    return y;
}

double ref_gelu(double x) { return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0))); }

// softmax(scale · q kᵀ, causal mask from positions) · v for every head, in double.
std::vector<double> ref_attention(const std::vector<float>& q, const std::vector<float>& k,
                                  const std::vector<float>& v, const std::vector<int32_t>* pos,
                                  int64_t Tq, int64_t Tk, int64_t Hq, int64_t Hkv, int64_t D,
                                  double scale) {
    std::vector<double> out(Tq * Hq * D, 0.0);
    for (int64_t h = 0; h < Hq; ++h) {
        const int64_t g = h / (Hq / Hkv);
        for (int64_t i = 0; i < Tq; ++i) {
            const int64_t visible = pos ? (*pos)[i] + 1 : Tk;
            std::vector<double> s(visible);
            double max = -INFINITY, sum = 0.0;
            for (int64_t j = 0; j < visible; ++j) {
                double dot = 0.0;
                for (int64_t d = 0; d < D; ++d)
                    dot += double(q[(i * Hq + h) * D + d]) * k[(j * Hkv + g) * D + d];
                s[j] = scale * dot;
                max = std::max(max, s[j]);
            }
            for (double& x : s) sum += (x = std::exp(x - max));
            for (int64_t j = 0; j < visible; ++j)
                for (int64_t d = 0; d < D; ++d)
                    out[(i * Hq + h) * D + d] += s[j] / sum * v[(j * Hkv + g) * D + d];
        }
    }
    return out;
}

// ------------------------------------------------------------------ linear

TEST(Linear, HandComputedWithAndWithoutBias) {
    std::vector<float> x = {1, 2}, w = {1, 0, 0, 1, 1, 1}, b = {0.5f, 0, -1}, y(3);
    ops().linear(f32(y, {1, 3}), f32(x, {1, 2}), f32(w, {3, 2}), f32(b, {3}), nullptr);
    EXPECT_EQ(y, (std::vector<float>{1.5f, 2.0f, 2.0f}));
    ops().linear(f32(y, {1, 3}), f32(x, {1, 2}), f32(w, {3, 2}), Tensor{}, nullptr);
    EXPECT_EQ(y, (std::vector<float>{1.0f, 2.0f, 3.0f}));
}

TEST(Linear, AccumulatesInDouble) {
    // 1e8 + 1 − 1e8: an f32 running sum loses the 1 (1e8 + 1 rounds to 1e8); the oracle must not.
    std::vector<float> x = {1e8f, 1.0f, -1e8f}, w = {1, 1, 1}, y(1);
    ops().linear(f32(y, {1, 1}), f32(x, {1, 3}), f32(w, {1, 3}), Tensor{}, nullptr);
    EXPECT_EQ(y[0], 1.0f);
}

TEST(Linear, RandomMatchesDirectLoop) {
    const int64_t M = 7, N = 13, K = 37;  // K not a multiple of the dot product's lanes
    std::vector<float> x = random_vector(M * K, 1), w = random_vector(N * K, 2),
                       b = random_vector(N, 3);
    std::vector<float> y(M * N);
    ops().linear(f32(y, {M, N}), f32(x, {M, K}), f32(w, {N, K}), f32(b, {N}), nullptr);
    EXPECT_TRUE(near(y, ref_linear(x, w, &b, M, N, K)));
}

#ifdef _OPENMP
TEST(Linear, SameBitsForAnyThreadCount) {
    const int64_t M = 33, N = 17, K = 301;
    std::vector<float> x = random_vector(M * K, 4), w = random_vector(N * K, 5);
    std::vector<float> y1(M * N), y2(M * N);
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    ops().linear(f32(y1, {M, N}), f32(x, {M, K}), f32(w, {N, K}), Tensor{}, nullptr);
    omp_set_num_threads(3);
    ops().linear(f32(y2, {M, N}), f32(x, {M, K}), f32(w, {N, K}), Tensor{}, nullptr);
    omp_set_num_threads(threads);
    EXPECT_EQ(y1, y2);
}
#endif

TEST(Linear, RejectsContractViolations) {
    std::vector<float> x(6), w(6), b(3), y(6);
    std::vector<int32_t> xi(6);
    const Tensor X = f32(x, {2, 3}), W = f32(w, {2, 3}), Y = f32(y, {2, 2});
    expect_contract_error("linear", [&] {
        ops().linear(Y, i32(xi, {2, 3}), W, Tensor{}, nullptr);
    });
    expect_contract_error("linear", [&] { ops().linear(Y, X, f32(w, {3, 2}), Tensor{}, nullptr); });
    expect_contract_error("linear", [&] { ops().linear(f32(y, {3, 2}), X, W, Tensor{}, nullptr); });
    expect_contract_error("linear", [&] { ops().linear(Y, X, W, f32(b, {3}), nullptr); });
    expect_contract_error("linear", [&] { ops().linear(Y, f32(x, {6}), W, Tensor{}, nullptr); });
    expect_contract_error("linear", [&] {
        ops().linear(Y, Tensor(x.data(), DType::F32, Device::Cuda, {2, 3}), W, Tensor{}, nullptr);
    });
}

// ------------------------------------------------------------------ conv1d

TEST(Conv1d, StrideTwoPaddingOneByHand) {
    // x(4, 1) = 1 2 3 4, kernel 1 10 100, bias 0.5, stride 2, padding 1: T_out = (4+2−3)/2+1 = 2.
    //   t = 0 sees x[−1], x[0], x[1] = 0, 1, 2  → 0·1 + 1·10 + 2·100 + 0.5 = 210.5
    //   t = 1 sees x[1], x[2], x[3] = 2, 3, 4   → 2·1 + 3·10 + 4·100 + 0.5 = 432.5
    std::vector<float> x = {1, 2, 3, 4}, w = {1, 10, 100}, b = {0.5f}, y(2);
    ops().conv1d(f32(y, {2, 1}), f32(x, {4, 1}), f32(w, {1, 1, 3}), f32(b, {1}), 2, 1, nullptr);
    EXPECT_EQ(y, (std::vector<float>{210.5f, 432.5f}));
    // Stride 1, padding 1 keeps the length; the last output sees x[2], x[3], x[4] = 3, 4, 0.
    std::vector<float> y4(4);
    ops().conv1d(f32(y4, {4, 1}), f32(x, {4, 1}), f32(w, {1, 1, 3}), Tensor{}, 1, 1, nullptr);
    EXPECT_EQ(y4, (std::vector<float>{210, 321, 432, 43}));
}

TEST(Conv1d, ChannelsMatchDirectLoop) {
    // Time-major x(T_in, C_in), PyTorch weight(C_out, C_in, K): channel and tap order matter.
    const int64_t T_in = 9, C_in = 3, C_out = 2, K = 3, stride = 2, pad = 1;
    const int64_t T_out = (T_in + 2 * pad - K) / stride + 1;  // 5
    std::vector<float> x = random_vector(T_in * C_in, 6), w = random_vector(C_out * C_in * K, 7);
    std::vector<float> b = {0.25f, -1.0f}, y(T_out * C_out);
    ops().conv1d(f32(y, {T_out, C_out}), f32(x, {T_in, C_in}), f32(w, {C_out, C_in, K}),
                 f32(b, {C_out}), stride, pad, nullptr);
    std::vector<double> want(T_out * C_out);
    for (int64_t t = 0; t < T_out; ++t)
        for (int64_t o = 0; o < C_out; ++o) {
            double acc = b[o];
            for (int64_t c = 0; c < C_in; ++c)
                for (int64_t j = 0; j < K; ++j) {
                    const int64_t src = t * stride + j - pad;
                    if (src >= 0 && src < T_in)
                        acc += double(w[(o * C_in + c) * K + j]) * x[src * C_in + c];
                }
            want[t * C_out + o] = acc;
        }
    EXPECT_TRUE(near(y, want));
}

TEST(Conv1d, RejectsContractViolations) {
    std::vector<float> x(8), w(6), y(2);
    const Tensor X = f32(x, {4, 2}), W = f32(w, {1, 2, 3});
    expect_contract_error("conv1d", [&] {
        ops().conv1d(f32(y, {2, 1}), X, f32(w, {2, 3}), Tensor{}, 2, 1, nullptr);
    });
    expect_contract_error("conv1d", [&] {
        ops().conv1d(f32(y, {1, 2}), X, W, Tensor{}, 2, 1, nullptr);
    });
    expect_contract_error("conv1d", [&] {
        ops().conv1d(f32(y, {2, 1}), X, W, Tensor{}, 0, 1, nullptr);
    });
    expect_contract_error("conv1d", [&] {
        ops().conv1d(f32(y, {2, 1}), f32(x, {2, 4}), W, Tensor{}, 2, 1, nullptr);
    });
}

// ------------------------------------------------------------------ layernorm, rmsnorm

TEST(LayerNorm, OneToFourByHand) {
    // mean 2.5, biased variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25 (unbiased would be 5/3).
    std::vector<float> x = {1, 2, 3, 4}, w = {1, 2, 1, 1}, b = {0, 0, 1, -1}, y(4);
    const float eps = 1e-5f;
    ops().layernorm(f32(y, {1, 4}), f32(x, {1, 4}), f32(w, {4}), f32(b, {4}), eps, nullptr);
    const double s = std::sqrt(1.25 + double(eps));
    EXPECT_TRUE(near(y, {-1.5 / s, 2 * -0.5 / s, 0.5 / s + 1, 1.5 / s - 1}));
    // Without eps: ±1.3416408, ±0.4472136 (= ±1.5/√1.25, ±0.5/√1.25).
    std::vector<float> ones = {1, 1, 1, 1}, zeros = {0, 0, 0, 0};
    ops().layernorm(f32(y, {1, 4}), f32(x, {1, 4}), f32(ones, {4}), f32(zeros, {4}), 0.0f, nullptr);
    EXPECT_TRUE(near(y, {-1.3416407865, -0.4472135955, 0.4472135955, 1.3416407865}));
}

TEST(LayerNorm, LargeOffsetDoesNotCancel) {
    // 10001..10004 normalise exactly like 1..4: the two-pass variance has no E[x²] − mean².
    std::vector<float> x = {10001, 10002, 10003, 10004, 1, 2, 3, 4}, w = {1, 1, 1, 1},
                       b = {0, 0, 0, 0}, y(8);
    ops().layernorm(f32(y, {2, 4}), f32(x, {2, 4}), f32(w, {4}), f32(b, {4}), 0.0f, nullptr);
    for (int i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y[i], y[4 + i]);
}

TEST(LayerNorm, Violations) {
    std::vector<float> x = {1, 2, 3, 4}, w = {1, 1, 1, 1}, b = {0, 0, 0, 0}, y(4);
    // Not in place (ops.h): out may not be x.
    expect_contract_error("layernorm", [&] {
        ops().layernorm(f32(x, {1, 4}), f32(x, {1, 4}), f32(w, {4}), f32(b, {4}), 1e-5f, nullptr);
    });
    expect_contract_error("layernorm", [&] {
        ops().layernorm(f32(y, {1, 4}), f32(x, {1, 4}), f32(w, {4}), Tensor{}, 1e-5f, nullptr);
    });
    expect_contract_error("layernorm", [&] {
        ops().layernorm(f32(y, {1, 4}), f32(x, {1, 4}), f32(w, {2, 2}), f32(b, {4}), 1e-5f,
                        nullptr);
    });
    expect_contract_error("layernorm", [&] {
        ops().layernorm(f32(y, {2, 2}), f32(x, {1, 4}), f32(w, {4}), f32(b, {4}), 1e-5f, nullptr);
    });
}

TEST(RMSNorm, OneToFourByHand) {
    // mean(x²) = (1 + 4 + 9 + 16) / 4 = 7.5; out = x / √(7.5 + eps) · w. No mean subtraction.
    std::vector<float> x = {1, 2, 3, 4, -2, 0, 0, 0}, w = {1, 0.5f, 2, 1}, y(8);
    const float eps = 1e-5f;
    ops().rmsnorm(f32(y, {2, 4}), f32(x, {2, 4}), f32(w, {4}), eps, nullptr);
    const double r0 = std::sqrt(7.5 + double(eps)), r1 = std::sqrt(1.0 + double(eps));
    EXPECT_TRUE(near(y, {1 / r0, 1 / r0, 6 / r0, 4 / r0, -2 / r1, 0, 0, 0}));
}

TEST(RMSNorm, ZeroRowStaysZeroAndViolations) {
    // eps keeps an all-zero row finite: 0 · rsqrt(0 + eps) = 0.
    std::vector<float> x(4, 0.0f), w = {1, 1, 1, 1}, y(4, kNaN);
    ops().rmsnorm(f32(y, {1, 4}), f32(x, {1, 4}), f32(w, {4}), 1e-5f, nullptr);
    EXPECT_EQ(y, x);
    expect_contract_error("rmsnorm", [&] {
        ops().rmsnorm(f32(y, {1, 4}), f32(x, {1, 4}), f32(w, {1, 4}), 1e-5f, nullptr);
    });
    expect_contract_error("rmsnorm", [&] {
        ops().rmsnorm(f32(y, {4, 1}), f32(x, {1, 4}), f32(w, {4}), 1e-5f, nullptr);
    });
}

// ------------------------------------------------------------------ gelu, silu_mul, add

TEST(Gelu, ExactErfForm) {
    // Φ(1) = 0.8413447460685429; the tanh approximation gives 0.8411920 at 1 and is rejected.
    std::vector<float> x = {1, -1, 0, 3, -8}, y(5);
    ops().gelu(f32(y, {5}), f32(x, {5}), nullptr);
    EXPECT_NEAR(y[0], 0.8413447460685429, 1e-7);
    EXPECT_NEAR(y[1], -0.15865525393145707, 1e-7);
    EXPECT_EQ(y[2], 0.0f);
    EXPECT_NEAR(y[3], 2.9959502, 1e-6);
    EXPECT_NEAR(y[4], 0.0, 1e-13);                  // −8·Φ(−8) ≈ −5e-15
    ops().gelu(f32(x, {5}), f32(x, {5}), nullptr);  // in place
    EXPECT_EQ(x, y);
    std::vector<float> z(4);
    expect_contract_error("gelu", [&] { ops().gelu(f32(z, {4}), f32(y, {5}), nullptr); });
}

TEST(SiluMul, ByHandAndInPlace) {
    // silu(1)·2 = 2/(1+e⁻¹) = 1.4621171572600098; silu(−2)·1 = −2/(1+e²) = −0.23840584404423515.
    std::vector<float> g = {1, -2, 0, 30}, u = {2, 1, 5, -1}, y(4);
    ops().silu_mul(f32(y, {2, 2}), f32(g, {2, 2}), f32(u, {2, 2}), nullptr);
    EXPECT_TRUE(near(y, {1.4621171572600098, -0.23840584404423515, 0.0, -30.0}));
    ops().silu_mul(f32(u, {2, 2}), f32(g, {2, 2}), f32(u, {2, 2}), nullptr);  // out = up
    EXPECT_EQ(u, y);
    expect_contract_error("silu_mul", [&] {
        ops().silu_mul(f32(y, {2, 2}), f32(g, {2, 2}), f32(u, {4, 1}), nullptr);
    });
}

TEST(Add, ElementwiseInPlaceAndShapes) {
    std::vector<float> a = {1, 2, 3, 4}, b = {0.5f, -2, 10, 0}, y(4);
    ops().add(f32(y, {2, 2}), f32(a, {2, 2}), f32(b, {2, 2}), nullptr);
    EXPECT_EQ(y, (std::vector<float>{1.5f, 0, 13, 4}));
    ops().add(f32(a, {2, 2}), f32(a, {2, 2}), f32(b, {2, 2}), nullptr);
    EXPECT_EQ(a, y);
    expect_contract_error("add", [&] {
        ops().add(f32(y, {2, 2}), f32(a, {2, 2}), f32(b, {4}), nullptr);
    });
    expect_contract_error("add", [&] {
        ops().add(f32(y, {4, 1}), f32(a, {2, 2}), f32(b, {2, 2}), nullptr);
    });
}

// ------------------------------------------------------------------ softmax

TEST(Softmax, ByHandWithMaskedEntries) {
    std::vector<float> x = {1,     2,     3,       // e^−2, e^−1, 1 normalised
                            0,     -kInf, 0,       // masked middle → exactly 0
                            1000,  1000,  1000,    // exp(1000) overflows without max subtraction
                            -kInf, -kInf, -kInf};  // nothing visible: zeros (contract)
    std::vector<float> y(12, kNaN);
    ops().softmax(f32(y, {4, 3}), f32(x, {4, 3}), nullptr);
    EXPECT_TRUE(near(y, {0.09003057317038046, 0.24472847105479764, 0.6652409557748219, 0.5, 0, 0.5,
                         1.0 / 3, 1.0 / 3, 1.0 / 3, 0, 0, 0}));
    EXPECT_EQ(y[4], 0.0f);
    for (int i = 9; i < 12; ++i) EXPECT_EQ(y[i], 0.0f);
    ops().softmax(f32(x, {4, 3}), f32(x, {4, 3}), nullptr);  // in place
    EXPECT_EQ(x, y);
}

TEST(Softmax, NaNPoisonsItsRowOnly) {
    std::vector<float> x = {kNaN, -kInf, 0, 1}, y(4);
    ops().softmax(f32(y, {2, 2}), f32(x, {2, 2}), nullptr);
    EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[1]));
    EXPECT_TRUE(near({y[2], y[3]}, {1 / (1 + std::exp(1.0)), 1 / (1 + std::exp(-1.0))}));
    expect_contract_error("softmax", [&] { ops().softmax(f32(y, {4}), f32(x, {2, 2}), nullptr); });
}

// ------------------------------------------------------------------ rope

TEST(Rope, FreqsAtPositionOne) {
    // rotary_dim 4 (half 2), theta 10000: inv_freq = 1, 10000^(−2/4) = 0.01.
    std::vector<float> c(6), s(6);
    ops().rope_freqs(f32(c, {3, 2}), f32(s, {3, 2}), 10000.0f, nullptr);
    EXPECT_TRUE(
        near(c, {1, 1, std::cos(1.0), std::cos(0.01), std::cos(2.0), std::cos(0.02)}, 1e-7, 1e-7));
    EXPECT_TRUE(
        near(s, {0, 0, std::sin(1.0), std::sin(0.01), std::sin(2.0), std::sin(0.02)}, 1e-7, 1e-7));
}

TEST(Rope, FreqsFollowF32AnglesOfTheEncoder) {
    // The encoder's table: 1500 positions, rotary_dim 32. The angle is p·inv_freq rounded to f32
    // as in HF, so against exact math the error grows with the angle (a few f32 ulps of it).
    const int64_t P = 1500, half = 16;
    std::vector<float> c(P * half), s(P * half);
    ops().rope_freqs(f32(c, {P, half}), f32(s, {P, half}), 10000.0f, nullptr);
    for (int64_t p = 0; p < P; p += 37)
        for (int64_t j = 0; j < half; ++j) {
            const double angle = double(p) * std::pow(10000.0, -2.0 * double(j) / double(2 * half));
            const double tol = 1e-7 + angle * 4e-7;
            ASSERT_NEAR(c[p * half + j], std::cos(angle), tol) << "p " << p << " j " << j;
            ASSERT_NEAR(s[p * half + j], std::sin(angle), tol) << "p " << p << " j " << j;
            // And exactly HF's f32 pipeline: cos of the f32 angle, correctly rounded.
            const float inv_freq = 1.0f / std::pow(10000.0f, float(2 * j) / float(2 * half));
            const float angle32 = float(p) * inv_freq;
            ASSERT_EQ(c[p * half + j], float(std::cos(double(angle32))));
        }
}

TEST(Rope, PartialHalfSplitRotationAtPositionOne) {
    // 2 heads of head_dim 6, rotary_dim 4: pairs (0, 2) and (1, 3) rotate, dims 4, 5 pass through.
    std::vector<float> c(6), s(6);
    ops().rope_freqs(f32(c, {3, 2}), f32(s, {3, 2}), 10000.0f, nullptr);
    std::vector<float> x = {1, 2, 3, 4, 5, 6, -1, 0.5f, 2, -3, 7, 8,   // token 0 at position 1
                            1, 2, 3, 4, 5, 6, 9,  9,    9, 9,  9, 9};  // token 1 at position 0
    std::vector<int32_t> pos = {1, 0};
    ops().rope_apply(f32(x, {2, 12}), f32(c, {3, 2}), f32(s, {3, 2}), i32(pos, {2}), 2, nullptr);
    const double c0 = std::cos(1.0), s0 = std::sin(1.0), c1 = std::cos(0.01), s1 = std::sin(0.01);
    EXPECT_TRUE(near(x,
                     {1 * c0 - 3 * s0,
                      2 * c1 - 4 * s1,
                      3 * c0 + 1 * s0,
                      4 * c1 + 2 * s1,
                      5,
                      6,
                      -1 * c0 - 2 * s0,
                      0.5 * c1 + 3 * s1,
                      2 * c0 - 1 * s0,
                      -3 * c1 + 0.5 * s1,
                      7,
                      8,
                      1,
                      2,
                      3,
                      4,
                      5,
                      6,
                      9,
                      9,
                      9,
                      9,
                      9,
                      9},
                     1e-6, 1e-6));
}

TEST(Rope, RejectsContractViolations) {
    std::vector<float> c(6), s(6), x(12);
    std::vector<int32_t> pos = {3, 0}, ok = {1, 0};
    const Tensor C = f32(c, {3, 2}), S = f32(s, {3, 2}), X = f32(x, {2, 6});
    expect_contract_error("rope_apply", [&] {
        ops().rope_apply(X, C, S, i32(pos, {2}), 1, nullptr);
    });  // position 3 ≥ P
    expect_contract_error("rope_apply",
                          [&] { ops().rope_apply(X, C, S, i32(ok, {2}), 4, nullptr); });  // 6 % 4
    expect_contract_error("rope_apply", [&] {
        ops().rope_apply(X, C, S, i32(ok, {2}), 2, nullptr);
    });  // head_dim 3 < 4
    expect_contract_error("rope_apply", [&] {
        ops().rope_apply(X, C, f32(s, {2, 3}), i32(ok, {2}), 1, nullptr);
    });
    expect_contract_error("rope_freqs", [&] {
        ops().rope_freqs(C, f32(s, {2, 3}), 10000.0f, nullptr);
    });
}

// ------------------------------------------------------------------ attention

TEST(Attention, TinyByHand) {
    // q = (1, 0); keys (1, 0), (0, 1); scale 1 → scores 1, 0 → probs e/(e+1), 1/(e+1).
    std::vector<float> q = {1, 0}, k = {1, 0, 0, 1}, v = {1, 2, 3, 4}, scores(2), out(2);
    ops().attention_scores(f32(scores, {1, 1, 2}), f32(q, {1, 2}), f32(k, {2, 2}), Tensor{}, 1, 1,
                           1.0f, nullptr);
    EXPECT_EQ(scores, (std::vector<float>{1, 0}));
    ops().softmax(f32(scores, {1, 2}), f32(scores, {1, 2}), nullptr);
    const double p0 = std::exp(1.0) / (std::exp(1.0) + 1), p1 = 1 - p0;  // 0.7310586, 0.2689414
    ops().attention_output(f32(out, {1, 2}), f32(scores, {1, 1, 2}), f32(v, {2, 2}), 1, 1, nullptr);
    EXPECT_TRUE(near(out, {p0 * 1 + p1 * 3, p0 * 2 + p1 * 4}));
}

TEST(Attention, GqaCausalScoresMatchDirectLoop) {
    // 2 query heads share 1 KV head; causal positions 0..2 over a 4-row cache whose last row was
    // never written (NaN): hidden scores are exactly −inf and the NaN row is never read.
    const int64_t Tq = 3, Tk = 4, Hq = 2, Hkv = 1, D = 4;
    std::vector<float> q = random_vector(Tq * Hq * D, 8), k = random_vector(Tk * Hkv * D, 9);
    for (int64_t d = 0; d < D; ++d) k[3 * D + d] = kNaN;
    std::vector<int32_t> pos = {0, 1, 2};
    std::vector<float> scores(Hq * Tq * Tk, 0.0f);
    const float scale = 0.5f;
    ops().attention_scores(f32(scores, {Hq, Tq, Tk}), f32(q, {Tq, Hq * D}), f32(k, {Tk, Hkv * D}),
                           i32(pos, {Tq}), int(Hq), int(Hkv), scale, nullptr);
    for (int64_t h = 0; h < Hq; ++h)
        for (int64_t i = 0; i < Tq; ++i)
            for (int64_t j = 0; j < Tk; ++j) {
                const float got = scores[(h * Tq + i) * Tk + j];
                if (j > pos[i]) {
                    EXPECT_EQ(got, -kInf) << h << " " << i << " " << j;
                    continue;
                }
                double dot = 0;
                for (int64_t d = 0; d < D; ++d)
                    dot += double(q[(i * Hq + h) * D + d]) * k[j * D + d];
                EXPECT_NEAR(got, scale * dot, 1e-6) << h << " " << i << " " << j;
            }
}

TEST(Attention, HeadGroupsUseTheirOwnKvHead) {
    // Hq = 4, Hkv = 2: heads 0, 1 read KV head 0 and heads 2, 3 read KV head 1. A single key
    // makes every probability 1, so each head's output is exactly its KV head's v row.
    const int64_t Hq = 4, Hkv = 2, D = 2;
    std::vector<float> q = random_vector(Hq * D, 10), k = random_vector(Hkv * D, 11);
    std::vector<float> v = {1, 2, 30, 40}, scratch(Hq), out(Hq * D);
    run_attention(ops(), f32(out, {1, Hq * D}), f32(q, {1, Hq * D}), f32(k, {1, Hkv * D}),
                  f32(v, {1, Hkv * D}), Tensor{}, f32(scratch, {Hq, 1, 1}), int(Hq), int(Hkv), 1.0f,
                  nullptr);
    EXPECT_EQ(out, (std::vector<float>{1, 2, 1, 2, 30, 40, 30, 40}));
}

TEST(Attention, RunAttentionMatchesDirectLoop) {
    struct Case {
        int64_t Tq, Tk, Hq, Hkv, D;
        bool causal;
        int first;
    };
    for (const Case& c : {Case{5, 5, 4, 2, 3, false, 0},    // bidirectional (encoder)
                          Case{3, 9, 4, 1, 8, true, 2},     // causal prefill over a cache
                          Case{1, 7, 2, 2, 5, true, 5}}) {  // one decode step
        SCOPED_TRACE("Tq " + std::to_string(c.Tq) + " causal " + std::to_string(c.causal));
        std::vector<float> q = random_vector(c.Tq * c.Hq * c.D, 12);
        std::vector<float> k = random_vector(c.Tk * c.Hkv * c.D, 13),
                           v = random_vector(c.Tk * c.Hkv * c.D, 14);
        std::vector<int32_t> pos(c.Tq);
        for (int64_t i = 0; i < c.Tq; ++i) pos[i] = int32_t(c.first + i);
        if (c.causal)  // cache rows past the last position were never written
            for (int64_t e = (c.first + c.Tq) * c.Hkv * c.D; e < c.Tk * c.Hkv * c.D; ++e)
                k[e] = v[e] = kNaN;
        std::vector<float> scratch(c.Hq * c.Tq * c.Tk), out(c.Tq * c.Hq * c.D);
        const float scale = 1.0f / std::sqrt(float(c.D));
        run_attention(ops(), f32(out, {c.Tq, c.Hq * c.D}), f32(q, {c.Tq, c.Hq * c.D}),
                      f32(k, {c.Tk, c.Hkv * c.D}), f32(v, {c.Tk, c.Hkv * c.D}),
                      c.causal ? i32(pos, {c.Tq}) : Tensor{}, f32(scratch, {c.Hq, c.Tq, c.Tk}),
                      int(c.Hq), int(c.Hkv), scale, nullptr);
        EXPECT_TRUE(near(
            out,
            ref_attention(q, k, v, c.causal ? &pos : nullptr, c.Tq, c.Tk, c.Hq, c.Hkv, c.D, scale),
            1e-5, 1e-6));
    }
}

TEST(Attention, RejectsContractViolations) {
    // q(Tq 2, 6): 2 query heads of 3, or 3 of 2; k and v rows (Tk 2, 3): 1 KV head of 3.
    std::vector<float> q(12), kv(6), scores(12), out(12);
    std::vector<int32_t> pos = {0, 2};
    const Tensor Q = f32(q, {2, 6}), KV = f32(kv, {2, 3});
    expect_contract_error("attention_scores", [&] {  // 3 query heads, 2 KV heads: not a group
        ops().attention_scores(f32(scores, {3, 2, 2}), Q, KV, Tensor{}, 3, 2, 1.0f, nullptr);
    });
    expect_contract_error("attention_scores", [&] {  // kv width 3 ≠ 1 head × head_dim 2
        ops().attention_scores(f32(scores, {3, 2, 2}), Q, KV, Tensor{}, 3, 1, 1.0f, nullptr);
    });
    expect_contract_error("attention_scores", [&] {  // position 2 needs 3 cache rows, k has 2
        ops().attention_scores(f32(scores, {2, 2, 2}), Q, KV, i32(pos, {2}), 2, 1, 1.0f, nullptr);
    });
    expect_contract_error("attention_scores", [&] {  // scores(Hq, Tq, Tk) = (2, 2, 2) expected
        ops().attention_scores(f32(scores, {2, 3, 2}), Q, KV, Tensor{}, 2, 1, 1.0f, nullptr);
    });
    expect_contract_error("attention_output", [&] {  // probs' Tk 3 ≠ the 2 rows of v
        ops().attention_output(f32(out, {2, 6}), f32(scores, {2, 2, 3}), KV, 2, 1, nullptr);
    });
}

// ------------------------------------------------------------------ embedding, cache_write, argmax

TEST(Embedding, GathersRowsAndChecksIds) {
    std::vector<float> table = {0, 1, 10, 11, 20, 21}, y(6);
    std::vector<int32_t> ids = {2, 0, 2}, bad = {3}, neg = {-1};
    ops().embedding(f32(y, {3, 2}), f32(table, {3, 2}), i32(ids, {3}), nullptr);
    EXPECT_EQ(y, (std::vector<float>{20, 21, 0, 1, 20, 21}));
    std::vector<float> one(2);
    expect_contract_error("embedding", [&] {
        ops().embedding(f32(one, {1, 2}), f32(table, {3, 2}), i32(bad, {1}), nullptr);
    });
    expect_contract_error("embedding", [&] {
        ops().embedding(f32(one, {1, 2}), f32(table, {3, 2}), i32(neg, {1}), nullptr);
    });
    expect_contract_error("embedding", [&] {
        ops().embedding(f32(one, {1, 2}), f32(table, {3, 2}), f32(one, {2}), nullptr);
    });
}

TEST(CacheWrite, WritesRowsAtPositionsOnly) {
    std::vector<float> cache(8, -7.0f), rows = {1, 2, 3, 4};
    std::vector<int32_t> pos = {2, 0}, outside = {1, 4};
    ops().cache_write(f32(cache, {4, 2}), f32(rows, {2, 2}), i32(pos, {2}), nullptr);
    EXPECT_EQ(cache, (std::vector<float>{3, 4, -7, -7, 1, 2, -7, -7}));
    const std::vector<float> before = cache;
    expect_contract_error("cache_write", [&] {
        ops().cache_write(f32(cache, {4, 2}), f32(rows, {2, 2}), i32(outside, {2}), nullptr);
    });
    EXPECT_EQ(cache, before);  // nothing written by a rejected call
    expect_contract_error("cache_write", [&] {
        ops().cache_write(f32(cache, {2, 4}), f32(rows, {2, 2}), i32(pos, {2}), nullptr);
    });
}

TEST(Argmax, TiesLowestIndexAndNaN) {
    std::vector<float> x = {1,     5,     5,     2,      // tie → 1
                            -kInf, -kInf, -kInf, -kInf,  // all equal → 0
                            1,     3,     kNaN,  kNaN,   // first NaN, as torch.argmax → 2
                            -1,    -3,    -2,    kInf};  // → 3
    std::vector<int32_t> y(4, -1);
    ops().argmax(i32(y, {4}), f32(x, {4, 4}), nullptr);
    EXPECT_EQ(y, (std::vector<int32_t>{1, 0, 2, 3}));
    std::vector<float> wrong(4);
    expect_contract_error("argmax", [&] {
        ops().argmax(f32(wrong, {4}), f32(x, {4, 4}), nullptr);
    });
    expect_contract_error("argmax", [&] { ops().argmax(i32(y, {2}), f32(x, {4, 4}), nullptr); });
}

// ------------------------------------------------------------------ the table and compositions

TEST(CpuTable, EveryPrimitivePresentFusedLeftToCompositions) {
    const OpTable table = OpTable::build("cpu");
    EXPECT_EQ(table.device, Device::Host);
    EXPECT_STREQ(table.base->name, "cpu");
    EXPECT_EQ(cpu_track().weight_dtype, DType::F32);
    EXPECT_EQ(cpu_track().device, Device::Host);
    const Ops& o = table.ops;
    const std::pair<OpId, bool> present[] = {
        {OpId::linear, o.linear != nullptr},
        {OpId::conv1d, o.conv1d != nullptr},
        {OpId::layernorm, o.layernorm != nullptr},
        {OpId::rmsnorm, o.rmsnorm != nullptr},
        {OpId::gelu, o.gelu != nullptr},
        {OpId::silu_mul, o.silu_mul != nullptr},
        {OpId::softmax, o.softmax != nullptr},
        {OpId::rope_freqs, o.rope_freqs != nullptr},
        {OpId::rope_apply, o.rope_apply != nullptr},
        {OpId::attention_scores, o.attention_scores != nullptr},
        {OpId::attention_output, o.attention_output != nullptr},
        {OpId::embedding, o.embedding != nullptr},
        {OpId::add, o.add != nullptr},
        {OpId::argmax, o.argmax != nullptr},
        {OpId::cache_write, o.cache_write != nullptr},
        {OpId::attention, o.attention != nullptr},
        {OpId::add_layernorm, o.add_layernorm != nullptr},
        {OpId::linear_gelu, o.linear_gelu != nullptr},
        {OpId::gate_up_silu, o.gate_up_silu != nullptr},
        {OpId::qkv_rope_cache, o.qkv_rope_cache != nullptr},
        {OpId::linear_residual, o.linear_residual != nullptr},
        {OpId::rmsnorm_gate_up_silu, o.rmsnorm_gate_up_silu != nullptr},
        {OpId::rmsnorm_qkv_rope_cache, o.rmsnorm_qkv_rope_cache != nullptr},
        {OpId::linear_gelu_linear, o.linear_gelu_linear != nullptr},
        {OpId::qkv_rope, o.qkv_rope != nullptr}};
    static_assert(sizeof(present) / sizeof(present[0]) == kNumOps, "one line per op");
    for (const auto& [op, is_set] : present) {
        const bool primitive = static_cast<int>(op) < kNumPrimitiveOps;
        EXPECT_EQ(is_set, primitive) << op_name(op) << (primitive ? " missing" : " should be null");
        EXPECT_EQ(table.source[static_cast<int>(op)], &cpu_track()) << op_name(op);
    }
    EXPECT_THROW(OpTable::build("cpu", "rmsnorm=nonexistent"), InputError);
}

TEST(Compositions, AddLayerNormUpdatesTheResidual) {
    const int64_t R = 3, D = 5;
    std::vector<float> res = random_vector(R * D, 15), x = random_vector(R * D, 16);
    std::vector<float> w = random_vector(D, 17), b = random_vector(D, 18), normed(R * D);
    std::vector<double> sum(R * D), want(R * D);
    for (int64_t i = 0; i < R * D; ++i) sum[i] = double(res[i]) + x[i];  // f32 add: this, rounded
    std::vector<float> res2 = res;

    run_add_layernorm(ops(), f32(res2, {R, D}), f32(normed, {R, D}), f32(x, {R, D}), f32(w, {D}),
                      f32(b, {D}), 1e-5f, nullptr);
    for (int64_t r = 0; r < R; ++r) {
        double mean = 0, var = 0;
        for (int64_t i = 0; i < D; ++i) mean += double(res2[r * D + i]) / D;
        for (int64_t i = 0; i < D; ++i)
            var += (res2[r * D + i] - mean) * (res2[r * D + i] - mean) / D;
        for (int64_t i = 0; i < D; ++i)
            want[r * D + i] = (res2[r * D + i] - mean) / std::sqrt(var + 1e-5) * w[i] + b[i];
    }
    EXPECT_TRUE(near(res2, sum));
    EXPECT_TRUE(near(normed, want, 1e-5, 1e-6));
}

TEST(Compositions, LinearGeluAndGateUpSilu) {
    const int64_t M = 4, K = 9, F = 6;
    std::vector<float> x = random_vector(M * K, 19), w = random_vector(F * K, 20);
    std::vector<float> w2 = random_vector(F * K, 21), b = random_vector(F, 22);
    std::vector<float> out(M * F), scratch(M * F);

    run_linear_gelu(ops(), f32(out, {M, F}), f32(x, {M, K}), f32(w, {F, K}), f32(b, {F}), nullptr);
    std::vector<double> lin = ref_linear(x, w, &b, M, F, K), want(M * F);
    for (int64_t i = 0; i < M * F; ++i) want[i] = ref_gelu(float(lin[i]));
    EXPECT_TRUE(near(out, want, 1e-6, 1e-6));

    run_gate_up_silu(ops(), f32(out, {M, F}), f32(x, {M, K}), f32(w, {F, K}), f32(w2, {F, K}),
                     f32(scratch, {M, F}), nullptr);
    const std::vector<double> gate = ref_linear(x, w, nullptr, M, F, K),
                              up = ref_linear(x, w2, nullptr, M, F, K);
    for (int64_t i = 0; i < M * F; ++i) want[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
    EXPECT_TRUE(near(out, want, 1e-5, 1e-6));
}

TEST(Compositions, LinearGeluLinearIsTheMlp) {
    const int64_t M = 3, K = 7, F = 5, N = 4;
    std::vector<float> x = random_vector(M * K, 40), w1 = random_vector(F * K, 41),
                       b1 = random_vector(F, 42);
    std::vector<float> w2 = random_vector(N * F, 43), b2 = random_vector(N, 44), hidden(M * F),
                       out(M * N);
    run_linear_gelu_linear(ops(), f32(out, {M, N}), f32(x, {M, K}), f32(w1, {F, K}), f32(b1, {F}),
                           f32(w2, {N, F}), f32(b2, {N}), f32(hidden, {M, F}), nullptr);
    const std::vector<double> lin = ref_linear(x, w1, &b1, M, F, K);
    std::vector<float> h(M * F);
    for (int64_t i = 0; i < M * F; ++i) h[i] = static_cast<float>(ref_gelu(float(lin[i])));
    EXPECT_TRUE(near(out, ref_linear(h, w2, &b2, M, N, F), 1e-5, 1e-6));
}

TEST(Compositions, QkvRopeIsTheEncodersAttentionInputs) {
    // 2 rows, K = 3, 2 query heads and 1 kv head of head_dim 6, rotary_dim 4 (partial, as the
    // encoder's 32 of 64); k without a bias, as Whisper's k_proj.
    const int64_t M = 2, K = 3, Hq = 2, Hkv = 1, D = 6, half = 2, P = 4;
    std::vector<float> x = random_vector(M * K, 50), wq = random_vector(Hq * D * K, 51),
                       bq = random_vector(Hq * D, 52);
    std::vector<float> wk = random_vector(Hkv * D * K, 53), wv = random_vector(Hkv * D * K, 54),
                       bv = random_vector(Hkv * D, 55);
    std::vector<float> cos(P * half), sin(P * half), q(M * Hq * D), k(M * Hkv * D), v(M * Hkv * D);
    ops().rope_freqs(f32(cos, {P, half}), f32(sin, {P, half}), 10000.0f, nullptr);
    std::vector<int32_t> pos = {3, 1};
    run_qkv_rope(ops(), f32(q, {M, Hq * D}), f32(k, {M, Hkv * D}), f32(v, {M, Hkv * D}),
                 f32(x, {M, K}), f32(wq, {Hq * D, K}), f32(bq, {Hq * D}), f32(wk, {Hkv * D, K}),
                 Tensor{}, f32(wv, {Hkv * D, K}), f32(bv, {Hkv * D}), f32(cos, {P, half}),
                 f32(sin, {P, half}), i32(pos, {M}), int(Hq), int(Hkv), nullptr);
    // The rotation by hand: pair (j, j + half) of every head turns by p·θ_j; dims 4, 5 pass.
    auto rotate = [&](std::vector<double> y, int64_t H) {
        for (int64_t t = 0; t < M; ++t)
            for (int64_t h = 0; h < H; ++h)
                for (int64_t j = 0; j < half; ++j) {
                    const double angle =
                        pos[t] * std::pow(10000.0, -2.0 * double(j) / double(2 * half));
                    double& a = y[(t * H + h) * D + j];
                    double& b = y[(t * H + h) * D + j + half];
                    const double a0 = a, b0 = b;
                    a = a0 * std::cos(angle) - b0 * std::sin(angle);
                    b = b0 * std::cos(angle) + a0 * std::sin(angle);
                }
        return y;
    };
    EXPECT_TRUE(near(q, rotate(ref_linear(x, wq, &bq, M, Hq * D, K), Hq), 1e-5, 1e-6));
    EXPECT_TRUE(near(k, rotate(ref_linear(x, wk, nullptr, M, Hkv * D, K), Hkv), 1e-5, 1e-6));
    EXPECT_TRUE(near(v, ref_linear(x, wv, &bv, M, Hkv * D, K), 1e-6, 1e-6));
}

TEST(Compositions, TheDecoderBlocksSplitAtTheResidual) {
    // linear_residual: residual += x·Wᵀ. The rmsnorm_ entries: their product of rmsnorm(x).
    const int64_t M = 3, K = 8, F = 5, half = 2, Hq = 2, Hkv = 1, D = 2 * half, cap = 6;
    const float eps = 1e-5f;
    std::vector<float> x = random_vector(M * K, 23), g = random_vector(K, 24),
                       w = random_vector(F * K, 25);
    std::vector<float> w2 = random_vector(F * K, 26), res = random_vector(M * F, 27),
                       scratch(M * F), out(M * F);
    const std::vector<float> res0 = res;
    run_linear_residual(ops(), f32(res, {M, F}), f32(x, {M, K}), f32(w, {F, K}),
                        f32(scratch, {M, F}), nullptr);
    const std::vector<double> prod = ref_linear(x, w, nullptr, M, F, K);
    std::vector<double> want(M * F);
    for (int64_t i = 0; i < M * F; ++i) want[i] = res0[i] + prod[i];
    EXPECT_TRUE(near(res, want, 1e-6, 1e-6));

    std::vector<float> xn(M * K), normed(M * K);  // rmsnorm(x), written out by hand
    for (int64_t r = 0; r < M; ++r) {
        double ms = 0;
        for (int64_t i = 0; i < K; ++i) ms += double(x[r * K + i]) * x[r * K + i] / K;
        for (int64_t i = 0; i < K; ++i)
            xn[r * K + i] = float(x[r * K + i] / std::sqrt(ms + eps) * g[i]);
    }
    run_rmsnorm_gate_up_silu(ops(), f32(out, {M, F}), f32(x, {M, K}), f32(g, {K}), f32(w, {F, K}),
                             f32(w2, {F, K}), f32(normed, {M, K}), f32(scratch, {M, F}), eps,
                             nullptr);
    const std::vector<double> gate = ref_linear(xn, w, nullptr, M, F, K),
                              up = ref_linear(xn, w2, nullptr, M, F, K);
    for (int64_t i = 0; i < M * F; ++i) want[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
    EXPECT_TRUE(near(out, want, 1e-5, 1e-6));

    // rmsnorm_qkv_rope_cache against qkv_rope_cache of the hand-normalised rows.
    std::vector<float> wq = random_vector(Hq * D * K, 28), wk = random_vector(Hkv * D * K, 29);
    std::vector<float> wv = random_vector(Hkv * D * K, 30), cos(cap * half), sin(cap * half);
    ops().rope_freqs(f32(cos, {cap, half}), f32(sin, {cap, half}), 10000.0f, nullptr);
    std::vector<int32_t> pos = {1, 2, 4};
    std::vector<float> q(M * Hq * D), q_want(M * Hq * D), k(M * Hkv * D), v(M * Hkv * D);
    std::vector<float> kc(cap * Hkv * D, 7.0f), vc = kc, kc_want = kc, vc_want = kc;
    run_rmsnorm_qkv_rope_cache(
        ops(), f32(q, {M, Hq * D}), f32(kc, {cap, Hkv * D}), f32(vc, {cap, Hkv * D}),
        f32(x, {M, K}), f32(g, {K}), f32(wq, {Hq * D, K}), f32(wk, {Hkv * D, K}),
        f32(wv, {Hkv * D, K}), f32(cos, {cap, half}), f32(sin, {cap, half}), i32(pos, {M}),
        f32(normed, {M, K}), f32(k, {M, Hkv * D}), f32(v, {M, Hkv * D}), eps, Hq, Hkv, nullptr);
    run_qkv_rope_cache(ops(), f32(q_want, {M, Hq * D}), f32(kc_want, {cap, Hkv * D}),
                       f32(vc_want, {cap, Hkv * D}), f32(xn, {M, K}), f32(wq, {Hq * D, K}),
                       f32(wk, {Hkv * D, K}), f32(wv, {Hkv * D, K}), f32(cos, {cap, half}),
                       f32(sin, {cap, half}), i32(pos, {M}), f32(k, {M, Hkv * D}),
                       f32(v, {M, Hkv * D}), Hq, Hkv, nullptr);
    EXPECT_TRUE(near(q, std::vector<double>(q_want.begin(), q_want.end()), 1e-5, 1e-6));
    EXPECT_TRUE(near(kc, std::vector<double>(kc_want.begin(), kc_want.end()), 1e-5, 1e-6));
    EXPECT_TRUE(near(vc, std::vector<double>(vc_want.begin(), vc_want.end()), 1e-5, 1e-6));
}

}  // namespace
}  // namespace glmasr
