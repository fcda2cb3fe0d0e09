#!/usr/bin/env python3
"""Tests of the Gradescope autograder (grader/class_scale/gradescope/, `make gradescope`): the zip is built,
unpacked into a scratch folder shaped like Gradescope's /autograder (GLMASR_AUTOGRADER_ROOT
moves it), and its run_autograder grades a sample submission.

Bridge mode goes through a stand-in for ssh (a script that runs the remote command with bash,
or fails as ssh does) to the real grader/class_scale/gradescope/remote_grade.sh, which runs a stand-in for
grade.py (results.json written by score.py's own functions), directly or through a stand-in
sbatch. Each way a grade can fail — unreachable host, time-out, full queue, garbled, inflated or
missing results, a refused grade, a machine that could not grade — must give score 0 and the "not graded" item.
Local mode: one grade with a stand-in grade command, on the instructor tree the zip carries.
No GPU, no network, about 15 seconds.

    python3 -m grader.selftests.python.test_gradescope [-v]
"""

import io
import json
import math
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tarfile
import tempfile
import textwrap
import time
import unittest
import zipfile

from grader import ROOT
from grader.class_scale.gradescope import autograder

TOOLS = os.path.join(ROOT, "grader", "class_scale", "gradescope")
# The stand-in grader imports the grader's score.py from the project root.
os.environ["PYTHONPATH"] = ROOT

NOT_GRADED = "not graded — resubmit or contact staff"
STUDENT_FILE = "// the student's linear.cu\n"

# The stand-in for grade.py on the GPU host: grade.py's arguments; what it does comes from
# $FAKE_BEHAVIOUR; what it received and what it sent go to $FAKE_LOG.
FAKE_GRADE = textwrap.dedent("""\
    import argparse, json, os, sys, tarfile, time, zipfile
    from grader.pipeline import score
    p = argparse.ArgumentParser()
    p.add_argument("root"); p.add_argument("--submission"); p.add_argument("--out")
    p.add_argument("--work"); p.add_argument("--results-json"); p.add_argument("--flag")
    p.add_argument("--sandbox"); p.add_argument("--build-only", action="store_true")
    p.add_argument("--skip-build", action="store_true")
    a = p.parse_args()
    behaviour, log = os.environ["FAKE_BEHAVIOUR"], os.environ["FAKE_LOG"]
    sub = a.submission
    if a.build_only:  # the intake and build: no GPU
        if behaviour == "refused":
            print("grade: submission.tar.gz: not a readable archive", file=sys.stderr); sys.exit(2)
        open(os.path.join(a.work, "built"), "w").write(a.submission)
        sys.exit(0)
    if a.skip_build:  # the grade of the build --build-only left in --work
        assert open(os.path.join(a.work, "built")).read() == a.submission
    if os.path.isdir(sub):
        members = {os.path.relpath(os.path.join(d, n), sub): "file"
                   for d, _, ns in os.walk(sub) for n in ns}
        content = open(os.path.join(sub, "student", "linear.cu")).read() \\
            if os.path.exists(os.path.join(sub, "student", "linear.cu")) else None
    else:
        with tarfile.open(sub) as t:
            members = {m.name: "link" if m.issym() else "file" if m.isfile() else "other"
                       for m in t}
            content = t.extractfile("student/linear.cu").read().decode() \\
                if "student/linear.cu" in members else None
    record = {"argv": sys.argv[1:], "submission": os.path.basename(sub), "members": members,
              "linear": content, "cwd": os.getcwd(), "pid": os.getpid(), "work": a.work,
              "gpu": os.environ.get("CUDA_VISIBLE_DEVICES")}
    if behaviour == "sleep":
        json.dump(record, open(log, "w")); time.sleep(60)
    if behaviour == "refused":
        print("grade: submission.tar.gz: not a readable archive", file=sys.stderr); sys.exit(2)
    rubric = score.load_rubric(os.path.join(sys.argv[1], "grader", "rubric.toml"))
    kernels = {k: {"status": "passed", "passed": 3, "total": 4, "message": "3 of 4", "failures": []}
               for k in rubric["kernels"]["points"]}
    speed = {"tracks": {r: {"track": r, "median_wall_ms": ms, "error": None, "median_reported": {},
                            "runs": [{}] * 2} for r, ms in
                        (("baseline", 1000.0), ("graded", 100.0), ("reference", 10.0))},
             "tokens": {"graded": [{"round": r, "warmup": r == 0, "equal": True} for r in range(2)]},
             "warmup": 1, "repeats": 1}
    if behaviour == "environment":
        speed["tracks"]["baseline"]["error"] = "baseline: out of GPU memory"
    results = {"track": "student", "kernels": kernels, "speed": speed, "intake": None,
               "environment": {"before": {"name": "NVIDIA H100"}, "after": {"name": "NVIDIA H100"}}}
    graded = score.grade(results, rubric)
    out = score.gradescope_results(graded)
    if behaviour == "inflated":
        out["score"] = sum(t["max_score"] for t in out["tests"]) + 10
    record["sent"] = out
    json.dump(record, open(log, "w"))
    if behaviour != "missing":
        with open(a.results_json, "w") as f:
            f.write("{'score': 100, tests: [" if behaviour == "garbled" else json.dumps(out))
    if graded["not_graded"]:
        print(f"grade: {score.NOT_GRADED} — {graded['not_graded']}", file=sys.stderr)
        sys.exit(3)
""")

