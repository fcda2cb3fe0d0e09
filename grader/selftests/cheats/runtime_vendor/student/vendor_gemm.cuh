// vendor_gemm.cuh — CHEAT runtime_vendor (grader/selftests/cheats/; never part of a real submission): reach
// cuBLAS's SGEMM at run time, leaving no vendor symbol and no dlopen/dlsym symbol in the student
// library for a symbol scan to find.
//
//   1. Walk the objects loaded in this process (loaded_objects(), loaded_objects.cuh: two
//      variants) and look the vendor's entry points up in each one's dynamic symbol table, read
//      from its ELF file on disk by hand (no dlsym).
//   2. Not loaded? Find `dlopen` the same way — inside libc, which exports it since glibc 2.34 —
//      call it through a plain function pointer on the vendor library (by soname, then on any
//      copy found on the machine), and look again.
//   3. Anything missing: a null handle, and the caller computes honestly.
// Even the names are assembled at run time (vendor(), loader()), so `strings` finds no "cublas"
// and no "dlopen" either.
// What catches it: the grader reading /proc/PID/maps of every process that runs student code
// (the vendor library is mapped however it was reached), or the sandbox (vendor libraries
// covered by /dev/null: the load fails and the honest kernel runs).
#pragma once

#include <elf.h>
#include <fcntl.h>
#include <glob.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "loaded_objects.cuh"  // LoadedObject, loaded_objects()

