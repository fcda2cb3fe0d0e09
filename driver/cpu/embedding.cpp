// embedding.cpp — out(T, D) = table(V, D)[ids(T)]: a row gather             [nn.Embedding]
// No scaling (Llama). An id outside the vocabulary is a contract error, never a read past the
// table; all ids are checked before anything is written.
#include <cstring>

#include "cpu_ops.h"

namespace glmasr::cpu {

void embedding(const Tensor& out, const Tensor& table, const Tensor& ids, Stream) {
    const int64_t T = ids.dim(0), V = table.dim(0), D = table.dim(1);
    expect_positions_below("embedding", "ids", ids, V);
    const float* E = table.f32();   // (V, D)
    const int32_t* id = ids.i32();  // (T)
    float* Y = out.f32();           // (T, D)
    for (int64_t t = 0; t < T; ++t)
        std::memcpy(Y + t * D, E + static_cast<int64_t>(id[t]) * D, D * sizeof(float));
}

}  // namespace glmasr::cpu