# ssh as the bridge calls it (ssh [-o OPT]... [-i KEY] HOST COMMAND): a host named
# unreachable* fails as ssh does (exit 255); any other runs COMMAND with bash, here, or, as sshd
# does for a key with a forced command ($FAKE_FORCED), that command with COMMAND in
# $SSH_ORIGINAL_COMMAND.
FAKE_SSH = textwrap.dedent("""\
    #!/usr/bin/env bash
    key=""
    while [ $# -gt 0 ]; do
      case "$1" in -o) shift 2 ;; -i) key="$2"; shift 2 ;; *) break ;; esac
    done
    host="$1"; shift
    if [ -n "$key" ] && [ "$(stat -c %a "$key")" != 600 ]; then
      echo "ssh: bad permissions on $key" >&2; exit 255
    fi
    case "$host" in
      *unreachable*) echo "ssh: connect to host $host port 22: Connection refused" >&2; exit 255 ;;
      *hang*) echo $$ > "$FAKE_LOG.hang"; exec sleep 60 ;;
    esac
    echo "$key" > "$FAKE_LOG.key"
    if [ -n "${FAKE_FORCED:-}" ]; then SSH_ORIGINAL_COMMAND="$1" exec bash -c "$FAKE_FORCED"; fi
    exec bash -c "$1"
""")

# sbatch --wait: runs the job script here and now, or refuses it as a full queue does.
FAKE_SBATCH = textwrap.dedent("""\
    #!/usr/bin/env bash
    echo "$@" > "$FAKE_LOG.sbatch"
    if [ "${FAKE_QUEUE:-}" = full ]; then
      echo "sbatch: error: QOSMaxSubmitJobPerUserLimit" >&2
      echo "sbatch: error: Batch job submission failed: Job violates accounting/QOS policy" >&2
      exit 1
    fi
    out=""
    for a in "$@"; do case "$a" in --output=*) out="${a#--output=}" ;; esac; done
    echo "4242"
    bash "${@: -1}" > "$out" 2>&1
""")


def write(path, text, mode=0o644):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)


