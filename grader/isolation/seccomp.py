#!/usr/bin/env python3
"""seccomp.py — the system calls a student process may not make, as a seccomp filter for bwrap.

    python3 -I -S grader/isolation/seccomp.py BWRAP ARGS...   # exec BWRAP --seccomp FD ARGS...

The unprivileged sandbox (sandbox.py, without root) starts bubblewrap through this file: it
builds the filter, hands it over on a pipe at the lowest free descriptor (so the caller's
descriptors, the kernel-test checker's pipes on 3 and 4, stay where they are) and execs bwrap,
which reads and closes the pipe, sets no_new_privs and loads the filter just before it execs the
student's command. Standard library only; sandbox.py calls program() once first, so an
unsupported machine is said before anything runs.

The filter is classic BPF over struct seccomp_data: a system call of another architecture (a
32-bit or x32 binary, whose numbers mean other calls) kills the process; a call in DENIED
returns EPERM, as does ioctl(TIOCSTI); everything else is allowed. CUDA's calls (ioctl on
/dev/nvidia*, mmap, clone, futex) are none of these.
"""

import os
import platform
import struct
import sys

# Refused with EPERM: no kernel, compiler or Python a student runs needs them, and each is a way
# out of the sandbox or into the grader. One entry a line, with why.
DENIED = (
    "ptrace",  # reading or steering another process (the grader's checker, a sibling)
    "process_vm_readv",  # reading another process's memory without ptrace
    "process_vm_writev",  # writing another process's memory without ptrace
    "mount",  # changing the file view bwrap set up (hidden paths, read-only tree)
    "umount2",  # uncovering a hidden path or a vendor library
    "pivot_root",  # replacing the root bwrap set up
    "chroot",  # a classic step of a namespace escape
    "open_tree",  # the new mount API: the same as mount
    "move_mount",  # the new mount API: the same as mount
    "fsopen",  # the new mount API: the same as mount
    "fsconfig",  # the new mount API: the same as mount
    "fsmount",  # the new mount API: the same as mount
    "fspick",  # the new mount API: the same as mount
    "mount_setattr",  # the new mount API: making a read-only mount writable
    "unshare",  # new namespaces, where the student would hold every capability
    "setns",  # joining another namespace through a descriptor
    "keyctl",  # the kernel keyrings are shared with the grader's user outside the namespace
    "add_key",  # the kernel keyrings (as keyctl)
    "request_key",  # the kernel keyrings (as keyctl)
    "bpf",  # loading kernel programs: a large attack surface, no use to a kernel test
    "perf_event_open",  # hardware counters and kernel tracing: side channels, kernel surface
    "userfaultfd",  # stalls the kernel mid-copy at will: a tool for exploiting kernel races
    "kexec_load",  # loading another kernel
    "kexec_file_load",  # loading another kernel
    "init_module",  # loading kernel modules
    "finit_module",  # loading kernel modules
    "delete_module",  # unloading kernel modules
    "open_by_handle_at",  # opens files by handle, around the mounts that hide paths
    "name_to_handle_at",  # makes the handles open_by_handle_at takes
    "personality",  # READ_IMPLIES_EXEC, ADDR_NO_RANDOMIZE: weakens the next exec's protections
    "reboot",  # never a student's
    "swapon",  # never a student's
    "swapoff",  # never a student's
    "acct",  # process accounting: the host's
    "clock_settime",  # the clock the grader times with
    "settimeofday",  # the clock the grader times with
    "iopl",  # raw I/O ports (x86 only)
    "ioperm",  # raw I/O ports (x86 only)
    "lookup_dcookie",  # profiling interface that reads kernel paths
    "fanotify_init",  # watches the file accesses of the whole mount, the grader's too
    "quotactl",  # disk quotas: the host's
    "quotactl_fd",  # disk quotas: the host's
    "io_uring_setup",  # the kernel making I/O calls on the caller's behalf: a large surface
    "io_uring_enter",  # io_uring (as io_uring_setup)
    "io_uring_register",  # io_uring (as io_uring_setup)
)
# ioctl(fd, TIOCSTI, c) pushes c into a terminal's input, so a process that reaches the
# grader's terminal could type commands into it; the sandbox's setsid also takes the terminal.
TIOCSTI = 0x5412

