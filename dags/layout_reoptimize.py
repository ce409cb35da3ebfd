"""Partial reorganization on workload shift (MTO §5.1).

    choose_table -> plan_reorg -> write_reorg -> verify_reorg -> activate_reorg -> report

Runs when `layout_workload_monitor` emits a workload-shift Asset event for a
table (through the alias `layout_workload_shift`; the event's extra names
the table), or by hand with the params `table` and `q`. Each Spark step is a
spark-submit of `jobs/reorganize.py <step>`: plan_reorg measures the shift
again on the current history and plans the chosen subtrees' new trees;
write_reorg rewrites only their blocks; verify_reorg checks rows and
checksum of exactly those rows; activate_reorg switches to the new version
in one catalog transaction, only while the base version still serves (a
second run from the same base fails cleanly there; max_active_runs=1 makes
runs queue). Until then queries are routed to the base version. The
`report` task returns the run's numbers (XCom).

Kept light on purpose: of layout_core only the stdlib-only flows.names at the top; the rest
is imported inside the tasks.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, AssetAlias, Param, chain, task
from spark_jobs import ACTIVATES, RUN_ID, spark_submit

from layout_core.flows.names import REOPTIMIZE_DAG, REORG_STEPS

SHIFT_ALIAS = AssetAlias("layout_workload_shift")  # as in layout_workload_monitor.py
CHOSEN = "ti.xcom_pull(task_ids='choose_table')"


def reorg_step(step: str, **kwargs):
    return spark_submit(step, "reorganize.py",
                        [step, "--table", "{{ %s['table'] }}" % CHOSEN, "--run-id", RUN_ID,
                         "--q", "{{ %s['q'] }}" % CHOSEN, "--w", "{{ %s['w'] or '' }}" % CHOSEN,
                         "--window-hours", "{{ %s['window_hours'] }}" % CHOSEN], **kwargs)


with DAG(
    dag_id=REOPTIMIZE_DAG,
    description="Rewrite only the qd-tree subtrees that the recent queries would read better re-laid out",
    schedule=[SHIFT_ALIAS],
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=30)},
    tags=["layout"],
    params={
        "table": Param("", type="string", pattern=r"^([A-Za-z_][A-Za-z0-9_]{0,127})?$",
                       description="the table (a shift event's table when it triggered the run)"),
        "q": Param(200, type="number", exclusiveMinimum=0,
                   description="queries expected before the next workload shift"),
        "window_hours": Param(24, type="number", exclusiveMinimum=0, description="history window of the new queries"),
    },
) as dag:

    @task
    def choose_table(params: dict | None = None, triggering_asset_events=None) -> dict:
        """The table, q, w and window: from the triggering shift event (the monitor's settings, so
        that the reorganization measures the shift it saw), else from the params (w: calibrated)."""
        params = params or {}
        table, q, w, hours = params.get("table") or "", params.get("q", 200), None, params.get("window_hours", 24)
        for events in (triggering_asset_events or {}).values():
            for event in events:
                extra = event.extra or {}
                if extra.get("table"):
                    table, q, w = extra["table"], extra.get("q", q), extra.get("w")
                    hours = extra.get("window_hours", hours)
        if not table:
            raise ValueError("no table: trigger with the param `table`, or let a workload-shift event do it")
        return {"table": table, "q": float(q), "w": None if w is None else float(w), "window_hours": float(hours)}

    @task
    def report(chosen: dict, dag=None, run_id=None) -> dict:
        """The run's numbers per partition (from the steps' metrics), for the UI."""
        from layout_core.base.config import load_settings
        from layout_core.runs.paths import read_metrics
        from layout_core.flows.reorg.partial import run_partitions

        warehouse = Path(load_settings().warehouse)
        out = {}
        for paths in run_partitions(warehouse, chosen["table"], f"{dag.dag_id}__{run_id}"):
            m = read_metrics(paths)
            out[paths.partition or "(unpartitioned)"] = {
                "reward": m.get("plan_reorg", {}).get("reward"),
                "subtrees": m.get("plan_reorg", {}).get("subtrees"),
                "blocks_rewritten": m.get("activate_reorg", {}).get("blocks_rewritten"),
                "blocks_new": m.get("activate_reorg", {}).get("blocks_new"),
                "blocks_shared": m.get("activate_reorg", {}).get("blocks_shared"),
                "version": m.get("activate_reorg", {}).get("version"),
                "seconds": round(sum(s.get("seconds", 0) for s in m.values() if isinstance(s, dict)), 2),
            }
        return out

    chosen = choose_table()
    chain(chosen, *[reorg_step(step, outlets=ACTIVATES if step == REORG_STEPS[-1] else [])
                    for step in REORG_STEPS], report(chosen))
