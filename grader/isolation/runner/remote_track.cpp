// remote_track.cpp — the checker's side of a remote track (remote_track.h): starting the runner,
// shipping each call, validating the reply, and watching what the runner's processes map.
#include "remote_track.h"

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

#include "allowed_objects.h"  // kAllowedObjects: grader/pipeline/allowed_objects.txt, built in
#include "glmasr/error.h"
#include "protocol.h"

extern char** environ;

namespace glmasr::runner {

namespace {

double call_timeout_seconds() {
    const char* env = std::getenv("GLMASR_RUNNER_TIMEOUT");
    return env && *env ? std::atof(env) : 120.0;
}

// Text from the runner is shown to the student in reports: printable, bounded.
std::string printable(const std::string& s, size_t limit = 600) {
    std::string out;
    for (char c : s.substr(0, limit)) {
        const auto u =
            static_cast<unsigned char>(c);  // UTF-8 bytes (≥ 0x80) pass: messages have "—"
        out += (u >= 0x80 || std::isprint(u) || c == '\n') ? c : '?';
    }
    if (s.size() > limit) out += "…";
    return out;
}

std::string describe_status(int status) {
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        return "was killed by signal " + std::to_string(sig) + " (" + strsignal(sig) + ")";
    }
    if (WIFEXITED(status)) {
        // Inside the grader's sandbox a shell waits for the runner and reports its death by
        // signal N as status 128 + N (grader/isolation/sandbox.py).
        const int code = WEXITSTATUS(status);
        if (code > 128 && code < 128 + 32)
            return "exited with status " + std::to_string(code) + " (killed by signal " +
                   std::to_string(code - 128) + ", " + strsignal(code - 128) + ")";
        return "exited with status " + std::to_string(code);
    }
    return "stopped";
}

// How every runner process of this program ended, one line each ("exit N <how>" or "signal N
// <how>"; "nostart <how>" for one that ended before its hello), for GLMASR_RUNNER_EXIT_REPORT
// (remote_track.h).
std::vector<std::string>& exits() {
    static std::vector<std::string> lines;
    return lines;
}
void record_exit(int status, bool greeted) {
    if (!greeted) exits().push_back("nostart " + describe_status(status));
    else if (WIFEXITED(status))
        exits().push_back("exit " + std::to_string(WEXITSTATUS(status)) + " " +
                          describe_status(status));
    else if (WIFSIGNALED(status))
        exits().push_back("signal " + std::to_string(WTERMSIG(status)) + " " +
                          describe_status(status));
}

// Watches the memory maps of a runner's process tree while it runs: every kInterval, the
// executable mappings that allowed_objects.txt does not allow (unlisted_mappings) are noted, so
// that a library mapped during a call and unmapped before its reply is still seen. The checker
// takes what was seen after every call (Runner::check_mappings).
class MapsWatch {
public:
    static constexpr std::chrono::milliseconds kInterval{25};
    ~MapsWatch() { stop(); }

    void start(pid_t root) {
        stop();
        running_ = true;
        thread_ = std::thread([this, root] {
            std::unique_lock<std::mutex> lock(mutex_);
            while (running_) {
                lock.unlock();
                std::vector<std::string> found;
                try {
                    found = unlisted_mappings(root);
                } catch (const std::exception& e) {  // a malformed list: no look passes
                    found = {std::string("the maps cannot be checked: ") + e.what()};
                }
                lock.lock();
                for (const std::string& f : found)
                    if (seen_.insert(f).second) found_.push_back(f);
                wake_.wait_for(lock, kInterval, [this] { return !running_; });
            }
        });
    }
    void stop() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            running_ = false;
        }
        wake_.notify_all();
        if (thread_.joinable()) thread_.join();
    }
    // What was seen since the last take, in the order seen.
    std::vector<std::string> take() {
        std::lock_guard<std::mutex> lock(mutex_);
        std::vector<std::string> found;
        found.swap(found_);
        seen_.clear();
        return found;
    }

private:
    std::thread thread_;
    std::mutex mutex_;
    std::condition_variable wake_;
    bool running_ = false;
    std::vector<std::string> found_;
    std::set<std::string> seen_;
};

