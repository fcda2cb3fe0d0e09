#!/usr/bin/env python3
"""Tests of grader/isolation/sandbox.py: what a student process can and cannot do inside the sandbox.

    python3 -m grader.selftests.python.test_sandbox
    python3 -m unittest discover -s grader/tests_py       (every grader test, from the root)

SandboxTest needs root and a kernel that grants namespaces (CI has both). Unprivileged tests the
bubblewrap backend as an ordinary user (as root: uid 65534 through setpriv), on a copy of the
sandbox's modules; it needs bwrap and unprivileged user namespaces. Where what a class needs is
missing it is skipped with the sandbox's own reason. Each claim is checked from the outside
where it can be (the file left unchanged, the listener that saw no connection, the grandchild
that is gone), and where it matters against a control run without the sandbox. About 10 s.
"""

import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from grader.isolation import sandbox, seccomp

HERE = os.path.dirname(os.path.abspath(__file__))

SANDBOX_UID = 65534
FILE_LIMIT = 1_000_000
# How the unprivileged tests drop root: the ordinary user they run as.
DROP = [f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups"]


def processes_running(marker):
    """Pids whose command line contains marker (bytes)."""
    pids = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker in f.read():
                    pids.append(int(pid))
        except OSError:
            pass
    return pids


def checkout_with_a_work_tree(test, folder=None):
    """A folder like the instructor's checkout (world-readable, outside every private folder, so
    nothing but concealment keeps it from the sandbox user): a solution file, a compiler
    environment and a work tree inside. Returns (checkout, tree, environment)."""
    folder = folder or os.path.realpath(
        os.path.join(os.path.dirname(os.path.dirname(sandbox.__file__)), "..", "grade-out")
    )
    os.makedirs(folder, exist_ok=True)
    checkout = tempfile.mkdtemp(prefix="test-sandbox-checkout-", dir=folder)
    test.addCleanup(shutil.rmtree, checkout, True)
    files = {"reference.cu": "// the solution\n", "work/tree/mine.cu": "// the student's\n"}
    files[".venv/bin/tool"] = "#!/bin/sh\n"
    for rel, text in files.items():
        path = os.path.join(checkout, rel)
        os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    for top, _, names in os.walk(checkout):
        os.chmod(top, 0o755)
        for name in names:
            os.chmod(os.path.join(top, name), 0o644)
    return checkout, os.path.join(checkout, "work/tree"), os.path.join(checkout, ".venv")


CONCEALED_RUN = "ls -A {checkout}; cat mine.cu {environment}/bin/tool {checkout}/reference.cu"


def assert_concealed(test, code, out):
    """What CONCEALED_RUN says in a sandbox concealing the checkout: only the kept paths listed,
    the tree and the compiler environment readable, the solution not (so cat fails)."""
    test.assertNotEqual(code, 0)
    test.assertEqual(out.split()[:2], [".venv", "work"], out)
    test.assertIn("// the student's", out)
    test.assertIn("#!/bin/sh", out)
    test.assertNotIn("the solution", out)


class SandboxTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("the root backend's tests need root")
        # The tree lives in a mkdtemp folder (mode 0700, under /tmp): the sandbox must carry it
        # onto its private /tmp for the unprivileged user to reach it.
        cls.tmp = tempfile.mkdtemp(prefix="test-sandbox-")
        cls.tree = os.path.join(cls.tmp, "tree")
        cls.libs = os.path.join(cls.tree, "lib")
        cls.out = os.path.join(cls.tmp, "out")
        for d in (cls.tree, cls.libs, cls.out, os.path.join(cls.tree, "private")):
            os.makedirs(d)
            os.chmod(d, 0o755)
        files = {
            "tree/source.cu": "// student\n",
            "tree/private/clips.tsv": "secret words\n",
            "tree/seed.txt": "1234\n",
            "tree/lib/libcublas.so.12.4.5": "\x7fELF cublas",
            "tree/lib/libcublasLt.so.12": "\x7fELF cublasLt",
            "tree/lib/libother.so.1": "\x7fELF other",
        }
        for rel, text in files.items():
            with open(os.path.join(cls.tmp, rel), "w") as f:
                f.write(text)
            os.chmod(os.path.join(cls.tmp, rel), 0o644)
        cls.box = sandbox.Sandbox(
            cls.tree,
            hidden=[os.path.join(cls.tree, d) for d in ("private", "seed.txt")],
            writable=[cls.out],
            env={"GLMASR_ALLOWED": "yes"},
            lib_dirs=[cls.libs],
            limits={"cpu_seconds": 1, "file_bytes": FILE_LIMIT},
        )
        if not cls.box.active:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise unittest.SkipTest(cls.box.description)

    @classmethod
    def tearDownClass(cls):
        cls.box.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_in(self, *argv, env=None, timeout=20):
        return self.box.run(list(argv), timeout, env=env)

    def sh(self, script, timeout=20):
        return self.run_in("sh", "-c", script, timeout=timeout)

    def test_description(self):
        self.assertTrue(self.box.description.startswith(f"sandboxed: uid {SANDBOX_UID}"))
        self.assertIn("2 vendor library files covered", self.box.description)
        # Memory is either limited through a cgroup or said not to be; never silently.
        self.assertRegex(self.box.description, r"memory (\d+ \w+ \(cgroup v2\)|not limited \()")

    def test_runs_unprivileged(self):
        code, out, _ = self.sh("id -u; id -g; id -G; grep CapEff /proc/self/status")
        self.assertEqual(code, 0, out)
        lines = out.split()
        self.assertEqual(lines[:3], [str(SANDBOX_UID)] * 3)
        self.assertEqual(lines[-1], "0000000000000000")

    def test_a_concealed_folder_shows_only_the_paths_kept_in_it(self):
        checkout, tree, environment = checkout_with_a_work_tree(self)
        with sandbox.Sandbox(tree, concealed=[checkout], visible=[environment]) as box:
            self.assertIn("1 concealed folders", box.description)
            code, out, _ = box.run(
                ["sh", "-c", CONCEALED_RUN.format(checkout=checkout, environment=environment)], 20
            )
        assert_concealed(self, code, out)

    def test_its_own_sid_and_no_terminal(self):
        # Fields 6 and 7 of /proc/self/stat: the sid (the process itself, made the leader by
        # setsid; exec keeps the pid) and the terminal (0: none).
        code, out, _ = self.run_in(
            "python3",
            "-c",
            "import os; print(os.getsid(0) == os.getpid(), open('/proc/self/stat').read().rsplit(')', 1)[1].split()[4])",
        )
        self.assertEqual(code, 0, out)
        self.assertEqual(out.split(), ["True", "0"])

    def test_empty_environment_plus_allowed(self):
        os.environ["GRADER_SECRET"] = "do not leak"
        try:
            code, out, _ = self.run_in("env", env={"EXTRA": "1"})
        finally:
            del os.environ["GRADER_SECRET"]
        self.assertEqual(code, 0, out)
        seen = dict(line.split("=", 1) for line in out.splitlines())
        expected = {"PATH", "HOME", "TMPDIR", "GLMASR_ALLOWED", "EXTRA"} | {
            k for k in ("LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES") if k in os.environ
        }
        self.assertEqual(set(seen), expected)
        self.assertEqual((seen["HOME"], seen["GLMASR_ALLOWED"]), ("/tmp", "yes"))

    def test_tree_is_read_only(self):
        source = os.path.join(self.tree, "source.cu")
        code, out, _ = self.sh(f"cat {source}; echo cheat > {source}")
        self.assertNotEqual(code, 0)
        self.assertIn("// student", out)
        self.assertRegex(out, "Read-only file system|Permission denied")
        code, out, _ = self.sh(f"touch {self.tree}/report.json")
        self.assertNotEqual(code, 0)
        with open(source) as f:
            self.assertEqual(f.read(), "// student\n")
        self.assertFalse(os.path.exists(os.path.join(self.tree, "report.json")))

    def test_writable_path(self):
        code, out, _ = self.sh(f"echo result > {self.out}/answer.txt")
        self.assertEqual(code, 0, out)
        with open(os.path.join(self.out, "answer.txt")) as f:
            self.assertEqual(f.read(), "result\n")

    def test_no_network(self):
        if shutil.which("bash") is None:
            self.skipTest("bash (for /dev/tcp) not installed")
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            listener.settimeout(0.5)
            connect = ["bash", "-c", f": > /dev/tcp/127.0.0.1/{listener.getsockname()[1]}"]
            code, out, _ = self.run_in(*connect)
            self.assertNotEqual(code, 0, out)
            self.assertRaises(TimeoutError, listener.accept)
            control = sandbox.Sandbox(self.tree, enabled="off")  # the same, unsandboxed
            self.assertEqual(control.run(connect, 20)[0], 0)
            listener.accept()[0].close()

    def test_private_tmp(self):
        with tempfile.NamedTemporaryFile(prefix="outside-", dir="/tmp") as outside:
            marker = os.path.basename(outside.name)
            code, out, _ = self.sh(f"ls -A /tmp; echo inside > /tmp/inside-{marker}")
            self.assertEqual(code, 0, out)
            self.assertNotIn(marker, out)
            self.assertFalse(os.path.exists(f"/tmp/inside-{marker}"))

    def test_hidden_paths(self):
        code, out, _ = self.sh(f"cat {self.tree}/private/clips.tsv; ls {self.tree}/private")
        self.assertNotEqual(code, 0)
        self.assertNotIn("secret", out)
        code, out, _ = self.sh(f"wc -c < {self.tree}/seed.txt")
        self.assertEqual((code, out.strip()), (0, "0"))

    def test_vendor_libraries_read_as_empty(self):
        code, out, _ = self.sh(
            f"cd {self.libs}; wc -c < libcublas.so.12.4.5; "
            "wc -c < libcublasLt.so.12; wc -c < libother.so.1"
        )
        self.assertEqual(code, 0, out)
        self.assertEqual(out.split(), ["0", "0", str(len("\x7fELF other"))])

    def test_cpu_time_limit(self):
        started = time.monotonic()
        code, out, timed_out = self.sh("while :; do :; done", timeout=20)
        self.assertFalse(timed_out, "the busy loop ran until the wall-clock time-out")
        self.assertEqual(code, -signal.SIGXCPU, out)
        self.assertLess(time.monotonic() - started, 10)

    def test_file_size_limit(self):
        code, out, _ = self.sh(
            f"head -c {2 * FILE_LIMIT} /dev/zero > /tmp/big; echo rc=$?; wc -c < /tmp/big"
        )
        status, size = re.search(r"rc=(\d+)\s+(\d+)", out).groups()
        self.assertNotEqual(status, "0", out)
        self.assertEqual(int(size), FILE_LIMIT)

    def test_no_grandchild_survives(self):
        daemon = ["sh", "-c", "sleep 977 >/dev/null 2>&1 & echo started"]
        code, out, _ = self.run_in(*daemon)
        self.assertEqual((code, out.strip()), (0, "started"))
        survivors = processes_running(b"sleep\x00977")
        control = sandbox.Sandbox(self.tree, enabled="off")  # the same, unsandboxed
        self.assertEqual(control.run(daemon, 20)[0], 0)
        orphans = processes_running(b"sleep\x00977")
        for pid in survivors + orphans:
            os.kill(pid, signal.SIGKILL)
        self.assertEqual(survivors, [], "a grandchild outlived the sandboxed run")
        self.assertNotEqual(orphans, [], "the control run should leave its grandchild")

    def test_tree_in_a_folder_the_user_cannot_enter(self):
        home = os.path.expanduser("~")
        if (
            not os.path.isdir(home)
            or home.startswith("/tmp")
            or sandbox._may(os.stat(home), SANDBOX_UID, SANDBOX_UID, 1)
        ):
            self.skipTest(f"no home folder outside /tmp that uid {SANDBOX_UID} cannot enter")
        outer = tempfile.mkdtemp(prefix="test-sandbox-", dir=home)  # mode 0700
        self.addCleanup(shutil.rmtree, outer, ignore_errors=True)
        tree = os.path.join(outer, "tree")
        os.mkdir(tree)
        os.chmod(tree, 0o755)
        with open(os.path.join(tree, "kernel.cu"), "w") as f:
            f.write("// reachable\n")
        os.chmod(os.path.join(tree, "kernel.cu"), 0o644)
        with sandbox.Sandbox(tree) as box:
            code, out, _ = box.run(["sh", "-c", f"cat kernel.cu; ls -A {home}"], 20)
        self.assertEqual(code, 0, out)
        self.assertEqual(out.split(), ["//", "reachable", os.path.basename(outer)])

    def test_inherited_descriptors(self):
        """The kernel-test checker talks to its runner over fds 3 and 4: they must get through.
        A launcher outside the sandbox puts the pipes on 3 and 4 and execs the wrapped command,
        as the checker does."""
        to_test, from_child = os.pipe()
        to_child, from_test = os.pipe()
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (from_child, to_child)]
        argv, env = self.box.wrap(["sh", "-c", 'read line <&4; echo "got $line" >&3'])
        launcher = (
            "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
            "os.execvpe(sys.argv[3], sys.argv[3:], os.environ)"
        )
        child = subprocess.Popen(
            [sys.executable, "-c", launcher, *map(str, high), *argv], env=env, pass_fds=high
        )
        for fd in high + [from_child, to_child]:
            os.close(fd)
        os.write(from_test, b"hello\n")
        os.close(from_test)
        self.assertEqual(child.wait(timeout=20), 0)
        with os.fdopen(to_test, "rb") as f:
            self.assertEqual(f.read(), b"got hello\n")

    def test_prefix_is_json_for_other_programs(self):
        self.assertEqual(json.loads(self.box.prefix_json()), self.box.prefix())
        self.assertEqual(self.box.prefix()[-1].split("=")[0], "GLMASR_ALLOWED")

    def test_unreadable_files_are_reported(self):
        secret = os.path.join(self.tree, "instructor-only.txt")
        with open(secret, "w") as f:
            f.write("x")
        os.chmod(secret, 0o600)
        try:
            problems = self.box.unreadable([self.tree])
        finally:
            os.remove(secret)
        self.assertEqual(len(problems), 1, problems)
        self.assertIn("instructor-only.txt: not readable by uid 65534 (mode 0600)", problems[0])


