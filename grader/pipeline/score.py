"""score.py — rubric arithmetic, word error rate and report rendering for grade.py.

Everything here is pure: it turns recorded results (what the child processes produced) into
points and text, so it is tested without a GPU by grader/selftests/score_selftest.py.
"""

import math
import re
import tomllib

from grader.pipeline import review

# ----------------------------------------------------------------------------- rubric

DEFAULTS = {
    "kernels": {"partial": True, "timeout_seconds": 300, "visibility": "visible", "points": {}},
    "accuracy": {
        "points": 0,
        "visibility": "visible",
        "full_wer": 0.05,
        "zero_wer": 0.30,
        "fresh_checks": 3,
        "near_tie_margin": 0.05,
    },
    "speed": {
        "points": 0,
        "visibility": "visible",
        "target": 1.0,
        "implausible": 1.5,
        "near_tie_margin": 0.05,
        "requires_accuracy": True,
        "throttle_repeats": 2,
        "cooldown_seconds": 60,
        "gpu_model": "",
    },
    "kernel_speed": {
        "enabled": False,
        "points": 0,
        "visibility": "visible",
        "rounds": 3,
        "target_ms": 20.0,
        "full_within": 1.25,
        "none_beyond": 1.0,
        "timeout_seconds": 300,
    },
    "batch": {"timeout_minutes": 30, "retries": 2},
    "sanitizer": {
        "enabled": False,
        "program": "compute-sanitizer",
        "tools": [],
        "keep": 0.5,
        "filter": "*",
        "timeout_seconds": 600,
        "call_timeout_seconds": 300,
        "budget_seconds": 900,
    },
}


def load_rubric(path):
    with open(path, "rb") as f:
        rubric = tomllib.load(f)
    for section, values in DEFAULTS.items():
        merged = dict(values)
        merged.update(rubric.get(section, {}))
        rubric[section] = merged
    acc = rubric["accuracy"]
    if not 0 <= acc["full_wer"] < acc["zero_wer"]:
        raise ValueError(f"{path}: accuracy needs 0 <= full_wer < zero_wer")
    return rubric


# ----------------------------------------------------------------------------- WER


def normalise(text):
    """Lowercase, drop punctuation (apostrophes inside words stay), collapse whitespace."""
    text = text.lower().replace("’", "'")
    text = re.sub(r"[^\w\s']", " ", text)
    words = [w.strip("'") for w in text.split()]
    return [w for w in words if w]


def word_errors(reference, hypothesis):
    """Levenshtein distance between word lists: substitutions + deletions + insertions."""
    ref, hyp = normalise(reference), normalise(hypothesis)
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        previous, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (r != h))
    return row[len(hyp)], len(ref)


def clip_result(name, reference, hypothesis, error, private):
    if hypothesis is None:
        n = len(normalise(reference))
        return {
            "clip": name,
            "reference": reference,
            "hypothesis": None,
            "errors": n,
            "words": n,
            "wer": 1.0,
            "error": error,
            "private": private,
        }
    errors, words = word_errors(reference, hypothesis)
    return {
        "clip": name,
        "reference": reference,
        "hypothesis": hypothesis,
        "errors": errors,
        "words": words,
        "wer": errors / max(words, 1),
        "error": None,
        "private": private,
    }


# ----------------------------------------------------------------------------- kernel tests

NOT_IMPLEMENTED = re.compile(r"not implemented: [^\n]*")


def last_error_line(output):
    lines = [l.strip() for l in output.splitlines() if l.strip()]
    for line in reversed(lines):
        if "error" in line.lower() or "not implemented" in line:
            return line[:300]
    return lines[-1][:300] if lines else ""


def kernel_result_missing(message):
    return {"status": "missing", "passed": 0, "total": 0, "message": message, "failures": []}


def report_violations(report):
    """The integrity violations a checker's GoogleTest report records: written by the checker
    (no student code in it) when a runner's process tree maps code grader/pipeline/
    allowed_objects.txt does not allow (grader/isolation/runner/remote_track.cpp), on a case,
    or on the report itself when found as the runner was told to exit."""
    found = [report.get("integrity_violation")]
    for suite in report.get("testsuites", []):
        found.append(suite.get("integrity_violation"))
        found += [case.get("integrity_violation") for case in suite.get("testsuite", [])]
    return [str(v)[:300] for v in found if v]