// One argument of a call, as the checker holds it.
struct Arg {
    ArgKind kind;
    Tensor tensor;  // kind == Tensor
    int32_t i = 0;
    float f = 0;
};

// The runner process of one remote track and the pipes to it.
class Runner {
public:
    Runner(std::string name, std::vector<std::string> command, DType weight_dtype)
        : name_(std::move(name)), command_(std::move(command)), weight_dtype_(weight_dtype) {}
    ~Runner() { stop(); }

    // The entries the runner's track fills (bit i = OpId i); starts the runner if needed.
    uint64_t entries() {
        ensure_started();
        return entries_;
    }

    void execute(OpId op, const std::vector<Arg>& args);
    void stop();  // kills the runner's process group (a later call starts a new one)
    // At the end: closes the request pipe, lets the runner exit by itself within the call
    // time-out (a runner under compute-sanitizer reports then), records how it ended, stops it.
    void finish();
    // At the end, before the runner is told to exit: what it mapped since its last call fails
    // the test program (no case is left to fail).
    void check_mappings_at_end();

private:
    void ensure_started();
    [[noreturn]] void fail(const std::string& what);
    // Throws the INTEGRITY VIOLATION when the watch saw, or a look now sees, an executable
    // mapping that allowed_objects.txt does not allow.
    void check_mappings();

    std::string name_;
    std::vector<std::string> command_;
    DType weight_dtype_;
    pid_t pid_ = -1;
    int to_runner_ = -1, from_runner_ = -1, log_ = -1;
    uint64_t entries_ = 0;
    bool greeted_ = false;  // the running process said hello
    MapsWatch watch_;       // from the hello on: the start-up chain (a sandbox) has run by then
};

// A file descriptor numbered above the ones the runner's side uses (0-4), close-on-exec.
int high_fd(int fd) {
    const int moved = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    if (moved < 0) throw Error(std::string("fcntl: ") + std::strerror(errno));
    close(fd);
    return moved;
}

void Runner::ensure_started() {
    if (pid_ > 0) {
        int status;
        if (waitpid(pid_, &status, WNOHANG) == 0) return;  // still running
        record_exit(status, greeted_);
        pid_ = -1;
        stop();
    }
    signal(SIGPIPE, SIG_IGN);  // a runner that dies mid-request is an error, not our death
    greeted_ = false;
    int requests[2], replies[2];
    if (pipe2(requests, O_CLOEXEC) != 0 || pipe2(replies, O_CLOEXEC) != 0)
        throw Error(std::string("pipe: ") + std::strerror(errno));
    const int runner_in = high_fd(requests[0]), runner_out = high_fd(replies[1]);
    to_runner_ = high_fd(requests[1]);
    from_runner_ = high_fd(replies[0]);
    fcntl(to_runner_, F_SETFL, O_NONBLOCK);
    fcntl(from_runner_, F_SETFL, O_NONBLOCK);
    log_ = open("/tmp", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (log_ < 0) {
        char path[] = "/tmp/glmasr-runner-XXXXXX";
        log_ = mkostemp(path, O_CLOEXEC);
        if (log_ >= 0) unlink(path);
    }

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, runner_in, kRequestFd);
    posix_spawn_file_actions_adddup2(&actions, runner_out, kReplyFd);
    if (log_ >= 0) posix_spawn_file_actions_adddup2(&actions, log_, 2);
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);  // its own process group: one kill stops all of it
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);
    std::vector<char*> argv;
    for (std::string& word : command_) argv.push_back(word.data());
    argv.push_back(nullptr);
    const int err = posix_spawnp(&pid_, argv[0], &actions, &attr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    close(runner_in);
    close(runner_out);
    if (err != 0) {
        pid_ = -1;
        stop();
        throw Error("cannot start the kernel runner '" + command_.front() +
                    "': " + std::strerror(err) +
                    " (build it: cmake --build build --target kernel-runner-" + name_ + ")");
    }

    // The hello: which track answers, and what it fills.
    try {
        const double deadline = deadline_after(call_timeout_seconds());
        if (read_value<uint32_t>(from_runner_, deadline) != kHelloMagic ||
            read_value<uint32_t>(from_runner_, deadline) != kVersion)
            fail("did not greet with the runner protocol");
        const std::string track = read_string(from_runner_, deadline, 64);
        const auto weight_dtype = static_cast<DType>(read_value<uint8_t>(from_runner_, deadline));
        entries_ = read_value<uint64_t>(from_runner_, deadline);
        if (track != name_)
            fail("serves track '" + printable(track, 64) + "', not '" + name_ + "'");
        if (weight_dtype != weight_dtype_)
            fail(std::string("reports weights in ") + dtype_name(weight_dtype) + "; the " + name_ +
                 " track's are " + dtype_name(weight_dtype_));
        greeted_ = true;
    } catch (const Error& e) {
        fail(std::string("at start: ") + e.what());
    }
    watch_.start(pid_);
    check_mappings();
}

