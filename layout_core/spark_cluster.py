"""A Spark standalone cluster on loopback from pyspark's own `spark-class`.

For tests and for users without a cluster at hand: one master and one
worker, both on 127.0.0.1, started as child processes and stopped by their
process ids. Point the nightly DAGs at it with the `spark_default`
connection (`{"conn_type": "spark", "host": "spark://127.0.0.1", "port": 7077}`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path

from .errors import ToolError
from .processes import stop_processes


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _env() -> dict:
    env = dict(os.environ)
    env.update({"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYSPARK_PYTHON": sys.executable, "SPARK_NO_DAEMONIZE": "1"})
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
    log_dir.mkdir(parents=True, exist_ok=True)
    spark_class = str(spark_home() / "bin" / "spark-class")
    env = _env()
    processes = []
    try:
        master_log = (log_dir / "master.log").open("w")
        processes.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(web_port)], env=env, stdout=master_log, stderr=subprocess.STDOUT))
        url = f"spark://127.0.0.1:{port}"
        _wait(lambda: master_state(web_port).get("status") == "ALIVE", timeout, "the Spark master", processes,
              log_dir / "master.log")
        worker_log = (log_dir / "worker.log").open("w")
        processes.append(subprocess.Popen(
            [spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
             "--cores", str(cores), "--memory", memory, "--webui-port", str(worker_web_port)],
            env=env, stdout=worker_log, stderr=subprocess.STDOUT))
        _wait(lambda: any(w.get("state") == "ALIVE" for w in master_state(web_port).get("workers", [])),
              timeout, "the Spark worker", processes, log_dir / "worker.log")
        yield url
    finally:
        for process in reversed(processes):  # the worker, then the master
            stop_processes([process.pid], timeout=20, processes=[process])


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
