// model.h — GLM-ASR end to end: features → encoder → projector → decoder with KV cache → tokens.
//
// The forward pass (model.cpp) is written once, against the kernel contract, and runs on any
// OpTable. Buffers are allocated on the table's backend when the Model is built and grown when
// a clip or a prompt first needs more; nothing is allocated while decoding.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "glmasr/config.h"
#include "glmasr/features.h"
#include "glmasr/tokenizer.h"
#include "glmasr/track.h"
#include "glmasr/weights.h"

namespace glmasr {

// The prompt of docs/model.md §6: <|user|>\n<|begin_of_audio|> + n_audio × <|pad|> +
// <|end_of_audio|><|user|>\nPlease transcribe this audio into text<|assistant|>\n
std::vector<int> build_prompt(
    const Tokenizer& tokenizer, int n_audio_tokens,
    const std::string& instruction = "Please transcribe this audio into text");

struct GenerateOptions {
    int max_new_tokens = 500;
    bool ignore_eos = false;  // forced length: always run max_new_tokens steps (timing, parity)
    bool use_graphs = true;   // record the decode step as a CUDA graph (GPU tracks)
    // Run each decode step's decoder layers as one call of the track's persistent step
    // (Track::decode_layers, `--decode persistent`) instead of op by op. An InputError where the
    // table has none (OpTable::decode_layers): never silently the other path.
    bool persistent_decode = false;
    // Teacher forcing (the grader's timed runs): decode step i is fed forced_inputs[i] instead of
    // the token step i − 1 predicted; `tokens` still records every prediction. Each prediction
    // then depends on the audio and these inputs alone, never on earlier predictions, so one
    // near-tie between two correct implementations changes one token, not the rest of the run.
    // Needs at least max_new_tokens − 1 entries; empty: greedy decoding.
    std::vector<int> forced_inputs;
    // Called with each step's logits (V floats on the host) — tests only; slows decoding.
    std::function<void(int step, const std::vector<float>& logits)> on_logits;
};

// Throws InputError where `table` has no persistent decode step (OpTable::decode_layers), the
// check generate() makes for GenerateOptions::persistent_decode; callers may make it up front.
void check_persistent_decode(const OpTable& table);

// The stages of one transcription, in the order they run.
enum class Stage { encoder, projector, prefill, decode };
constexpr int kNumStages = 4;
const char* stage_name(Stage stage);  // "encoder", "projector", "prefill", "decode"

struct StageTimes {  // milliseconds; GPU stages timed with CUDA events
    double encoder_ms = 0, projector_ms = 0, prefill_ms = 0, decode_ms = 0;
    int decode_steps = 0;
    double per_token_ms() const { return decode_steps ? decode_ms / decode_steps : 0.0; }
};

struct GenerateResult {
    std::vector<int> tokens;  // generated ids, the stop token included if one was produced
    StageTimes times;
};

class Model;

// The audio embeddings (N_total, Dt) that replace the prompt's <|pad|> rows, as encode_audio
// leaves them: in the model's memory (device memory on a GPU track), so that generate() copies
// them into place there. A trip through the host would be two copies of 3 MB per 30 s window
// (~0.8 ms of a Nano transcription on an H100, docs/performance.md). host() downloads them, for
// what reads the values (tests, tools). Valid until the model's next encode_audio call (and
// only while the model lives): generate() and host() throw an Error for embeddings of an earlier
// call, and generate() for those of another model.
class AudioEmbeddings {
public:
    int64_t rows() const { return rows_; }
    std::vector<float> host() const;

private:
    friend class Model;
    AudioEmbeddings(const Model* model, uint64_t generation, int64_t rows)
        : model_(model), generation_(generation), rows_(rows) {}
    const Model* model_;
    uint64_t generation_;  // which encode_audio call made them (numbered across all models)
    int64_t rows_;
};

class Model {
public:
    Model(ModelConfig config, ModelWeights weights, OpTable table);
    ~Model();
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const ModelConfig& config() const { return config_; }
    const OpTable& table() const { return table_; }
    const ModelWeights& weights() const { return weights_; }

    // Encoder + projector: the audio embeddings (N_total, Dt) that replace the <|pad|> rows.
    // `encoder_out`, if given, receives (n_windows, T_enc, De) on the host.
    AudioEmbeddings encode_audio(const AudioFeatures& features,
                                 std::vector<float>* encoder_out = nullptr);
    // encoder_ms and projector_ms of the last encode_audio call.
    StageTimes last_encode_times() const;

    // Greedy generation from a prompt whose <|pad|> rows take the audio embeddings in order:
    // this model's encode_audio result, or (N, Dt) floats on the host (another model's, a
    // reference's).
    GenerateResult generate(const std::vector<int>& prompt_ids, const AudioEmbeddings& audio,
                            const GenerateOptions& options);
    GenerateResult generate(const std::vector<int>& prompt_ids,
                            const std::vector<float>& audio_embeddings,
                            const GenerateOptions& options);

    // Called on the host each time the forward pass enters a stage: every window's encoder and
    // projector, the prefill, and every decode step (before its ops are enqueued or its graph
    // replayed). `glmasr profile` uses it to attribute op calls to stages.
    void set_stage_hook(std::function<void(Stage)> hook);

    // Whole pipeline on one clip's features.
    GenerateResult transcribe(const AudioFeatures& features, const Tokenizer& tokenizer,
                              const GenerateOptions& options);

private:
    friend class AudioEmbeddings;
    struct Impl;
    ModelConfig config_;
    ModelWeights weights_;
    OpTable table_;
    std::unique_ptr<Impl> impl_;
};

}  // namespace glmasr
