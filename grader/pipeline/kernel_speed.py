"""kernel_speed.py — every kernel's time at the model's shapes, measured by the grader's clock.

The end-to-end speed item says how fast a track is; this says where: for every primitive of the
contract, the time the graded track's kernel takes at the shapes GLM-ASR calls it with, beside
the baseline's and the reference's (CS149-style per-kernel targets).

How it is measured without trusting the graded process:
  - `glmasr kernel-bench --worker --tracks T` (driver/cli/kernel_bench.cpp) runs one workload,
    keeps a copy of the arguments of every distinct op call (its "rows"), then serves requests:
    {"row": i, "calls": n} runs row i n times, each after an L2 flush; {"flush": n} runs the
    flushes alone. One worker per track: baseline and reference from the trusted program, the
    graded track from its own (sandboxed) program.
  - This process times every request with its own clock; a row's time per call is
    (row request − flush request) / n, the median over `rounds` rounds that alternate B G R.
    The rows (stage, op, shape, calls per run) come from the trusted baseline's ready line; the
    graded worker's rows are only matched against them.
  - What this cannot see: a kernel that notices it is called again on the same bytes and skips
    the work. The inputs of a row never change, so per-kernel speed is information unless the
    rubric gives it points ([kernel_speed] points), and earns them only for a kernel whose
    suite passed; the end-to-end speed item, on inputs drawn at grading time, stays the
    measure that cannot be replayed.

Standard library only.
"""

import statistics

from grader.pipeline import e2e, score

ROLES = score.KERNEL_SPEED_ROLES
MAX_CALLS = 2000  # calls in one request, at most


def run(
    trusted_bin,
    graded_bin,
    graded_track,
    workload_args,
    *,
    ready_timeout,
    request_timeout,
    rounds=3,
    target_ms=20.0,
    launch_graded=None,
    inspect_graded=None,
    graded_deadline=None,
    baseline_track="baseline",
    reference_track="reference",
):
    """Time every row of the workload on the three tracks. Returns
      {"rounds", "target_ms", "device", "rows": [{stage, op, key, calls_per_run,
        "us": {role: µs per call or None}, "errors": {role: line}}], "errors": {role: line}}.
    A worker that fails keeps its one-line error; the other tracks finish. Every wait for the
    graded worker ends at graded_deadline (time.monotonic()) at the latest."""
    plan = [
        ("baseline", trusted_bin, baseline_track, None, None),
        (
            "graded",
            graded_bin or trusted_bin,
            graded_track,
            launch_graded if graded_bin else None,
            inspect_graded if graded_bin else None,
        ),
        ("reference", trusted_bin, reference_track, None, None),
    ]
    workers = {}
    try:
        for role, binary, track, launch, inspect in plan:
            argv = [binary, "kernel-bench", "--worker", "--tracks", track, *workload_args]
            workers[role] = e2e.Worker(
                argv,
                launch,
                name=f"{role} ({track})",
                wait=False,
                inspect=inspect,
                deadline=graded_deadline if role == "graded" else None,
            )
        for role in ROLES:
            workers[role].wait_ready(ready_timeout)
        return measure(workers, rounds, target_ms, request_timeout)
    finally:
        for w in workers.values():
            w.close()


def signature(worker):
    """The (stage, op, key) of every row of a worker's ready line, in its order."""
    rows = (worker.ready or {}).get("rows")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return None
    return [(r.get("stage"), r.get("op"), r.get("key")) for r in rows]


def measure(workers, rounds, target_ms, request_timeout):
    errors = {role: w.error for role, w in workers.items() if w.error}
    result = {
        "rounds": rounds,
        "target_ms": target_ms,
        "rows": [],
        "errors": errors,
        "device": (workers["baseline"].ready or {}).get("device"),
    }
    if "baseline" in errors:
        return result
    # Every track captures the same workload through the same driver, so its rows are the
    # baseline's, in the same order: row i is one call everywhere, and a graded worker cannot
    # choose which of its rows answers for a call.
    expected = signature(workers["baseline"])
    for role, w in workers.items():
        if role not in errors and signature(w) != expected:
            errors[role] = f"{w.name}: its rows are not the trusted baseline's"
    flush_cache = {}

    def timed(role, request):
        w = workers[role]
        if not w.alive:
            return None, w.error or "the worker stopped"
        reply, wall_ms = w.request(request, request_timeout)
        if not w.alive:
            return None, w.error or "no reply"
        if reply.get("ok") is not True:
            return None, str(reply.get("error") or "the request failed")[:300]
        return wall_ms, None

    def per_call_us(role, row, calls):
        wall, error = timed(role, {"row": row, "calls": calls})
        if error:
            return None, error
        key = (role, calls)
        if key not in flush_cache:
            flush_cache[key], error = timed(role, {"flush": calls})
            if error:
                return None, error
        return max(wall - flush_cache[key], 0.0) * 1000.0 / calls, None

    for i, r in enumerate(workers["baseline"].ready["rows"]):
        if r.get("status", "ok") != "ok":
            continue
        row = {
            "stage": r["stage"],
            "op": r["op"],
            "key": r["key"],
            "calls_per_run": r["calls_per_run"],
            "us": {},
            "errors": {},
        }
        # Calls per request: enough for `target_ms` of the baseline's kernel.
        probe, error = per_call_us("baseline", i, 3)
        calls = 3 if error or not probe else int(min(MAX_CALLS, max(3, target_ms * 1000 / probe)))
        samples = {role: [] for role in ROLES}
        for _ in range(rounds):
            for role in ROLES:
                if role in row["errors"]:
                    continue
                status = (
                    workers[role].ready["rows"][i].get("status", "ok")
                    if role not in errors
                    else None
                )
                if status != "ok":
                    row["errors"][role] = errors.get(role) or str(status)[:300]
                    continue
                us, error = per_call_us(role, i, calls)
                if error:
                    row["errors"][role] = error
                else:
                    samples[role].append(us)
        row["us"] = {
            role: statistics.median(s) if s and role not in row["errors"] else None
            for role, s in samples.items()
        }
        result["rows"].append(row)
    return result
