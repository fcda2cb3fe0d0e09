// safetensors.cpp — memory-mapped reading and writing of the safetensors format, with every
// field of the header validated before a byte of tensor data is trusted.
//
// Why mmap: the real checkpoint is 4.5 GB of bf16. Mapping it costs nothing up front; the loader
// touches each tensor once while converting or uploading it, and the kernel's page cache makes
// a second run start fast. Why validate everything on open: a truncated download or a file of
// another format must end as one clear InputError naming the file, never as a read past the
// mapping deep inside a conversion loop.
#include "glmasr/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>

#include "glmasr/error.h"
#include "glmasr/json_limits.h"

namespace glmasr {

namespace {

// The reference implementation (huggingface/safetensors) refuses headers above 100 MB.
constexpr uint64_t kMaxHeaderBytes = 100u << 20;

bool parse_dtype(const std::string& name, DType* dtype) {
    if (name == "F32") *dtype = DType::F32;
    else if (name == "BF16") *dtype = DType::BF16;
    else if (name == "F16") *dtype = DType::F16;
    else return false;
    return true;
}

const char* dtype_tag(DType dtype) {
    switch (dtype) {
        case DType::F32: return "F32";
        case DType::BF16: return "BF16";
        case DType::F16: return "F16";
        case DType::I32: return "I32";
    }
    return "?";
}

std::string shape_text(const std::vector<int64_t>& shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + "]";
}

// Bytes of a tensor of `shape`, or false when the product does not fit in 64 bits (a corrupt
// header can claim any shape; the size check below must not be fooled by a wrapped product).
bool byte_size(const std::vector<int64_t>& shape, DType dtype, uint64_t* bytes) {
    uint64_t n = dtype_size(dtype);
    for (int64_t d : shape) {
        const uint64_t u = static_cast<uint64_t>(d);
        if (u != 0 && n > std::numeric_limits<uint64_t>::max() / u) return false;
        n *= u;
    }
    *bytes = n;
    return true;
}

// Every problem with the file is an InputError naming it.
[[noreturn]] void fail(const std::string& path, const std::string& problem) {
    throw InputError(path + ": " + problem);
}

// Map the whole of `path` read-only; its size goes to *size. The file must be a regular file
// of at least the 8 bytes of the header length.
void* map_file(const std::string& path, size_t* size) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) fail(path, std::string("cannot open (") + std::strerror(errno) + ")");
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        ::close(fd);
        fail(path, "not a regular file");
    }
    *size = static_cast<size_t>(st.st_size);
    if (*size < 8) {
        ::close(fd);
        fail(path, "too small to be a safetensors file (" + std::to_string(*size) + " bytes)");
    }
    void* map = ::mmap(nullptr, *size, PROT_READ, MAP_PRIVATE, fd, 0);
    const int map_errno = errno;
    ::close(fd);  // the mapping keeps the file alive
    if (map == MAP_FAILED)
        fail(path, std::string("cannot map the file (") + std::strerror(map_errno) + ")");
    return map;
}

// One header entry, {"dtype": .., "shape": [..], "data_offsets": [begin, end]}, checked field by
// field against the data section (`data`, `data_size` bytes) it points into.
SafeTensorEntry parse_entry(const std::string& path, const std::string& name,
                            const nlohmann::json& info, const unsigned char* data,
                            uint64_t data_size) {
    auto bad = [&](const std::string& problem) { fail(path, "tensor '" + name + "': " + problem); };
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") ||
        !info.contains("data_offsets"))
        bad("needs dtype, shape and data_offsets");
    SafeTensorEntry entry;
    entry.name = name;
    if (!info["dtype"].is_string() || !parse_dtype(info["dtype"].get<std::string>(), &entry.dtype))
        bad("dtype " + info["dtype"].dump() + " is not supported (F32, BF16 or F16)");
    if (!info["shape"].is_array()) bad("shape is not a list");
    for (const auto& d : info["shape"]) {
        if (!d.is_number_unsigned() ||
            d.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
            bad("shape " + info["shape"].dump() + " is invalid");
        entry.shape.push_back(d.get<int64_t>());
    }
    const auto& off = info["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
        bad("data_offsets must be two non-negative integers");
    const uint64_t begin = off[0].get<uint64_t>(), end = off[1].get<uint64_t>();
    if (begin > end || end > data_size)
        bad("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
            "] run past the end of the data (" + std::to_string(data_size) +
            " bytes): the file is truncated or corrupt");
    uint64_t expected = 0;
    if (!byte_size(entry.shape, entry.dtype, &expected) || expected != end - begin)
        bad("shape " + shape_text(entry.shape) + " of " + dtype_tag(entry.dtype) +
            " does not match data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
            "] (" + std::to_string(end - begin) + " bytes)");
    entry.nbytes = static_cast<size_t>(end - begin);
    entry.data = data + begin;
    return entry;
}

// No two tensors may share bytes of the data section (which starts at `data`).
void check_no_overlap(const std::string& path,
                      const std::map<std::string, SafeTensorEntry>& entries,
                      const unsigned char* data) {
    std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) of every tensor
    for (const auto& [name, e] : entries) {
        const auto begin = static_cast<uint64_t>(static_cast<const unsigned char*>(e.data) - data);
        ranges.emplace_back(begin, begin + e.nbytes);
    }
    std::sort(ranges.begin(), ranges.end());
    for (size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].first < ranges[i - 1].second) {
            std::string a, b;  // name the two tensors for the message
            for (const auto& [name, e] : entries) {
                const auto begin =
                    static_cast<uint64_t>(static_cast<const unsigned char*>(e.data) - data);
                if (begin == ranges[i - 1].first && a.empty()) a = name;
                else if (begin == ranges[i].first && b.empty()) b = name;
            }
            fail(path, "tensors '" + a + "' and '" + b + "' overlap in the data section");
        }
}

