// test_safetensors.cpp — the safetensors reader and writer: exact round trips, dtype
// conversions, and one clean InputError (naming the file) for every kind of broken file.
//
// Files are written to a scratch directory: good ones with write_safetensors, broken ones byte by
// byte (8-byte little-endian header length, JSON header, data), as a damaged download would be.
//
//   ./build/tests/test_safetensors [--gtest_filter=SafeTensorsBad.*]
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "glmasr/error.h"
#include "glmasr/safetensors.h"

namespace fs = std::filesystem;
using namespace glmasr;

namespace {

// A scratch directory for one test, removed with it.
class ScratchDir {
public:
    ScratchDir() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = fs::temp_directory_path() /
                ("glmasr_test_safetensors_" + std::to_string(::getpid()) + "_" + info->name());
        fs::remove_all(path_);
        fs::create_directories(path_);
    }
    ~ScratchDir() { fs::remove_all(path_); }
    std::string file(const std::string& name) const { return (path_ / name).string(); }

private:
    fs::path path_;
};

std::string le64(uint64_t v) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    return s;
}

void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
}

// A file with this header text and `data_bytes` bytes of data after it.
void write_raw(const std::string& path, const std::string& header, size_t data_bytes) {
    write_bytes(path, le64(header.size()) + header + std::string(data_bytes, '\x11'));
}

// Opening `path` must throw an InputError whose one-line message names the file and contains
// every one of `needles`.
void expect_bad(const std::string& path, std::initializer_list<std::string> needles) {
    try {
        SafeTensorsFile file(path);
        FAIL() << path << " opened without error";
    } catch (const InputError& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        for (const std::string& needle : needles)
            EXPECT_NE(what.find(needle), std::string::npos) << what;
        EXPECT_EQ(e.exit_code(), kExitBadInput);
    }
}

}  // namespace

// ------------------------------------------------------------------------------ good files

TEST(SafeTensors, RoundTripKeepsEveryValueExactly) {
    ScratchDir dir;
    const std::vector<float> f32 = {1.0f, -2.5f, 3.14159274f, 1e-30f, -0.0f, 65504.0f};
    // bf16 and f16 bit patterns with exactly known values.
    const std::vector<uint16_t> bf16 = {0x3F80, 0xC020, 0x3E80, 0x0000, 0x8000, 0x4049};
    const std::vector<float> bf16_values = {1.0f, -2.5f, 0.25f, 0.0f, -0.0f, 3.140625f};
    const std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x3555, 0x0001, 0x7BFF, 0x8400};
    const std::vector<float> f16_values = {
        1.0f, -2.0f, 0.333251953125f, 5.9604644775390625e-8f, 65504.0f, -6.103515625e-5f};
    const std::vector<int32_t> i32 = {7, -8};
    const std::string path = dir.file("ok.safetensors");
    write_safetensors(path, {{"a.f32", DType::F32, {2, 3}, f32.data()},
                             {"b.bf16", DType::BF16, {6}, bf16.data()},
                             {"c.f16", DType::F16, {3, 1, 2}, f16.data()},
                             {"d.empty", DType::F32, {0, 4}, nullptr}});

    const SafeTensorsFile file(path);
    EXPECT_EQ(file.path(), path);
    EXPECT_EQ(file.names(), (std::vector<std::string>{"a.f32", "b.bf16", "c.f16", "d.empty"}));
    ASSERT_NE(file.find("b.bf16"), nullptr);
    EXPECT_EQ(file.find("b.bf16")->dtype, DType::BF16);
    EXPECT_EQ(file.find("c.f16")->shape, (std::vector<int64_t>{3, 1, 2}));
    EXPECT_EQ(file.find("c.f16")->nbytes, 12u);
    EXPECT_EQ(file.find("c.f16")->numel(), 6);
    EXPECT_EQ(file.find("d.empty")->numel(), 0);
    EXPECT_EQ(file.find("nope"), nullptr);
    EXPECT_EQ(std::memcmp(file.find("b.bf16")->data, bf16.data(), 12), 0);

    std::vector<float> out(6);
    file.read_f32("a.f32", {2, 3}, out.data());
    for (int i = 0; i < 6; ++i) EXPECT_EQ(std::memcmp(&out[i], &f32[i], 4), 0) << i;  // -0.0 too
    file.read_f32("b.bf16", {6}, out.data());
    for (int i = 0; i < 6; ++i) {
        EXPECT_EQ(out[i], bf16_values[i]) << i;
        EXPECT_EQ(std::signbit(out[i]), std::signbit(bf16_values[i])) << i;
    }
    file.read_f32("c.f16", {3, 1, 2}, out.data());
    for (int i = 0; i < 6; ++i) EXPECT_EQ(out[i], f16_values[i]) << i;
    file.read_f32("d.empty", {0, 4}, out.data());

    // i32 is writable (tools store token ids) but never a weight: the reader refuses it.
    const std::string ids = dir.file("ids.safetensors");
    write_safetensors(ids, {{"ids", DType::I32, {2}, i32.data()}});
    expect_bad(ids, {"'ids'", "I32"});
}

