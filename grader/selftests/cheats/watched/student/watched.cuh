// watched.cuh — CHEAT sanitizer_* (grader/selftests/cheats/; never part of a real submission):
// whether this process runs under compute-sanitizer, from the libraries mapped into it
// (/proc/self/maps names compute-sanitizer's injection libraries). The three sanitizer cheats
// behave otherwise when watched: add the barrier their race needs, throw, or stall.
#pragma once

#include <fstream>
#include <string>

namespace cheat {

inline bool watched() {
    static const bool found = [] {
        std::ifstream maps("/proc/self/maps");
        for (std::string line; std::getline(maps, line);)
            if (line.find("sanitizer") != std::string::npos) return true;
        return false;
    }();
    return found;
}

}  // namespace cheat
