#!/usr/bin/env python3
"""sandbox.py — least privilege for every process that contains student code (docs/design §5a).

    python3 -m grader.isolation.sandbox check [--tree DIR]           # what would apply on this machine
    python3 -m grader.isolation.sandbox run [--tree DIR] [--hidden P] [--writable P] [--env K=V] -- CMD...

Two backends, chosen by who runs the grader: root, or an ordinary user (bubblewrap);
`description` names the one that applies and what it holds.

When the grader runs as root (Gradescope, a Slurm node, the GPU machine, CI), a student-linked
process is started through a chain of util-linux and coreutils programs, each of which starts
the next without closing anything, so file descriptors the caller hands down (the kernel-test
checker's pipes on fds 3 and 4) reach the student's process untouched:

  unshare --net --mount --pid --ipc --fork --kill-child --mount-proc
          new namespaces: no network (only a loopback that is down), its own process ids, its
          own mounts and System V IPC. Killing unshare kills everything inside;
  sh -c   pid 1 inside, root: it stays and waits for the student's process, and when that
          exits, so does the namespace: the kernel kills every descendant, so no daemonised
          grandchild outlives the run (a death by signal N is exit status 128 + N). Before
          that it mounts: the tree bind-mounted onto itself read-only, as is /; writable paths
          stay writable; a private tmpfs on /tmp, /var/tmp and /dev/shm; `hidden` paths covered
          (a directory by an empty unreadable tmpfs, a file by /dev/null); every cuBLAS, cuDNN
          and CUTLASS library file found in the library folders covered by /dev/null, so even
          loading one by hand finds an empty file. It joins a cgroup v2 with memory.max when
          one can be made (else the description says "memory not limited (why)");
  prlimit CPU seconds, processes (RLIMIT_NPROC counts every process of the uid: the cgroup's
          pids.max instead when there is one, so that grades side by side share no limit),
          file size, open files, no core dumps. Not RLIMIT_AS: CUDA reserves huge virtual ranges;
  setsid  a session of its own: no controlling terminal (a grader started from a root shell
          would otherwise hand its terminal down, and TIOCSTI types into it);
  setpriv uid/gid 65534 ("nobody"), no supplementary groups, no capabilities, no_new_privs;
  env -i  an empty environment plus PATH, LD_LIBRARY_PATH, CUDA_VISIBLE_DEVICES (when set),
          HOME=TMPDIR=/tmp and the variables the caller names;
  CMD     with /dev/nvidia* as they are (they must be world read-write, as the driver makes them).

Paths the sandbox user must reach: a kept path (the tree, a writable path) inside a folder it
cannot enter (a mkdtemp folder, /root with mode 700) is carried onto a fresh tmpfs that covers
that folder, so it is reachable and the folder's other contents are not; the files themselves
must be readable by any user (make_pristine_tree makes the tree so): `unreadable()` lists those
that are not.

As an ordinary user (a university cluster, the Gradescope bridge host) the chain is
[systemd-run --user --scope] prlimit python3 seccomp.py bwrap setsid sh env CMD:

  systemd-run  MemoryMax (and no swap) in a user scope, when this user's systemd can make one
          with the memory controller delegated (else "memory not limited (why)");
  prlimit the same limits, each lowered to the user's own hard limit (it may not raise them);
  seccomp.py  the seccomp filter on a pipe for bwrap --seccomp (ptrace, mount, unshare, keyctl,
          bpf, perf_event_open, ... and ioctl(TIOCSTI) return EPERM: seccomp.DENIED);
  bwrap   new user, pid, IPC, network, UTS and cgroup namespaces (a loopback of its own, no
          other interface), no further user namespaces, --die-with-parent, no_new_privs;
          / read-only with a fresh
          /proc and a minimal /dev plus the /dev/nvidia* nodes, the tree read-only, writable
          paths writable, a private tmpfs on /tmp, /var/tmp and /dev/shm, and one on the user's
          home and runtime folders (/run/user/UID: the user's D-Bus would start anything
          outside) with the kept paths inside them bound back; `hidden` paths and vendor
          library files covered as above; an empty environment plus the same variables;
  setsid  no controlling terminal to push input into (and the filter refuses TIOCSTI);
  sh -c   pid 1 inside, as above: its exit ends every descendant;
  env     where a caller's NAME=VALUE words go, then CMD. The caller's descriptors reach CMD
          untouched: the filter's pipe takes the lowest free number and bwrap closes it.

The student's process runs as the grader's own uid (an ordinary user cannot map another), so it
reads whatever that user may read outside the covered folders, and keeps its supplementary
groups (`warnings` names them). Without root and without bubblewrap or user namespaces, or with
enabled="off", nothing of this applies, commands run as before, and `description` says why.
"""

