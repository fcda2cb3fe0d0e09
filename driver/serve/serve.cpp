// serve.cpp — `glmasr serve`: the lab as a web page and a JSON API on 127.0.0.1 (cpp-httplib).
//
//   glmasr serve --model assets/models/glm-asr-tiny --port 8080      then open http://127.0.0.1:8080/
//
//   GET  /            the page (page.html, compiled in: no CDN, no network)
//   GET  /health      {"status": "ok", "model": DIR, "waiting": n}
//   GET  /tracks      the tracks of this build, whether each can run here, the op names for --ops
//   GET  /clips       sample clips (--clips DIR with a transcripts.tsv), GET /clips/NAME the file
//   POST /transcribe  multipart form: "audio" (the file), optional "track", "ops",
//                     "max_new_tokens", "profile" (1: the per-op profile of this run)
//
// One model per (track, ops) mix is kept, at most kCachedModels of them; requests run one at a
// time (a model's buffers serve one transcription at a time) and at most --queue wait: the next
// gets 503. Bad input gets the CLI's one-line message as {"error": ...}: 400, or 413 for an upload
// past --max-upload-mb or audio past --max-seconds. The server never exits on a request's error.
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <list>
#include <mutex>
#include <nlohmann/json.hpp>

#include "commands.h"  // driver/cli
#include "glmasr/checkpoint.h"
#include "glmasr/error.h"
#include "op_profiler.h"  // driver/cli
#include "serve_page.h"   // generated from page.html

namespace glmasr::cli {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr size_t kCachedModels = 2;

// An HTTP answer to a request that cannot be served: the status and the one-line reason.
struct HttpError {
    int status;
    std::string message;
};

// Sample clips: the names of DIR/transcripts.tsv whose files exist.
std::vector<std::string> sample_clips(const std::string& dir) {
    std::vector<std::string> names;
    std::ifstream in(fs::path(dir) / "transcripts.tsv");
    for (std::string line; std::getline(in, line);) {
        const std::string name = line.substr(0, line.find('\t'));
        if (!name.empty() && name[0] != '#' && fs::is_regular_file(fs::path(dir) / name))
            names.push_back(name);
    }
    return names;
}

// The upload in a private temporary file, removed with this object (libsndfile reads paths).
class Upload {
public:
    explicit Upload(const std::string& bytes) {
        std::string pattern = (fs::temp_directory_path() / "glmasr-serve-XXXXXX").string();
        const int fd = ::mkstemp(pattern.data());
        if (fd < 0) throw Error("serve: cannot create a temporary file");
        path_ = pattern;
        const bool written =
            ::write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size());
        ::close(fd);
        if (!written) throw Error("serve: cannot write the upload to " + path_);
    }
    ~Upload() {
        std::error_code ec;
        fs::remove(path_, ec);
    }
    Upload(const Upload&) = delete;
    Upload& operator=(const Upload&) = delete;
    const std::string& path() const { return path_; }

private:
    std::string path_;
};

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
    for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size())
        text.replace(at, from.size(), to);
    return text;
}

class Server {
public:
    explicit Server(const ServeArgs& args)
        : args_(args),
          config_(ModelConfig::load((fs::path(args.model_dir) / "config.json").string())),
          tokenizer_(Tokenizer::load((fs::path(args.model_dir) / "tokenizer.json").string())),
          weights_path_(Checkpoint::find_in(args.model_dir)),
          clips_(args.clips_dir.empty() ? std::vector<std::string>{}
                                        : sample_clips(args.clips_dir)) {
        features_.n_mels = config_.audio.num_mel_bins;
        features_.merge_factor = config_.merge_factor;
        extractor_ = std::make_unique<LogMelExtractor>(features_);
        model_for(args.track, "");  // the default mix loads now: a bad model fails at start
    }

    json health() const {
        return {{"status", "ok"}, {"model", args_.model_dir}, {"waiting", waiting_.load()}};
    }

    json tracks() const {
        json list = json::array();
        for (const std::string& name : known_track_names()) {
            json entry = {{"name", name}};
            try {
                const Track& track = get_track(name);
                const bool runs = track.device == Device::Host || gpu_available();
                entry.update({{"available", runs},
                              {"device", device_name(track.device)},
                              {"summary", track.summary}});
                if (!runs) entry["why"] = "no GPU on this machine";
            } catch (const Error& e) {
                entry.update({{"available", false}, {"why", e.what()}});
            }
            list.push_back(entry);
        }
        json ops = json::array();
        for (int i = 0; i < kNumPrimitiveOps; ++i) ops.push_back(op_name(static_cast<OpId>(i)));
        return {{"tracks", list}, {"default", args_.track}, {"ops", ops}};
    }

    json clips() const { return {{"clips", clips_}}; }
    const std::vector<std::string>& clip_names() const { return clips_; }