def kernel_result(report, returncode, output, timed_out, timeout, seconds):
    """Classify one kernel test run from its GoogleTest JSON report and exit status."""
    result = {"passed": 0, "total": 0, "skipped": 0, "failures": [], "seconds": round(seconds, 1)}
    not_implemented = NOT_IMPLEMENTED.search(output)
    if timed_out:
        result.update(status="timeout", message=f"timed out after {timeout} s (a kernel hangs?)")
        return result
    if report is None:
        result.update(
            status="crashed",
            message=f"the test process died (exit {returncode}): " + last_error_line(output),
        )
        return result
    violations = report_violations(report)
    if violations:
        result["violations"] = violations
    for suite in report.get("testsuites", []):
        for case in suite.get("testsuite", []):
            if case.get("result") == "SKIPPED" or case.get("status") == "NOTRUN":
                result["skipped"] += 1
                continue
            result["total"] += 1
            failures = case.get("failures", [])
            if failures:
                text = failures[0].get("failure", "")
                result["failures"].append(f"{suite['name']}.{case['name']}: {text.strip()[:400]}")
            else:
                result["passed"] += 1
    if result["total"] == 0:
        result.update(status="skipped", message="no test ran (no GPU?)")
    elif result["passed"] == result["total"] and returncode != 0:
        # A clean report from a failing process: someone wrote the report, not GoogleTest.
        result.update(
            status="inconsistent",
            passed=0,
            message=f"report says all passed but the process exited {returncode}",
        )
    elif result["passed"] == result["total"]:
        result.update(status="passed", message=f"{result['passed']} passed")
    else:
        result.update(
            status="failed",
            message=(
                not_implemented.group(0)
                if not_implemented
                else f"{result['total'] - result['passed']} of {result['total']} failed"
            ),
        )
    return result


# ----------------------------------------------------------------------------- grading


def clamp01(x):
    return max(0.0, min(1.0, x))


def violations_of(results):
    """Every integrity violation of the graded code: the static checks (symbols, linkage), the
    memory maps of its end-to-end processes, and those its kernel-test runners showed. (Under
    compute-sanitizer, a runner's violation fails its case, so the suite differs from its run
    without the tool and costs the sanitizer share: sanitizer.py.)"""
    found = list((results.get("integrity") or {}).get("violations", []))
    for kernel, r in (results.get("kernels") or {}).items():
        found += [
            {"check": "mappings", "detail": f"kernel test {kernel}: {d}"}
            for d in r.get("violations", [])
        ]
    return found


