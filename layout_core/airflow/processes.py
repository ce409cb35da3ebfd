"""Stopping the processes a tool started, by their pids (Linux /proc): SIGTERM,
then SIGKILL after a timeout, then whatever they left behind (task runners,
spark-submit JVMs, executors). Used by the Airflow deployment and the Spark
standalone cluster."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path


def proc_stat(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat from the state on (state, ppid, pgrp, session, ...)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def alive(pid: int) -> bool:
    fields = proc_stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def process_tree(roots: list[int]) -> set[int]:
    """The roots, their descendants and every process of their sessions (each root
    leads a session of its own: a spark-submit JVM whose parent died stays in it)."""
    parents, sessions = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := proc_stat(int(entry))):
            parents[int(entry)] = int(fields[1])
            sessions[int(entry)] = int(fields[3])
    tree = {pid for pid in roots if pid in parents}
    tree |= {pid for pid, sid in sessions.items() if sid in tree}
    grew = True
    while grew:
        more = {pid for pid, ppid in parents.items() if ppid in tree} - tree
        tree |= more
        grew = bool(more)
    return tree


def kill_all(pids, sig) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def reap(processes: list[subprocess.Popen]) -> None:
    for p in processes:
        p.poll()


def stop_processes(pids: list[int], timeout: float = 30.0, processes: list[subprocess.Popen] = ()) -> None:
    """SIGTERM to each pid, SIGKILL to those (and their process trees) still alive after
    `timeout`. `processes`: the Popen objects of those we started ourselves (reaped)."""
    pids = [pid for pid in pids if alive(pid)]
    tree = process_tree(pids)
    kill_all(pids, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reap(list(processes))
        if not any(alive(pid) for pid in pids):
            break
        time.sleep(0.5)
    kill_all([pid for pid in pids if alive(pid)], signal.SIGKILL)
    # what they started and left behind (task runners, spark-submit JVMs)
    leftovers = [pid for pid in (tree | process_tree(pids)) - set(pids) if alive(pid)]
    if leftovers:
        kill_all(leftovers, signal.SIGTERM)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(alive(pid) for pid in leftovers):
            time.sleep(0.5)
        kill_all([pid for pid in leftovers if alive(pid)], signal.SIGKILL)
    for p in processes:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)