# Run as the ordinary user by Unprivileged: one Sandbox, every probe through it, one JSON line
# out (one Python start, one sandbox set-up). argv[1]: the spec Unprivileged.setUpClass writes.
DRIVER = r"""
import fcntl, json, os, sys
from grader.isolation import sandbox, seccomp
spec = json.loads(sys.argv[1])
box = sandbox.Sandbox(spec["tree"], hidden=spec["hidden"], writable=spec["writable"],
                      concealed=spec.get("concealed", []), visible=spec.get("visible", []),
                      env={"GLMASR_ALLOWED": "yes"}, lib_dirs=spec["lib_dirs"],
                      limits=spec["limits"])
out = {"description": box.description, "active": box.active}
if box.active and "probe" not in spec:
    out["runs"] = {name: box.run(argv, 20) for name, argv in spec["runs"].items()}
elif box.active:
    numbers = json.dumps(seccomp.NUMBERS[seccomp.machine()])
    syscalls = [sys.executable, "-c", spec["probe"], numbers]
    out["runs"] = {name: box.run(argv, 20) for name, argv in spec["runs"].items()}
    out["runs"]["syscalls"] = box.run(syscalls, 20)
    out["control"] = sandbox.Sandbox(spec["tree"], enabled="off").run(syscalls, 20)
    # The checker's pipes on fds 3 and 4, as grade.py's checkers hand them to their runners.
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in os.pipe() + os.pipe()]
    os.dup2(high[1], 3)
    os.dup2(high[2], 4)
    os.write(high[3], b"hello\n")
    code, said, _ = box.run(["sh", "-c", 'read line <&4; echo "got $line" >&3'], 20,
                            pass_fds=(3, 4))
    for fd in (3, 4, high[1], high[2], high[3]):
        os.close(fd)
    out["fds"] = [code, said, os.read(high[0], 100).decode()]
    with open(os.path.join(spec["home"], "secret.txt")) as f:
        out["home_outside"] = f.read()
box.close()
print(json.dumps(out))
"""
# System calls made inside the sandbox through ctypes, each with arguments that succeed or fail
# harmlessly without the filter; prints {name: "ok" or the errno's name}.
PROBE = r"""
import ctypes, errno, json, os, sys
numbers = json.loads(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
me = os.getpid()
calls = {
    "ptrace": (3, me, 0, 0),  # PTRACE_PEEKUSER of itself, not traced: ESRCH
    "process_vm_readv": (me, 0, 0, 0, 0, 0),  # nothing to read: 0
    "unshare": (0,),  # no new namespace: 0
    "mount": (0, 0, 0, 0, 0),
    "keyctl": (0, -3, 0),  # KEYCTL_GET_KEYRING_ID of KEY_SPEC_SESSION_KEYRING
    "bpf": (-1, 0, 0),
    "perf_event_open": (0, 0, -1, -1, 0),
    "personality": (0xFFFFFFFF,),  # a query
    "ioctl": (0, 0x5412, 0),  # TIOCSTI on stdin (/dev/null): ENOTTY
}
result = {}
for name, args in calls.items():
    ctypes.set_errno(0)
    r = libc.syscall(ctypes.c_long(numbers[name]), *map(ctypes.c_long, args))
    result[name] = errno.errorcode.get(ctypes.get_errno(), "?") if r == -1 else "ok"
print(json.dumps(result))
"""


