#!/usr/bin/env python3
"""Tests of grader/isolation/sandbox.py: what a student process can and cannot do inside the sandbox.

    python3 -m grader.selftests.python.test_sandbox
    python3 -m unittest discover -s grader/tests_py       (every grader test, from the root)

They need root and a kernel that grants namespaces (CI has both); elsewhere they are skipped
with the sandbox's own reason. Each claim is checked from the outside where it can be (the
file left unchanged, the listener that saw no connection, the grandchild that is gone), and
where it matters against a control run without the sandbox. About 5 s.
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

from grader.isolation import sandbox

HERE = os.path.dirname(os.path.abspath(__file__))

SANDBOX_UID = 65534
FILE_LIMIT = 1_000_000


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


class SandboxTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
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