    // One transcription; throws HttpError.
    json transcribe(const httplib::Request& req) {
        if (!req.has_file("audio")) throw HttpError{400, "no \"audio\" file in the form"};
        const httplib::MultipartFormData audio = req.get_file_value("audio");
        const std::string name = audio.filename.empty() ? "upload" : audio.filename;
        if (audio.content.empty()) throw HttpError{400, name + ": empty file"};
        const std::string track = field(req, "track", args_.track);
        const std::string ops = field(req, "ops", "");
        const bool profile = field(req, "profile", "0") == "1";
        GenerateOptions options;
        options.max_new_tokens = args_.max_new_tokens;
        if (req.has_file("max_new_tokens") || req.has_param("max_new_tokens")) {
            const std::string text = field(req, "max_new_tokens", "");
            try {
                size_t used = 0;
                options.max_new_tokens = std::stoi(text, &used);
                if (used != text.size() || options.max_new_tokens < 1)
                    throw std::invalid_argument(text);
            } catch (const std::logic_error&) {
                throw HttpError{400,
                                "max_new_tokens must be a positive integer, got \"" + text + "\""};
            }
        }

        for (int waiting = waiting_.load();;) {  // take a place in the queue, if one is free
            if (waiting >= args_.queue)
                throw HttpError{503, "busy: " + std::to_string(waiting) +
                                         " requests are waiting; try again shortly"};
            if (waiting_.compare_exchange_weak(waiting, waiting + 1)) break;
        }
        std::unique_lock<std::mutex> lock(busy_);
        --waiting_;
        const Upload upload(audio.content);
        try {
            std::unique_ptr<OpProfiler> profiler;
            std::unique_ptr<Model> profiled_model;
            Model* model = nullptr;
            if (profile) {  // one OpProfiler at a time, its own model (weights loaded again)
                profiler = std::make_unique<OpProfiler>(OpTable::build(track, ops), 50);
                Backend& backend = backend_for(profiler->table().device);
                profiled_model = std::make_unique<Model>(
                    config_, load_weights(weights_path_, config_, profiler->table(), backend),
                    profiler->table());
                profiled_model->set_stage_hook([&](Stage s) { profiler->set_stage(s); });
                options.use_graphs = false;
                model = profiled_model.get();
                profiler->start();
            } else {
                model = &model_for(track, ops);
            }
            const FileTranscription done =
                transcribe_file(*model, &tokenizer_, *extractor_, upload.path(), options, false,
                                args_.max_seconds, args_.chunk_seconds);
            if (profiler) profiler->stop();
            const StageTimes& t = done.result.times;
            json out = {{"file", name},
                        {"text", done.text},
                        {"tokens", done.result.tokens},
                        {"track", model->table().describe()},
                        {"settings", settings_json(model->table())},
                        {"audio_seconds", done.seconds},
                        {"windows", done.windows},
                        {"chunks", done.chunks},
                        {"timing_ms",
                         {{"features", done.features_ms},
                          {"encoder", t.encoder_ms},
                          {"projector", t.projector_ms},
                          {"prefill", t.prefill_ms},
                          {"decode", t.decode_ms},
                          {"decode_steps", t.decode_steps}}}};
            if (profiler) out["profile"] = profile_rows(*profiler, model->table());
            return out;
        } catch (const TooLong& e) {
            throw HttpError{413, replace_all(e.what(), upload.path(), name)};
        } catch (const InputError& e) {
            throw HttpError{400, replace_all(e.what(), upload.path(), name)};
        }
    }

private:
    ServeArgs args_;
    ModelConfig config_;
    Tokenizer tokenizer_;
    std::string weights_path_;
    std::vector<std::string> clips_;
    FeatureConfig features_;
    std::unique_ptr<LogMelExtractor> extractor_;
    std::mutex busy_;              // one transcription at a time
    std::atomic<int> waiting_{0};  // requests queued behind it
    std::list<std::pair<std::string, std::unique_ptr<Model>>> models_;  // most recently used first

    static std::string field(const httplib::Request& req, const char* key,
                             const std::string& fallback) {
        if (req.has_file(key)) return req.get_file_value(key).content;
        if (req.has_param(key)) return req.get_param_value(key);
        return fallback;
    }

    // The model of a (track, ops) mix, built on first use; the least recently used is dropped
    // past kCachedModels. Throws InputError for an unknown track or a bad --ops spec.
    Model& model_for(const std::string& track, const std::string& ops) {
        const std::string key = track + "|" + ops;
        for (auto it = models_.begin(); it != models_.end(); ++it)
            if (it->first == key) {
                models_.splice(models_.begin(), models_, it);
                return *models_.front().second;
            }
        const OpTable table = OpTable::build(track, ops);
        Backend& backend = backend_for(table.device);
        models_.emplace_front(
            key, std::make_unique<Model>(
                     config_, load_weights(weights_path_, config_, table, backend), table));
        while (models_.size() > kCachedModels) models_.pop_back();
        return *models_.front().second;
    }

