// protocol.cpp — pipe I/O with deadlines for the checker ↔ runner protocol (protocol.h).
#include "protocol.h"

#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>

#include "glmasr/error.h"

namespace glmasr::runner {

namespace {

double now() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Waits until fd is ready for `events` or the deadline passes.
void wait_ready(int fd, short events, double deadline) {
    for (;;) {
        int timeout_ms = -1;
        if (deadline > 0) {
            const double left = deadline - now();
            if (left <= 0) throw Error("timed out");
            timeout_ms = static_cast<int>(std::ceil(std::min(left, 3600.0) * 1000));
        }
        pollfd p{fd, events, 0};
        const int n = poll(&p, 1, timeout_ms);
        if (n > 0) return;  // ready, or hung up / error: the read or write says which
        if (n < 0 && errno != EINTR) throw Error(std::string("poll: ") + std::strerror(errno));
    }
}

}  // namespace

double deadline_after(double seconds) { return seconds > 0 ? now() + seconds : 0; }

void write_all(int fd, const void* data, size_t n, double deadline) {
    const auto* p = static_cast<const uint8_t*>(data);
    while (n > 0) {
        wait_ready(fd, POLLOUT, deadline);
        const ssize_t k = write(fd, p, std::min<size_t>(n, 1 << 20));
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            throw Error(errno == EPIPE ? "closed" : std::string("write: ") + std::strerror(errno));
        }
        p += k;
        n -= static_cast<size_t>(k);
    }
}

void read_all(int fd, void* data, size_t n, double deadline) {
    auto* p = static_cast<uint8_t*>(data);
    while (n > 0) {
        wait_ready(fd, POLLIN, deadline);
        const ssize_t k = read(fd, p, std::min<size_t>(n, 1 << 20));
        if (k == 0) throw Error("closed");
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            throw Error(std::string("read: ") + std::strerror(errno));
        }
        p += k;
        n -= static_cast<size_t>(k);
    }
}

std::string read_string(int fd, double deadline, size_t limit) {
    const auto n = read_value<uint32_t>(fd, deadline);
    if (n > limit)
        throw Error("a string of " + std::to_string(n) + " bytes (at most " +
                    std::to_string(limit) + ")");
    std::string s(n, '\0');
    read_all(fd, s.data(), n, deadline);
    return s;
}

}  // namespace glmasr::runner
