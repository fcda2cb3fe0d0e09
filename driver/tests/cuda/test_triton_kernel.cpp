// test_triton_kernel.cpp — which of a Triton kernel's cubins a GPU gets (triton_kernel.h). No
// GPU needed: the choice is made from the device's compute capability alone.
#include <gtest/gtest.h>

#include "glmasr/error.h"
#include "glmasr/triton_kernel.h"

namespace glmasr::cuda {
namespace {

const unsigned char kImage[] = {0x7f, 'E', 'L', 'F'};  // never loaded here
const TritonCubin kBoth[] = {{80, kImage, sizeof kImage, 0}, {90, kImage, sizeof kImage, 73728}};
const TritonKernel kKernel{"linear", "linear_kernel", 128, kBoth, 2};

TEST(TritonKernel, TheDevicesOwnArchitectureFirst) {
    EXPECT_EQ(kKernel.cubin_for(90).arch, 90);
    EXPECT_EQ(kKernel.cubin_for(80).arch, 80);
}

TEST(TritonKernel, ALaterMinorVersionRunsTheSameMajorsCodeBeforeHopper) {
    EXPECT_EQ(kKernel.cubin_for(86).arch, 80);  // A10, RTX 30xx
    EXPECT_EQ(kKernel.cubin_for(89).arch, 80);  // L4, RTX 40xx
}

TEST(TritonKernel, AnotherMajorVersionIsAnErrorThatSaysWhatToRebuild) {
    // sm_90a code (what Triton makes of 90) runs on sm_90 only, never on a later GPU.
    for (int arch : {75, 100, 103, 120}) {
        try {
            kKernel.cubin_for(arch);
            FAIL() << "sm_" << arch << " got a cubin";
        } catch (const Error& e) {
            EXPECT_STREQ(
                e.what(),
                ("linear: the kernel linear_kernel was compiled for sm_80, sm_90, "
                 "not for this GPU (sm_" +
                 std::to_string(arch) + "); rebuild with CUDAARCHS=" + std::to_string(arch))
                    .c_str());
        }
    }
}

}  // namespace
}  // namespace glmasr::cuda
