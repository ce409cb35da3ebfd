"""A Spark standalone cluster on loopback from pyspark's own `spark-class`.

For tests and for users without a cluster at hand: one master and one
worker, both on 127.0.0.1, started as child processes and stopped by their
process ids. Point the nightly DAGs at it with the `spark_default`
connection (`{"conn_type": "spark", "host": "spark://127.0.0.1", "port": 7077}`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from layout_core.airflow.processes import alive, proc_stat, process_tree, stop_processes
from layout_core.base.errors import ToolError
from layout_core.base.jvm import driver_java_options
from layout_core.spark.session import spark_home


def _env() -> dict:
    env = dict(os.environ)
    env.update({"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1",
                # the master and worker start as layout jobs' drivers do (same jars: the class archive)
                "SPARK_DAEMON_JAVA_OPTS": driver_java_options()})
    return env


def master_state(web_port: int) -> dict:
    """The master's JSON status (workers, running and completed applications)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=5) as response:
        return json.load(response)


@contextmanager
def standalone_cluster(log_dir: Path, port: int = 7077, web_port: int = 8090, worker_web_port: int = 8091,
                       cores: int = 1, memory: str = "2g", timeout: float = 120.0):
    """Start a master and one worker, wait until the worker is ALIVE, yield the
    master URL, then stop both (SIGTERM, then SIGKILL) whatever happened."""
    with running_cluster(log_dir, port, web_port, worker_web_port, cores, memory, timeout) as cluster:
        yield cluster.url


@contextmanager
def running_cluster(log_dir: Path, port: int = 7077, web_port: int = 8090, worker_web_port: int = 8091,
                    cores: int = 1, memory: str = "2g", timeout: float = 120.0):
    """Like `standalone_cluster`, but yields the `StandaloneCluster` itself (to find
    executors, kill workers and start new ones); stops every process it started."""
    cluster = StandaloneCluster(log_dir, port, web_port, cores, memory, timeout)
    try:
        cluster.start_master()
        cluster.start_worker(worker_web_port)
        yield cluster
    finally:
        cluster.stop()


def free_ports(n: int) -> list[int]:
    """`n` distinct TCP ports free on 127.0.0.1 right now (for clusters next to other runs)."""
    sockets = [socket.socket() for _ in range(n)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class StandaloneCluster:
    """A master and its workers on 127.0.0.1. Each process leads a session of its
    own, so `stop` also finds the executors of a worker that was killed."""

    def __init__(self, log_dir: Path, port: int = 7077, web_port: int = 8090, cores: int = 1,
                 memory: str = "2g", timeout: float = 120.0):
        self.log_dir, self.port, self.web_port = Path(log_dir), port, web_port
        self.cores, self.memory, self.timeout = cores, memory, timeout
        self.url = f"spark://127.0.0.1:{port}"
        self.master: subprocess.Popen | None = None
        self.workers: list[subprocess.Popen] = []  # every worker started, dead ones included

    def _start(self, args: list[str], log_name: str) -> subprocess.Popen:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with (self.log_dir / log_name).open("w") as log:
            return subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args], env=_env(), stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)

    def start_master(self) -> None:
        self.master = self._start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(self.port), "--webui-port", str(self.web_port)], "master.log")
        _wait(lambda: self.state().get("status") == "ALIVE", self.timeout, "the Spark master", [self.master],
              self.log_dir / "master.log")

    def start_worker(self, web_port: int) -> subprocess.Popen:
        """Start a worker (the cluster's cores and memory) and wait until the master lists it ALIVE."""
        known = {w.get("id") for w in self.state().get("workers", [])}
        n = len(self.workers)
        log_name = "worker.log" if n == 0 else f"worker-{n}.log"
        work_dir = self.log_dir / ("work" if n == 0 else f"work-{n}")  # executors' stdout/stderr
        worker = self._start(["org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                              "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(web_port),
                              "--work-dir", str(work_dir)], log_name)
        self.workers.append(worker)
        _wait(lambda: any(w.get("state") == "ALIVE" and w.get("id") not in known
                          for w in self.state().get("workers", [])),
              self.timeout, "the Spark worker", [self.master, worker], self.log_dir / log_name)
        return worker

    def state(self) -> dict:
        return master_state(self.web_port)

    def executor_pids(self, app_id: str | None = None) -> list[int]:
        """Pids of the executor JVMs (CoarseGrainedExecutorBackend) our workers launched,
        those of application `app_id` only when given."""
        pids = []
        candidates = process_tree([w.pid for w in self.workers if alive(w.pid)])
        candidates |= {pid for w in self.workers for pid in session_members(w.pid)}
        for pid in sorted(candidates):
            args = _cmdline(pid)
            if ("org.apache.spark.executor.CoarseGrainedExecutorBackend" in args and alive(pid)
                    and (app_id is None or app_id in args)):
                pids.append(pid)
        return pids

    def stop(self) -> None:
        """Stop the workers (and what they left behind), then the master."""
        for process in [*reversed(self.workers), self.master]:
            if process is not None:
                # a killed worker's executors outlive it in its session
                stop_processes([process.pid, *session_members(process.pid)], timeout=20, processes=[process])


def session_members(sid: int) -> list[int]:
    """Live processes of session `sid` other than its leader (they outlive a killed leader)."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != sid and (fields := proc_stat(int(entry))) and fields[3] == str(sid):
            if alive(int(entry)):
                members.append(int(entry))
    return members


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except OSError:
        return []


def _wait(ready, timeout: float, what: str, processes, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(p.poll() is not None for p in processes):
            break
        try:
            if ready():
                return
        except OSError:
            pass
        time.sleep(1)
    tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:]) if log.exists() else ""
    raise ToolError(f"{what} did not start within {timeout:.0f} s:\n{tail}")
