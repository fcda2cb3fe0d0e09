"""slots.py — GPU slots: at most one grade on a GPU of this host at a time.

A slot is one GPU and one lock file, PREFIX.gpu<ID> (PREFIX: batch.py's --gpu-lock, by default
/tmp/glmasr-gpu-slots-<uid>/gpu: a folder of the grading user's own, mode 0700, so that no other
user of the host can hold a slot or plant its file; one grading user per GPU host). A grade takes a free slot (flock, non-blocking, over every slot in
turn; all busy: it waits and tries again), runs with CUDA_VISIBLE_DEVICES set to the slot's GPU,
and gives the slot back when it ends. The lock is flock(2)'s: the kernel drops it when the
process holding it dies, so a crashed or killed grade never leaves a slot taken. Every grader of
the host takes the same files — batch.py's local loop, its Slurm tasks, and the Gradescope
bridge's direct runner (grader/class_scale/gpu_slot.sh, util-linux flock) — so two of them never
time on one GPU. Standard library only.
"""

import fcntl
import os
import shutil
import stat
import subprocess
import threading
import time

DEFAULT_LOCK = f"/tmp/glmasr-gpu-slots-{os.getuid()}/gpu"


def own_folder(folder):
    """Makes `folder` (mode 0700) or checks that it is this user's own and closed to others: a
    lock another user can open is a lock another user can hold. Raises OSError saying why."""
    os.makedirs(folder, mode=0o700, exist_ok=True)
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        raise OSError(
            f"{folder}: the GPU slots' folder is not this user's own, closed to others (owner "
            f"uid {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o}): remove it, or choose "
            "another --gpu-lock"
        )


def gpu_ids(spec=None):
    """The GPUs to grade on: spec "N" (GPUs 0..N-1) or a comma list "0,2,3"; without it the
    ids in CUDA_VISIBLE_DEVICES, else as many as nvidia-smi lists, else one ("0")."""
    spec = (spec or "").strip()
    if spec:
        if spec.isdigit():
            return [str(i) for i in range(max(1, int(spec)))]
        ids = [s.strip() for s in spec.split(",") if s.strip()]
        if ids:
            return ids
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if visible:
        return [s.strip() for s in visible.split(",") if s.strip()]
    if shutil.which("nvidia-smi"):
        try:
            p = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
            count = sum(line.startswith("GPU ") for line in p.stdout.splitlines())
            if p.returncode == 0 and count:
                return [str(i) for i in range(count)]
        except (OSError, subprocess.TimeoutExpired):
            pass
    return ["0"]


class Slots:
    """A pool of GPU slots shared, through their lock files, with every grader of the host."""

    def __init__(self, prefix, ids, poll_seconds=1.0, visible=None):
        """ids: the GPUs (their lock files); visible: CUDA_VISIBLE_DEVICES for every slot
        instead of its id (a Slurm task's one GPU, which Slurm renumbers)."""
        self.prefix, self.ids, self.poll, self.visible = prefix, list(ids), poll_seconds, visible
        self._local = threading.Lock()  # serialises this process's own tries (threads)

    def path(self, gpu):
        return f"{self.prefix}.gpu{gpu.replace(',', '-')}"

    def _try(self, gpu):
        fd = os.open(self.path(gpu), os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            os.close(fd)
            return None

    def acquire(self, deadline=None):
        """(fd, CUDA_VISIBLE_DEVICES) of a free slot, waiting for one; None when deadline
        (time.time()) passes."""
        own_folder(os.path.dirname(os.path.abspath(self.prefix)))
        while True:
            with self._local:
                for gpu in self.ids:
                    fd = self._try(gpu)
                    if fd is not None:
                        return fd, self.visible or gpu
            if deadline is not None and time.time() >= deadline:
                return None
            time.sleep(self.poll)

    @staticmethod
    def release(fd):
        os.close(fd)  # closing the only descriptor drops the flock