void Runner::finish() {
    if (pid_ > 0) {
        close(to_runner_);
        to_runner_ = -1;
        const double deadline = deadline_after(call_timeout_seconds());
        int status;
        while (waitpid(pid_, &status, WNOHANG) == 0) {
            if (deadline_after(0) > deadline) {
                exits().push_back("timeout 0 did not exit within " +
                                  std::to_string(int(call_timeout_seconds())) +
                                  " s of the end of the tests");
                stop();
                return;
            }
            usleep(10000);
        }
        record_exit(status, greeted_);
        pid_ = -1;
    }
    stop();
}

void Runner::check_mappings_at_end() {
    try {
        check_mappings();
    } catch (const Error& e) {
        ADD_FAILURE() << e.what();
    }
}

void Runner::stop() {
    watch_.stop();
    if (pid_ > 0) {
        kill(-pid_, SIGKILL);
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        pid_ = -1;
    }
    for (int* fd : {&to_runner_, &from_runner_, &log_}) {
        if (*fd >= 0) close(*fd);
        *fd = -1;
    }
}

// The runner misbehaved: stop it, and fail the case saying how (its last stderr lines help).
void Runner::fail(const std::string& what) {
    std::string message = "the " + name_ + " kernel runner " + what;
    // A runner that closed its pipe is usually dying: give it a moment to say how.
    for (int tries = 0; pid_ > 0 && tries < 50; ++tries) {
        int status;
        if (waitpid(pid_, &status, WNOHANG) == pid_) {
            message += "; it " + describe_status(status);
            record_exit(status, greeted_);
            pid_ = -1;
        } else {
            usleep(10000);
        }
    }
    if (log_ >= 0) {
        char tail[800];
        const off_t size = lseek(log_, 0, SEEK_END);
        const off_t from = std::max<off_t>(0, size - static_cast<off_t>(sizeof tail));
        const ssize_t n = pread(log_, tail, sizeof tail, from);
        if (n > 0)
            message +=
                "\n  its stderr ends: " + printable(std::string(tail, static_cast<size_t>(n)));
    }
    stop();
    throw Error(message);
}

void Runner::check_mappings() {
    std::vector<std::string> found = watch_.take();
    if (pid_ > 0)
        for (const std::string& f : unlisted_mappings(pid_))
            if (std::find(found.begin(), found.end(), f) == found.end()) found.push_back(f);
    if (found.empty()) return;
    std::string list;
    for (const std::string& f : found) list += (list.empty() ? "" : "; ") + f;
    ::testing::Test::RecordProperty("integrity_violation", "unlisted code mapped: " + list);
    stop();
    throw Error("INTEGRITY VIOLATION: the " + name_ +
                " track's process maps code that grader/pipeline/allowed_objects.txt does not "
                "allow (" +
                list + "); the student track must compute everything with its own kernels");
}

