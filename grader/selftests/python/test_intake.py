#!/usr/bin/env python3
"""Tests of grader/pipeline/intake.py: pristine trees, every submission layout and container, every
refusal, archive bombs, and the issue's promise that a submission's harness, rubric, CMake or
script edits never reach the graded tree. No GPU, no network, a few seconds.

    python3 -m grader.selftests.python.test_intake
    python3 -m unittest discover -s grader/tests_py       (every grader test, from the root)
"""

import filecmp
import io
import json
import os
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import unittest
import zipfile

from grader import ROOT
from grader.pipeline import intake

POLICY = {
    "owned": ["student/*.cu", "student/*.cuh", "student/*.h"],
    "max_file_bytes": 4096,
    "max_total_bytes": 16384,
    "max_files": 5,
    "max_entries": 100,
    "max_archive_bytes": 1 << 20,
}
# The rubric's form: each student track's globs.
TABLE = dict(POLICY, owned={"student": POLICY["owned"], "triton": ["student/triton/*.py"]})

# A miniature instructor tree: the student's files and the files a cheat would like to change.
MINI_TREE = {
    "student/linear.cu": b"// TODO(task 1): linear\n",
    "student/rmsnorm.cu": b"// TODO(task 2): rmsnorm\n",
    "student/kernels.h": b"#pragma once\n",
    "student/CMakeLists.txt": b"add_library(glmasr_student STATIC linear.cu)\n",
    "student/integrity/calls_cublas.cpp": b"// must be caught\n",
    "grader/rubric.toml": b"[kernels]\npartial = true\n",
    "grader/checks/kernel_test.h": b"// tolerances\n",
    "grader/pipeline/check_student_symbols.sh": b"#!/bin/sh\nexit 1\n",
    "README.md": b"# lab\n",
}
CHEAT_EDITS = {
    "grader/rubric.toml": b"[kernels]\npartial = true\n# everything passes\n",
    "grader/checks/kernel_test.h": b"// tolerance 1e9\n",
    "student/CMakeLists.txt": b"target_link_libraries(glmasr_student cublas)\n",
    "student/integrity/calls_cublas.cpp": b"// removed\n",
    "grader/pipeline/check_student_symbols.sh": b"#!/bin/sh\nexit 0\n",
}


