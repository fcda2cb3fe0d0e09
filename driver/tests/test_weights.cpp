// test_weights.cpp — loading a checkpoint into ModelWeights, and random weights.
//
// Each test writes a small checkpoint of a tiny GLM-ASR (2 encoder layers 32 wide, 2 decoder
// layers) with write_safetensors, loads it into host memory, and checks that every value lands
// in the right field in the dtype the op table asks for. The tensor list below is written
// from docs/model.md §7.1, independently of weights.cpp, so the two check each other.
//
// The op tables are built by hand from two local tracks (f32 and bf16 weights) whose ops are
// never called: loading only asks a table for weight dtypes.
//
//   ./build/tests/test_weights [--gtest_filter=Weights.*]
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "glmasr/checkpoint.h"
#include "glmasr/error.h"
#include "glmasr/safetensors.h"
#include "glmasr/weights.h"

namespace fs = std::filesystem;
using namespace glmasr;

namespace {

const Track kF32Track{"f32-test", "weights stored in f32", Device::Host, DType::F32, Ops{}};
const Track kBf16Track{"bf16-test", "weights stored in bf16", Device::Host, DType::BF16, Ops{}};

// Every op from `linear`'s track, except conv1d and embedding.
OpTable make_table(const Track& linear, const Track& conv, const Track& embedding) {
    OpTable t;
    t.source.fill(&linear);
    t.source[static_cast<int>(OpId::conv1d)] = &conv;
    t.source[static_cast<int>(OpId::embedding)] = &embedding;
    t.base = &linear;
    t.device = Device::Host;
    EXPECT_EQ(t.weight_dtype(OpId::conv1d), conv.weight_dtype);
    return t;
}
OpTable f32_table() { return make_table(kF32Track, kF32Track, kF32Track); }

// Host memory that counts allocations, so tests can check "one allocation, freed with storage".
class CountingBackend final : public Backend {
public:
    int allocs = 0, frees = 0;
    Device device() const override { return Device::Host; }
    void* alloc(size_t bytes) override {
        ++allocs;
        return host().alloc(bytes);
    }
    void free(void* p) override {
        ++frees;
        host().free(p);
    }
    void upload(void* d, const void* s, size_t n, Stream st) override {
        host().upload(d, s, n, st);
    }
    void download(void* d, const void* s, size_t n, Stream st) override {
        host().download(d, s, n, st);
    }
    void copy(void* d, const void* s, size_t n, Stream st) override { host().copy(d, s, n, st); }
    void zero(void* d, size_t n, Stream st) override { host().zero(d, n, st); }
    void synchronize(Stream) override {}
    Stream stream() override { return nullptr; }
    size_t memory_in_use() override { return host().memory_in_use(); }
    Mark mark(Stream s) override { return host().mark(s); }
    double elapsed_ms(const Mark& a, const Mark& b) override { return host().elapsed_ms(a, b); }

private:
    static Backend& host() { return host_backend(); }
};

ModelConfig tiny_config() {
    ModelConfig c;
    c.audio.hidden_size = 32;
    c.audio.intermediate_size = 4 * 32;
    c.audio.num_layers = 2;
    c.audio.num_heads = 4;
    c.audio.num_kv_heads = 2;  // k/v narrower than q: catches a q/kv mix-up in the shapes
    c.audio.head_dim = 8;
    c.audio.num_mel_bins = 8;
    c.text.vocab_size = 50;
    c.text.hidden_size = 32;
    c.text.intermediate_size = 48;
    c.text.num_layers = 2;
    c.text.num_heads = 4;
    c.text.num_kv_heads = 2;
    c.text.head_dim = 8;
    c.text.eos_token_ids = {49};
    c.audio_token_id = 48;
    c.validate("tiny_config");
    return c;
}

struct Named {
    std::string name;
    std::vector<int64_t> shape;
};

// docs/model.md §7.1 for `c`, without the lm_head.
std::vector<Named> checkpoint_layout(const ModelConfig& c) {
    const int64_t De = c.audio.hidden_size, Fe = c.audio.intermediate_size,
                  qe = c.audio.num_heads * c.audio.head_dim,
                  kve = c.audio.num_kv_heads * c.audio.head_dim;
    const int64_t Dt = c.text.hidden_size, Ft = c.text.intermediate_size,
                  qd = c.text.num_heads * c.text.head_dim,
                  kvd = c.text.num_kv_heads * c.text.head_dim;
    std::vector<Named> t = {{"audio_tower.conv1.weight", {De, c.audio.num_mel_bins, 3}},
                            {"audio_tower.conv1.bias", {De}},
                            {"audio_tower.conv2.weight", {De, De, 3}},
                            {"audio_tower.conv2.bias", {De}}};
    for (int l = 0; l < c.audio.num_layers; ++l) {
        const std::string p = "audio_tower.layers." + std::to_string(l) + ".";
        for (const Named& n : std::vector<Named>{{"input_layernorm.weight", {De}},
                                                 {"input_layernorm.bias", {De}},
                                                 {"self_attn.q_proj.weight", {qe, De}},
                                                 {"self_attn.q_proj.bias", {qe}},
                                                 {"self_attn.k_proj.weight", {kve, De}},
                                                 {"self_attn.v_proj.weight", {kve, De}},
                                                 {"self_attn.v_proj.bias", {kve}},
                                                 {"self_attn.o_proj.weight", {De, qe}},
                                                 {"self_attn.o_proj.bias", {De}},
                                                 {"post_attention_layernorm.weight", {De}},
                                                 {"post_attention_layernorm.bias", {De}},
                                                 {"mlp.fc1.weight", {Fe, De}},
                                                 {"mlp.fc1.bias", {Fe}},
                                                 {"mlp.fc2.weight", {De, Fe}},
                                                 {"mlp.fc2.bias", {De}}})
            t.push_back({p + n.name, n.shape});
    }
    t.push_back({"audio_tower.norm.weight", {De}});
    t.push_back({"audio_tower.norm.bias", {De}});
    t.push_back({"multi_modal_projector.linear_1.weight", {2 * Dt, 4 * De}});
    t.push_back({"multi_modal_projector.linear_1.bias", {2 * Dt}});
    t.push_back({"multi_modal_projector.linear_2.weight", {Dt, 2 * Dt}});
    t.push_back({"multi_modal_projector.linear_2.bias", {Dt}});
    t.push_back({"language_model.model.embed_tokens.weight", {c.text.vocab_size, Dt}});
    for (int l = 0; l < c.text.num_layers; ++l) {
        const std::string p = "language_model.model.layers." + std::to_string(l) + ".";
        for (const Named& n : std::vector<Named>{{"input_layernorm.weight", {Dt}},
                                                 {"self_attn.q_proj.weight", {qd, Dt}},
                                                 {"self_attn.k_proj.weight", {kvd, Dt}},
                                                 {"self_attn.v_proj.weight", {kvd, Dt}},
                                                 {"self_attn.o_proj.weight", {Dt, qd}},
                                                 {"post_attention_layernorm.weight", {Dt}},
                                                 {"mlp.gate_proj.weight", {Ft, Dt}},
                                                 {"mlp.up_proj.weight", {Ft, Dt}},
                                                 {"mlp.down_proj.weight", {Dt, Ft}}})
            t.push_back({p + n.name, n.shape});
    }
    t.push_back({"language_model.model.norm.weight", {Dt}});
    return t;
}

int64_t numel(const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
}

// The ModelWeights field that holds a canonical tensor name.
const Tensor& field(const ModelWeights& w, const std::string& name) {
    static const std::map<std::string, Tensor EncoderLayerWeights::*> enc = {
        {"input_layernorm.weight", &EncoderLayerWeights::ln1_w},
        {"input_layernorm.bias", &EncoderLayerWeights::ln1_b},
        {"self_attn.q_proj.weight", &EncoderLayerWeights::q_w},
        {"self_attn.q_proj.bias", &EncoderLayerWeights::q_b},
        {"self_attn.k_proj.weight", &EncoderLayerWeights::k_w},
        {"self_attn.v_proj.weight", &EncoderLayerWeights::v_w},
        {"self_attn.v_proj.bias", &EncoderLayerWeights::v_b},
        {"self_attn.o_proj.weight", &EncoderLayerWeights::o_w},
        {"self_attn.o_proj.bias", &EncoderLayerWeights::o_b},
        {"post_attention_layernorm.weight", &EncoderLayerWeights::ln2_w},
        {"post_attention_layernorm.bias", &EncoderLayerWeights::ln2_b},
        {"mlp.fc1.weight", &EncoderLayerWeights::fc1_w},
        {"mlp.fc1.bias", &EncoderLayerWeights::fc1_b},
        {"mlp.fc2.weight", &EncoderLayerWeights::fc2_w},
        {"mlp.fc2.bias", &EncoderLayerWeights::fc2_b}};
    static const std::map<std::string, Tensor DecoderLayerWeights::*> dec = {
        {"input_layernorm.weight", &DecoderLayerWeights::norm1_w},
        {"self_attn.q_proj.weight", &DecoderLayerWeights::q_w},
        {"self_attn.k_proj.weight", &DecoderLayerWeights::k_w},
        {"self_attn.v_proj.weight", &DecoderLayerWeights::v_w},
        {"self_attn.o_proj.weight", &DecoderLayerWeights::o_w},
        {"post_attention_layernorm.weight", &DecoderLayerWeights::norm2_w},
        {"mlp.gate_proj.weight", &DecoderLayerWeights::gate_w},
        {"mlp.up_proj.weight", &DecoderLayerWeights::up_w},
        {"mlp.down_proj.weight", &DecoderLayerWeights::down_w}};
    const std::map<std::string, const Tensor*> top = {
        {"audio_tower.conv1.weight", &w.conv1_w},
        {"audio_tower.conv1.bias", &w.conv1_b},
        {"audio_tower.conv2.weight", &w.conv2_w},
        {"audio_tower.conv2.bias", &w.conv2_b},
        {"audio_tower.norm.weight", &w.enc_norm_w},
        {"audio_tower.norm.bias", &w.enc_norm_b},
        {"multi_modal_projector.linear_1.weight", &w.proj1_w},
        {"multi_modal_projector.linear_1.bias", &w.proj1_b},
        {"multi_modal_projector.linear_2.weight", &w.proj2_w},
        {"multi_modal_projector.linear_2.bias", &w.proj2_b},
        {"language_model.model.embed_tokens.weight", &w.embed},
        {"language_model.model.norm.weight", &w.final_norm_w},
        {"language_model.lm_head.weight", &w.lm_head}};
    if (auto it = top.find(name); it != top.end()) return *it->second;
    for (const auto& [prefix, is_encoder] :
         {std::pair<std::string, bool>{"audio_tower.layers.", true},
          {"language_model.model.layers.", false}}) {
        if (name.rfind(prefix, 0) != 0) continue;
        const size_t dot = name.find('.', prefix.size());
        const int layer = std::stoi(name.substr(prefix.size(), dot - prefix.size()));
        const std::string rest = name.substr(dot + 1);
        return is_encoder ? w.encoder.at(layer).*enc.at(rest) : w.decoder.at(layer).*dec.at(rest);
    }
    throw std::runtime_error("no field for " + name);
}

// Distinct, exactly representable values for tensor `t`: every tensor and element differs, and
// they are multiples of 2^-10 below 8 so bf16 keeps only some of them exactly.
float value(size_t t, int64_t i) {
    return static_cast<float>(static_cast<int64_t>((t * 7919 + i * 104729) % 8191) - 4095) /
               1024.0f +
           0.001f * (i % 3);
}

// A checkpoint under construction: names, shapes and f32 values, written as f32, bf16 or f16.
struct TestCheckpoint {
    std::vector<Named> tensors;
    std::vector<std::vector<float>> values;

