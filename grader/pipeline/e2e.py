"""e2e.py — the end-to-end runs of a grade, timed and checked outside the graded process.

A process that contains student code computes; it never reports a verdict. So every end-to-end
run goes through `glmasr worker` (driver/cli/worker.cpp): one process per track, built once, fed
one JSON request per line. The graded track runs from the student-only binary, the baseline and
the reference from the trusted one, and this module

  - times every request with its own clock (write of the request to read of the reply), the
    worker's self-reported CUDA-event times kept only as a breakdown;
  - times the yardsticks (baseline and reference) with no student process alive and the GPU
    quiet (gpu_idle.py), their runs bracketing the graded worker's, so clock and thermal drift
    hit all of them alike (run_speed says how);
  - draws every input at grading time (an audio seed and teacher-forcing ids), so no answer can
    be prepared or replayed, and checks each run's prediction at EVERY step against the trusted
    baseline's for that input (a near tie of the trusted logits may split two correct ones);
  - survives workers that crash, hang, flood their output or print garbage: that track gets an
    error of one line, the others finish.

    speed = run_speed("build/graded/glmasr-trusted", "build/graded/glmasr-student", "student",
                      ["--config", "tests/fixtures/configs/nano.json", "--decode-steps", "64"],
                      ready_timeout=300, request_timeout=300)

Every time limit is the caller's (the rubric's): a worker that hangs while it starts (its
untimed sizing run goes through the same kernels) costs ready_timeout, one that hangs on a
request costs request_timeout, and no default can be longer than what the rubric promises.

Standard library only.
"""

import json
import os
import random
import select
import signal
import statistics
import subprocess
import time

from grader.pipeline import gpu_idle, score
from grader.pipeline.processes import kill_tree

MAX_LINE = 1 << 20  # bytes: a longer reply line is garbage (a flood must not fill memory)
STDERR_KEEP = 64 << 10  # bytes of a worker's stderr kept (the last ones) for error messages
REAP_WAIT = 2.0  # seconds to wait for a killed worker's exit status
MAX_LISTED = 20  # differing steps listed per run