def grade(results, rubric):
    """Points for every rubric item, with the reason written next to each.

    Consequences follow provenance: an integrity violation anywhere in the student's code zeroes
    every item that code produced — each kernel, the accuracy and the speed — and says why."""
    items = []
    violations = violations_of(results)
    broken = (
        (
            "integrity violation: "
            + violations[0]["detail"]
            + (f" (and {len(violations) - 1} more)" if len(violations) > 1 else "")
        )
        if violations
        else None
    )
    kc = rubric["kernels"]
    sanitizer = (results.get("sanitizer") or {}).get("kernels", {})
    for kernel, points in kc["points"].items():
        r = results.get("kernels", {}).get(kernel)
        if r is None:
            items.append(item(f"kernel: {kernel}", 0, points, "not run", kc["visibility"]))
            continue
        share = r["passed"] / r["total"] if r["total"] else 0.0
        if not kc["partial"] and share < 1:
            share = 0.0
        note = r["message"]
        found = {
            tool: v for tool, v in sanitizer.get(kernel, {}).items() if v["verdict"] != "clean"
        }
        if found:
            share = min(share, rubric["sanitizer"]["keep"])
            note += (
                "; compute-sanitizer "
                + "; ".join(f"{t} ({v['verdict']}): {v['detail']}" for t, v in found.items())
                + f" (at most {rubric['sanitizer']['keep']:.0%} of the points)"
            )
        if broken:
            share, note = 0.0, broken
        detail = "\n".join([note] + r.get("failures", [])[:5])
        items.append(
            item(
                f"kernel: {kernel}",
                points * share,
                points,
                detail,
                kc["visibility"],
                extra={"status": r["status"], "passed": r["passed"], "total": r["total"]},
            )
        )

    ac = rubric["accuracy"]
    accuracy = results.get("accuracy")
    clips, wer, accuracy_ok = [], None, False
    if accuracy is not None and ac["points"]:
        share, note, clips, wer, accuracy_ok = accuracy_share(
            accuracy, ac, trusted=results.get("track") in ("baseline", "reference")
        )
        if broken:
            share, note, accuracy_ok = 0.0, broken, False
        items.append(
            item(
                "accuracy (WER)",
                ac["points"] * share,
                ac["points"],
                note,
                ac["visibility"],
                extra={"wer": wer},
            )
        )

    sc = rubric["speed"]
    speed = results.get("speed")
    speed_info = None
    if speed is not None and sc["points"]:
        share, note, speed_info = speed_share(speed, sc, results.get("track"))
        if broken:
            share, note = 0.0, broken
        elif share > 0 and sc["requires_accuracy"] and accuracy is not None and not accuracy_ok:
            share, note = (
                0.0,
                (
                    "speed earns points only for a correct track, and the accuracy "
                    "item's check on fresh inputs failed; " + note
                ),
            )
        items.append(
            item(
                "speed vs baseline",
                sc["points"] * share,
                sc["points"],
                note,
                sc["visibility"],
                extra=speed_info,
            )
        )

    ks = rubric.get("kernel_speed")
    kernel_table = None
    if results.get("kernel_speed") is not None and ks:
        share, note, kernel_table = kernel_speed_share(results["kernel_speed"], ks, items)
        if broken:
            share, note = 0.0, broken
        items.append(
            item(
                "kernel speed" if ks["points"] else "kernel speed (information)",
                ks["points"] * share,
                ks["points"],
                note,
                ks["visibility"],
                extra={"kernels": kernel_table},
            )
        )

    not_graded = environment_failure(results, items)
    if not_graded:
        for i in items:
            i.update(score=0.0, output=f"{NOT_GRADED} (the report's first line says why)")
    total = sum(i["score"] for i in items)
    maximum = sum(i["max_score"] for i in items)
    return {
        "track": results.get("track"),
        "not_graded": not_graded,
        "items": items,
        "score": total,
        "max_score": maximum,
        "clips": clips,
        "wer": wer,
        "speed": speed_info,
        "kernel_speed": kernel_table,
        "violations": violations,
        "intake": results.get("intake"),
        "sandbox": results.get("sandbox"),
        "stubs": results.get("stubs") or {},
        "review": results.get("review"),
        "environment": results.get("environment"),
        "course_gpu": rubric["speed"]["gpu_model"],
        "timed_settings": timed_settings(speed),
        "sanitizer": results.get("sanitizer"),
        "build_error": results.get("build_error"),
        "execution_time": results.get("execution_time", 0),
    }


# The run-time choices the trusted workers report (glmasr's --gemm, --attention, --arch-cap,
# --sync-check, or the variables they set: GLMASR_GEMM, GLMASR_ATTENTION, GLMASR_ARCH_CAP,
# GLMASR_CUDA_SYNC), and the reference's defaults (reference/context.h), with which its speedup,
# the speed item's target, is measured (arch_cap is reported only when set).
TRUSTED_ROLES = ("baseline", "reference")
REFERENCE_DEFAULTS = {
    "gemm": "cublas",
    "attention": "flash_bf16",
    "arch_cap": None,
    "sync_check": False,
}


def timed_settings(speed):
    """{role: settings} for the trusted workers of the timed runs (the "settings" of their ready
    lines, e2e.run_speed), or None. The graded worker's own account is not repeated."""
    tracks = (speed or {}).get("tracks") or {}
    found = {
        role: tracks[role].get("settings")
        for role in TRUSTED_ROLES
        if isinstance(tracks.get(role), dict)
    }
    return {role: s for role, s in found.items() if isinstance(s, dict)} or None


def setting_text(value):
    """One setting's value as glmasr prints it: null n/a, booleans on/off."""
    return (
        "n/a"
        if value is None
        else ("on" if value else "off")
        if isinstance(value, bool)
        else str(value)
    )


def settings_text(settings):
    """ "gemm=cublas attention=flash_bf16 sync_check=off", as glmasr prints it."""
    keys = ["gemm", "attention", "sync_check"]
    keys += sorted(set(settings) - set(keys))
    return " ".join(f"{k}={setting_text(settings.get(k))}" for k in keys)


def settings_warning(timed):
    """A line if a yardstick did not run as measured: the reference off its defaults, or either
    trusted track synchronising after every launch. Else None."""
    reference = timed.get("reference") or {}
    off = [
        f"reference {k}={setting_text(reference.get(k))}"
        for k, v in REFERENCE_DEFAULTS.items()
        if reference and reference.get(k) != v
    ]
    if (timed.get("baseline") or {}).get("sync_check"):
        off.append("baseline sync_check=on")
    if not off:
        return None
    return (
        f"the yardsticks did not run with their defaults ({', '.join(off)}): the speed "
        "target is not the usual one; regrade without GLMASR_GEMM, GLMASR_ATTENTION, "
        "GLMASR_ARCH_CAP and GLMASR_CUDA_SYNC set"
    )