    explicit TestCheckpoint(const ModelConfig& c, bool with_lm_head = true) {
        for (const Named& n : checkpoint_layout(c)) add(n.name, n.shape);
        if (with_lm_head)
            add("language_model.lm_head.weight", {c.text.vocab_size, c.text.hidden_size});
    }
    void add(const std::string& name, const std::vector<int64_t>& shape) {
        tensors.push_back({name, shape});
        values.emplace_back(numel(shape));
        for (int64_t i = 0; i < numel(shape); ++i) values.back()[i] = value(values.size(), i);
    }
    size_t index(const std::string& name) const {
        for (size_t i = 0; i < tensors.size(); ++i)
            if (tensors[i].name == name) return i;
        throw std::runtime_error("no tensor " + name);
    }
    const std::vector<float>& operator[](const std::string& name) const {
        return values[index(name)];
    }
    void remove(const std::string& name) {
        const size_t i = index(name);
        tensors.erase(tensors.begin() + i);
        values.erase(values.begin() + i);
    }
    void rename(const std::function<std::string(const std::string&)>& f) {
        for (Named& n : tensors) n.name = f(n.name);
    }
    // `dtype` for every tensor (bf16/f16 by bits: the values are rounded when converted).
    void write(const std::string& path, DType dtype = DType::F32) const {
        std::vector<std::vector<uint16_t>> half(tensors.size());
        std::vector<SafeTensorToWrite> out;
        for (size_t i = 0; i < tensors.size(); ++i) {
            const void* data = values[i].data();
            if (dtype == DType::BF16) {
                for (float v : values[i]) half[i].push_back(f32_to_bf16(v));
                data = half[i].data();
            } else if (dtype == DType::F16) {
                for (float v : values[i]) half[i].push_back(f32_to_f16_exact(v));
                data = half[i].data();
            }
            out.push_back({tensors[i].name, dtype, tensors[i].shape, data});
        }
        write_safetensors(path, out);
    }
    // f16 bits of a value that f16 holds exactly (the project has no f32 → f16 conversion: the
    // table inverts f16_to_f32 over all 65536 patterns).
    static uint16_t f32_to_f16_exact(float v) {
        static const std::map<float, uint16_t> table = [] {
            std::map<float, uint16_t> m;
            for (uint32_t bits = 0; bits < 0x10000u; ++bits) {
                const float f = f16_to_f32(static_cast<uint16_t>(bits));
                if (!std::isnan(f)) m.emplace(f, static_cast<uint16_t>(bits));  // +0 before -0
            }
            return m;
        }();
        const auto it = table.find(v);
        if (it == table.end()) throw std::runtime_error("value not exact in f16");
        return it->second;
    }
};

// A scratch checkpoint path for one test, removed with it.
class ScratchFile {
public:
    ScratchFile() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        path_ = (fs::temp_directory_path() / ("glmasr_test_weights_" + std::to_string(::getpid()) +
                                              "_" + info->name() + ".safetensors"))
                    .string();
    }
    ~ScratchFile() { fs::remove(path_); }
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

std::vector<float> as_f32(const Tensor& t) {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    for (int64_t i = 0; i < t.numel(); ++i)
        out[i] = t.dtype == DType::F32 ? t.f32()[i] : bf16_to_f32(t.bf16_bits()[i]);
    return out;
}

// Loading must fail with an InputError naming the file and containing every needle.
void expect_load_error(const std::string& path, const ModelConfig& c,
                       std::initializer_list<std::string> needles) {
    try {
        load_weights(path, c, f32_table(), host_backend());
        FAIL() << "loaded without error";
    } catch (const InputError& e) {
        const std::string what = e.what();
        EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
        for (const std::string& n : needles)
            EXPECT_NE(what.find(n), std::string::npos) << "'" << n << "' not in: " << what;
    }
}

bool is_matrix(const std::string& name) {
    return name.find("weight") != std::string::npos && name.find("norm") == std::string::npos;
}

}  // namespace

