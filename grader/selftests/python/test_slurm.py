#!/usr/bin/env python3
"""Tests of batch.py's Slurm mode (grader/class_scale/slurm.py).

    python3 -m grader.selftests.python.test_slurm            (Cluster: root, slurm-wlm and munge)

Parsing: the sbatch command line and what sacct/scontrol say of an array's tasks (anywhere).
Cluster: a real one-node Slurm cluster on 127.0.0.1, made for the test in a temporary directory
(its own munged socket and key, slurm.conf, state and spool; slurmctld and slurmd run with -D as
the test's children and are stopped at the end; four GPUs of gres where mknod can make their
device nodes), on which batch.py --slurm grades five submissions in a build array and a GPU
array with a stand-in for grade.py (as test_batch.py's: no GPU, seconds): a correct one, a
stub, one grade.py refuses at its build, one whose GPU task is cancelled before it writes its
grade, and one whose code does not compile (a grade: 0, with the compiler's error).
batch.py runs from a copy (with slurm.py and score.py) so that edits elsewhere in grader/ during
the test do not change its grader fingerprint. Without root or the Slurm and munge programs (tools/setup.sh --instructor installs them), the
Cluster tests are skipped. Every wait is bounded; the whole file takes seconds.
"""

import csv
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

from grader import ROOT
from grader.class_scale import slurm
from grader.selftests.python.test_batch import (  # the stand-in grader, the page's table
    FAKE_GRADE,
    Table,
)

# The stand-in for grade.py: does what the submission's behaviour.txt says, with results.json
# written by score.py's own functions. "ok MS": every kernel passes, the graded track takes MS ms;
# "stub": every kernel throws NotImplemented; "refused": exit 2 as grade.py refusing a hand-in;
# "vanish": on its first call, cancels its own Slurm task (a task that never writes its grade);
# "nocompile": the build records a compiler error and ends 0, as grade.py --build-only does.

PROGRAMS = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scontrol", "scancel")


