"""The `layout` command line. Each subcommand is a thin call into layout_core.

    layout tpch generate --sf 0.1 --out DIR [--skew 2 --skew-mode runs|iid] [--time-ordered-keys]
    layout trips generate --rows 1000000 --outliers 0.01 --out DIR
    layout tpcds generate --sf 1 --out DIR
    layout workload tpch --per-template 8 --seed 1 [--templates 3,5,6] [--skew 3] --out FILE.sql
    layout workload tpcds --per-template 8 --seed 1 [--templates 3,7,96] --out FILE.sql
    layout workload analyze FILE.sql [--schema tpch] [--json]
    layout workload import FILE (.sql statements or JSON lines {"ts", "sql"})
    layout workload history [--since 1d] [--table T] [--limit 20] [--json]
    layout workload shift [--table T] [--q 200] [--w 100] [--window-hours 24] [--json]
    layout stats [--since 7d] [--table T] [--json]
    layout reorganize --table T [--q 200] [--w 100] [--window-hours 24] [--run-id R]
    layout route "<sql>" [--json] [--no-dips]
    layout explain "<sql>" [--json] [--no-dips]
    layout rewrite "<sql>" [--no-dips]
    layout check [--queries 1000] [--seed 1] [--engine duckdb|spark] [--spark-sample N] [--json]
    layout catalog show
    layout optimizers

Settings (catalog URL, warehouse, schema) come from flags, then LAYOUT_*
environment variables, then layout.yaml (see layout_core.base.config).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import sys
import time
from pathlib import Path

from layout_core.base.version import __version__
from layout_core.base.config import load_settings
from layout_core.base.errors import UserError
from layout_core.base.params import ParamError, input_path, table_of, text_file
from layout_core.base.params import block_rows as check_block_rows
from layout_core.base.params import run_id as check_run_id
from layout_core.base.schema import load_schema
from layout_core.base.urls import masked_url
from layout_core.catalog import Catalog, CatalogError, upgrade_catalog
from layout_core.flows.names import DEFAULT_SHIFT_FLOOR, SHIFT_FLOORS
from layout_core.optimizers import REGISTRY
from layout_core.runs.paths import RunPaths
from layout_core.skipping.explain import explain_query
from layout_core.skipping.rewrite import rewrite_sql
from layout_core.skipping.router import RoutingIndex, route_query
from layout_core.sql.statements import split_statements
from layout_core.workload import tpcds
from layout_core.workload.analyze import analyze_file, format_summary
from layout_core.workload.history import QueryRecorder, parse_query_log, query_log_text, summarize_history
from layout_core.workload.tpcds_data import generate_tpcds
from layout_core.workload.tpch import TEMPLATE_NUMBERS, generate, write_sql_file
from layout_core.workload.tpch_skew import TpchVariant, generate_tpch_variant
from layout_core.workload.trips import check_settings as check_trips_settings
from layout_core.workload.trips import generate_trips

log = logging.getLogger("layout")


def _template_numbers(text: str | None, known: tuple[int, ...], benchmark: str) -> list[int] | None:
    """`--templates 3,5,6` as numbers, each one of `benchmark`'s `known` templates."""
    if not text:
        return None
    try:
        numbers = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--templates takes numbers like {known[0]},{known[1]}, "
                                         f"not {text!r}") from None
    bad = [n for n in numbers if n not in known]
    if bad:
        raise argparse.ArgumentTypeError(f"{benchmark} templates here are {', '.join(map(str, known))}; not {bad}")
    return numbers


def _templates(text: str | None) -> list[int] | None:
    return _template_numbers(text, TEMPLATE_NUMBERS, "TPC-H")


def _tpcds_templates(text: str | None) -> list[int] | None:
    return _template_numbers(text, tpcds.TEMPLATE_NUMBERS, "TPC-DS")


def _outlier_shares(text: str) -> list[float]:
    """--outliers of `bench trips`: one share, or several (a sweep), comma-separated."""
    try:
        shares = [float(part) for part in text.split(",") if part.strip()]
        for share in shares:
            check_trips_settings(1, share)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e) if "share" in str(e) else f"not a number: {text!r}") from None
    if not shares:
        raise argparse.ArgumentTypeError("give at least one outlier share")
    return shares


def _block_rows(text: str) -> int:
    try:
        return check_block_rows(text, "--block-rows")
    except ParamError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


# ---------------------------------------------------------------------------
# Subcommands


def _tpch_variant(args):
    """The skewed or time-ordered TPC-H that `--skew`, `--skew-mode` and `--time-ordered-keys` ask for."""
    if args.skew is not None and not args.skew > 0:
        raise UserError(f"--skew must be a Zipf factor > 0, not {args.skew:g}")
    try:
        return TpchVariant(args.skew or 0.0, args.skew_mode, args.time_ordered_keys, args.data_seed)
    except ValueError as e:
        raise UserError(str(e)) from None


def cmd_tpch_generate(args) -> int:
    variant = _tpch_variant(args)
    paths = generate_tpch_variant(args.sf, args.out, variant)
    print(f"TPC-H SF {args.sf:g}, {variant.name} data:")
    for table, path in paths.items():
        print(f"{table:10s} {path}")
    return 0


def cmd_trips_generate(args) -> int:
    try:
        paths = generate_trips(args.rows, args.outliers, args.seed, args.out, args.coordinates)
    except ValueError as e:
        raise UserError(str(e)) from None
    print(f"{args.rows:,} trips, {args.outliers:.0%} outliers (seed {args.seed}):")
    for table, path in paths.items():
        print(f"{table:10s} {path}")
    return 0


def cmd_tpcds_generate(args) -> int:
    paths = generate_tpcds(args.sf, args.out)
    print(f"TPC-DS SF {args.sf:g}:")
    for table, path in paths.items():
        print(f"{table:24s} {path}")
    return 0


