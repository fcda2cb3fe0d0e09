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
  - This process times every request with its own clock. A row's time per call is
    (row request − flush request) / n from two requests sent back to back (which goes first
    alternates), the median over such pairs. n is the track's own: calls enough for `target_ms`
    of that track's kernel (MAX_CALLS for one too quick to see in PROBE_CALLS calls), so a fast
    kernel is not timed in the few calls a slow baseline needs, where the pipe's jitter drowns it.
  - Every track is timed in a block of its own, opened by one untimed request (the first request
    after another process's work pays the GPU's switch between them): the yardsticks (baseline,
    reference) with half of their pairs; then the graded worker starts, runs all of its pairs
    and is killed with everything it started; then the yardsticks' second half, in mirrored
    order. So no student process exists while a yardstick is timed,
    and the yardsticks' blocks bracket the graded one against drift. gpu_idle.py checks the GPU
    was quiet around each yardstick's block (else it runs again); a GPU that stays busy ends the
    item with "environment": one line why (not graded).
  - The rows (stage, op, shape, calls per run) come from the trusted baseline's ready line; the
    graded worker's rows are only matched against them. Each worker also says how many of a
    row's calls its track's own model makes (its fused entries in place): a kernel that a
    track's fused kernels replace is not what that track spends its time on, and the result's
    "off_path" says so for its op.
  - What this cannot see: a kernel that notices it is called again on the same bytes and skips
    the work (the inputs of a row never change), and a graded process that answers its own flush
    requests late (they are subtracted from its rows). So per-kernel speed is information unless
    the rubric gives it points ([kernel_speed] points), and earns them only for a kernel whose
    suite passed; the end-to-end speed item, on inputs drawn at grading time, stays the measure
    that cannot be replayed.

