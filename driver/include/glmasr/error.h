// error.h — the project's one exception type and its exit codes.
//
// Every failure the user can cause (a missing or corrupt file, a config that contradicts its
// weights, audio that is empty or too long) is an InputError: the CLI prints its one-line
// message and exits with 2. Anything else (a CUDA fault, a broken invariant) is an internal
// error and exits with 1. A student kernel that is still a TODO throws NotImplemented, whose
// message names the kernel and the guide to read.
#pragma once

#include <stdexcept>
#include <string>

namespace glmasr {

enum ExitCode : int { kExitOk = 0, kExitInternal = 1, kExitBadInput = 2 };

class Error : public std::runtime_error {
public:
    Error(const std::string& message, int exit_code = kExitInternal)
        : std::runtime_error(message), exit_code_(exit_code) {}
    int exit_code() const { return exit_code_; }

private:
    int exit_code_;
};

// Bad input from the user: "<file>: <problem>" and exit code 2.
class InputError : public Error {
public:
    explicit InputError(const std::string& message) : Error(message, kExitBadInput) {}
};

// A student kernel that has not been written yet.
class NotImplemented : public Error {
public:
    NotImplemented(const std::string& kernel, const std::string& guide)
        : Error("not implemented: " + kernel + " — see " + guide, kExitInternal) {}
};

}  // namespace glmasr