def cmd_workload_tpcds(args) -> int:
    try:
        queries = tpcds.generate(args.per_template, args.seed, templates=args.templates)
    except ValueError as e:
        raise UserError(str(e)) from None
    write_sql_file(queries, args.out, "tpcds")
    print(f"wrote {len(queries)} queries to {args.out}")
    return 0


def cmd_workload_tpch(args) -> int:

    queries = generate(args.per_template, args.seed, templates=args.templates, skew=args.skew,
                       scale_factor=args.sf)
    write_sql_file(queries, args.out)
    print(f"wrote {len(queries)} queries to {args.out}")
    return 0


def cmd_workload_analyze(args) -> int:

    settings = load_settings()
    text_file(args.file, "the query log", settings.allowed_roots)
    schema = load_schema(args.schema or settings.schema)
    summary = analyze_file(args.file, schema, args.max_depth)
    if args.json:
        print(json.dumps(summary.to_json(), indent=2))
    else:
        print(format_summary(summary, top=args.top))
    return 0


def cmd_workload_import(args) -> int:


    settings = load_settings(catalog_url=args.catalog)
    if args.file != "-":
        text_file(args.file, "the query log", settings.allowed_roots)
    text = _read_sql(args.file) if args.file == "-" else Path(args.file).read_text()
    parsed = parse_query_log(text, dt.datetime.now(dt.timezone.utc), settings.history_retention_days)
    for bad in parsed.bad[:args.show_bad]:
        print(f"{args.file}:{bad.line}: skipped: {bad.reason}", file=sys.stderr)
    if len(parsed.bad) > args.show_bad:
        print(f"... and {len(parsed.bad) - args.show_bad} more bad entries", file=sys.stderr)
    with Catalog(settings.catalog_url) as catalog:
        catalog.record_queries(parsed.queries, dt.timedelta(days=settings.history_retention_days))
    print(f"loaded {len(parsed.queries)} queries into the history; {len(parsed.bad)} bad entries skipped"
          + (f"; {parsed.too_old} older than the {settings.history_retention_days}-day retention not loaded"
             if parsed.too_old else ""))
    return 0


def _since(text: str):
    """The start of a look-back window given as a duration (30m, 24h, 7d)."""

    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.flows.gc import parse_duration

    window = parse_duration(text)
    if window <= dt.timedelta(0):
        raise UserError(f"--since must be longer than 0, not {text!r}")
    return dt.datetime.now(dt.timezone.utc) - window


def cmd_workload_history(args) -> int:

    settings = load_settings(catalog_url=args.catalog)
    with Catalog(settings.catalog_url) as catalog:
        queries = catalog.query_history(since=_since(args.since), table=args.table, limit=args.limit)
    if args.json:
        print(json.dumps([{"query_id": q.query_id, "ts": q.ts.isoformat(), "source": q.source,
                           "fingerprint": q.fingerprint, "analyzed": q.analyzed, "sql": q.sql,
                           "reads": [{"table": r.table, "blocks_read": r.blocks_read,
                                      "blocks_total": r.blocks_total, "read_all": r.read_all}
                                     for r in q.reads]} for q in queries], indent=1))
        return 0
    for q in queries:
        reads = ", ".join(f"{r.table} {'all' if r.read_all else f'{r.blocks_read}/{r.blocks_total}'}"
                          for r in q.reads) or "-"
        print(f"{q.ts:%Y-%m-%d %H:%M:%S} {q.source:7s} {q.fingerprint} {reads} | {' '.join(q.sql.split())[:80]}")
    print(f"{len(queries)} queries")
    return 0


def cmd_workload_export(args) -> int:

    settings = load_settings(catalog_url=args.catalog)
    out = Path(input_path(args.out, "--out", settings.allowed_roots))
    with Catalog(settings.catalog_url) as catalog:
        queries = catalog.query_history(since=_since(args.since))
    text, left_out = query_log_text(queries)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(out)  # a reader never sees half a log
    print(f"wrote {len(queries) - left_out} queries of the last {args.since} to {out}"
          + (f"; {left_out} that do not parse left out" if left_out else ""))
    return 0


def cmd_stats(args) -> int:

    settings = load_settings(catalog_url=args.catalog)
    with Catalog(settings.catalog_url) as catalog:
        tables = summarize_history(catalog.query_history(since=_since(args.since), table=args.table))
    if args.table:
        tables = [t for t in tables if t.table == args.table]
    if args.json:
        print(json.dumps([t.to_json() for t in tables], indent=1))
        return 0
    if not tables:
        print(f"no routed queries in the last {args.since}")
        return 0
    for t in tables:
        if not t.blocks_total:
            print(f"{t.table}: {t.queries} queries, {t.scans} scans, all read in full (no layout to route)")
            continue
        print(f"{t.table}: {t.queries} queries, {t.scans} scans, read {t.blocks_read} of "
              f"{t.blocks_total} blocks ({t.skipped:.1%} skipped), {t.rows_read} of {t.rows_total} rows"
              + (f"; {t.read_in_full} scans read the table in full" if t.read_in_full else ""))
        for tpl in t.templates[:args.top]:
            print(f"  {tpl.fingerprint} x{tpl.queries}: {tpl.blocks_read}/{tpl.blocks_total} blocks "
                  f"({tpl.skipped:.1%} skipped) | {' '.join(tpl.example.split())[:70]}")
    return 0