Standard library only.
"""

import functools
import math
import statistics

from grader.pipeline import e2e, gpu_idle, score

ROLES = score.KERNEL_SPEED_ROLES
PROBE_CALLS = 3  # calls of the request that sizes a track's requests for a row
MAX_CALLS = 1000  # calls in one request, at most


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
    nvidia_smi=gpu_idle.NVIDIA_SMI,
):
    """Time every row of the workload on the three tracks: `rounds` pairs for the graded track,
    rounds rounded up to even for each yardstick (half before the graded block, half after).
    Returns {"rounds", "target_ms", "device", "environment" (None, or why the yardsticks could
    not be timed on a quiet GPU), "rows": [{stage, op, key, calls_per_run, "us": {role: µs per
    call or None}, "calls": {role: calls per request}, "fast_path_calls": {role: calls per run
    its track's own model makes, or None}, "errors": {role: line}}], "off_path": {op: {"roles":
    {role: "n of m"}, "note": line}}, "errors": {role: line}}. A worker that fails keeps its
    one-line error; the other tracks finish. Every wait for the graded worker ends at
    graded_deadline (time.monotonic()) at the latest."""
    yardsticks = [("baseline", baseline_track), ("reference", reference_track)]
    workers = {}
    try:
        for role, track in yardsticks:
            workers[role] = e2e.Worker(
                [trusted_bin, "kernel-bench", "--worker", "--tracks", track, *workload_args],
                name=f"{role} ({track})",
                wait=False,
            )
        for role, _ in yardsticks:
            workers[role].wait_ready(ready_timeout)
        bench = Bench(workers, rounds, target_ms, request_timeout, nvidia_smi)
        half = math.ceil(rounds / 2)
        if bench.yardstick_blocks(["baseline", "reference"], half):
            graded = workers["graded"] = e2e.Worker(
                [
                    graded_bin or trusted_bin,
                    "kernel-bench",
                    "--worker",
                    "--tracks",
                    graded_track,
                    *workload_args,
                ],
                launch_graded if graded_bin else None,
                name=f"graded ({graded_track})",
                wait=False,
                inspect=inspect_graded if graded_bin else None,
                deadline=graded_deadline,
            )
            graded.wait_ready(ready_timeout)
            bench.graded_block(rounds)
            graded.close()  # it and everything it started, before a yardstick is timed again
            bench.yardstick_blocks(["reference", "baseline"], half)
        return bench.result()
    finally:
        for w in workers.values():
            w.close()


def signature(worker):
    """The (stage, op, key) of every row of a worker's ready line, in its order."""
    rows = (worker.ready or {}).get("rows")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        return None
    return [(r.get("stage"), r.get("op"), r.get("key")) for r in rows]


class Bench:
    """The measurements of one kernel-speed item: the workers by role (the graded one joins when
    it has started), each role's samples, calls per request and errors."""

    def __init__(self, workers, rounds, target_ms, request_timeout, nvidia_smi):
        self.workers = workers
        self.rounds = rounds
        self.target_ms = target_ms
        self.request_timeout = request_timeout
        self.nvidia_smi = nvidia_smi
        self.environment = None
        self.errors = {role: w.error for role, w in workers.items() if w.error}
        self.rows = (workers["baseline"].ready or {}).get("rows") or []
        self.samples = {role: {i: [] for i in range(len(self.rows))} for role in ROLES}
        self.row_errors = {role: {} for role in ROLES}
        self.calls = {role: {} for role in ROLES}
        self.blocks = {role: 0 for role in ROLES}

    def joined(self, role):
        """Whether `role`'s worker can be timed: started, its rows the trusted baseline's (every
        track captures the same workload through the same driver, so row i is one call
        everywhere, and a graded worker cannot choose which of its rows answers for a call)."""
        w = self.workers.get(role)
        if role in self.errors or w is None:
            return False
        if w.error:
            self.errors[role] = w.error
            return False
        if signature(w) != signature(self.workers["baseline"]):
            self.errors[role] = f"{w.name}: its rows are not the trusted baseline's"
            return False
        return "baseline" not in self.errors

    def yardstick_blocks(self, roles, pairs):
        """A block of `pairs` pairs per row for each yardstick in `roles`, each taken while the
        GPU is quiet (gpu_idle.quietly); False when the item must stop (the GPU stayed busy)."""
        for role in roles:
            if not self.joined(role):
                continue
            pids = [w.proc.pid for r, w in self.workers.items() if r != "graded" and w.proc]
            measured, why = gpu_idle.quietly(
                functools.partial(self.block, role, pairs),
                pids,
                f"around the {role}'s kernel timings",
                self.nvidia_smi,
            )
            if why:
                self.environment = self.errors[role] = why
                return False
            self.keep(role, measured)
        return "baseline" not in self.errors

    def graded_block(self, pairs):
        if self.joined("graded"):
            gpu_idle.settle(self.nvidia_smi)
            self.keep("graded", self.block("graded", pairs))

    def keep(self, role, measured):
        samples, errors = measured
        for i, got in samples.items():
            self.samples[role][i] += got
        self.row_errors[role].update(errors)
        self.blocks[role] += 1

    def timed(self, role, request):
        """(wall ms, None) or (None, one line why)."""
        w = self.workers[role]
        if not w.alive:
            return None, w.error or "the worker stopped"
        reply, wall_ms = w.request(request, self.request_timeout)
        if not w.alive:
            return None, w.error or "no reply"
        if reply.get("ok") is not True:
            return None, str(reply.get("error") or "the request failed")[:300]
        return wall_ms, None

    def pair(self, role, i, calls, row_first):
        """Row i's request and the flushes alone, back to back: ({True: row ms, False: flush
        ms}, None) or (None, one line why)."""
        walls = {}
        for is_row in (True, False) if row_first else (False, True):
            request = {"row": i, "calls": calls} if is_row else {"flush": calls}
            walls[is_row], error = self.timed(role, request)
            if error:
                return None, error
        return walls, None

    def calls_for(self, role, i):
        """Calls per request for row i on this role: enough for target_ms of its own kernel
        (the flushes not counted), MAX_CALLS at most. PROBE_CALLS calls say how many whole
        calls (flush included) fill target_ms; that many time the kernel well enough to size
        the requests (PROBE_CALLS alone cannot tell a quick kernel from the pipe's jitter)."""
        walls, error = self.pair(role, i, PROBE_CALLS, True)
        if error:
            return None, error
        calls = int(min(MAX_CALLS, max(PROBE_CALLS, self.target_ms * PROBE_CALLS / walls[True])))
        if calls > PROBE_CALLS:  # a quicker kernel: time it again on that many calls
            walls, error = self.pair(role, i, calls, True)
            if error:
                return None, error
        kernel_ms = (walls[True] - walls[False]) / calls
        if kernel_ms <= 0:
            return MAX_CALLS, None
        return int(min(MAX_CALLS, max(PROBE_CALLS, self.target_ms / kernel_ms))), None

    def block(self, role, pairs):
        """`pairs` pairs of every row on one worker, after an untimed request: ({row: [µs per
        call]}, {row: error})."""
        samples, errors = {}, {}
        self.timed(role, {"flush": PROBE_CALLS})
        ready_rows = self.workers[role].ready["rows"]
        for i, r in enumerate(self.rows):
            status = ready_rows[i].get("status", "ok")
            if r.get("status", "ok") != "ok" or i in self.row_errors[role]:
                continue
            if status != "ok":
                errors[i] = str(status)[:300]
                continue
            if i in self.calls[role]:
                # One untimed call first, as the sizing is in the first block: every block
                # starts a row's pairs alike.
                calls = self.calls[role][i]
                _, error = self.timed(role, {"row": i, "calls": 1})
            else:
                calls, error = self.calls_for(role, i)
            if error:
                errors[i] = error
                continue
            self.calls[role][i] = calls
            samples[i] = []
            for k in range(pairs):
                # Which of the pair goes first alternates, and mirrors in every other block.
                walls, error = self.pair(role, i, calls, (k + self.blocks[role]) % 2 == 0)
                if error:
                    errors[i] = error
                    break
                samples[i].append(max(walls[True] - walls[False], 0.0) * 1000.0 / calls)
        return samples, errors

    def result(self):
        """The item's result (run's return)."""
        if self.environment:
            for role in ROLES:
                if not self.blocks[role]:
                    self.errors.setdefault(role, f"not timed: {self.environment}")
        result = {
            "rounds": self.rounds,
            "target_ms": self.target_ms,
            "rows": [],
            "errors": self.errors,
            "environment": self.environment,
            "device": (self.workers["baseline"].ready or {}).get("device"),
        }
        ready = {
            role: (w.ready or {}).get("rows")
            for role, w in self.workers.items()
            if signature(w) == signature(self.workers["baseline"])
        }
        for i, r in enumerate(self.rows):
            if r.get("status", "ok") != "ok":
                continue
            errors = {role: self.errors[role] for role in ROLES if role in self.errors}
            errors.update({role: e[i] for role, e in self.row_errors.items() if i in e})
            result["rows"].append(
                {
                    "stage": r["stage"],
                    "op": r["op"],
                    "key": r["key"],
                    "calls_per_run": r["calls_per_run"],
                    "us": {
                        role: statistics.median(self.samples[role][i])
                        if self.samples[role][i] and role not in errors
                        else None
                        for role in ROLES
                    },
                    "calls": {role: self.calls[role].get(i) for role in ROLES},
                    "fast_path_calls": {
                        role: ready[role][i].get("fast_path_calls") if role in ready else None
                        for role in ROLES
                    },
                    "errors": errors,
                }
            )
        result["off_path"] = off_path(result["rows"])
        return result


def off_path(rows):
    """{op: {"roles": {role: "n of m"}, "note": line}} for every op that some track's own model
    calls fewer times than the rows do (its fused kernels do the rest): that track's time for
    the op is of a kernel its model does not run, and a ratio with it misleads."""
    totals = {}
    for row in rows:
        op = totals.setdefault(row["op"], {"calls": 0, "fast": {}})
        op["calls"] += row["calls_per_run"]
        for role, n in row["fast_path_calls"].items():
            if n is not None:
                op["fast"][role] = op["fast"].get(role, 0) + n
    found = {}
    for name, op in totals.items():
        fewer = {
            role: n for role in ROLES if (n := op["fast"].get(role)) is not None and n < op["calls"]
        }
        if fewer:
            found[name] = {
                "roles": {role: f"{n} of {op['calls']}" for role, n in fewer.items()},
                "note": "fused on its fast path: "
                + "; ".join(
                    f"{role}'s model makes {n} of these {op['calls']} calls"
                    for role, n in fewer.items()
                )
                + " (its fused kernels do the rest)",
            }
    return found
