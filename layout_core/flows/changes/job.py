"""Command-line entry of the change batch's Spark jobs:
`spark-submit jobs/apply_changes.py <step> --table T --run-id R [--inserted P] [--deleted P]`.

Each step reads what the previous one left in the run's staging folder, so a
retried task redoes only its own work; the new version goes live in the last
step, in one catalog transaction.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from layout_core.base import params
from layout_core.flows.changes.apply import CHANGES
from layout_core.flows.names import CHANGES_STEPS
from layout_core.runs.job import run_job
from layout_core.runs.paths import RunPaths


def build_parser(prog: str = "jobs/apply_changes.py") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="apply a batch of inserted rows and deleted keys to a "
                                                       "laid-out table, repairing join-induced cuts (MTO 5.2)")
    p.add_argument("step", choices=CHANGES_STEPS)
    add_batch_arguments(p)
    p.add_argument("--run-id", required=True, help="Airflow run id: retries of a run share its outputs")
    return p


def add_batch_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--table", required=True)
    p.add_argument("--partition", default="", help="the partition the batch changes ('' = unpartitioned)")
    p.add_argument("--inserted", default="", help="Parquet path of the inserted rows (all columns)")
    p.add_argument("--deleted", default="", help="Parquet path of the deleted primary keys")
    p.add_argument("--warehouse", help="warehouse root (default LAYOUT_WAREHOUSE)")
    p.add_argument("--catalog", help="catalog URL (default LAYOUT_CATALOG_URL)")
    p.add_argument("--schema", help="schema name or file (default LAYOUT_SCHEMA or tpch)")


def checked_batch(args, settings, schema):
    """The batch's table, its arguments validated (layout_core.base.params) before any work."""

    roots = settings.allowed_roots
    table = params.table_of(schema, args.table)
    params.partition_value(args.partition)
    params.input_path(settings.warehouse, "the warehouse", roots)
    for flag, path in (("--inserted", args.inserted), ("--deleted", args.deleted)):
        if path:
            params.input_path(path, flag, roots)
    if getattr(args, "run_id", None) is not None:
        params.run_id(args.run_id)
    return table


def request(step: str, args, settings, schema) -> tuple:
    """The run's paths and inputs, every argument checked first."""
    table = checked_batch(args, settings, schema)
    paths = RunPaths(Path(settings.warehouse), table.name, args.partition, args.run_id)
    return paths, {"inserted": args.inserted or None, "deleted": args.deleted or None}


def main(argv: list[str] | None = None) -> int:
    return run_job(CHANGES, None, argv, build_parser(), request)
