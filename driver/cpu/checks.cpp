// checks.cpp — the one check the cpu track adds to the contract's (contract.cpp): the values of
// ids and positions, which index rows. A GPU track cannot read them without synchronising (it
// writes NaN rows instead); the oracle refuses them, so it never reads outside its arrays.
#include <string>

#include "cpu_ops.h"
#include "glmasr/error.h"

namespace glmasr::cpu {

void expect_positions_below(const char* op, const char* what, const Tensor& positions,
                            int64_t limit) {
    const int32_t* pos = positions.i32();
    for (int64_t i = 0; i < positions.numel(); ++i)
        if (pos[i] < 0 || pos[i] >= limit)
            throw Error(std::string(op) + ": " + what + "[" + std::to_string(i) + "] = " +
                        std::to_string(pos[i]) + " is outside [0, " + std::to_string(limit) + ")");
}

}  // namespace glmasr::cpu
