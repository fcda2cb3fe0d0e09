// fuzz_safetensors.cpp — libFuzzer harness for the safetensors reader
// (driver/src/safetensors.cpp): any bytes as a .safetensors file, i.e. the header length, the
// JSON header, every entry's dtype, shape and data_offsets, and the overlap check.
//
// Run by `make fuzz` (docs/testing.md). A file the reader accepts is then read back tensor by
// tensor with read_f32, so an entry that passed validation but points outside the mapping, or
// whose shape disagrees with its byte count, shows up as a sanitizer report or a crash.
#include <vector>

#include "fuzz_input.h"
#include "glmasr/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    static fuzz::MemFile file;
    const std::string& path = file.write(data, size);
    fuzz::expect_only_input_errors([&] {
        const glmasr::SafeTensorsFile st(path);
        for (const std::string& name : st.names()) {
            const glmasr::SafeTensorEntry* entry = st.find(name);
            if (!entry) fuzz::finding("names() lists '" + name + "' but find() does not know it");
            std::vector<float> values(static_cast<size_t>(entry->numel()));
            st.read_f32(name, entry->shape, values.data());
        }
    });
    return 0;
}