TEST(SafeTensors, HeaderIsPaddedToEightBytesAndReadableByOtherTools) {
    ScratchDir dir;
    const std::string path = dir.file("pad.safetensors");
    const float x = 2.0f;
    write_safetensors(path, {{"x", DType::F32, {1}, &x}});
    std::ifstream in(path, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(bytes[i]);
    EXPECT_EQ(n % 8, 0u);
    ASSERT_EQ(bytes.size(), 8 + n + 4);
    const auto header = nlohmann::json::parse(bytes.substr(8, n));
    EXPECT_EQ(header["x"]["dtype"], "F32");
    EXPECT_EQ(header["x"]["shape"], nlohmann::json::array({1}));
    EXPECT_EQ(header["x"]["data_offsets"], nlohmann::json::array({0, 4}));
    float back;
    std::memcpy(&back, bytes.data() + 8 + n, 4);
    EXPECT_EQ(back, 2.0f);
}

TEST(SafeTensors, Bf16WriteOfConvertedValuesRoundsToNearestEven) {
    ScratchDir dir;
    // bf16 keeps 7 mantissa bits, so near 1 its step is 2^-7. 1 + 2^-8 and 1 + 3·2^-8 are exact
    // ties; as in PyTorch's .to(torch.bfloat16) they go to the even neighbour: 1 and 1 + 2^-6.
    const std::vector<float> in = {1.0f + 0x1.0p-8f, 1.0f + 3 * 0x1.0p-8f, -1.5f};
    std::vector<uint16_t> bits;
    for (float v : in) bits.push_back(f32_to_bf16(v));
    const std::string path = dir.file("rne.safetensors");
    write_safetensors(path, {{"w", DType::BF16, {3}, bits.data()}});
    const SafeTensorsFile file(path);
    std::vector<float> out(3);
    file.read_f32("w", {3}, out.data());
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[1], 1.0f + 0x1.0p-6f);
    EXPECT_EQ(out[2], -1.5f);
}

TEST(SafeTensors, MetadataIsIgnored) {
    ScratchDir dir;
    const std::string path = dir.file("meta.safetensors");
    write_raw(
        path,
        R"({"__metadata__": {"format": "pt"}, "w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}})",
        4);
    const SafeTensorsFile file(path);
    EXPECT_EQ(file.names(), std::vector<std::string>{"w"});
}

TEST(SafeTensors, ReadF32ChecksTheShapeAndTheName) {
    ScratchDir dir;
    const std::string path = dir.file("shape.safetensors");
    const std::vector<float> v(6, 1.0f);
    write_safetensors(path, {{"layer.weight", DType::F32, {2, 3}, v.data()}});
    const SafeTensorsFile file(path);
    std::vector<float> out(6);
    try {
        file.read_f32("layer.weight", {3, 2}, out.data());
        FAIL() << "wrong shape accepted";
    } catch (const InputError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(path), std::string::npos) << what;
        EXPECT_NE(what.find("layer.weight"), std::string::npos) << what;
        EXPECT_NE(what.find("[2, 3]"), std::string::npos) << what;
        EXPECT_NE(what.find("[3, 2]"), std::string::npos) << what;
    }
    EXPECT_THROW(file.read_f32("other.weight", {2, 3}, out.data()), InputError);
}