def item(name, score, max_score, output, visibility, extra=None):
    return {
        "name": name,
        "score": round(score, 2),
        "max_score": max_score,
        "output": output,
        "visibility": visibility,
        "extra": extra or {},
    }


def tokens_note(verdict, what):
    return (
        f"{what}: the prediction at step {verdict['first_difference']} is "
        f"{verdict.get('got')}, the trusted baseline's {verdict.get('expected')} "
        f"(audio seed {verdict.get('audio_seed')})"
    )


def accepted(verdict):
    """A token verdict that stands: equal, or a difference on a near-tie of the trusted logits."""
    return verdict.get("equal") or verdict.get("near_tie", False)


def accuracy_share(accuracy, ac, trusted=False):
    """WER over the clips, earned only if the graded process also reproduced the trusted
    baseline's token ids on inputs drawn at grading time (transcripts a process can produce
    without its kernels computing them — a replay of the shipped clips' ids — are worth nothing).
    The yardstick tracks (trusted code; the reference computes in bf16 and may part from the
    baseline's f32 on a teacher-forced input) are not held to it.
    Returns (share, note, clips, wer, fresh inputs ok)."""
    if "error" in accuracy:
        return 0.0, accuracy["error"], [], None, False
    clips = accuracy.get("clips", [])
    errors = sum(c["errors"] for c in clips)
    words = sum(c["words"] for c in clips)
    wer = errors / max(words, 1)
    share = clamp01((ac["zero_wer"] - wer) / (ac["zero_wer"] - ac["full_wer"]))
    failed = [c for c in clips if c["error"]]
    note = f"WER {wer:.2%} over {len(clips)} clips ({words} words)"
    if failed:
        note += f"; {len(failed)} clip(s) failed: {failed[0]['error']}"
    fresh = accuracy.get("fresh_input") or {}
    checks = fresh.get("checks", [])
    ok = (
        bool(checks)
        and fresh.get("error") is None
        and all(accepted(v) for v in checks)
        and len(checks) >= ac["fresh_checks"]
    )
    if trusted:
        return share, note + " (a trusted track: no fresh-input check)", clips, wer, True
    if fresh.get("trusted_error"):
        return (
            0.0,
            note + "; not scored: " + yardstick_failure("baseline", fresh["trusted_error"]),
            clips,
            wer,
            False,
        )
    if not ok:
        bad = next((v for v in checks if not accepted(v)), None)
        why = fresh.get("error") or (tokens_note(bad, "a fresh input") if bad else "no check ran")
        return (
            0.0,
            note + "; no points: the token ids on inputs drawn at grading time are not "
            "the trusted baseline's — " + why,
            clips,
            wer,
            False,
        )
    return (
        share,
        note + f"; {len(checks)} fresh inputs token-identical to the trusted baseline",
        clips,
        wer,
        True,
    )


# A grade this machine could not give. Its environment failed — the preflight (preflight.py)
# before or after the grade, or one of the grader's own trusted runs (the baseline or the
# reference: no student code) during it, e.g. a busy or faulty GPU or a missing file. Then no
# item is scored, neither points given nor taken: the report, results.json and the batch say
# NOT GRADED, and grade.py exits 3 so that a batch grades the submission again. (A student's
# process that starves a trusted one, e.g. of GPU memory, gains nothing by it.)
NOT_GRADED = "NOT GRADED: environment"
YARDSTICK_FAILED = "the grader's own"


def yardstick_failure(role, error):
    """The note of an item whose trusted run failed; grade() turns it into NOT GRADED."""
    return f"{YARDSTICK_FAILED} {role} run failed ({error})"


def environment_failure(results, items):
    """Why this machine could not grade, one line; None when it could: the grade's own finding
    (results["not_graded"]), else the first item whose trusted run failed."""
    if results.get("not_graded"):
        return results["not_graded"]
    for i in items:
        at = i["output"].find(YARDSTICK_FAILED)
        if at >= 0:
            return f"{i['name']}: " + i["output"][at:].splitlines()[0]
    return None


