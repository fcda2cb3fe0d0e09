// embedding.cpp — out(T, D) = table(V, D)[ids(T)]: a row gather [nn.Embedding]. Out-of-range
// ids are a contract error, not garbage.
#include <cstring>

#include "cpu_ops.h"
#include "glmasr/error.h"

namespace glmasr::cpu {

void embedding(const Tensor& out, const Tensor& table, const Tensor& ids, Stream) {
    expect_host_f32("embedding", "table", table);
    expect_host_f32("embedding", "out", out);
    expect_host_i32("embedding", "ids", ids);
    const int64_t T = ids.dim(0), V = table.dim(0), D = table.dim(1);
    expect_shape("embedding", "out", out, {T, D});
    const int32_t* id = ids.i32();
    for (int64_t t = 0; t < T; ++t) {
        if (id[t] < 0 || id[t] >= V) throw Error("embedding: id " + std::to_string(id[t]) + " outside the vocabulary");
        std::memcpy(out.f32() + t * D, table.f32() + static_cast<int64_t>(id[t]) * D, D * sizeof(float));
    }
}

}  // namespace glmasr::cpu