// ------------------------------------------------------------------------------ loading

TEST(Weights, EveryTensorLandsInItsFieldExactly) {
    const ModelConfig c = tiny_config();
    const TestCheckpoint ckpt(c);
    ScratchFile file;
    ckpt.write(file.path());
    CountingBackend backend;
    {
        const ModelWeights w = load_weights(file.path(), c, f32_table(), backend);
        EXPECT_EQ(backend.allocs, 1);  // one allocation for the whole model
        ASSERT_EQ(w.encoder.size(), 2u);
        ASSERT_EQ(w.decoder.size(), 2u);
        const char* base = static_cast<const char*>(w.storage.get());
        for (const Named& n : ckpt.tensors) {
            SCOPED_TRACE(n.name);
            const Tensor& t = field(w, n.name);
            EXPECT_EQ(t.dtype, DType::F32);
            EXPECT_EQ(t.device, Device::Host);
            ASSERT_EQ(t.ndim, static_cast<int>(n.shape.size()));
            for (int d = 0; d < t.ndim; ++d) EXPECT_EQ(t.shape[d], n.shape[d]);
            EXPECT_EQ((static_cast<const char*>(t.data) - base) % 256, 0);
            EXPECT_EQ(as_f32(t), ckpt[n.name]);
        }
        EXPECT_TRUE(w.lm_head_is_separate);
        EXPECT_NE(w.lm_head.data, w.embed.data);  // different values: its own copy
        EXPECT_TRUE(w.unused_tensors.empty());
        const auto [unique, stored] = count_parameters(c);
        EXPECT_EQ(w.unique_parameters, unique);
        EXPECT_EQ(w.stored_parameters, stored);
        ModelWeights copy = w;  // the storage is shared, not freed with one holder
    }
    EXPECT_EQ(backend.frees, 1);
}

