"""Run the project's DAGs in-process with `airflow dags test` (demo, tests).

Sets up a private AIRFLOW_HOME (SQLite metadata, our dags folder, no
examples, `spark_default` in local mode) so nothing listens on a port.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Callable

from layout_core.base.errors import ToolError

PROJECT = Path(__file__).resolve().parents[2]  # layout_core/airflow/dag_run.py -> the project


def airflow_env(home: Path, catalog_url: str, warehouse: Path, spark_master: str = "local[2]") -> dict:
    bin_dir = str(Path(sys.executable).parent)
    env = dict(os.environ)
    env.update({
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(PROJECT / "dags"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
        "AIRFLOW__LOGGING__LOGGING_LEVEL": "WARNING",
        # An unescaped spark://local[2] URI silently means YARN: use the JSON form.
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps({"conn_type": "spark", "host": spark_master}),
        "LAYOUT_CATALOG_URL": catalog_url,
        "LAYOUT_WAREHOUSE": str(warehouse),
        "LAYOUT_JOBS_DIR": str(PROJECT / "jobs"),
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PATH": bin_dir + os.pathsep + env.get("PATH", ""),
    })
    return env


def _airflow() -> str:
    beside = Path(sys.executable).with_name("airflow")
    return str(beside) if beside.exists() else "airflow"


def ensure_airflow_db(env: dict) -> None:
    """`airflow db migrate` once per AIRFLOW_HOME."""
    home = Path(env["AIRFLOW_HOME"])
    marker = home / ".migrated"
    if marker.exists():
        return
    home.mkdir(parents=True, exist_ok=True)
    subprocess.run([_airflow(), "db", "migrate"], env=env, check=True, capture_output=True, text=True)
    marker.touch()


# Lines of `airflow dags test` at INFO worth showing as they come: each task's start and end,
# what it returned (the tasks return small numbers), the run's end, errors.
PROGRESS_MARKS = ("[DAG TEST]", "Done. Returned value was", "DagRun Finished", "[error", "[critical")


def run_dag_test(env: dict, dag_id: str, conf: dict, logical_date: str | None = None,
                 log_file: Path | None = None, echo: Callable[[str], None] | None = None) -> str:
    """Run one DAG run to the end and return its output; raises ToolError (with the log
    tail) when it fails. `echo`: called with each progress line (PROGRESS_MARKS) as it comes,
    Airflow then logging at INFO; the whole output goes to `log_file` as it comes."""
    ensure_airflow_db(env)
    if echo is not None:
        env = {**env, "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO"}
    # the logical date right after the DAG id: argparse fills both positionals in one go
    cmd = [_airflow(), "dags", "test", dag_id, *([logical_date] if logical_date else []), "-c", json.dumps(conf)]
    lines = []
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
    with open(log_file if log_file is not None else os.devnull, "w") as sink, \
            subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as run:
        for line in run.stdout:
            lines.append(line)
            sink.write(line)
            sink.flush()
            if echo is not None and any(mark in line for mark in PROGRESS_MARKS):
                echo(line.rstrip("\n"))
    output = "".join(lines)
    failed = run.returncode != 0 or "state=failed" in output.replace(" ", "") or "DagRunState.FAILED" in output
    if failed:
        tail = "\n".join(output.splitlines()[-40:])
        raise ToolError(f"airflow dags test {dag_id} failed (exit {run.returncode}):\n{tail}")
    return output