void Runner::execute(OpId op, const std::vector<Arg>& args) {
    ensure_started();

    // The memory the call touches, as regions: tensors that overlap share one, so in-place
    // entries and views into one buffer alias on the runner's side exactly as they do here.
    struct Region {
        uint8_t* begin;
        uint8_t* end;
    };
    std::vector<Region> regions;
    std::vector<const Arg*> tensors;
    for (const Arg& a : args)
        if (a.kind == ArgKind::Tensor && !a.tensor.empty()) tensors.push_back(&a);
    std::vector<const Arg*> by_start = tensors;
    std::sort(by_start.begin(), by_start.end(),
              [](const Arg* a, const Arg* b) { return a->tensor.data < b->tensor.data; });
    for (const Arg* a : by_start) {
        auto* begin = static_cast<uint8_t*>(a->tensor.data);
        uint8_t* end = begin + a->tensor.bytes();
        if (!regions.empty() && begin < regions.back().end)
            regions.back().end = std::max(regions.back().end, end);
        else regions.push_back({begin, end});
    }
    auto region_of = [&](const Tensor& t) {
        const auto* p = static_cast<const uint8_t*>(t.data);
        for (size_t r = 0; r < regions.size(); ++r)
            if (p >= regions[r].begin && (p < regions[r].end || p == regions[r].begin)) return r;
        throw Error("remote_track: tensor outside every region");  // cannot happen
    };

    Writer request;
    request.put<uint32_t>(kRequestMagic);
    request.put<uint32_t>(static_cast<uint32_t>(op));
    request.put<uint32_t>(static_cast<uint32_t>(regions.size()));
    for (const Region& r : regions) {
        request.put<uint64_t>(static_cast<uint64_t>(r.end - r.begin));
        request.put<uint32_t>(
            static_cast<uint32_t>(reinterpret_cast<uintptr_t>(r.begin) % kAlignment));
    }
    request.put<uint32_t>(static_cast<uint32_t>(args.size()));
    for (const Arg& a : args) {
        request.put<uint8_t>(static_cast<uint8_t>(a.kind));
        if (a.kind == ArgKind::Int) request.put<int32_t>(a.i);
        if (a.kind == ArgKind::Float) request.put<float>(a.f);
        if (a.kind != ArgKind::Tensor) continue;
        request.put<uint8_t>(a.tensor.empty() ? 1 : 0);
        if (a.tensor.empty()) continue;
        const size_t r = region_of(a.tensor);
        request.put<uint32_t>(static_cast<uint32_t>(r));
        request.put<uint64_t>(
            static_cast<uint64_t>(static_cast<const uint8_t*>(a.tensor.data) - regions[r].begin));
        request.put<uint8_t>(static_cast<uint8_t>(a.tensor.dtype));
        request.put<uint8_t>(static_cast<uint8_t>(a.tensor.ndim));
        for (int64_t d : a.tensor.shape) request.put<int64_t>(d);
    }

    const double timeout = call_timeout_seconds();
    const double deadline = deadline_after(timeout);
    bool refused = false;  // the runner's track threw (a TODO, a contract check): its message
    std::string status_line;
    try {
        write_all(to_runner_, request.bytes.data(), request.bytes.size(), deadline);
        for (const Region& r : regions)
            write_all(to_runner_, r.begin, static_cast<size_t>(r.end - r.begin), deadline);

        if (read_value<uint32_t>(from_runner_, deadline) != kReplyMagic)
            fail("sent a malformed reply");
        const auto status = read_value<uint32_t>(from_runner_, deadline);
        if (status == static_cast<uint32_t>(Status::Error)) {
            refused = true;
            status_line = read_string(from_runner_, deadline, 4096);
        } else if (status == static_cast<uint32_t>(Status::Ok)) {
            const auto changed = read_value<uint32_t>(from_runner_, deadline);
            if (changed > regions.size()) fail("sent a malformed reply (too many regions)");
            std::set<uint32_t> seen;
            for (uint32_t c = 0; c < changed; ++c) {
                const auto r = read_value<uint32_t>(from_runner_, deadline);
                const auto bytes = read_value<uint64_t>(from_runner_, deadline);
                if (r >= regions.size() || !seen.insert(r).second ||
                    bytes != static_cast<uint64_t>(regions[r].end - regions[r].begin))
                    fail("sent a malformed reply (a region of the wrong size or twice)");
                read_all(from_runner_, regions[r].begin, bytes, deadline);
            }
        } else {
            fail("sent a malformed reply (unknown status)");
        }
    } catch (const Error& e) {
        check_mappings();  // a violation seen during the call outranks how the call ended
        const std::string what = e.what();
        if (what.rfind("the " + name_ + " kernel runner", 0) == 0) throw;  // from fail()
        if (what == "timed out")
            fail("did not answer a " + std::string(op_name(op)) + " call within " +
                 std::to_string(static_cast<int>(timeout)) + " s (a kernel hangs?)");
        fail("stopped talking during a " + std::string(op_name(op)) + " call (" + what + ")");
    }
    check_mappings();
    if (refused)
        throw Error(printable(status_line.empty() ? "(an error without a message)" : status_line));
}