def speed_share(speed, sc, track):
    """Log-scale speed credit between 1x (baseline) and the reference's measured speedup, from
    the grader's own clock; nothing unless every run of the graded track (warm-ups included)
    predicted the trusted baseline's tokens for the same input."""
    if "error" in speed:
        return 0.0, speed["error"], None
    tracks = speed["tracks"]
    if tracks.get("graded", {}).get("error"):  # the graded track's own failure first
        return 0.0, tracks["graded"]["error"], None  # e2e names the worker
    for role in ("baseline", "reference"):
        if tracks.get(role, {}).get("error"):
            return 0.0, "not scored: " + yardstick_failure(role, tracks[role]["error"]), None
    t_base = tracks["baseline"]["median_wall_ms"]
    t = tracks["graded"]["median_wall_ms"]
    t_ref = tracks["reference"]["median_wall_ms"]
    s, s_ref = t_base / t, t_base / t_ref
    info = {
        "baseline_ms": t_base,
        "track_ms": t,
        "reference_ms": t_ref,
        "speedup": s,
        "reference_speedup": s_ref,
        "runs": len(tracks["graded"].get("runs", [])),
        "breakdown": {role: tracks[role].get("median_reported") for role in tracks},
    }
    verdicts = speed.get("tokens", {}).get("graded", [])
    expected_runs = speed.get("warmup", 0) + speed.get("repeats", 0)
    bad = next((v for v in verdicts if not accepted(v)), None)
    trusted = track in ("baseline", "reference")  # the yardsticks themselves: no student code
    if not trusted and (bad or len(verdicts) < expected_runs):
        return (
            0.0,
            (
                tokens_note(bad, f"timed run {bad['round']}")
                if bad
                else f"only {len(verdicts)} of {expected_runs} runs could be checked"
            )
            + " — a wrong result earns no speed points",
            info,
        )
    if s > sc["implausible"] * s_ref:
        info["flagged"] = True
        return (
            0.0,
            (f"speedup {s:.1f}x is implausible (reference {s_ref:.1f}x): flagged for review"),
            info,
        )
    goal = s_ref * sc["target"]
    if goal <= 1.0:
        return 0.0, f"the reference is not faster than the baseline here ({s_ref:.2f}x)", info
    share = clamp01(math.log(max(s, 1e-9)) / math.log(goal))
    return (
        share,
        (
            f"{t:.1f} ms vs baseline {t_base:.1f} ms = {s:.2f}x (reference "
            f"{s_ref:.2f}x); {len(verdicts)} runs token-checked"
        ),
        info,
    )


# ----------------------------------------------------------------------------- kernel speed

KERNEL_SPEED_ROLES = ("baseline", "graded", "reference")


def suite_of(op, suites):
    """The kernel suite (rubric [kernels.points] key) that tests `op`: its own name, else its
    family (attention_scores → attention, rope_apply → rope); None if no suite covers it."""
    if op in suites:
        return op
    family = op.split("_")[0]
    return family if family in suites else None


def per_op(kernel_speed):
    """{op: {"us": {role: µs per workload run or None}, "error": first error or None}}: the rows
    of each op summed over its calls (every stage)."""
    ops = {}
    for row in kernel_speed.get("rows", []):
        o = ops.setdefault(
            row["op"], {"us": {role: 0.0 for role in KERNEL_SPEED_ROLES}, "error": None}
        )
        for role in KERNEL_SPEED_ROLES:
            us = row["us"].get(role)
            if us is None or o["us"][role] is None:
                o["us"][role] = None
                if o["error"] is None and role in row["errors"]:
                    o["error"] = f"{role}: {row['errors'][role]}"
            else:
                o["us"][role] += us * row["calls_per_run"]
    return ops


def op_share(us, rule):
    """CS149-style credit of one kernel: full within `full_within` × the reference's time, none
    at or beyond `none_beyond` × the baseline's, log-scale between. None: not measurable."""
    t, t_base, t_ref = us["graded"], us["baseline"], us["reference"]
    if None in (t, t_base, t_ref) or t <= 0:
        return None
    slowest, full = rule["none_beyond"] * t_base, rule["full_within"] * t_ref
    if t <= full:
        return 1.0
    if t >= slowest or slowest <= full:
        return 0.0
    return math.log(slowest / t) / math.log(slowest / full)