TEST(Weights, MatricesTakeTheirOpsDtypeVectorsStayF32) {
    const ModelConfig c = tiny_config();
    const TestCheckpoint ckpt(c);
    ScratchFile file;
    ckpt.write(file.path());
    // linear in bf16, conv1d in f32, embedding in bf16.
    const OpTable table = make_table(kBf16Track, kF32Track, kBf16Track);
    const ModelWeights w = load_weights(file.path(), c, table, host_backend());
    for (const Named& n : ckpt.tensors) {
        SCOPED_TRACE(n.name);
        const Tensor& t = field(w, n.name);
        const bool conv = n.name.find("conv") != std::string::npos;
        const DType want = !is_matrix(n.name) || conv ? DType::F32 : DType::BF16;
        ASSERT_EQ(t.dtype, want);
        const std::vector<float>& v = ckpt[n.name];
        for (int64_t i = 0; i < t.numel(); ++i) {
            if (want == DType::F32) ASSERT_EQ(t.f32()[i], v[i]) << i;
            else ASSERT_EQ(t.bf16_bits()[i], f32_to_bf16(v[i])) << i;
        }
    }
}

TEST(Weights, ProductsOfOneInputLieBackToBack) {
    // weights.cpp places every matrix before every vector, so a layer's q, k and v projections
    // (and the decoder's gate and up) form one matrix a track may multiply at once; loaded and
    // random weights alike.
    const ModelConfig c = tiny_config();
    const TestCheckpoint ckpt(c);
    ScratchFile file;
    ckpt.write(file.path());
    const OpTable table = make_table(kBf16Track, kF32Track, kBf16Track);
    auto follows = [](const Tensor& a, const Tensor& b) {
        return static_cast<const char*>(a.data) + a.bytes() == static_cast<const char*>(b.data);
    };
    for (const ModelWeights& w : {load_weights(file.path(), c, table, host_backend()),
                                  random_weights(c, table, host_backend(), 7)}) {
        for (const EncoderLayerWeights& L : w.encoder) {
            EXPECT_TRUE(follows(L.q_w, L.k_w));
            EXPECT_TRUE(follows(L.k_w, L.v_w));
        }
        for (const DecoderLayerWeights& L : w.decoder) {
            EXPECT_TRUE(follows(L.q_w, L.k_w));
            EXPECT_TRUE(follows(L.k_w, L.v_w));
            EXPECT_TRUE(follows(L.gate_w, L.up_w));
        }
    }
}

TEST(Weights, Bf16CheckpointIntoF32AndBf16Tracks) {
    const ModelConfig c = tiny_config();
    const TestCheckpoint ckpt(c);
    ScratchFile file;
    ckpt.write(file.path(), DType::BF16);
    const ModelWeights f32 = load_weights(file.path(), c, f32_table(), host_backend());
    const ModelWeights bf16 = load_weights(
        file.path(), c, make_table(kBf16Track, kBf16Track, kBf16Track), host_backend());
    for (const Named& n : ckpt.tensors) {
        SCOPED_TRACE(n.name);
        const std::vector<float>& v = ckpt[n.name];
        const Tensor& a = field(f32, n.name);
        const Tensor& b = field(bf16, n.name);
        ASSERT_EQ(a.dtype, DType::F32);
        for (int64_t i = 0; i < a.numel(); ++i)
            ASSERT_EQ(a.f32()[i], bf16_to_f32(f32_to_bf16(v[i]))) << i;
        if (b.dtype == DType::BF16)
            for (int64_t i = 0; i < b.numel(); ++i)
                ASSERT_EQ(b.bf16_bits()[i], f32_to_bf16(v[i])) << i;
        else EXPECT_EQ(as_f32(b), as_f32(a));
    }
}

