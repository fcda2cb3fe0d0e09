// tracks.cpp — the registry of tracks this program links, and OpTable: ops picked per track.
//
// Which tracks a program links is fixed when it is built: driver/CMakeLists.txt compiles this
// file once per set, with a generated linked_tracks.h that lists the set's members (in the order
// of GLMASR_TRACK_LIST, track.h). `glmasr` links all of them;
// the grader's programs split them along the trust boundary (docs/grading.md): glmasr-trusted and
// the kernel-test checkers have no student code in them, glmasr-student and the kernel runner
// nothing but the student's. A track that is not linked cannot be asked for, so no process that
// runs student code has another track to swap to.
#include <array>
#include <map>
#include <set>
#include <sstream>

#include "glmasr/error.h"
#include "glmasr/track.h"
#include "linked_tracks.h"

namespace glmasr {
// The constructors of the tracks this program links (GLMASR_LINKED_TRACKS: X(identifier) per
// track, from the header CMake writes for this registry).
#define GLMASR_DECLARE_TRACK(id) const Track& id##_track();
GLMASR_LINKED_TRACKS(GLMASR_DECLARE_TRACK)
#undef GLMASR_DECLARE_TRACK
#ifdef GLMASR_WITH_CUDA
Backend& cuda_backend();     // driver/cuda/
bool cuda_device_present();  // driver/cuda/
#endif

const std::vector<std::string>& known_track_names() {
#define GLMASR_TRACK_NAME(id, name) name,
    static const std::vector<std::string> names = {GLMASR_TRACK_LIST(GLMASR_TRACK_NAME)};
#undef GLMASR_TRACK_NAME
    return names;
}

std::string known_track_list() {
    std::string list;
    for (const std::string& name : known_track_names()) list += (list.empty() ? "" : ", ") + name;
    return list;
}

std::vector<const Track*> available_tracks() {
#define GLMASR_TRACK_ADDRESS(id) &id##_track(),
    return {GLMASR_LINKED_TRACKS(GLMASR_TRACK_ADDRESS)};
#undef GLMASR_TRACK_ADDRESS
}

bool gpu_available() {
#ifdef GLMASR_WITH_CUDA
    return cuda_device_present();
#else
    return false;
#endif
}

Backend& backend_for(Device device) {
    if (device == Device::Host) return host_backend();
#ifdef GLMASR_WITH_CUDA
    return cuda_backend();
#else
    throw Error("this build has no CUDA support (nvcc was not found when it was configured)");
#endif
}

const Track& get_track(const std::string& name) {
    for (const Track* track : available_tracks())
        if (name == track->name) return *track;
    bool known = false;
    for (const std::string& k : known_track_names()) known = known || name == k;
    std::string linked;
    for (const Track* track : available_tracks())
        linked += std::string(linked.empty() ? "" : ", ") + track->name;
    if (!known) throw InputError("unknown track '" + name + "' (this program has: " + linked + ")");
#ifndef GLMASR_WITH_CUDA
    if (name != "cpu")
        throw InputError("track '" + name +
                         "' needs CUDA, and this build has none (nvcc was not found when it was "
                         "configured); use --track cpu");
#endif
#ifndef GLMASR_WITH_TRITON
    if (name.rfind("triton", 0) == 0)
        throw InputError("track '" + name +
                         "' was not built: CMake found no Python with triton==3.6.0 (run "
                         "tools/setup.sh --triton, then reconfigure)");
#endif
#ifndef GLMASR_WITH_CUTILE
    if (name.rfind("cutile", 0) == 0)
        throw InputError("track '" + name +
                         "' was not built: CMake found no Python with cuda-tile==1.7.0 and its "
                         "tileiras (run tools/setup.sh --cutile, then reconfigure)");
#endif
    throw InputError("track '" + name +
                     "' is not part of this program, which links only: " + linked);
}

std::string default_track_name() {
    const std::vector<const Track*> tracks = available_tracks();
    const bool gpu = gpu_available();
    for (const char* preferred : {"reference", "cpu"})
        for (const Track* t : tracks)
            if (t->name == std::string(preferred) && (t->device == Device::Host || gpu))
                return t->name;
    if (tracks.empty()) throw Error("this program links no track");
    return tracks.front()->name;
}

OpTable OpTable::build(const std::string& default_track, const std::string& spec) {
    // Parse "op=track,op=track,default=track".
    std::string fallback = default_track;
    std::map<OpId, const Track*> chosen;
    std::stringstream items(spec);
    std::string item;
    while (std::getline(items, item, ',')) {
        if (item.empty()) continue;
        const size_t eq = item.find('=');
        if (eq == std::string::npos)
            throw InputError("--ops: '" + item + "' is not op=track (e.g. rmsnorm=student)");
        const std::string op = item.substr(0, eq), track = item.substr(eq + 1);
        if (op == "default") {
            get_track(track);  // validates the name
            fallback = track;
            continue;
        }
        OpId id;
        if (!op_from_name(op, &id)) throw InputError("--ops: unknown op '" + op + "'");
        chosen[id] = &get_track(track);
    }
    return mix(get_track(fallback), chosen);
}

OpTable OpTable::mix(const Track& base, const std::map<OpId, const Track*>& chosen) {
    OpTable table;
    table.base = &base;
    table.device = base.device;
    for (int i = 0; i < kNumOps; ++i) {
        const OpId op = static_cast<OpId>(i);
        auto it = chosen.find(op);
        const Track& track = it == chosen.end() ? base : *it->second;
        if (track.device != base.device)
            throw InputError(std::string("--ops: cannot mix ") + track.name + " (" +
                             device_name(track.device) + ") with " + base.name + " (" +
                             device_name(base.device) + ") tensors");
        set_entry(table.ops, op, get_entry(track.ops, op));
        table.source[i] = &track;
        if (i < kNumPrimitiveOps && !get_entry(table.ops, op))
            throw Error(std::string("track '") + track.name + "' has no " + op_name(op) +
                        " op: the contract requires every primitive");
        if (i >= kNumPrimitiveOps && it != chosen.end() && !get_entry(table.ops, op)) {
            std::string parts;
            for (OpId part : fused_parts(op))
                parts += std::string(parts.empty() ? "" : ", ") + op_name(part);
            throw InputError(std::string("--ops: ") + op_name(op) + "=" + track.name + ": the " +
                             track.name + " track has no fused " + op_name(op) +
                             " kernel (it would run the composition of " + parts +
                             "); choose those parts instead");
        }
    }
    // A fused entry not asked for by name runs only if everything it stands for would otherwise
    // run on its own track: with --ops gate_up_silu=student, the default track's
    // rmsnorm_gate_up_silu must decompose into rmsnorm + the student's gate_up_silu rather than
    // silently run its own. runs_on[op]: the tracks whose code runs when the table's `op` is
    // called (its own track for a kernel, its parts' tracks for a composition). Fused entries
    // follow their parts in OpId order, so a part's answer is final before it is needed.
    std::array<std::set<const Track*>, kNumOps> runs_on;
    for (int i = 0; i < kNumOps; ++i) {
        const OpId op = static_cast<OpId>(i);
        if (i >= kNumPrimitiveOps && get_entry(table.ops, op) && !chosen.count(op))
            for (OpId part : fused_parts(op))
                if (runs_on[static_cast<int>(part)] != std::set<const Track*>{table.source[i]})
                    set_entry(table.ops, op, nullptr);
        if (get_entry(table.ops, op)) runs_on[i] = {table.source[i]};
        else
            for (OpId part : fused_parts(op))
                runs_on[i].merge(std::set(runs_on[static_cast<int>(part)]));
    }
    return table;
}

DType OpTable::encoder_activations() const {
    for (OpId op : kEncoderEntries)
        if (!get_entry(ops, op) || source[static_cast<int>(op)]->activation_dtype != DType::BF16)
            return DType::F32;
    return DType::BF16;
}

std::string OpTable::describe() const {
    std::ostringstream s;
    s << base->name;
    bool first = true;
    for (int i = 0; i < kNumOps; ++i) {
        if (source[i] == base) continue;
        s << (first ? " (" : ",") << op_name(static_cast<OpId>(i)) << "=" << source[i]->name;
        first = false;
    }
    if (!first) s << ")";
    return s.str();
}

void OpTable::setup(Stream stream) const {
    std::vector<const Track*> done;
    for (const Track* track : source) {
        bool seen = false;
        for (const Track* d : done) seen = seen || d == track;
        if (seen || !track->setup) continue;
        track->setup(stream);
        done.push_back(track);
    }
}

OpTable::PrefetchHint OpTable::prefetch_hint() const {
    return ops.attention ? source[static_cast<int>(OpId::attention)]->prefetch : nullptr;
}

Track::DecodeLayers OpTable::decode_layers() const {
    for (const Track* track : source)
        if (track != base) return nullptr;
    // the decoder's entries as kernels (a null one is composed by the driver from primitives)
    if (!ops.rmsnorm_qkv_rope_cache || !ops.attention || !ops.linear_residual ||
        !ops.rmsnorm_gate_up_silu)
        return nullptr;
    return base ? base->decode_layers : nullptr;
}

}  // namespace glmasr
