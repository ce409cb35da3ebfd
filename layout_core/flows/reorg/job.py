"""Command-line entry of the partial reorganization's Spark jobs:
`spark-submit jobs/reorganize.py <step> --table T --run-id R ...` (see --help).

plan_reorg measures the shift and plans every partition worth it; the other
steps work on each partition the plan chose, in turn.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from layout_core.flows.reorg.shift import ShiftSettings

STEPS = ("plan_reorg", "write_reorg", "verify_reorg", "activate_reorg")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jobs/reorganize.py",
                                description="rewrite the qd-tree subtrees of a table that the recent queries "
                                            "would read better in a new layout (MTO 5.1)")
    p.add_argument("step", choices=STEPS)
    p.add_argument("--table", required=True)
    p.add_argument("--run-id", required=True, help="Airflow run id: retries of a run share its outputs")
    p.add_argument("--q", type=float, default=ShiftSettings.q, help="queries expected before the next shift")
    p.add_argument("--w", type=float, default=None,
                   help="cost of writing a block in block reads (default: `layout calibrate`'s, else 100)")
    p.add_argument("--window-hours", type=float, default=ShiftSettings.window_hours)
    p.add_argument("--warehouse", help="warehouse root (default LAYOUT_WAREHOUSE)")
    p.add_argument("--catalog", help="catalog URL (default LAYOUT_CATALOG_URL)")
    p.add_argument("--schema", help="schema name or file (default LAYOUT_SCHEMA or tpch)")
    return p


def main(argv: list[str] | None = None) -> int:
    from layout_core.base import params
    from layout_core.catalog import Catalog, CatalogUnreachable
    from layout_core.base.config import load_settings
    from layout_core.base.errors import UserError
    from layout_core.flows.nightly.steps import StepError
    from layout_core.base.schema import load_schema

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:  # every argument checked before Spark starts or the catalog is opened
        config = load_settings(catalog_url=args.catalog, warehouse=args.warehouse, schema=args.schema)
        schema = load_schema(config.schema)
        args.table = params.table_of(schema, args.table).name
        params.run_id(args.run_id)
        params.input_path(config.warehouse, "the warehouse", config.allowed_roots)
        ShiftSettings(q=args.q, w=args.w or ShiftSettings.w, window_hours=args.window_hours)
    except (UserError, ValueError) as e:
        logging.getLogger("layout.reorg").error("%s refused its arguments: %s", args.step, e)
        return 2
    from layout_core.spark.session import job_session
    from layout_core.flows.reorg import partial

    warehouse = Path(config.warehouse)
    spark = job_session(f"layout-{args.step}-{args.table}")
    try:
        with Catalog(config.catalog_url) as catalog:
            if args.step == "plan_reorg":
                settings = ShiftSettings(q=args.q, w=args.w or default_w(catalog), window_hours=args.window_hours)
                partial.plan_reorg(spark, warehouse, args.run_id, catalog, schema, args.table, settings)
                return 0
            for paths in partial.run_partitions(warehouse, args.table, args.run_id):
                if args.step == "write_reorg":
                    partial.write_reorg(spark, paths, catalog, schema)
                elif args.step == "verify_reorg":
                    partial.verify_reorg(spark, paths, catalog, schema)
                else:
                    partial.activate_reorg(spark, paths, catalog, schema, config.range_sets)
    except (StepError, CatalogUnreachable, ValueError) as e:
        logging.getLogger("layout.reorg").error("%s failed: %s", args.step, e)
        return 1
    finally:
        spark.stop()
    return 0


def default_w(catalog) -> float:
    """The w `layout calibrate` measured on this storage, else the paper's 100."""
    from layout_core.flows.reorg.calibrate import calibrated_w

    return calibrated_w(catalog) or ShiftSettings.w
