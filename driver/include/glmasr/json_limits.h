// json_limits.h — nlohmann::json::parse with a nesting limit, in linear time, for every JSON
// file the driver reads (config.json, the safetensors header, the shard index, tokenizer.json).
//
// The parser itself is iterative, but a value nested 100000 deep is later walked recursively
// (dump() for an error message, copies, comparisons) and overflows the stack. The real files
// nest at most 7 deep (tokenizer.json; config.json and the safetensors header 3), so anything
// deeper than kMaxJsonDepth is refused before any such value exists:
// InputError "<file>: JSON nested deeper than 64 levels".
//
// Why two passes and not parse()'s callback: nlohmann's callback parser, at the end of every
// object, scans its parent for discarded members, so an object of n members costs O(n²) (a
// 99 MB safetensors header of zero-size tensors took minutes). A SAX pass that only counts
// nesting, then the plain parse, are each linear.
#pragma once

#include <cstddef>
#include <istream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>

#include "glmasr/error.h"

namespace glmasr {

inline constexpr int kMaxJsonDepth = 64;

namespace detail {

// A SAX handler that builds nothing: it follows the nesting and refuses what is too deep. On a
// syntax error it stops quietly; the plain parse that follows reports that error.
class JsonDepthLimit final : public nlohmann::json_sax<nlohmann::json> {
public:
    explicit JsonDepthLimit(const std::string& file) : file_(file) {}

    bool null() override { return true; }
    bool boolean(bool) override { return true; }
    bool number_integer(number_integer_t) override { return true; }
    bool number_unsigned(number_unsigned_t) override { return true; }
    bool number_float(number_float_t, const string_t&) override { return true; }
    bool string(string_t&) override { return true; }
    bool binary(binary_t&) override { return true; }
    bool key(string_t&) override { return true; }
    bool start_object(std::size_t) override { return enter(); }
    bool start_array(std::size_t) override { return enter(); }
    bool end_object() override { return --depth_, true; }
    bool end_array() override { return --depth_, true; }
    bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception&) override {
        return false;
    }

private:
    bool enter() {
        if (++depth_ > kMaxJsonDepth)
            throw InputError(file_ + ": JSON nested deeper than " + std::to_string(kMaxJsonDepth) +
                             " levels (corrupt or hostile file)");
        return true;
    }

    const std::string& file_;
    int depth_ = 0;
};

}  // namespace detail

// Parse the bytes [first, last), refusing nesting deeper than kMaxJsonDepth. nlohmann's parse
// errors still come out as json::exception; the depth error is an InputError naming `file`.
inline nlohmann::json parse_json_limited(const std::string& file, const unsigned char* first,
                                         const unsigned char* last) {
    detail::JsonDepthLimit limit(file);
    nlohmann::json::sax_parse(first, last, &limit);
    return nlohmann::json::parse(first, last);
}

// The same for a whole stream (a JSON file opened by the caller).
inline nlohmann::json parse_json_limited(const std::string& file, std::istream& in) {
    const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
    return parse_json_limited(file, bytes, bytes + text.size());
}

}  // namespace glmasr
