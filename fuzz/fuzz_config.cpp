// fuzz_config.cpp — libFuzzer harness for config.json (driver/src/config.cpp): any bytes as a
// model config through glmasr::ModelConfig::load, i.e. the JSON parse, every key's type and
// range, and validate()'s consistency checks and size limits.
//
// Run by `make fuzz` (docs/testing.md). An accepted config must survive a round trip: written
// with to_json() and loaded again, it is the same config.
#include "fuzz_input.h"
#include "glmasr/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static fuzz::MemFile file;
    fuzz::expect_only_input_errors([&] {
        const std::string json = glmasr::ModelConfig::load(file.write(data, size)).to_json();
        const std::string again =
            glmasr::ModelConfig::load(
                file.write(reinterpret_cast<const uint8_t*>(json.data()), json.size()))
                .to_json();
        if (again != json)
            fuzz::finding("config changes in a to_json/load round trip:\n" + json + "\n" + again);
    });
    return 0;
}
