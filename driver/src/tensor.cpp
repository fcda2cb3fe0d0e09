// tensor.cpp — the Tensor view's helpers and the contract's shape/dtype checks.
#include "glmasr/tensor.h"

#include <cstring>
#include <sstream>

#include "glmasr/error.h"

namespace glmasr {

size_t dtype_size(DType dtype) {
    switch (dtype) {
        case DType::F32: return 4;
        case DType::BF16: return 2;
        case DType::F16: return 2;
        case DType::I32: return 4;
    }
    return 0;
}

const char* dtype_name(DType dtype) {
    switch (dtype) {
        case DType::F32: return "f32";
        case DType::BF16: return "bf16";
        case DType::F16: return "f16";
        case DType::I32: return "i32";
    }
    return "?";
}

const char* device_name(Device device) { return device == Device::Host ? "host" : "cuda"; }

Tensor::Tensor(void* data_, DType dtype_, Device device_, std::initializer_list<int64_t> dims)
    : data(data_), dtype(dtype_), device(device_) {
    if (dims.size() > kMaxDims) throw Error("Tensor: more than 4 dimensions");
    for (int64_t d : dims) shape[ndim++] = d;
}

int64_t Tensor::dim(int i) const {
    if (i < 0) i += ndim;
    if (i < 0 || i >= ndim) throw Error("Tensor::dim(" + std::to_string(i) + ") of " + str());
    return shape[i];
}

int64_t Tensor::numel() const {
    if (ndim == 0) return 0;
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
}

Tensor Tensor::rows(int64_t start, int64_t count) const {
    if (ndim == 0 || start < 0 || count < 0 || start + count > shape[0])
        throw Error("Tensor::rows(" + std::to_string(start) + ", " + std::to_string(count) +
                    ") out of range for " + str());
    Tensor view = *this;
    const int64_t row_elems = shape[0] ? numel() / shape[0] : 0;
    view.data = static_cast<char*>(data) + start * row_elems * dtype_size(dtype);
    view.shape[0] = count;
    return view;
}

Tensor Tensor::reshape(std::initializer_list<int64_t> dims) const {
    Tensor view(data, dtype, device, dims);
    if (view.numel() != numel())
        throw Error("Tensor::reshape: " + str() + " cannot become " + view.str());
    return view;
}

float* Tensor::f32() const {
    if (dtype != DType::F32) throw Error("Tensor::f32() on " + str());
    return static_cast<float*>(data);
}

int32_t* Tensor::i32() const {
    if (dtype != DType::I32) throw Error("Tensor::i32() on " + str());
    return static_cast<int32_t*>(data);
}

uint16_t* Tensor::bf16_bits() const {
    if (dtype != DType::BF16) throw Error("Tensor::bf16_bits() on " + str());
    return static_cast<uint16_t*>(data);
}

std::string Tensor::str() const {
    std::ostringstream s;
    s << dtype_name(dtype) << "[";
    for (int i = 0; i < ndim; ++i) s << (i ? ", " : "") << shape[i];
    s << "] " << device_name(device);
    return s.str();
}

float bf16_to_f32(uint16_t bits) {
    uint32_t word = static_cast<uint32_t>(bits) << 16;
    float value;
    std::memcpy(&value, &word, sizeof value);
    return value;
}

uint16_t f32_to_bf16(float value) {
    uint32_t word;
    std::memcpy(&word, &value, sizeof word);
    if ((word & 0x7f800000u) == 0x7f800000u && (word & 0x007fffffu))  // NaN stays a quiet NaN
        return static_cast<uint16_t>((word >> 16) | 0x0040u);
    word += 0x7fffu + ((word >> 16) & 1u);  // round to nearest, ties to even
    return static_cast<uint16_t>(word >> 16);
}

float f16_to_f32(uint16_t h) {
    const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
    uint32_t exponent = (h >> 10) & 0x1fu;
    uint32_t mantissa = h & 0x3ffu;
    uint32_t word;
    if (exponent == 0x1f) {
        word = sign | 0x7f800000u | (mantissa << 13);  // inf / NaN
    } else if (exponent == 0) {
        if (mantissa == 0) {
            word = sign;  // ±0
        } else {          // subnormal: renormalise
            exponent = 127 - 15 + 1;
            while (!(mantissa & 0x400u)) {
                mantissa <<= 1;
                --exponent;
            }
            word = sign | (exponent << 23) | ((mantissa & 0x3ffu) << 13);
        }
    } else {
        word = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
    }
    float value;
    std::memcpy(&value, &word, sizeof value);
    return value;
}

}  // namespace glmasr
