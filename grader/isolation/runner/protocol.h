// protocol.h — the wire format between a kernel-test checker and a kernel runner.
//
// The trust boundary of the kernel tests (docs/grading.md): the checker (build/tests/test_<kernel>)
// draws the inputs, holds the oracle and the tolerances and writes the verdicts; it links no
// student code. The runner (build/graded/kernel-runner-student) links the student track and
// nothing else; it only computes the outputs of the calls it is handed. They talk over two pipes
// that the checker creates: the runner reads requests on fd 3 and writes replies on fd 4 (its
// stdout and stderr stay free for the student's own prints, which decide nothing).
//
//   hello    runner → checker   once, at start: which track, which entries it fills
//   request  checker → runner   one op call: the memory regions its tensors live in, then its
//                               arguments in declaration order (ops.h)
//   reply    runner → checker   ok + the regions whose bytes changed, or an error line
//
// Every message is little-endian, sizes are explicit, and the checker validates everything it
// reads (a reply naming a region twice, of the wrong size, or arriving late is a failure of the
// case, never a crash of the checker).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace glmasr::runner {

inline constexpr uint32_t kHelloMagic = 0x524c4d47;    // "GMLR"
inline constexpr uint32_t kRequestMagic = 0x51524d47;  // "GMRQ"
inline constexpr uint32_t kReplyMagic = 0x50524d47;    // "GMRP"
inline constexpr uint32_t kVersion = 1;
inline constexpr int kRequestFd = 3;  // in the runner
inline constexpr int kReplyFd = 4;

// Guard bytes the runner puts before and after every region (and checks after the call): a
// kernel that writes past its buffers is caught even where the allocator has slack.
inline constexpr size_t kGuardBytes = 4096;
inline constexpr uint8_t kGuardByte = 0xa5;
// A region's offset modulo kAlignment is preserved on the runner's side, so a view the checker
// placed off a 16-byte boundary stays off it.
inline constexpr size_t kAlignment = 256;

enum class ArgKind : uint8_t { Tensor = 1, Int = 2, Float = 3 };
enum class Status : uint32_t { Ok = 0, Error = 1 };

// A sequence of bytes being built (writer) or consumed (reader); the reader throws
// glmasr::Error("truncated message") instead of reading past the end.
class Writer {
public:
    template <class T>
    void put(T value) {
        put_bytes(&value, sizeof(T));
    }
    void put_bytes(const void* data, size_t n) {
        if (n == 0) return;
        const size_t at = bytes.size();
        bytes.resize(at + n);
        std::memcpy(bytes.data() + at, data, n);
    }
    void put_string(const std::string& s) {
        put<uint32_t>(static_cast<uint32_t>(s.size()));
        put_bytes(s.data(), s.size());
    }
    std::vector<uint8_t> bytes;
};

// Blocking I/O on a pipe with a deadline (seconds since the steady clock's epoch; <= 0: none).
// Both throw glmasr::Error naming what went wrong: "timed out", "closed", or errno's text.
void write_all(int fd, const void* data, size_t n, double deadline);
void read_all(int fd, void* data, size_t n, double deadline);
double deadline_after(double seconds);

template <class T>
T read_value(int fd, double deadline) {
    T value;
    read_all(fd, &value, sizeof(T), deadline);
    return value;
}
// A length-prefixed string of at most `limit` bytes (longer: an error, never an allocation).
std::string read_string(int fd, double deadline, size_t limit);

}  // namespace glmasr::runner

namespace glmasr {
struct Track;
namespace runner {
// The runner's side (serve.cpp): greet on fd 4, then answer requests from fd 3 with `track`'s
// entries until the checker closes the pipe. Returns the process's exit code.
int serve(const Track& track);
}  // namespace runner
}  // namespace glmasr