    // Every op the run called, all stages together, slowest first.
    static json profile_rows(const OpProfiler& profiler, const OpTable& table) {
        std::vector<json> rows;
        for (int i = 0; i < kNumOps; ++i) {
            const OpId op = static_cast<OpId>(i);
            OpStats sum;
            for (int s = 0; s < kNumStages; ++s) {
                const OpStats& st = profiler.stats(static_cast<Stage>(s), op);
                sum.calls += st.calls;
                sum.ms += st.ms;
                sum.bytes += st.bytes;
                sum.flops += st.flops;
            }
            if (sum.calls == 0) continue;
            const double seconds = sum.ms * 1e-3;
            rows.push_back({{"op", op_name(op)},
                            {"track", table.source[i]->name},
                            {"calls", sum.calls},
                            {"ms", sum.ms},
                            {"gbps", seconds > 0 ? sum.bytes / seconds / 1e9 : 0.0},
                            {"tflops", seconds > 0 ? sum.flops / seconds / 1e12 : 0.0}});
        }
        std::sort(rows.begin(), rows.end(),
                  [](const json& a, const json& b) { return a["ms"] > b["ms"]; });
        return rows;
    }
};

void reply(httplib::Response& res, int status, const json& body) {
    res.status = status;
    res.set_content(body.dump(), "application/json");
}

}  // namespace

int run_serve(const ServeArgs& args) {
    if (args.port < 0 || args.port > 65535) throw InputError("serve: --port must be 0 to 65535");
    if (args.queue < 1) throw InputError("serve: --queue must be at least 1");
    if (args.max_upload_mb <= 0) throw InputError("serve: --max-upload-mb must be positive");
    if (!fs::is_directory(args.model_dir))
        throw InputError(args.model_dir + ": model directory not found");
    if (!args.clips_dir.empty() && !fs::exists(fs::path(args.clips_dir) / "transcripts.tsv"))
        throw InputError(args.clips_dir +
                         ": no transcripts.tsv (--clips wants a folder like assets/audio)");
    Server server(args);

    httplib::Server http;
    http.set_payload_max_length(static_cast<size_t>(args.max_upload_mb * 1024 * 1024));
    http.new_task_queue = [] { return new httplib::ThreadPool(4); };
    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(kServePage, "text/html; charset=utf-8");
    });
    http.Get("/health", [&](const httplib::Request&, httplib::Response& res) {
        reply(res, 200, server.health());
    });
    http.Get("/tracks", [&](const httplib::Request&, httplib::Response& res) {
        reply(res, 200, server.tracks());
    });
    http.Get("/clips", [&](const httplib::Request&, httplib::Response& res) {
        reply(res, 200, server.clips());
    });
    http.Get(R"(/clips/([A-Za-z0-9_.-]+))",
             [&](const httplib::Request& req, httplib::Response& res) {
                 const std::string name = req.matches[1];
                 const auto& names = server.clip_names();
                 if (std::find(names.begin(), names.end(), name) == names.end())
                     return reply(res, 404, {{"error", "no sample clip " + name}});
                 std::ifstream in(fs::path(args.clips_dir) / name, std::ios::binary);
                 res.set_content(std::string(std::istreambuf_iterator<char>(in), {}), "audio/wav");
             });
    http.Post("/transcribe", [&](const httplib::Request& req, httplib::Response& res) {
        try {
            reply(res, 200, server.transcribe(req));
        } catch (const HttpError& e) {
            reply(res, e.status, {{"error", e.message}});
        } catch (const std::exception& e) {  // a fault of ours or of a kernel: the server goes on
            reply(res, 500, {{"error", std::string("internal error: ") + e.what()}});
        }
    });
    // Errors httplib answers itself (413 past the upload limit, 404 for unknown paths) also get
    // a JSON body.
    http.set_error_handler([&](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return;
        char limit[32];
        std::snprintf(limit, sizeof limit, "%g", args.max_upload_mb);
        const std::string why =
            res.status == 413
                ? "the upload is larger than this server's limit of " + std::string(limit) + " MB"
            : res.status == 404
                ? "no such endpoint: " + req.method + " " + req.path
                : "the request could not be read (POST /transcribe takes a multipart form "
                  "with an \"audio\" file)";
        reply(res, res.status, {{"error", why}});
    });

    const int port = args.port == 0 ? http.bind_to_any_port(args.host) : args.port;
    if (port < 0 || (args.port != 0 && !http.bind_to_port(args.host, port)))
        throw InputError("serve: cannot listen on " + args.host + ":" + std::to_string(args.port));
    std::printf("glmasr serve: listening on http://%s:%d/ (model %s, track %s)\n",
                args.host.c_str(), port, args.model_dir.c_str(), args.track.c_str());
    std::fflush(stdout);
    http.listen_after_bind();
    return kExitOk;
}

}  // namespace glmasr::cli