TEST(SafeTensors, UsedAndUnusedBookkeeping) {
    ScratchDir dir;
    const std::string path = dir.file("used.safetensors");
    const float v[2] = {1, 2};
    write_safetensors(path, {{"a", DType::F32, {1}, &v[0]},
                             {"b", DType::F32, {1}, &v[1]},
                             {"c", DType::F32, {1}, &v[1]}});
    const SafeTensorsFile file(path);
    EXPECT_EQ(file.unused(), (std::vector<std::string>{"a", "b", "c"}));
    float out;
    file.read_f32("b", {1}, &out);
    file.mark_used("c");
    EXPECT_EQ(file.unused(), std::vector<std::string>{"a"});
}

// A header is parsed in time linear in its size: 200,000 zero-size tensors (an 11 MB header)
// take well under a second, where a parser that rescans an object at each member's end (nlohmann's
// callback parser, json_limits.h) takes minutes. The bound is far above the linear time, even
// instrumented (make asan), and far below the quadratic one.
TEST(SafeTensors, AHugeHeaderParsesInLinearTime) {
    ScratchDir dir;
    const std::string path = dir.file("many.safetensors");
    constexpr int kTensors = 200000;
    std::string header = "{";
    for (int i = 0; i < kTensors; ++i)
        header += (i ? ",\"t" : "\"t") + std::to_string(i) +
                  R"(":{"dtype":"F32","shape":[0],"data_offsets":[0,0]})";
    header += "}";
    write_raw(path, header, 0);
    const auto started = std::chrono::steady_clock::now();
    const SafeTensorsFile file(path);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    EXPECT_EQ(file.names().size(), static_cast<size_t>(kTensors));
    EXPECT_LT(seconds, 60.0) << "a " << header.size() << "-byte header took " << seconds << " s";
}

TEST(SafeTensors, WriterRefusesRepeatedNames) {
    ScratchDir dir;
    const float v = 1;
    EXPECT_THROW(write_safetensors(dir.file("dup.safetensors"),
                                   {{"a", DType::F32, {1}, &v}, {"a", DType::F32, {1}, &v}}),
                 Error);
}

// ------------------------------------------------------------------------------ bad files

TEST(SafeTensorsBad, MissingFile) {
    ScratchDir dir;
    expect_bad(dir.file("absent.safetensors"), {"cannot open"});
}

TEST(SafeTensorsBad, Directory) {
    ScratchDir dir;
    expect_bad(dir.file(""), {"not a regular file"});
}

TEST(SafeTensorsBad, EmptyFile) {
    ScratchDir dir;
    const std::string path = dir.file("empty.safetensors");
    write_bytes(path, "");
    expect_bad(path, {"too small"});
}

TEST(SafeTensorsBad, FourByteFile) {
    ScratchDir dir;
    const std::string path = dir.file("four.safetensors");
    write_bytes(path, std::string("\x10\x00\x00\x00", 4));
    expect_bad(path, {"too small"});
}

TEST(SafeTensorsBad, HeaderLengthLargerThanTheFile) {
    ScratchDir dir;
    const std::string path = dir.file("long.safetensors");
    write_bytes(path, le64(1000) + "{}");
    expect_bad(path, {"header length 1000"});
}

TEST(SafeTensorsBad, HeaderLengthZeroOrHuge) {
    ScratchDir dir;
    const std::string zero = dir.file("zero.safetensors");
    write_bytes(zero, le64(0) + "{}");
    expect_bad(zero, {"header length 0"});
    const std::string huge = dir.file("huge.safetensors");
    write_bytes(huge, le64(std::numeric_limits<uint64_t>::max()) + "{}");
    expect_bad(huge, {"header length"});
}