def ordinary_python(drop):
    """A Python 3 the ordinary user can run and that is outside any home folder (the sandbox
    covers the user's own), or None."""
    for python in ("/usr/bin/python3", sys.executable):
        try:
            if subprocess.run(drop + [python, "-c", "import ctypes"], timeout=30).returncode == 0:
                return python
        except OSError:
            pass
    return None


class Unprivileged(unittest.TestCase):
    """The bubblewrap backend, as an ordinary user would get it: `check`, then one driver that
    runs every probe through one Sandbox (DRIVER), then what is left outside."""

    @classmethod
    def setUpClass(cls):
        setpriv = shutil.which("setpriv")
        if os.geteuid() == 0 and setpriv is None:
            raise unittest.SkipTest("setpriv (util-linux) not found: cannot drop root")
        cls.drop = [setpriv, *DROP] if os.geteuid() == 0 else []
        cls.python = ordinary_python(cls.drop)
        if cls.python is None:
            raise unittest.SkipTest("no Python 3 the ordinary user can run")
        cls.tmp = tempfile.mkdtemp(prefix="test-sandbox-bwrap-")
        os.chmod(cls.tmp, 0o755)
        uid = SANDBOX_UID if cls.drop else os.getuid()
        gid = SANDBOX_UID if cls.drop else os.getgid()
        cls.tree, cls.out, cls.home = (os.path.join(cls.tmp, d) for d in ("tree", "out", "home"))
        files = {
            "tree/source.cu": "// student\n",
            "tree/private/clips.tsv": "secret words\n",
            "tree/seed.txt": "1234\n",
            "tree/lib/libcublas.so.12.4.5": "\x7fELF cublas",
            "tree/lib/libother.so.1": "\x7fELF other",
            "home/secret.txt": "the grader's token\n",
        }
        # The modules under test, where the ordinary user can read them wherever this checkout is.
        package = os.path.join(os.path.dirname(sandbox.__file__), "..")
        for rel in ("__init__.py", "isolation/__init__.py", "isolation/sandbox.py"):
            with open(os.path.join(package, rel)) as f:
                files[f"pkg/grader/{rel}"] = f.read()
        with open(sandbox.SECCOMP_LAUNCHER) as f:
            files["pkg/grader/isolation/seccomp.py"] = f.read()
        for rel, text in files.items():
            path = os.path.join(cls.tmp, rel)
            os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, 0o644)
        os.makedirs(cls.out, mode=0o755)
        for path in (cls.out, cls.home, os.path.join(cls.home, "secret.txt")):
            os.chown(path, uid, gid)
        os.chmod(cls.home, 0o700)
        os.chmod(os.path.join(cls.home, "secret.txt"), 0o600)
        cls.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "PYTHONPATH": os.path.join(cls.tmp, "pkg"),
            "HOME": cls.home,
        }
        code, said = cls.as_user("check", "--tree", cls.tree)
        if not said.startswith("sandboxed"):
            shutil.rmtree(cls.tmp, ignore_errors=True)
            # The sandbox's own words: "unsandboxed local grade (why)" where no backend works.
            raise unittest.SkipTest(said.strip() if not cls.drop else f"unprivileged: {said}")
        cls.check = said
        cls.marker = f"inside-{os.path.basename(cls.tmp)}"
        cls.outside = tempfile.NamedTemporaryFile(prefix="outside-", dir="/tmp")
        cls.listener = socket.socket()
        cls.listener.bind(("127.0.0.1", 0))
        cls.listener.listen()
        port = cls.listener.getsockname()[1]
        connect = (
            "import socket, sys; s = socket.socket(); s.settimeout(5)\n"
            "try: s.connect(('127.0.0.1', int(sys.argv[1]))); print('connected')\n"
            "except OSError as e: print(type(e).__name__)\n"
            "print(*sorted(name for _, name in socket.if_nameindex()))"
        )
        spec = {
            "tree": cls.tree,
            "hidden": [os.path.join(cls.tree, p) for p in ("private", "seed.txt")],
            "writable": [cls.out],
            "lib_dirs": [os.path.join(cls.tree, "lib")],
            "home": cls.home,
            "limits": {"cpu_seconds": 1, "file_bytes": FILE_LIMIT, "open_files": 256},
            "probe": PROBE,
            "runs": {
                "identity": [
                    "sh",
                    "-c",
                    "id -u; grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; "
                    "cut -d' ' -f6,7 /proc/self/stat",  # its sid, its terminal
                ],
                "env": ["env"],
                "tree": [
                    "sh",
                    "-c",
                    "cat source.cu; echo cheat > source.cu; touch report.json /usr/x; echo rc=$?",
                ],
                "writable": ["sh", "-c", f"echo result > {cls.out}/answer.txt"],
                "network": [cls.python, "-c", connect, str(port)],
                "tmp": ["sh", "-c", f"echo inside > /tmp/{cls.marker}; ls -A /tmp"],
                "hidden": ["sh", "-c", "cat private/clips.tsv; ls private; wc -c < seed.txt"],
                "home": ["sh", "-c", f"cat {cls.home}/secret.txt; ls -A {cls.home}"],
                "libraries": [
                    "sh",
                    "-c",
                    "cd lib; wc -c < libcublas.so.12.4.5; wc -c < libother.so.1",
                ],
                "limits": ["cat", "/proc/self/limits"],
                "cpu": ["sh", "-c", "while :; do :; done"],
                "daemon": ["sh", "-c", "sleep 977 >/dev/null 2>&1 & echo started"],
            },
        }
        code, said = cls.as_user("-", json.dumps(spec), timeout=120)
        cls.survivors = processes_running(b"sleep\x00977")
        for pid in cls.survivors:
            os.kill(pid, signal.SIGKILL)
        if code != 0:
            cls.tearDownClass()
            raise AssertionError(f"the driver failed: {said}")
        cls.result = json.loads(said.splitlines()[-1])

    @classmethod
    def as_user(cls, command, *args, env=None, timeout=60):
        """`python3 -m grader.isolation.sandbox COMMAND ARGS` as the ordinary user, or the
        driver for command "-": (exit status, stdout + stderr)."""
        main = ["-c", DRIVER] if command == "-" else ["-m", "grader.isolation.sandbox", command]
        done = subprocess.run(
            cls.drop + [cls.python, *main, *args],
            env=env or cls.env,
            cwd=cls.tree,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return done.returncode, done.stdout + done.stderr

    @classmethod
    def tearDownClass(cls):
        cls.listener.close()
        cls.outside.close()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def run_result(self, name):
        code, said, timed_out = self.result["runs"][name]
        self.assertFalse(timed_out, name)
        return code, said

    def test_a_concealed_folder_shows_only_the_paths_kept_in_it(self):
        # Where the ordinary user can reach it (this checkout may sit in a folder it cannot).
        checkout, tree, environment = checkout_with_a_work_tree(self, self.tmp)
        run = CONCEALED_RUN.format(checkout=checkout, environment=environment)
        spec = {
            "tree": tree,
            "hidden": [],
            "writable": [],
            "concealed": [checkout],
            "visible": [environment],
            "lib_dirs": [],
            "limits": {},
            "runs": {"concealed": ["sh", "-c", run]},
        }
        code, said = self.as_user("-", json.dumps(spec), timeout=60)
        self.assertEqual(code, 0, said)
        result = json.loads(said.splitlines()[-1])
        self.assertIn("1 concealed folders", result["description"])
        code, out, _ = result["runs"]["concealed"]
        assert_concealed(self, code, out)

    def test_check_names_the_backend(self):
        self.assertTrue(self.check.startswith("sandboxed (bubblewrap, unprivileged): uid"))
        self.assertIn("seccomp (", self.check)
        self.assertRegex(self.check, r"memory (\d+ \w+ \(systemd user scope\)|not limited \()")
        description = self.result["description"]
        self.assertTrue(description.startswith("sandboxed (bubblewrap, unprivileged)"))
        self.assertIn(
            "1 writable, 2 hidden paths, 0 concealed folders; 1 vendor library files covered",
            description,
        )
        self.assertIn("limits: CPU 1 s", description)

    def test_runs_as_the_user_with_no_new_privs_and_the_filter(self):
        code, said = self.run_result("identity")
        self.assertEqual(code, 0, said)
        uid = SANDBOX_UID if self.drop else os.getuid()
        # sid 1: the pid 1 shell's, which setsid made; terminal 0: none.
        self.assertEqual(said.split(), [str(uid), "NoNewPrivs:", "1", "Seccomp:", "2", "1", "0"])

    def test_empty_environment_plus_allowed(self):
        code, said = self.run_result("env")
        self.assertEqual(code, 0, said)
        seen = dict(line.split("=", 1) for line in said.splitlines())
        expected = {"PATH", "HOME", "TMPDIR", "GLMASR_ALLOWED"}
        self.assertEqual(set(seen), expected)  # not PYTHONPATH, which the driver has
        self.assertEqual((seen["HOME"], seen["GLMASR_ALLOWED"]), ("/tmp", "yes"))

    def test_tree_and_root_are_read_only(self):
        code, said = self.run_result("tree")
        self.assertIn("// student", said)
        self.assertEqual(said.count("Read-only file system"), 3, said)
        self.assertIn("rc=1", said)
        with open(os.path.join(self.tree, "source.cu")) as f:
            self.assertEqual(f.read(), "// student\n")
        self.assertFalse(os.path.exists(os.path.join(self.tree, "report.json")))

    def test_writable_path(self):
        self.assertEqual(self.run_result("writable")[0], 0)
        with open(os.path.join(self.out, "answer.txt")) as f:
            self.assertEqual(f.read(), "result\n")

    def test_no_network(self):
        code, said = self.run_result("network")
        self.assertEqual(code, 0, said)
        # A loopback of its own, where nothing listens; no other interface.
        self.assertEqual(said.split(), ["ConnectionRefusedError", "lo"])
        self.listener.settimeout(0.2)
        self.assertRaises(TimeoutError, self.listener.accept)

    def test_private_tmp(self):
        code, said = self.run_result("tmp")
        self.assertEqual(code, 0, said)
        self.assertIn(self.marker, said.split())
        self.assertNotIn(os.path.basename(self.outside.name), said.split())
        self.assertFalse(os.path.exists(os.path.join("/tmp", self.marker)))

    def test_hidden_paths(self):
        code, said = self.run_result("hidden")
        self.assertNotIn("secret", said)
        self.assertEqual(said.count("Permission denied"), 2, said)
        self.assertTrue(said.startswith("0\n"), said)  # seed.txt reads empty (stdout first)

    def test_home_folder_is_covered(self):
        code, said = self.run_result("home")
        self.assertEqual(code, 0, said)  # ls of the empty folder
        self.assertIn("No such file", said)
        self.assertNotIn("token", said)
        self.assertIn("token", self.result["home_outside"])  # the control: readable outside

    def test_vendor_library_reads_empty(self):
        code, said = self.run_result("libraries")
        self.assertEqual((code, said.split()), (0, ["0", str(len("\x7fELF other"))]))

    def test_inherited_descriptors(self):
        self.assertEqual(self.result["fds"], [0, "", "got hello\n"])

    def test_seccomp_refuses(self):
        code, said = self.run_result("syscalls")
        self.assertEqual(code, 0, said)
        refused = json.loads(said)
        self.assertEqual(set(refused.values()), {"EPERM"}, refused)
        # The control without the sandbox: the same calls succeed or fail otherwise.
        code, said, _ = self.result["control"]
        allowed = json.loads(said)
        self.assertEqual(
            [allowed[k] for k in ("ptrace", "process_vm_readv", "unshare", "ioctl")],
            ["ESRCH", "ok", "ok", "ENOTTY"],
        )

    def test_no_grandchild_survives(self):
        self.assertEqual(self.run_result("daemon"), (0, "started\n"))
        self.assertEqual(self.survivors, [], "a grandchild outlived the sandboxed run")

    def test_limits_apply(self):
        code, said = self.run_result("limits")
        self.assertEqual(code, 0, said)
        rows = {line[:26].strip(): line[26:].split()[:2] for line in said.splitlines()[1:] if line}
        self.assertEqual(rows["Max cpu time"], ["1", "2"])
        self.assertEqual(rows["Max file size"], [str(FILE_LIMIT)] * 2)
        self.assertEqual(rows["Max open files"], ["256"] * 2)
        self.assertEqual(rows["Max processes"], [str(sandbox.DEFAULT_LIMITS["processes"])] * 2)
        self.assertEqual(rows["Max core file size"], ["0", "0"])
        self.assertEqual(self.run_result("cpu")[0], -signal.SIGXCPU)

    def test_says_why_without_bwrap(self):
        """No bwrap on the PATH, then a bwrap the kernel refuses namespaces: each named, with
        the fix; `--required` refuses to go on."""
        bin_dir = os.path.join(self.tmp, "bin")
        os.makedirs(bin_dir, mode=0o755, exist_ok=True)
        for tool in ("prlimit", "setsid", "sh", "env"):
            os.symlink(shutil.which(tool), os.path.join(bin_dir, tool))
        env = dict(self.env, PATH=bin_dir)
        code, said = self.as_user("check", "--tree", self.tree, env=env)
        self.assertEqual(code, 0, said)
        self.assertIn("unsandboxed local grade (not root, and bwrap not found: install ", said)
        refusing = os.path.join(bin_dir, "bwrap")
        with open(refusing, "w") as f:
            f.write(
                "#!/bin/sh\n"
                '[ "$1" = --version ] && { echo bubblewrap 0.9.0; exit 0; }\n'
                "echo 'bwrap: setting up uid map: Permission denied' >&2; exit 1\n"
            )
        os.chmod(refusing, 0o755)
        code, said = self.as_user("check", "--required", "--tree", self.tree, env=env)
        self.assertEqual(code, 2, said)
        self.assertIn(
            "a sandbox is required but not root, and bwrap cannot make a user namespace "
            "(bwrap: setting up uid map: Permission denied): ",
            said,
        )


class SeccompNumbers(unittest.TestCase):
    """seccomp.py's system call numbers, against the kernel headers where they are installed."""

    def test_syscall_numbers_match_the_headers(self):
        headers = {
            "x86_64": ("/usr/include/x86_64-linux-gnu/asm/unistd_64.h", r"__NR_(\w+)\s+(\d+)"),
            "aarch64": ("/usr/include/asm-generic/unistd.h", r"__NR(?:3264)?_(\w+)\s+(\d+)"),
        }
        checked = 0
        for arch, (header, pattern) in headers.items():
            if not os.path.exists(header):
                continue
            with open(header) as f:
                defined = {}
                for name, number in re.findall(r"#define " + pattern, f.read()):
                    defined.setdefault(name, int(number))
            for name, number in seccomp.NUMBERS[arch].items():
                self.assertEqual(defined.get(name), number, f"{arch} {name}")
            checked += 1
        if not checked:
            self.skipTest("no kernel headers with system call numbers")


class TrustedChildTimeOut(unittest.TestCase):
    """processes.py's run(): a checker that runs past its time dies with everything it started, in
    any process group (a kernel runner starts its own; no root needed)."""

    def test_the_whole_tree_dies(self):
        from grader.pipeline import processes

        marker = f"glmasr-orphan-{os.getpid()}"
        checker = (
            f"import subprocess, sys, time\n"
            f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '{marker}'],"
            f" start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
            f"print('started', flush=True)\n"
            f"time.sleep(600)\n"
        )
        started = time.time()
        code, output, timed_out = processes.run([sys.executable, "-c", checker], timeout=2)
        self.assertEqual((code, timed_out), (None, True))
        self.assertIn("started", output)
        self.assertLess(time.time() - started, 20)
        deadline = time.time() + 5
        while processes_running(marker.encode()) and time.time() < deadline:
            time.sleep(0.05)
        self.assertEqual(processes_running(marker.encode()), [])