// ------------------------------------------------------------------ proxies

constexpr int kMaxRemoteTracks = 4;
std::array<std::unique_ptr<Runner>, kMaxRemoteTracks>& runners() {
    static std::array<std::unique_ptr<Runner>, kMaxRemoteTracks> slots;
    return slots;
}

Arg to_arg(const Tensor& t) { return {ArgKind::Tensor, t}; }
Arg to_arg(int i) { return {ArgKind::Int, {}, i}; }
Arg to_arg(float f) { return {ArgKind::Float, {}, 0, f}; }

// Proxy<slot, op, type of the entry>::call has the entry's exact signature: it packs the
// arguments (the stream stays here; the runner uses its own) and runs the call remotely.
template <int kSlot, OpId kOp, class Entry>
struct Proxy;
template <int kSlot, OpId kOp, class... Args>
struct Proxy<kSlot, kOp, void (*)(Args...)> {
    static void call(Args... args) {
        std::vector<Arg> packed;
        (pack(packed, args), ...);
        runners()[kSlot]->execute(kOp, packed);
    }
    template <class T>
    static void pack(std::vector<Arg>& packed, const T& value) {
        if constexpr (!std::is_same_v<T, Stream>) packed.push_back(to_arg(value));
    }
};

template <int kSlot>
Ops proxy_ops(uint64_t entries) {
    Ops ops{};
#define GLMASR_PROXY_ENTRY(name)                        \
    if ((entries >> static_cast<int>(OpId::name)) & 1u) \
        ops.name = &Proxy<kSlot, OpId::name, decltype(Ops::name)>::call;
    GLMASR_OP_ENTRIES(GLMASR_PROXY_ENTRY)
#undef GLMASR_PROXY_ENTRY
    return ops;
}

struct RemoteTrack {
    std::string name, summary;
    Track track;
};

}  // namespace

std::vector<std::string> runner_command(const std::string& name) {
    std::vector<std::string> command;
    if (const char* prefix = std::getenv("GLMASR_RUNNER_PREFIX"); prefix && *prefix) {
        try {
            for (const auto& word : nlohmann::json::parse(prefix))
                command.push_back(word.get<std::string>());
        } catch (const nlohmann::json::exception&) {
            throw Error("GLMASR_RUNNER_PREFIX is not a JSON array of strings: " +
                        std::string(prefix));
        }
    }
    std::string program;
    if (const char* env = std::getenv("GLMASR_KERNEL_RUNNER"); env && *env) {
        program = env;
    } else {
        char self[PATH_MAX];
        const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : ".";
        dir = dir.substr(0, dir.find_last_of('/'));
        program = dir + "/../graded/kernel-runner-" + name;
    }
    command.push_back(program);
    command.push_back(name);
    return command;
}

