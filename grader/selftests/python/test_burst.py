#!/usr/bin/env python3
"""A deadline burst through the Gradescope bridge, on the CPU: a few hundred hand-ins at once.

    python3 -m grader.selftests.python.test_burst [-v]      (GLMASR_BURST=N hand-ins, default 300)

Every hand-in goes the real bridge path: autograder.py's run (the Gradescope side, one thread
per running autograder) → its transport (here `bash -c`, where production has ssh) →
grader/class_scale/gradescope/remote_grade.sh in this tree (direct runner: the build, then a
free GPU slot through gpu_slot.sh) → a stand-in GPU worker. The worker honours grade.py's
--build-only / --skip-build / --work, sleeps 5-50 ms as its "GPU" stage, writes a results.json
whose score the hand-in's file names (and a random token), and checks that it is alone on its
slot (an O_EXCL marker per slot). No GPU, no network.

One line of numbers is printed (hand-ins, workers, wall time, throughput, results delivered,
most grades at once on one slot), and the test asserts: every hand-in got its own result, no
slot was ever shared, the pool was used (grades ran side by side), and a retried hand-in —
twice at once, then once more after — is graded once and delivered the same result each time.
"""

import concurrent.futures
import contextlib
import gzip
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
import unittest

from grader import ROOT
from grader.class_scale.gradescope import autograder

HANDINS = int(os.environ.get("GLMASR_BURST", "300"))
SLOTS = 8  # the fake host's GPUs
CLIENTS = 32  # Gradescope containers running at once

# The stand-in for grade.py on a GPU host (bash: a few hundred of them must be cheap).
WORKER = textwrap.dedent("""\
    #!/usr/bin/env bash
    set -u
    sub="" out="" work="" results="" stage=""
    while [ $# -gt 0 ]; do
      case "$1" in
        --submission) sub="$2"; shift 2 ;; --out) out="$2"; shift 2 ;;
        --work) work="$2"; shift 2 ;; --results-json) results="$2"; shift 2 ;;
        --sandbox) shift 2 ;; --build-only) stage=build; shift ;; --skip-build) stage=grade; shift ;;
        *) echo "grade: unknown argument $1" >&2; exit 2 ;;
      esac
    done
    log="$BURST_DIR/log"
    if [ "$stage" = build ]; then  # intake and build: no GPU
      tar -xzOf "$sub" student/linear.cu > "$work/built" || exit 2
      exit 0
    fi
    [ "$stage" = grade ] && [ -s "$work/built" ] || { echo "grade: no build in $work" >&2; exit 1; }
    gpu="$CUDA_VISIBLE_DEVICES"
    busy="$BURST_DIR/busy.gpu$gpu"
    if ! ( set -C; : > "$busy" ) 2>/dev/null; then echo "shared $gpu" >> "$log"; fi
    start=$EPOCHREALTIME
    sleep "0.0$(( RANDOM % 46 + 5 ))"
    read -r _ _ handin _ score < "$work/built"
    token="$RANDOM$RANDOM"
    end=$EPOCHREALTIME
    rm -f "$busy"
    echo "grade $gpu $start $end $handin $token" >> "$log"
    mkdir -p "$out"
    printf '{"score": %s, "output": "hand-in %s, token %s", "tests": [{"name": "kernels", "score": %s, "max_score": 10, "status": "passed", "output": "", "visibility": "visible"}]}\\n' \\
      "$score" "$handin" "$token" "$score" > "$results"
""")


def handin(root, n):
    """/autograder/submission/submission.tar.gz of hand-in n (its file names its score)."""
    data = f"// hand-in {n} score {n % 11}\n".encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        info = tarfile.TarInfo("student/linear.cu")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    os.makedirs(os.path.join(root, "submission"), exist_ok=True)
    with open(os.path.join(root, "submission", "submission.tar.gz"), "wb") as f:
        f.write(gzip.compress(buffer.getvalue(), mtime=0))  # the same bytes every time


