#!/usr/bin/env python3
"""Self-tests of the grader's arithmetic and rendering on recorded results (no GPU needed).

python3 -m grader.selftests.score_selftest
"""

import json
import math
import os
import unittest

from grader import ROOT
from grader.pipeline import sanitizer, score

RUBRIC = os.path.join(ROOT, "grader", "rubric.toml")


def gtest_report(cases):
    """A GoogleTest JSON report: cases = [(suite, name, failure message or None or 'SKIP')]."""
    suites = {}
    for suite, name, failure in cases:
        entry = {
            "name": name,
            "status": "RUN",
            "result": "SKIPPED" if failure == "SKIP" else "COMPLETED",
        }
        if failure and failure != "SKIP":
            entry["failures"] = [{"failure": failure, "type": ""}]
        suites.setdefault(suite, []).append(entry)
    return {"testsuites": [{"name": s, "testsuite": c} for s, c in suites.items()]}


def speed(ms, wrong_round=None, near_tie=False, warmup=1, repeats=2):
    """A run_speed result (grader/pipeline/e2e.py): median wall ms per role; the graded track's run
    `wrong_round` predicted another token than the baseline at step 3."""
    tracks = {
        role: {
            "track": role,
            "median_wall_ms": t,
            "error": None,
            "median_reported": {},
            "runs": [{}] * (warmup + repeats),
        }
        for role, t in ms.items()
    }
    verdicts = []
    for r in range(warmup + repeats):
        v = {
            "round": r,
            "warmup": r < warmup,
            "audio_seed": 7 + r,
            "equal": r != wrong_round,
            "first_difference": None if r != wrong_round else 3,
        }
        if r == wrong_round:
            v.update(expected=11, got=12, near_tie=near_tie)
        verdicts.append(v)
    return {"tracks": tracks, "tokens": {"graded": verdicts}, "warmup": warmup, "repeats": repeats}


def accuracy(clips, fresh_ok=True, checks=3):
    checks = [
        {
            "audio_seed": i,
            "equal": fresh_ok or i != checks - 1,
            "first_difference": None if fresh_ok or i != checks - 1 else 0,
            "expected": 5,
            "got": 6,
        }
        for i in range(checks)
    ]
    return {
        "clips": clips,
        "fresh_input": {"seed": 1, "checks": checks, "ok": fresh_ok, "error": None},
    }


class Wer(unittest.TestCase):
    def test_normalisation(self):
        self.assertEqual(
            score.normalise("Concord returned, to ITS place—amidst the tents."),
            ["concord", "returned", "to", "its", "place", "amidst", "the", "tents"],
        )
        self.assertEqual(score.normalise("don't 'quote'"), ["don't", "quote"])

    def test_errors(self):
        self.assertEqual(score.word_errors("a b c d", "a b c d"), (0, 4))
        self.assertEqual(score.word_errors("a b c d", "a x c d"), (1, 4))  # substitution
        self.assertEqual(score.word_errors("a b c d", "a c d"), (1, 4))  # deletion
        self.assertEqual(score.word_errors("a b c d", "a b b c d"), (1, 4))  # insertion
        self.assertEqual(score.word_errors("a b", ""), (2, 2))
        # Bag-of-words "accuracy" (the old course) would give 100 % here; WER does not.
        self.assertEqual(score.word_errors("the cat sat", "sat cat the the the"), (4, 3))

    def test_failed_clip_counts_every_word(self):
        r = score.clip_result("x.wav", "one two three", None, "crashed", False)
        self.assertEqual((r["errors"], r["words"], r["wer"]), (3, 3, 1.0))