const Track& remote_track_for(const std::string& name, const std::vector<std::string>& command,
                              DType weight_dtype) {
    static std::map<std::string, std::unique_ptr<RemoteTrack>> tracks;
    if (auto it = tracks.find(name); it != tracks.end()) return it->second->track;
    const int slot = static_cast<int>(tracks.size());
    if (slot >= kMaxRemoteTracks) throw Error("remote_track: too many remote tracks");
    runners()[slot] = std::make_unique<Runner>(name, command, weight_dtype);
    static constexpr std::array<Ops (*)(uint64_t), kMaxRemoteTracks> kTables = {
        proxy_ops<0>, proxy_ops<1>, proxy_ops<2>, proxy_ops<3>};
    const uint64_t entries = runners()[slot]->entries();  // starts it: errors surface here
    auto remote = std::make_unique<RemoteTrack>();
    remote->name = name;
    remote->summary =
        "the " + name + " track, run by " + command.back() + "'s runner in its own process";
    remote->track = Track{remote->name.c_str(), remote->summary.c_str(), Device::Host, weight_dtype,
                          kTables[slot](entries)};
    return tracks.emplace(name, std::move(remote)).first->second->track;
}

const Track& remote_track(const std::string& name) {
    // The student's tracks, CUDA, Triton and cuTile, are f32 (docs/tracks.md); each has its own
    // runner.
    if (!is_remote_track_name(name))
        throw Error("no remote track named '" + name +
                    "' (the kernel tests run only student, triton, triton-solution, cutile and "
                    "cutile-solution remotely)");
    return remote_track_for(name, runner_command(name), DType::F32);
}

namespace {

// The process tree under `root` (root included), from every process's parent in /proc/<pid>/stat.
std::vector<int> descendants(int root) {
    std::map<int, std::vector<int>> children;
    if (DIR* proc = opendir("/proc")) {
        while (dirent* entry = readdir(proc)) {
            const int pid = std::atoi(entry->d_name);
            if (pid <= 0) continue;
            std::ifstream stat("/proc/" + std::string(entry->d_name) + "/stat");
            std::string line;
            if (!std::getline(stat, line)) continue;
            const size_t close = line.rfind(')');
            if (close == std::string::npos) continue;
            std::istringstream rest(line.substr(close + 1));
            std::string state;
            int ppid = 0;
            rest >> state >> ppid;
            children[ppid].push_back(pid);
        }
        closedir(proc);
    }
    std::vector<int> tree, todo = {root};
    while (!todo.empty()) {
        const int pid = todo.back();
        todo.pop_back();
        tree.push_back(pid);
        for (int child : children[pid]) todo.push_back(child);
    }
    return tree;
}

// Student code must not outlive the checker: a runner's detached grandchild (setsid, double
// fork) could otherwise rewrite this program's report after it is written. The checker makes
// itself the subreaper of everything it starts, so every orphan below it becomes its child, and
// kills them all when the tests end — before GoogleTest writes its report.
class Reaper : public ::testing::Environment {
public:
    void TearDown() override {
        const char* report = std::getenv("GLMASR_RUNNER_EXIT_REPORT");
        for (auto& runner : runners()) {
            if (!runner) continue;
            runner->check_mappings_at_end();
            report&&* report ? runner->finish() : runner->stop();
        }
        if (report && *report) {
            std::ofstream out(report, std::ios::trunc);
            for (const std::string& line : exits()) out << line << "\n";
        }
        for (int round = 0; round < 100; ++round) {
            const std::vector<int> tree = descendants(getpid());
            if (tree.size() <= 1) return;
            for (size_t i = 1; i < tree.size(); ++i) kill(tree[i], SIGKILL);
            while (waitpid(-1, nullptr, WNOHANG) > 0) {}
            usleep(10000);
        }
    }
};
[[maybe_unused]] const bool kReaper = [] {
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    ::testing::AddGlobalTestEnvironment(new Reaper);
    return true;
}();

}  // namespace