class Burst(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="glmasr-burst-")
        self.worker = os.path.join(self.dir, "worker.sh")
        with open(self.worker, "w") as f:
            f.write(WORKER)
        self.source = os.path.join(self.dir, "source")
        os.makedirs(self.source)
        with open(os.path.join(self.source, "config.toml"), "w") as f:
            f.write(
                textwrap.dedent(f'''\
                [gradescope]
                mode = "bridge"
                timeout_seconds = 300
                [bridge]
                transport = "bash -c"
                remote_root = "{ROOT}"
                runner = "direct"
                gpus = "{SLOTS}"
                gpu_lock = "{self.dir}/slots/gpu.lock"
                grade = "bash {self.worker}"
                remote_jobs = "{self.dir}/host/jobs"
                remote_work = "{self.dir}/host/work"
                remote_margin_seconds = 10
                ''')
            )
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True)
        commit = head.stdout.decode().strip() if head.returncode == 0 else None
        with open(os.path.join(self.source, "build_info.json"), "w") as f:
            json.dump({"commit": commit, "max_points": 10}, f)
        self.env = {"BURST_DIR": self.dir, "GLMASR_GPU_SLOT_POLL": "0.01"}
        self.saved = {k: os.environ.get(k) for k in self.env}
        os.environ.update(self.env)

    def tearDown(self):
        for k, v in self.saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        shutil.rmtree(self.dir, ignore_errors=True)

    def autograder_root(self, name, n):
        """One Gradescope run's /autograder: the zip's source (shared), hand-in n."""
        root = os.path.join(self.dir, "gs", name)
        os.makedirs(root)
        os.symlink(self.source, os.path.join(root, "source"))
        handin(root, n)
        return root

    def run_autograder(self, root):
        autograder.run(root)
        with open(os.path.join(root, "results", "results.json")) as f:
            return json.load(f)

    def test_a_deadline_burst(self):
        roots = {n: self.autograder_root(f"h{n}", n) for n in range(HANDINS)}
        retries = [self.autograder_root(f"retry{k}", 0) for k in range(3)]
        started = time.time()
        with (
            contextlib.redirect_stdout(io.StringIO()) as said,
            concurrent.futures.ThreadPoolExecutor(CLIENTS) as pool,
        ):
            # Hand-in 0 twice at once (a retry while the first still runs), then everyone.
            first = [pool.submit(self.run_autograder, r) for r in retries[:2]]
            futures = {n: pool.submit(self.run_autograder, r) for n, r in roots.items()}
            results = {n: f.result() for n, f in futures.items()}
            again = [f.result() for f in first]
            wall = time.time() - started
            again.append(self.run_autograder(retries[2]))  # once more, after all
        with open(os.path.join(self.dir, "log")) as f:
            log = [line.split() for line in f]
        grades = [line for line in log if line[0] == "grade"]
        shared = [line for line in log if line[0] == "shared"]

        # The most grades at once: on one slot (must be 1), and on the whole pool.
        events = sorted(
            [(float(g[2]), 1, g[1]) for g in grades] + [(float(g[3]), -1, g[1]) for g in grades]
        )
        per_slot, busiest, running, most = {}, 0, 0, 0
        for _, step, slot in events:
            per_slot[slot] = per_slot.get(slot, 0) + step
            busiest = max(busiest, per_slot[slot])
            running += step
            most = max(most, running)

        delivered = sum(
            r["extra_data"]["gradescope"]["status"] == "graded"
            and r["score"] == n % 11
            and r["output"].startswith(f"hand-in {n},")
            for n, r in results.items()
        )
        print(
            f"burst: {HANDINS} hand-ins (+3 of one retried), {SLOTS} GPU workers, "
            f"{CLIENTS} autograders at once: {wall:.1f} s wall, {HANDINS / wall:.1f} grades/s, "
            f"{delivered}/{HANDINS} results delivered, at most {busiest} grade per slot "
            f"and {most} of {SLOTS} slots busy at once",
            file=sys.stderr,
        )
        self.assertEqual(delivered, HANDINS, said.getvalue()[-3000:])
        self.assertEqual(shared, [])
        self.assertEqual(busiest, 1)
        self.assertGreater(most, 1)  # grades ran side by side
        # Hand-in 0: graded once for the four runs of its bytes (the burst's own run included),
        # every one delivered the same result.
        self.assertEqual(sum(g[4] == "0" for g in grades), 1)
        for r in again:
            self.assertEqual(r["output"], results[0]["output"])
            self.assertEqual(r["score"], results[0]["score"])
        # Every work tree was removed after its grade; no lock file was left locked.
        self.assertEqual(os.listdir(os.path.join(self.dir, "host", "work")), [])
        for slot in os.listdir(os.path.join(self.dir, "slots")):
            p = subprocess.run(["flock", "-n", os.path.join(self.dir, "slots", slot), "true"])
            self.assertEqual(p.returncode, 0, slot)


if __name__ == "__main__":
    unittest.main()