// The header of a mapped file (`bytes`, `size` bytes): its length, its JSON, and every entry
// in it, validated; "__metadata__" is skipped.
std::map<std::string, SafeTensorEntry> parse_header(const std::string& path,
                                                    const unsigned char* bytes, size_t size) {
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];  // little endian
    if (header_len == 0 || header_len > kMaxHeaderBytes || header_len > size - 8)
        fail(path, "header length " + std::to_string(header_len) + " does not fit the file (" +
                       std::to_string(size) + " bytes): truncated or not safetensors");
    nlohmann::json header;
    try {
        header = parse_json_limited(path, bytes + 8, bytes + 8 + header_len);
    } catch (const nlohmann::json::exception&) {
        fail(path, "the header is not valid JSON (truncated or not safetensors)");
    }
    if (!header.is_object()) fail(path, "the header is not a JSON object");
    const uint64_t data_size = size - 8 - header_len;
    const unsigned char* data = bytes + 8 + header_len;
    std::map<std::string, SafeTensorEntry> entries;
    for (const auto& [name, info] : header.items()) {
        if (name == "__metadata__") continue;
        entries.emplace(name, parse_entry(path, name, info, data, data_size));
    }
    check_no_overlap(path, entries, data);
    return entries;
}

}  // namespace

int64_t SafeTensorEntry::numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

SafeTensorsFile::SafeTensorsFile(const std::string& path) : path_(path) {
    map_ = map_file(path, &map_size_);
    try {
        entries_ = parse_header(path, static_cast<const unsigned char*>(map_), map_size_);
    } catch (...) {
        ::munmap(map_, map_size_);
        map_ = nullptr;
        throw;
    }
}

SafeTensorsFile::~SafeTensorsFile() {
    if (map_) ::munmap(map_, map_size_);
}

const SafeTensorEntry* SafeTensorsFile::find(const std::string& name) const {
    auto it = entries_.find(name);
    return it == entries_.end() ? nullptr : &it->second;
}

std::vector<std::string> SafeTensorsFile::names() const {
    std::vector<std::string> out;
    for (const auto& [name, entry] : entries_) out.push_back(name);
    return out;  // std::map keeps them sorted
}

void SafeTensorsFile::read_f32(const std::string& name, const std::vector<int64_t>& expected_shape,
                               float* out) const {
    const SafeTensorEntry* e = find(name);
    if (!e) throw InputError(path_ + ": tensor '" + name + "' is missing");
    if (e->shape != expected_shape)
        throw InputError(path_ + ": tensor '" + name + "' has shape " + shape_text(e->shape) +
                         ", config.json implies " + shape_text(expected_shape));
    const int64_t n = e->numel();
    if (n == 0) return mark_used(name);  // nothing to copy (and `out` may be null)
    const auto* half = static_cast<const uint16_t*>(e->data);
    // Parallel: the Nano's 2.26 B parameters pass through here when a track wants f32 weights.
    switch (e->dtype) {
        case DType::F32: std::memcpy(out, e->data, static_cast<size_t>(n) * sizeof(float)); break;
        case DType::BF16:
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < n; ++i) out[i] = bf16_to_f32(half[i]);
            break;
        case DType::F16:
#pragma omp parallel for schedule(static)
            for (int64_t i = 0; i < n; ++i) out[i] = f16_to_f32(half[i]);
            break;
        case DType::I32: throw Error("read_f32: i32 tensors are never read as weights");
    }
    mark_used(name);
}

void SafeTensorsFile::mark_used(const std::string& name) const { used_.insert(name); }

std::vector<std::string> SafeTensorsFile::unused() const {
    std::vector<std::string> out;
    for (const auto& [name, entry] : entries_)
        if (!used_.count(name)) out.push_back(name);
    return out;
}

void write_safetensors(const std::string& path, const std::vector<SafeTensorToWrite>& tensors) {
    nlohmann::json header = nlohmann::json::object();
    std::vector<size_t> sizes;
    size_t offset = 0;
    for (const auto& t : tensors) {
        if (t.name == "__metadata__" || header.contains(t.name))
            throw Error("write_safetensors: tensor name '" + t.name + "' is reserved or repeated");
        int64_t n = 1;
        for (int64_t d : t.shape) n *= d;
        const size_t bytes = static_cast<size_t>(n) * dtype_size(t.dtype);
        if (bytes && !t.data) throw Error("write_safetensors: tensor '" + t.name + "' has no data");
        header[t.name] = {{"dtype", dtype_tag(t.dtype)},
                          {"shape", t.shape},
                          {"data_offsets", {offset, offset + bytes}}};
        sizes.push_back(bytes);
        offset += bytes;
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
    std::ofstream out(path, std::ios::binary);
    if (!out) throw Error(path + ": cannot write");
    const uint64_t len = text.size();
    for (int i = 0; i < 8; ++i) out.put(static_cast<char>((len >> (8 * i)) & 0xff));
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (size_t i = 0; i < tensors.size(); ++i)
        out.write(static_cast<const char*>(tensors[i].data),
                  static_cast<std::streamsize>(sizes[i]));
    if (!out) throw Error(path + ": write failed");
}

}  // namespace glmasr