class Kernels(unittest.TestCase):
    def test_passed(self):
        r = score.kernel_result(
            gtest_report([("RMSNorm", "a", None), ("RMSNorm", "b", None)]), 0, "", False, 300, 1.0
        )
        self.assertEqual((r["status"], r["passed"], r["total"]), ("passed", 2, 2))

    def test_not_implemented_message(self):
        msg = "not implemented: rmsnorm — see docs/kernels/rmsnorm.md"
        r = score.kernel_result(
            gtest_report([("RMSNorm", "a", "student: " + msg)]), 1, msg, False, 300, 1.0
        )
        self.assertEqual(r["status"], "failed")
        self.assertEqual(r["message"], msg)

    def test_crash_and_timeout(self):
        self.assertEqual(
            score.kernel_result(None, -11, "Segmentation fault", False, 300, 1)["status"], "crashed"
        )
        self.assertEqual(score.kernel_result(None, None, "", True, 300, 300)["status"], "timeout")

    def test_forged_report_is_rejected(self):
        r = score.kernel_result(gtest_report([("Linear", "a", None)]), 1, "", False, 300, 1)
        self.assertEqual((r["status"], r["passed"]), ("inconsistent", 0))

    def test_all_skipped(self):
        r = score.kernel_result(gtest_report([("Linear", "a", "SKIP")]), 0, "", False, 300, 1)
        self.assertEqual((r["status"], r["total"]), ("skipped", 0))