def cmd_workload_shift(args) -> int:
    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.flows.reorg.monitor import monitor_tables
    from layout_core.flows.reorg.shift import ShiftSettings, default_w
    from layout_core.spark.session import local_session

    settings = load_settings(catalog_url=args.catalog)
    schema = load_schema(args.schema or settings.schema)
    if args.table:
        table_of(schema, args.table)
    spark = local_session("layout-workload-shift")
    try:
        with Catalog(settings.catalog_url) as catalog:
            try:
                shift = ShiftSettings(q=args.q, w=args.w or default_w(catalog), window_hours=args.window_hours,
                                      min_references=args.min_references, prune=not args.no_prune,
                                      folds=args.folds, floor=args.floor)
            except ValueError as e:
                raise UserError(str(e)) from None
            reports = monitor_tables(spark, catalog, schema, [args.table] if args.table else [], shift)
    finally:
        spark.stop()
    if args.json:
        print(json.dumps([r.to_json() for r in reports], indent=1))
        return 0
    for r in reports:
        print(f"{r.table}: {r.references} references in the window; {r.reason}")
        for note in r.notes:
            print(f"  note: {note}")
        for p in r.partitions:
            print(f"  {p.partition or '(unpartitioned)'} v{p.version_id} ({p.optimizer}): {len(p.chosen)} subtrees, "
                  f"{p.blocks_chosen} of {p.blocks} blocks, reward {p.reward:.1f}; "
                  f"{p.subtrees_evaluated} of {p.subtrees_total} subtrees evaluated; a query reads "
                  f"{p.reads:.2f} blocks (simulated {p.reads_simulated:.2f}); a full re-layout would save "
                  f"{p.root_gain:.2f} (noise floor {p.root_noise:.2f}"
                  + (f" from {p.noise_queries} training queries)" if p.noise_queries else ", no training log)"))
            for c in p.chosen:
                print(f"    node {c.node_id}: {c.blocks} blocks, reads {c.reads:.2f} -> {c.reads - c.benefit:.2f} "
                      f"per query of the window, reward {c.reward:.1f}")
    return 0


def cmd_reorganize(args) -> int:

    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.flows.reorg.partial import reorganize_in_process
    from layout_core.flows.reorg.shift import ShiftSettings, default_w
    from layout_core.spark.session import local_session

    settings = load_settings(catalog_url=args.catalog, warehouse=args.warehouse)
    schema = load_schema(args.schema or settings.schema)
    table = table_of(schema, args.table).name
    input_path(settings.warehouse, "the warehouse", settings.allowed_roots)
    run_id = check_run_id(args.run_id) if args.run_id else f"reorganize-{time.strftime('%Y%m%dT%H%M%S')}"
    spark = local_session("layout-reorganize")
    try:
        with Catalog(settings.catalog_url) as catalog:
            try:
                shift = ShiftSettings(q=args.q, w=args.w or default_w(catalog), window_hours=args.window_hours)
            except ValueError as e:
                raise UserError(str(e)) from None
            result = reorganize_in_process(spark, catalog, schema, Path(settings.warehouse), table, run_id,
                                           shift, settings.range_sets)
    finally:
        spark.stop()
    if args.json:
        print(json.dumps(result, indent=1, default=str))
        return 0
    print(f"{table}: {result['plan']['reason']} (run {run_id})")
    for partition, m in result["partitions"].items():
        done = m.get("activate_reorg", {})
        print(f"  {partition or '(unpartitioned)'}: version {done.get('version')} replaces "
              f"{done.get('replaces', done.get('base_version'))}: {done.get('blocks_rewritten')} blocks rewritten into "
              f"{done.get('blocks_new')}, {done.get('blocks_shared')} shared")
    return 0


def cmd_changes_apply(args) -> int:

    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.flows.changes.apply import apply_changes_in_process
    from layout_core.flows.changes.job import checked_batch
    from layout_core.spark.session import local_session

    settings = load_settings(catalog_url=args.catalog, warehouse=args.warehouse)
    schema = load_schema(args.schema or settings.schema)
    table = checked_batch(args, settings, schema)
    if not args.inserted and not args.deleted:
        raise UserError("give --inserted, --deleted or both")
    run_id = args.run_id or f"changes-{time.strftime('%Y%m%dT%H%M%S')}"
    paths = RunPaths(Path(settings.warehouse), table.name, args.partition, run_id)
    spark = local_session("layout-changes")
    try:
        with Catalog(settings.catalog_url) as catalog:
            metrics = apply_changes_in_process(spark, catalog, schema, paths, args.inserted or None,
                                               args.deleted or None, settings.range_sets)
    finally:
        spark.stop()
    if args.json:
        print(json.dumps(metrics, indent=1, default=str))
        return 0
    staged, done = metrics["stage_changes"], metrics["activate_changes"]
    if done.get("empty"):
        print(f"{table.name}: the batch changes no row; version {done['version']} keeps serving (run {run_id})")
        return 0
    print(f"{table.name}: version {done.get('version')} replaces {done.get('replaces', done.get('base_version'))} (run {run_id}): "
          f"{staged['inserted']} rows inserted, {staged['deleted']} deleted "
          f"({staged['deleted_missing']} deleted keys not found), {done.get('blocks_changed')} blocks changed, "
          f"{staged['new_blocks']} new")
    print(f"  join-induced cuts of other tables: {done.get('cuts_repaired')} repaired, "
          f"{staged['cuts_left_stale']} left to go stale; this table's cuts marked stale: {staged['stale_cuts']} "
          f"({staged['dangling_rows']} new rows without a parent row)")
    return 0


def _routing(args):
    """The settings, the schema and the routing index of the active layouts."""

    settings = load_settings(catalog_url=args.catalog)
    schema = load_schema(args.schema or settings.schema)
    with Catalog(settings.catalog_url) as catalog:
        index = RoutingIndex.from_snapshot(catalog.snapshot())
    return settings, schema, index


def _record(args, route, source: str) -> None:
    """Add a routed query to the catalog's history (a failure only logs a warning)."""

    if getattr(args, "no_history", False):
        return
    settings = load_settings(catalog_url=args.catalog)
    with QueryRecorder(settings.catalog_url, source, settings.history_retention_days) as record:
        record(route)


def _read_sql(text: str, roots: tuple[str, ...] = ()) -> str:
    """The SQL given on the command line, or read from a file with @path or from stdin with -."""
    if text == "-":
        return sys.stdin.read()
    if text.startswith("@"):
        return Path(text_file(text[1:], "the SQL file", roots)).read_text()
    return text