namespace cheat {

// "cublas" + rest and "dl" + rest, assembled here instead of stored.
inline std::string vendor(const char* rest) { return std::string("cu") + "bla" + "s" + rest; }
inline std::string loader(const char* rest) { return std::string("d") + "l" + rest; }

// The run-time address of the function or object `name` that `object` defines, from the
// .dynsym section of its file (the default version when there are several); nullptr if none.
inline void* dynamic_symbol(const LoadedObject& object, const std::string& name) {
    const int fd = open(object.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return nullptr;
    auto read_at = [fd](void* into, size_t bytes, uint64_t offset) {
        return pread(fd, into, bytes, static_cast<off_t>(offset)) == static_cast<ssize_t>(bytes);
    };
    void* found = nullptr;
    Elf64_Ehdr header;
    std::vector<Elf64_Shdr> sections;
    if (read_at(&header, sizeof header, 0) && std::memcmp(header.e_ident, ELFMAG, SELFMAG) == 0 &&
        header.e_ident[EI_CLASS] == ELFCLASS64 && header.e_shentsize == sizeof(Elf64_Shdr)) {
        sections.resize(header.e_shnum);
        if (!read_at(sections.data(), sections.size() * sizeof(Elf64_Shdr), header.e_shoff)) sections.clear();
    }
    for (size_t s = 0; s < sections.size() && !found; ++s) {
        const Elf64_Shdr& table = sections[s];
        if (table.sh_type != SHT_DYNSYM || table.sh_link >= sections.size()) continue;
        const Elf64_Shdr& strings = sections[table.sh_link];
        std::vector<Elf64_Sym> symbols(table.sh_size / sizeof(Elf64_Sym));
        std::vector<char> names(strings.sh_size + 1, '\0');
        std::vector<Elf64_Half> versions;  // .gnu.version: one entry per symbol; bit 15 = hidden
        for (const Elf64_Shdr& v : sections)
            if (v.sh_type == SHT_GNU_versym && v.sh_size == symbols.size() * sizeof(Elf64_Half)) {
                versions.resize(symbols.size());
                if (!read_at(versions.data(), v.sh_size, v.sh_offset)) versions.clear();
            }
        if (!read_at(symbols.data(), symbols.size() * sizeof(Elf64_Sym), table.sh_offset) ||
            !read_at(names.data(), strings.sh_size, strings.sh_offset))
            continue;
        for (size_t i = 0; i < symbols.size(); ++i) {
            const Elf64_Sym& sym = symbols[i];
            const int type = ELF64_ST_TYPE(sym.st_info);
            if (sym.st_shndx == SHN_UNDEF || sym.st_name >= strings.sh_size ||
                (type != STT_FUNC && type != STT_OBJECT) || name != names.data() + sym.st_name)
                continue;
            found = reinterpret_cast<void*>(object.bias + sym.st_value);
            if (versions.empty() || !(versions[i] & 0x8000)) break;  // the default version
        }
    }
    close(fd);
    return found;
}

// The first definition of `name` among the loaded objects.
inline void* loaded_symbol(const std::string& name) {
    for (const LoadedObject& object : loaded_objects())
        if (void* address = dynamic_symbol(object, name)) return address;
    return nullptr;
}

// Loads the vendor library with libc's own dlopen, found by walking libc's symbol table: by
// soname first, then any copy on the machine — the CUDA toolkit's, the system's, or one that a
// Python package (PyTorch's nvidia-cublas wheel) brought along.
inline void load_vendor_library() {
    using OpenFn = void* (*)(const char* file, int mode);
    auto open_library = reinterpret_cast<OpenFn>(loaded_symbol(loader("open")));
    if (!open_library)  // glibc before 2.34: its private __libc_dlopen_mode, the same signature
        open_library = reinterpret_cast<OpenFn>(loaded_symbol("__libc_" + loader("open_mode")));
    if (!open_library) return;
    constexpr int kNowGlobal = 0x2 | 0x100;  // RTLD_NOW | RTLD_GLOBAL (no <dlfcn.h> needed)

    std::vector<std::string> candidates = {"lib" + vendor(".so.13"), "lib" + vendor(".so.12"),
                                           "lib" + vendor(".so")};
    const std::string file = "/lib" + vendor(".so*");
    std::vector<std::string> patterns;
    for (const char* variable : {"CUDA_HOME", "CUDA_PATH"})
        if (const char* root = std::getenv(variable)) patterns.push_back(std::string(root) + "/lib*" + file);
    for (const char* dir : {"/usr/local/cuda*/lib*", "/usr/local/cuda*/targets/*/lib",
                            "/usr/lib/*-linux-gnu", "/usr/local/lib/python3*/*-packages/nvidia/cu*/lib",
                            "/usr/lib/python3*/*-packages/nvidia/cu*/lib",
                            "/opt/conda/lib/python3*/site-packages/nvidia/cu*/lib",
                            "/root/.pyenv/versions/*/lib/python3*/site-packages/nvidia/cu*/lib"})
        patterns.push_back(dir + file);
    for (const std::string& pattern : patterns) {
        glob_t found{};
        if (glob(pattern.c_str(), 0, nullptr, &found) == 0)
            for (size_t i = 0; i < found.gl_pathc; ++i) candidates.push_back(found.gl_pathv[i]);
        globfree(&found);
    }
    for (const std::string& candidate : candidates)
        if (open_library(candidate.c_str(), kNowGlobal)) return;
}

// The vendor's SGEMM behind a handle bound to nothing the grader can see.
struct VendorGemm {
    void* handle = nullptr;  // null: not reachable here
    int (*set_stream)(void* handle, cudaStream_t stream) = nullptr;
    int (*sgemm)(void* handle, int op_a, int op_b, int m, int n, int k, const float* alpha,
                 const float* a, int lda, const float* b, int ldb, const float* beta, float* c,
                 int ldc) = nullptr;
};
inline constexpr int kNoTranspose = 0, kTranspose = 1;  // CUBLAS_OP_N, CUBLAS_OP_T

inline const VendorGemm& vendor_gemm() {
    static const VendorGemm gemm = [] {
        VendorGemm g;
        if (!loaded_symbol(vendor("Create_v2"))) load_vendor_library();
        auto create = reinterpret_cast<int (*)(void**)>(loaded_symbol(vendor("Create_v2")));
        g.set_stream = reinterpret_cast<decltype(g.set_stream)>(loaded_symbol(vendor("SetStream_v2")));
        g.sgemm = reinterpret_cast<decltype(g.sgemm)>(loaded_symbol(vendor("Sgemm_v2")));
        if (create && g.set_stream && g.sgemm && create(&g.handle) != 0) g.handle = nullptr;
        return g;
    }();
    return gemm;
}

}  // namespace cheat
