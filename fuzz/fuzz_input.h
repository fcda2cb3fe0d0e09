// fuzz_input.h — what every harness in fuzz/ shares: the input as a file, and the verdict.
//
// The driver's parsers take paths (they mmap or stream whole files), so each input is written to
// an in-memory file (memfd_create) and handed over as /proc/self/fd/N: no disk traffic, nothing
// to clean up. A glmasr::InputError is a parser refusing bad input, the expected outcome. Every
// other exception is a finding: it is printed and the harness aborts, so that libFuzzer saves
// the input. Crashes and sanitizer reports are findings without any help from here.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <typeinfo>

#include "glmasr/error.h"

namespace fuzz {

// One in-memory file, overwritten by each input.
class MemFile {
public:
    MemFile() : fd_(memfd_create("glmasr-fuzz", 0)), path_("/proc/self/fd/" + std::to_string(fd_)) {
        if (fd_ < 0) {
            std::perror("memfd_create");
            std::abort();
        }
    }
    // Make the file hold exactly data[0, size) and return the path to open it by.
    const std::string& write(const uint8_t* data, size_t size) {
        if (ftruncate(fd_, 0) != 0 || pwrite(fd_, data, size, 0) != static_cast<ssize_t>(size)) {
            std::perror("writing the in-memory file");
            std::abort();
        }
        return path_;
    }

private:
    int fd_;
    std::string path_;
};

// A property of accepted input that does not hold: a finding.
[[noreturn]] inline void finding(const std::string& what) {
    std::fprintf(stderr, "finding: %s\n", what.c_str());
    std::abort();
}

// Run `parse`; an InputError is fine, any other exception is a finding.
template <class Parse>
void expect_only_input_errors(Parse&& parse) {
    try {
        parse();
    } catch (const glmasr::InputError&) {
        // the expected rejection of bad input
    } catch (const std::exception& e) {
        finding(std::string("exception other than InputError: ") + typeid(e).name() + ": " +
                e.what());
    } catch (...) {
        finding("a non-std exception");
    }
}

}  // namespace fuzz
