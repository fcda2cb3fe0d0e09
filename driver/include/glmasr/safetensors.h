// safetensors.h — a memory-mapped, fully validated reader of the safetensors format.
//
// Format: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the raw tensor bytes. Everything is checked on open (header size, JSON, dtypes, offsets
// inside the file, sizes matching shapes, no overlaps); any problem is an InputError naming the
// file and the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "glmasr/tensor.h"

namespace glmasr {

struct SafeTensorEntry {
    std::string name;
    DType dtype = DType::F32;  // F32, BF16 or F16 (others are rejected on open)
    std::vector<int64_t> shape;
    const void* data = nullptr;  // into the mapping
    size_t nbytes = 0;
    int64_t numel() const;
};

class SafeTensorsFile {
public:
    explicit SafeTensorsFile(const std::string& path);  // mmap + validate; throws InputError
    ~SafeTensorsFile();
    SafeTensorsFile(const SafeTensorsFile&) = delete;
    SafeTensorsFile& operator=(const SafeTensorsFile&) = delete;

    const std::string& path() const { return path_; }
    const SafeTensorEntry* find(const std::string& name) const;  // nullptr if absent
    std::vector<std::string> names() const;                      // sorted

    // Copy a tensor out as f32 (converting bf16/f16). Throws InputError if the shape differs.
    void read_f32(const std::string& name, const std::vector<int64_t>& expected_shape,
                  float* out) const;

    // Bookkeeping for "unused tensors" reports: names read so far, and the rest.
    void mark_used(const std::string& name) const;
    std::vector<std::string> unused() const;

private:
    std::string path_;
    void* map_ = nullptr;
    size_t map_size_ = 0;
    std::map<std::string, SafeTensorEntry> entries_;
    mutable std::set<std::string> used_;
};

// Write a safetensors file (f32/bf16/i32 tensors), used by tools and tests.
struct SafeTensorToWrite {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    const void* data;
};
void write_safetensors(const std::string& path, const std::vector<SafeTensorToWrite>& tensors);

}  // namespace glmasr