TEST(Weights, F16Checkpoint) {
    const ModelConfig c = tiny_config();
    TestCheckpoint ckpt(c);
    for (auto& v : ckpt.values)
        for (float& x : v) x = std::round(x * 64) / 64;  // multiples of 2^-6 below 8: exact in f16
    ScratchFile file;
    ckpt.write(file.path(), DType::F16);
    const ModelWeights w = load_weights(file.path(), c, f32_table(), host_backend());
    for (const Named& n : ckpt.tensors) EXPECT_EQ(as_f32(field(w, n.name)), ckpt[n.name]) << n.name;
}

TEST(Weights, TiedLmHeadSharesTheEmbeddings) {
    ModelConfig c = tiny_config();
    c.tie_word_embeddings = true;
    const TestCheckpoint ckpt(c, /*with_lm_head=*/false);
    ScratchFile file;
    ckpt.write(file.path());
    CountingBackend backend;
    const ModelWeights w = load_weights(file.path(), c, f32_table(), backend);
    EXPECT_FALSE(w.lm_head_is_separate);
    EXPECT_EQ(w.lm_head.data, w.embed.data);
    EXPECT_EQ(w.lm_head.shape[0], c.text.vocab_size);
    EXPECT_EQ(w.lm_head.shape[1], c.text.hidden_size);
    EXPECT_EQ(backend.allocs, 1);
}

TEST(Weights, TiedLmHeadInAnotherDtypeIsAConvertedCopy) {
    ModelConfig c = tiny_config();
    c.tie_word_embeddings = true;
    const TestCheckpoint ckpt(c, /*with_lm_head=*/false);
    ScratchFile file;
    ckpt.write(file.path());
    // linear (and so the lm_head) in bf16, the embedding table in f32
    const ModelWeights w =
        load_weights(file.path(), c, make_table(kBf16Track, kF32Track, kF32Track), host_backend());
    ASSERT_EQ(w.embed.dtype, DType::F32);
    ASSERT_EQ(w.lm_head.dtype, DType::BF16);
    EXPECT_NE(w.lm_head.data, w.embed.data);
    const std::vector<float>& v = ckpt["language_model.model.embed_tokens.weight"];
    for (int64_t i = 0; i < w.lm_head.numel(); ++i)
        ASSERT_EQ(w.lm_head.bf16_bits()[i], f32_to_bf16(v[i])) << i;
}

TEST(Weights, UntiedConfigNeedsAnLmHead) {
    ModelConfig c = tiny_config();
    c.tie_word_embeddings = false;
    const TestCheckpoint ckpt(c, /*with_lm_head=*/false);
    ScratchFile file;
    ckpt.write(file.path());
    expect_load_error(file.path(), c, {"language_model.lm_head.weight", "missing"});
}

TEST(Weights, IdenticalLmHeadIsStoredOnce) {
    // The Nano checkpoint's lm_head is a bitwise copy of embed_tokens (docs/model.md §5).
    const ModelConfig c = tiny_config();
    TestCheckpoint ckpt(c);
    ckpt.values[ckpt.index("language_model.lm_head.weight")] =
        ckpt["language_model.model.embed_tokens.weight"];
    ScratchFile file;
    ckpt.write(file.path());
    const ModelWeights w = load_weights(file.path(), c, f32_table(), host_backend());
    EXPECT_TRUE(w.lm_head_is_separate);
    EXPECT_EQ(w.lm_head.data, w.embed.data);
    EXPECT_TRUE(w.unused_tensors.empty());
    // ... unless the linear and embedding ops want different dtypes.
    const ModelWeights mixed =
        load_weights(file.path(), c, make_table(kBf16Track, kF32Track, kF32Track), host_backend());
    EXPECT_NE(mixed.lm_head.data, mixed.embed.data);
    EXPECT_EQ(mixed.lm_head.dtype, DType::BF16);
}

TEST(Weights, PrefixVariantsOfRecentTransformers) {
    // docs/model.md §7.2: model.audio_tower.*, model.multi_modal_projector.*,
    // model.language_model.* (no ".model.") and lm_head.weight.
    const ModelConfig c = tiny_config();
    const TestCheckpoint hub(c);
    TestCheckpoint renamed(c);
    renamed.rename([](const std::string& n) {
        const std::string lm = "language_model.model.";
        if (n == "language_model.lm_head.weight") return std::string("lm_head.weight");
        if (n.rfind(lm, 0) == 0) return "model.language_model." + n.substr(lm.size());
        return "model." + n;
    });
    ScratchFile file;
    renamed.write(file.path());
    const ModelWeights w = load_weights(file.path(), c, f32_table(), host_backend());
    for (const Named& n : hub.tensors) EXPECT_EQ(as_f32(field(w, n.name)), hub[n.name]) << n.name;
    EXPECT_TRUE(w.lm_head_is_separate);
    EXPECT_TRUE(w.unused_tensors.empty());

    // "language_model.X" without ".model." is the decoder's X too.
    TestCheckpoint short_names(c);
    short_names.rename([](const std::string& n) {
        const std::string lm = "language_model.model.";
        return n.rfind(lm, 0) == 0 ? "language_model." + n.substr(lm.size()) : n;
    });
    short_names.write(file.path());
    const ModelWeights s = load_weights(file.path(), c, f32_table(), host_backend());
    for (const Named& n : hub.tensors) EXPECT_EQ(as_f32(field(s, n.name)), hub[n.name]) << n.name;
}

