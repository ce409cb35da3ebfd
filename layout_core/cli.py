"""The `layout` command line. Each subcommand is a thin call into layout_core.

    layout tpch generate --sf 0.1 --out DIR
    layout workload tpch --per-template 8 --seed 1 [--templates 3,5,6] [--skew 3] --out FILE.sql
    layout workload analyze FILE.sql [--schema tpch] [--json]
    layout route "<sql>" [--json]
    layout rewrite "<sql>"
    layout catalog show

Settings (catalog URL, warehouse, schema) come from flags, then LAYOUT_*
environment variables, then layout.yaml (see layout_core.config).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from .catalog import CatalogError
from .config import load_settings

log = logging.getLogger("layout")


def _templates(text: str | None) -> list[int] | None:
    if not text:
        return None
    try:
        numbers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--templates takes numbers like 3,5,6, not {text!r}") from None
    bad = [n for n in numbers if not 1 <= n <= 22]
    if bad:
        raise argparse.ArgumentTypeError(f"TPC-H templates are 1..22, not {bad}")
    return numbers


# ---------------------------------------------------------------------------
# Subcommands


def cmd_tpch_generate(args) -> int:
    from .workload.tpch_data import generate_tpch

    paths = generate_tpch(args.sf, args.out)
    for table, path in paths.items():
        print(f"{table:10s} {path}")
    return 0


def cmd_workload_tpch(args) -> int:
    from .workload.tpch import generate, write_sql_file

    queries = generate(args.per_template, args.seed, templates=args.templates, skew=args.skew,
                       scale_factor=args.sf)
    write_sql_file(queries, args.out)
    print(f"wrote {len(queries)} queries to {args.out}")
    return 0


def cmd_workload_analyze(args) -> int:
    from .schema import load_schema
    from .workload.analyze import analyze_file, format_summary

    schema = load_schema(args.schema or load_settings().schema)
    summary = analyze_file(args.file, schema, args.max_depth)
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        print(format_summary(summary, top=args.top))
    return 0


def _routing(args):
    from .catalog import Catalog
    from .schema import load_schema
    from .skipping.router import RoutingIndex

    settings = load_settings(catalog_url=args.catalog)
    schema = load_schema(args.schema or settings.schema)
    with Catalog(settings.catalog_url) as catalog:
        index = RoutingIndex.from_snapshot(catalog.snapshot())
    return schema, index


def _read_sql(text: str) -> str:
    """The SQL given on the command line, or read from a file with @path or from stdin with -."""
    if text == "-":
        return sys.stdin.read()
    if text.startswith("@"):
        return Path(text[1:]).read_text()
    return text


def cmd_route(args) -> int:
    from .skipping.router import route_query

    schema, index = _routing(args)
    route = route_query(_read_sql(args.sql), index, schema)
    for w in route.warnings:
        log.warning(w)
    if args.json:
        print(json.dumps(route.to_json(), indent=2))
        return 0
    if not route.analyzed:
        print("read everything (the query could not be analyzed)")
    for r in route.refs:
        if r.read_all:
            print(f"{r.table} AS {r.alias}: no active layout, read everything")
            continue
        share = r.rows / r.rows_total if r.rows_total else 0.0
        print(f"{r.table} AS {r.alias}: {len(r.blocks)}/{r.blocks_total} blocks, "
              f"{r.rows}/{r.rows_total} rows ({share:.1%})")
        for p in r.partitions:
            name = p.partition or "(unpartitioned)"
            print(f"  {name} v{p.version_id}: blocks {list(p.blocks)}")
    return 0


def cmd_rewrite(args) -> int:
    from .skipping.rewrite import rewrite_sql
    from .skipping.router import route_query

    schema, index = _routing(args)
    route = route_query(_read_sql(args.sql), index, schema)
    for w in route.warnings:
        log.warning(w)
    print(rewrite_sql(route, index))
    return 0


def cmd_catalog_show(args) -> int:
    from .catalog import Catalog

    settings = load_settings(catalog_url=args.catalog)
    with Catalog(settings.catalog_url) as catalog:
        tables = catalog.tables()
        if not tables:
            print(f"no tables in {settings.catalog_url}")
        for t in tables:
            print(f"{t.name}  location={t.location}  partitioned by={t.partition_column or '-'}")
            for v in catalog.versions(t.name):
                print(f"  v{v.version_id} partition={v.partition or '-'} {v.state:8s} "
                      f"optimizer={v.optimizer} blocks={v.n_blocks} run={v.run_id}")
    return 0


# ---------------------------------------------------------------------------
# Parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="layout", description="Workload-aware block layouts for Spark SQL.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    sub = parser.add_subparsers(dest="command", required=True)

    tpch = sub.add_parser("tpch", help="TPC-H data").add_subparsers(dest="tpch_command", required=True)
    gen = tpch.add_parser("generate", help="write the 8 TPC-H tables as Parquet (tpchgen-cli)")
    gen.add_argument("--sf", type=float, default=0.1, help="scale factor (default 0.1)")
    gen.add_argument("--out", required=True, help="output folder")
    gen.set_defaults(func=cmd_tpch_generate)

    workload = sub.add_parser("workload", help="query logs").add_subparsers(dest="workload_command", required=True)
    wt = workload.add_parser("tpch", help="generate TPC-H query instances with random parameters")
    wt.add_argument("--per-template", type=int, default=8, help="instances per template (default 8)")
    wt.add_argument("--seed", type=int, default=1)
    wt.add_argument("--templates", type=_templates, help="comma-separated template numbers (default all 22)")
    wt.add_argument("--skew", type=float, help="Zipf exponent for non-date parameters (default uniform)")
    wt.add_argument("--sf", type=float, default=1.0, help="scale factor the parameters assume (q11)")
    wt.add_argument("--out", required=True, help="the .sql file to write")
    wt.set_defaults(func=cmd_workload_tpch)

    wa = workload.add_parser("analyze", help="predicates, joins and candidate cuts per table")
    wa.add_argument("file", help="a SQL file, statements separated by ';'")
    wa.add_argument("--schema", help="schema name (tpch) or YAML/JSON file")
    wa.add_argument("--json", action="store_true", help="print one JSON object")
    wa.add_argument("--max-depth", type=int, default=4, help="longest PK->FK induction path (default 4)")
    wa.add_argument("--top", type=int, default=10, help="items per section in the text report")
    wa.set_defaults(func=cmd_workload_analyze)

    for name, func, text in (
        ("route", cmd_route, "the blocks a query reads, per table reference"),
        ("rewrite", cmd_rewrite, "the query with block_id filters added"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("sql", help="the query, @file, or - for stdin")
        p.add_argument("--catalog", help="catalog URL (default: LAYOUT_CATALOG_URL or .layout/catalog.db)")
        p.add_argument("--schema", help="schema name (tpch) or YAML/JSON file")
        if name == "route":
            p.add_argument("--json", action="store_true")
        p.set_defaults(func=func)

    cat = sub.add_parser("catalog", help="the layout catalog").add_subparsers(dest="catalog_command", required=True)
    show = cat.add_parser("show", help="tables and layout versions")
    show.add_argument("--catalog", help="catalog URL")
    show.set_defaults(func=cmd_catalog_show)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        return args.func(args)
    except (OSError, ValueError, RuntimeError, CatalogError) as e:
        # Expected failures (missing files, bad schema, ...) get one clear line, not a traceback.
        log.error("%s", e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
