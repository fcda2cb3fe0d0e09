// kernel_test.h — the harness of the per-kernel tests: every GPU track's op against the cpu
// track (the oracle) on fresh random inputs.
//
//   GLMASR_TRACK=student build/tests/test_rmsnorm      (make test_rmsnorm TRACK=student)
//   GLMASR_TRACK=baseline,reference build/tests/test_linear --gtest_filter='Linear*'
//   GLMASR_TEST_SEED=1234 ...                            (an instructor's hidden seed)
//
// Rules every test follows (grader/… and docs/grading.md rely on them):
//   * inputs are fresh for every call, drawn with a random offset and scale, so that neither a
//     cached result nor a trivial output (zeros) can pass;
//   * outputs are poisoned with NaN before every GPU call, so an element a kernel forgets fails;
//   * matrix weights go to a track in its own dtype (bf16 for the reference); the oracle gets
//     the same rounded values, so only the kernel's arithmetic is judged;
//   * tolerances scale with the reduction length and the precision of the track's arithmetic,
//     and a whole-tensor relative RMSE is checked too; NaN/Inf must match the oracle exactly;
//   * without a GPU every test is skipped (reported as skipped, never passed).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "glmasr/error.h"
#include "glmasr/track.h"

namespace glmasr::test {

// The GPU tracks under test: GLMASR_TRACK (comma-separated), default baseline and reference.
inline std::vector<std::string> tracks_under_test() {
    const char* env = std::getenv("GLMASR_TRACK");
    std::string list = env && *env ? env : "baseline,reference";
    std::vector<std::string> names;
    std::stringstream s(list);
    for (std::string name; std::getline(s, name, ',');)
        if (!name.empty()) names.push_back(name);
    return names;
}

inline uint64_t test_seed() {
    const char* env = std::getenv("GLMASR_TEST_SEED");
    return env && *env ? std::strtoull(env, nullptr, 10) : 20261122ull;
}

#define GLMASR_REQUIRE_GPU() \
    if (!::glmasr::gpu_available()) GTEST_SKIP() << "no GPU: kernel tests need one"

// Random inputs: normal values with a random offset and scale per tensor.
class Inputs {
public:
    explicit Inputs(uint64_t salt) : rng_(test_seed() * 0x9e3779b97f4a7c15ull + salt) {}
    std::vector<float> normal(size_t n, float scale = 1.0f, bool offset = true) {
        std::normal_distribution<float> dist(0.0f, 1.0f);
        std::uniform_real_distribution<float> jitter(0.5f, 1.5f), shift(-0.5f, 0.5f);
        const float s = scale * jitter(rng_), o = offset ? shift(rng_) * scale : 0.0f;
        std::vector<float> v(n);
        for (float& x : v) x = o + s * dist(rng_);
        return v;
    }
    std::vector<int32_t> ints(size_t n, int lo, int hi) {
        std::uniform_int_distribution<int> dist(lo, hi);
        std::vector<int32_t> v(n);
        for (int32_t& x : v) x = dist(rng_);
        return v;
    }
    std::mt19937_64& rng() { return rng_; }

private:
    std::mt19937_64 rng_;
};

// Host data seen by the oracle through a Tensor view.
struct HostTensor {
    std::vector<float> f;
    std::vector<int32_t> i;
    std::vector<int64_t> shape;
    Tensor view() {
        Tensor t(i.empty() ? static_cast<void*>(f.data()) : static_cast<void*>(i.data()),
                 i.empty() ? DType::F32 : DType::I32, Device::Host, {});
        for (int64_t d : shape) t.shape[t.ndim++] = d;
        return t;
    }
};
inline HostTensor host(std::vector<float> v, std::vector<int64_t> shape) { return {std::move(v), {}, std::move(shape)}; }
inline HostTensor host_i32(std::vector<int32_t> v, std::vector<int64_t> shape) { return {{}, std::move(v), std::move(shape)}; }

// Round to the dtype a track stores (bf16 weights) and back, for the oracle.
inline std::vector<float> rounded(std::vector<float> v, DType dtype) {
    if (dtype == DType::BF16)
        for (float& x : v) x = bf16_to_f32(f32_to_bf16(x));
    return v;
}

// A device copy of a host tensor in `dtype` (f32, bf16 or i32), freed with the object.
class DeviceTensor {
public:
    DeviceTensor(const HostTensor& h, DType dtype = DType::F32) : backend_(&backend_for(Device::Cuda)) {
        Tensor t(nullptr, h.i.empty() ? dtype : DType::I32, Device::Cuda, {});
        for (int64_t d : h.shape) t.shape[t.ndim++] = d;
        ptr_ = backend_->alloc(t.bytes());
        t.data = ptr_;
        view_ = t;
        if (!h.i.empty()) {
            backend_->upload(ptr_, h.i.data(), t.bytes(), backend_->stream());
        } else if (dtype == DType::BF16) {
            std::vector<uint16_t> bits(h.f.size());
            for (size_t k = 0; k < bits.size(); ++k) bits[k] = f32_to_bf16(h.f[k]);
            backend_->upload(ptr_, bits.data(), t.bytes(), backend_->stream());
        } else {
            backend_->upload(ptr_, h.f.data(), t.bytes(), backend_->stream());
        }
        backend_->synchronize(backend_->stream());
    }
    ~DeviceTensor() { backend_->free(ptr_); }
    DeviceTensor(const DeviceTensor&) = delete;
    DeviceTensor& operator=(const DeviceTensor&) = delete;

