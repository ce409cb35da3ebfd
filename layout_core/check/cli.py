"""`layout check`: the command line of the random-query check (see `check.run`)."""

from __future__ import annotations

import argparse
import json
import logging
import sys

from layout_core.base.config import load_settings
from layout_core.base.errors import UserError
from layout_core.base.params import input_path
from layout_core.base.schema import load_schema
from layout_core.base.urls import masked_url
from layout_core.catalog import Catalog

log = logging.getLogger("layout.check")

SHOW_MISMATCHES = 5


def add_check_parser(sub) -> None:
    p = sub.add_parser(
        "check", help="run random queries as written and as rewritten with skipping; their answers must be equal",
        description="Generate random queries over the laid-out tables (predicates on every column type, NULL "
                    "tests, IN lists, NOT, OR, LIKE, BETWEEN, date arithmetic, joins along foreign keys, outer "
                    "joins, subqueries), route and rewrite each, run the query as written and as rewritten on "
                    "the active layouts' block folders, and compare the answers. Exit status 1 on a mismatch.")
    p.add_argument("--queries", type=_positive, default=1000, help="random queries to run (default 1000)")
    p.add_argument("--seed", type=int, default=1, help="seed of the queries (default 1); on the same layouts, "
                                                       "query i of a seed is always the same")
    p.add_argument("--engine", choices=["duckdb", "spark"], default="duckdb",
                   help="engine that runs every query (default duckdb)")
    p.add_argument("--spark-sample", type=int, default=0, metavar="N",
                   help="also run N of the queries (a seeded sample) on Spark (default 0)")
    p.add_argument("--catalog", help="catalog URL (default: LAYOUT_CATALOG_URL or .layout/catalog.db)")
    p.add_argument("--schema", help="schema name (tpch) or YAML/JSON file")
    p.add_argument("--raw", help="folder of <table>.parquet for tables without an active layout")
    p.add_argument("--no-dips", action="store_true", help="route without data-induced predicates")
    p.add_argument("--timeout", type=float, default=60.0,
                   help="seconds DuckDB may spend on one statement before it counts as not comparable (60)")
    p.add_argument("--report", help="write every mismatch and not comparable query to this JSON file")
    p.add_argument("--json", action="store_true",
                   help='print {"queries", "mismatches", "queries_skipping", "seconds"} only')
    p.add_argument("--no-progress", action="store_true", help="log a line per 1,000 queries instead of a bar")
    p.set_defaults(func=cmd_check)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def cmd_check(args) -> int:
    # sqlglot, numpy, pyarrow and tqdm only when the check runs: the CLI imports this module to build its parser
    from layout_core.check.engines import DuckDBEngine, SparkEngine, raw_tables
    from layout_core.check.profile import profile_of  # pyarrow
    from layout_core.check.run import run_check  # sqlglot, numpy and tqdm

    settings = load_settings(catalog_url=args.catalog)
    if args.raw:
        input_path(args.raw, "--raw", settings.allowed_roots)
    schema = load_schema(args.schema or settings.schema)
    with Catalog(settings.catalog_url) as catalog:
        snapshot = catalog.snapshot()
    if not snapshot.layouts:
        raise UserError(f"no active layout in {masked_url(settings.catalog_url)}: nothing to check")
    raw = raw_tables(args.raw, list(schema.tables))
    profile = profile_of(schema, snapshot, raw, seed=args.seed)
    left_out = sorted(set(schema.tables) - set(profile.tables))
    if left_out:
        log.info("no layout and no --raw file (or no rows), not queried: %s", ", ".join(left_out))

    session = None  # a Spark session this command started (and so stops)

    def spark_engine():
        nonlocal session
        # pyspark only for the Spark engine: a DuckDB check runs without it
        from pyspark.sql import SparkSession

        # spark.session imports pyspark: only for the Spark engine
        from layout_core.spark.session import local_session

        running = SparkSession.getActiveSession()  # a caller's session (tests): used, never stopped
        spark = local_session("layout-check")
        if running is None:
            session = spark
        return SparkEngine(spark, schema, snapshot, raw)

    engine = None
    try:
        if args.engine == "duckdb":
            engine = DuckDBEngine(schema, snapshot, raw, timeout_seconds=args.timeout)
        else:
            engine = spark_engine()
        result = run_check(schema, snapshot, profile, engine, args.queries, args.seed,
                           spark_engine if args.engine == "duckdb" else None, args.spark_sample,
                           dips=not args.no_dips, progress=not args.no_progress and sys.stderr.isatty())
    finally:
        if engine is not None:
            engine.close()
        if session is not None:
            session.stop()

    for mismatch in result.mismatches[:SHOW_MISMATCHES]:
        print(mismatch.describe(), file=sys.stderr)
    if len(result.mismatches) > SHOW_MISMATCHES:
        print(f"... and {len(result.mismatches) - SHOW_MISMATCHES} more mismatches", file=sys.stderr)
    for item in result.not_comparable[:3]:
        print(f"not comparable on {item.engine}: query {item.index}: {item.reason[:300]}\n  {item.sql}",
              file=sys.stderr)
    if args.report:
        with open(args.report, "w") as f:
            json.dump({**result.to_json(), "not_comparable": len(result.not_comparable),
                       "not_analyzed": result.not_analyzed, "runs": dict(result.runs),
                       "mismatch_details": [m.to_json() for m in result.mismatches],
                       "not_comparable_details": [{"engine": n.engine, "index": n.index, "sql": n.sql,
                                                   "reason": n.reason} for n in result.not_comparable]},
                      f, indent=1)
    if args.json:
        print(json.dumps(result.to_json()))
        print(result.summary(), file=sys.stderr)
    else:
        print(result.summary())
    return 1 if result.mismatches else 0