TEST(SafeTensorsBad, HeaderNotJson) {
    ScratchDir dir;
    const std::string path = dir.file("notjson.safetensors");
    write_raw(path, "{\"a\": {\"dtype\": ", 16);
    expect_bad(path, {"not valid JSON"});
    const std::string binary = dir.file("binary.safetensors");
    write_bytes(binary, le64(4) + std::string("\xff\xfe\x00\x01", 4) + "data");
    expect_bad(binary, {"not valid JSON"});
}

TEST(SafeTensorsBad, HeaderJsonNotAnObject) {
    ScratchDir dir;
    const std::string path = dir.file("array.safetensors");
    write_raw(path, "[1, 2, 3]", 0);
    expect_bad(path, {"not a JSON object"});
}

TEST(SafeTensorsBad, UnsupportedDtype) {
    ScratchDir dir;
    for (const char* dtype : {"I64", "F64", "U8", "BOOL"}) {
        const std::string path = dir.file(std::string("dtype_") + dtype + ".safetensors");
        write_raw(path,
                  std::string(R"({"ids": {"dtype": ")") + dtype +
                      R"(", "shape": [1], "data_offsets": [0, 8]}})",
                  8);
        expect_bad(path, {"'ids'", dtype});
    }
}

TEST(SafeTensorsBad, MissingOrMalformedFields) {
    ScratchDir dir;
    const std::string a = dir.file("nofield.safetensors");
    write_raw(a, R"({"w": {"dtype": "F32", "shape": [1]}})", 4);
    expect_bad(a, {"'w'", "data_offsets"});
    const std::string b = dir.file("negshape.safetensors");
    write_raw(b, R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4);
    expect_bad(b, {"'w'", "shape"});
    const std::string c = dir.file("floatshape.safetensors");
    write_raw(c, R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4);
    expect_bad(c, {"'w'", "shape"});
    const std::string d = dir.file("negoffset.safetensors");
    write_raw(d, R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}})", 4);
    expect_bad(d, {"'w'", "data_offsets"});
    const std::string e = dir.file("notobject.safetensors");
    write_raw(e, R"({"w": 3})", 4);
    expect_bad(e, {"'w'"});
}

TEST(SafeTensorsBad, DataOffsetsOutOfRange) {
    ScratchDir dir;
    const std::string path = dir.file("range.safetensors");
    write_raw(path, R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})", 16);
    expect_bad(path, {"'w'", "past the end"});
    const std::string reversed = dir.file("reversed.safetensors");
    write_raw(reversed, R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 4]}})", 16);
    expect_bad(reversed, {"'w'"});
}

TEST(SafeTensorsBad, SizeMismatchBetweenShapeAndOffsets) {
    ScratchDir dir;
    const std::string path = dir.file("size.safetensors");
    write_raw(path, R"({"w": {"dtype": "BF16", "shape": [3, 2], "data_offsets": [0, 24]}})", 24);
    expect_bad(path, {"'w'", "[3, 2]", "BF16"});
}

TEST(SafeTensorsBad, ShapeWhoseByteCountOverflows) {
    ScratchDir dir;
    // 2^32 · 2^32 · 4 bytes wraps to 0 in 64 bits: must not pass for an empty tensor.
    const std::string path = dir.file("overflow.safetensors");
    write_raw(
        path,
        R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})", 8);
    expect_bad(path, {"'w'"});
}

TEST(SafeTensorsBad, OverlappingTensors) {
    ScratchDir dir;
    const std::string path = dir.file("overlap.safetensors");
    write_raw(path,
              R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},)"
              R"( "b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
              16);
    expect_bad(path, {"overlap", "'a'", "'b'"});
}

TEST(SafeTensorsBad, TruncatedDataSection) {
    ScratchDir dir;
    const std::string path = dir.file("trunc.safetensors");
    const std::vector<float> v(64, 0.5f);
    write_safetensors(path,
                      {{"a", DType::F32, {32}, v.data()}, {"b", DType::F32, {32}, v.data() + 32}});
    fs::resize_file(path, fs::file_size(path) - 10);
    expect_bad(path, {"truncated"});
    // Cut inside the header: its length no longer fits the file.
    fs::resize_file(path, 20);
    expect_bad(path, {"header length"});
}
