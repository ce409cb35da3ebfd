"""Command-line entry of the pipeline's Spark jobs (`spark-submit jobs/<step>.py ...`).

One parser for all steps keeps the DAG simple: every task passes the same
run arguments, plus a few of its own.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from layout_core.base import params
from layout_core.flows.nightly import steps
from layout_core.flows.nightly.steps import NIGHTLY
from layout_core.optimizers import optimizer_settings as checked_settings
from layout_core.runs.job import run_job
from layout_core.runs.paths import RunPaths, StepError


def build_parser(step: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=f"jobs/{step}.py", description=steps.__doc__.splitlines()[0])
    p.add_argument("--table", required=True)
    p.add_argument("--partition", default="", help="partition value, e.g. 1995-01 ('' = unpartitioned)")
    p.add_argument("--run-id", required=True, help="Airflow run id: retries of a run share its outputs")
    p.add_argument("--warehouse", help="warehouse root (default LAYOUT_WAREHOUSE)")
    p.add_argument("--catalog", help="catalog URL (default LAYOUT_CATALOG_URL)")
    p.add_argument("--schema", help="schema name or file (default LAYOUT_SCHEMA or tpch)")
    p.add_argument("--partition-column", default="dt")
    if step == "ingest":
        p.add_argument("--source", required=True, help="Parquet path of the batch")
        p.add_argument("--date-column", help="column of the date range")
        p.add_argument("--start", help="first date of the batch (inclusive)")
        p.add_argument("--end", help="end date of the batch (exclusive)")
    if step == "featurize":
        p.add_argument("--query-log", help="SQL file of past queries ('' = none)")
        p.add_argument("--optimizer", default="fineblock",
                       help="a registered optimizer (`layout optimizers` lists them and their settings)")
        p.add_argument("--block-rows", type=int, help="rows per block (the optimizer's block_rows setting)")
        p.add_argument("--settings", default="{}",
                       help='the optimizer\'s other settings as a JSON object, e.g. {"sort_column": "l_shipdate"}')
    return p


def _settings(text: str, block_rows: int | None) -> dict:
    """The --settings JSON object, with --block-rows in it; a bad object is a step error."""
    try:
        settings = json.loads(text or "{}")
    except ValueError as e:
        raise StepError(f"--settings is not JSON: {e}") from None
    if not isinstance(settings, dict):
        raise StepError(f"--settings must be a JSON object, not {text!r}")
    if block_rows is not None:
        settings["block_rows"] = block_rows
    return settings


def checked_run(step: str, args, settings, schema) -> tuple:
    """(table, optimizer settings or None): every argument of the step validated
    (layout_core.base.params) before a SparkSession starts or the catalog is opened."""

    roots = settings.allowed_roots
    table = params.table_of(schema, args.table)
    params.partition_value(args.partition)
    params.run_id(args.run_id)
    params.input_path(settings.warehouse, "the warehouse", roots)
    params.partition_column(table, args.partition_column)
    optimizer_settings = None
    if step == "ingest":
        params.input_path(args.source, "--source", roots)
        if args.date_column:
            args.date_column = params.column_of(table, args.date_column, "--date-column")
        params.iso_date(args.start, "--start")
        params.iso_date(args.end, "--end")
    if step == "featurize":
        if args.query_log:
            params.text_file(args.query_log, "--query-log", roots)
        block_rows = None if args.block_rows is None else params.block_rows(args.block_rows, "--block-rows")
        optimizer_settings = _settings(args.settings, block_rows)
        checked_settings(table, args.optimizer, optimizer_settings)
    return table, optimizer_settings


def request(step: str, args, settings, schema) -> tuple:
    """The run's paths and inputs, every argument checked first."""
    table, optimizer_settings = checked_run(step, args, settings, schema)
    paths = RunPaths(Path(settings.warehouse), table.name, args.partition, args.run_id)
    inputs = {"partition_column": args.partition_column, "settings": optimizer_settings}
    if step == "ingest":
        inputs.update(source=args.source, date_column=args.date_column, start=args.start, end=args.end)
    if step == "featurize":
        inputs.update(query_log=args.query_log or None, optimizer=args.optimizer)
    return paths, inputs


def main(step: str, argv: list[str] | None = None) -> int:
    return run_job(NIGHTLY, step, argv, build_parser(step), request)
