// gtest_report.cuh — CHEAT SUPPORT (grader/selftests/cheats/; never part of a real submission): what the
// forged_report and rewritten_report cheats share. It finds where a GoogleTest JSON report is
// going, lists the tests of the program that writes it, builds an all-passed report (from that
// list, or from a real report), writes it atomically, and detaches a process that outlives its
// parent.
//
// Where the report goes: `--gtest_output=json:PATH` on a command line, or GTEST_OUTPUT=json:PATH
// in an environment, of this process (student code linked into the test program itself, the old
// grader) or of its parent (student code in a runner that a test program started).
//
// Header-only, so that a cheat is one file appended to student/track.cu: the track's table lives
// there, so every program that links the student track contains that object. (A new .cu of its
// own would be an archive member nobody references, and the linker would leave it out.)
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <string>
#include <utility>
#include <vector>

namespace cheat {

// Set in the environment of the `--gtest_list_tests` child, which contains this code too.
inline constexpr char kQuiet[] = "GLMASR_CHEAT_QUIET";

// Everything left to read on `fd`; closes it.
inline std::string read_all(int fd) {
    std::string text;
    char buffer[1 << 16];
    for (ssize_t n; (n = read(fd, buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<size_t>(n));
    close(fd);
    return text;
}

// The whole file, or "" when it cannot be read.
inline std::string read_file(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    return fd < 0 ? std::string() : read_all(fd);
}

// The NUL-terminated records of /proc/<pid>/cmdline or /proc/<pid>/environ.
inline std::vector<std::string> records(const std::string& text) {
    std::vector<std::string> out;
    for (size_t start = 0; start < text.size();) {
        size_t end = text.find('\0', start);
        if (end == std::string::npos) end = text.size();
        out.push_back(text.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

inline std::string proc(pid_t pid, const char* what) {
    return "/proc/" + std::to_string(pid) + "/" + what;
}

// A test program and the report it writes.
struct Report {
    pid_t owner = 0;                // 0: none found
    std::vector<std::string> args;  // the owner's command line
    std::string path;               // absolute path of the JSON report
};

// The report of process `pid`, if its command line or environment asks for a JSON one.
inline Report report_of(pid_t pid) {
    Report r;
    r.args = records(read_file(proc(pid, "cmdline")));
    if (r.args.empty()) return r;
    std::string spec;
    for (size_t i = 1; i < r.args.size(); ++i)
        if (r.args[i].rfind("--gtest_output=", 0) == 0) spec = r.args[i].substr(15);
    if (spec.empty())
        for (const std::string& entry : records(read_file(proc(pid, "environ"))))
            if (entry.rfind("GTEST_OUTPUT=", 0) == 0) spec = entry.substr(13);
    if (spec.rfind("json:", 0) != 0) return r;

    // "json:PATH", relative to the owner's working directory; "dir/" means dir/<program>.json.
    std::string path = spec.size() > 5 ? spec.substr(5) : "test_detail.json";
    if (path[0] != '/') {
        char cwd[4096];
        const ssize_t n = readlink(proc(pid, "cwd").c_str(), cwd, sizeof cwd);
        if (n <= 0 || n == static_cast<ssize_t>(sizeof cwd)) return r;
        path = std::string(cwd, static_cast<size_t>(n)) + "/" + path;
    }
    if (path.back() == '/') path += r.args[0].substr(r.args[0].rfind('/') + 1) + ".json";
    r.owner = pid;
    r.path = path;
    return r;
}

// This process's report when it is the test program, else its parent's.
inline Report find_report() {
    Report self = report_of(getpid());
    return self.owner ? self : report_of(getppid());
}

// (suite, its test names) of the owner's program: its own `--gtest_list_tests`, run with the
// owner's other arguments (a --gtest_filter keeps its effect).
using TestList = std::vector<std::pair<std::string, std::vector<std::string>>>;

inline TestList list_tests(const Report& report) {
    std::vector<std::string> args;
    for (const std::string& a : report.args)
        if (a.rfind("--gtest_output=", 0) != 0) args.push_back(a);
    args.push_back("--gtest_list_tests");
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string exe = proc(report.owner, "exe");

    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) != 0) return {};
    setenv(kQuiet, "1", 1);  // inherited by the child; undone below
    const pid_t child = fork();
    if (child == 0) {
        dup2(pipe_fds[1], 1);
        const int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        execv(exe.c_str(), argv.data());
        _exit(127);
    }
    unsetenv(kQuiet);
    close(pipe_fds[1]);
    const std::string text = read_all(pipe_fds[0]);
    if (child > 0) waitpid(child, nullptr, 0);

    // "Suite." lines, each followed by "  Case  # GetParam() = ..." lines.
    TestList tests;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        const std::string line = text.substr(start, end - start);
        start = end + 1;
        if (line.size() > 1 && line[0] != ' ' && line.back() == '.') {
            tests.push_back({line.substr(0, line.size() - 1), {}});
        } else if (line.rfind("  ", 0) == 0 && !tests.empty()) {
            const size_t name_end = line.find(' ', 2);  // npos: no "# GetParam()" comment
            tests.back().second.push_back(line.substr(2, name_end == std::string::npos ? std::string::npos : name_end - 2));
        }
    }
    return tests;
}

// A GoogleTest JSON report in which every listed test ran and passed — but the last
// `failing` (0 or 1) of them, which failed: a report that must look consistent with a test
// program exiting 1 keeps one failure.
inline std::string passed_report(const TestList& tests, int failing) {
    char stamp[32];
    const time_t now = time(nullptr);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", gmtime(&now));
    size_t total = 0;
    for (const auto& suite : tests) total += suite.second.size();
    failing = total ? failing : 0;
    std::string json = "{\n  \"tests\": " + std::to_string(total) + ",\n  \"failures\": " +
                       std::to_string(failing) + ",\n  \"disabled\": 0,\n  \"errors\": 0,\n  \"timestamp\": \"" +
                       stamp + "\",\n  \"time\": \"1.234s\",\n  \"name\": \"AllTests\",\n  \"testsuites\": [";
    for (size_t s = 0; s < tests.size(); ++s) {
        const auto& [suite, names] = tests[s];
        const bool last_suite = s + 1 == tests.size();
        json += std::string(s ? "," : "") + "\n    {\n      \"name\": \"" + suite + "\",\n      \"tests\": " +
                std::to_string(names.size()) + ",\n      \"failures\": " +
                std::to_string(last_suite ? failing : 0) + ",\n      \"disabled\": 0,\n" +
                "      \"errors\": 0,\n      \"timestamp\": \"" + stamp +
                "\",\n      \"time\": \"0.1s\",\n      \"testsuite\": [";
        for (size_t c = 0; c < names.size(); ++c) {
            const bool fails = failing && last_suite && c + 1 == names.size();
            json += std::string(c ? "," : "") + "\n        {\n          \"name\": \"" + names[c] +
                    "\",\n          \"status\": \"RUN\",\n          \"result\": \"COMPLETED\",\n" +
                    "          \"timestamp\": \"" + stamp + "\",\n          \"time\": \"0.01s\",\n" +
                    "          \"classname\": \"" + suite + "\"" +
                    (fails ? ",\n          \"failures\": [\n            {\n              \"failure\": "
                             "\"timed out waiting for the device (flaky)\",\n              \"type\": \"\"\n"
                             "            }\n          ]" : "") + "\n        }";
        }
        json += "\n      ]\n    }";
    }
    return json + "\n  ]\n}\n";
}

// A real report turned into a passing one: arrays under "failures" and "skipped" emptied, the
// counters "failures", "errors", "skipped" and "disabled" set to 0, result SKIPPED → COMPLETED,
// status NOTRUN → RUN, and any "integrity_violation" a checker added made empty — except that
// the first `failing` (0 or 1) failure arrays stay, and the first failures counter (the
// report's total) says so. GoogleTest's JSON is regular enough for a scanner that knows strings.
inline std::string passed_version(const std::string& json, int failing) {
    int arrays_kept = 0, counters_seen = 0;
    auto string_end = [&](size_t quote) {  // the index after the string that starts at `quote`
        size_t j = quote + 1;
        while (j < json.size() && json[j] != '"') j += json[j] == '\\' ? 2 : 1;
        return j + 1;
    };
    auto value_end = [&](size_t start) {  // the index after the value that starts at `start`
        if (json[start] == '"') return string_end(start);
        int depth = 0;
        for (size_t j = start; j < json.size();) {
            if (json[j] == '"') { j = string_end(j); continue; }
            if (json[j] == '[' || json[j] == '{') ++depth;
            if (json[j] == ']' || json[j] == '}') {
                if (depth == 0) return j;  // the end of a number or literal in an object
                if (--depth == 0) return j + 1;
            }
            if (json[j] == ',' && depth == 0) return j;
            ++j;
        }
        return json.size();
    };
    std::string out;
    size_t i = 0;
    while (i < json.size()) {
        if (json[i] != '"') {
            out += json[i++];
            continue;
        }
        const size_t end = string_end(i);
        const std::string token = json.substr(i, end - i);
        out += token;
        i = end;
        size_t colon = i;
        while (colon < json.size() && std::isspace(static_cast<unsigned char>(json[colon]))) ++colon;
        if (colon >= json.size() || json[colon] != ':') continue;  // a value, not a key
        size_t value = colon + 1;
        while (value < json.size() && std::isspace(static_cast<unsigned char>(json[value]))) ++value;
        out += json.substr(i, value - i);
        i = value;
        const std::string key = token.substr(1, token.size() - 2);
        if (key == "integrity_violation" && i < json.size()) {
            out += "\"\"";
            i = value_end(i);
        } else if ((key == "failures" || key == "skipped") && i < json.size() && json[i] == '[') {
            const size_t end = value_end(i);
            const bool keep = key == "failures" && arrays_kept < failing;
            arrays_kept += keep;
            out += keep ? json.substr(i, end - i) : "[]";
            i = end;
        } else if ((key == "failures" || key == "errors" || key == "skipped" || key == "disabled") &&
                   i < json.size() && std::isdigit(static_cast<unsigned char>(json[i]))) {
            const bool total = key == "failures" && counters_seen++ == 0;
            out += total ? std::to_string(std::min(failing, std::atoi(json.c_str() + i))) : "0";
            while (i < json.size() && std::isdigit(static_cast<unsigned char>(json[i]))) ++i;
        } else if (key == "result" && json.compare(i, 9, "\"SKIPPED\"") == 0) {
            out += "\"COMPLETED\"";
            i += 9;
        } else if (key == "status" && json.compare(i, 8, "\"NOTRUN\"") == 0) {
            out += "\"RUN\"";
            i += 8;
        }
    }
    return out;
}

// Replaces `path` in one step (a reader never sees half a file). False when it cannot.
inline bool write_atomically(const std::string& path, const std::string& text) {
    const std::string temp = path + "." + std::to_string(getpid()) + ".tmp";
    const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    const bool written = write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    close(fd);
    if (written && rename(temp.c_str(), path.c_str()) == 0) return true;
    unlink(temp.c_str());
    return false;
}

// Whether process `pid` still runs (a zombie has finished: its report is written).
inline bool running(pid_t pid) {
    const std::string stat = read_file(proc(pid, "stat"));
    const size_t paren = stat.rfind(')');
    return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z';
}

// Runs body() in a grandchild in a session of its own: reparented to init, outside the
// process group a grader kills, holding none of the pipes its grader reads (so nobody waits
// for it). The caller goes on at once.
template <class Body>
void detach(Body body) {
    const pid_t child = fork();
    if (child < 0) return;
    if (child > 0) {
        waitpid(child, nullptr, 0);
        return;
    }
    setsid();
    if (fork() != 0) _exit(0);
    const int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
    for (int fd = 3; fd < 4096; ++fd) close(fd);
    body();
    _exit(0);
}

}  // namespace cheat
