// loaded_objects.cuh — CHEAT runtime_vendor_nosym: the loaded shared objects, from
// /proc/self/maps and their ELF program headers, read by hand. Unlike runtime_vendor's
// dl_iterate_phdr, this uses no loader function at all: the student library's only undefined
// symbols are open/read/pread/close-level libc calls any program makes, so no symbol scan can
// tell it from an honest library. Only reading /proc/PID/maps of the running process, or a
// sandbox that hides the vendor library, catches it. Used by vendor_gemm.cuh.
#pragma once

#include <elf.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace cheat {

// A shared object mapped into this process: its file, and where its addresses start.
struct LoadedObject {
    std::string path;
    uintptr_t bias;  // run-time address = bias + the address the ELF file gives
};

// The lowest page a file's PT_LOAD segments ask for (0 for a shared library).
inline uintptr_t first_load_page(const std::string& path) {
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    uintptr_t lowest = UINTPTR_MAX;
    Elf64_Ehdr header;
    if (pread(fd, &header, sizeof header, 0) == static_cast<ssize_t>(sizeof header) &&
        std::memcmp(header.e_ident, ELFMAG, SELFMAG) == 0 && header.e_phentsize == sizeof(Elf64_Phdr)) {
        std::vector<Elf64_Phdr> segments(header.e_phnum);
        const size_t bytes = segments.size() * sizeof(Elf64_Phdr);
        if (pread(fd, segments.data(), bytes, static_cast<off_t>(header.e_phoff)) == static_cast<ssize_t>(bytes))
            for (const Elf64_Phdr& s : segments)
                if (s.p_type == PT_LOAD && s.p_vaddr < lowest) lowest = s.p_vaddr;
    }
    close(fd);
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    return lowest == UINTPTR_MAX ? 0 : lowest & ~(page - 1);
}

// Each "start-end perms offset dev inode path" line of a file mapped from offset 0 starts an
// object; the first such line of a shared library gives its base.
inline std::vector<LoadedObject> loaded_objects() {
    std::vector<LoadedObject> objects;
    FILE* maps = std::fopen("/proc/self/maps", "re");
    if (!maps) return objects;
    char line[4096];
    while (std::fgets(line, sizeof line, maps)) {
        unsigned long start = 0, offset = 0;
        char path[4096] = "";
        if (std::sscanf(line, "%lx-%*x %*s %lx %*s %*s %4095s", &start, &offset, path) != 3) continue;
        if (offset != 0 || path[0] != '/' || !std::strstr(path, ".so")) continue;
        bool seen = false;
        for (const LoadedObject& o : objects) seen = seen || o.path == path;
        if (!seen) objects.push_back({path, start - first_load_page(path)});
    }
    std::fclose(maps);
    return objects;
}

}  // namespace cheat
