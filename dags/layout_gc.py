"""Garbage collection of the layout warehouse, once a day.

Deletes the block folders of layout versions retired (or failed) longer ago
than `older_than`, and the staging folders of DAG runs that can no longer
resume; see layout_core/flows/gc.py for what is never deleted. The whole report
goes to <warehouse>/_gc/<dag_id>__<run_id>/report.json (the "Layout run" tab of
the Airflow plugin shows it). The catalog is the Airflow connection
`layout_catalog`'s when it is defined, else LAYOUT_CATALOG_URL's; the warehouse
comes from LAYOUT_WAREHOUSE; LAYOUT_GC_SCHEDULE sets the
schedule (default @daily, empty: manual runs only).

Kept light on purpose: of layout_core only the stdlib-only flows.names at the top, the rest
inside the task, so the DAG
processor parses this file without it.
"""

from __future__ import annotations

import logging
import os
from datetime import datetime, timedelta

from airflow.sdk import DAG, Param, task

from layout_core.flows.names import GC_DAG

log = logging.getLogger("layout.gc")

# As in layout_nightly.py.
DAG_DEFAULTS = {
    "start_date": datetime(2024, 1, 1),
    "catchup": False,
    "max_active_runs": 1,
    "default_args": {"retries": 1, "retry_delay": timedelta(seconds=30)},
    "tags": ["layout"],
}

with DAG(
    dag_id=GC_DAG,
    description="Delete block folders of retired layout versions and orphaned run staging folders",
    schedule=os.environ.get("LAYOUT_GC_SCHEDULE", "@daily") or None,
    **DAG_DEFAULTS,
    params={
        "older_than": Param("24h", type="string", pattern=r"^\s*\d+[smhd]\s*$",
                            description="grace period: how long a version must be out of service "
                                        "(30m, 24h, 7d, ...)"),
        "dry_run": Param(False, type="boolean", description="only report what would be deleted"),
    },
) as dag:

    @task
    def collect_garbage(params: dict | None = None, *, dag=None, run_id=None) -> dict:
        """Run the gc and write its whole report (a dry run's too) to
        <warehouse>/_gc/<dag_id>__<run_id>/report.json, which the plugin's "Layout run" tab
        shows; returns its counts only (they go to XCom)."""
        from layout_core.airflow.catalog_connection import use_catalog_connection
        from layout_core.base.config import load_settings
        from layout_core.flows.gc import report_path, run_gc, write_report

        use_catalog_connection()
        params = params or {}
        report = run_gc(str(params.get("older_than", "24h")), dry_run=bool(params.get("dry_run", False)))
        path = report_path(load_settings().warehouse, f"{dag.dag_id}__{run_id}")
        try:
            write_report(path, report)
        except OSError as e:  # the gc is done and its counts go to XCom: the report is only a view
            log.warning("gc: could not write the report %s: %s", path, e)
        return report.numbers()

    collect_garbage()
