"""What the flows, their jobs, the DAG files and the Airflow pages must agree on: the step
lists, the DAG ids and where runs keep their files. Stdlib only: DAG files import it."""

from __future__ import annotations

from pathlib import Path

from layout_core.base.names import METRICS_FILE, RUNS_FOLDER, UNPARTITIONED, staging_name  # noqa: F401 - named here too

# The steps of each flow, in order: one spark-submit job (or one in-process call) each.
NIGHTLY_STEPS = ("ingest", "featurize", "reduce", "optimize", "write_blocks", "verify", "update_catalog")
CHANGES_STEPS = ("stage_changes", "write_changes", "verify_changes", "activate_changes")
REORG_STEPS = ("plan_reorg", "write_reorg", "verify_reorg", "activate_reorg")

NIGHTLY_DAG = "layout_nightly"
STAR_NIGHTLY_DAG = "layout_star_nightly"
CHANGES_DAG = "layout_changes"
REOPTIMIZE_DAG = "layout_reoptimize"
MONITOR_DAG = "layout_workload_monitor"
GC_DAG = "layout_gc"

# The nightly optimize step's plan, in the run's folder.
PLAN_FILE = "plan.json"
# The stored plan's record of the queries a version was laid out for (the workload
# monitor's noise floor): their SQL, and how many queries the log held in all.
TRAINING_QUERIES = "training_queries"
TRAINING_LOG_QUERIES = "training_log_queries"
# What the workload monitor's floor is (ShiftSettings.floor; the benchmark's --floor choices):
# the training log's B out of sample, subtracted when positive ("noise") or whatever its sign
# ("bias"); or the reference window's (the first window after the layout went live), out of
# sample as the window's ("reference") or both in sample ("reference-in-sample").
REFERENCE_FLOORS = ("reference", "reference-in-sample")
SHIFT_FLOORS = ("noise", "bias", *REFERENCE_FLOORS)
DEFAULT_SHIFT_FLOOR = "noise"
# A reorganization run's list of partitions, in its table-wide folder once plan_reorg is done.
REORG_PLANNED = "reorg_planned.json"
# <warehouse>/_monitor/<run>/shift.json: the workload monitor's report.
MONITOR_FOLDER = "_monitor"
MONITOR_REPORT = "shift.json"
MONITOR_REPORT_VERSION = 1
# <warehouse>/_gc/<run>/report.json: the gc DAG's reports.
GC_FOLDER = "_gc"
GC_REPORT = "report.json"


def monitor_report_path(warehouse: str | Path, run_id: str) -> Path:
    """Where one monitor run keeps its report (a retried task rewrites it)."""
    return Path(warehouse) / MONITOR_FOLDER / staging_name(run_id) / MONITOR_REPORT


def gc_report_path(warehouse: str | Path, run_id: str) -> Path:
    """Where the gc run `run_id` (the DAG's "<dag_id>__<run_id>") keeps its report."""
    return Path(warehouse) / GC_FOLDER / staging_name(run_id) / GC_REPORT
