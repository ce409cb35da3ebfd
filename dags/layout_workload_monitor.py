"""Workload monitor: is it worth re-laying out part of a table for the recent queries? (MTO §5.1)

    measure_shift -> emit_shift_events

Every hour (LAYOUT_MONITOR_SCHEDULE; empty: manual runs only) `measure_shift`
(spark-submit of jobs/measure_shift.py) takes the last `window_hours` of the
catalog's query history and computes, per laid-out table, the reward
(q/w)·B(T) - C(T) of re-optimizing each qd-tree subtree T, and the best set
of subtrees. It only reads data. `emit_shift_events` then emits an Asset
event for every table whose best reward is positive (the Asset
`layout_shift_<table>`, through the alias `layout_workload_shift`); its extra
carries the table, the reward, the chosen subtrees and the window, and the
task's return value (XCom) the numbers of every table.

Kept light on purpose: of layout_core only the stdlib-only flows.names at the top; the rest
is imported inside the task.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG, Asset, AssetAlias, Param, task
from spark_jobs import RUN_ID, spark_submit

from layout_core.flows.names import MONITOR_DAG

SHIFT_ALIAS = AssetAlias("layout_workload_shift")


def shift_asset(table: str) -> Asset:
    """The Asset a table's workload-shift events belong to (layout_reoptimize runs on it)."""
    return Asset(name=f"layout_shift_{table}", uri=f"file:///layout/shift/{table}")


with DAG(
    dag_id=MONITOR_DAG,
    description="Reward of re-laying out qd-tree subtrees for the recent queries; an Asset event when positive",
    schedule=os.environ.get("LAYOUT_MONITOR_SCHEDULE", "@hourly") or None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=30)},
    tags=["layout"],
    params={
        "tables": Param("", type="string", description="comma-separated tables (default: every laid-out table)"),
        "q": Param(200, type="number", exclusiveMinimum=0,
                   description="queries expected before the next workload shift"),
        "w": Param(None, type=["null", "number"], exclusiveMinimum=0,
                   description="cost of writing a block in block reads (empty: what `layout calibrate` "
                               "measured, else 100)"),
        "window_hours": Param(24, type="number", exclusiveMinimum=0, description="how far back the window reaches"),
        "min_references": Param(10, type="integer", minimum=1,
                                description="fewer references to a table than this: too few to act on"),
    },
) as dag:
    measure = spark_submit("measure_shift", "measure_shift.py",
                           ["--run-id", RUN_ID, "--tables", "{{ params.tables }}", "--q", "{{ params.q }}",
                            "--w", "{{ params.w or '' }}", "--window-hours", "{{ params.window_hours }}",
                            "--min-references", "{{ params.min_references }}"])

    @task(outlets=[SHIFT_ALIAS])
    def emit_shift_events(*, outlet_events=None, dag=None, run_id=None) -> dict:
        """An Asset event per table worth reorganizing; the numbers of every table to XCom."""
        from layout_core.base.config import load_settings
        from layout_core.flows.reorg.monitor import asset_extra, read_report, report_path

        report = read_report(report_path(load_settings().warehouse, f"{dag.dag_id}__{run_id}"))
        numbers = {}
        for table in report["tables"]:
            numbers[table["table"]] = {
                "reward": table["reward"], "reorganize": table["reorganize"], "references": table["references"],
                "subtrees": sum(len(p["chosen"]) for p in table["partitions"]),
                "blocks_chosen": sum(p["blocks_chosen"] for p in table["partitions"]),
                "blocks": sum(p["blocks"] for p in table["partitions"]), "reason": table["reason"],
                "subtrees_evaluated": sum(p["subtrees_evaluated"] for p in table["partitions"]),
                "subtrees_total": sum(p["subtrees_total"] for p in table["partitions"]),
            }
            if table["reorganize"]:
                outlet_events[SHIFT_ALIAS].add(shift_asset(table["table"]), extra=asset_extra(table))
        return numbers

    measure >> emit_shift_events()
