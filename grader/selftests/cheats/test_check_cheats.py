#!/usr/bin/env python3
"""test_check_cheats.py — the cheat suite's own tests, without a GPU, a build or grade.py:

* every submission of cheats.toml can be made in its form, and an archive holds exactly the
  entries it should (the hostile ones included); its student_files control holds none of them;
* the honest control is the baseline's kernels under the student's namespace;
* the replay table knows every shipped clip and tells apart the clips of equal length;
* judge() has teeth: grades that pay a cheat (a tampered rubric's maxima, kernel items the
  harness tamper would pass, an ignored file not listed, a CMake edit that ran, a missing
  flag) are PAID, and the grades a sound grader gives are "caught".

  python3 -m grader.selftests.cheats.test_check_cheats [-v]
"""

import json
import os
import re
import tarfile
import tempfile
import unittest
import zipfile

from grader.selftests.cheats import baseline_submission
from grader.selftests.cheats import check_cheats as cc

CONTROLS, CHEATS = cc.load_specs()
SPECS = {s["name"]: s for s in CONTROLS + CHEATS}


def fake_grade(label, items, lines=(), sentinel=""):
    """A Grade as grade.py would leave it: results.json items {name: (score, max)}."""
    tests = [{"name": n, "score": s, "max_score": m, "output": ""} for n, (s, m) in items.items()]
    results = {"score": sum(s for s, _ in items.values()), "tests": tests}
    return cc.Grade(label, 0, "", results, list(lines) + cc.flatten(results), sentinel)


def instructor_items(score_of=lambda name, points: 0):
    return {n: (score_of(n, p), p) for n, p in cc.rubric_points().items()}


class Submissions(unittest.TestCase):
    def test_every_submission_is_made_in_its_form(self):
        with tempfile.TemporaryDirectory() as tmp:
            for name, spec in SPECS.items():
                entries = cc.entries_of(spec, os.path.join(tmp, "watch"))
                path = cc.write_submission(
                    entries, spec.get("form", "dir"), os.path.join(tmp, name)
                )
                if path.endswith(".tar.gz"):
                    with tarfile.open(path) as tar:
                        names = tar.getnames()
                elif path.endswith(".zip"):
                    with zipfile.ZipFile(path) as z:
                        names = z.namelist()
                else:
                    names = [
                        os.path.relpath(os.path.join(d, n), path)
                        for d, _, ns in os.walk(path)
                        for n in ns
                    ]
                self.assertEqual(sorted(names), sorted(entries), name)
                self.assertIn("student/track.cu", names, name)
                for h in spec.get("hostile", []):
                    self.assertIn(h["path"].replace("{watch}", os.path.join(tmp, "watch")), names)
                own = cc.student_files(entries)
                self.assertFalse(
                    [p for p, e in own.items() if e.hostile or e.symlink or e.hardlink]
                )
                self.assertTrue(all(cc.is_owned(p, cc.owned_globs()) for p in own), name)

    def test_appended_files_keep_what_they_extend(self):
        entries = cc.entries_of(SPECS["forged_report"], "/nonexistent")
        track = entries["student/track.cu"].data.decode()
        self.assertIn("student_track()", track)
        self.assertTrue(track.rstrip().endswith('#include "forge_report.cuh"'))
        harness = cc.entries_of(SPECS["tampered_harness"], "/nonexistent")
        kernel_test = harness["grader/checks/kernel_test.h"].data.decode()
        self.assertIn(
            "inline bool tracks_can_run()", kernel_test
        )  # the real harness, then the tamper
        self.assertTrue(kernel_test.rstrip().endswith("if (true) return"))

    def test_a_symlink_in_a_zip_is_a_mode_bit(self):
        with tempfile.TemporaryDirectory() as tmp:
            entries = cc.entries_of(SPECS["escape_paths_zip"], tmp)
            with zipfile.ZipFile(cc.write_submission(entries, "zip", os.path.join(tmp, "z"))) as z:
                info = z.getinfo("student/linear.cu")
                self.assertEqual((info.external_attr >> 16) & 0o170000, 0o120000)
                self.assertEqual(z.read(info), b"/etc/passwd")


class Controls(unittest.TestCase):
    def test_baseline_submission_is_the_baseline_renamed(self):
        files = baseline_submission.files()
        stubs = {p for p in cc.lab_files() if re.fullmatch(r"student/[a-z_0-9]+\.cu", p)}
        self.assertEqual(stubs - set(files), set())
        for path, text in files.items():
            self.assertNotIn("glmasr::baseline", text, path)
            self.assertNotIn("GLMASR_BUG", text, path)  # the buggy track's hooks stripped
        self.assertIn("namespace glmasr::student {", files["student/linear.cu"])
        self.assertNotIn("kTodo) throw", "".join(files.values()))

    def test_replay_table_knows_every_clip(self):
        text = cc.replay_table(cc.ROOT).decode()
        with open(os.path.join(cc.ROOT, "tests/fixtures/parity/tiny_clips.json")) as f:
            clips = json.load(f)["clips"]
        rows = re.findall(r"\{(\d+), (\d+), (\d+), (\d+)\},  // (\S+)", text)
        self.assertEqual(sorted(r[4] for r in rows), sorted(clips))
        tokens = [int(t) for t in re.findall(r"\d+", text.split("#define REPLAY_TOKENS")[1])]
        for _tokens, _frames, first, count, name in rows:
            self.assertEqual(tokens[int(first) : int(first) + int(count)], clips[name]["tokens"])
        keys = [(int(r[0]), int(r[1])) for r in rows]
        self.assertEqual(len(set(keys)), len(keys), "two clips the cheat cannot tell apart")


