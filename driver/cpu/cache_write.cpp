// cache_write.cpp — cache(Cap, W)[positions[i]] = rows(T, W)[i]: store the new keys or values of
// T tokens in the KV cache at positions read from memory (so a GPU decode step can be recorded
// once and replayed). A position outside the cache is a contract error; all positions are
// checked before anything is written, so a failed call leaves the cache untouched.
#include <cstring>

#include "cpu_ops.h"

namespace glmasr::cpu {

void cache_write(const Tensor& cache, const Tensor& rows, const Tensor& positions, Stream) {
    const int64_t T = rows.dim(0), W = rows.dim(1), cap = cache.dim(0);
    expect_positions_below("cache_write", "positions", positions, cap);
    float* Cache = cache.f32();            // (Cap, W)
    const float* Rows = rows.f32();        // (T, W)
    const int32_t* pos = positions.i32();  // (T)
    for (int64_t t = 0; t < T; ++t)
        std::memcpy(Cache + static_cast<int64_t>(pos[t]) * W, Rows + t * W, W * sizeof(float));
}

}  // namespace glmasr::cpu
