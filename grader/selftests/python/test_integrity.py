#!/usr/bin/env python3
"""Tests of grader/pipeline/integrity.py's list of allowed objects (allowed_objects.txt), its
linkage check and its memory-map scan, on real child processes: a program that maps only what
the list allows is clean; an unlisted library loaded by ctypes, anonymous executable memory and
a memfd mapped as code (even one named like a listed library) are each flagged; a trusted tool's
entries hold only in a tree where that tool runs. No GPU, no build, a few seconds.

    python3 -m grader.selftests.python.test_integrity
"""

import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from unittest import mock

from grader.pipeline import integrity, processes

# A child that maps what it is told, then says so: one command a line on stdin, "ok" (or the
# error) on stdout. `library NAME` loads a library by ctypes; `anonymous` makes anonymous memory
# executable; `memfd NAME` maps a memfd as code; `file PATH` maps a file as code; `spawn ARGV...`
# starts a child of its own.
CHILD = textwrap.dedent(
    """
    import ctypes, mmap, os, subprocess, sys
    kept = []
    for line in sys.stdin:
        command, _, argument = line.strip().partition(" ")
        try:
            if command == "library":
                kept.append(ctypes.CDLL(argument))
            elif command == "anonymous":
                flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
                kept.append(mmap.mmap(-1, 4096, flags=flags, prot=mmap.PROT_READ | mmap.PROT_EXEC))
            elif command == "memfd":
                fd = os.memfd_create(argument)
                os.ftruncate(fd, 4096)
                kept.append(mmap.mmap(fd, 4096, prot=mmap.PROT_READ | mmap.PROT_EXEC))
            elif command == "file":
                with open(argument, "rb") as f:
                    kept.append(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ | mmap.PROT_EXEC))
            elif command == "spawn":
                kept.append(subprocess.Popen(argument.split()))
            print("ok", flush=True)
        except OSError as e:
            print(f"error {e}", flush=True)
    """
)