TEST(Weights, SavePretrainedLayoutOfTransformers517) {
    // What GlmAsrForConditionalGeneration.save_pretrained writes (docs/model.md §7.2):
    // language_model.model.model.* for the decoder, the rest as on the Hub.
    const ModelConfig c = tiny_config();
    const TestCheckpoint hub(c);
    TestCheckpoint saved(c);
    saved.rename([](const std::string& n) {
        const std::string lm = "language_model.model.";
        return n.rfind(lm, 0) == 0 ? "language_model.model.model." + n.substr(lm.size()) : n;
    });
    ScratchFile file;
    saved.write(file.path());
    const ModelWeights w = load_weights(file.path(), c, f32_table(), host_backend());
    for (const Named& n : hub.tensors) EXPECT_EQ(as_f32(field(w, n.name)), hub[n.name]) << n.name;
    EXPECT_TRUE(w.unused_tensors.empty());
}

// A folder of shards for one test: write(ckpt, shards) splits the tensors round-robin over
// `shards` files and writes model.safetensors.index.json beside them; removed with the test.
class ScratchShards {
public:
    ScratchShards() {
        const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
        dir_ = fs::temp_directory_path() /
               ("glmasr_test_shards_" + std::to_string(::getpid()) + "_" + info->name());
        fs::create_directories(dir_);
    }
    ~ScratchShards() { fs::remove_all(dir_); }
    std::string index() const { return (dir_ / "model.safetensors.index.json").string(); }
    std::string shard(int i, int n) const {
        char name[64];
        std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", i + 1, n);
        return name;
    }
    // Each tensor's shard as written, and the weight_map as written (edit it to break the index).
    nlohmann::json write(const TestCheckpoint& ckpt, int shards) const {
        nlohmann::json map = nlohmann::json::object();
        for (int s = 0; s < shards; ++s) {
            TestCheckpoint part = ckpt;
            part.tensors.clear();
            part.values.clear();
            for (size_t i = s; i < ckpt.tensors.size(); i += shards) {
                part.tensors.push_back(ckpt.tensors[i]);
                part.values.push_back(ckpt.values[i]);
                map[ckpt.tensors[i].name] = shard(s, shards);
            }
            part.write((dir_ / shard(s, shards)).string());
        }
        write_index(map);
        return map;
    }
    void write_index(const nlohmann::json& weight_map) const {
        std::ofstream(index())
            << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}}.dump();
    }
    const fs::path& dir() const { return dir_; }

private:
    fs::path dir_;
};

TEST(Weights, ShardedCheckpointLoadsLikeOneFile) {
    const ModelConfig c = tiny_config();
    TestCheckpoint ckpt(c);
    ckpt.add("audio_tower.embed_positions.weight", {4, c.audio.hidden_size});  // unused, in a shard
    ScratchShards shards;
    shards.write(ckpt, 3);
    EXPECT_EQ(Checkpoint::find_in(shards.dir()), shards.index());
    const Checkpoint opened(shards.index());
    EXPECT_EQ(opened.shard_count(), 3u);
    const ModelWeights w = load_weights(shards.index(), c, f32_table(), host_backend());
    for (const Named& n : TestCheckpoint(c).tensors)
        EXPECT_EQ(as_f32(field(w, n.name)), ckpt[n.name]) << n.name;
    EXPECT_EQ(w.unused_tensors, std::vector<std::string>{"audio_tower.embed_positions.weight"});
}

