// audio.cpp — audio files in, mono float PCM at the model's rate out.
//
// libsndfile decodes (WAV, FLAC and the other formats it knows) to float in [-1, 1]; channels
// are averaged; libsoxr resamples with its very-high-quality filter. The HF pipeline also feeds
// mono float at 16 kHz: a file that is already 16 kHz mono is passed through untouched, so
// parity fixtures see exactly the samples transformers saw.
//
// A file the model cannot use is the user's problem, not ours: every such case (missing, empty,
// a header without samples, a cut data chunk, a decoder error, an unknown format, NaN samples,
// a sample rate outside 1 kHz - 768 kHz, more channels, seconds or samples than the limits below)
// is one InputError "<path>: <problem>" before any work is done on it.
#include "glmasr/audio.h"

#include <fcntl.h>
#include <sndfile.h>
#include <soxr.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "glmasr/error.h"

namespace glmasr {

namespace {

// The sample rates a file may declare: 1 kHz (below any speech recording) to 768 kHz (the
// highest rate audio interfaces offer). Checked right after opening, before any allocation.
constexpr int kMinSampleRate = 1000;
constexpr int kMaxSampleRate = 768000;
// What one file may hold: 64 channels (beyond any recording setup), 4 hours (the model
// transcribes it in chunks), 2^29 samples over all channels (2 GiB of floats: 93 min of 48 kHz
// stereo). Checked against the header before a sample is read.
constexpr int kMaxChannels = 64;
constexpr sf_count_t kMaxSeconds = 4 * 3600;
constexpr double kMaxSamples = double(1 << 29);

// libsndfile's codecs (libmpg123 above all, which probes any file that is not WAV) print their
// own complaints on stderr; the user should see one line, ours. While libsndfile opens and reads
// a file, file descriptor 2 points at /dev/null.
class QuietStderr {
public:
    QuietStderr() {
        std::fflush(stderr);
        saved_ = ::dup(STDERR_FILENO);
        const int null = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (saved_ >= 0 && null >= 0) ::dup2(null, STDERR_FILENO);
        if (null >= 0) ::close(null);
    }
    ~QuietStderr() {
        if (saved_ < 0) return;
        ::dup2(saved_, STDERR_FILENO);
        ::close(saved_);
    }
    QuietStderr(const QuietStderr&) = delete;
    QuietStderr& operator=(const QuietStderr&) = delete;

private:
    int saved_ = -1;
};

struct SndFile {
    SNDFILE* handle = nullptr;
    ~SndFile() {
        if (handle) sf_close(handle);
    }
};

}  // namespace

AudioClip load_audio(const std::string& path, int target_rate) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::exists(path, ec)) throw InputError(path + ": file not found");
    if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, not an audio file");
    if (fs::file_size(path, ec) == 0) throw InputError(path + ": empty file");

    SF_INFO info{};
    SndFile file;
    std::optional<QuietStderr> quiet;  // while libsndfile opens and decodes, not after
    quiet.emplace();
    file.handle = sf_open(path.c_str(), SFM_READ, &info);
    if (!file.handle)
        throw InputError(path + ": not a readable audio file (" + sf_strerror(nullptr) +
                         "); expected WAV, FLAC or another format libsndfile reads");
    if (info.channels < 1 || info.samplerate < 1)
        throw InputError(path + ": invalid header (" + std::to_string(info.channels) +
                         " channels, " + std::to_string(info.samplerate) + " Hz)");
    // A declared rate far outside what audio uses makes the resampler's output (and memory)
    // explode or overflow: 1 Hz asks for 16000 output samples per input sample.
    if (info.samplerate < kMinSampleRate || info.samplerate > kMaxSampleRate)
        throw InputError(path + ": sample rate " + std::to_string(info.samplerate) +
                         " Hz is outside the supported " + std::to_string(kMinSampleRate) +
                         " Hz - " + std::to_string(kMaxSampleRate) + " Hz");
    // libsndfile quietly shortens a WAV whose data chunk runs past the end of the file; its log
    // says "data : <declared> (should be <present>)". Streaming writers declare 0xFFFFFFFF there
    // on purpose: only a concrete size larger than what is present means a cut file. Checked
    // before the frame count, so that a file cut right after its header is called truncated.
    char log[4096] = {};
    sf_command(file.handle, SFC_GET_LOG_INFO, log, sizeof log);
    if (const char* chunk = std::strstr(log, "data : ")) {
        unsigned long long declared = 0, present = 0;
        if (std::sscanf(chunk, "data : %llu (should be %llu)", &declared, &present) == 2 &&
            declared > present && declared != 0xffffffffull)
            throw InputError(path + ": truncated: the data chunk declares " +
                             std::to_string(declared) + " bytes but the file holds " +
                             std::to_string(present));
    }
    if (info.frames <= 0) throw InputError(path + ": contains no audio samples");
    if (info.channels > kMaxChannels)
        throw InputError(path + ": " + std::to_string(info.channels) +
                         " channels; this program reads at most " + std::to_string(kMaxChannels));
    // The header's length is a claim: a few bytes of FLAC may declare days of audio (or a
    // compressed file may really hold them). The claim is checked against the limits, and the
    // samples are read block by block, so memory grows only with audio that is really there.
    if (info.frames / info.samplerate > kMaxSeconds)
        throw InputError(path + ": declares " + std::to_string(info.frames / info.samplerate) +
                         " s of audio; this program reads at most " + std::to_string(kMaxSeconds) +
                         " s");
    if (static_cast<double>(info.frames) * info.channels > kMaxSamples)
        throw InputError(path + ": declares " + std::to_string(info.frames) + " frames of " +
                         std::to_string(info.channels) + " channels, more than the " +
                         std::to_string(kMaxSamples) + " samples this program reads");
    std::vector<float> interleaved;
    constexpr sf_count_t kBlockFrames = 1 << 16;
    sf_count_t got = 0;
    while (got < info.frames) {
        const sf_count_t want = std::min(kBlockFrames, info.frames - got);
        interleaved.resize(static_cast<size_t>(got + want) * info.channels);
        const sf_count_t read =
            sf_readf_float(file.handle, interleaved.data() + got * info.channels, want);
        got += std::max<sf_count_t>(read, 0);
        if (read < want) break;
    }
    if (got != info.frames || sf_error(file.handle) != SF_ERR_NO_ERROR)
        throw InputError(path + ": truncated or corrupt: read " + std::to_string(got) + " of " +
                         std::to_string(info.frames) + " frames (" + sf_strerror(file.handle) +
                         ")");

    quiet.reset();

    AudioClip clip;
    clip.source_rate = info.samplerate;
    clip.source_channels = info.channels;
    std::vector<float> mono(static_cast<size_t>(info.frames));
    for (sf_count_t i = 0; i < info.frames; ++i) {
        double sum = 0;
        for (int c = 0; c < info.channels; ++c)
            sum += interleaved[static_cast<size_t>(i) * info.channels + c];
        const float v = static_cast<float>(sum / info.channels);
        if (!std::isfinite(v))
            throw InputError(path + ": contains non-finite samples (NaN or inf)");
        mono[i] = v;
    }
    clip.samples = resample(mono, info.samplerate, target_rate);
    if (clip.samples.empty())
        throw InputError(path + ": too short: " + std::to_string(info.frames) + " frame(s) at " +
                         std::to_string(info.samplerate) + " Hz are less than one sample at " +
                         std::to_string(target_rate) + " Hz");
    clip.sample_rate = target_rate;
    return clip;
}

