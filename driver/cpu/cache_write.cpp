// cache_write.cpp — cache(Cap, W)[positions[i]] = rows(T, W)[i]: append new keys or values to
// the KV cache at the positions held in (device) memory, so the decode step can be recorded once.
#include <cstring>

#include "cpu_ops.h"
#include "glmasr/error.h"

namespace glmasr::cpu {

void cache_write(const Tensor& cache, const Tensor& rows, const Tensor& positions, Stream) {
    expect_host_f32("cache_write", "cache", cache);
    expect_host_f32("cache_write", "rows", rows);
    expect_host_i32("cache_write", "positions", positions);
    const int64_t T = rows.dim(0), W = rows.dim(1), cap = cache.dim(0);
    expect_shape("cache_write", "cache", cache, {cap, W});
    expect_shape("cache_write", "positions", positions, {T});
    const int32_t* pos = positions.i32();
    for (int64_t t = 0; t < T; ++t) {
        if (pos[t] < 0 || pos[t] >= cap) throw Error("cache_write: position " + std::to_string(pos[t]) + " outside the cache");
        std::memcpy(cache.f32() + pos[t] * W, rows.f32() + t * W, W * sizeof(float));
    }
}

}  // namespace glmasr::cpu