TEST(Weights, ShardIndexProblemsAreNamed) {
    const ModelConfig c = tiny_config();
    const TestCheckpoint ckpt(c);
    ScratchShards shards;
    const nlohmann::json good = shards.write(ckpt, 2);
    const std::string a = shards.shard(0, 2), b = shards.shard(1, 2);
    const std::string in_a = ckpt.tensors[0].name, in_b = ckpt.tensors[1].name;
    struct Case {
        const char* what;
        std::function<void(nlohmann::json&)> edit;
        std::vector<std::string> needles;
    };
    const std::vector<Case> cases = {
        {"a shard that is not there",
         [&](nlohmann::json& m) { m[in_a] = "model-00009-of-00009.safetensors"; },
         {"shard 'model-00009-of-00009.safetensors' is not in"}},
        {"a tensor listed in the wrong shard",
         [&](nlohmann::json& m) { m[in_a] = b; },
         {"'" + in_a + "'", "listed in shard '" + b + "'", "does not hold it"}},
        {"a tensor of a shard the index leaves out",
         [&](nlohmann::json& m) { m.erase(in_b); },
         {"holds tensor '" + in_b + "'", "does not list"}},
        {"a path out of the folder",
         [&](nlohmann::json& m) { m[in_a] = "../" + a; },
         {"not a .safetensors file in the index's folder"}},
        {"a shard name that is not a string",
         [&](nlohmann::json& m) { m[in_a] = 3; },
         {"'" + in_a + "'", "not a file name"}},
        {"an empty weight_map",
         [&](nlohmann::json& m) { m = nlohmann::json::object(); },
         {"lists no tensor"}},
    };
    for (const Case& k : cases) {
        nlohmann::json map = good;
        k.edit(map);
        shards.write_index(map);
        SCOPED_TRACE(k.what);
        expect_load_error(shards.index(), c, std::initializer_list<std::string>{});
        try {
            Checkpoint opened(shards.index());
            ADD_FAILURE() << "opened without error";
        } catch (const InputError& e) {
            for (const std::string& n : k.needles)
                EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
        }
    }
    // A tensor in two shards: the second shard also holds a copy of one of the first's.
    TestCheckpoint twice = ckpt;
    twice.tensors.clear();
    twice.values.clear();
    for (size_t i = 0; i < ckpt.tensors.size(); ++i)
        if (i % 2 == 1 || i == 0) {
            twice.tensors.push_back(ckpt.tensors[i]);
            twice.values.push_back(ckpt.values[i]);
        }
    twice.write((shards.dir() / b).string());
    shards.write_index(good);
    try {
        Checkpoint opened(shards.index());
        ADD_FAILURE() << "opened without error";
    } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("'" + in_a + "' is in shard '" + b +
                                             "' and in shard '" + a + "'"),
                  std::string::npos)
            << e.what();
    }
    // Not JSON, or no weight_map.
    std::ofstream(shards.index()) << "{\"weight_map\": [";
    expect_load_error(shards.index(), c, {"not valid JSON"});
    std::ofstream(shards.index()) << "{\"metadata\": {}}";
    expect_load_error(shards.index(), c, {"no \"weight_map\" object"});
}

TEST(Weights, AModelFolderWithoutWeightsIsNamed) {
    ScratchShards empty;
    try {
        Checkpoint::find_in(empty.dir());
        FAIL() << "found weights in an empty folder";
    } catch (const InputError& e) {
        EXPECT_NE(
            std::string(e.what()).find("no model.safetensors (nor model.safetensors.index.json)"),
            std::string::npos)
            << e.what();
    }
}

TEST(Weights, SameWeightUnderTwoNamesIsAnError) {
    const ModelConfig c = tiny_config();
    TestCheckpoint ckpt(c);
    ckpt.add("lm_head.weight", {c.text.vocab_size, c.text.hidden_size});
    ScratchFile file;
    ckpt.write(file.path());
    expect_load_error(file.path(), c, {"lm_head.weight", "two names"});
}

TEST(Weights, MissingTensorIsNamedAndNothingIsAllocated) {
    const ModelConfig c = tiny_config();
    TestCheckpoint ckpt(c);
    ckpt.remove("audio_tower.layers.1.mlp.fc1.weight");
    ScratchFile file;
    ckpt.write(file.path());
    expect_load_error(file.path(), c, {"audio_tower.layers.1.mlp.fc1.weight", "missing"});
    CountingBackend backend;
    EXPECT_THROW(load_weights(file.path(), c, f32_table(), backend), InputError);
    EXPECT_EQ(backend.allocs, 0);
}

TEST(Weights, ShapeThatContradictsTheConfig) {
    const ModelConfig c = tiny_config();
    const TestCheckpoint ckpt(c);
    ScratchFile file;
    ckpt.write(file.path());
    ModelConfig wider = c;
    wider.text.intermediate_size = 56;
    expect_load_error(file.path(), wider,
                      {"language_model.model.layers.0.mlp.gate_proj.weight", "[48, 32]",
                       "config.json implies [56, 32]"});
    ModelConfig deeper = c;
    deeper.audio.num_layers = 3;  // a layer the file does not have
    expect_load_error(file.path(), deeper, {"audio_tower.layers.2.", "missing"});
}

TEST(Weights, UnusedTensorsAreReported) {
    const ModelConfig c = tiny_config();
    TestCheckpoint ckpt(c);
    ckpt.add("audio_tower.embed_positions.weight", {1500, c.audio.hidden_size});
    ckpt.add("language_model.model.layers.2.input_layernorm.weight", {c.text.hidden_size});
    ScratchFile file;
    ckpt.write(file.path());
    const ModelWeights w = load_weights(file.path(), c, f32_table(), host_backend());
    EXPECT_EQ(w.unused_tensors,
              (std::vector<std::string>{"audio_tower.embed_positions.weight",
                                        "language_model.model.layers.2.input_layernorm.weight"}));
}

TEST(Weights, OriginalLayoutGetsAHint) {
    const ModelConfig c = tiny_config();
    TestCheckpoint ckpt(c);
    ckpt.rename([](const std::string& n) {
        return n.rfind("audio_tower.", 0) == 0 ? "audio_encoder.whisper." + n.substr(12) : n;
    });
    ScratchFile file;
    ckpt.write(file.path());
    expect_load_error(file.path(), c, {"audio_tower.conv1.weight", "original"});
}

TEST(Weights, CorruptFileIsAnInputError) {
    ScratchFile file;
    std::ofstream(file.path()) << "not a checkpoint";
    expect_load_error(file.path(), tiny_config(), {"header"});
}

// ------------------------------------------------------------------------------ counts