class Judge(unittest.TestCase):
    def setUp(self):
        self.work = tempfile.mkdtemp()
        self.honest = fake_grade(
            "control-baseline", instructor_items(), ["graded: 16 student file(s) of the submission"]
        )

    def verdict(self, name, g, gpu=False, **controls):
        return cc.verdict(
            cc.judge(
                SPECS[name],
                g,
                dict({"baseline": self.honest}, **controls),
                controls.get("student_files"),
                gpu,
                self.work,
            )
        )

    def test_a_tampered_harness_or_rubric_is_paid(self):
        sound = fake_grade("t", instructor_items())
        self.assertEqual(self.verdict("tampered_harness", sound), "caught")
        harness_used = fake_grade("t", instructor_items(lambda n, p: p))
        self.assertEqual(self.verdict("tampered_harness", harness_used), "PAID")
        rubric_used = fake_grade("t", {n: (0, 10 * p) for n, (_, p) in instructor_items().items()})
        self.assertEqual(self.verdict("tampered_harness", rubric_used), "PAID")

    def test_an_ignored_cmake_file_must_be_listed_and_never_run(self):
        listed = ["  ignored student/CMakeLists.txt: not student-owned"]
        self.assertEqual(
            self.verdict("cmake_edit", fake_grade("c", instructor_items(), listed)), "caught"
        )
        self.assertEqual(self.verdict("cmake_edit", fake_grade("c", instructor_items())), "PAID")
        ran = fake_grade("c", instructor_items(), listed, sentinel="/tmp/sentinel")
        self.assertEqual(self.verdict("cmake_edit", ran), "PAID")
        flagged = fake_grade(
            "c", instructor_items(), listed + ["INTEGRITY VIOLATION: cublasSgemm_v2"]
        )
        self.assertEqual(self.verdict("cmake_edit", flagged), "PAID")

    def test_a_vendor_call_must_be_flagged(self):
        listed = ["  ignored student/CMakeLists.txt: not student-owned"]
        flag = ["INTEGRITY VIOLATION (symbols): linear.cu.o: cublasSgemm_v2  [vendor library]"]
        self.assertEqual(
            self.verdict("cmake_edit_direct", fake_grade("d", instructor_items(), listed + flag)),
            "caught",
        )
        self.assertEqual(
            self.verdict("cmake_edit_direct", fake_grade("d", instructor_items(), listed)), "PAID"
        )

    def test_refusals_must_be_reported(self):
        refused = [f"  refused {n}: a reason" for n in SPECS["escape_paths"]["always"]["refused"]]
        self.assertEqual(
            self.verdict("escape_paths", fake_grade("e", instructor_items(), refused)), "caught"
        )
        self.assertEqual(
            self.verdict("escape_paths", fake_grade("e", instructor_items(), refused[1:])), "PAID"
        )
        os.makedirs(os.path.join(self.work, "watch", "tmp"))
        open(os.path.join(self.work, "watch", "tmp", "evil.cu"), "w").close()
        self.assertEqual(
            self.verdict("escape_paths", fake_grade("e", instructor_items(), refused)), "PAID"
        )

    def test_gpu_expectations(self):
        stubs = fake_grade("control-stubs", instructor_items())
        forged = fake_grade(
            "f", instructor_items(lambda n, p: p * 0.9 if n.startswith("kernel") else 0)
        )
        self.assertEqual(self.verdict("forged_report", forged, gpu=True, stubs=stubs), "PAID")
        self.assertEqual(self.verdict("forged_report", stubs, gpu=True, stubs=stubs), "caught")
        # runtime_vendor: flagged and zeroed, or sandboxed and no better than the honest baseline
        flag = ["INTEGRITY VIOLATION (mappings): /usr/lib/libcublas.so.13 in glmasr-student"]
        full_kernels = instructor_items(lambda n, p: p if n.startswith("kernel") else 0)
        honest = fake_grade("control-baseline", full_kernels, ["sandbox: unsandboxed local grade"])
        zeroed = fake_grade("v", instructor_items(), flag)
        self.assertEqual(
            self.verdict("runtime_vendor", zeroed, gpu=True, baseline=honest), "caught"
        )
        paid = fake_grade(
            "v", instructor_items(lambda n, p: p), ["sandbox: unsandboxed local grade"]
        )
        self.assertEqual(self.verdict("runtime_vendor", paid, gpu=True, baseline=honest), "PAID")
        fallback = fake_grade("v", full_kernels, ["sandbox: uid 65534, no network"])
        self.assertEqual(
            self.verdict("runtime_vendor", fallback, gpu=True, baseline=honest), "caught"
        )

    def test_no_results_is_no_verdict(self):
        g = cc.Grade("x", 2, "grade: building the grader's own programs failed")
        self.assertEqual(self.verdict("cmake_edit", g), "ERROR")

    def test_a_grade_not_given_is_no_verdict_on_a_gpu(self):
        # first_token_only at 0 speed points because the grader's own baseline ran out of GPU
        # memory proves nothing about the cheat.
        g = fake_grade("first_token_only", instructor_items())
        g.results["extra_data"] = {
            "status": "not graded",
            "reason": "speed vs baseline: the grader's own baseline run failed (out of memory)",
        }
        self.assertEqual(self.verdict("first_token_only", g, gpu=True), "ERROR")


if __name__ == "__main__":
    unittest.main()