def kernel_speed_share(measured, ks, items):
    """The per-kernel table (kernel_speed.py) and its credit: the mean of every kernel's
    op_share, a kernel counting only if its suite passed in full. Returns (share, note, table)."""
    by_name = {i["name"]: i for i in items}
    suites = [name[len("kernel: ") :] for name in by_name if name.startswith("kernel: ")]
    off_path = measured.get("off_path") or {}
    table = []
    for op, o in sorted(per_op(measured).items()):
        us = o["us"]
        suite = suite_of(op, suites)
        suite_item = by_name.get(f"kernel: {suite}")
        share = op_share(us, ks)
        why = o["error"] or off_path.get(op, {}).get("note")
        passed = (
            suite_item
            and suite_item["extra"].get("total")
            and suite_item["extra"].get("passed") == suite_item["extra"]["total"]
        )
        if share is not None and not passed:
            failed = f"its suite ({suite}) did not pass in full"
            share, why = 0.0, f"{why}; {failed}" if why else failed
        table.append(
            {
                "op": op,
                "graded_us": us["graded"],
                "baseline_us": us["baseline"],
                "reference_us": us["reference"],
                "speedup": us["baseline"] / us["graded"]
                if us["graded"]
                and us["baseline"]
                and "graded" not in off_path.get(op, {}).get("roles", {})
                else None,
                "share": share,
                "note": why,
            }
        )
    errors = measured.get("errors") or {}
    if "baseline" in errors:
        return 0.0, "not measured: " + yardstick_failure("baseline", errors["baseline"]), table
    if not table:
        return (
            0.0,
            "not measured: "
            + ("; ".join(f"{role}: {e}" for role, e in errors.items()) or "no kernel call to time"),
            table,
        )
    shares = [r["share"] or 0.0 for r in table]
    share = sum(shares) / len(shares)
    note = (
        f"{sum(1 for s in shares if s >= 1)} of {len(table)} kernels within "
        f"{ks['full_within']:g}x of the reference, times per workload run by the grader's clock "
        f"({measured.get('rounds')} rounds, L2 flushed)"
    )
    if not ks["points"]:
        note += "; information only: the rubric gives kernel speed no points"
    return share, note + "\n" + kernel_table_text(table), table


def us_text(us):
    return "n/a" if us is None else (f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.1f} us")