TEST(Weights, NanoParameterCounts) {
    // docs/model.md §1: 2,136,470,528 unique; 2,257,843,200 with the stored lm_head.
    const auto [unique, stored] = count_parameters(ModelConfig::nano());
    EXPECT_EQ(unique, 2136470528);
    EXPECT_EQ(stored, 2257843200);
    EXPECT_EQ(stored - unique, 121372672);  // the lm_head, 59264 x 2048

    // The per-part numbers of that table, through a config with one part switched off at a time:
    // one encoder layer is 19,676,160 parameters, one decoder layer 48,238,592.
    ModelConfig fewer = ModelConfig::nano();
    fewer.audio.num_layers -= 1;
    fewer.text.num_layers -= 1;
    EXPECT_EQ(unique - count_parameters(fewer).first, 19676160 + 48238592);
}

TEST(Weights, CountMatchesTheTensorList) {
    const ModelConfig c = tiny_config();
    int64_t total = 0;
    for (const Named& n : checkpoint_layout(c)) total += numel(n.shape);
    const auto [unique, stored] = count_parameters(c);
    EXPECT_EQ(unique, total);
    EXPECT_EQ(stored, total + int64_t(c.text.vocab_size) * c.text.hidden_size);
}

// ------------------------------------------------------------------------------ random weights

TEST(RandomWeights, DeterministicAndShapedLikeACheckpoint) {
    ModelConfig c = tiny_config();
    c.tie_word_embeddings = true;
    CountingBackend backend;
    const ModelWeights a = random_weights(c, f32_table(), backend, 42);
    const ModelWeights b = random_weights(c, f32_table(), backend, 42);
    const ModelWeights other = random_weights(c, f32_table(), backend, 43);
    EXPECT_EQ(backend.allocs, 3);
    for (const Named& n : checkpoint_layout(c)) {
        SCOPED_TRACE(n.name);
        const Tensor& t = field(a, n.name);
        ASSERT_EQ(t.ndim, static_cast<int>(n.shape.size()));
        for (int d = 0; d < t.ndim; ++d) EXPECT_EQ(t.shape[d], n.shape[d]);
        const std::vector<float> v = as_f32(t);
        EXPECT_EQ(v, as_f32(field(b, n.name)));
        if (!is_matrix(n.name)) {
            // LayerNorm / RMSNorm weights 1, biases 0
            const float want = n.name.find("norm") != std::string::npos &&
                                       n.name.find("weight") != std::string::npos
                                   ? 1.0f
                                   : 0.0f;
            for (float x : v) ASSERT_EQ(x, want);
        } else {
            EXPECT_NE(v, as_f32(field(other, n.name)));
        }
    }
    EXPECT_EQ(a.lm_head.data, a.embed.data);
    EXPECT_FALSE(a.lm_head_is_separate);
    EXPECT_EQ(a.unique_parameters, count_parameters(c).first);
}

TEST(RandomWeights, NormalWithStd002) {
    ModelConfig c = tiny_config();
    c.text.vocab_size = 4096;  // 131072 embedding values: enough for tight statistics
    const ModelWeights w = random_weights(c, f32_table(), host_backend(), 7);
    const std::vector<float> v = as_f32(w.embed);
    double sum = 0, sq = 0;
    int64_t beyond_2sd = 0;
    for (float x : v) {
        sum += x;
        sq += double(x) * x;
        beyond_2sd += std::fabs(x) > 0.04f;
    }
    const double n = static_cast<double>(v.size());
    const double mean = sum / n, sd = std::sqrt(sq / n - mean * mean);
    EXPECT_NEAR(mean, 0.0, 0.0005);
    EXPECT_NEAR(sd, 0.02, 0.0005);
    EXPECT_NEAR(beyond_2sd / n, 0.0455, 0.005);  // a normal's two-sided tail past 2 sd
}

TEST(RandomWeights, DtypesAndUntiedHead) {
    ModelConfig c = tiny_config();
    c.tie_word_embeddings = false;
    const ModelWeights w =
        random_weights(c, make_table(kBf16Track, kF32Track, kBf16Track), host_backend(), 1);
    EXPECT_EQ(w.encoder[0].q_w.dtype, DType::BF16);
    EXPECT_EQ(w.encoder[0].q_b.dtype, DType::F32);
    EXPECT_EQ(w.conv1_w.dtype, DType::F32);
    EXPECT_EQ(w.embed.dtype, DType::BF16);
    EXPECT_EQ(w.lm_head.dtype, DType::BF16);
    EXPECT_TRUE(w.lm_head_is_separate);
    EXPECT_NE(w.lm_head.data, w.embed.data);
    EXPECT_NE(as_f32(w.lm_head), as_f32(w.embed));  // a head of its own, not a copy

    // Tied, but the head's dtype differs from the embeddings': the same values, converted.
    c.tie_word_embeddings = true;
    const ModelWeights t =
        random_weights(c, make_table(kBf16Track, kF32Track, kF32Track), host_backend(), 1);
    ASSERT_NE(t.lm_head.data, t.embed.data);
    const std::vector<float> e = as_f32(t.embed);
    for (int64_t i = 0; i < t.lm_head.numel(); ++i)
        ASSERT_EQ(t.lm_head.bf16_bits()[i], f32_to_bf16(e[i])) << i;
}
