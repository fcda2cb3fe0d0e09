// loaded_objects.cuh — CHEAT runtime_vendor: the loaded shared objects, from glibc's
// dl_iterate_phdr. It is a libc function, not dlopen/dlsym, but it does leave an undefined
// `dl_iterate_phdr` in the library: a symbol scan may flag it (runtime_vendor_nosym avoids even
// that). Used by vendor_gemm.cuh.
#pragma once

#include <link.h>

#include <string>
#include <vector>

namespace cheat {

// A shared object mapped into this process: its file, and where its addresses start.
struct LoadedObject {
    std::string path;
    uintptr_t bias;  // run-time address = bias + the address the ELF file gives
};

inline std::vector<LoadedObject> loaded_objects() {
    std::vector<LoadedObject> objects;
    dl_iterate_phdr([](dl_phdr_info* info, size_t, void* data) {
        // The program itself has an empty name and the vDSO a name that is no file: skip both.
        if (info->dlpi_name && info->dlpi_name[0] == '/')
            static_cast<std::vector<LoadedObject>*>(data)->push_back({info->dlpi_name, info->dlpi_addr});
        return 0;
    }, &objects);
    return objects;
}

}  // namespace cheat