class Worker:
    """One `glmasr worker` process: start, wait for ready, request, close.

    argv: the worker's command line; launch(argv) may wrap it (e.g. a sandbox prefix);
    inspect(pid), if given, is called with the started process's pid once it is ready and after
    every reply, outside the clock (e.g. to read the memory maps of it and its children).
    deadline, if given (time.monotonic()), cuts every wait short there: the grade's own time
    limit. A worker that fails is killed and keeps its one-line `error`; every later request
    returns it.
    """

    def __init__(
        self,
        argv,
        launch=None,
        timeout=600.0,
        name="worker",
        wait=True,
        inspect=None,
        deadline=None,
    ):
        """Starts the worker and, with wait, waits for its ready line (else call wait_ready:
        several workers can build their models at the same time)."""
        self.name = name
        self.inspect = inspect
        self.deadline = deadline
        self.error = None
        self.hung = False  # it failed by running past a time limit
        self.ready = None
        self._out = bytearray()
        self._err = bytearray()
        command = list(launch(list(argv)) if launch else argv)
        try:
            # A session of its own: close() kills the worker and anything it started.
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as e:
            self.proc = None
            self.error = f"{name}: cannot start {command[0]}: {e.strerror}"
            return
        self._open = [self.proc.stdout.fileno(), self.proc.stderr.fileno()]
        for fd in self._open:
            os.set_blocking(fd, False)
        if wait:
            self.wait_ready(timeout)

    def wait_ready(self, timeout=600.0):
        """Reads the ready line: afterwards `ready` holds it, or `error` says why not."""
        if self.error:
            return
        line = self._read_line(timeout, "to start")
        reply = None if line is None else self._parse(line)
        if reply is None:
            return
        if reply.get("ready") is not True:
            self._fail(str(reply.get("error") or "did not say it was ready"))
            return
        self.ready = reply
        self._inspect()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def alive(self):
        return self.error is None

    def request(self, message, timeout=600.0):
        """Send one request; return (reply, wall_ms). On failure the reply is {"error": line}
        and wall_ms None. The clock runs from just before the write to the complete reply line."""
        if self.error:
            return {"error": self.error}, None
        data = (json.dumps(message) + "\n").encode()
        start = time.perf_counter()
        try:
            os.write(self.proc.stdin.fileno(), data)
        except OSError:
            self._fail("exited before the request could be sent")
            return {"error": self.error}, None
        line = self._read_line(timeout, "to answer")
        wall_ms = (time.perf_counter() - start) * 1e3
        self._inspect()
        if line is None:
            return {"error": self.error}, None
        reply = self._parse(line)
        if reply is None:
            return {"error": self.error}, None
        if "error" in reply:
            return {"error": f"{self.name}: {str(reply['error'])[:300]}"}, wall_ms
        return reply, wall_ms

    def stderr_tail(self):
        return self._err.decode(errors="replace")

    def close(self):
        """Kill the worker and every process below it, whatever their process groups (a worker
        that lives on, or leaves a child running, could keep the GPU busy while the next track
        is timed), then its process group."""
        if self.proc is None or self.proc.stdout.closed:
            return
        self._kill()
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.stdout.close()
        self.proc.stderr.close()
        if self.error is None:
            self.error = f"{self.name}: closed"

    # -------------------------------------------------------------------------- internals
    def _inspect(self):
        if self.inspect and self.proc.poll() is None:
            self.inspect(self.proc.pid)

    def _fail(self, why):
        self.error = f"{self.name}: {why}"[:400]
        if self.proc is not None and self.proc.poll() is None:
            self._kill()

    def _kill(self):
        if self.proc.poll() is None:  # not reaped: its pid is still its own
            kill_tree(self.proc.pid)  # stopped first, so nothing below it escapes by its exit
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=REAP_WAIT)
        except subprocess.TimeoutExpired:
            pass

    def _exit_reason(self):
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return "closed its output"
        err_fd = self.proc.stderr.fileno()
        while err_fd in self._open:  # what it said last, before it exited
            try:
                chunk = os.read(err_fd, 1 << 16)
            except BlockingIOError:  # a child of it still holds the pipe
                break
            if not chunk:
                self._open.remove(err_fd)
            self._err += chunk
            del self._err[:-STDERR_KEEP]
        last = score.last_error_line(self.stderr_tail())
        how = f"exited with code {code}" if code >= 0 else f"was killed by {_signal_name(-code)}"
        return how + (f": {last}" if last else "")

    def _read_line(self, timeout, waiting_for):
        """The next line of stdout, reading stderr meanwhile; None (and self.error) on EOF,
        timeout or an over-long line."""
        out_fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        cut = self.deadline is not None and self.deadline < deadline
        if cut:
            deadline = self.deadline
        while True:
            newline = self._out.find(b"\n")
            if newline >= 0:
                line = bytes(self._out[:newline])
                del self._out[: newline + 1]
                return line
            if len(self._out) > MAX_LINE:
                self._fail(f"printed a line longer than {MAX_LINE} bytes")
                return None
            if out_fd not in self._open:
                self._fail(self._exit_reason())
                return None
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.hung = True
                self._fail(
                    f"was still running at the grade's time limit, waiting {waiting_for}"
                    if cut
                    else f"took more than {timeout:g} s {waiting_for} (hung?)"
                )
                return None
            readable, _, _ = select.select(self._open, [], [], remaining)
            for fd in readable:
                try:
                    chunk = os.read(fd, 1 << 16)
                except BlockingIOError:
                    continue
                if not chunk:
                    self._open.remove(fd)
                elif fd == out_fd:
                    self._out += chunk
                else:
                    self._err += chunk
                    del self._err[:-STDERR_KEEP]

    def _parse(self, line):
        try:
            reply = json.loads(line)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            shown = line[:80].decode(errors="replace")
            self._fail(f"printed something that is not a JSON object: {shown!r}")
            return None
        return reply


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def compare_tokens(expected, got):
    """Two runs' predictions, step by step: {"equal", "differences" (the first MAX_LISTED
    differing steps), "different_steps" (how many), and at the first difference
    "first_difference", "expected", "got" (None past an end)}."""
    if not isinstance(got, list) or not all(type(t) is int for t in got):
        return {
            "equal": False,
            "differences": [0],
            "different_steps": len(expected),
            "first_difference": 0,
            "expected": expected[0] if expected else None,
            "got": "no token list",
        }
    steps = [i for i in range(max(len(expected), len(got))) if _at(expected, i) != _at(got, i)]
    if not steps:
        return {"equal": True, "differences": [], "different_steps": 0, "first_difference": None}
    return {
        "equal": False,
        "differences": steps[:MAX_LISTED],
        "different_steps": len(steps),
        "first_difference": steps[0],
        "expected": _at(expected, steps[0]),
        "got": _at(got, steps[0]),
    }