class GradeDeadline(unittest.TestCase):
    """grade.py's Deadline: each step's limit is the rubric's or what is left of [batch]
    timeout_minutes (less the report's reserve), whichever is less; nothing left: not run."""

    def test_limits(self):
        from grader.pipeline import grade

        reserve = grade.REPORT_RESERVE_SECONDS
        d = grade.Deadline((reserve + 30) / 60)
        self.assertEqual(d.limit(10), 10)
        self.assertTrue(25 < d.limit(300) <= 30)
        spent = grade.Deadline(reserve / 60)
        self.assertIsNone(spent.limit(300))
        self.assertIn("not run: the grade's time limit", spent.spent)


class Inactive(unittest.TestCase):
    def test_off_runs_as_before_and_says_so(self):
        box = sandbox.Sandbox(HERE, enabled="off")
        self.assertFalse(box.active)
        self.assertEqual(box.description, "unsandboxed local grade (sandbox switched off)")
        self.assertEqual(box.prefix(), [])
        argv, env = box.wrap(["true"], env={"X": "1"})
        self.assertEqual((argv, env["X"], env.get("PATH")), (["true"], "1", os.environ.get("PATH")))

    def test_bad_arguments(self):
        with self.assertRaisesRegex(sandbox.SandboxError, "unknown sandbox limits: cpu"):
            sandbox.Sandbox(HERE, limits={"cpu": 1})
        with self.assertRaisesRegex(sandbox.SandboxError, "not a directory"):
            sandbox.Sandbox(os.path.join(HERE, "missing"))
        with self.assertRaisesRegex(sandbox.SandboxError, "unknown keys: memory"):
            sandbox.settings_from({"memory": 1})


if __name__ == "__main__":
    unittest.main()
