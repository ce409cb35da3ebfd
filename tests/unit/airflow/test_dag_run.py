"""`run_dag_test` shows a run's progress while it runs, not once it has ended."""

import sys
import textwrap

import pytest

from layout_core.airflow import dag_run
from layout_core.base.errors import ToolError


def _fake_airflow(tmp_path, monkeypatch, body: str):
    """An `airflow` that runs `body` (Python) instead of a DAG; `flag`: a file it may wait for."""
    script = tmp_path / "airflow"
    script.write_text(f"#!{sys.executable}\nimport os, sys, time\nflag = {str(tmp_path / 'flag')!r}\n"
                      + textwrap.dedent(body))
    script.chmod(0o755)
    monkeypatch.setattr(dag_run, "_airflow", lambda: str(script))
    monkeypatch.setattr(dag_run, "ensure_airflow_db", lambda env: None)


def test_progress_lines_are_echoed_as_they_come_and_the_whole_output_logged(tmp_path, monkeypatch):
    # the fake run waits for the echo of its first line: captured until the end, it would time out
    _fake_airflow(tmp_path, monkeypatch, """
        print("[info ] [DAG TEST] starting task_id=ingest", flush=True)
        for _ in range(200):
            if os.path.exists(flag):
                break
            time.sleep(0.05)
        else:
            sys.exit(3)
        print("[info ] Filling up the DagBag")
        print("[info ] Done. Returned value was: {'rows': 5}")
        print("[info ] [DAG TEST] end task task_id=ingest")
        print("[info ] DagRun Finished: dag_id=d, state=success")
    """)
    seen = []

    def echo(line):
        seen.append(line)
        (tmp_path / "flag").touch()

    log = tmp_path / "logs" / "run.log"
    output = dag_run.run_dag_test({"AIRFLOW_HOME": str(tmp_path)}, "d", {}, log_file=log, echo=echo)
    assert seen == ["[info ] [DAG TEST] starting task_id=ingest", "[info ] Done. Returned value was: {'rows': 5}",
                    "[info ] [DAG TEST] end task task_id=ingest", "[info ] DagRun Finished: dag_id=d, state=success"]
    assert log.read_text() == output and "Filling up the DagBag" in output


def test_a_failed_run_raises_with_its_tail(tmp_path, monkeypatch):
    _fake_airflow(tmp_path, monkeypatch, """
        print("[error] task ingest failed: no such file")
        sys.exit(1)
    """)
    with pytest.raises(ToolError, match="(?s)failed \\(exit 1\\).*no such file"):
        dag_run.run_dag_test({"AIRFLOW_HOME": str(tmp_path)}, "d", {}, echo=lambda line: None)