def _at(tokens, step):
    return tokens[step] if step < len(tokens) else None


def grading_seed(seed=None):
    """The seed every input of a grade derives from: given (to replay a grade), else drawn now."""
    return int.from_bytes(os.urandom(8), "little") if seed is None else int(seed)


def draw_input(rng, workload):
    """A fresh input: an audio seed, and decode_steps - 1 random token ids for teacher forcing
    (GenerateOptions::forced_inputs), so that every step's prediction depends on the audio and
    on ids nobody knew before, never on an earlier prediction."""
    forced = [rng.randrange(workload["vocab_size"]) for _ in range(workload["decode_steps"] - 1)]
    return {"audio_seed": rng.getrandbits(63), "forced_inputs": forced}


def _judge_ties(trusted, cases, near_tie_margin, timeout):
    """cases: [(verdict, request, expected tokens, graded tokens)] of differing runs. The trusted
    worker runs each request again, untimed, with margins: a differing step where its top two
    logits are within near_tie_margin and the graded side predicted its runner-up is a near tie
    (two correct float orders may split it). A run whose differences are all near ties gets
    near_tie True; otherwise its first_difference, expected and got name the first real one.
    Stops at the first run with a real difference (one is enough to fail; each costs a run)."""
    for verdict, request, expected, got in cases:
        verdict["near_tie"] = False
        if not isinstance(got, list):
            return
        reply, _ = trusted.request(dict(request, margins=True), timeout)
        if "error" in reply:
            return
        if reply.get("tokens") != expected:
            verdict["note"] = "the trusted track predicted other tokens when asked again"
            return
        margins, runner_up = reply["margins"], reply["runner_up"]
        steps = [i for i in range(max(len(expected), len(got))) if _at(expected, i) != _at(got, i)]
        real = [
            i
            for i in steps
            if not (
                i < len(margins) and margins[i] <= near_tie_margin and _at(got, i) == runner_up[i]
            )
        ]
        verdict["near_ties"] = [{"step": i, "margin": margins[i]} for i in steps if i not in real][
            :MAX_LISTED
        ]
        if real:
            verdict.update(
                first_difference=real[0], expected=_at(expected, real[0]), got=_at(got, real[0])
            )
            return
        verdict["near_tie"] = True


def token_summary(verdicts, runs, error):
    """One word for a role's verdicts: "equal" (every run), "near_ties" (every run equal or
    split at a near tie), "differ" (a real difference) or "incomplete" (an error, a run
    missing)."""
    if error or len(verdicts) != runs:
        return "incomplete"
    if all(v["equal"] for v in verdicts):
        return "equal"
    if all(v["equal"] or v.get("near_tie") for v in verdicts):
        return "near_ties"
    return "differ"


def _medians(runs):
    timed = [r for r in runs if not r["warmup"] and r["wall_ms"] is not None]
    if not timed:
        return None, {}
    keys = (
        set.intersection(*(set(r["times"]) for r in timed))
        if all(isinstance(r["times"], dict) for r in timed)
        else set()
    )
    reported = {}
    for key in sorted(keys):
        values = [r["times"][key] for r in timed]
        if all(isinstance(v, (int, float)) for v in values):
            reported[key] = statistics.median(values)
    return statistics.median(r["wall_ms"] for r in timed), reported


