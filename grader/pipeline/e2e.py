"""e2e.py — the end-to-end runs of a grade, timed and checked outside the graded process.

A process that contains student code computes; it never reports a verdict. So every end-to-end
run goes through `glmasr worker` (driver/cli/worker.cpp): one process per track, built once, fed
one JSON request per line. The graded track runs from the student-only binary, the baseline and
the reference from the trusted one, and this module

  - times every request with its own clock (write of the request to read of the reply), the
    worker's self-reported CUDA-event times kept only as a breakdown;
  - alternates the tracks B S R B S R ... on the same fresh input per round, so clock and
    thermal drift hit all of them alike;
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

from grader.pipeline import score

MAX_LINE = 1 << 20  # bytes: a longer reply line is garbage (a flood must not fill memory)
STDERR_KEEP = 64 << 10  # bytes of a worker's stderr kept (the last ones) for error messages
CLOSE_GRACE = 2.0  # seconds a worker gets to exit after its stdin is closed
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
        """Close stdin, give the worker a moment to exit, then kill its whole process group.
        Returns the exit code (None if it had to be killed)."""
        if self.proc is None or self.proc.stdin.closed:
            return self.proc and self.proc.returncode
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout=CLOSE_GRACE)
        except subprocess.TimeoutExpired:
            code = None
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        self.proc.stdout.close()
        self.proc.stderr.close()
        if self.error is None:
            self.error = f"{self.name}: closed"
        return code

    # -------------------------------------------------------------------------- internals
    def _inspect(self):
        if self.inspect and self.proc.poll() is None:
            self.inspect(self.proc.pid)

    def _fail(self, why):
        self.error = f"{self.name}: {why}"[:400]
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=CLOSE_GRACE)
            except (ProcessLookupError, PermissionError, subprocess.TimeoutExpired):
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
):
    """Time baseline, graded and reference workers round-robin on fresh inputs.

    graded_bin None: the graded track is a trusted one and runs from trusted_bin; if it is
    baseline_track or reference_track itself, it is its own yardstick (timed once). Every wait
    for the graded worker ends at graded_deadline (time.monotonic()) at the latest. The workers
    build their models at the same time, then run one at a time, every round on a new input
    (draw_input: audio seed and teacher-forcing ids). workload_args: the worker's model options
    (--config or --model, --seconds, --decode-steps, --seed). Returns a dict:
      seed, order (roles in the order requests were sent), workload (the baseline's),
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
    plan = [("baseline", trusted_bin, baseline_track, None, None)]
    if not aliased:
        plan.append(
            (
                "graded",
                graded_bin or trusted_bin,
                graded_track,
                launch_graded if graded_bin else None,
                inspect_graded if graded_bin else None,
            )
        )
    plan.append(("reference", trusted_bin, reference_track, None, None))

    workers, tracks, verdicts, order, requests = {}, {}, {}, [], []
    try:
        for role, binary, track, launch, inspect in plan:
            argv = [binary, "worker", "--track", track, *workload_args]
            workers[role] = Worker(
                argv,
                launch,
                name=f"{role} ({track})",
                wait=False,
                inspect=inspect,
                deadline=graded_deadline if role == "graded" else None,
            )
        for role, binary, track, *_ in plan:
            w = workers[role]
            w.wait_ready(ready_timeout)
            tracks[role] = {
                "track": w.ready["track"] if w.ready else track,
                "settings": w.ready.get("settings") if w.ready else None,
                "binary": binary,
                "runs": [],
                "median_wall_ms": None,
                "median_reported": {},
                "error": w.error,
            }
        # The inputs' shape comes from a trusted worker's ready line, never the graded one's.
        trusted_ready = workers["baseline"].ready or workers["reference"].ready
        for round_ in range(warmup + repeats if trusted_ready else 0):
            request = draw_input(rng, trusted_ready["workload"])
            requests.append(request)
            if "graded" in workers and not workers["graded"].alive:
                break  # nothing left to time against the yardsticks: the graded track failed
            for role, *_ in plan:
                w = workers[role]
                if not w.alive:
                    continue
                order.append(role)
                reply, wall_ms = w.request(request, request_timeout)
                run = {
                    "round": round_,
                    "warmup": round_ < warmup,
                    "audio_seed": request["audio_seed"],
                    "wall_ms": wall_ms,
                    "times": reply.get("times"),
                    "tokens": reply.get("tokens"),
                }
                if "error" in reply:
                    run["wall_ms"] = None
                    tracks[role]["error"] = reply["error"]
                elif reply.get("audio_seed") != request["audio_seed"]:
                    run["wall_ms"] = None
                    tracks[role]["error"] = f"{w.name}: answered another request than the one sent"
                    w.close()
                tracks[role]["runs"].append(run)
        for role, t in tracks.items():
            t["median_wall_ms"], t["median_reported"] = _medians(t["runs"])
            if t["error"] is None and t["median_wall_ms"] is None:
                t["error"] = f"{workers[role].name}: no timed run"

        base_runs = {r["round"]: r for r in tracks["baseline"]["runs"] if r["wall_ms"] is not None}
        for role in [r for r in ("graded", "reference") if r in tracks]:
            verdicts[role], cases = [], []
            for run in tracks[role]["runs"]:
                base = base_runs.get(run["round"])
                if base is None:
                    continue
                got = run["tokens"] if run["wall_ms"] is not None else None
                v = {
                    "round": run["round"],
                    "warmup": run["warmup"],
                    "audio_seed": run["audio_seed"],
                    **compare_tokens(base["tokens"], got),
                }
                verdicts[role].append(v)
                if not v["equal"]:
                    cases.append((v, requests[run["round"]], base["tokens"], got))
            if near_tie_margin is not None and workers["baseline"].alive:
                _judge_ties(workers["baseline"], cases, near_tie_margin, request_timeout)
    finally:
        for w in workers.values():
            w.close()

    if aliased:  # the graded runs are the baseline's (equal by definition) or the reference's
        alias = "baseline" if graded_track == baseline_track else "reference"
        tracks["graded"] = dict(tracks[alias], alias_of=alias)
        verdicts["graded"] = (
            verdicts["reference"]
            if alias == "reference"
            else [
                {
                    "round": r,
                    "warmup": run["warmup"],
                    "audio_seed": run["audio_seed"],
                    **compare_tokens(run["tokens"], run["tokens"]),
                }
                for r, run in base_runs.items()
            ]
        )
    summary = {
        role: token_summary(
            verdicts[role], warmup + repeats, tracks[role]["error"] or tracks["baseline"]["error"]
        )
        for role in ("graded", "reference")
    }
    workload = workers["baseline"].ready["workload"] if workers["baseline"].ready else None
    return {
        "seed": seed,
        "graded_track": graded_track,
        "warmup": warmup,
        "repeats": repeats,
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