def cmd_route(args) -> int:

    settings, schema, index = _routing(args)
    route = route_query(_read_sql(args.sql, settings.allowed_roots), index, schema, dips=not args.no_dips)
    _record(args, route, "route")
    if args.json:
        for w in route.warnings:
            log.warning(w)
        print(json.dumps(route.to_json(), indent=2))
        return 0
    if not route.analyzed:  # one line: the class of the failure and its reason
        reason = " ".join(route.warnings[0].removeprefix("reading everything: ").split()) if route.warnings else ""
        print(f"read everything: {route.failure}: {reason[:300]}")
        return 0
    for w in route.warnings:
        log.warning(w)
    names = {r.ref: r.alias or r.table for r in route.refs}
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
        for d in route.dips:
            if d.edge.to_ref == r.ref:
                print(f"  {d.describe(names)} skipped blocks {[b for part in d.removed for b in part]}")
    if route.analyzed and not args.no_dips:
        print(f"{route.dips_built} diPs built, {len(route.dips)} of them skipped blocks")
        for note in route.dip_notes:
            print(f"  {note}")
    return 0


def cmd_explain(args) -> int:

    settings, schema, index = _routing(args)
    explanation = explain_query(_read_sql(args.sql, settings.allowed_roots), index, schema, dips=not args.no_dips)
    for w in explanation.route.warnings:
        log.warning(w)
    if args.json:
        print(json.dumps(explanation.to_json(), indent=2))
        return 0
    if not explanation.route.analyzed:
        print("read everything (the query could not be analyzed)")
    for r in explanation.refs:
        if r.read_all:
            print(f"{r.table} AS {r.alias}: no active layout, read everything")
            continue
        print(f"{r.table} AS {r.alias}: reads {r.blocks_read} of {r.blocks_total} blocks")
        by_reason: dict[str, list[int]] = {}
        for block, by in r.skipped:
            by_reason.setdefault(by, []).append(block)
        for by, blocks in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
            shown = ", ".join(map(str, blocks[:20])) + (", ..." if len(blocks) > 20 else "")
            print(f"  skips {len(blocks)} by {by}: [{shown}]")
    for note in explanation.route.dip_notes:
        print(f"note: {note}")
    return 0


def cmd_rewrite(args) -> int:

    settings, schema, index = _routing(args)
    route = route_query(_read_sql(args.sql, settings.allowed_roots), index, schema, dips=not args.no_dips)
    _record(args, route, "rewrite")
    for w in route.warnings:
        log.warning(w)
    print(rewrite_sql(route, index))
    return 0


def cmd_run_workload(args) -> int:
    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.spark.runner import register_raw_tables, run_workload
    from layout_core.spark.session import local_session
    from layout_core.spark.views import register_layout_views

    settings = load_settings(catalog_url=args.catalog, warehouse=args.warehouse)
    text_file(args.file, "the query file", settings.allowed_roots)
    if args.raw:
        input_path(args.raw, "--raw", settings.allowed_roots)
    schema = load_schema(args.schema or settings.schema)
    statements = [s.sql for s in split_statements(Path(args.file).read_text())]
    with Catalog(settings.catalog_url) as catalog:
        snapshot = catalog.snapshot()
    spark = local_session("layout-run-workload")
    try:
        tables = list(schema.tables.values())
        if args.raw:
            register_raw_tables(spark, args.raw, [t.name for t in tables])
        register_layout_views(spark, snapshot, tables)
        locations = {name: info.location for name, info in snapshot.tables.items()}

        def show(run) -> None:
            verdict = {True: "same", False: "DIFFERENT", None: "-"}[run.equal]
            print(f"query {run.index:3d}: {verdict:9s} rows={run.rows_returned:6d} "
                  f"files={run.scan_rewritten.files:5d} "
                  f"seconds={run.seconds_rewritten:.2f}"
                  + (f" (as written: files={run.scan_original.files} seconds={run.seconds_original:.2f})"
                     if run.scan_original else ""), file=sys.stderr if args.json else sys.stdout)
            if run.equal is False:
                print(f"    {run.difference}", file=sys.stderr)

        with QueryRecorder(settings.catalog_url, "run", settings.history_retention_days) as recorder:
            runs = run_workload(spark, statements, RoutingIndex.from_snapshot(snapshot), schema,
                                locations, compare=args.compare, progress=show,
                                record=None if args.no_history else recorder)
    finally:
        spark.stop()
    different = [r.index for r in runs if r.equal is False]
    if args.json:
        print(json.dumps({"queries": len(runs), "different": different,
                          "runs": [r.to_json() for r in runs]}, indent=1, default=str))
    else:
        files = sum(r.scan_rewritten.files for r in runs)
        print(f"{len(runs)} queries, {files} files read with skipping"
              + (f", {sum(r.scan_original.files for r in runs)} as written; "
                 f"{len(different)} answers differ" if args.compare else ""))
    return 1 if different else 0


def cmd_demo(args) -> int:
    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.cli.demo import run_demo

    return run_demo(Path(args.home), args.sf)