def run_speed(
    trusted_bin,
    graded_bin,
    graded_track,
    workload_args,
    *,
    ready_timeout,
    request_timeout,
    warmup=2,
    repeats=5,
    seed=None,
    launch_graded=None,
    inspect_graded=None,
    graded_deadline=None,
    baseline_track="baseline",
    reference_track="reference",
    near_tie_margin=None,
    nvidia_smi=gpu_idle.NVIDIA_SMI,
):
    """Time baseline, graded and reference workers on the same fresh inputs, one per round
    (draw_input: audio seed and teacher-forcing ids).

    No student process exists while a yardstick is timed: a graded worker left alive could keep
    the GPU busy between its own requests (low-priority kernels on a stream of its own) and slow
    every yardstick. So the runs go in three blocks:
      1. the baseline and reference workers start (together) and run the warm-up rounds and the
         first half of their timed rounds, B R on each round's input;
      2. the graded worker starts, runs its `warmup` + `repeats` rounds on the same inputs, and
         is killed with every process below it (Worker.close);
      3. the yardsticks run the second half of their timed rounds.
    As fair against drift as B S R in every round: the yardsticks' timed rounds bracket the
    graded block, as many before it as after it (their count rounded up to even), so a drift
    linear in time (clocks, heat) moves a yardstick's median (the mean of its last run before
    and its first after) as much as the graded median (the middle of the block). B S R itself
    would need the graded worker alive through the yardsticks' runs, or a new one every round
    whose first request pays start-up costs a long-lived yardstick never does. Every timed
    request waits for the GPU to settle (gpu_idle.settle), the graded ones too; a yardstick's run
    counts only if nothing else held the GPU around it (gpu_idle.quietly), else it runs again;
    a GPU that stays busy ends the item with "environment": one line why (not graded: the
    machine, not the student's code, failed it), the yardstick's error saying the same.

    graded_bin None: the graded track is a trusted one and runs from trusted_bin; if it is
    baseline_track or reference_track itself, it is its own yardstick (timed once, no block 2).
    A graded track that fails is not timed further, and block 3 does not run (nothing left to
    compare). Every wait for the graded worker ends at graded_deadline (time.monotonic()) at the
    latest. workload_args: the worker's model options (--config or --model, --seconds,
    --decode-steps, --seed). nvidia_smi: the program gpu_idle asks. Returns a dict:
      seed, graded_track, warmup, repeats (the graded track's; the yardsticks' timed runs:
      yardstick_repeats), environment (None, or why the yardsticks could not be timed on a quiet
      GPU), order (roles in the order requests were sent), workload (the baseline's),
      tracks[role] = {track, settings, binary,
                      runs[{round, warmup, audio_seed, wall_ms, times, tokens}],
                      median_wall_ms, median_reported, error} (settings: the run-time choices
                      the worker's ready line reported, e.g. {"gemm": "cublas", "attention":
                      "flash_bf16", "sync_check": false}; None if it gave none),
      tokens[role] = per-run verdicts against the baseline {round, warmup, audio_seed, equal,
                     differences, different_steps, first_difference, expected, got
                     [, near_tie, near_ties, note]},
      token_summary[role] (see token_summary), graded_tokens_ok: every graded run (warm-ups
      included) predicted exactly the baseline's tokens.
    """
    seed = grading_seed(seed)
    rng = random.Random(seed)
    aliased = graded_bin is None and graded_track in (baseline_track, reference_track)
    yardsticks = [("baseline", baseline_track), ("reference", reference_track)]
    yardstick_repeats = repeats if aliased else repeats + repeats % 2
    first_half = warmup + yardstick_repeats // 2  # the yardsticks' rounds before the graded block
    runs = {"graded": warmup + repeats, "reference": warmup + yardstick_repeats}

    workers, verdicts, order, requests = {}, {}, [], []
    tracks = {
        role: {
            "track": track,
            "settings": None,
            "binary": trusted_bin if role != "graded" else graded_bin or trusted_bin,
            "runs": [],
            "median_wall_ms": None,
            "median_reported": {},
            "error": None,
        }
        for role, track in [*yardsticks, ("graded", graded_track)]
    }
    environment = None

    def started(role, w):
        w.wait_ready(ready_timeout)
        tracks[role]["error"] = w.error
        if w.ready:
            tracks[role].update(track=w.ready["track"], settings=w.ready.get("settings"))

    def run(role, round_):
        """One timed run; False when the item must stop (the GPU was not quiet)."""
        nonlocal environment
        w, request = workers[role], requests[round_]
        if role == "graded":
            gpu_idle.settle(nvidia_smi)
            reply, wall_ms = w.request(request, request_timeout)
        else:
            pids = [t.proc.pid for r, t in workers.items() if r != "graded" and t.proc]
            answer, why = gpu_idle.quietly(
                lambda: w.request(request, request_timeout),
                pids,
                f"around the {role}'s run {round_}",
                nvidia_smi,
            )
            if why:
                environment = tracks[role]["error"] = why
                return False
            reply, wall_ms = answer
        order.append(role)
        entry = {
            "round": round_,
            "warmup": round_ < warmup,
            "audio_seed": request["audio_seed"],
            "wall_ms": wall_ms,
            "times": reply.get("times"),
            "tokens": reply.get("tokens"),
        }
        if "error" in reply:
            entry["wall_ms"] = None
            tracks[role]["error"] = reply["error"]
        elif reply.get("audio_seed") != request["audio_seed"]:
            entry["wall_ms"] = None
            tracks[role]["error"] = f"{w.name}: answered another request than the one sent"
            w.close()
        tracks[role]["runs"].append(entry)
        return True

    def yardstick_rounds(rounds):
        return all(
            run(role, round_) for round_ in rounds for role, _ in yardsticks if workers[role].alive
        )

    try:
        for role, track in yardsticks:
            argv = [trusted_bin, "worker", "--track", track, *workload_args]
            workers[role] = Worker(argv, name=f"{role} ({track})", wait=False)
        for role, _ in yardsticks:
            started(role, workers[role])
        # The inputs' shape comes from a trusted worker's ready line, never the graded one's.
        trusted_ready = workers["baseline"].ready or workers["reference"].ready
        if trusted_ready:
            requests = [
                draw_input(rng, trusted_ready["workload"])
                for _ in range(warmup + yardstick_repeats)
            ]
        quiet = yardstick_rounds(range(min(first_half, len(requests))))
        if quiet and requests and not aliased:
            workers["graded"] = graded = Worker(
                [graded_bin or trusted_bin, "worker", "--track", graded_track, *workload_args],
                launch_graded if graded_bin else None,
                name=f"graded ({graded_track})",
                wait=False,
                inspect=inspect_graded if graded_bin else None,
                deadline=graded_deadline,
            )
            started("graded", graded)
            for round_ in range(runs["graded"]):
                if not graded.alive:
                    break
                run("graded", round_)
            graded.close()  # it and everything it started, before a yardstick is timed again
        if quiet and tracks["graded"]["error"] is None:
            yardstick_rounds(range(first_half, len(requests)))
        for role, w in workers.items():
            t = tracks[role]
            t["median_wall_ms"], t["median_reported"] = _medians(t["runs"])
            if t["error"] is None and t["median_wall_ms"] is None:
                t["error"] = f"{w.name}: no timed run"

        base_runs = {r["round"]: r for r in tracks["baseline"]["runs"] if r["wall_ms"] is not None}
        for role in [r for r in ("graded", "reference") if r in workers]:
            verdicts[role], cases = [], []
            for entry in tracks[role]["runs"]:
                base = base_runs.get(entry["round"])
                if base is None:
                    continue
                got = entry["tokens"] if entry["wall_ms"] is not None else None
                v = {
                    "round": entry["round"],
                    "warmup": entry["warmup"],
                    "audio_seed": entry["audio_seed"],
                    **compare_tokens(base["tokens"], got),
                }
                verdicts[role].append(v)
                if not v["equal"]:
                    cases.append((v, requests[entry["round"]], base["tokens"], got))
            if near_tie_margin is not None and workers["baseline"].alive:
                _judge_ties(workers["baseline"], cases, near_tie_margin, request_timeout)
    finally:
        for w in workers.values():
            w.close()

    verdicts.setdefault("graded", [])
    if aliased:  # the graded runs are the baseline's (equal by definition) or the reference's
        alias = "baseline" if graded_track == baseline_track else "reference"
        tracks["graded"] = dict(tracks[alias], alias_of=alias)
        verdicts["graded"] = (
            verdicts.get("reference", [])
            if alias == "reference"
            else [
                {
                    "round": r,
                    "warmup": entry["warmup"],
                    "audio_seed": entry["audio_seed"],
                    **compare_tokens(entry["tokens"], entry["tokens"]),
                }
                for r, entry in base_runs.items()
            ]
        )
    summary = {
        role: token_summary(
            verdicts.get(role, []),
            runs[role],
            tracks[role]["error"] or tracks["baseline"]["error"],
        )
        for role in ("graded", "reference")
    }
    workload = workers["baseline"].ready["workload"] if workers["baseline"].ready else None
    return {
        "seed": seed,
        "graded_track": graded_track,
        "warmup": warmup,
        "repeats": repeats,
        "yardstick_repeats": yardstick_repeats,
        "environment": environment,
        "workload": workload,
        "order": order,
        "tracks": tracks,
        "tokens": verdicts,
        "token_summary": summary,
        "graded_tokens_ok": summary["graded"] == "equal",
    }


