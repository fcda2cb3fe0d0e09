// track.h — tracks (tables of ops), the memory they live in, and mixing them per op.
//
// A Track is one implementation of the whole kernel contract: `cpu` (plain loops, the oracle),
// `baseline` (naive CUDA), `reference` (fast CUDA), `student` (the TODOs). Each track's tensors
// live on one Backend (host memory or CUDA device memory). An OpTable picks each op from a
// track — normally all from one, or mixed with `--ops rmsnorm=student,default=reference` —
// and remembers where every op came from, so reports can say exactly what ran.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "glmasr/ops.h"

namespace glmasr {

// Where tensors live and how bytes move. Host memory for the cpu track, CUDA memory otherwise.
class Backend {
public:
    virtual ~Backend() = default;
    virtual Device device() const = 0;
    virtual void* alloc(size_t bytes) = 0;  // throws glmasr::Error when out of memory
    virtual void free(void* ptr) = 0;
    virtual void upload(void* dst, const void* host_src, size_t bytes, Stream stream) = 0;
    virtual void download(void* host_dst, const void* src, size_t bytes, Stream stream) = 0;
    virtual void copy(void* dst, const void* src, size_t bytes, Stream stream) = 0;
    virtual void zero(void* dst, size_t bytes, Stream stream) = 0;
    virtual void synchronize(Stream stream) = 0;
    virtual Stream stream() = 0;  // the stream the driver runs on (null for host memory)
    // The hardware behind it, for reports: the GPU's name ("NVIDIA H100 80GB HBM3"), or "cpu".
    virtual std::string hardware() { return "cpu"; }
    // Bytes of device memory in use right now, by this process and the driver (CUDA), or the
    // process's resident set size (host).
    virtual size_t memory_in_use() = 0;

    // Timing marks: elapsed_ms(a, b) waits for mark b and returns the time between the marks
    // (CUDA events on the GPU, a steady clock on the host).
    using Mark = std::shared_ptr<void>;
    virtual Mark mark(Stream stream) = 0;
    virtual double elapsed_ms(const Mark& begin, const Mark& end) = 0;

    // Profiling aids for `glmasr profile`; all three do nothing on the host.
    // delay(): the stream waits `microseconds` before its next work (one spinning GPU thread),
    // so the host can queue an op before the GPU reaches it and the op's events do not time
    // the launch. range_push/range_pop: named NVTX ranges, shown by Nsight Systems.
    virtual void delay(Stream /*stream*/, double /*microseconds*/) {}
    virtual void range_push(const char* /*name*/) {}
    virtual void range_pop() {}