namespace {

// One entry of allowed_objects.txt: `where` is "always" or the trusted tool in whose process
// tree it holds; `pattern` an fnmatch pattern on a file's name, or a bracketed kernel mapping.
struct AllowedObject {
    std::string where, pattern;
};

const std::vector<AllowedObject>& allowlist() {
    static const std::vector<AllowedObject> entries = [] {
        std::vector<AllowedObject> parsed;
        std::istringstream text(kAllowedObjects);
        int number = 0;
        for (std::string line; std::getline(text, line);) {
            ++number;
            std::istringstream words(line.substr(0, line.find('#')));
            AllowedObject entry;
            std::string extra;
            if (!(words >> entry.where)) continue;
            if (!(words >> entry.pattern) || (words >> extra))
                throw Error("allowed_objects.txt:" + std::to_string(number) +
                            ": not WHERE PATTERN: " + line);
            parsed.push_back(entry);
        }
        return parsed;
    }();
    return entries;
}

bool is_allowed(const std::string& name, const std::set<std::string>& tools) {
    for (const AllowedObject& e : allowlist()) {
        if (e.where != "always" && !tools.count(e.where)) continue;
        if (e.pattern[0] == '[' ? name == e.pattern
                                : fnmatch(e.pattern.c_str(), name.c_str(), 0) == 0)
            return true;
    }
    return false;
}

constexpr char kMemfd[] = "/memfd:";  // the kernel's prefix for a memfd; its creator names the rest
constexpr char kDeleted[] = " (deleted)";  // the kernel's suffix for a file no longer on disk

std::string without_deleted(const std::string& path) {
    const size_t n = sizeof kDeleted - 1;
    return path.size() >= n && path.compare(path.size() - n, n, kDeleted) == 0
               ? path.substr(0, path.size() - n)
               : path;
}

std::string base_name(const std::string& path) { return path.substr(path.find_last_of('/') + 1); }

// The path of pid's executable (/proc/PID/exe); "" when pid is gone or unreadable.
std::string program_of(int pid) {
    char path[PATH_MAX];
    const ssize_t n =
        readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), path, sizeof path - 1);
    return n > 0 ? std::string(path, static_cast<size_t>(n)) : "";
}

// The names of pid's executable mappings as /proc/PID/maps gives them: a file's path, a
// bracketed kernel mapping, "" for anonymous memory. Empty when pid is gone or unreadable.
std::vector<std::string> executable_mappings(int pid) {
    std::vector<std::string> names;
    std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
    for (std::string line; std::getline(maps, line);) {
        std::istringstream fields(line);  // start-end perms offset dev inode [name]
        std::string range, perms, offset, device, inode, name;
        if (!(fields >> range >> perms >> offset >> device >> inode)) continue;
        if (perms.find('x') == std::string::npos) continue;
        std::getline(fields >> std::ws, name);
        names.push_back(name);
    }
    return names;
}

// Why an executable mapping named `name` is not allowed in a process running `program` ("" when
// it is): the process's own program, a file allowed_objects.txt allows, or a kernel mapping it
// lists; anything else — another file, anonymous memory, a memfd — is not.
std::string unlisted_mapping(const std::string& name, const std::string& program,
                             const std::set<std::string>& tools) {
    if (name.rfind(kMemfd, 0) == 0) return "executable memory from a memfd (" + name + ")";
    if (name.empty() || name[0] != '/')
        return is_allowed(name, tools)
                   ? ""
                   : "executable memory (" + (name.empty() ? std::string("anonymous") : name) + ")";
    const std::string path = without_deleted(name);
    if (path == without_deleted(program) || is_allowed(base_name(path), tools)) return "";
    return path + " (not in allowed_objects.txt)";
}

}  // namespace

std::vector<std::string> unlisted_mappings(int root) {
    const std::vector<int> tree = descendants(root);
    std::map<int, std::string> programs;
    std::set<std::string> tools;
    for (const int pid : tree) {
        programs[pid] = program_of(pid);
        tools.insert(base_name(without_deleted(programs[pid])));
    }
#if defined(__SANITIZE_ADDRESS__)
    tools.insert("asan-build");  // this checker, and the runners built with it, map ASan's runtime
#endif
    std::vector<std::string> found;
    for (const int pid : tree) {
        const std::vector<std::string> names = executable_mappings(pid);
        if (program_of(pid) != programs[pid]) continue;  // it started another program: next look
        std::set<std::string> reasons;
        for (const std::string& name : names)
            reasons.insert(unlisted_mapping(name, programs[pid], tools));
        reasons.erase("");
        for (const std::string& reason : reasons)
            found.push_back(std::to_string(pid) + ": " + reason);
    }
    return found;
}

}  // namespace glmasr::runner