def run_accuracy(
    trusted_bin,
    graded_bin,
    graded_track,
    model_dir,
    clips,
    max_new_tokens,
    *,
    ready_timeout,
    request_timeout,
    fresh_checks=3,
    seconds=30.0,
    decode_steps=32,
    seed=None,
    launch_graded=None,
    inspect_graded=None,
    graded_deadline=None,
    baseline_track="baseline",
    near_tie_margin=None,
):
    """Transcribe clips through ONE graded worker with the real model, then the fresh-input
    check: `fresh_checks` inputs drawn now (draw_input: a synthetic clip's seed and
    teacher-forcing ids) through that worker and a trusted baseline worker, whose predictions
    must be equal at every step (transcripts a process can produce without computing them are
    worth nothing).

    clips: [(path, reference text, private)]. graded_bin None: the graded track is a trusted
    one (run from trusted_bin, neither launched nor inspected). Every wait for the graded worker
    ends at graded_deadline (time.monotonic()) at the latest. A worker that dies mid-clip is
    started again for the next clip; one that cannot start, or that ran past a time limit (a hung
    kernel would hang again on every clip: 24 clips x the time limit), fails every remaining clip
    with its error, and the fresh-input check too, without a trusted run for it. Returns
      {"clips": [score.clip_result ...], "fresh_input": {"seed", "checks": [verdicts], "error",
       "trusted_error" (only when the trusted baseline failed and the graded process did
       not), "summary"
       (token_summary), "ok" (every check equal)}}.
    """
    seed = grading_seed(seed)
    rng = random.Random(seed)
    binary = trusted_bin if graded_bin is None else graded_bin
    launch, inspect = (None, None) if graded_bin is None else (launch_graded, inspect_graded)
    model_args = [
        "--model",
        model_dir,
        "--seconds",
        str(seconds),
        "--decode-steps",
        str(decode_steps),
    ]
    argv = [binary, "worker", "--track", graded_track, *model_args]

    def start():
        return Worker(
            argv,
            launch,
            ready_timeout,
            name=f"graded ({graded_track})",
            inspect=inspect,
            deadline=graded_deadline,
        )

    results = []
    worker = start()
    try:
        for path, reference, private in clips:
            if not worker.alive and worker.ready is not None and not worker.hung:
                worker.close()
                worker = start()  # it had crashed after starting: this clip gets a fresh process
            reply, _ = worker.request(
                {"transcribe": path, "max_new_tokens": max_new_tokens}, request_timeout
            )
            text, error = reply.get("text"), reply.get("error")
            if error is None and (reply.get("transcribe") != path or not isinstance(text, str)):
                text, error = None, f"{worker.name}: answered another request than the one sent"
                worker.close()
            results.append(
                score.clip_result(
                    os.path.basename(path),
                    reference,
                    text if error is None else None,
                    error,
                    private,
                )
            )

        fresh = {"seed": seed, "checks": [], "error": None}
        if not worker.alive and worker.ready is not None and not worker.hung:
            worker.close()
            worker = start()
        if worker.hung:  # it would hang on a fresh input too: no trusted run is spent on it
            fresh["error"] = worker.error
        else:
            with Worker(
                [trusted_bin, "worker", "--track", baseline_track, *model_args],
                None,
                ready_timeout,
                name=f"baseline ({baseline_track})",
            ) as trusted:
                cases = []
                for _ in range(fresh_checks if trusted.ready else 0):
                    request = draw_input(rng, trusted.ready["workload"])
                    expected, _ = trusted.request(request, request_timeout)
                    got, _ = worker.request(request, request_timeout)
                    fresh["error"] = expected.get("error") or got.get("error")
                    if expected.get("error") and not got.get("error"):
                        fresh["trusted_error"] = expected["error"]  # the grader's, not theirs
                    if fresh["error"]:
                        break
                    tokens = (
                        got.get("tokens")
                        if got.get("audio_seed") == request["audio_seed"]
                        else None
                    )
                    v = {
                        "audio_seed": request["audio_seed"],
                        **compare_tokens(expected["tokens"], tokens),
                    }
                    fresh["checks"].append(v)
                    if not v["equal"]:
                        cases.append((v, request, expected["tokens"], tokens))
                if not trusted.ready:
                    fresh["error"] = trusted.error
                    if worker.alive:  # the graded process is fine: the grader's failure
                        fresh["trusted_error"] = trusted.error
                if near_tie_margin is not None and trusted.alive:
                    _judge_ties(trusted, cases, near_tie_margin, request_timeout)
        fresh["summary"] = token_summary(fresh["checks"], fresh_checks, fresh["error"])
        fresh["ok"] = fresh["summary"] == "equal"
    finally:
        worker.close()
    return {"clips": results, "fresh_input": fresh}