def cmd_bench_sun(args) -> int:
    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.bench.sun import format_result, run

    result = run(sf=args.sf, n_train=args.train, n_test=args.test, num_feat=args.num_feat,
                 block_rows=args.block_rows, sweep=args.sweep, spark_time=not args.no_spark,
                 work=Path(args.work))
    Path(args.work).mkdir(parents=True, exist_ok=True)
    (Path(args.work) / "result.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2) if args.json else format_result(result))
    return 0


def cmd_bench_tpch(args) -> int:
    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.bench.tpch import format_result, run

    result = run(sf=args.sf, block_rows=args.block_rows, per_template=args.per_template,
                 work=Path(args.work), layouts=_layouts(args), spark_e2e=args.spark, dips=args.dips,
                 data=_tpch_variant(args), templates=args.templates)
    return _b1_report(args, result, format_result)


def _layouts(args) -> tuple[str, ...]:
    return tuple(name for name in args.layouts.split(",") if name)


def _b1_report(args, result: dict, format_result) -> int:
    """B1's report: result.json in the work folder, and the report (or the JSON) printed."""
    (Path(args.work) / "result.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2) if args.json else format_result(result))
    return 0


def cmd_bench_trips(args) -> int:
    # heavy (Spark, a benchmark): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.bench.tpch import format_result
    from layout_core.bench.trips import format_sweep, run, sweep

    try:
        check_trips_settings(args.rows, args.outliers[0])
    except ValueError as e:
        raise UserError(str(e)) from None
    common = dict(rows=args.rows, block_rows=args.block_rows, per_template=args.per_template, seed=args.seed,
                  work=Path(args.work), layouts=_layouts(args), spark_e2e=args.spark, dips=args.dips,
                  coordinates=args.coordinates)
    if len(args.outliers) > 1:
        return _b1_report(args, sweep(args.outliers, **common), format_sweep)
    return _b1_report(args, run(outliers=args.outliers[0], **common), format_result)


def cmd_bench_tpcds(args) -> int:
    # heavy (Spark, a benchmark): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.bench.tpcds import run
    from layout_core.bench.tpch import format_result

    result = run(sf=args.sf, block_rows=args.block_rows, per_template=args.per_template, seed=args.seed,
                 work=Path(args.work), layouts=_layouts(args), spark_e2e=args.spark, dips=args.dips,
                 templates=args.templates)
    return _b1_report(args, result, format_result)


def cmd_bench_changes(args) -> int:
    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.bench.changes import main_json, run

    if args.json:
        print(main_json(sf=args.sf, block_rows=args.block_rows, per_template=args.per_template,
                        work=Path(args.work)))
        return 0
    print(json.dumps(run(sf=args.sf, block_rows=args.block_rows, per_template=args.per_template,
                         work=Path(args.work)), indent=2))
    return 0


def cmd_dag_test(args) -> int:
    """One run of a project DAG in-process (`airflow dags test`), with this shell's
    LAYOUT_* settings: the quickest way to lay out your own tables."""
    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.airflow.dag_run import airflow_env, run_dag_test

    settings = load_settings(catalog_url=args.catalog, warehouse=args.warehouse)
    try:
        conf = json.loads(args.conf)
    except json.JSONDecodeError as e:
        raise UserError(f"--conf is not JSON: {e}") from None
    if not isinstance(conf, dict):
        raise UserError("--conf must be a JSON object of the DAG's params")
    for name in ("block_rows", "dimension_block_rows"):
        if name in conf:
            check_block_rows(conf[name], name)
    home = Path(args.airflow_home).resolve()
    env = airflow_env(home, settings.catalog_url, Path(settings.warehouse).resolve())
    if Path(settings.schema).is_file():  # the jobs run elsewhere: give them an absolute path
        env["LAYOUT_SCHEMA"] = str(Path(settings.schema).resolve())
    log_file = home / "logs" / f"{args.dag_id}.log"
    print(f"running {args.dag_id} (airflow dags test; log {log_file})", flush=True)
    run_dag_test(env, args.dag_id, conf, log_file=log_file, echo=lambda line: print(f"  {line[:300]}", flush=True))
    print(f"{args.dag_id} succeeded; `layout catalog show` lists the new versions")
    return 0


def cmd_optimizers(args) -> int:

    print("\n\n".join(optimizer.describe() for optimizer in REGISTRY.values()))
    return 0


def cmd_gc(args) -> int:
    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.flows.gc import run_gc

    settings = load_settings(catalog_url=args.catalog, warehouse=args.warehouse)
    input_path(settings.warehouse, "the warehouse", settings.allowed_roots)

    report = run_gc(args.older_than, dry_run=args.dry_run, catalog_url=args.catalog,
                    warehouse=args.warehouse)
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
        return 0
    for item in report.kept:
        print(f"kept {item.what}: {item.reason}")
    print(report.summary())
    return 0


def cmd_catalog_show(args) -> int:

    settings = load_settings(catalog_url=args.catalog)
    with Catalog(settings.catalog_url) as catalog:
        tables = catalog.tables()
        if not tables:
            print(f"no tables in {masked_url(settings.catalog_url)}")
        for t in tables:
            print(f"{t.name}  location={t.location}  partitioned by={t.partition_column or '-'}")
            for v in catalog.versions(t.name):
                print(f"  v{v.version_id} partition={v.partition or '-'} {v.state:8s} "
                      f"optimizer={v.optimizer} blocks={v.n_blocks} run={v.run_id}")
    return 0


def cmd_catalog_upgrade(args) -> int:

    settings = load_settings(catalog_url=args.catalog)
    done = upgrade_catalog(settings.catalog_url)
    before = done.before or "none (no catalog tables yet)"
    if done.recognised:
        before += " (recognised by its tables: it had no version table)"
    print(f"catalog {masked_url(settings.catalog_url)}")
    print(f"schema revision before: {before}")
    print(f"schema revision after:  {done.after}{'' if done.changed else ' (already the newest)'}")
    return 0


# ---------------------------------------------------------------------------
# Parser


def add_tpch_variant_arguments(parser) -> None:
    """Skewed and time-ordered TPC-H (layout_core/workload/tpch_skew.py)."""
    parser.add_argument("--skew", type=float, help="Zipf factor z > 0 of the skewed columns (default: uniform data)")
    parser.add_argument("--skew-mode", default="runs",
                        help="runs: each value fills consecutive rows in key order (the published skewed "
                             "generator); iid: the same frequencies drawn independently of the key (default runs)")
    parser.add_argument("--time-ordered-keys", action="store_true", help="number orders by order date")
    parser.add_argument("--data-seed", type=int, default=1, help="seed of the skewed values (default 1)")


def add_b1_arguments(parser, work: str) -> None:
    """What every B1 report takes (bench tpch, bench trips): blocks, queries, layouts, Spark, diPs."""
    parser.add_argument("--block-rows", type=_block_rows, default=10_000, help="rows per block (default 10000)")
    parser.add_argument("--per-template", type=int, default=8, help="instances per template (default 8)")
    parser.add_argument("--work", default=work, help=f"folder for data and results (default {work})")
    parser.add_argument("--layouts", default="sortkey,zorder,hilbert,qdtree,mto",
                        help="comma-separated layouts (default: these five; also tuned, pando-K with K trees, "
                             "e.g. pando-2,pando-3,pando-4, pando-auto, pando-K(mto): K trees around mto's tree, "
                             "and mto(join_key): leaves ordered by the key)")
    parser.add_argument("--spark", action="store_true",
                        help="also write sortkey and mto as block folders and time the test queries on Spark "
                             "(rewritten with their routes; answers compared)")
    parser.add_argument("--dips", action="store_true",
                        help="also route every layout with data-induced predicates (rows <layout>+dips), lay out "
                             "tuned and mto(join_key) too, and compute the semi-join lower bound")
    parser.add_argument("--json", action="store_true")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="layout", description="Workload-aware block layouts for Spark SQL.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug details")
    parser.add_argument("--version", action="version", version=f"layout {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    tpch = sub.add_parser("tpch", help="TPC-H data").add_subparsers(dest="tpch_command", required=True)
    gen = tpch.add_parser("generate", help="write the 8 TPC-H tables as Parquet (tpchgen-cli)")
    gen.add_argument("--sf", type=float, default=0.1, help="scale factor (default 0.1)")
    gen.add_argument("--out", required=True, help="output folder")
    add_tpch_variant_arguments(gen)
    gen.set_defaults(func=cmd_tpch_generate)

    trips = sub.add_parser("trips", help="taxi trips with correlated columns and outliers (schema trips)")
    trips_gen = trips.add_subparsers(dest="trips_command", required=True).add_parser(
        "generate", help="write zone, payment and trips as Parquet")
    trips_gen.add_argument("--rows", type=int, default=1_000_000, help="trips (default 1000000)")
    trips_gen.add_argument("--outliers", type=float, default=0.01,
                           help="share of trips that break the correlations, in [0, 1) (default 0.01)")
    trips_gen.add_argument("--seed", type=int, default=1, help="seed (default 1)")
    trips_gen.add_argument("--out", required=True, help="output folder")
    trips_gen.add_argument("--coordinates", action="store_true",
                           help="also the pickup and dropoff points (tr_pickup_x, ..., tr_dropoff_y, double; "
                                "the shipped trips schema does not list them, `layout bench trips --coordinates` "
                                "adds them to its own)")
    trips_gen.set_defaults(func=cmd_trips_generate)

    tpcds_gen = sub.add_parser("tpcds", help="TPC-DS data (dsdgen)").add_subparsers(
        dest="tpcds_command", required=True).add_parser("generate", help="write the 24 TPC-DS tables as Parquet")
    tpcds_gen.add_argument("--sf", type=float, default=1.0, help="scale factor, 0.01 to 10 (default 1)")
    tpcds_gen.add_argument("--out", required=True, help="output folder")
    tpcds_gen.set_defaults(func=cmd_tpcds_generate)

    workload = sub.add_parser("workload", help="query logs").add_subparsers(dest="workload_command", required=True)
    wt = workload.add_parser("tpch", help="generate TPC-H query instances with random parameters")
    wt.add_argument("--per-template", type=int, default=8, help="instances per template (default 8)")
    wt.add_argument("--seed", type=int, default=1)
    wt.add_argument("--templates", type=_templates, help="comma-separated template numbers (default all 22)")
    wt.add_argument("--skew", type=float, help="Zipf exponent for non-date parameters (default uniform)")
    wt.add_argument("--sf", type=float, default=1.0, help="scale factor the parameters assume (q11)")
    wt.add_argument("--out", required=True, help="the .sql file to write")
    wt.set_defaults(func=cmd_workload_tpch)

    wd = workload.add_parser("tpcds", help="generate TPC-DS query instances with random parameters")
    wd.add_argument("--per-template", type=int, default=8, help="instances per template (default 8)")
    wd.add_argument("--seed", type=int, default=1)
    wd.add_argument("--templates", type=_tpcds_templates, help="comma-separated template numbers (default all 36)")
    wd.add_argument("--out", required=True, help="the .sql file to write")
    wd.set_defaults(func=cmd_workload_tpcds)

    wa = workload.add_parser("analyze", help="predicates, joins and candidate cuts per table")
    wa.add_argument("file", help="a SQL file, statements separated by ';'")
    wa.add_argument("--schema", help="schema name (tpch) or YAML/JSON file")
    wa.add_argument("--json", action="store_true", help="print one JSON object")
    wa.add_argument("--max-depth", type=int, default=4, help="longest PK->FK induction path (default 4)")
    wa.add_argument("--top", type=int, default=10, help="items per section in the text report")
    wa.set_defaults(func=cmd_workload_analyze)

    wi = workload.add_parser("import", help="load an external query log into the catalog's query history")
    wi.add_argument("file", help='SQL statements separated by ";", or JSON lines {"ts": ..., "sql": ...}; - for stdin')
    wi.add_argument("--catalog", help="catalog URL")
    wi.add_argument("--show-bad", type=int, default=20, help="bad entries to print (default 20)")
    wi.set_defaults(func=cmd_workload_import)

    ws = workload.add_parser("shift", help="reward of re-laying out qd-tree subtrees for the recent queries "
                                           "(MTO 5.1; reads data, writes nothing)")
    ws.add_argument("--table", help="one table (default: every laid-out table)")
    ws.add_argument("--q", type=float, default=200.0, help="queries expected before the next shift (default 200)")
    ws.add_argument("--w", type=float, help="cost of writing a block in block reads "
                                            "(default: `layout calibrate`'s, else 100)")
    ws.add_argument("--window-hours", type=float, default=24.0, help="history window (default 24)")
    ws.add_argument("--min-references", type=int, default=10,
                    help="fewer references to a table in the window: no reorganization (default 10)")
    ws.add_argument("--no-prune", action="store_true", help="compute B for every subtree (MTO 5.1.3 pruning off)")
    ws.add_argument("--folds", type=int, default=2,
                    help="parts the window's queries are split in to judge B out of sample: each new tree is "
                         "grown on all parts but one (default 2)")
    ws.add_argument("--floor", choices=SHIFT_FLOORS, default=DEFAULT_SHIFT_FLOOR,
                    help="how B and its floor are measured: noise (out of sample on the folds, less the training "
                         "log's when positive; the default), bias (less the training log's whatever its sign), "
                         "reference (less the same on the first window after the layout went live, whatever its "
                         "sign; a layout younger than two windows falls back to noise) or reference-in-sample "
                         "(both in sample)")
    ws.add_argument("--catalog", help="catalog URL")
    ws.add_argument("--schema", help="schema name (tpch) or YAML/JSON file")
    ws.add_argument("--json", action="store_true")
    ws.set_defaults(func=cmd_workload_shift)

    we = workload.add_parser("export", help="write the query history as a query log (the nightly's query_log)")
    we.add_argument("--since", default="7d", help="look back this long: 30m, 24h, 7d (default 7d)")
    we.add_argument("--out", required=True, help="the SQL file to write (replaced whole)")
    we.add_argument("--catalog", help="catalog URL")
    we.set_defaults(func=cmd_workload_export)

    wh = workload.add_parser("history", help="the most recent queries of the catalog's query history")
    wh.add_argument("--catalog", help="catalog URL")
    wh.add_argument("--since", default="1d", help="look back this long: 30m, 24h, 7d (default 1d)")
    wh.add_argument("--table", help="only queries that read this table")
    wh.add_argument("--limit", type=int, default=20, help="at most this many, newest (default 20)")
    wh.add_argument("--json", action="store_true")
    wh.set_defaults(func=cmd_workload_history)

    for name, func, text in (
        ("route", cmd_route, "the blocks a query reads, per table reference"),
        ("rewrite", cmd_rewrite, "the query with block_id filters added"),
        ("explain", cmd_explain, "per table reference, what proved each skipped block empty"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("sql", help="the query, @file, or - for stdin")
        p.add_argument("--catalog", help="catalog URL (default: LAYOUT_CATALOG_URL or .layout/catalog.db)")
        p.add_argument("--schema", help="schema name (tpch) or YAML/JSON file")
        p.add_argument("--no-dips", action="store_true",
                       help="skip blocks by each table's own predicate only, not by data-induced predicates "
                            "from the tables it joins")
        if name in ("route", "explain"):
            p.add_argument("--json", action="store_true")
        if name in ("route", "rewrite"):
            p.add_argument("--no-history", action="store_true",
                           help="do not add the query to the catalog's query history")
        p.set_defaults(func=func)

    ro = sub.add_parser("reorganize", help="rewrite the qd-tree subtrees the recent queries would read better "
                                           "re-laid out (MTO 5.1; what the layout_reoptimize DAG runs)")
    ro.add_argument("--table", required=True)
    ro.add_argument("--q", type=float, default=200.0, help="queries expected before the next shift (default 200)")
    ro.add_argument("--w", type=float, help="cost of writing a block in block reads (default: calibrated, else 100)")
    ro.add_argument("--window-hours", type=float, default=24.0, help="history window (default 24)")
    ro.add_argument("--run-id", help="a retry with the same run id resumes that run")
    ro.add_argument("--catalog", help="catalog URL")
    ro.add_argument("--warehouse", help="warehouse root")
    ro.add_argument("--schema", help="schema name (tpch) or YAML/JSON file")
    ro.add_argument("--json", action="store_true")
    ro.set_defaults(func=cmd_reorganize)

    changes = sub.add_parser("changes", help="change batches on laid-out tables").add_subparsers(
        dest="changes_command", required=True)
    ca = changes.add_parser("apply", help="insert rows and delete keys of a laid-out table, repairing the "
                                          "join-induced cuts of other tables (what the layout_changes DAG runs)")
    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.flows.changes.job import add_batch_arguments

    add_batch_arguments(ca)
    ca.add_argument("--run-id", help="a retry with the same run id resumes that run")
    ca.add_argument("--json", action="store_true", help="print every step's numbers as JSON")
    ca.set_defaults(func=cmd_changes_apply)

    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.flows.reorg.calibrate import add_calibrate_parser

    add_calibrate_parser(sub)

    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.check.cli import add_check_parser

    add_check_parser(sub)

    st = sub.add_parser("stats", help="how many blocks the recorded queries skipped, per table and template")
    st.add_argument("--catalog", help="catalog URL")
    st.add_argument("--since", default="7d", help="look back this long: 30m, 24h, 7d (default 7d)")
    st.add_argument("--table", help="one table only")
    st.add_argument("--top", type=int, default=5, help="templates per table in the text report")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=cmd_stats)

    rw = sub.add_parser("run-workload", help="run queries on Spark with the router's block filters")
    rw.add_argument("file", help="a SQL file, statements separated by ';'")
    rw.add_argument("--warehouse", help="warehouse root (default LAYOUT_WAREHOUSE)")
    rw.add_argument("--catalog", help="catalog URL")
    rw.add_argument("--schema", help="schema name (tpch) or YAML/JSON file")
    rw.add_argument("--raw", help="folder of <table>.parquet for tables without a layout")
    rw.add_argument("--compare", action="store_true",
                    help="also run each query as written and require identical answers")
    rw.add_argument("--json", action="store_true")
    rw.add_argument("--no-history", action="store_true",
                    help="do not add the queries to the catalog's query history")
    rw.set_defaults(func=cmd_run_workload)

    demo = sub.add_parser("demo", help="TPC-H end to end: data, queries, two nightly DAG runs, report")
    demo.add_argument("--home", default=".layout/demo", help="folder for everything the demo makes")
    demo.add_argument("--sf", type=float, default=0.05, help="TPC-H scale factor (default 0.05)")
    demo.set_defaults(func=cmd_demo)

    bench = sub.add_parser("bench", help="benchmarks").add_subparsers(dest="bench_command", required=True)
    bs = bench.add_parser("sun", help="Sun et al. section 7.3: range, range2, fineblock on denormalized TPC-H")
    bs.add_argument("--sf", type=float, default=0.1, help="TPC-H scale factor (default 0.1)")
    bs.add_argument("--train", type=int, default=800, help="training queries (default 800)")
    bs.add_argument("--test", type=int, default=80, help="test queries (default 80)")
    bs.add_argument("--num-feat", type=int, default=15)
    bs.add_argument("--block-rows", type=_block_rows,
                    help="rows per block, Sun's minSize (default: about 10 blocks per month partition)")
    bs.add_argument("--sweep", action="store_true", help="also sweep minSize from 0.1x to 4x")
    bs.add_argument("--no-spark", action="store_true", help="skip writing layouts and timing Spark")
    bs.add_argument("--work", default=".layout/bench/sun", help="folder for data and results")
    bs.add_argument("--json", action="store_true")
    bs.set_defaults(func=cmd_bench_sun)

    bt = bench.add_parser("tpch", help="B1: sortkey, zorder, hilbert, qdtree, mto on all TPC-H tables")
    bt.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    bt.add_argument("--templates", type=_templates, help="comma-separated template numbers (default all 22)")
    add_b1_arguments(bt, ".layout/bench/tpch")
    add_tpch_variant_arguments(bt)
    bt.set_defaults(func=cmd_bench_tpch)

    btr = bench.add_parser("trips", help="B1's report on taxi trips: correlated columns, outliers (Pando's example)")
    btr.add_argument("--rows", type=int, default=6_000_000, help="trips (default 6000000)")
    btr.add_argument("--outliers", type=_outlier_shares, default=[0.01],
                     help="share of outlier trips, in [0, 1) (default 0.01); several, comma-separated (e.g. "
                          "0,0.01,0.03,0.1), run one after another and plot blocks read against the share")
    btr.add_argument("--seed", type=int, default=1, help="seed of the data and the queries (default 1)")
    btr.add_argument("--coordinates", action="store_true",
                     help="trips with pickup and dropoff points; the distance templates filter the straight-line "
                          "distance between them, an expression no column stores (Pando's example)")
    add_b1_arguments(btr, ".layout/bench/trips")
    btr.set_defaults(func=cmd_bench_trips)

    bd = bench.add_parser("tpcds", help="B2: B1's report on TPC-DS (36 templates joining facts and dimensions)")
    bd.add_argument("--sf", type=float, default=1.0, help="TPC-DS scale factor, 0.01 to 10 (default 1)")
    bd.add_argument("--seed", type=int, default=1, help="seed of the queries (default 1)")
    bd.add_argument("--templates", type=_tpcds_templates, help="comma-separated template numbers (default all 36)")
    add_b1_arguments(bd, ".layout/bench/tpcds")
    bd.set_defaults(func=cmd_bench_tpcds)

    bc = bench.add_parser("changes", help="MTO 6.5.2: change batches on mto layouts, cut repair vs recomputation")
    bc.add_argument("--sf", type=float, default=1.0, help="TPC-H scale factor (default 1)")
    bc.add_argument("--block-rows", type=_block_rows, default=10_000, help="rows per block (default 10000)")
    bc.add_argument("--per-template", type=int, default=4, help="instances per template (default 4)")
    bc.add_argument("--work", default=".layout/bench/changes", help="folder for data and results")
    bc.add_argument("--json", action="store_true", help="one line of JSON")
    bc.set_defaults(func=cmd_bench_changes)

    # heavy (Spark, a benchmark, Airflow): loaded by the command that runs it, so `layout --help` stays fast
    from layout_core.bench.shift import add_shift_parser

    add_shift_parser(bench)

    dt = sub.add_parser("dag-test", help="run one of the project's DAGs once, in-process (airflow dags test)")
    dt.add_argument("dag_id", choices=["layout_nightly", "layout_star_nightly", "layout_changes", "layout_gc"])
    dt.add_argument("--conf", default="{}", help="the DAG's params as a JSON object")
    dt.add_argument("--catalog", help="catalog URL (default: LAYOUT_CATALOG_URL or .layout/catalog.db)")
    dt.add_argument("--warehouse", help="warehouse root (default LAYOUT_WAREHOUSE)")
    dt.add_argument("--airflow-home", default=".layout/airflow-test",
                    help="a private AIRFLOW_HOME (SQLite metadata; nothing listens on a port)")
    dt.set_defaults(func=cmd_dag_test)

    opt = sub.add_parser("optimizers", help="the registered layout optimizers and their settings")
    opt.set_defaults(func=cmd_optimizers)

    gc = sub.add_parser("gc", help="delete block folders of retired versions and orphaned run staging")
    gc.add_argument("--older-than", default="24h",
                    help="grace period since a version left service (30m, 24h, 7d; default 24h)")
    gc.add_argument("--dry-run", action="store_true", help="only report what would be deleted")
    gc.add_argument("--json", action="store_true")
    gc.add_argument("--catalog", help="catalog URL")
    gc.add_argument("--warehouse", help="warehouse root (default LAYOUT_WAREHOUSE)")
    gc.set_defaults(func=cmd_gc)

    cat = sub.add_parser("catalog", help="the layout catalog").add_subparsers(dest="catalog_command", required=True)
    show = cat.add_parser("show", help="tables and layout versions")
    show.add_argument("--catalog", help="catalog URL")
    show.set_defaults(func=cmd_catalog_show)
    upgrade = cat.add_parser("upgrade", help="bring the catalog's schema to this code's newest revision "
                                             "(opening a catalog does it too)")
    upgrade.add_argument("--catalog", help="catalog URL")
    upgrade.set_defaults(func=cmd_catalog_upgrade)
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
    except (UserError, OSError, CatalogError) as e:
        # A user's mistake (missing file, bad schema or setting, ...) gets one clear line;
        # anything else is a bug and keeps its traceback.
        log.error("%s", e)
        return 1


if __name__ == "__main__":
    sys.exit(main())
