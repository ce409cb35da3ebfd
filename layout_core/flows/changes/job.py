"""Command-line entry of the change batch's Spark jobs:
`spark-submit jobs/apply_changes.py <step> --table T --run-id R [--inserted P] [--deleted P]`.

Each step reads what the previous one left in the run's staging folder, so a
retried task redoes only its own work; the new version goes live in the last
step, in one catalog transaction.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from layout_core.flows.changes.apply import STEPS


def build_parser(prog: str = "jobs/apply_changes.py") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=prog, description="apply a batch of inserted rows and deleted keys to a "
                                                       "laid-out table, repairing join-induced cuts (MTO 5.2)")
    p.add_argument("step", choices=STEPS)
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
    from layout_core.base import params

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


def main(argv: list[str] | None = None) -> int:
    from layout_core.catalog import Catalog, CatalogUnreachable
    from layout_core.base.config import load_settings
    from layout_core.base.errors import UserError
    from layout_core.flows.nightly.steps import RunPaths, StepError
    from layout_core.base.schema import load_schema

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        config = load_settings(catalog_url=args.catalog, warehouse=args.warehouse, schema=args.schema)
        schema = load_schema(config.schema)
        table = checked_batch(args, config, schema)
    except UserError as e:  # nothing started yet: no Spark, no catalog
        logging.getLogger("layout.changes").error("%s refused its arguments: %s", args.step, e)
        return 2
    from layout_core.spark.session import job_session
    from layout_core.flows.changes import apply

    paths = RunPaths(Path(config.warehouse), table.name, args.partition, args.run_id)
    spark = job_session(f"layout-{args.step}-{table.name}")
    try:
        with Catalog(config.catalog_url) as catalog:
            if args.step == "stage_changes":
                apply.stage_changes(spark, paths, catalog, schema, args.inserted or None, args.deleted or None)
            elif args.step == "write_changes":
                apply.write_changes(spark, paths, catalog, schema)
            elif args.step == "verify_changes":
                apply.verify_changes(spark, paths, catalog, schema)
            else:
                apply.activate_changes(spark, paths, catalog, schema, config.range_sets)
    except (StepError, CatalogUnreachable) as e:
        logging.getLogger("layout.changes").error("%s failed: %s", args.step, e)
        return 1
    finally:
        spark.stop()
    return 0