    // CUDA graphs: record what a callback enqueues on `stream`, then replay it with one launch.
    // Hosts have no graphs (supports_graphs() is false and capture() throws).
    using Graph = std::shared_ptr<void>;
    virtual bool supports_graphs() const { return false; }
    virtual Graph capture(Stream stream, const std::function<void()>& record);
    virtual void replay(const Graph& graph, Stream stream);
};

Backend& host_backend();
Backend& backend_for(Device device);  // throws if this build has no CUDA, or no GPU is present
bool gpu_available();                 // built with CUDA and a device is visible

// The decoder layers of one decode step (one token), for Track::decode_layers: every tensor the
// per-op path (Model's decoder_layers) hands its decoder entries, f32 unless said.
struct DecodeLayerTensors {
    Tensor norm1_w, q_w, k_w, v_w, o_w;    // DecoderLayerWeights' (weights.h), matrices in the
    Tensor norm2_w, gate_w, up_w, down_w;  // track's weight dtype
    Tensor k_cache, v_cache;               // (capacity, Hkv·hd): row positions[0] appended
};
struct DecodeStep {
    std::vector<DecodeLayerTensors> layers;
    Tensor x;          // (1, D) the residual stream: the token's embedding in, the last layer's out
    Tensor q, attn;    // (1, Hq·hd) scratch
    Tensor gate, up;   // (1, F) scratch
    Tensor normed;     // (1, D) scratch
    Tensor k, v;       // (1, Hkv·hd) scratch
    Tensor proj;       // (1, D) scratch
    Tensor cos, sin;   // (n_positions, hd/2) RoPE tables
    Tensor positions;  // (1) i32: the token's position
    int num_heads = 0, num_kv_heads = 0;
    float eps = 0, scale = 0;  // the RMSNorms' epsilon, the attention's 1/√hd
};

struct Track {
    const char* name;     // "cpu", "baseline", "reference", "student"
    const char* summary;  // one line for `glmasr tracks` and reports
    Device device;        // where its tensors live
    DType weight_dtype;   // dtype of matrix weights (linear, conv1d, embedding) it expects
    Ops ops;
    // Optional: create library handles (cuBLAS...) once, before the first op runs.
    void (*setup)(Stream stream) = nullptr;
    // Optional: the run-time choices in effect for this track, as "key=value key=value" (the
    // reference's: "gemm=cublas attention=flash_bf16", from GLMASR_GEMM and GLMASR_ATTENTION or
    // the CLI's --gemm and --attention, which set them). Null for a track without any. Reports
    // (--json, --verbose, the grader's) record it next to OpTable::describe().
    std::string (*settings)() = nullptr;
    // The dtype it wants the activations ops.h marks [act] in (the encoder's normed rows, k and
    // v, attention's output, the products' x) when it runs the whole encoder. F32 for every
    // track but the reference under its plain bf16 attention (flash_bf16, the default, or
    // flash_mma), which wants bf16 there:
    // the values its tensor-core products round to bf16 anyway, so storing them rounded changes
    // no bit of the result (at the head dims of its tensor-core attention; docs/tracks.md,
    // "Precision policy"). Its entries accept bf16 [act] tensors under every attention rung.
    DType activation_dtype = DType::F32;
    // Optional: a hint that the products after a decoder layer's attention will read `weights`
    // next (the driver gives the layer's gate and up projections, before the attention: there a
    // decode step's weight stream pauses while the attention reads the KV cache). A track may
    // start bringing them toward the GPU (the reference's decode attention prefetches part of
    // them into L2). Changes no result; capture-safe. The driver gives it only to the track that
    // supplies the attention entry (OpTable::prefetch_hint), the one that can act on it then.
    void (*prefetch)(const Tensor& weights, Stream stream) = nullptr;
    // Optional: the decoder layers of a whole decode step in one call, past the per-op contract
    // (`--decode persistent`: the reference's one persistent kernel, reference/decode_layers.cu).
    // It leaves x and the KV caches as the per-op path leaves them; capture-safe. The driver uses
    // it only when asked and only for a table that takes every op from this track
    // (OpTable::decode_layers); asked for elsewhere, it is an input error, never another path.
    using DecodeLayers = void (*)(const DecodeStep& step, Stream stream);
    DecodeLayers decode_layers = nullptr;
};

// Every track this project has, in the order `glmasr tracks` lists them: X(identifier, "name").
// The one list: the registry (driver/registry/tracks.cpp), the CLI's help and CMake (which reads
// the names from this line, driver/CMakeLists.txt) follow it. Track <identifier> is built by
// <identifier>_track(); which tracks a program links is its registry's choice.
// clang-format off
#define GLMASR_TRACK_LIST(X)                                                                      \
    X(cpu, "cpu") X(baseline, "baseline") X(reference, "reference") X(student, "student")        \
    X(triton, "triton") X(triton_solution, "triton-solution") X(cutile, "cutile")                \
    X(cutile_solution, "cutile-solution")
// clang-format on

// The cpu track (driver/cpu/): plain loops, the oracle every other track is tested against.
const Track& cpu_track();

// Every track name this project has, whether or not this program links it.
const std::vector<std::string>& known_track_names();
// The same names as one line for help texts: "cpu, baseline, ..., cutile-solution".
std::string known_track_list();
// The track, or throws glmasr::InputError with the reason (unknown name, built without CUDA,
// not linked into this program — the grader's programs link only some tracks).
const Track& get_track(const std::string& name);
// The tracks this program links (driver/registry/tracks.cpp says which program has which).
std::vector<const Track*> available_tracks();
// What `--track auto` means here: reference with a GPU, else cpu, else the only track linked.
std::string default_track_name();

// The entries the encoder (its layers and the projector, model.cpp) calls with the activations
// of OpTable::encoder_activations(): every one must be a kernel of a bf16-activation track for
// them to be bf16.
inline constexpr std::array<OpId, 6> kEncoderEntries = {OpId::layernorm, OpId::add_layernorm,
                                                        OpId::qkv_rope,  OpId::attention,
                                                        OpId::linear,    OpId::linear_gelu_linear};

// A table of ops, each taken from some track.
struct OpTable {
    Ops ops{};
    std::array<const Track*, kNumOps> source{};  // source[op] = the track it came from (fused
                                                 // entries left null keep the default's track)
    const Track* base = nullptr;                 // the default track ("default=" in the spec)
    Device device = Device::Host;

    // spec: "" (all from default_track) or "rmsnorm=student,gelu=baseline,default=reference".
    // Throws InputError for unknown op or track names, mixed devices, or a missing primitive.
    static OpTable build(const std::string& default_track, const std::string& spec = "");
    // The table of `base` with the ops in `chosen` taken from other tracks (build() after parsing).
    // A fused entry asked for by name must exist in its track; one that is not asked for is kept
    // only where every part of it (fused_parts, transitively) comes from its own track.
    static OpTable mix(const Track& base, const std::map<OpId, const Track*>& chosen);

    // dtype that the weights consumed by `op` must be stored in (its track's weight_dtype).
    DType weight_dtype(OpId op) const;
    // The dtype of the encoder's activations between its entries (enc_normed, enc_k, enc_v,
    // enc_attn in model.cpp), from the table as it is now: BF16 when every encoder entry
    // (kEncoderEntries) is a kernel of a track whose activation_dtype is BF16, F32 otherwise: a
    // table that mixes in another track's encoder op, or runs one as a composition (an entry
    // nulled after build(), as kernel-bench does), keeps every activation f32.
    DType encoder_activations() const;
    // "cpu", or "reference" or "reference (rmsnorm=student)" for reports.
    std::string describe() const;
    // Calls every distinct source track's setup hook.
    void setup(Stream stream) const;
    // The prefetch hint of the track whose kernel the attention entry is (Track::prefetch);
    // null where the attention is a composition or that track has none.
    using PrefetchHint = void (*)(const Tensor& weights, Stream stream);
    PrefetchHint prefetch_hint() const;
    // The base track's Track::decode_layers where every op of the table is that track's and the
    // decoder's entries are its kernels; null where it has none, the table mixes in another
    // track, or an entry is composed (the reference's GLMASR_ATTENTION=three_kernel).
    Track::DecodeLayers decode_layers() const;
};

}  // namespace glmasr
