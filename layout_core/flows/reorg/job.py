"""Command-line entry of the partial reorganization's Spark jobs:
`spark-submit jobs/reorganize.py <step> --table T --run-id R ...` (see --help).

plan_reorg measures the shift and plans every partition worth it; the other
steps work on each partition the plan chose, in turn.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from layout_core.base import params
from layout_core.flows.names import REORG_STEPS
from layout_core.flows.reorg.partial import REORG
from layout_core.flows.reorg.shift import ShiftSettings
from layout_core.runs.job import run_job
from layout_core.runs.paths import RunPaths


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jobs/reorganize.py",
                                description="rewrite the qd-tree subtrees of a table that the recent queries "
                                            "would read better in a new layout (MTO 5.1)")
    p.add_argument("step", choices=REORG_STEPS)
    p.add_argument("--table", required=True)
    p.add_argument("--run-id", required=True, help="Airflow run id: retries of a run share its outputs")
    p.add_argument("--q", type=float, default=ShiftSettings.q, help="queries expected before the next shift")
    p.add_argument("--w", type=params.optional_float, default=None,
                   help="cost of writing a block in block reads (default: `layout calibrate`'s, else 100)")
    p.add_argument("--window-hours", type=float, default=ShiftSettings.window_hours)
    p.add_argument("--warehouse", help="warehouse root (default LAYOUT_WAREHOUSE)")
    p.add_argument("--catalog", help="catalog URL (default LAYOUT_CATALOG_URL)")
    p.add_argument("--schema", help="schema name or file (default LAYOUT_SCHEMA or tpch)")
    return p


def request(step: str, args, settings, schema) -> tuple:
    """The run's (table-wide) paths and its shift settings, every argument checked first."""
    table = params.table_of(schema, args.table).name
    params.run_id(args.run_id)
    params.input_path(settings.warehouse, "the warehouse", settings.allowed_roots)
    ShiftSettings(q=args.q, w=args.w or ShiftSettings.w, window_hours=args.window_hours)  # ValueError if bad
    return (RunPaths(Path(settings.warehouse), table, "", args.run_id),
            {"q": args.q, "w": args.w, "window_hours": args.window_hours})


def main(argv: list[str] | None = None) -> int:
    return run_job(REORG, None, argv, build_parser(), request)