class Grading(unittest.TestCase):
    def setUp(self):
        self.rubric = score.load_rubric(RUBRIC)
        passing = {
            "status": "passed",
            "passed": 4,
            "total": 4,
            "message": "4 passed",
            "failures": [],
        }
        self.results = {
            "track": "student",
            "integrity": {"checked": True, "violations": []},
            "kernels": {k: dict(passing) for k in self.rubric["kernels"]["points"]},
            "accuracy": accuracy(
                [
                    score.clip_result(
                        "a.wav", "one two three four", "one two three four", None, False
                    )
                ]
            ),
            "speed": speed({"baseline": 1000.0, "graded": 1000.0, "reference": 10.0}),
        }

    def points(self, name, results=None):
        graded = score.grade(results or self.results, self.rubric)
        return next(i for i in graded["items"] if i["name"] == name)["score"], graded

    def test_full_kernels_and_accuracy(self):
        _, graded = self.points("accuracy (WER)")
        kernel_total = sum(self.rubric["kernels"]["points"].values())
        self.assertAlmostEqual(
            sum(i["score"] for i in graded["items"] if i["name"].startswith("kernel")), kernel_total
        )
        self.assertEqual(self.points("accuracy (WER)")[0], self.rubric["accuracy"]["points"])

    def test_partial_kernel_credit(self):
        self.results["kernels"]["linear"] = {
            "status": "failed",
            "passed": 1,
            "total": 4,
            "message": "3 of 4 failed",
            "failures": [],
        }
        self.assertAlmostEqual(
            self.points("kernel: linear")[0], self.rubric["kernels"]["points"]["linear"] / 4
        )

    def test_a_violation_zeroes_everything_the_code_produced(self):
        self.results["speed"] = speed({"baseline": 1000.0, "graded": 10.0, "reference": 10.0})
        for violation in (
            {"check": "symbols", "detail": "linear.cu.o: cublasSgemm_v2"},
            {"check": "mappings", "detail": "123: /usr/lib/libcublas.so.13"},
        ):
            self.results["integrity"]["violations"] = [violation]
            graded = score.grade(self.results, self.rubric)
            self.assertEqual(graded["score"], 0)
            for i in graded["items"]:
                self.assertIn("integrity violation", i["output"])
        # Seen by a kernel-test checker in its runner's memory maps: the same consequence.
        self.results["integrity"]["violations"] = []
        self.results["kernels"]["gelu"]["violations"] = ["vendor library mapped: 9: libcublas.so"]
        self.assertEqual(score.grade(self.results, self.rubric)["score"], 0)

    def test_checker_reports_its_runner_violation(self):
        report = gtest_report([("Linear", "a", "INTEGRITY VIOLATION: ...")])
        report["testsuites"][0]["testsuite"][0]["integrity_violation"] = "vendor library mapped: x"
        r = score.kernel_result(report, 1, "", False, 300, 1.0)
        self.assertEqual(r["violations"], ["vendor library mapped: x"])

    def test_wer_interpolation(self):
        ac = self.rubric["accuracy"]
        mid = (ac["full_wer"] + ac["zero_wer"]) / 2
        words = 1000
        errors = round(mid * words)
        self.results["accuracy"] = accuracy(
            [
                {
                    "clip": "a",
                    "reference": "",
                    "hypothesis": "",
                    "errors": errors,
                    "words": words,
                    "wer": errors / words,
                    "error": None,
                    "private": False,
                }
            ]
        )
        self.assertAlmostEqual(self.points("accuracy (WER)")[0], ac["points"] / 2, places=1)

    def test_replayed_transcripts_earn_nothing(self):
        # Perfect transcripts, but the process did not reproduce the trusted ids on inputs drawn
        # at grading time: the clips' ids were replayed, not computed.
        self.results["accuracy"] = accuracy(self.results["accuracy"]["clips"], fresh_ok=False)
        score_, graded = self.points("accuracy (WER)")
        self.assertEqual(score_, 0)
        self.results["speed"] = speed({"baseline": 1000.0, "graded": 10.0, "reference": 10.0})
        self.assertEqual(self.points("speed vs baseline")[0], 0)  # speed needs a correct track

    def test_speed_log_scale(self):
        pts = self.rubric["speed"]["points"]
        self.assertEqual(self.points("speed vs baseline")[0], 0)  # 1x: nothing
        self.results["speed"] = speed({"baseline": 1000.0, "graded": 10.0, "reference": 10.0})
        self.assertEqual(self.points("speed vs baseline")[0], pts)  # reference speed: all
        self.results["speed"] = speed({"baseline": 1000.0, "graded": 100.0, "reference": 10.0})
        self.assertAlmostEqual(self.points("speed vs baseline")[0], pts / 2)  # 10x of 100x: half

    def test_implausible_speed_flagged(self):
        self.results["speed"] = speed({"baseline": 1000.0, "graded": 1.0, "reference": 10.0})
        score_, graded = self.points("speed vs baseline")
        self.assertEqual(score_, 0)
        self.assertTrue(graded["speed"]["flagged"])

    def test_any_wrong_run_costs_the_speed_item(self):
        # Right on the first token, wrong later, in one timed run of three: nothing.
        self.results["speed"] = speed(
            {"baseline": 1000.0, "graded": 10.0, "reference": 10.0}, wrong_round=2
        )
        score_, graded = self.points("speed vs baseline")
        self.assertEqual(score_, 0)
        self.assertIn(
            "step 3", next(i for i in graded["items"] if i["name"] == "speed vs baseline")["output"]
        )
        # A difference on a near-tie of the trusted logits stands.
        self.results["speed"] = speed(
            {"baseline": 1000.0, "graded": 10.0, "reference": 10.0}, wrong_round=2, near_tie=True
        )
        self.assertEqual(self.points("speed vs baseline")[0], self.rubric["speed"]["points"])

    def test_yardsticks(self):
        self.results["track"] = "reference"
        self.results["speed"] = speed({"baseline": 1000.0, "graded": 10.0, "reference": 10.0})
        self.assertEqual(self.points("speed vs baseline")[0], self.rubric["speed"]["points"])
        self.results["track"] = "baseline"
        self.results["speed"] = speed({"baseline": 1000.0, "graded": 1000.0, "reference": 10.0})
        self.assertEqual(self.points("speed vs baseline")[0], 0)

    def test_the_timing_environment_is_on_record(self):
        gpu = {
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": "GPU-1234",
            "driver_version": "580.1",
            "clocks.sm": "1980 MHz",
            "clocks.mem": "2619 MHz",
            "clocks.max.sm": "1980 MHz",
            "temperature.gpu": "40",
            "power.draw": "140 W",
            "clocks_throttle_reasons.active": "0x0000000000000000",
        }
        self.results["environment"] = {"before": gpu, "after": dict(gpu)}
        graded = score.grade(self.results, self.rubric)
        gs = score.gradescope_results(graded)
        self.assertEqual(gs["extra_data"]["gpu_after_timed_runs"]["uuid"], "GPU-1234")
        self.assertIn("GPU before the timed runs: NVIDIA H100 80GB HBM3, 580.1", gs["output"])
        self.assertNotIn("throttled", gs["output"])
        self.results["environment"]["after"]["clocks_throttle_reasons.active"] = (
            "0x0000000000000021"
        )
        gs = score.gradescope_results(score.grade(self.results, self.rubric))
        self.assertIn("throttled after the timed runs (software thermal slowdown)", gs["output"])
        self.assertNotIn("NOT THE COURSE'S GPU", gs["output"])
        self.rubric["speed"]["gpu_model"] = "NVIDIA H200"
        gs = score.gradescope_results(score.grade(self.results, self.rubric))
        self.assertIn(
            "NOT THE COURSE'S GPU: timed on NVIDIA H100 80GB HBM3, the rubric's [speed] "
            "gpu_model is NVIDIA H200",
            gs["output"],
        )
        self.rubric["speed"]["gpu_model"] = "NVIDIA H100 80GB HBM3"
        gs = score.gradescope_results(score.grade(self.results, self.rubric))
        self.assertNotIn("NOT THE COURSE'S GPU", gs["output"])

    def test_a_throttled_round_is_cooled_down_and_timed_again(self):
        # grade.timed_rounds with a GPU that throttles after rounds 1 and 2 of 4 (power cap, then
        # thermal), then runs clean: round 3's result is the one kept, after two cool-downs.
        from grader.pipeline import grade

        states = iter(["0x0", "0x4", "0x20", "0x0", "0x0"])  # before, after rounds 1, 2, 3, (4)
        rounds, slept = iter(["round 1", "round 2", "round 3", "round 4"]), []
        environment = lambda: {"clocks_throttle_reasons.active": next(states), "uuid": "GPU-1"}
        result, env = grade.timed_rounds(lambda: next(rounds), 3, 60, environment, slept.append)
        self.assertEqual(result, "round 3")
        self.assertEqual(slept, [60, 60])
        self.assertEqual(
            [r["reasons"] for r in env["throttled_rounds"]],
            ["software power cap", "software thermal slowdown"],
        )
        self.results["environment"] = env
        gs = score.gradescope_results(score.grade(self.results, self.rubric))
        self.assertIn(
            "timed round 2 discarded: the GPU was throttled after it (software thermal "
            "slowdown); cooled down and timed again",
            gs["output"],
        )
        self.assertNotIn("throttled after the timed runs", gs["output"])
        self.assertEqual(len(gs["extra_data"]["throttled_rounds_discarded"]), 2)
        # Throttled every time: the last allowed round is kept and the report says it was slow.
        states = iter(["0x0", "0x40", "0x40"])
        result, env = grade.timed_rounds(lambda: "only", 1, 5, environment, slept.append)
        self.assertEqual(len(env["throttled_rounds"]), 1)
        self.results["environment"] = env
        gs = score.gradescope_results(score.grade(self.results, self.rubric))
        self.assertIn("throttled after the timed runs (hardware thermal slowdown)", gs["output"])

    def test_the_settings_of_the_timed_runs_are_on_record(self):
        # The workers' ready lines say which GEMM rung and attention path ran (e2e.run_speed).
        defaults = {"gemm": "cublas", "attention": "flash_bf16", "sync_check": False}
        tracks = self.results["speed"]["tracks"]
        tracks["reference"]["settings"] = dict(defaults)
        tracks["baseline"]["settings"] = {"gemm": None, "attention": None, "sync_check": False}
        tracks["graded"]["settings"] = {"gemm": "forged"}  # the graded code's word: not repeated
        graded = score.grade(self.results, self.rubric)
        gs = score.gradescope_results(graded)
        self.assertEqual(
            gs["extra_data"]["settings_of_timed_runs"],
            {"baseline": tracks["baseline"]["settings"], "reference": defaults},
        )
        line = (
            "settings of the timed runs: baseline gemm=n/a attention=n/a sync_check=off; "
            "reference gemm=cublas attention=flash_bf16 sync_check=off"
        )
        for text in (gs["output"], score.render_terminal(graded), score.render_markdown(graded)):
            self.assertIn(line, text)
            self.assertNotIn("forged", text)
            self.assertNotIn("did not run with their defaults", text)
        # A yardstick off its defaults moves the target: the report says so.
        tracks["reference"]["settings"]["gemm"] = "regtile"
        tracks["baseline"]["settings"]["sync_check"] = True
        gs = score.gradescope_results(score.grade(self.results, self.rubric))
        self.assertIn(
            "did not run with their defaults (reference gemm=regtile, baseline sync_check=on)",
            gs["output"],
        )
        # A reference capped to compute capability 8.x features (reported only when set).
        tracks["reference"]["settings"]["gemm"] = "cublas"
        tracks["baseline"]["settings"]["sync_check"] = False
        tracks["reference"]["settings"]["arch_cap"] = "80"
        gs = score.gradescope_results(score.grade(self.results, self.rubric))
        self.assertIn(
            "reference gemm=cublas attention=flash_bf16 sync_check=off arch_cap=80", gs["output"]
        )
        self.assertIn("did not run with their defaults (reference arch_cap=80)", gs["output"])
        # Older workers said nothing: nothing is claimed.
        for t in tracks.values():
            t.pop("settings")
        gs = score.gradescope_results(score.grade(self.results, self.rubric))
        self.assertNotIn("settings of the timed runs", gs["output"])
        self.assertNotIn("extra_data", gs)

    def test_sanitizer_verdicts(self):
        v = sanitizer.verdict
        same = {"S.a": "passed", "S.b": "failed"}
        clean = ["exit 0 exited with status 0"]
        self.assertEqual(v(clean, "", False, same, same)["verdict"], "clean")
        found = v(
            ["exit 0 exited with status 0", "exit 86 exited with status 86"],
            "========= COMPUTE-SANITIZER\n========= Race reported between Write access at "
            "softmax_kernel+0x90\n========= ERROR SUMMARY: 1 error",
            False,
            same,
            same,
        )
        self.assertEqual(found["verdict"], "errors")
        self.assertIn("Race reported", found["detail"])
        # Printing a clean summary changes nothing: the exit status decides.
        quiet = "========= ERROR SUMMARY: 0 errors"
        self.assertEqual(
            v(["exit 86 exited with status 86"], quiet, False, same, same)["verdict"], "errors"
        )
        # A runner that ends its sanitizer another way is not clean either.
        killed = ["exit 137 exited with status 137 (killed by signal 9, Killed)"]
        self.assertEqual(v(killed, "", False, same, same)["verdict"], "errors")
        # A runner that will not start under the sanitizer (it started without it).
        self.assertEqual(
            v(["nostart exited with status 1"], "", False, same, same)["verdict"], "errors"
        )
        self.assertEqual(
            v(["nostart exited with status 1"] + clean, "", False, same, same)["verdict"], "clean"
        )
        # Code that behaves otherwise when watched: a case that passed fails (it threw), a case
        # that ran is skipped, nothing runs at all. Each differs, and differing costs.
        thrown = v(clean, "", False, same, {"S.a": "failed", "S.b": "failed"})
        self.assertEqual(thrown["verdict"], "differs")
        self.assertIn("S.a: passed without it, failed under it", thrown["detail"])
        self.assertEqual(v(clean, "", False, same, {"S.a": "skipped"})["verdict"], "differs")
        self.assertEqual(v([], "", False, same, {})["verdict"], "differs")
        self.assertEqual(v(clean, "", False, same, {"S.z": "passed"})["verdict"], "differs")
        # Only a subset ran (the rubric's filter): each of those as before is clean.
        self.assertEqual(v(clean, "", False, same, {"S.b": "failed"})["verdict"], "clean")
        # A suite that does not finish under the tool is incomplete, and that costs too.
        self.assertEqual(v(clean, "", True, same, same)["verdict"], "incomplete")

    def test_sanitizer_findings_keep_at_most_half(self):
        kernel = next(iter(self.rubric["kernels"]["points"]))
        points = self.rubric["kernels"]["points"][kernel]
        self.results["sanitizer"] = {
            "ran": True,
            "tools": ["racecheck"],
            "seconds": 3.0,
            "kernels": {
                kernel: {
                    "racecheck": {
                        "verdict": "errors",
                        "detail": "it reported errors: Race",
                        "ran": "5 cases, 5 passed, 3 s",
                    }
                }
            },
        }
        score_, graded = self.points(f"kernel: {kernel}")
        self.assertEqual(score_, points * self.rubric["sanitizer"]["keep"])
        item = next(i for i in graded["items"] if i["name"] == f"kernel: {kernel}")
        self.assertIn(
            "compute-sanitizer racecheck (errors): it reported errors: Race", item["output"]
        )
        output = score.gradescope_results(graded)["output"]
        self.assertIn("compute-sanitizer pass (racecheck; 3 s): 1 errors", output)
        self.assertIn(f"{kernel} under racecheck: errors (5 cases, 5 passed, 3 s)", output)
        # Not finishing (a stall, a spent budget) and behaving otherwise cost the same share;
        # only clean keeps every point.
        for verdict in ("incomplete", "differs"):
            self.results["sanitizer"]["kernels"][kernel]["racecheck"] = {
                "verdict": verdict,
                "detail": "why",
            }
            self.assertEqual(
                self.points(f"kernel: {kernel}")[0], points * self.rubric["sanitizer"]["keep"]
            )
        self.results["sanitizer"]["kernels"][kernel]["racecheck"] = {
            "verdict": "clean",
            "detail": "",
        }
        self.assertEqual(self.points(f"kernel: {kernel}")[0], points)

    def test_a_failed_yardstick_leaves_the_submission_not_graded(self):
        # The trusted baseline's own run failed (e.g. out of GPU memory): no item is scored,
        # neither points given nor taken, and every report says NOT GRADED: environment.
        self.results["speed"] = speed({"baseline": None, "graded": 10.0, "reference": 10.0})
        self.results["speed"]["tracks"]["baseline"]["error"] = (
            "baseline (baseline): out of GPU memory"
        )
        score_, graded = self.points("speed vs baseline")
        self.assertEqual(score_, 0)
        self.assertEqual(graded["score"], 0)
        self.assertIn(
            "speed vs baseline: the grader's own baseline run failed", graded["not_graded"]
        )
        gs = score.gradescope_results(graded)
        self.assertTrue(gs["output"].startswith(f"track {graded['track']}"))
        self.assertIn("NOT GRADED: environment — speed vs baseline", gs["output"])
        self.assertEqual(gs["extra_data"]["status"], "not graded")
        self.assertNotIn("leaderboard", gs)
        self.assertTrue(all(t["output"].startswith("NOT GRADED: environment") for t in gs["tests"]))
        self.assertIn("total                    not graded", score.render_terminal(graded))
        # The graded track's own failure is its own: scored 0, the grade given.
        self.results["speed"]["tracks"]["graded"]["error"] = "graded (student): out of GPU memory"
        self.assertIsNone(self.points("speed vs baseline")[1]["not_graded"])
        # The accuracy item's trusted baseline failing on the fresh inputs: the same.
        self.results["accuracy"]["fresh_input"].update(
            error="baseline (baseline): died", trusted_error="baseline (baseline): died"
        )
        self.assertIn("accuracy (WER)", self.points("accuracy (WER)")[1]["not_graded"])

    def test_a_failed_preflight_leaves_the_submission_not_graded(self):
        full = score.grade(self.results, self.rubric)
        self.assertGreater(full["score"], 0)
        self.results["not_graded"] = "preflight before the grade: nvidia-smi lists no GPU"
        graded = score.grade(self.results, self.rubric)
        self.assertEqual(graded["score"], 0)
        self.assertEqual(graded["not_graded"], self.results["not_graded"])
        self.assertEqual(
            [i["max_score"] for i in graded["items"]], [i["max_score"] for i in full["items"]]
        )
        self.assertIn("Not graded (environment): preflight", score.render_markdown(graded))

    def test_results_json_and_reports(self):
        self.results["kernels"]["rmsnorm"] = {
            "status": "failed",
            "passed": 0,
            "total": 3,
            "message": "not implemented: rmsnorm",
            "failures": [],
        }
        self.results["intake"] = {
            "accepted": [{"path": "student/rmsnorm.cu"}],
            "ignored": [{"path": "grader/rubric.toml", "reason": "not student-owned"}],
            "refused": [{"path": "student/x.cu", "reason": "a symbolic link"}],
        }
        self.results["sandbox"] = "sandboxed: uid 65534"
        self.results["stubs"] = {"rmsnorm": "student/rmsnorm.cu"}
        graded = score.grade(self.results, self.rubric)
        gs = score.gradescope_results(graded)
        json.dumps(gs)
        self.assertEqual(gs["score"], round(graded["score"], 2))
        rms = next(t for t in gs["tests"] if t["name"] == "kernel: rmsnorm")
        self.assertEqual((rms["score"], rms["status"]), (0, "failed"))
        for t in gs["tests"]:
            self.assertTrue(
                {"name", "score", "max_score", "status", "output", "visibility"} <= set(t)
            )
        self.assertEqual(gs["leaderboard"][0]["order"], "asc")
        for text in (gs["output"], score.render_terminal(graded), score.render_markdown(graded)):
            self.assertIn("ignored grader/rubric.toml: not student-owned", text)
            self.assertIn("refused student/x.cu: a symbolic link", text)
            self.assertIn("sandbox: sandboxed: uid 65534", text)
            self.assertIn("still TODO (throw NotImplemented): rmsnorm", text)
        self.assertIn("not implemented: rmsnorm", score.render_terminal(graded))
        self.assertIn("| kernel: rmsnorm | 0.0 |", score.render_markdown(graded))