class Parsing(unittest.TestCase):
    """What batch.py asks of Slurm and reads back, without a cluster."""

    def settings(self, **batch):
        return slurm.settings(
            {"timeout_minutes": 30, "retries": 2, **batch}, {"gres": None, "partition": None}
        )

    def test_the_sbatch_command(self):
        s = self.settings()
        cmd = slurm.sbatch_command(40, "/o/slurm/task.sh", "/o/slurm/logs", "/lab", s)
        self.assertEqual(cmd[:3], ["sbatch", "--parsable", "--array=0-39"])
        for arg in (
            "--gres=gpu:1",
            "--exclusive",
            "--requeue",
            "--time=100",
            "--chdir=/lab",
            "--output=/o/slurm/logs/%A_%a.out",
        ):
            self.assertIn(arg, cmd)
        self.assertEqual(cmd[-1], "/o/slurm/task.sh")
        self.assertFalse(any(a.startswith(("--partition", "--account")) for a in cmd))
        s = self.settings(
            slurm_gres="",
            slurm_exclusive=False,
            slurm_requeue=False,
            slurm_partition="gpu-h100",
            slurm_account="cs425",
            slurm_time_minutes=1500,
            slurm_max_running=4,
            slurm_sbatch_args=["--qos=teaching"],
        )
        cmd = slurm.sbatch_command(3, "t.sh", "logs", "/lab", s)
        self.assertFalse(any(a.startswith("--gres") for a in cmd))
        self.assertNotIn("--exclusive", cmd)
        for arg in (
            "--array=0-2%4",
            "--no-requeue",
            "--partition=gpu-h100",
            "--account=cs425",
            "--time=1-01:00:00",
            "--qos=teaching",
        ):
            self.assertIn(arg, cmd)
        # The command line wins over the rubric; "none" drops the gres too.
        s = slurm.settings(
            {"timeout_minutes": 30, "retries": 2, "slurm_gres": "gpu:h100:1"},
            {"gres": "none", "time_minutes": 5},
        )
        self.assertEqual((s["gres"], s["time_minutes"]), ("", 5))
        # The build array: no GPU request, not exclusive, held; a partition of its own.
        s = self.settings(
            slurm_sbatch_args=["--qos=t", "--gpus-per-task=1", "--gres", "gpu:2", "-G1"],
            slurm_build_partition="cpu",
            slurm_build_cpus=16,
        )
        cmd = slurm.build_sbatch_command(40, "/o/slurm/build.sh", "/o/slurm/logs", "/lab", s)
        self.assertEqual(cmd[-2:], ["--qos=t", "/o/slurm/build.sh"])
        for arg in ("--partition=cpu", "--cpus-per-task=16", "--hold", "--time=40"):
            self.assertIn(arg, cmd)
        self.assertNotIn("--exclusive", cmd)
        cmd = slurm.sbatch_command(40, "/o/slurm/task.sh", "/o/slurm/logs", "/lab", s, after="7")
        for arg in ("--dependency=aftercorr:7", "--kill-on-invalid-dep=yes", "--gpus-per-task=1"):
            self.assertIn(arg, cmd)

    def test_array_indices(self):
        self.assertEqual(slurm.expand("4"), [4])
        self.assertEqual(slurm.expand("[1-3,7]"), [1, 2, 3, 7])
        self.assertEqual(slurm.expand("0-5%2"), [0, 1, 2, 3, 4, 5])
        self.assertEqual(slurm.expand("0-8:4"), [0, 4, 8])

    def test_sacct_and_scontrol(self):
        sacct = (
            "812_0|COMPLETED|0:0|gpu07|None\n"
            "812_1|NODE_FAIL|0:0|gpu03|None\n"
            "812_2|TIMEOUT|0:0|gpu07|TimeLimit\n"
            "812_[3-4]|CANCELLED by 1000|0:0|None assigned|None\n"
            "9812_5|COMPLETED|0:0|gpu01|None\n"
        )
        r = slurm.parse_sacct(sacct, "812")
        self.assertEqual(sorted(r), [0, 1, 2, 3, 4])
        self.assertEqual(
            slurm.reason("812", 1, r[1]),
            "Slurm task 812_1 ended without writing its "
            "grade: NODE_FAIL, exit code 0:0, node gpu03",
        )
        self.assertIn(
            "TIMEOUT, exit code 0:0, node gpu07, reason TimeLimit", slurm.reason("812", 2, r[2])
        )
        self.assertEqual(
            slurm.reason("812", 4, r[4]),
            "Slurm task 812_4 ended without writing its grade: CANCELLED by 1000, exit code 0:0",
        )
        scontrol = (
            "JobId=815 ArrayJobId=812 ArrayTaskId=2 JobName=glmasr-grade JobState=FAILED "
            "Reason=NonZeroExitCode ExitCode=1:0 NodeList=gpu07\n"
            "JobId=812 ArrayJobId=812 ArrayTaskId=3-5 JobState=CANCELLED Reason=None "
            "ExitCode=0:0 NodeList=(null)\n"
        )
        r = slurm.parse_scontrol(scontrol, "812")
        self.assertEqual(sorted(r), [2, 3, 4, 5])
        self.assertIn(
            "FAILED, exit code 1:0, node gpu07, reason NonZeroExitCode",
            slurm.reason("812", 2, r[2]),
        )
        self.assertIn("neither sacct nor scontrol", slurm.reason("812", 9, None))

    def test_waiting_says_what_is_left_and_what_is_held(self):
        answers = [
            (0, "812_0|RUNNING|None\n812_1|PENDING|launch failed requeued held\n", ""),
            (0, "812_1|PENDING|launch failed requeued held\n", ""),
            (1, "", "slurm_load_jobs error: Invalid job id specified"),
        ]
        calls, said = [], []
        real = slurm.call
        slurm.call = lambda cmd: (calls.append(cmd), answers.pop(0))[1]
        try:
            self.assertTrue(slurm.wait("812", 1, 0, say=said.append))
        finally:
            slurm.call = real
        self.assertEqual(calls[0], ["squeue", "-h", "-r", "-j", "812", "-o", "%i|%T|%r"])
        self.assertEqual(
            said,
            [
                "batch: job 812: 1 pending, 1 running",
                "batch: task 812_1 is held (launch failed requeued held): "
                "`scontrol release 812_1` or `scancel 812_1`",
                "batch: job 812: 1 pending",
            ],
        )


