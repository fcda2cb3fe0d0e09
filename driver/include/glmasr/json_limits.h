// json_limits.h — nlohmann::json::parse with a nesting limit, for every JSON file the driver
// reads (config.json, the safetensors header, tokenizer.json).
//
// The parser itself is iterative, but a value nested 100000 deep is later walked recursively
// (dump() for an error message, copies, comparisons) and overflows the stack. The real files
// nest at most 7 deep (tokenizer.json; config.json and the safetensors header 3), so anything
// deeper than kMaxJsonDepth is refused while parsing, before any such value exists:
// InputError "<file>: JSON nested deeper than 64 levels".
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "glmasr/error.h"

namespace glmasr {

inline constexpr int kMaxJsonDepth = 64;

// Parse `input` (anything nlohmann::json::parse takes: a stream, or two iterators given as
// `first, last`), refusing nesting deeper than kMaxJsonDepth. nlohmann's parse errors still
// come out as json::exception; the depth error is an InputError naming `file`.
template <class... Input>
nlohmann::json parse_json_limited(const std::string& file, Input&&... input) {
    const auto limit = [&file](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
        if ((event == nlohmann::json::parse_event_t::object_start ||
             event == nlohmann::json::parse_event_t::array_start) &&
            depth >= kMaxJsonDepth)
            throw InputError(file + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                             " levels (corrupt or hostile file)");
        return true;
    };
    return nlohmann::json::parse(std::forward<Input>(input)..., limit);
}

}  // namespace glmasr