def kernel_rows(times):
    """A kernel_speed.run result: times = {(stage, op): (calls per run, {role: µs or an error})}."""
    rows = []
    for (stage, op), (calls, by_role) in times.items():
        us = {r: v for r, v in by_role.items() if not isinstance(v, str)}
        errors = {r: v for r, v in by_role.items() if isinstance(v, str)}
        rows.append(
            {
                "stage": stage,
                "op": op,
                "key": "k",
                "calls_per_run": calls,
                "us": {r: us.get(r) for r in score.KERNEL_SPEED_ROLES},
                "errors": errors,
            }
        )
    return {"rounds": 3, "target_ms": 20.0, "rows": rows, "errors": {}}


class KernelSpeed(unittest.TestCase):
    points = Grading.points

    def setUp(self):
        Grading.setUp(self)
        self.rubric["kernel_speed"]["points"] = 10
        self.results["kernel_speed"] = kernel_rows(
            {
                ("encoder", "linear"): (4, {"baseline": 100.0, "graded": 10.0, "reference": 9.0}),
                ("decode", "linear"): (10, {"baseline": 10.0, "graded": 1.0, "reference": 1.0}),
                ("encoder", "gelu"): (1, {"baseline": 50.0, "graded": 50.0, "reference": 5.0}),
                ("decode", "attention_scores"): (
                    2,
                    {"baseline": 8.0, "graded": 4.0, "reference": 1.0},
                ),
            }
        )

    def table(self):
        _, graded = self.points("kernel speed")
        return {r["op"]: r for r in graded["kernel_speed"]}

    def test_ops_sum_their_calls_over_stages(self):
        linear = self.table()["linear"]
        self.assertAlmostEqual(linear["graded_us"], 4 * 10 + 10 * 1)
        self.assertAlmostEqual(linear["baseline_us"], 4 * 100 + 10 * 10)
        self.assertAlmostEqual(linear["speedup"], 500 / 50)

    def test_cs149_credit(self):
        table = self.table()
        self.assertEqual(table["linear"]["share"], 1.0)  # within 1.25x of the reference
        self.assertEqual(table["gelu"]["share"], 0.0)  # as slow as the baseline
        # attention_scores: 8 us at 16 baseline, 2 reference: log(16/8) / log(16/2.5)
        self.assertAlmostEqual(table["attention_scores"]["share"], math.log(2) / math.log(6.4))
        points, _ = self.points("kernel speed")
        self.assertAlmostEqual(points, round(10 * (1 + 0 + math.log(2) / math.log(6.4)) / 3, 2))

    def test_a_kernel_whose_suite_failed_earns_nothing(self):
        self.results["kernels"]["attention"] = {
            "status": "failed",
            "passed": 3,
            "total": 4,
            "message": "1 of 4 failed",
            "failures": [],
        }
        row = self.table()["attention_scores"]
        self.assertEqual(row["share"], 0.0)
        self.assertIn("suite (attention) did not pass", row["note"])

    def test_a_kernel_whose_suite_did_not_run_earns_nothing(self):
        del self.results["kernels"]["gelu"]
        self.results["kernel_speed"]["rows"][2]["us"]["graded"] = 1.0
        row = self.table()["gelu"]
        self.assertEqual(row["share"], 0.0)
        self.assertIn("suite (gelu) did not pass", row["note"])

    def test_a_failed_call_is_shown_not_scored(self):
        self.results["kernel_speed"]["rows"][2]["us"]["graded"] = None
        self.results["kernel_speed"]["rows"][2]["errors"]["graded"] = "not implemented: gelu"
        row = self.table()["gelu"]
        self.assertIsNone(row["graded_us"])
        self.assertIsNone(row["share"])
        self.assertIn("graded: not implemented: gelu", row["note"])

    def test_information_only_by_default_and_in_every_report(self):
        self.rubric["kernel_speed"]["points"] = 0
        points, graded = self.points("kernel speed (information)")
        self.assertEqual(points, 0)
        item = next(i for i in graded["items"] if i["name"] == "kernel speed (information)")
        self.assertEqual(item["max_score"], 0)
        self.assertIn("information only", item["output"])
        self.assertIn("attention_scores", item["output"])
        self.assertIn(
            "| linear | 50.0 us | 500.0 us | 46.0 us | 10.00x | 100% |",
            score.render_markdown(graded),
        )

    def test_a_violation_or_no_measurement_earns_nothing(self):
        self.results["integrity"]["violations"] = [{"check": "symbols", "detail": "cublasSgemm"}]
        self.assertEqual(self.points("kernel speed")[0], 0)
        self.results["integrity"]["violations"] = []
        self.results["kernel_speed"] = {"rows": [], "errors": {"graded": "no CUDA programs"}}
        _, graded = self.points("kernel speed")
        item = next(i for i in graded["items"] if i["name"] == "kernel speed")
        self.assertEqual(
            (item["score"], item["output"]), (0, "not measured: graded: no CUDA programs")
        )


if __name__ == "__main__":
    unittest.main(verbosity=2)