import argparse
import glob
import itertools
import json
import os
import pwd
import re
import resource
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import tempfile

from grader.isolation import seccomp

# Defaults of the rubric's [sandbox] limits.
DEFAULT_LIMITS = {
    "cpu_seconds": 900,  # RLIMIT_CPU of each process (wall time is the caller's)
    "processes": 512,  # RLIMIT_NPROC: tasks, threads too, of the uid system-wide
    "file_bytes": 1 << 30,  # RLIMIT_FSIZE: largest file a process may write
    "open_files": 4096,  # RLIMIT_NOFILE
    "memory_bytes": 16 << 30,  # cgroup v2 memory.max (tmpfs pages count too)
    "tmp_bytes": 1 << 30,  # size of each private tmpfs (/tmp, /var/tmp, /dev/shm)
}
# Vendor libraries no student process may load (libcublas* covers libcublasLt too), and where
# they are looked for; LD_LIBRARY_PATH's folders are added, since the sandbox passes it on.
VENDOR_LIBRARIES = ("libcublas*", "libcudnn*", "libcutlass*")
LIBRARY_DIRS = (
    "/usr/local/cuda*/lib64",
    "/usr/local/cuda*/targets/*/lib",
    "/usr/lib/*-linux-gnu",
    "/usr/lib64",
    "/usr/local/lib",
    "/usr/lib/python3/dist-packages/nvidia/*/lib",
    "/usr/local/lib/python3*/dist-packages/nvidia/*/lib",
)
# Private in the sandbox; /tmp last, because the staging folder of these mounts lives there.
PRIVATE_DIRS = ("/var/tmp", "/dev/shm", "/tmp")
# Passed on from the grader's environment when set.
PASSED_ENV = ("PATH", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES")
TOOLS = ("unshare", "mount", "mkdir", "prlimit", "setsid", "setpriv", "env", "sh")
# The unprivileged backend's programs; bwrap 0.8 brought --disable-userns and --size.
BWRAP_TOOLS = ("bwrap", "prlimit", "setsid", "env", "sh")
BWRAP_VERSION = (0, 8)
SECCOMP_LAUNCHER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seccomp.py")
# Variables systemd-run --user finds the user's bus by (the unprivileged memory limit).
BUS_ENV = ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS")
# Kernel settings that refuse unprivileged user namespaces: (file, refusing value, the fix).
USERNS_SETTINGS = (
    (
        "/proc/sys/kernel/unprivileged_userns_clone",
        "0",
        "sysctl kernel.unprivileged_userns_clone=1",
    ),
    (
        "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
        "1",
        "an AppArmor profile that allows bwrap userns (Ubuntu 24.04), or "
        "sysctl kernel.apparmor_restrict_unprivileged_userns=0",
    ),
    ("/proc/sys/user/max_user_namespaces", "0", "sysctl user.max_user_namespaces=16384"),
)
# The variable through which grade.py hands prefix_json() to a trusted program (the kernel-test
# checker) that spawns student code itself.
PREFIX_ENV = "GLMASR_SANDBOX_PREFIX"

_cgroup_ids = itertools.count()


class SandboxError(Exception):
    """A sandbox that was required but cannot be had, or bad arguments; one line."""


def settings_from(table):
    """Keyword arguments for Sandbox from the rubric's [sandbox] table (every key optional)."""
    known = {"enabled", "uid", "gid", *DEFAULT_LIMITS}
    unknown = sorted(set(table) - known)
    if unknown:
        raise SandboxError(f"rubric [sandbox] has unknown keys: {', '.join(unknown)}")
    settings = {k: table[k] for k in ("enabled", "uid", "gid") if k in table}
    settings["limits"] = {k: table[k] for k in DEFAULT_LIMITS if k in table}
    return settings


def _human(n):
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


def _may(st, uid, gid, bits):
    """Whether uid/gid may access a file of stat st for bits (4 read, 2 write, 1 search/exec)."""
    shift = 6 if st.st_uid == uid else 3 if st.st_gid == gid else 0
    return (st.st_mode >> shift) & bits == bits


def _inside(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _cgroup2_mount():
    """Where cgroup v2 is mounted, or None."""
    with open("/proc/self/mountinfo") as f:
        return next(
            (line.split()[4] for line in f if line.split(" - ")[1].startswith("cgroup2 ")), None
        )


def _last_line(completed):
    lines = (completed.stderr + completed.stdout).strip().splitlines()
    return lines[-1] if lines else f"exit status {completed.returncode}"


class Sandbox:
    """The wrapper for student-linked processes on this machine (see the module's comment).

    tree      the tree graded (read-only inside); also the default working directory
    hidden    paths made unreadable inside (instructor-only files: private clips, reference/)
    writable  directories the student process may write (as root handed to uid: chown)
    concealed folders shown empty inside except for the kept paths in them (the tree, writable
              and visible paths): the instructor's checkout, whose work trees are inside it
    visible   directories shown read-only although inside a concealed folder (a Python track's
              compiler environment)
    env       variables set inside, on top of PASSED_ENV and HOME=TMPDIR=/tmp
    limits    overrides of DEFAULT_LIMITS
    enabled   "auto" (sandbox when possible), "off", or "required" (SandboxError if impossible)
    uid, gid  the student's identity as root; an ordinary user's sandbox runs as that user
    """

    def __init__(
        self,
        tree,
        hidden=(),
        writable=(),
        concealed=(),
        visible=(),
        env=None,
        limits=None,
        enabled="auto",
        uid=65534,
        gid=65534,
        lib_dirs=None,
        vendor_libraries=VENDOR_LIBRARIES,
    ):
        if enabled not in ("auto", "off", "required"):
            raise SandboxError(f"sandbox enabled must be auto, off or required, not {enabled!r}")
        unknown = sorted(set(limits or {}) - set(DEFAULT_LIMITS))
        if unknown:
            raise SandboxError(f"unknown sandbox limits: {', '.join(unknown)}")
        self.tree = os.path.realpath(tree)
        self.hidden = [os.path.realpath(p) for p in hidden]
        self.writable = [os.path.realpath(p) for p in writable]
        self.visible = [os.path.realpath(p) for p in visible]
        self.concealed = [
            c
            for c in (os.path.realpath(p) for p in concealed)
            if os.path.isdir(c) and not _inside(c, self.tree)  # a folder above the tree, or apart
        ]
        self.env = dict(env or {})
        self.limits = dict(DEFAULT_LIMITS, **(limits or {}))
        self.uid, self.gid = uid, gid
        for path in [self.tree] + self.writable + self.visible:
            if not os.path.isdir(path):
                raise SandboxError(f"{path}: not a directory")
            if path == "/" or any(_inside(d, path) for d in PRIVATE_DIRS):
                raise SandboxError(
                    f"{path}: the tree or a writable path may not contain {', '.join(PRIVATE_DIRS)}"
                )
        if any("=" in k or not k for k in self.env):
            raise SandboxError("sandbox variable names may not be empty or contain '='")
        self.active = False
        self.memory = "memory not limited"
        self.warnings = []  # problems that do not stop the sandbox, one line each
        self._prefix, self._stage, self._cgroup, self._libraries = [], None, None, []
        self._backend = "root" if os.geteuid() == 0 else "bubblewrap"
        self._pids_limited = False  # the root backend's cgroup holds the process limit
        lib_dirs = (
            LIBRARY_DIRS + tuple(filter(None, os.environ.get("LD_LIBRARY_PATH", "").split(":")))
            if lib_dirs is None
            else lib_dirs
        )
        try:
            reason = self._start(enabled, lib_dirs, vendor_libraries)
        except OSError as e:
            reason = f"sandbox setup failed: {e}"
        if reason is None:
            self.active = True
            self.description = self._describe()
        else:
            self.close()
            if enabled == "required":
                raise SandboxError(f"a sandbox is required but {reason}")
            self.description = f"unsandboxed local grade ({reason})"

    # ------------------------------------------------------------------------- setting up

    def _start(self, enabled, lib_dirs, vendor_libraries):
        """Build the command prefix and try it once; None when it works, else why not."""
        if enabled == "off":
            return "sandbox switched off"
        if self._backend == "bubblewrap":
            return self._start_bwrap(lib_dirs, vendor_libraries)
        tools = {name: shutil.which(name) for name in TOOLS}
        missing = [name for name, path in tools.items() if path is None]
        if missing:
            return f"{', '.join(missing)} not found (util-linux, coreutils)"
        self._libraries = self._vendor_files(lib_dirs, vendor_libraries)
        self._stage = tempfile.mkdtemp(prefix="glmasr-sandbox-", dir="/tmp")
        self._cgroup, self.memory = self._memory_cgroup()
        covers = self._covers()
        for i in range(len(covers)):
            os.mkdir(os.path.join(self._stage, str(i)))
        for path in self.writable:
            os.chown(path, self.uid, self.gid)
        self._check_devices()
        script = self._script(tools, covers)
        self._prefix = [
            tools["unshare"],
            "--net",
            "--mount",
            "--pid",
            "--ipc",
            "--fork",
            "--kill-child",
            "--mount-proc",
            "--",
            tools["sh"],
            "-c",
            script,
            "sh",
            *[f"{k}={v}" for k, v in self._inner_env().items()],
        ]
        return self._probe()

    def _start_bwrap(self, lib_dirs, vendor_libraries):
        """The unprivileged backend's prefix (see the module's comment), tried once."""
        tools = {name: shutil.which(name) for name in BWRAP_TOOLS}
        if tools["bwrap"] is None:
            return (
                "not root, and bwrap not found: install bubblewrap (apt-get install bubblewrap; "
                "tools/setup.sh --instructor), or grade as root"
            )
        missing = [name for name, path in tools.items() if path is None]
        if missing:
            return f"not root, and {', '.join(missing)} not found (util-linux, coreutils)"
        said = subprocess.run(
            [tools["bwrap"], "--version"], capture_output=True, text=True, timeout=30
        ).stdout
        found = re.search(r"(\d+)\.(\d+)", said)
        if not found or tuple(map(int, found.groups())) < BWRAP_VERSION:
            return (
                f"not root, and {said.strip() or 'bwrap of unknown version'} is too old "
                f"({'.'.join(map(str, BWRAP_VERSION))} or newer: --disable-userns, --size)"
            )
        try:
            seccomp.machine()
        except seccomp.Unsupported as e:
            return f"not root, and {e}"
        self.uid, self.gid = os.getuid(), os.getgid()
        self._libraries = self._vendor_files(lib_dirs, vendor_libraries)
        self._check_devices()
        groups = sorted(set(os.getgroups()) - {self.gid})
        if groups:
            self.warnings.append(
                f"the student's processes keep this user's groups ({', '.join(map(str, groups))}):"
                " an ordinary user cannot drop them; grade as a user in no other group"
            )
        scope, self.memory = self._memory_scope(tools["sh"])
        self._prefix = [
            *scope,
            tools["prlimit"],
            *self._prlimit_options(lower=True),
            "--",
            sys.executable,
            "-I",
            "-S",
            SECCOMP_LAUNCHER,
            tools["bwrap"],
            *self._bwrap_options(),
            "--",
            # Not a group leader inside (its group is bwrap's), so setsid does not fork and sh
            # stays pid 1; -w all the same, should it fork.
            tools["setsid"],
            "-w",
            tools["sh"],
            "-c",
            # pid 1 waits for the command (`exit` after it: the shell does not exec it) and
            # leaves with its status, 128 + N for a death by signal N; its exit ends the rest.
            # env drops the PWD bwrap sets: the environment is exactly the root backend's.
            f'{shlex.quote(tools["env"])} -u PWD "$@"; exit $?',
            "sh",
        ]
        failure = self._probe()
        if failure is None:
            return None
        fixes = []
        for path, refusing, fix in USERNS_SETTINGS:
            try:
                with open(path) as f:
                    if f.read().strip() == refusing:
                        fixes.append(f"{path} is {refusing}: {fix}")
            except OSError:
                pass
        if fixes:
            return (
                f"not root, and bwrap cannot make a user namespace ({failure}): {'; '.join(fixes)}"
            )
        if re.search(r"namespace|uid map|setgroups|Operation not permitted", failure):
            return (
                f"not root, and bwrap cannot make a user namespace ({failure}): unprivileged "
                "user namespaces are refused here (a kernel setting, a container's seccomp "
                "profile); allow them, or grade as root"
            )
        return f"not root, and bwrap failed: {failure}"

    def _probe(self):
        """Run `true` through the prefix: None when it works, else the last line it said."""
        try:
            probe = subprocess.run(
                self._prefix + ["true"],
                env=self._outer_env(),
                capture_output=True,
                text=True,
                errors="replace",
                timeout=60,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"sandbox probe failed: {e}"
        return None if probe.returncode == 0 else _last_line(probe)

    @staticmethod
    def _vendor_files(lib_dirs, vendor_libraries):
        return sorted(
            {
                os.path.realpath(f)
                for d in lib_dirs
                for pattern in vendor_libraries
                for f in glob.glob(os.path.join(d, pattern))
                if os.path.isfile(f)
            }
        )

    def _inner_env(self):
        """The student process's environment, less what a caller appends."""
        return {
            **{k: os.environ[k] for k in PASSED_ENV if k in os.environ},
            "HOME": "/tmp",
            "TMPDIR": "/tmp",
            **self.env,
        }

    def _prlimit_options(self, lower=False):
        """prlimit's options for the limits. lower: each lowered to this process's hard limit,
        which an ordinary user may not raise (self.limits then holds what applies)."""
        rows = (
            ("cpu", resource.RLIMIT_CPU, "cpu_seconds", 1),  # SIGXCPU, then SIGKILL a second on
            ("nproc", resource.RLIMIT_NPROC, "processes", 0),
            ("fsize", resource.RLIMIT_FSIZE, "file_bytes", 0),
            ("nofile", resource.RLIMIT_NOFILE, "open_files", 0),
        )
        options = []
        for name, which, key, grace in rows:
            if name == "nproc" and self._pids_limited:
                continue
            soft, hard = self.limits[key], self.limits[key] + grace
            cap = resource.getrlimit(which)[1]
            if lower and cap != resource.RLIM_INFINITY:
                soft, hard = min(soft, cap), min(hard, cap)
                self.limits[key] = soft
            options.append(f"--{name}={soft}:{hard}" if grace else f"--{name}={soft}")
        return options + ["--core=0"]

    def _memory_cgroup(self):
        """A new cgroup v2 with memory.max, or None; and the words for the description."""
        limit = self.limits["memory_bytes"]
        mount = _cgroup2_mount()
        if mount is None:
            return None, "memory not limited (no cgroup v2)"
        path = None
        try:
            with open(os.path.join(mount, "cgroup.controllers")) as f:
                available = f.read().split()
            if "memory" not in available:
                return None, "memory not limited (cgroup v2 has no memory controller here)"
            with open(os.path.join(mount, "cgroup.subtree_control")) as f:
                enabled = f.read().split()
            if "memory" not in enabled:
                with open(os.path.join(mount, "cgroup.subtree_control"), "w") as f:
                    f.write("+memory")
            if "pids" in available and "pids" not in enabled:
                try:  # optional: without it RLIMIT_NPROC stays the process limit
                    with open(os.path.join(mount, "cgroup.subtree_control"), "w") as f:
                        f.write("+pids")
                except OSError:
                    pass
            path = os.path.join(mount, f"glmasr-sandbox-{os.getpid()}-{next(_cgroup_ids)}")
            os.mkdir(path)
            for name, value in (
                ("memory.max", limit),
                ("memory.swap.max", 0),
                ("memory.oom.group", 1),
                # The process limit of this sandbox alone: RLIMIT_NPROC would count every
                # process of uid 65534, so one grade could take another's (then not set).
                ("pids.max", self.limits["processes"]),
            ):
                if name == "memory.max" or os.path.exists(os.path.join(path, name)):
                    with open(os.path.join(path, name), "w") as f:
                        f.write(str(value))
            pids = os.path.join(path, "pids.max")  # absent without the pids controller
            if os.path.exists(pids):
                with open(pids) as f:
                    self._pids_limited = f.read().strip() == str(self.limits["processes"])
        except OSError as e:
            if path and os.path.isdir(path):
                os.rmdir(path)
            return None, f"memory not limited (no writable cgroup v2: {e.strerror})"
        return path, f"memory {_human(limit)} (cgroup v2)"

    def _memory_scope(self, sh):
        """The unprivileged memory limit: systemd-run's words that start the rest in a user
        scope with MemoryMax, when this user's systemd makes one whose memory.max holds (the
        memory controller delegated), else []; and the words for the description."""
        limit = self.limits["memory_bytes"]
        run, mount = shutil.which("systemd-run"), _cgroup2_mount()
        if run is None or mount is None:
            return [], f"memory not limited (no {'systemd-run' if mount else 'cgroup v2'})"
        scope = [run, "--user", "--scope", "--quiet", "--collect"]
        scope += ["-p", f"MemoryMax={limit}", "-p", "MemorySwapMax=0", "--"]
        read_max = (
            f'read -r line < /proc/self/cgroup; cat {shlex.quote(mount)}"${{line#0::}}/memory.max"'
        )
        try:
            probe = subprocess.run(
                scope + [sh, "-c", read_max],
                env=self._outer_env(),
                capture_output=True,
                text=True,
                errors="replace",
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            return [], f"memory not limited (systemd-run --user: {e})"
        if probe.returncode != 0:
            return [], f"memory not limited (systemd-run --user: {_last_line(probe)})"
        if probe.stdout.strip() != str(limit):
            return [], "memory not limited (this user's systemd has no memory controller delegated)"
        return scope, f"memory {_human(limit)} (systemd user scope)"

    def _bwrap_options(self):
        """bwrap's options: namespaces, then mounts in order (each on top of those before it:
        / read-only, the tmpfs covers, the kept paths outermost first, hidden paths and vendor
        libraries last), then the environment."""
        options = ["--unshare-user", "--unshare-ipc", "--unshare-pid", "--unshare-net"]
        options += ["--unshare-uts"]
        if os.path.exists("/proc/self/ns/cgroup"):
            options.append("--unshare-cgroup")
        options += ["--disable-userns", "--die-with-parent", "--as-pid-1"]
        options += ["--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev"]
        for device in sorted(glob.glob("/dev/nvidia*")):
            options += ["--dev-bind-try", device, device]
        kept = sorted(
            [(self.tree, "--ro-bind")]
            + [(p, "--bind") for p in self.writable]
            + [(p, "--ro-bind") for p in self.visible],
            key=lambda k: k[0].count("/"),
        )
        own = {os.path.expanduser("~"), f"/run/user/{self.uid}", os.environ.get("XDG_RUNTIME_DIR")}
        try:
            own.add(pwd.getpwuid(self.uid).pw_dir)
        except KeyError:
            pass  # a uid without a passwd entry (a container): $HOME alone
        own = {os.path.realpath(p) for p in own if p} | set(self.concealed)
        covers = [
            (d, 0o755, 1 << 20)
            for d in own
            if d != "/" and os.path.isdir(d) and not any(_inside(d, k) for k, _ in kept)
        ]
        covers += [
            (d, 0o1777, self.limits["tmp_bytes"])
            for d in PRIVATE_DIRS
            if os.path.isdir(d) and not os.path.islink(d)
        ]
        for folder, mode, size in sorted(covers, key=lambda c: c[0].count("/")):
            options += ["--size", str(size), "--perms", f"{mode:04o}", "--tmpfs", folder]
        for path, bind in kept:
            options += [bind, path, path]
        # A folder: an empty, unreadable, read-only tmpfs. A file, and each vendor library:
        # /dev/null with device access (bwrap's other binds are nodev: opening would fail
        # rather than read nothing).
        for path in self.hidden:
            if os.path.isdir(path):
                options += ["--size", "4096", "--perms", "0000", "--tmpfs", path]
                options += ["--remount-ro", path]
            elif os.path.exists(path):
                options += ["--dev-bind", "/dev/null", path]
        for path in self._libraries:
            options += ["--dev-bind", "/dev/null", path]
        options.append("--clearenv")
        for name, value in self._inner_env().items():
            options += ["--setenv", name, value]
        return options

    def _covers(self):
        """The folders covered by a fresh tmpfs: (folder, mode, size, kept paths inside it).

        The private folders, and every folder the sandbox user cannot enter on the way to a
        kept path (outside the private folders); the kept paths (tree and writable ones, the
        outermost only) are carried onto the tmpfs at the same place."""
        every = [self.tree] + self.writable + self.visible
        kept = [p for p in every if not any(q != p and _inside(p, q) for q in every)]
        blocked = []
        for path in kept:
            if any(_inside(path, d) for d in PRIVATE_DIRS):
                continue
            parts = path.strip("/").split("/")
            for i in range(1, len(parts)):
                folder = "/" + "/".join(parts[:i])
                if not _may(os.stat(folder), self.uid, self.gid, 1):
                    if not any(_inside(folder, b) for b in blocked):
                        blocked.append(folder)
                    break
        for folder in self.concealed:
            if not any(_inside(folder, b) for b in blocked):
                blocked = [b for b in blocked if not _inside(b, folder)] + [folder]
        covers = [(b, 0o755, 1 << 20, [k for k in kept if _inside(k, b)]) for b in blocked]
        covers += [
            (d, 0o1777, self.limits["tmp_bytes"], [k for k in kept if _inside(k, d)])
            for d in PRIVATE_DIRS
            if os.path.isdir(d) and not os.path.islink(d)
        ]
        return covers

    def _check_devices(self):
        for device in sorted(glob.glob("/dev/nvidia*")):
            st = os.stat(device)
            if stat.S_ISCHR(st.st_mode) and not _may(st, self.uid, self.gid, 6):
                self.warnings.append(
                    f"{device} is not read-write for uid {self.uid} "
                    f"(mode {stat.S_IMODE(st.st_mode):04o}): CUDA will fail"
                )

    def _script(self, tools, covers):
        """The root part inside the namespaces: mounts, cgroup, then exec the unprivileged
        rest. `set -e`: a mount that fails stops the run before any student code starts."""
        q, mount = shlex.quote, shlex.quote(tools["mount"])
        lines = ["set -e"]
        if self._cgroup:
            lines.append(f"echo 0 > {q(os.path.join(self._cgroup, 'cgroup.procs'))}")
        for path in self.writable + self.visible + [self.tree]:
            lines.append(f"{mount} --rbind {q(path)} {q(path)}")
        for i, (folder, mode, size, kept) in enumerate(covers):
            stage = os.path.join(self._stage, str(i))
            lines.append(
                f"{mount} -t tmpfs -o mode={mode:o},size={size},nosuid,nodev tmpfs {q(stage)}"
            )
            for path in kept:
                inner = os.path.join(stage, os.path.relpath(path, folder))
                lines.append(f"{q(tools['mkdir'])} -p {q(inner)}")
                lines.append(f"{mount} --rbind {q(path)} {q(inner)}")
            lines.append(f"{mount} --move {q(stage)} {q(folder)}")
        lines.append(f"{mount} -o remount,bind,ro /")
        for path in [self.tree] + self.visible:
            lines.append(f"{mount} -o remount,bind,ro,nosuid,nodev {q(path)}")
        for path in self.hidden:
            lines.append(
                f"if [ -d {q(path)} ]; then {mount} -t tmpfs -o ro,mode=0,size=4k tmpfs "
                f"{q(path)}; elif [ -e {q(path)} ]; then {mount} --bind /dev/null "
                f"{q(path)}; fi"
            )
        for path in self._libraries:
            lines.append(f"if [ -e {q(path)} ]; then {mount} --bind /dev/null {q(path)}; fi")
        # The working directory still points at the old mounts: enter it again by name.
        lines.append('cd -- "$(pwd -P)" 2>/dev/null || cd /')
        # This shell stays pid 1 and waits: the student's process then gets the usual signal
        # semantics (pid 1 ignores SIGXCPU, SIGXFSZ, SIGTERM), its exit ends the namespace
        # and every descendant, and a death by signal N leaves with 128 + N, as in any shell.
        lines.append("set +e")
        lines.append(
            f"{q(tools['prlimit'])} {' '.join(self._prlimit_options())} -- {q(tools['setsid'])} "
            f"{q(tools['setpriv'])} "
            f"--reuid={self.uid} --regid={self.gid} --clear-groups --inh-caps=-all "
            f'--bounding-set=-all --no-new-privs -- {q(tools["env"])} -i "$@"'
        )
        lines.append("exit $?")
        return "\n".join(lines)

    def _describe(self):
        l = self.limits
        if self._backend == "bubblewrap":
            namespaces = "user+pid+mount+ipc+net+uts" + (
                "+cgroup" if os.path.exists("/proc/self/ns/cgroup") else ""
            )
            table = seccomp.NUMBERS[seccomp.machine()]
            refused = sum(name in table for name in seccomp.DENIED) + 1  # and ioctl(TIOCSTI)
            head = (
                f"sandboxed (bubblewrap, unprivileged): uid {self.uid} in a user namespace, "
                f"no network, {namespaces} namespaces, seccomp ({refused} system calls "
                f"refused), read-only tree and /, private /tmp and home"
            )
        else:
            head = (
                f"sandboxed: uid {self.uid}, no network, pid+mount+ipc namespaces, "
                f"read-only tree and /, private /tmp"
            )
        parts = [
            head,
            f"{len(self.writable)} writable, {len(self.hidden)} hidden paths, "
            f"{len(self.concealed)} concealed folders",
            f"{len(self._libraries)} vendor library files covered",
            f"limits: CPU {l['cpu_seconds']} s, {l['processes']} processes"
            + (" (cgroup pids.max)" if self._pids_limited else "")
            + ", files "
            f"{_human(l['file_bytes'])}, {l['open_files']} open files, no core dumps",
            self.memory,
        ]
        return "; ".join(parts)

    # ------------------------------------------------------------------------- using it

    def _outer_env(self):
        """The environment of the chain's outer part (absolute tool paths: it needs no PATH of
        the grader's); unprivileged, systemd-run finds the user's bus through BUS_ENV."""
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"}
        if self._backend == "bubblewrap":
            env.update({k: os.environ[k] for k in BUS_ENV if k in os.environ})
        return env

    def prefix(self):
        """The command line to put before a student program's argv ([] when not active).
        `env` ends it (as root `env -i NAME=VALUE...`), so a caller may append more NAME=VALUE
        before argv."""
        return list(self._prefix)

    def prefix_json(self):
        """prefix() for a program in another language (see PREFIX_ENV)."""
        return json.dumps(self.prefix())

    def handoff(self):
        """What a trusted program that starts student code itself needs to start it here:
        {"prefix": prefix(), "env": the environment to run the prefix with} (JSON-ready;
        aot/triton_aot.py takes it from GLMASR_AOT_SANDBOX)."""
        return {"prefix": self.prefix(), "env": self._outer_env()}

    def wrap(self, argv, env=None):
        """(argv, env) to start argv sandboxed with the extra variables env. Not active: argv as
        it is, with the grader's environment plus self.env and env (a local grade, as before)."""
        env = dict(env or {})
        if not self.active:
            return list(argv), {**os.environ, **self.env, **env}
        if not argv or "=" in argv[0]:
            raise SandboxError(f"cannot sandbox the command {argv!r}")
        return self.prefix() + [f"{k}={v}" for k, v in env.items()] + list(argv), self._outer_env()

    def run(self, argv, timeout, env=None, cwd=None, pass_fds=(), input=None):
        """Run argv sandboxed; never raises for crashes or time-outs. Returns (returncode,
        stdout + stderr, timed_out) like grade.py's run(); returncode is None on a time-out and
        -N when signal N killed the process (sandboxed: exit status 128 + N of the pid 1 shell).
        cwd defaults to the tree."""
        argv, full_env = self.wrap(argv, env)
        with subprocess.Popen(
            argv,
            cwd=cwd or self.tree,
            env=full_env,
            pass_fds=pass_fds,
            stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        ) as p:
            try:
                out, err = p.communicate(
                    input.encode() if isinstance(input, str) else input, timeout=timeout
                )
                timed_out = False
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(p.pid, signal.SIGKILL)  # the wrapper's death kills the namespace
                except ProcessLookupError:
                    pass
                try:
                    out, err = p.communicate(timeout=10)
                except subprocess.TimeoutExpired:  # unsandboxed: a descendant holds the pipes
                    out, err = b"", b""
                timed_out = True
        output = (out + err).decode(errors="replace")
        code = p.returncode
        if self.active and code > 128:
            code = 128 - code
        return (None if timed_out else code), output, timed_out

    def unreadable(self, paths, limit=20):
        """Lines naming what the sandbox user could not read among paths (folders: all they
        hold): a file without read permission, a folder it cannot list or enter, an executable
        it cannot run. At most `limit` lines."""
        if not self.active:
            return []
        problems = []
        for top in paths:
            for path in [top] + [os.path.join(h, n) for h, ds, fs in os.walk(top) for n in ds + fs]:
                st = os.lstat(path)
                need = (
                    5
                    if stat.S_ISDIR(st.st_mode)
                    else (5 if st.st_mode & 0o100 else 4)
                    if stat.S_ISREG(st.st_mode)
                    else 0
                )
                if need and not _may(st, self.uid, self.gid, need):
                    problems.append(
                        f"{path}: not {'readable' if need == 4 else 'usable'} by "
                        f"uid {self.uid} (mode {stat.S_IMODE(st.st_mode):04o})"
                    )
                    if len(problems) >= limit:
                        return problems
        return problems

    def close(self):
        """Remove the staging folder and the cgroup (the namespaces die with their processes)."""
        if self._stage:
            shutil.rmtree(self._stage, ignore_errors=True)
            self._stage = None
        if self._cgroup:
            try:
                os.rmdir(self._cgroup)
            except OSError:
                pass  # still has processes: the kernel keeps it until they end
            self._cgroup = None
        self._prefix, self.active = [], False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ----------------------------------------------------------------------------- command line


def main():
    from grader import ROOT as root

    parser = argparse.ArgumentParser(description="the grader's sandbox for student code")
    sub = parser.add_subparsers(dest="command", required=True)
    check = sub.add_parser("check", help="print what would apply on this machine")
    run = sub.add_parser("run", help="run a command sandboxed")
    for p in (check, run):
        p.add_argument("--tree", default=root, help="read-only tree (default: this project)")
        p.add_argument("--hidden", action="append", default=[], help="make a path unreadable")
        p.add_argument("--writable", action="append", default=[], help="a writable folder")
        p.add_argument("--required", action="store_true", help="fail when no sandbox is possible")
    run.add_argument("--env", action="append", default=[], help="NAME=VALUE to set inside")
    run.add_argument("cmd", nargs=argparse.REMAINDER, help="-- command and its arguments")
    args = parser.parse_args()
    env = dict(item.split("=", 1) for item in getattr(args, "env", []) if "=" in item)
    try:
        sandbox = Sandbox(
            args.tree,
            hidden=args.hidden,
            writable=args.writable,
            env=env,
            enabled="required" if args.required else "auto",
        )
    except SandboxError as e:
        print(f"sandbox: {e}", file=sys.stderr)
        sys.exit(2)
    with sandbox:
        if args.command == "check":
            print(sandbox.description)
            for line in sandbox.warnings + sandbox.unreadable([sandbox.tree]):
                print("warning:", line)
            return
        cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
        if not cmd:
            print("sandbox: run needs a command after --", file=sys.stderr)
            sys.exit(2)
        print(sandbox.description, file=sys.stderr)
        argv, full_env = sandbox.wrap(cmd)
        code = subprocess.call(argv, env=full_env)
    if code < 0:
        print(f"sandbox: killed by {signal.Signals(-code).name}", file=sys.stderr)
        code = 128 - code
    sys.exit(code)


if __name__ == "__main__":
    main()
