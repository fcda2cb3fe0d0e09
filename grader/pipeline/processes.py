"""processes.py — how the grader runs a child and makes sure it is gone.

`run` is the grader's one way to start a trusted child (a checker, a build, a trusted program,
compute-sanitizer wrapping a runner): it never raises for a crash or a time-out, and a child
that outlives its time limit dies with every process below it, whatever their process groups.
"""

import os
import signal
import subprocess
import time

from grader import ROOT


def run(cmd, timeout, env=None, cwd=ROOT):
    """Run a trusted child; never raises for crashes or time-outs: (returncode, output, timed_out).
    On a time-out the child dies with every process below it: a kernel checker's runner sits in a
    process group of its own, and a hung student kernel left running would hold the GPU through
    the rest of the grade (seen on the GPU machine: two runners of a hung softmax spinning for
    twelve minutes, the accuracy runs after them crawling)."""
    merged = dict(os.environ, **(env or {}))
    with subprocess.Popen(
        cmd,
        cwd=cwd,
        env=merged,
        stdin=subprocess.DEVNULL,
        start_new_session=True,  # no controlling terminal for anything below it
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    ) as p:
        try:
            out, err = p.communicate(timeout=timeout)
            return p.returncode, out + err, False
        except subprocess.TimeoutExpired:
            kill_tree(p.pid)
            try:
                out, err = p.communicate(timeout=10)
            except subprocess.TimeoutExpired:  # something outside the tree holds the pipes
                out, err = "", ""
            return None, (out or "") + (err or ""), True


def descendants(pid):
    """Every process below pid (children's children too), from /proc; [] once it is gone."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{parent}/task/{task}/children") as f:
                    children = [int(c) for c in f.read().split()]
            except OSError:
                continue
            found += children
            todo += children
    return found


def kill_tree(pid):
    """SIGKILL pid and every process below it, whatever their process groups: the root is
    stopped first so it starts nothing new, then its tree is killed until none is left (a
    sandboxed runner's unshare takes its whole pid namespace with it)."""
    try:
        os.kill(pid, signal.SIGSTOP)
    except ProcessLookupError:
        return
    for _ in range(50):
        below = descendants(pid)
        if not below:
            break
        for child in below:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