# System call numbers (arch/x86/entry/syscalls/syscall_64.tbl; include/uapi/asm-generic/unistd.h
# for aarch64), and the AUDIT_ARCH value the kernel reports with each call.
NUMBERS = {
    "x86_64": {
        "ioctl": 16,
        "ptrace": 101,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "mount": 165,
        "umount2": 166,
        "pivot_root": 155,
        "chroot": 161,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "unshare": 272,
        "setns": 308,
        "keyctl": 250,
        "add_key": 248,
        "request_key": 249,
        "bpf": 321,
        "perf_event_open": 298,
        "userfaultfd": 323,
        "kexec_load": 246,
        "kexec_file_load": 320,
        "init_module": 175,
        "finit_module": 313,
        "delete_module": 176,
        "open_by_handle_at": 304,
        "name_to_handle_at": 303,
        "personality": 135,
        "reboot": 169,
        "swapon": 167,
        "swapoff": 168,
        "acct": 163,
        "clock_settime": 227,
        "settimeofday": 164,
        "iopl": 172,
        "ioperm": 173,
        "lookup_dcookie": 212,
        "fanotify_init": 300,
        "quotactl": 179,
        "quotactl_fd": 443,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
    },
    "aarch64": {
        "ioctl": 29,
        "ptrace": 117,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "mount": 40,
        "umount2": 39,
        "pivot_root": 41,
        "chroot": 51,
        "open_tree": 428,
        "move_mount": 429,
        "fsopen": 430,
        "fsconfig": 431,
        "fsmount": 432,
        "fspick": 433,
        "mount_setattr": 442,
        "unshare": 97,
        "setns": 268,
        "keyctl": 219,
        "add_key": 217,
        "request_key": 218,
        "bpf": 280,
        "perf_event_open": 241,
        "userfaultfd": 282,
        "kexec_load": 104,
        "kexec_file_load": 294,
        "init_module": 105,
        "finit_module": 273,
        "delete_module": 106,
        "open_by_handle_at": 265,
        "name_to_handle_at": 264,
        "personality": 92,
        "reboot": 142,
        "swapon": 224,
        "swapoff": 225,
        "acct": 89,
        "clock_settime": 112,
        "settimeofday": 170,
        "lookup_dcookie": 18,
        "fanotify_init": 262,
        "quotactl": 60,
        "quotactl_fd": 443,
        "io_uring_setup": 425,
        "io_uring_enter": 426,
        "io_uring_register": 427,
    },
}
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}  # both little-endian
X32_SYSCALL_BIT = 0x40000000  # x86_64's x32 ABI: the same AUDIT_ARCH, numbers with this bit

# Classic BPF (linux/filter.h, linux/seccomp.h).
BPF_LD_W_ABS = 0x00 | 0x00 | 0x20
BPF_JMP_JEQ_K = 0x05 | 0x10 | 0x00
BPF_JMP_JGE_K = 0x05 | 0x30 | 0x00
BPF_RET_K = 0x06 | 0x00
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000
EPERM = 1
# Offsets in struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6].
# ioctl's request is an unsigned int (the kernel drops the upper half of the register), so the
# filter compares the low 32 bits of args[1], which sit first on a little-endian machine.
NR, ARCH, ARG1_LOW = 0, 4, 24


class Unsupported(Exception):
    """No system call table for this machine."""


def machine():
    """The machine's name in NUMBERS, or Unsupported."""
    name = {"amd64": "x86_64", "arm64": "aarch64"}.get(platform.machine(), platform.machine())
    if name not in NUMBERS or sys.byteorder != "little":
        raise Unsupported(f"no seccomp filter for {platform.machine()} (x86_64 and aarch64 only)")
    return name


def program(arch=None):
    """The filter for arch (default: this machine) as bytes of struct sock_filter."""
    arch = arch or machine()
    numbers = NUMBERS[arch]
    denied = sorted({numbers[name] for name in DENIED if name in numbers})
    code = [
        (BPF_LD_W_ABS, 0, 0, ARCH),
        (BPF_JMP_JEQ_K, 1, 0, AUDIT_ARCH[arch]),
        (BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        (BPF_LD_W_ABS, 0, 0, NR),
    ]
    if arch == "x86_64":
        code += [
            (BPF_JMP_JGE_K, 0, 1, X32_SYSCALL_BIT),
            (BPF_RET_K, 0, 0, SECCOMP_RET_KILL_PROCESS),
        ]
    # Each denied number jumps to the EPERM return at the end: past the rest of the list and the
    # five instructions of the ioctl test.
    for i, nr in enumerate(denied):
        code.append((BPF_JMP_JEQ_K, len(denied) - i - 1 + 4, 0, nr))
    code += [
        (BPF_JMP_JEQ_K, 0, 2, numbers["ioctl"]),
        (BPF_LD_W_ABS, 0, 0, ARG1_LOW),
        (BPF_JMP_JEQ_K, 1, 0, TIOCSTI),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
    ]
    return b"".join(struct.pack("=HBBI", *insn) for insn in code)


def main(argv):
    if not argv:
        sys.exit("usage: seccomp.py BWRAP ARGS...")
    read, write = os.pipe()
    os.write(write, program())  # a few hundred bytes: the pipe's buffer holds them all
    os.close(write)
    os.set_inheritable(read, True)
    os.execv(argv[0], [argv[0], "--seccomp", str(read)] + argv[1:])


if __name__ == "__main__":
    main(sys.argv[1:])