def skip_reason():
    if os.geteuid() != 0:
        return "no Slurm test cluster: not root"
    missing = [p for p in PROGRAMS if not shutil.which(p)]
    if missing:
        return (
            "no Slurm test cluster: " + ", ".join(missing) + " not installed "
            "(tools/setup.sh --instructor)"
        )
    return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_line():
    """This machine as slurmd sees it (CPUs, sockets, cores, RealMemory), named localhost."""
    p = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=30)
    fields = [
        f
        for f in (p.stdout.splitlines() or [""])[0].split()
        if f.split("=")[0]
        in ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
    ]
    if not any(f.startswith("CPUs=") for f in fields):
        fields = [f"CPUs={os.cpu_count()}"]
    return "NodeName=localhost NodeAddr=127.0.0.1 " + " ".join(fields) + " State=UNKNOWN"


@unittest.skipIf(skip_reason(), skip_reason())
class Cluster(unittest.TestCase):
    """batch.py --slurm on a real (one-node, 127.0.0.1) Slurm cluster."""

    @classmethod
    def setUpClass(cls):
        cls.procs = []
        cls.tmp = tempfile.mkdtemp(prefix="glmasr-slurm-")
        try:
            cls.start_cluster()
        except BaseException:
            cls.tearDownClass()
            raise

    @classmethod
    def start_cluster(cls):
        t = cls.tmp
        os.chmod(t, 0o711)  # munged wants its socket's directories searchable by all
        for d in ("munge", "state", "spool", "logs"):
            os.makedirs(os.path.join(t, d), mode=0o755)
        key = os.path.join(t, "munge.key")
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, os.urandom(1024))
        os.close(fd)
        sock = os.path.join(t, "munge", "munge.socket")
        cls.daemon(
            "munged",
            [
                "munged",
                "-F",
                f"--socket={sock}",
                f"--key-file={key}",
                f"--pid-file={t}/munged.pid",
                f"--log-file={t}/logs/munged.log",
                f"--seed-file={t}/munged.seed",
            ],
        )
        deadline = time.time() + 10
        while not os.path.exists(sock):
            if time.time() > deadline:
                raise RuntimeError("munged did not start: " + cls.log("munged"))
            time.sleep(0.1)

        # Four GPUs of gres for the GPU array: device nodes stand for them (Slurm only numbers
        # them: CUDA_VISIBLE_DEVICES and SLURM_JOB_GPUS). Where mknod is not allowed, the
        # cluster has no GPU gres and the GPU array asks for none (--gres "").
        cls.gres = True
        try:
            for i in range(4):
                os.mknod(os.path.join(t, f"gpu{i}"), 0o600 | stat.S_IFCHR, os.makedev(1, 3))
        except OSError:
            cls.gres = False
        with open(os.path.join(t, "gres.conf"), "w") as f:
            if cls.gres:
                f.write(f"AutoDetect=off\nNodeName=localhost Name=gpu File={t}/gpu[0-3]\n")
        node = node_line()
        if cls.gres:
            node = "GresTypes=gpu\n" + node.replace(" State=", " Gres=gpu:4 State=")
        # sched_interval=1: the controller tests the GPU tasks' dependencies every second, so a
        # GPU task starts within about a second of its build task (every 60 s by default).
        cls.conf = os.path.join(t, "slurm.conf")
        with open(cls.conf, "w") as f:
            f.write(
                textwrap.dedent(f"""\
                ClusterName=glmasrtest
                SlurmctldHost=localhost
                SlurmctldPort={free_port()}
                SlurmdPort={free_port()}
                SlurmUser=root
                SlurmdUser=root
                AuthType=auth/munge
                CredType=cred/munge
                AuthInfo=socket={sock}
                StateSaveLocation={t}/state
                SlurmdSpoolDir={t}/spool
                SlurmctldPidFile={t}/slurmctld.pid
                SlurmdPidFile={t}/slurmd.pid
                SlurmctldLogFile={t}/logs/slurmctld.log
                SlurmdLogFile={t}/logs/slurmd.log
                ProctrackType=proctrack/linuxproc
                TaskPlugin=task/none
                SelectType=select/cons_tres
                SelectTypeParameters=CR_Core
                SchedulerType=sched/builtin
                SchedulerParameters=sched_interval=1
                MpiDefault=none
                ReturnToService=2
                JobAcctGatherType=jobacct_gather/none
                AccountingStorageType=accounting_storage/none
                JobCompType=jobcomp/none
                MinJobAge=300
                {{node}}
                PartitionName=grading Nodes=localhost Default=YES MaxTime=INFINITE State=UP
                """).replace("{node}", node)
            )
        # Only this cluster's settings: none of a Slurm job this test might itself run in.
        cls.env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM")}
        cls.env["PYTHONPATH"] = ROOT  # the stand-in grader imports grader.pipeline.score
        cls.env["SLURM_CONF"] = cls.conf
        cls.env["FAKE_GPU_SECONDS"] = "1.5"  # a grade long enough for two to overlap
        cls.daemon("slurmctld", ["slurmctld", "-D", "-i", "-f", cls.conf])
        cls.daemon("slurmd", ["slurmd", "-D", "-N", "localhost", "-f", cls.conf])
        deadline = time.time() + 30
        while True:
            p = subprocess.run(
                ["sinfo", "-h", "-n", "localhost", "-o", "%T"],
                env=cls.env,
                capture_output=True,
                text=True,
                timeout=30,
            )
            if p.stdout.strip() == "idle":
                break
            if time.time() > deadline:
                raise RuntimeError(
                    f"the node is not idle after 30 s ({p.stdout.strip()} "
                    f"{p.stderr.strip()}): " + cls.log("slurmctld") + cls.log("slurmd")
                )
            time.sleep(0.2)

    @classmethod
    def daemon(cls, name, cmd):
        with open(os.path.join(cls.tmp, "logs", name + ".out"), "w") as out:
            cls.procs.append(
                subprocess.Popen(
                    cmd,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=getattr(cls, "env", None),
                    start_new_session=True,
                )
            )

    @classmethod
    def log(cls, name):
        text = ""
        for suffix in (".out", ".log"):
            try:
                with open(os.path.join(cls.tmp, "logs", name + suffix)) as f:
                    text += f.read()[-1500:]
            except OSError:
                pass
        return f"\n--- {name}:\n{text}"

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "env"):  # cancel whatever is left, then stop the daemons
            subprocess.run(
                ["scancel", "--user", "root"], env=cls.env, capture_output=True, timeout=30
            )
            deadline = time.time() + 15
            while (
                time.time() < deadline
                and subprocess.run(
                    ["squeue", "-h", "-o", "%i"],
                    env=cls.env,
                    capture_output=True,
                    text=True,
                    timeout=30,
                ).stdout.strip()
            ):
                time.sleep(0.2)
        for p in reversed(cls.procs):  # slurmd, slurmctld, munged: this test's own children
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=15)
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def setUp(self):
        self.dir = os.path.join(self.tmp, "class")
        # batch.py runs from a copy of the grader package's modules it imports: its grader
        # fingerprint covers grader/, which edits in the project during the test must not change.
        self.lab = os.path.join(self.dir, "lab")
        for name in (
            "__init__.py",
            "class_scale/__init__.py",
            "class_scale/batch.py",
            "class_scale/similarity.py",
            "class_scale/slots.py",
            "class_scale/slurm.py",
            "pipeline/__init__.py",
            "pipeline/intake.py",
            "pipeline/review.py",
            "pipeline/score.py",
        ):
            os.makedirs(os.path.join(self.lab, "grader", os.path.dirname(name)), exist_ok=True)
            shutil.copy(os.path.join(ROOT, "grader", name), os.path.join(self.lab, "grader", name))
        self.subs = os.path.join(self.dir, "subs")
        for name, behaviour in (
            ("ada", "ok 10"),
            ("bob", "stub"),
            ("cy", "refused"),
            ("dee", "vanish"),
            ("eli", "nocompile"),
        ):
            os.makedirs(os.path.join(self.subs, name))
            with open(os.path.join(self.subs, name, "behaviour.txt"), "w") as f:
                f.write(behaviour)
        self.fake = os.path.join(self.dir, "fake_grade.py")
        with open(self.fake, "w") as f:
            f.write(FAKE_GRADE)
        with open(os.path.join(ROOT, "grader", "rubric.toml")) as f:
            text = f.read()
        self.rubric = os.path.join(self.dir, "rubric.toml")
        with open(self.rubric, "w") as f:  # the shipped rubric: gres gpu:1, exclusive, requeue
            f.write(text.replace("timeout_minutes = 30", "timeout_minutes = 1"))
        self.out = os.path.join(self.dir, "out")

    def tearDown(self):
        shutil.rmtree(self.dir, ignore_errors=True)

    def batch(self, *extra):
        cmd = [
            sys.executable,
            "-m",
            "grader.class_scale.batch",
            self.subs,
            "--slurm",
            "--out",
            self.out,
            "--rubric",
            self.rubric,
            "--gpu-lock",
            os.path.join(self.dir, "gpu-slots", "gpu"),
            "--grade-cmd",
            f"{sys.executable} {self.fake} {ROOT}",
            "--poll-seconds",
            "0.3",
            "--wait-hours",
            "0.02",
            *extra,
        ]
        p = subprocess.run(
            cmd, capture_output=True, text=True, timeout=100, env=self.env, cwd=self.lab
        )
        print(
            f"$ batch.py --slurm {' '.join(extra)}  (exit {p.returncode})\n{p.stdout}{p.stderr}",
            file=sys.stderr,
        )
        return p

    def read(self, *path):
        with open(os.path.join(self.out, *path), encoding="utf-8") as f:
            return json.load(f) if path[-1].endswith(".json") else f.read()

    def test_a_class_on_slurm(self):
        t0 = time.time()
        # The GPU array asks for a GPU per task that this cluster does not have, and says so;
        # the build array, submitted held, is cancelled before any of it runs.
        p = self.batch("--gres", "gpu:h100:1" if self.gres else "gpu:1")
        self.assertEqual(p.returncode, 2, p.stdout + p.stderr)
        self.assertEqual(p.stderr.count("\n"), 1, p.stderr)
        self.assertIn("GPU array: sbatch refused the array", p.stderr)
        self.assertIn("--gres ''", p.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.out, "slurm", "job.json")))
        self.assertFalse(os.path.exists(os.path.join(self.out, "students", "ada")))

        # A build array (no GPU) and a GPU array, tasks side by side on the node (no
        # --exclusive): with gres, one GPU per GPU task; without, four GPU slots (lock files
        # only). Each grade in a work tree of its own.
        gpus = [] if self.gres else ["--gres", "", "--gpus", "4"]
        p = self.batch(*gpus, "--no-exclusive", "--sbatch-arg", "--comment=glmasr-test")
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)  # not everyone was graded
        job = self.read("slurm", "job.json")
        build_job = job["build_job"]
        self.assertEqual(job["sbatch"][-2:], ["--comment=glmasr-test", job["sbatch"][-1]])
        self.assertIn("--comment=glmasr-test", job["build_sbatch"])
        self.assertTrue(job["collected"])
        self.assertEqual(job["students"], ["ada", "bob", "cy", "dee", "eli"])
        for arg in ("--array=0-4", "--requeue", "--time=13"):  # 1 × 3 + 10
            self.assertIn(arg, job["sbatch"])
        for arg in ("--array=0-4", "--requeue", "--time=11", "--hold"):  # 1 + 10
            self.assertIn(arg, job["build_sbatch"])
        self.assertIn(f"--dependency=aftercorr:{build_job}", job["sbatch"])
        self.assertIn("--kill-on-invalid-dep=yes", job["sbatch"])
        self.assertNotIn("--exclusive", job["sbatch"] + job["build_sbatch"])
        self.assertFalse(any(a.startswith("--gres") for a in job["build_sbatch"]))
        self.assertEqual("--gres=gpu:1" in job["sbatch"], self.gres)
        states = {n: self.read("students", n, "state.json") for n in job["students"]}
        graded = [states[n] for n in ("ada", "bob", "eli")]
        for index, state in zip((0, 1, 4), graded):
            # Built without a GPU, graded after its own build task ended, on a GPU (gres).
            built = state["build"]["started"] + state["build"]["seconds"]
            self.assertGreaterEqual(state["attempts"][0]["started"], built)
            self.assertEqual(state["slurm"]["build_gpus"], "")
            self.assertEqual(state["slurm"]["build_task"], f"{build_job}_{index}")
            self.assertEqual(state["slurm"]["gpus"] != "", self.gres)
        spans = sorted(
            (s["attempts"][0]["started"], s["attempts"][0]["started"] + s["attempts"][0]["seconds"])
            for s in graded
        )
        self.assertTrue(
            any(a[1] > b[0] for a, b in zip(spans, spans[1:])),
            f"no two grades ran at the same time: {spans}",
        )
        self.assertEqual(len({s["work"] for s in graded}), 3)
        self.assertFalse(os.path.exists(os.path.join(self.out, "work", "shared")))
        first = min(s[0] for s in spans)
        print(
            "Slurm: "
            + ", ".join(
                f"{n} built at {s['build']['started'] - first:+.1f} s for "
                f"{s['build']['seconds']:.1f} s, graded at {s['attempts'][0]['started'] - first:+.1f} "
                f"s for {s['attempts'][0]['seconds']:.1f} s on GPU {s['attempts'][0]['gpu']}"
                for n, s in zip(("ada", "bob", "eli"), graded)
            ),
            file=sys.stderr,
        )

        with open(os.path.join(self.out, "class.csv"), newline="") as f:
            rows = {r["student"]: r for r in csv.DictReader(f)}
        self.assertEqual(
            {n: r["status"] for n, r in rows.items()},
            {
                "ada": "graded",
                "bob": "graded",
                "cy": "not graded",
                "dee": "not graded",
                "eli": "graded",
            },
            {n: r["note"] for n, r in rows.items()},
        )
        self.assertEqual(float(rows["ada"]["total"]), 74.0)  # kernels 54 + speed 20 (no WER)
        self.assertEqual(float(rows["bob"]["total"]), 0.0)  # a stub earns nothing
        # Code that does not compile is a grade: its build task ended 0, its GPU task scored
        # the build with the compiler's error.
        self.assertEqual(float(rows["eli"]["total"]), 0.0)
        self.assertIn(
            "build: student/linear.cu:3: error: expected ';'",
            self.read("students", "eli", "results.json")["output"],
        )
        self.assertIn("a symbolic link", rows["cy"]["note"])  # grade.py's own line
        self.assertEqual(rows["cy"]["total"], "")  # never a silent 0
        self.assertEqual(rows["dee"]["total"], "")
        self.assertEqual(
            rows["dee"]["note"],
            f"Slurm task {job['job']}_3 ended without writing "
            "its grade: CANCELLED, exit code 0:15, node localhost",
        )

        for name in job["students"]:
            self.assertEqual(states[name]["run"], job["run"])
            self.assertEqual(
                states[name]["slurm"]["build_task" if name == "cy" else "task"],
                f"{build_job if name == 'cy' else job['job']}_{job['students'].index(name)}",
            )
        for name in ("ada", "bob", "eli"):  # graded inside their tasks, on the node
            state = states[name]
            self.assertEqual((state["status"], state["slurm"]["node"]), ("graded", "localhost"))
            results = self.read("students", name, "results.json")
            self.assertEqual(results["score"], float(rows[name]["total"]))
            log = self.read("students", name, "grade.log")
            self.assertIn(f"=== build: {sys.executable} {self.fake}", log)
            self.assertIn(
                f"=== attempt 1 on GPU {state['attempts'][0]['gpu']}: {sys.executable} {self.fake}",
                log,
            )
        # cy's hand-in is refused by its build: the build task ends it "not graded" and exits
        # 1, and Slurm cancels its GPU task, which never starts.
        self.assertIn("grade.py exit 2 (build)", states["cy"]["reason"])
        self.assertEqual(states["cy"]["attempts"], [])
        logs = os.path.join(self.out, "slurm", "logs")
        self.assertTrue(os.path.exists(os.path.join(logs, f"{build_job}_2.out")))
        self.assertFalse(os.path.exists(os.path.join(logs, f"{job['job']}_2.out")))
        self.assertEqual(states["dee"]["slurm"]["source"], "scontrol")
        self.assertFalse(os.path.exists(os.path.join(self.out, "students", "cy", "results.json")))
        self.assertTrue(os.path.exists(os.path.join(logs, f"{job['job']}_0.out")))

        page = Table()
        text = self.read("leaderboard.html")
        page.feed(text)
        self.assertEqual([r[1] for r in page.rows[1:4]], ["ada", "bob", "eli"])
        self.assertEqual(len(page.rows), 6)
        self.assertTrue(all(r[0] == "" for r in page.rows[4:]))  # the ungraded are not ranked
        self.assertIn("CANCELLED", text)

        # Again, without waiting: the graded are kept, the two others go in new arrays of two,
        # in work trees of this run.
        p = self.batch(*gpus, "--no-wait")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        again = self.read("slurm", "job.json")
        self.assertNotEqual(again["job"], job["job"])
        self.assertEqual((again["students"], again["collected"]), (["cy", "dee"], False))
        # The next run waits for those arrays and collects them instead of submitting; dee's
        # task grades this time (the stand-in cancels only its first call).
        p = self.batch(*gpus)
        self.assertEqual(p.returncode, 1, p.stdout + p.stderr)
        self.assertIn(f"Slurm job {again['job']} of an earlier run is not collected yet", p.stdout)
        self.assertNotIn("submitted", p.stdout)
        self.assertTrue(self.read("slurm", "job.json")["collected"])
        with open(os.path.join(self.out, "class.csv"), newline="") as f:
            rows = {r["student"]: r for r in csv.DictReader(f)}
        self.assertEqual(
            {n: r["status"] for n, r in rows.items()},
            {
                "ada": "graded",
                "bob": "graded",
                "cy": "not graded",
                "dee": "graded",
                "eli": "graded",
            },
            {n: r["note"] for n, r in rows.items()},
        )
        self.assertEqual(  # a work tree of the new run: a retry starts from a fresh build
            self.read("students", "dee", "state.json")["work"],
            os.path.join(self.out, "work", "dee-" + again["run"][-8:]),
        )
        with open(os.path.join(self.out, "work", "calls")) as f:
            self.assertEqual([l.split()[0] for l in f].count("ada"), 1)  # graded once, kept since
        with open(os.path.join(self.out, "work", "builds")) as f:
            self.assertEqual([l.split()[0] for l in f].count("ada"), 1)  # and built once
        print(f"Slurm test: {time.time() - t0:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
