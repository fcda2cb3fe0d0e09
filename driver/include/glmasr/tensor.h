// tensor.h — the small Tensor view every operation of the kernel contract takes.
//
// A Tensor is NOT a container: it is (pointer, dtype, shape, device) describing a contiguous,
// row-major array that somebody else owns. Views are cheap to copy and to slice along the first
// dimension, which is all the model driver ever needs (rows of activations, rows of a KV cache).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace glmasr {

enum class DType : uint8_t { F32, BF16, F16, I32 };
enum class Device : uint8_t { Host, Cuda };

size_t dtype_size(DType dtype);
const char* dtype_name(DType dtype);
const char* device_name(Device device);

struct Tensor {
    static constexpr int kMaxDims = 4;

    void* data = nullptr;
    DType dtype = DType::F32;
    Device device = Device::Host;
    int ndim = 0;
    int64_t shape[kMaxDims] = {0, 0, 0, 0};

    Tensor() = default;
    Tensor(void* data, DType dtype, Device device, std::initializer_list<int64_t> dims);

    bool empty() const { return data == nullptr; }
    int64_t dim(int i) const;  // negative i counts from the end, like PyTorch
    int64_t numel() const;
    size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }

    // Rows [start, start + count) of the first dimension, as a view of the same memory.
    Tensor rows(int64_t start, int64_t count) const;
    // Same memory, new shape with the same number of elements.
    Tensor reshape(std::initializer_list<int64_t> dims) const;

    // Typed access; throws if the dtype does not match (a wrong dtype is a contract bug).
    float* f32() const;
    int32_t* i32() const;
    uint16_t* bf16_bits() const;  // bf16 has no C++ type: its 16 raw bits

    std::string str() const;  // e.g. "f32[1500, 1280] cuda"
};

// bf16 <-> f32 conversions (round to nearest even, as PyTorch's .to(torch.bfloat16)).
float bf16_to_f32(uint16_t bits);
uint16_t f32_to_bf16(float value);
float f16_to_f32(uint16_t bits);

}  // namespace glmasr
