"""gpu_idle.py — is the GPU quiet before the grader times a trusted track on it?

    why = gpu_idle.check([baseline_pid, reference_pid])    # None: quiet; else one line why not
    result, why = gpu_idle.quietly(measure, pids, "before the baseline's run 3")

A yardstick timed beside other work on the GPU (another user's job, a process that outlived the
graded worker) would run slower, and every graded track would look faster against it. The
graded worker is killed before the yardsticks are timed (e2e.py, kernel_speed.py); this module
checks that nothing else took its place. Two nvidia-smi queries, on the GPU the workers use
(CUDA_VISIBLE_DEVICES's first, an index or a UUID):

  - the compute processes (NVML): each must be one of the grader's own trusted workers. Inside a
    container nvidia-smi may list no process at all, or list them under the host's pids; so when
    it lists none of ours, a pid this process does not know is only counted: more of them than
    there are trusted workers is a process that is not ours.
  - utilization.gpu: the share of its last sample period (1/6 s to 1 s) in which a kernel ran,
    read until it is at most IDLE_PERCENT, for at most SETTLE_SECONDS (the timed run before,
    the grader's own, fills the period that ends just after it).

A measurement is taken only between two quiet checks (utilisation before it, the processes
before and after it); one that is not is taken again, ATTEMPTS times in all. Without a working
nvidia-smi (none installed, no driver: the cpu track's tests) nothing can be checked and every
check passes: the kill alone keeps student processes away.

Standard library only.
"""

import os
import subprocess
import time

NVIDIA_SMI = "nvidia-smi"
IDLE_PERCENT = 5  # utilization.gpu at most this: quiet
SETTLE_SECONDS = 3.0  # how long utilisation may take to fall after the last timed run
POLL_SECONDS = 0.2
ATTEMPTS = 3  # tries of a measurement before the GPU is declared busy
RETRY_SECONDS = 5.0  # the wait before the next try
QUERY_TIMEOUT = 30  # seconds an nvidia-smi query may take


def visible_gpu():
    """The GPU the workers use: CUDA_VISIBLE_DEVICES's first entry, else 0."""
    return (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"


def query(nvidia_smi, what):
    """nvidia-smi's CSV lines for one --query-… option, without header or units; None when it
    cannot answer (not installed, no driver, an error)."""
    try:
        p = subprocess.run(
            [nvidia_smi, what, "--format=csv,noheader,nounits", f"--id={visible_gpu()}"],
            capture_output=True,
            text=True,
            timeout=QUERY_TIMEOUT,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if p.returncode != 0:
        return None
    return [line.strip() for line in p.stdout.splitlines() if line.strip()]


def compute_processes(nvidia_smi=NVIDIA_SMI):
    """[(pid, name)] of the processes holding a CUDA context on the GPU; None: unknown."""
    lines = query(nvidia_smi, "--query-compute-apps=pid,process_name")
    if lines is None:
        return None
    found = []
    for line in lines:
        pid, _, name = line.partition(",")
        if pid.strip().isdigit():
            found.append((int(pid), name.strip()))
    return found


def utilisation(nvidia_smi=NVIDIA_SMI):
    """utilization.gpu in percent; None: unknown."""
    lines = query(nvidia_smi, "--query-gpu=utilization.gpu")
    return int(lines[0]) if lines and lines[0].isdigit() else None


def settle(nvidia_smi=NVIDIA_SMI, sleep=time.sleep):
    """Reads utilisation until it is at most IDLE_PERCENT, for at most SETTLE_SECONDS; returns
    the last reading (None: unknown). Every timed request waits here first, graded ones too, so
    every track starts its runs on a GPU in the same state."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        busy = utilisation(nvidia_smi)
        if busy is None or busy <= IDLE_PERCENT or time.monotonic() >= deadline:
            return busy
        sleep(POLL_SECONDS)


def strangers(allowed, nvidia_smi=NVIDIA_SMI):
    """One line naming what holds the GPU besides the `allowed` pids; None if nothing does."""
    listed = compute_processes(nvidia_smi)
    if listed is None:
        return None
    allowed = set(allowed)
    unknown = [(pid, name) for pid, name in listed if pid not in allowed]
    seen_as_ours = len(listed) > len(unknown)  # nvidia-smi shows this pid namespace's numbers
    if not unknown or (not seen_as_ours and len(unknown) <= len(allowed)):
        return None  # nothing, or what may be ours under another namespace's numbers
    shown = ", ".join(f"{pid} ({name or '?'})" for pid, name in unknown[:3])
    return f"other processes hold the GPU: {shown}"


def check(allowed, nvidia_smi=NVIDIA_SMI, sleep=time.sleep):
    """None when the GPU is quiet — utilisation settled, no process but the `allowed` pids (the
    grader's trusted workers) — else one line why not."""
    busy = settle(nvidia_smi, sleep)
    if busy is not None and busy > IDLE_PERCENT:
        return f"the GPU stayed {busy} % busy with no timed run on it"
    return strangers(allowed, nvidia_smi)


def quietly(measure, allowed, what, nvidia_smi=NVIDIA_SMI, sleep=time.sleep):
    """(measure(), None), measure() taken between two quiet checks: the GPU settled and held by
    the `allowed` pids alone before it, by them alone after it (its own kernels fill the
    utilisation after it). A measurement with the GPU busy is discarded and taken again,
    ATTEMPTS times in all, RETRY_SECONDS apart; then (None, one line: what, and why)."""
    for attempt in range(ATTEMPTS):
        if attempt:
            sleep(RETRY_SECONDS)
        why = check(allowed, nvidia_smi, sleep)
        if why:
            continue
        result = measure()
        why = strangers(allowed, nvidia_smi)
        if not why:
            return result, None
    return None, f"the GPU was not idle {what} ({ATTEMPTS} tries): {why}"