def check_schema(test, results):
    """Gradescope's results.json, field by field, as score.py writes it (independent of
    autograder.validate_results)."""
    test.assertIsInstance(results, dict)
    test.assertIsInstance(results["score"], (int, float))
    test.assertNotIsInstance(results["score"], bool)
    test.assertTrue(math.isfinite(results["score"]))
    test.assertIsInstance(results["tests"], list)
    test.assertTrue(results["tests"])
    for t in results["tests"]:
        test.assertLessEqual(
            {"name", "score", "max_score", "status", "output", "visibility"}, set(t)
        )
        test.assertIsInstance(t["name"], str)
        test.assertIn(t["status"], ("passed", "failed"))
        test.assertIsInstance(t["output"], str)
        test.assertIn(t["visibility"], ("hidden", "after_due_date", "after_published", "visible"))
        test.assertGreaterEqual(t["score"], 0)
        test.assertLessEqual(t["score"], t["max_score"])
    test.assertLessEqual(results["score"], sum(t["max_score"] for t in results["tests"]) + 1e-6)
    test.assertAlmostEqual(results["score"], sum(t["score"] for t in results["tests"]), delta=0.2)
    if "output_format" in results:
        test.assertIn(results["output_format"], ("text", "html", "simple_format", "md", "ansi"))
    test.assertIsInstance(results.get("output", ""), str)
    test.assertIn(
        results.get("visibility", "visible"),
        ("hidden", "after_due_date", "after_published", "visible"),
    )
    test.assertIsInstance(results["extra_data"], dict)
    test.assertIsInstance(results["extra_data"]["gradescope"], dict)
    for entry in results.get("leaderboard", []):
        test.assertIsInstance(entry["name"], str)
        test.assertIsInstance(entry["value"], (int, float, str))
        test.assertIn(entry.get("order", "desc"), ("asc", "desc"))


