"""The one dispatcher of the flows' spark-submit jobs: arguments checked before anything
starts, then one step of a flow with its own SparkSession and the catalog."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, Callable, Mapping

from layout_core.base.config import Settings, load_settings
from layout_core.base.errors import UserError
from layout_core.base.schema import Schema, load_schema
from layout_core.catalog import Catalog, CatalogUnreachable
from layout_core.runs.flow import Flow, RunContext
from layout_core.runs.paths import RunPaths, StepError

# (step, parsed arguments, settings, schema) -> the run's paths and inputs; raises UserError
# (or ValueError) on bad arguments, before a SparkSession starts or the catalog is opened.
Request = Callable[[str, argparse.Namespace, Settings, Schema], tuple[RunPaths, Mapping[str, Any]]]


def run_job(flow: Flow, step: str | None, argv: list[str] | None, parser: argparse.ArgumentParser,
            request: Request) -> int:
    """Run one step of `flow` as a job; exit code 2 for refused arguments, 1 for a failed
    step, 0 when done. `step` None: the parser's positional `step` names it."""
    args = parser.parse_args(argv)
    step = step or args.step
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger(f"layout.{flow.name}")
    try:
        settings = load_settings(catalog_url=args.catalog, warehouse=args.warehouse, schema=args.schema)
        schema = load_schema(settings.schema)
        paths, inputs = request(step, args, settings, schema)
    except (UserError, ValueError) as e:  # nothing started yet: no Spark, no catalog
        log.error("%s refused its arguments: %s", step, e)
        return 2
    spark = None
    if flow.step(step).needs_spark:
        from layout_core.spark.session import job_session  # pyspark only for the steps that run Spark

        spark = job_session(f"layout-{step}-{paths.table}-{paths.partition or 'all'}")
    try:
        with Catalog(settings.catalog_url) as catalog:
            flow.step(step).run(RunContext(spark, catalog, schema, paths, inputs, settings.range_sets))
    except (StepError, CatalogUnreachable) as e:
        log.error("%s failed: %s", step, e)
        return 1
    finally:
        if spark is not None:
            spark.stop()
    return 0