class Child:
    """A python process running CHILD, and what it mapped as code before it was told anything."""

    def __init__(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        self.tell("")  # its imports are done once it answers
        self.before = set(integrity.unlisted_mappings(self.proc.pid))

    def tell(self, command):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline().strip()
        if answer != "ok":
            raise OSError(f"child: {command}: {answer}")

    def new_hits(self):
        """The violations that its commands added (the interpreter's own libraries, which the
        list does not allow either, were there before)."""
        return set(integrity.unlisted_mappings(self.proc.pid)) - self.before

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


class AllowedObjects(unittest.TestCase):
    def test_the_list_parses_and_matches_names_with_any_version(self):
        self.assertTrue(integrity.allowlist())
        for name in (
            "libc.so.6",
            "ld-linux-x86-64.so.2",
            "libstdc++.so.6.0.30",
            "libcuda.so.580.159.04",
            "libcudart.so.13.0.96",
            "libnvidia-ptxjitcompiler.so.580.159.04",
            "[vdso]",
        ):
            self.assertTrue(integrity.is_allowed(name), name)
        for name in ("libcusparse.so.12", "libcublas.so.13", "libcufft.so.12", "libz.so.1"):
            self.assertFalse(integrity.is_allowed(name), name)
        self.assertFalse(integrity.is_allowed("[heap]"))
        self.assertFalse(integrity.is_allowed("libcudnn.so.9"))

    def test_a_tools_entries_hold_only_where_it_runs(self):
        self.assertFalse(integrity.is_allowed("libsanitizer-collection.so"))
        self.assertTrue(integrity.is_allowed("libsanitizer-collection.so", {"compute-sanitizer"}))

    def test_a_malformed_entry_is_an_error(self):
        with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
            f.write("# comment\nalways libc.so*\nalways\n")
            f.flush()
            with self.assertRaisesRegex(ValueError, r":3: not WHERE PATTERN"):
                integrity.allowlist(f.name)


class Includes(unittest.TestCase):
    """What the student library was compiled from, read from a Makefile build's depfiles."""

    def setUp(self):
        scratch = tempfile.TemporaryDirectory()
        self.addCleanup(scratch.cleanup)
        self.tree = os.path.join(scratch.name, "tree")
        self.build = os.path.join(self.tree, "build")
        self.private = os.path.join(scratch.name, "private")
        self.objects = os.path.join(self.build, "student/CMakeFiles/glmasr_student.dir")
        os.makedirs(self.objects)

    def compiled_from(self, *files):
        """One object whose depfile lists `files` (paths relative to the tree, or absolute)."""
        deps = " \\\n  ".join(os.path.join(self.tree, f) for f in files)
        with open(os.path.join(self.objects, "rmsnorm.cu.o.d"), "w") as f:
            f.write(f"student/CMakeFiles/glmasr_student.dir/rmsnorm.cu.o: {deps}\n")
        return integrity.check_includes(
            self.build, "student/libglmasr_student.a", self.tree, [self.private]
        )

    def test_the_students_files_contract_headers_and_system_headers_are_allowed(self):
        found = self.compiled_from(
            "student/rmsnorm.cu",
            "student/kernels.h",
            "driver/include/glmasr/ops.h",
            "driver/cuda/include/glmasr/fp32_kernels.h",
            "build/generated/track.h",
            "/usr/include/stdio.h",
            "/usr/local/cuda/include/cuda_runtime.h",
        )
        self.assertEqual(found, ([], None))

    def test_any_other_file_of_the_tree_or_of_a_forbidden_folder_is_a_violation(self):
        for path in (
            "reference/common.cuh",
            "student/../reference/norm.cu",
            "grader/rubric.toml",
            "driver/src/model.cpp",
            os.path.join(self.private, "transcripts.tsv"),
            "/proc/self/cwd/../reference/argmax.cu",
            "/proc/self/reference/argmax.cu",  # as Ninja records the line above
            "/dev/fd/3",
        ):
            with self.subTest(path=path):
                violations, error = self.compiled_from("student/rmsnorm.cu", path)
                self.assertIsNone(error)
                self.assertEqual(len(violations), 1, violations)
                self.assertEqual(violations[0]["check"], "includes")
                self.assertIn(
                    f"rmsnorm.cu.o was compiled from {os.path.join(self.tree, path)}",
                    violations[0]["detail"],
                )

    def test_a_build_without_a_dependency_record_is_not_checked(self):
        violations, error = integrity.check_includes(
            self.build, "student/libglmasr_student.a", self.tree
        )
        self.assertEqual(violations, [])
        self.assertIn("no dependency record", error)


class Linkage(unittest.TestCase):
    def test_every_needed_library_must_be_listed(self):
        needed = ["libcudart.so.13", "libstdc++.so.6", "libc.so.6", "libcusparse.so.12"]
        with (
            mock.patch.object(integrity, "needed_libraries", return_value=needed),
            mock.patch.object(integrity.os.path, "exists", return_value=True),
        ):
            found = integrity.check_linkage(["/graded/glmasr-student"])
        self.assertEqual(
            found,
            [
                {
                    "check": "linkage",
                    "detail": "glmasr-student links libcusparse.so.12 (not in allowed_objects.txt)",
                }
            ],
        )

    @unittest.skipUnless(shutil.which("readelf"), "no readelf")
    def test_a_program_of_libc_alone_is_clean(self):
        self.assertEqual(integrity.check_linkage([os.path.realpath(shutil.which("sleep"))]), [])


class Mappings(unittest.TestCase):
    def test_a_program_that_maps_only_listed_objects_is_clean(self):
        # sh and its child sleep: their own programs, libc, the loader, the vDSO (bash, where it
        # is sh, adds libtinfo, which the list allows).
        shell = subprocess.Popen(["sh", "-c", "sleep 30 & wait"])
        try:
            for _ in range(100):  # until sleep runs under it
                if processes.descendants(shell.pid):
                    break
                time.sleep(0.05)
            self.assertEqual(len(processes.descendants(shell.pid)), 1)
            self.assertEqual(integrity.unlisted_mappings(shell.pid), [])
        finally:
            for p in reversed([shell.pid] + processes.descendants(shell.pid)):
                os.kill(p, signal.SIGKILL)
            shell.wait()

    def test_an_unlisted_library_loaded_at_run_time_is_flagged(self):
        child = Child()
        try:
            with open(f"/proc/{child.proc.pid}/maps") as f:
                mapped = f.read()
            sonames = map(ctypes.util.find_library, ("expat", "bz2", "lzma", "sqlite3", "ffi", "z"))
            soname = next((s for s in sonames if s and s not in mapped), None)
            if soname is None:
                self.skipTest("no system library left that the child has not loaded")
            child.tell(f"library {soname}")
            hits = child.new_hits()
            self.assertEqual(len(hits), 1, hits)
            hit = hits.pop()
            self.assertIn(soname, hit)
            self.assertRegex(hit, rf"^{child.proc.pid}: /.*\(not in allowed_objects.txt\)$")
        finally:
            child.close()

    def test_code_in_anonymous_memory_or_a_memfd_is_flagged(self):
        child = Child()
        try:
            child.tell("anonymous")
            self.assertEqual(child.new_hits(), {f"{child.proc.pid}: executable memory (anonymous)"})
            child.before = set(integrity.unlisted_mappings(child.proc.pid))
            # A memfd's name is its creator's: "x/libc.so.6" must not pass for libc.
            child.tell("memfd x/libc.so.6")
            self.assertEqual(
                child.new_hits(),
                {
                    f"{child.proc.pid}: executable memory from a memfd "
                    "(/memfd:x/libc.so.6 (deleted))"
                },
            )
        finally:
            child.close()

    def test_a_tools_libraries_pass_only_in_its_process_tree(self):
        with tempfile.TemporaryDirectory() as tmp:
            injected = os.path.join(tmp, "libsanitizer-collection.so")
            with open(injected, "wb") as f:
                f.write(b"\0" * 4096)
            tool = os.path.join(tmp, "compute-sanitizer")  # a stand-in: sleep under that name
            shutil.copy(os.path.realpath(shutil.which("sleep")), tool)
            child = Child()
            try:
                try:
                    child.tell(f"file {injected}")
                except OSError as e:
                    self.skipTest(f"{tmp} does not allow code to be mapped: {e}")
                self.assertEqual(
                    child.new_hits(), {f"{child.proc.pid}: {injected} (not in allowed_objects.txt)"}
                )
                child.tell(f"spawn {tool} 30")
                self.assertEqual(child.new_hits(), set())
            finally:
                for p in processes.descendants(child.proc.pid):
                    os.kill(p, signal.SIGKILL)
                child.close()


if __name__ == "__main__":
    unittest.main()