def kernel_table_text(table):
    """The per-kernel table as fixed-width text (results.json's output, the terminal)."""
    lines = [f"{'kernel':<18} {'graded':>10} {'baseline':>10} {'reference':>10} {'speedup':>8}"]
    for r in table:
        speedup = f"{r['speedup']:.2f}x" if r["speedup"] else "n/a"
        lines.append(
            f"{r['op']:<18} {us_text(r['graded_us']):>10} {us_text(r['baseline_us']):>10} "
            f"{us_text(r['reference_us']):>10} {speedup:>8}"
            + (f"  {r['note']}" if r["note"] else "")
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------- output


def gradescope_results(graded):
    """Gradescope's results.json: every test defaults to its computed score, never to full."""
    tests = [
        {
            "name": i["name"],
            "score": i["score"],
            "max_score": i["max_score"],
            "status": "passed" if i["score"] >= i["max_score"] else "failed",
            "output": i["output"],
            "visibility": i["visibility"],
        }
        for i in graded["items"]
    ]
    lines = [f"track {graded['track']}: {graded['score']:.1f} / {graded['max_score']}"]
    lines += context_lines(graded)
    out = {
        "score": round(graded["score"], 2),
        "execution_time": round(graded["execution_time"], 1),
        "output": "\n".join(lines),
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    }
    if graded["not_graded"]:
        out["extra_data"] = {
            "status": "not graded",
            "kind": "environment",
            "reason": graded["not_graded"],
        }
        return out
    env = graded.get("environment") or {}
    extra = {}
    if env:
        extra = {
            "gpu_before_timed_runs": env.get("before"),
            "gpu_after_timed_runs": env.get("after"),
            "throttled_rounds_discarded": env.get("throttled_rounds") or [],
        }
    if graded.get("timed_settings"):
        extra["settings_of_timed_runs"] = graded["timed_settings"]
    if graded.get("review"):
        extra["review"] = graded["review"]
    if extra:
        out["extra_data"] = extra
    if graded["speed"]:
        out["leaderboard"] = [
            {
                "name": "end-to-end ms",
                "value": round(graded["speed"]["track_ms"], 2),
                "order": "asc",
            },
            {"name": "speedup", "value": round(graded["speed"]["speedup"], 2), "order": "desc"},
        ]
    return out


def context_lines(graded):
    """What was graded, how, and what was found: intake, sandbox, integrity, stubs, GPU."""
    lines = []
    if graded["not_graded"]:
        lines.append(
            f"{NOT_GRADED} — {graded['not_graded']}. This is not a score for the code: this "
            "machine could not grade it. Grade it again where the environment works (a batch "
            "does so itself)."
        )
    record = graded.get("intake")
    if record is None:
        lines.append("graded: this checkout as it is (local feedback, not a pristine intake)")
    else:
        lines.append(
            f"graded: {len(record['accepted'])} student file(s) of the submission in a "
            f"pristine instructor tree; {len(record['ignored'])} ignored, "
            f"{len(record['refused'])} refused"
        )
        lines += [f"  refused {r['path']}: {r['reason']}" for r in record["refused"][:10]]
        lines += [f"  ignored {r['path']}: {r['reason']}" for r in record["ignored"][:10]]
        if len(record["ignored"]) > 10:
            lines.append(f"  ... and {len(record['ignored']) - 10} more ignored")
    if graded.get("sandbox"):
        lines.append(f"sandbox: {graded['sandbox']}")
    if graded.get("build_error"):
        lines.append(f"build: {graded['build_error']}")
    for v in graded["violations"][:10]:
        lines.append(f"INTEGRITY VIOLATION ({v['check']}): {v['detail']}")
    if graded["stubs"]:
        lines.append("still TODO (throw NotImplemented): " + ", ".join(sorted(graded["stubs"])))
    san = graded.get("sanitizer")
    if san:
        if not san["ran"]:
            lines.append(f"compute-sanitizer pass: not run ({san['why']})")
        else:
            counts = {}
            for tools in san["kernels"].values():
                for v in tools.values():
                    counts[v["verdict"]] = counts.get(v["verdict"], 0) + 1
            lines.append(
                f"compute-sanitizer pass ({', '.join(san['tools'])}; {san['seconds']:.0f} s): "
                + (", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no kernel to check")
            )
            lines += [
                f"  {k} under {t}: {v['verdict']}"
                + (f" ({v['ran']})" if v.get("ran") else "")
                + (f" — {v['detail']}" if v["detail"] else "")
                for k, tools in san["kernels"].items()
                for t, v in tools.items()
            ]
    env = graded.get("environment") or {}
    if env.get("before"):
        lines.append(f"GPU before the timed runs: {gpu_line(env['before'])}")
        model = env["before"].get("name") if isinstance(env["before"], dict) else None
        if graded.get("course_gpu") and model and model != graded["course_gpu"]:
            lines.append(
                f"NOT THE COURSE'S GPU: timed on {model}, the rubric's [speed] gpu_model is "
                f"{graded['course_gpu']}: speedups are not comparable with the class's"
            )
        lines.append(f"GPU after: {gpu_line(env.get('after'))}")
        for n, round_ in enumerate(env.get("throttled_rounds") or [], 1):
            lines.append(
                f"timed round {n} discarded: the GPU was throttled after it "
                f"({round_['reasons']}); cooled down and timed again"
            )
        reasons = throttled(env.get("after"))
        if reasons:
            lines.append(
                f"the GPU was throttled after the timed runs ({reasons}): its times may "
                "be slow; compare with a regrade"
            )
    timed = graded.get("timed_settings")
    if timed:
        lines.append(
            "settings of the timed runs: "
            + "; ".join(f"{role} {settings_text(s)}" for role, s in timed.items())
        )
        warning = settings_warning(timed)
        if warning:
            lines.append(warning)
    return lines


# clocks_throttle_reasons.active bits that slow a timed run (nvidia-smi; NVML's
# nvmlClocksThrottleReasons): not 0x1 (idle) nor 0x2 (application clocks setting).
THROTTLE_BITS = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}


def gpu_line(gpu):
    """The report's one line for a timing_environment() record (a dict, or an older string)."""
    if not isinstance(gpu, dict):
        return str(gpu)
    return (
        ", ".join(
            gpu.get(k, "?")
            for k in ("name", "driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm")
        )
        + f", {gpu.get('temperature.gpu', '?')} C, {gpu.get('power.draw', '?')}, throttle "
        f"{gpu.get('clocks_throttle_reasons.active', '?')}, {gpu.get('uuid', '?')}"
    )


def throttled(gpu):
    """The names of the slowing throttle reasons active in a record, "" if none."""
    try:
        active = int(gpu["clocks_throttle_reasons.active"], 16)
    except (TypeError, KeyError, ValueError):
        return ""
    return ", ".join(name for bit, name in THROTTLE_BITS.items() if active & bit)


