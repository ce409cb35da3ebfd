"""Command-line entry of the pipeline's Spark jobs (`spark-submit jobs/<step>.py ...`).

One parser for all steps keeps the DAG simple: every task passes the same
run arguments, plus a few of its own.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from . import steps

STEPS = ("ingest", "featurize", "reduce", "optimize", "write_blocks", "verify", "update_catalog")
NEEDS_SPARK = set(STEPS) - {"optimize"}


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
        p.add_argument("--num-feat", type=int, default=15)
        p.add_argument("--min-support", type=int, default=2)
        p.add_argument("--exclude-column", action="append", default=[],
                       help="never use predicates on this column as features (repeatable)")
    if step in ("featurize", "optimize", "write_blocks"):
        p.add_argument("--optimizer", default="fineblock", choices=steps.OPTIMIZERS)
    if step == "reduce":
        p.add_argument("--sample-fraction", type=float, default=1.0,
                       help="optimize on this fraction of the rows (qdtree and mto only)")
    if step in ("optimize", "write_blocks"):
        p.add_argument("--block-size", type=int, default=50_000, help="minSize in rows")
        p.add_argument("--sort-column", help="column of the sortkey optimizer; in-leaf order of qdtree/mto")
    return p


def main(step: str, argv: list[str] | None = None) -> int:
    from ..config import load_settings
    from ..schema import load_schema

    args = build_parser(step).parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    settings = load_settings(catalog_url=args.catalog, warehouse=args.warehouse, schema=args.schema)
    schema = load_schema(settings.schema)
    table = schema.table(args.table)
    paths = steps.RunPaths(Path(settings.warehouse), table.name, args.partition, args.run_id)

    from ..catalog import Catalog

    spark = None
    if step in NEEDS_SPARK:
        from ..spark_session import job_session

        spark = job_session(f"layout-{step}-{table.name}-{args.partition or 'all'}")
    try:
        with Catalog(settings.catalog_url) as catalog:
            if step == "ingest":
                steps.ingest(spark, paths, table, args.source, catalog, args.date_column, args.start,
                             args.end, args.partition_column)
            elif step == "featurize":
                steps.featurize(spark, paths, schema, args.query_log or None, args.num_feat,
                                args.min_support, [c for c in args.exclude_column if c], args.optimizer,
                                catalog)
            elif step == "reduce":
                steps.reduce_vectors(spark, paths, args.sample_fraction)
            elif step == "optimize":
                steps.optimize(paths, table, args.optimizer, args.block_size, args.sort_column or None)
            elif step == "write_blocks":
                params = {"block_size": args.block_size, "sort_column": args.sort_column}
                steps.write_blocks(spark, paths, table, catalog, args.optimizer, params,
                                   args.partition_column)
            elif step == "verify":
                steps.verify(spark, paths, table, catalog)
            elif step == "update_catalog":
                steps.update_catalog(spark, paths, table, catalog, schema)
    except steps.StepError as e:
        logging.getLogger("layout.pipeline").error("%s failed: %s", step, e)
        return 1
    finally:
        if spark is not None:
            spark.stop()
    return 0