def write_tree(top, files):
    for rel, data in files.items():
        path = os.path.join(top, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        if rel.endswith(".sh"):
            os.chmod(path, 0o755)


def make_zip(path, files, extra=()):
    """files: {name: bytes}; extra: ZipInfo objects with their data (links, odd names)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
        for info, data in extra:
            z.writestr(info, data)
    return path


def make_tar(path, files, extra=(), mode="w:gz"):
    """files: {name: bytes}; extra: TarInfo objects (links, devices) without data."""
    with tarfile.open(path, mode) as t:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            t.addfile(info, io.BytesIO(data))
        for info in extra:
            t.addfile(info)
    return path


def tar_entry(name, kind, linkname=""):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, linkname
    return info


def differing_files(a, b):
    """Relative paths that differ between trees a and b (content, or present in one only)."""

    def files(top):
        return {os.path.relpath(os.path.join(h, n), top) for h, _, ns in os.walk(top) for n in ns}

    fa, fb = files(a), files(b)
    common = fa & fb
    changed = {
        p for p in common if not filecmp.cmp(os.path.join(a, p), os.path.join(b, p), shallow=False)
    }
    return changed | (fa ^ fb)


class IntakeCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test-intake-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)
        self.instructor = os.path.join(self.tmp, "instructor")
        write_tree(self.instructor, MINI_TREE)
        self.tree = os.path.join(self.tmp, "tree")
        intake.make_pristine_tree(self.instructor, self.tree)

    def path(self, name):
        return os.path.join(self.tmp, name)

    def take(self, submission, policy=POLICY):
        record = intake.intake(submission, self.tree, policy)
        json.dumps(record)  # it goes into the report as it is
        return record

    def accepted(self, record):
        return sorted(e["path"] for e in record["accepted"])

    def refused(self, record):
        return {e["path"]: e["reason"] for e in record["refused"]}

    def tree_file(self, rel):
        with open(os.path.join(self.tree, rel), "rb") as f:
            return f.read()


class Layouts(IntakeCase):
    """The three shapes a submission comes in, in every container."""

    def test_whole_tree_directory(self):
        sub = self.path("sub")
        write_tree(sub, dict(MINI_TREE, **{"student/linear.cu": b"// mine\n"}))
        record = self.take(sub)
        self.assertEqual(
            self.accepted(record), ["student/kernels.h", "student/linear.cu", "student/rmsnorm.cu"]
        )
        self.assertEqual(self.tree_file("student/linear.cu"), b"// mine\n")
        self.assertIn({"path": "README.md", "reason": "not student-owned"}, record["ignored"])
        self.assertIn(
            {"path": "student/CMakeLists.txt", "reason": "not student-owned"}, record["ignored"]
        )
        self.assertEqual(record["refused"], [])

    def test_wrapped_tree_tar_gz(self):
        files = {f"glmasr-lab-handout/{k}": v for k, v in MINI_TREE.items()}
        files["glmasr-lab-handout/student/linear.cu"] = b"// wrapped\n"
        record = self.take(make_tar(self.path("s.tar.gz"), files))
        self.assertIn("glmasr-lab-handout/student/", record["layout"])
        self.assertIn("student/linear.cu", self.accepted(record))
        self.assertEqual(self.tree_file("student/linear.cu"), b"// wrapped\n")

    def test_bare_student_folder_zip(self):
        record = self.take(
            make_zip(
                self.path("s.zip"),
                {"student/linear.cu": b"// z\n", "student/new_helper.cuh": b"// h\n"},
            )
        )
        self.assertEqual(self.accepted(record), ["student/linear.cu", "student/new_helper.cuh"])
        self.assertEqual(self.tree_file("student/new_helper.cuh"), b"// h\n")
        self.assertEqual(
            self.tree_file("student/rmsnorm.cu"),
            MINI_TREE["student/rmsnorm.cu"],
            "a stub the submission does not carry stays as it was",
        )

    def test_flat_files_plain_tar(self):
        record = self.take(
            make_tar(
                self.path("s.tar"),
                {"linear.cu": b"// flat\n", "CMakeLists.txt": b"# cheat\n", "notes/x.cu": b"//\n"},
                mode="w",
            )
        )
        self.assertIn("flat files", record["layout"])
        self.assertEqual(self.accepted(record), ["student/linear.cu"])
        self.assertEqual(self.tree_file("student/linear.cu"), b"// flat\n")
        self.assertEqual(
            self.tree_file("student/CMakeLists.txt"), MINI_TREE["student/CMakeLists.txt"]
        )
        self.assertEqual({e["path"] for e in record["ignored"]}, {"CMakeLists.txt", "notes/x.cu"})

    def test_flat_files_in_a_wrapping_folder(self):
        record = self.take(
            make_zip(self.path("s.zip"), {"hw3/linear.cu": b"// a\n", "hw3/rmsnorm.cu": b"// b\n"})
        )
        self.assertEqual(self.accepted(record), ["student/linear.cu", "student/rmsnorm.cu"])

    def test_the_student_folder_itself_as_a_directory(self):
        sub = self.path("student")
        write_tree(sub, {"linear.cu": b"// d\n", "CMakeLists.txt": b"# cheat\n"})
        record = self.take(sub)
        self.assertEqual(self.accepted(record), ["student/linear.cu"])
        self.assertEqual(
            self.tree_file("student/CMakeLists.txt"), MINI_TREE["student/CMakeLists.txt"]
        )

    def test_two_student_folders_are_ambiguous(self):
        sub = make_zip(
            self.path("s.zip"), {"a/student/linear.cu": b"//\n", "b/student/linear.cu": b"//\n"}
        )
        with self.assertRaisesRegex(intake.IntakeError, "several student/ folders"):
            self.take(sub)

    def test_dry_run_writes_nothing(self):
        before = differing_files(self.instructor, self.tree)
        record = intake.intake(
            make_zip(self.path("s.zip"), {"student/linear.cu": b"// x\n"}), None, POLICY
        )
        self.assertEqual(self.accepted(record), ["student/linear.cu"])
        self.assertEqual(differing_files(self.instructor, self.tree), before)


class Refusals(IntakeCase):
    """Each class of dangerous entry is refused with its reason and never written."""

    def assert_refused(self, record, name, words):
        self.assertIn(name, self.refused(record))
        self.assertIn(words, self.refused(record)[name])
        self.assertEqual(self.tree_file("student/linear.cu"), MINI_TREE["student/linear.cu"])

    def test_symlinks(self):
        sub = self.path("sub")
        os.makedirs(os.path.join(sub, "student"))
        os.symlink("/etc/passwd", os.path.join(sub, "student/linear.cu"))
        os.symlink("/etc", os.path.join(sub, "student/etc"))
        record = self.take(sub)
        self.assert_refused(record, "student/linear.cu", "symbolic link to /etc/passwd")
        self.assert_refused(record, "student/etc", "symbolic link")
        tar = make_tar(
            self.path("s.tgz"), {}, [tar_entry("student/linear.cu", tarfile.SYMTYPE, "/etc/shadow")]
        )
        self.assert_refused(self.take(tar), "student/linear.cu", "symbolic link")
        link = zipfile.ZipInfo("student/linear.cu")
        link.create_system, link.external_attr = 3, (stat.S_IFLNK | 0o777) << 16
        zipped = make_zip(self.path("s.zip"), {}, [(link, "/etc/shadow")])
        self.assert_refused(self.take(zipped), "student/linear.cu", "symbolic link")

    def test_hard_links(self):
        sub = self.path("sub")
        write_tree(sub, {"student/rmsnorm.cu": b"// r\n"})
        os.link(os.path.join(sub, "student/rmsnorm.cu"), os.path.join(sub, "student/linear.cu"))
        record = self.take(sub)
        self.assert_refused(record, "student/linear.cu", "hard link")
        tar = make_tar(
            self.path("s.tgz"), {}, [tar_entry("student/linear.cu", tarfile.LNKTYPE, "etc/shadow")]
        )
        self.assert_refused(self.take(tar), "student/linear.cu", "hard link")

    def test_devices_and_fifos(self):
        sub = self.path("sub")
        os.makedirs(os.path.join(sub, "student"))
        os.mkfifo(os.path.join(sub, "student/linear.cu"))  # reading it would block forever
        self.assert_refused(self.take(sub), "student/linear.cu", "fifo")
        tar = make_tar(self.path("s.tgz"), {}, [tar_entry("student/linear.cu", tarfile.CHRTYPE)])
        self.assert_refused(self.take(tar), "student/linear.cu", "not a regular file")

    def test_paths_that_escape(self):
        files = {
            "../linear.cu": b"//\n",
            "student/../../linear.cu": b"//\n",
            "/etc/linear.cu": b"//\n",
            "C:\\student\\linear.cu": b"//\n",
            "student/lin\near.cu": b"//\n",
        }
        for container in (make_tar(self.path("s.tgz"), files), make_zip(self.path("s.zip"), files)):
            record = self.take(container)
            self.assertEqual(record["accepted"], [])
            reasons = self.refused(record)
            self.assertIn("(..)", reasons["../linear.cu"])
            self.assertIn("(..)", reasons["student/../../linear.cu"])
            self.assertEqual(reasons["/etc/linear.cu"], "absolute path")
            self.assertEqual(reasons["C:\\student\\linear.cu"], "absolute path")
            self.assertEqual(reasons["student/lin?ear.cu"], "control characters in the name")
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "linear.cu")))

    def test_oversized_and_binary_files(self):
        record = self.take(
            make_zip(
                self.path("s.zip"),
                {
                    "student/linear.cu": b"x" * 4097,
                    "student/rmsnorm.cu": b"int x;\0\0\0",
                    "student/gelu.cu": "// café\n".encode("latin-1"),
                    "student/kernels.h": b"// fine\n",
                    "docs/big.pdf": b"\0" * 100000,
                },
            )
        )  # not owned: never read
        reasons = self.refused(record)
        self.assertIn("max_file_bytes", reasons["student/linear.cu"])
        self.assertIn("NUL byte at offset 6", reasons["student/rmsnorm.cu"])
        self.assertIn("not UTF-8", reasons["student/gelu.cu"])
        self.assertEqual(self.accepted(record), ["student/kernels.h"])
        self.assertEqual(self.tree_file("student/rmsnorm.cu"), MINI_TREE["student/rmsnorm.cu"])
        self.assertIn({"path": "docs/big.pdf", "reason": "not student-owned"}, record["ignored"])

    def test_too_many_files_and_too_many_bytes(self):
        many = {f"student/k{i}.cu": b"//\n" for i in range(7)}
        record = self.take(make_zip(self.path("a.zip"), many))
        self.assertEqual(len(record["accepted"]), 5)
        self.assertEqual(len(record["refused"]), 2)
        self.assertTrue(all("max_files" in e["reason"] for e in record["refused"]))
        heavy = {f"student/h{i}.cu": b"/" * 4000 for i in range(5)}
        record = self.take(make_zip(self.path("b.zip"), heavy))
        self.assertEqual(len(record["accepted"]), 4)  # 16000 of 16384 bytes
        self.assertIn("max_total_bytes", record["refused"][0]["reason"])

    def test_duplicate_entries(self):
        with zipfile.ZipFile(self.path("d.zip"), "w") as z:
            z.writestr("student/linear.cu", "// first\n")
            z.writestr("./student/linear.cu", "// second\n")
        record = self.take(self.path("d.zip"))
        self.assertEqual(self.tree_file("student/linear.cu"), b"// first\n")
        self.assertIn("second entry", self.refused(record)["./student/linear.cu"])


class Bombs(IntakeCase):
    """Archives that expand to far more than they weigh: read with bounds, never extracted."""

    def test_zip_bomb_member_is_read_only_up_to_the_limit(self):
        bomb = make_zip(self.path("bomb.zip"), {"student/linear.cu": b"\0" * (64 << 20)})
        self.assertLess(os.path.getsize(bomb), 1 << 20)
        started = time.monotonic()
        record = self.take(bomb)
        self.assertLess(time.monotonic() - started, 2.0)
        self.assertIn("max_file_bytes", self.refused(record)["student/linear.cu"])

    def test_tar_gz_that_expands_past_max_archive_bytes(self):
        bomb = make_tar(
            self.path("bomb.tar.gz"),
            {"assets/zeros.bin": b"\0" * (8 << 20), "student/linear.cu": b"// late\n"},
        )
        with self.assertRaisesRegex(intake.IntakeError, "max_archive_bytes"):
            self.take(bomb)
        self.assertEqual(self.tree_file("student/linear.cu"), MINI_TREE["student/linear.cu"])

    def test_tar_header_that_lies_about_its_size(self):
        info = tarfile.TarInfo("student/linear.cu")
        info.size = 1 << 40  # 1 TiB claimed, none present
        data = info.tobuf(tarfile.GNU_FORMAT)
        with open(self.path("liar.tar"), "wb") as f:
            f.write(data)
        with self.assertRaisesRegex(intake.IntakeError, "max_archive_bytes"):
            self.take(self.path("liar.tar"))

    def test_too_many_entries(self):
        many = make_zip(self.path("many.zip"), {f"junk/{i}.txt": b"" for i in range(101)})
        with self.assertRaisesRegex(intake.IntakeError, "max_entries"):
            self.take(many)


class Errors(IntakeCase):
    def test_missing_corrupt_and_foreign_inputs(self):
        with self.assertRaisesRegex(intake.IntakeError, "no such file or directory"):
            self.take(self.path("nothing.zip"))
        with open(self.path("broken.zip"), "wb") as f:
            f.write(b"PK\x03\x04" + b"garbage" * 10)
        with open(self.path("linear.cu"), "wb") as f:
            f.write(b"__global__ void k() {}\n")
        good = make_tar(self.path("cut.tar.gz"), {"student/linear.cu": b"//\n" * 1000})
        with open(good, "rb") as f:
            half = f.read()[:40]
        with open(self.path("cut.tar.gz"), "wb") as f:
            f.write(half)
        for name in ("broken.zip", "linear.cu", "cut.tar.gz"):
            with self.assertRaises(intake.IntakeError) as caught:
                self.take(self.path(name))
            self.assertNotIn("\n", str(caught.exception))
            self.assertIn(name, str(caught.exception))

    def test_policy_is_checked(self):
        with self.assertRaisesRegex(intake.IntakeError, "lacks 'max_files'"):
            intake.policy_from({k: v for k, v in TABLE.items() if k != "max_files"})
        with self.assertRaisesRegex(intake.IntakeError, "unknown keys: typo"):
            intake.policy_from(dict(TABLE, typo=1))
        with self.assertRaisesRegex(intake.IntakeError, "'owned' must be a dict"):
            intake.policy_from(POLICY)  # the flat list of before: one list for every track
        with self.assertRaisesRegex(intake.IntakeError, "no globs for the track 'cutile'"):
            intake.policy_from(TABLE, "cutile")
        with self.assertRaisesRegex(intake.IntakeError, "share one folder"):
            intake.policy_from(dict(TABLE, owned={"student": ["student/*.cu", "other/*.cu"]}))
        self.assertEqual(intake.policy_from(TABLE, "triton")["owned"], ["student/triton/*.py"])

    def test_triton_track_takes_its_folder_only(self):
        """The Triton track's files are student/triton/*.py, in any of the three shapes; the
        CUDA track's files in the same hand-in are not its own, nor Python elsewhere."""
        policy = intake.policy_from(TABLE, "triton")
        whole = make_zip(
            self.path("whole.zip"),
            {
                "lab/student/triton/rmsnorm.py": b"# mine\n",
                "lab/student/rmsnorm.cu": b"//\n",
                "lab/aot/triton_aot.py": b"# not yours\n",
                "lab/student/triton/sub/x.py": b"#\n",
            },
        )
        record = self.take(whole, policy)
        self.assertEqual([a["path"] for a in record["accepted"]], ["student/triton/rmsnorm.py"])
        self.assertIn("student/triton/ folder at 'lab/student/triton/'", record["layout"])
        self.assertEqual(len(record["ignored"]), 3)
        flat = make_zip(
            self.path("flat.zip"), {"triton/gelu.py": b"#\n", "triton/rope_apply.py": b"#\n"}
        )
        record = self.take(flat, policy)
        self.assertEqual(
            sorted(a["path"] for a in record["accepted"]),
            ["student/triton/gelu.py", "student/triton/rope_apply.py"],
        )
        with open(os.path.join(self.tree, "student/triton/gelu.py"), "rb") as f:
            self.assertEqual(f.read(), b"#\n")

    def test_grade_refuses_tracks_it_does_not_grade(self):
        """grade.py: an unknown track, or a hand-in for a trusted one, is one line and exit 2,
        before anything is built."""
        grade = [sys.executable, "-m", "grader", "--out", self.path("out")]
        for args, says in [
            (
                ["--track", "cutile-solution"],
                "the tracks graded are student, triton, cutile, baseline, reference",
            ),
            (
                ["--track", "baseline", "--submission", self.path("x")],
                "--submission grades a student's track (student, triton, cutile), not baseline",
            ),
        ]:
            done = subprocess.run(grade + args, capture_output=True, text=True, timeout=60)
            self.assertEqual(done.returncode, 2, done.stderr)
            self.assertIn(says, done.stderr)
            self.assertEqual(len(done.stderr.strip().splitlines()), 1)

    def test_a_build_made_earlier_keeps_what_it_said_about_the_student_code(self):
        """grade.py --build-only records the student build's outcome beside the build; the grade
        run later with --skip-build scores that outcome, for the same track only."""
        from grader.pipeline import grade

        build = self.path("build")
        os.makedirs(build)
        self.assertIsNone(grade.recorded_build_error(build, "student"))
        with open(os.path.join(build, grade.BUILD_STATE), "w") as f:
            json.dump({"track": "student", "build_error": "the student code does not build: x"}, f)
        self.assertEqual(
            grade.recorded_build_error(build, "student"), "the student code does not build: x"
        )
        self.assertIsNone(grade.recorded_build_error(build, "triton"))

    def test_a_build_configured_without_nvcc_is_no_cuda_build(self):
        from grader.pipeline import grade

        build = self.path("cache")
        os.makedirs(build)
        for value, cuda in [
            ("NOTFOUND", False),
            ("CMAKE_CUDA_COMPILER-NOTFOUND", False),
            ("", False),
            ("/usr/local/cuda/bin/nvcc", True),
        ]:
            with open(os.path.join(build, "CMakeCache.txt"), "w") as f:
                f.write(f"CMAKE_CUDA_COMPILER:FILEPATH={value}\n")
            self.assertEqual(grade.cuda_build(build), cuda, value)

    def test_command_line(self):
        rubric = self.path("rubric.toml")
        with open(rubric, "w") as f:
            f.write(
                "[submission]\n"
                + "".join(f"{k} = {json.dumps(v)}\n" for k, v in POLICY.items() if k != "owned")
                + "[submission.owned]\n"
                + "".join(f"{k} = {json.dumps(v)}\n" for k, v in TABLE["owned"].items())
            )
        sub = make_zip(self.path("s.zip"), {"student/linear.cu": b"//\n", "rubric.toml": b""})
        cli = [sys.executable, "-m", "grader.pipeline.intake", "--rubric", rubric]
        done = subprocess.run(cli + [sub], capture_output=True, text=True)
        self.assertEqual(done.returncode, 0, done.stderr)
        self.assertIn("1 accepted, 1 ignored, 0 refused", done.stdout)
        done = subprocess.run(cli + [self.path("missing.zip")], capture_output=True, text=True)
        self.assertEqual(done.returncode, 2)
        self.assertTrue(done.stderr.startswith("intake: "), done.stderr)


class HarnessEditsNeverCount(IntakeCase):
    """The issue's requirement: grading a submission that also carries a modified harness,
    rubric, CMake file or script gives exactly the grade of its .cu files alone."""

    def check(self, instructor, container, policy=POLICY):
        pristine = os.path.join(self.tmp, "pristine")
        graded = os.path.join(self.tmp, "graded")
        intake.make_pristine_tree(instructor, pristine)
        intake.make_pristine_tree(instructor, graded)
        submission = os.path.join(self.tmp, "submission")
        shutil.copytree(pristine, submission)
        write_tree(
            submission,
            dict(
                CHEAT_EDITS,
                **{"student/linear.cu": b"// my linear\n", "student/extra.cuh": b"// helper\n"},
            ),
        )
        if container == "zip":
            archive = os.path.join(self.tmp, "submission.zip")
            with zipfile.ZipFile(archive, "w") as z:
                for here, _, names in os.walk(submission):
                    for n in names:
                        full = os.path.join(here, n)
                        z.write(full, os.path.join("handout", os.path.relpath(full, submission)))
            submission = archive
        record = intake.intake(submission, graded, policy)
        self.assertEqual(
            differing_files(pristine, graded), {"student/linear.cu", "student/extra.cuh"}
        )
        ignored = {e["path"].removeprefix("handout/") for e in record["ignored"]}
        self.assertTrue(set(CHEAT_EDITS) <= ignored, ignored)

    def test_mini_tree_directory(self):
        self.check(self.instructor, "dir")

    def test_this_project_zip(self):
        if not os.path.isdir(os.path.join(ROOT, "student")):
            self.skipTest(f"{ROOT} is not the project tree")
        # The whole project, as a student would zip their checkout (without build output).
        self.check(
            ROOT,
            "zip",
            dict(
                POLICY,
                max_entries=100000,
                max_file_bytes=1 << 20,
                max_files=100,
                max_total_bytes=16 << 20,
            ),
        )


class PristineTree(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="test-pristine-")
        self.addCleanup(shutil.rmtree, self.tmp, ignore_errors=True)

    def files(self, top):
        return sorted(
            os.path.relpath(os.path.join(h, n), top) for h, _, ns in os.walk(top) for n in ns
        )

    def test_git_checkout_gives_tracked_files_only(self):
        if shutil.which("git") is None:
            self.skipTest("git not installed")
        repo = os.path.join(self.tmp, "repo")
        write_tree(
            repo,
            {
                "student/linear.cu": b"//\n",
                "tools/x.sh": b"#!/bin/sh\n",
                ".gitignore": b"/build*/\n",
            },
        )
        git = ["git", "-C", repo, "-c", "user.email=t@t", "-c", "user.name=t"]
        subprocess.run(git + ["init", "-q"], check=True)
        subprocess.run(git + ["add", "."], check=True)
        subprocess.run(git + ["commit", "-qm", "x"], check=True)
        os.chmod(os.path.join(repo, "student/linear.cu"), 0o600)  # a umask-077 checkout
        write_tree(repo, {"build/glmasr": b"ELF", "student/notes.cu": b"// untracked\n"})
        dest = os.path.join(self.tmp, "dest")
        self.assertEqual(intake.make_pristine_tree(repo, dest), 3)
        self.assertEqual(self.files(dest), [".gitignore", "student/linear.cu", "tools/x.sh"])
        self.assertEqual(
            stat.S_IMODE(os.stat(os.path.join(dest, "student/linear.cu")).st_mode), 0o644
        )
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(dest, "tools/x.sh")).st_mode), 0o755)
        self.assertEqual(stat.S_IMODE(os.stat(os.path.join(dest, "student")).st_mode), 0o755)

    def test_unpacked_tree_skips_what_gitignore_names(self):
        top = os.path.join(self.tmp, "handout")
        write_tree(
            top,
            {
                "student/linear.cu": b"//\n",
                ".gitignore": b"/build*/\n__pycache__/\n*.pyc\n",
                "build-rel/glmasr": b"ELF",
                "grader/__pycache__/s.pyc": b"",
                "grader/x.pyc": b"",
                "grader/pipeline/grade.py": b"",
            },
        )
        dest = os.path.join(self.tmp, "dest")
        intake.make_pristine_tree(top, dest)
        self.assertEqual(
            self.files(dest), [".gitignore", "grader/pipeline/grade.py", "student/linear.cu"]
        )

    def test_destination_must_be_empty(self):
        os.makedirs(os.path.join(self.tmp, "dest/x"))
        with self.assertRaisesRegex(intake.IntakeError, "new or empty"):
            intake.make_pristine_tree(self.tmp, os.path.join(self.tmp, "dest"))


if __name__ == "__main__":
    unittest.main()