def render_terminal(graded):
    lines = [f"GLM-ASR Kernel Lab — grading track '{graded['track']}'", ""]
    lines += context_lines(graded) + [""]
    lines.append(f"{'item':<24} {'score':>12}  details")
    lines.append("-" * 78)
    for i in graded["items"]:
        first = i["output"].splitlines()[0] if i["output"] else ""
        lines.append(f"{i['name']:<24} {i['score']:>5.1f} / {i['max_score']:<4}  {first}")
    lines.append("-" * 78)
    lines.append(
        f"{'total':<24} not graded (environment)"
        if graded["not_graded"]
        else f"{'total':<24} {graded['score']:>5.1f} / {graded['max_score']}"
    )
    if graded["clips"]:
        lines += ["", f"{'clip':<22} {'WER':>6}  transcript"]
        for c in graded["clips"]:
            if c["private"]:
                lines.append(f"{'(private)':<22} {c['wer']:>6.1%}")
                continue
            text = c["hypothesis"] if c["hypothesis"] is not None else f"ERROR: {c['error']}"
            lines.append(f"{c['clip'][:22]:<22} {c['wer']:>6.1%}  {text[:60]}")
    return "\n".join(lines)


def render_markdown(graded):
    md = [
        f"# Grade report — track `{graded['track']}`",
        "",
        f"**Not graded (environment): {graded['not_graded']}**"
        if graded["not_graded"]
        else f"**Total: {graded['score']:.1f} / {graded['max_score']}**",
        "",
    ]
    md += [f"- {line.strip()}" for line in context_lines(graded)]
    md += ["", "| item | score | max | details |", "|---|---:|---:|---|"]
    for i in graded["items"]:
        details = i["output"].replace("\n", "<br>").replace("|", "\\|")
        md.append(f"| {i['name']} | {i['score']:.1f} | {i['max_score']} | {details} |")
    if graded.get("review"):
        md += ["", "## For review (information, not scored)", ""]
        md += [f"- {line}" for line in review.render(graded["review"])]
    if graded["clips"]:
        md += [
            "",
            "## Transcriptions",
            "",
            "| clip | WER | reference | transcript |",
            "|---|---:|---|---|",
        ]
        for c in graded["clips"]:
            if c["private"]:
                md.append(f"| (private) | {c['wer']:.1%} | | |")
                continue
            hyp = c["hypothesis"] if c["hypothesis"] is not None else f"**error:** {c['error']}"
            md.append(f"| {c['clip']} | {c['wer']:.1%} | {c['reference']} | {hyp} |")
    if graded["speed"]:
        s = graded["speed"]
        md += [
            "",
            "## Speed (median wall time per run, measured by the grader; Nano shapes)",
            "",
            "| track | ms | speedup vs baseline |",
            "|---|---:|---:|",
            f"| baseline | {s['baseline_ms']:.1f} | 1.00x |",
            f"| {graded['track']} | {s['track_ms']:.1f} | {s['speedup']:.2f}x |",
            f"| reference | {s['reference_ms']:.1f} | {s['reference_speedup']:.2f}x |",
        ]
        breakdown = s.get("breakdown") or {}
        if any(breakdown.values()):
            md += ["", "Stage medians each process reported (CUDA events; information only):", ""]
            for role, stages in breakdown.items():
                if stages:
                    md.append(f"- {role}: " + ", ".join(f"{k} {v:.2f}" for k, v in stages.items()))
    if graded.get("kernel_speed"):
        md += [
            "",
            "## Per-kernel speed (time per workload run at the model's shapes, measured by the "
            "grader; L2 flushed before every call)",
            "",
            f"| kernel | {graded['track']} | baseline | reference | speedup vs baseline | credit | note |",
            "|---|---:|---:|---:|---:|---:|---|",
        ]
        for r in graded["kernel_speed"]:
            credit = "n/a" if r["share"] is None else f"{r['share']:.0%}"
            speedup = f"{r['speedup']:.2f}x" if r["speedup"] else "n/a"
            md.append(
                f"| {r['op']} | {us_text(r['graded_us'])} | {us_text(r['baseline_us'])} | "
                f"{us_text(r['reference_us'])} | {speedup} | {credit} | "
                f"{(r['note'] or '').replace('|', '/')} |"
            )
    md += ["", "## Integrity", ""]
    md += [f"- {v['check']}: {v['detail']}" for v in graded["violations"]] or [
        "No violation found."
    ]
    return "\n".join(md) + "\n"