    const Tensor& view() const { return view_; }
    // Fill with NaN so that any element a kernel fails to write shows up.
    void poison() {
        backend_->synchronize(backend_->stream());
        std::vector<unsigned char> nan(view_.bytes(), 0xff);  // all-ones f32 is a NaN
        backend_->upload(ptr_, nan.data(), nan.size(), backend_->stream());
        backend_->synchronize(backend_->stream());
    }
    std::vector<float> download_f32() const {
        backend_->synchronize(backend_->stream());
        std::vector<float> out(view_.numel());
        backend_->download(out.data(), ptr_, view_.bytes(), backend_->stream());
        return out;
    }
    std::vector<int32_t> download_i32() const {
        backend_->synchronize(backend_->stream());
        std::vector<int32_t> out(view_.numel());
        backend_->download(out.data(), ptr_, view_.bytes(), backend_->stream());
        return out;
    }

private:
    Backend* backend_;
    void* ptr_ = nullptr;
    Tensor view_;
};

inline Stream gpu_stream() { return backend_for(Device::Cuda).stream(); }
inline void gpu_sync() { backend_for(Device::Cuda).synchronize(gpu_stream()); }

// How precise a track's arithmetic is for an op: f32 (eps 2^-23), TF32 (2^-11, allowed in the
// student's linear), or bf16 staging (2^-8: the reference rounds activations for tensor cores).
enum class Precision { F32, TF32, BF16 };
inline double unit_roundoff(Precision p) {
    switch (p) {
        case Precision::F32: return std::ldexp(1.0, -23);
        case Precision::TF32: return std::ldexp(1.0, -11);
        case Precision::BF16: return std::ldexp(1.0, -8);
    }
    return 0;
}

// Compare a GPU result with the oracle; the verdict explains itself. Per element:
//   |got − ref| ≤ tol · (|ref| + rms(ref)),  tol = c · u · √K  (K = reduction length),
// plus a whole-tensor relative RMSE ≤ tol, and identical NaN/Inf positions.
inline ::testing::AssertionResult close(const std::vector<float>& got, const std::vector<float>& ref,
                                        int64_t reduction, Precision precision, double c = 8.0) {
    if (got.size() != ref.size()) return ::testing::AssertionFailure() << "size " << got.size() << " vs " << ref.size();
    double ref2 = 0;
    size_t finite = 0;
    for (float r : ref)
        if (std::isfinite(r)) ref2 += double(r) * r, ++finite;
    const double rms = finite ? std::sqrt(ref2 / finite) : 0.0;
    const double tol = c * unit_roundoff(precision) * std::sqrt(double(std::max<int64_t>(reduction, 1)));
    double diff2 = 0, worst_share = 0, max_abs = 0;
    size_t bad = 0;
    std::ostringstream first;
    for (size_t i = 0; i < ref.size(); ++i) {
        const float g = got[i], r = ref[i];
        bool ok;
        double share = 0;
        if (!std::isfinite(r)) {
            ok = std::isnan(r) ? std::isnan(g) : g == r;  // NaN ↔ NaN, ±inf ↔ same inf
        } else if (!std::isfinite(g)) {
            ok = false;
            share = INFINITY;
        } else {
            const double d = std::fabs(double(g) - r), budget = tol * (std::fabs(r) + rms) + 1e-30;
            diff2 += d * d;
            max_abs = std::max(max_abs, d);
            share = d / budget;
            ok = share <= 1.0;
        }
        worst_share = std::max(worst_share, share);
        if (!ok && bad++ < 5) first << "\n    [" << i << "] got " << g << ", expected " << r;
    }
    const double rel_rmse = std::sqrt(diff2 / std::max(ref2, 1e-30));
    if (bad == 0 && rel_rmse <= tol)
        return ::testing::AssertionSuccess() << "max abs err " << max_abs << ", " << 100 * worst_share << "% of budget";
    return ::testing::AssertionFailure()
           << bad << " of " << ref.size() << " elements out of tolerance (tol " << tol << " × (|ref| + "
           << rms << ")), max abs err " << max_abs << ", relative RMSE " << rel_rmse << ", worst "
           << worst_share << "× the budget; first mismatches:" << first.str();
}

// Run `body(track)` for every track under test, reporting errors (NotImplemented, a contract
// violation, a CUDA fault) as failures that name the track, without crashing the process.
template <class Body>
void for_each_track(Body body) {
    for (const std::string& name : tracks_under_test()) {
        SCOPED_TRACE("track " + name);
        try {
            body(get_track(name));
        } catch (const Error& e) {
            ADD_FAILURE() << name << ": " << e.what();
        }
    }
}

inline Precision matmul_precision(const Track& track) {
    return track.weight_dtype == DType::BF16 ? Precision::BF16 : Precision::TF32;
}

}  // namespace glmasr::test