class Gradescope(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="test-gradescope-")
        cls.zip = os.path.join(cls.tmp, "gradescope-autograder.zip")
        # The make target, as an instructor runs it: the shipped config (bridge mode) with the
        # course's host and its known_hosts line (the cases below put their own config.toml in).
        with open(os.path.join(TOOLS, "config.toml")) as f:
            shipped = f.read()
        config = os.path.join(cls.tmp, "my-gradescope.toml")
        write(config, shipped.replace("gpu-login.example.edu", "gpu-login.course.test"))
        known = os.path.join(cls.tmp, "gs_known_hosts")
        write(known, "gpu-login.course.test ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExample\n")
        flags = f"--out {cls.zip} --config {config} --known-hosts {known}"
        p = subprocess.run(
            ["make", "-s", "-C", ROOT, "gradescope", f"GRADESCOPE_FLAGS={flags}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert p.returncode == 0, p.stdout + p.stderr
        cls.fake_grade = os.path.join(cls.tmp, "host", "fake_grade.py")
        write(cls.fake_grade, FAKE_GRADE)
        cls.fake_ssh = os.path.join(cls.tmp, "host", "ssh")
        write(cls.fake_ssh, FAKE_SSH, 0o755)
        write(os.path.join(cls.tmp, "bin", "sbatch"), FAKE_SBATCH, 0o755)
        with zipfile.ZipFile(cls.zip) as z:
            cls.info = json.loads(z.read("build_info.json"))
        cls.count = 0

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    # -- helpers

    def autograder_root(self, zip_path=None):
        """A fresh /autograder: source/ (the zip), run_autograder copied up as Gradescope does,
        submission/ and results/."""
        Gradescope.count += 1
        root = os.path.join(self.tmp, f"case{self.count}", "autograder")
        source = os.path.join(root, "source")
        os.makedirs(source)
        with zipfile.ZipFile(zip_path or self.zip) as z:
            for info in z.infolist():
                z.extract(info, source)
                os.chmod(os.path.join(source, info.filename), (info.external_attr >> 16) & 0o777)
        shutil.copy2(os.path.join(source, "run_autograder"), os.path.join(root, "run_autograder"))
        os.makedirs(os.path.join(root, "submission"))
        self.log = os.path.join(os.path.dirname(root), "fake.json")
        return root

    def submit_tarball(self, root):
        """The sample hand-in, as `make submission` writes it."""
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            data = STUDENT_FILE.encode()
            info = tarfile.TarInfo("student/linear.cu")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        with open(os.path.join(root, "submission", "submission.tar.gz"), "wb") as f:
            f.write(buffer.getvalue())

    def bridge_config(
        self, root, runner="direct", host="grader@gpu-host", timeout=120, transport=None, margin=1
    ):
        host_dir = os.path.join(os.path.dirname(root), "host")
        config = textwrap.dedent(f'''\
            [gradescope]
            mode = "bridge"
            timeout_seconds = {timeout}
            [bridge]
            transport = "{transport or f"{self.fake_ssh} -o BatchMode=yes -i {{ssh_key}} {host}"}"
            remote_root = "{ROOT}"
            runner = "{runner}"
            sbatch_options = "--partition=gpu --gres=gpu:1"
            grade = "{sys.executable} {self.fake_grade} {ROOT}"
            grade_flags = "--flag x"
            remote_jobs = "{host_dir}/jobs"
            remote_work = "{host_dir}/work"
            remote_margin_seconds = {margin}
            gpus = "2"
            gpu_lock = "{host_dir}/gpu-slots/gpu"
            ''')
        write(os.path.join(root, "source", "config.toml"), config)

    def run_autograder(self, root, behaviour="ok", queue="", timeout=60, forced=""):
        env = dict(
            os.environ,
            GLMASR_AUTOGRADER_ROOT=root,
            FAKE_BEHAVIOUR=behaviour,
            FAKE_LOG=self.log,
            FAKE_QUEUE=queue,
            FAKE_FORCED=forced,
            GLMASR_GRADESCOPE_SSH_KEY="-----BEGIN OPENSSH PRIVATE KEY-----\nfake\n",
            PATH=os.path.join(self.tmp, "bin") + os.pathsep + os.environ["PATH"],
        )
        started = time.time()
        p = subprocess.run(
            [os.path.join(root, "run_autograder")],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        self.elapsed = time.time() - started
        self.stdout = p.stdout + p.stderr
        self.assertEqual(p.returncode, 0, self.stdout)
        with open(os.path.join(root, "results", "results.json")) as f:
            results = json.load(f)
        check_schema(self, results)
        return results

    def fake_record(self):
        with open(self.log) as f:
            return json.load(f)

    def assert_not_graded(self, results, *words):
        self.assertEqual(results["score"], 0, self.stdout)
        self.assertEqual(len(results["tests"]), 1, results)
        item = results["tests"][0]
        self.assertEqual(item["name"], NOT_GRADED)
        self.assertEqual(item["status"], "failed")
        self.assertEqual(item["score"], 0)
        self.assertEqual(item["max_score"], self.info["max_points"])
        self.assertGreater(self.info["max_points"], 0)
        self.assertTrue(results["output"].startswith("NOT GRADED: "), results["output"])
        self.assertIn("contact the course staff", results["output"])
        self.assertEqual(results["extra_data"]["gradescope"]["status"], "not graded")
        for w in words:
            self.assertIn(w, results["output"] + "\n" + item["output"], self.stdout)
        return results["extra_data"]["gradescope"]

    def assert_graded_as_sent(self, results):
        sent = self.fake_record()["sent"]
        extra = results["extra_data"].pop("gradescope")
        self.assertEqual(extra["status"], "graded")
        self.assertEqual(results, sent)  # passed on as the grader wrote it, plus extra_data
        self.assertIn("leaderboard", sent)
        self.assertIn("gpu_before_timed_runs", sent["extra_data"])
        self.assertGreater(sent["score"], 0)

    # -- the zip

    def test_make_refuses_a_config_that_cannot_grade(self):
        out = os.path.join(self.tmp, "refused.zip")
        p = subprocess.run(
            ["make", "-s", "-C", ROOT, "gradescope", f"GRADESCOPE_FLAGS=--out {out}"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("cannot grade: [bridge] transport and remote_root still name", p.stderr)
        self.assertIn("cannot grade: no known_hosts", p.stderr)
        self.assertFalse(os.path.exists(out))

    def test_the_image_build_fails_on_a_zip_that_cannot_grade(self):
        root = self.autograder_root()
        shutil.copy(os.path.join(TOOLS, "config.toml"), os.path.join(root, "source", "config.toml"))
        p = subprocess.run(
            [sys.executable, os.path.join(root, "source", "autograder.py"), "prepare"],
            capture_output=True,
            text=True,
            env=dict(os.environ, GLMASR_AUTOGRADER_ROOT=root),
        )
        self.assertNotEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("this zip cannot grade", p.stderr)

    def test_zip_layout(self):
        with zipfile.ZipFile(self.zip) as z:
            infos = {i.filename: i for i in z.infolist()}
        self.assertEqual(
            set(infos),
            {
                "setup.sh",
                "run_autograder",
                "autograder.py",
                "find_python.sh",
                "config.toml",
                "build_info.json",
                "ssh/known_hosts",
            },
        )
        for name in ("setup.sh", "run_autograder"):
            self.assertTrue((infos[name].external_attr >> 16) & stat.S_IXUSR, name)
        self.assertEqual(self.info["mode"], "bridge")
        self.assertFalse(self.info["tree"])
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True)
        if head.returncode == 0:  # the commit the GPU host must be at, and whether it was dirty
            self.assertEqual(self.info["commit"], head.stdout.decode().strip())
            self.assertIsInstance(self.info["dirty"], bool)
        self.assertLess(os.path.getsize(self.zip), 200_000)

    # -- bridge mode

    def test_bridge_direct_graded(self):
        root = self.autograder_root()
        self.submit_tarball(root)
        self.bridge_config(root)
        results = self.run_autograder(root)
        record = self.fake_record()
        self.assertEqual(record["submission"], "submission.tar.gz")
        self.assertEqual(record["linear"], STUDENT_FILE)
        self.assertEqual(os.path.realpath(record["cwd"]), os.path.realpath(ROOT))
        self.assertIn("--flag", record["argv"])
        with open(self.log + ".key") as f:  # the key from the environment, mode 0600
            self.assertTrue(f.read().strip())
        argv = record["argv"]
        self.assertEqual(argv[argv.index("--sandbox") + 1], "required")  # the default
        self.assertIn("--skip-build", argv)  # built first, without a GPU slot
        self.assertIn(record["gpu"], ("0", "1"))  # then on one of the host's two slots
        self.assertFalse(os.path.exists(record["work"]))  # its own work tree, removed after
        self.assert_graded_as_sent(results)
        # The same submission again (a retry): the same result, not a second grade.
        again = self.run_autograder(root, behaviour="refused")
        self.assertEqual(self.fake_record()["pid"], record["pid"])
        again["extra_data"].pop("gradescope")
        self.assertEqual(again, results)

    def test_bridge_refuses_another_commit(self):
        """A GPU host whose tree is at another commit than the zip's does not grade."""
        root = self.autograder_root()
        self.submit_tarball(root)
        self.bridge_config(root)
        info = os.path.join(root, "source", "build_info.json")
        with open(info) as f:
            built = dict(json.load(f), commit="0123456789ab" * 3 + "0123")
        write(info, json.dumps(built))
        extra = self.assert_not_graded(self.run_autograder(root), "could not grade")
        self.assertEqual(extra["kind"], "environment")
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True)
        host = head.stdout.decode().strip()[:12] if head.returncode == 0 else "no commit"
        self.assertIn(
            f"the GPU host's instructor tree is at {host}"
            if host == "no commit"
            else f"is at commit {host}",
            extra["reason"],
        )
        self.assertIn("built from commit 0123456789ab", extra["reason"])
        self.assertFalse(os.path.exists(self.log))  # nothing was graded

    def forced_command(self, root, flags):
        """The host's forced command for the bridge key, as an instructor writes it."""
        host = os.path.join(os.path.dirname(root), "host")
        grade = f"{sys.executable} {self.fake_grade} {ROOT}"
        return (
            f"cd {shlex.quote(ROOT)} && exec grader/class_scale/gradescope/remote_grade.sh "
            f"--forced --runner direct --timeout 60 --grade {shlex.quote(grade)} "
            f"--flags {shlex.quote(flags)} --jobs {host}/jobs --work {host}/work"
        )

    def test_bridge_through_a_forced_command(self):
        """With the key bound to remote_grade.sh --forced, the client's request names the
        submission and nothing else: the host's settings grade it."""
        root = self.autograder_root()
        self.submit_tarball(root)
        self.bridge_config(root)
        results = self.run_autograder(root, forced=self.forced_command(root, "--flag host"))
        record = self.fake_record()
        self.assertEqual(record["linear"], STUDENT_FILE)
        self.assertIn("host", record["argv"])  # the host's --flags, not the config's "x"
        self.assertNotIn("x", record["argv"])
        self.assert_graded_as_sent(results)

    def test_a_forced_command_runs_nothing_the_client_asks(self):
        root = self.autograder_root()
        self.submit_tarball(root)
        with open(os.path.join(root, "submission", "submission.tar.gz"), "rb") as f:
            tarball = f.read()
        marker = os.path.join(self.tmp, "key-holder-was-here")
        forced = self.forced_command(root, "--flag host")
        head = subprocess.run(
            ["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True
        ).stdout.strip()
        for asked in (
            f"touch {marker}",  # a shell command
            f"remote_grade.sh --name ../../{os.path.basename(marker)}",  # a path
            "x --name submission.tar.gz",  # no commit: graded on whatever the host has
            f"x --name submission.tar.gz --commit {head} --grade 'touch {marker}'",  # a program
        ):
            p = subprocess.run(
                [self.fake_ssh, "grader@gpu-host", asked],
                input=tarball,
                env=dict(os.environ, FAKE_FORCED=forced, FAKE_LOG=self.log, FAKE_BEHAVIOUR="ok"),
                capture_output=True,
                timeout=60,
            )
            self.assertFalse(os.path.exists(marker), asked)
            if "--grade" in asked:  # the name was fine: the host's grade ran, on its settings
                self.assertIn("host", self.fake_record()["argv"])
            elif "--commit" not in asked and "submission.tar.gz" in asked:
                self.assertEqual(p.returncode, 5, p.stderr)
                self.assertIn(b"the forced command needs --commit", p.stderr)
            else:
                self.assertEqual(p.returncode, 5, p.stderr)
                self.assertIn(b"remote_grade: bad --name", p.stderr)

    def test_bridge_sbatch_graded_folder_submission(self):
        """Loose files are packed (a link stays a link: never followed) and run as a job."""
        root = self.autograder_root()
        write(os.path.join(root, "submission", "student", "linear.cu"), STUDENT_FILE)
        os.symlink(
            os.path.join(root, "source", "config.toml"),
            os.path.join(root, "submission", "student", "rmsnorm.cu"),
        )
        self.bridge_config(root, runner="sbatch")
        results = self.run_autograder(root)
        record = self.fake_record()
        self.assertEqual(record["members"]["student/rmsnorm.cu"], "link")
        self.assertEqual(record["linear"], STUDENT_FILE)
        with open(self.log + ".sbatch") as f:
            args = f.read()
        self.assertIn("--wait", args)
        self.assertIn("--gres=gpu:1", args)
        self.assert_graded_as_sent(results)

    def test_bridge_queue_full(self):
        root = self.autograder_root()
        self.submit_tarball(root)
        self.bridge_config(root, runner="sbatch")
        extra = self.assert_not_graded(
            self.run_autograder(root, queue="full"),
            "GPU host could not run the grade",
            "sbatch refused",
        )
        self.assertEqual(extra["kind"], "host")

    def test_bridge_unreachable(self):
        root = self.autograder_root()
        self.submit_tarball(root)
        self.bridge_config(root, host="grader@unreachable.example")
        results = self.run_autograder(root)
        extra = self.assert_not_graded(results, "could not be reached")
        self.assertEqual(extra["kind"], "unreachable")
        self.assertIn("Connection refused", extra["detail"])  # for the staff, not the student
        self.assertNotIn("unreachable.example", results["output"])

    def assert_gone(self, pid):
        for _ in range(100):
            try:
                with open(f"/proc/{pid}/stat") as f:
                    if f.read().split()[2] == "Z":
                        return
            except FileNotFoundError:
                return
            time.sleep(0.1)
        self.fail(f"the timed-out process {pid} still runs")

    def test_bridge_timeout_on_the_host(self):
        """The host's own deadline (timeout_seconds - remote_margin_seconds) stops the grade."""
        root = self.autograder_root()
        self.submit_tarball(root)
        # 9 s on the host: time for the build stage and the grade's start on a loaded machine
        # (the sanitizer build's tests run beside it), then the deadline stops the grade; its
        # report then has 5 s to reach the client before the client's own deadline, which one
        # second did not always give on a loaded 2-core machine.
        self.bridge_config(root, timeout=14, margin=5)
        extra = self.assert_not_graded(self.run_autograder(root, "sleep"), "did not finish")
        self.assertEqual(extra["kind"], "host")
        self.assertLess(self.elapsed, 30)
        self.assert_gone(self.fake_record()["pid"])

    def test_bridge_timeout(self):
        """A transport that hangs (ssh to a host that never answers) is killed at the deadline."""
        root = self.autograder_root()
        self.submit_tarball(root)
        self.bridge_config(root, host="grader@hang.example", timeout=2)
        extra = self.assert_not_graded(self.run_autograder(root), "did not finish within 2 s")
        self.assertEqual(extra["kind"], "timeout")
        self.assertLess(self.elapsed, 30)
        with open(self.log + ".hang") as f:
            self.assert_gone(int(f.read()))

    def test_bridge_garbled(self):
        root = self.autograder_root()
        self.submit_tarball(root)
        self.bridge_config(root)
        self.assertEqual(
            self.assert_not_graded(self.run_autograder(root, "garbled"), "garbled")["kind"],
            "invalid",
        )

    def test_bridge_inflated_score(self):
        root = self.autograder_root()
        self.submit_tarball(root)
        self.bridge_config(root)
        self.assert_not_graded(
            self.run_autograder(root, "inflated"), "exceeds the sum of the tests' max_score"
        )

    def test_bridge_missing_results(self):
        root = self.autograder_root()
        self.submit_tarball(root)
        self.bridge_config(root)
        self.assert_not_graded(self.run_autograder(root, "missing"), "grading failed")

    def test_bridge_environment(self):
        root = self.autograder_root()
        self.submit_tarball(root)
        self.bridge_config(root)
        gradescope = self.assert_not_graded(
            self.run_autograder(root, "environment"), "could not grade"
        )
        self.assertEqual(gradescope["kind"], "environment")
        self.assertIn("baseline run failed", gradescope["reason"])

    def test_bridge_refused(self):
        root = self.autograder_root()
        self.submit_tarball(root)
        self.bridge_config(root)
        self.assert_not_graded(
            self.run_autograder(root, "refused"), "grade: submission.tar.gz: not a readable archive"
        )

    def test_empty_submission(self):
        root = self.autograder_root()
        self.bridge_config(root)
        self.assert_not_graded(self.run_autograder(root), "the submission is empty")

    def test_oversized_submission(self):
        root = self.autograder_root()
        write(os.path.join(root, "submission", "student", "linear.cu"), "x" * (2 << 20))
        self.bridge_config(root)
        config = os.path.join(root, "source", "config.toml")
        with open(config) as f:
            text = f.read().replace("timeout_seconds", "max_submission_mib = 1\ntimeout_seconds")
        write(config, text)
        self.assertEqual(
            self.assert_not_graded(self.run_autograder(root), "over the 1 MiB limit")["kind"],
            "too large",
        )
        self.assertFalse(os.path.exists(self.log))  # nothing was sent

    def test_misconfigured_and_fallback(self):
        root = self.autograder_root()
        self.submit_tarball(root)
        write(os.path.join(root, "source", "config.toml"), '[gradescope]\nmode = "cloud"\n')
        self.assertEqual(
            self.assert_not_graded(self.run_autograder(root), "misconfigured")["kind"],
            "misconfigured",
        )
        os.remove(os.path.join(root, "source", "autograder.py"))  # run_autograder's own fallback
        results = self.run_autograder(root)
        self.assertEqual(results["score"], 0)
        self.assertEqual(results["tests"][0]["name"], NOT_GRADED)
        self.assertIn("NOT GRADED", results["output"])

    # -- local mode

    def test_local_mode(self):
        if (
            subprocess.run(
                ["git", "-C", ROOT, "rev-parse", "--git-dir"], capture_output=True
            ).returncode
            != 0
        ):
            self.skipTest("not a git checkout: local mode's zip carries `git archive HEAD`")
        local_config = os.path.join(self.tmp, "local.toml")
        write(
            local_config,
            textwrap.dedent(f'''\
            [gradescope]
            mode = "local"
            timeout_seconds = 120
            [local]
            grade_command = ["{{python}}", "{self.fake_grade}", "{{tree}}", "--submission",
                             "{{submission}}", "--out", "{{work}}/out", "--work", "{{work}}/tree",
                             "--results-json", "{{results}}"]
            '''),
        )
        zip_path = os.path.join(self.tmp, "local.zip")
        p = subprocess.run(
            [
                sys.executable,
                os.path.join(TOOLS, "make_autograder.py"),
                "--config",
                local_config,
                "--out",
                zip_path,
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("lab.tar.gz", zipfile.ZipFile(zip_path).namelist())
        root = self.autograder_root(zip_path)
        # setup.sh's own part (its apt-get is Gradescope's image build, not this test's).
        p = subprocess.run(
            [
                sys.executable,
                os.path.join(root, "source", "autograder.py"),
                "prepare",
                "--root",
                root,
            ],
            capture_output=True,
            text=True,
        )
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        lab = os.path.join(root, "source", "lab")
        self.assertTrue(os.path.isfile(os.path.join(lab, "grader", "pipeline", "grade.py")))
        self.assertTrue(os.path.isfile(os.path.join(lab, "grader", "rubric.toml")))
        self.submit_tarball(root)
        results = self.run_autograder(root)
        record = self.fake_record()
        self.assertEqual(record["argv"][0], lab)  # {tree}: the zip's instructor tree
        self.assertEqual(record["linear"], STUDENT_FILE)
        self.assert_graded_as_sent(results)
        self.assert_not_graded(self.run_autograder(root, "environment"), "could not grade")


class Validate(unittest.TestCase):
    """autograder.validate_results on what a grader must not get away with."""

    def good(self):
        return {
            "score": 5.0,
            "tests": [
                {
                    "name": "a",
                    "score": 5.0,
                    "max_score": 10,
                    "status": "failed",
                    "output": "",
                    "visibility": "visible",
                },
                {
                    "name": "b",
                    "score": 0,
                    "max_score": 0,
                    "status": "passed",
                    "output": "",
                    "visibility": "hidden",
                },
            ],
            "leaderboard": [{"name": "ms", "value": 3.5, "order": "asc"}],
            "extra_data": {},
        }

    def test_good(self):
        self.assertEqual(autograder.validate_results(self.good()), [])

    def test_bad(self):
        cases = {
            "score is a bool": lambda r: r.update(score=True),
            "score is NaN": lambda r: r.update(score=float("nan")),
            "no tests": lambda r: r.update(tests=[]),
            "test over its max": lambda r: r["tests"][0].update(score=11),
            "total over the sum of max": lambda r: r.update(score=11),
            "total not the sum": lambda r: r.update(score=1.0),
            "no status": lambda r: r["tests"][0].pop("status"),
            "bad visibility": lambda r: r["tests"][1].update(visibility="public"),
            "score a string": lambda r: r["tests"][0].update(score="5"),
            "bad leaderboard": lambda r: r.update(leaderboard=[{"value": 1}]),
            "bad output_format": lambda r: r.update(output_format="pdf"),
        }
        for what, spoil in cases.items():
            r = self.good()
            spoil(r)
            self.assertTrue(autograder.validate_results(r), what)
        self.assertTrue(autograder.validate_results([1, 2]))


if __name__ == "__main__":
    unittest.main()