std::vector<float> resample(const std::vector<float>& in, int from_rate, int to_rate) {
    if (from_rate < 1 || to_rate < 1)
        throw Error("resample: invalid rates " + std::to_string(from_rate) + " -> " +
                    std::to_string(to_rate));
    if (from_rate == to_rate || in.empty()) return in;
    const size_t out_len =
        static_cast<size_t>(std::llround(static_cast<double>(in.size()) * to_rate / from_rate));
    if (out_len == 0) return {};  // soxr_oneshot faults when given no room for output
    std::vector<float> out(out_len);
    size_t done = 0;
    const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
    const soxr_quality_spec_t quality = soxr_quality_spec(SOXR_VHQ, 0);
    const soxr_error_t err = soxr_oneshot(from_rate, to_rate, 1, in.data(), in.size(), nullptr,
                                          out.data(), out.size(), &done, &io, &quality, nullptr);
    if (err) throw Error(std::string("resampling failed: ") + err);
    out.resize(done);
    return out;
}

void write_wav_pcm16(const std::string& path, const std::vector<float>& samples, int sample_rate) {
    SF_INFO info{};
    info.samplerate = sample_rate;
    info.channels = 1;
    info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
    SndFile file;
    file.handle = sf_open(path.c_str(), SFM_WRITE, &info);
    if (!file.handle) throw Error(path + ": cannot write WAV (" + sf_strerror(nullptr) + ")");
    // Without clipping libsndfile wraps |x| > 1 around to the opposite sign.
    sf_command(file.handle, SFC_SET_CLIPPING, nullptr, SF_TRUE);
    if (sf_writef_float(file.handle, samples.data(), static_cast<sf_count_t>(samples.size())) !=
        static_cast<sf_count_t>(samples.size()))
        throw Error(path + ": short write");
}

}  // namespace glmasr
