"""Benchmark `layout bench changes` (MTO §6.5.2): change batches on TPC-H laid out by mto.

TPC-H at `--sf`; the orders of 1996 and later and their lineitems are held
back, and 500 extra parts (new keys, no lineitems) are added; then every
table is laid out with mto by the nightly steps (`pipeline.steps`), trained
on B1's training queries (odd instances of the 22 templates). Then, with
`changes.apply` (what `layout changes apply` and the layout_changes DAG run):

1. dimension batches: 1,000 new customers, then the 500 parts deleted. Per
   batch: seconds to repair the join-induced cuts computed from the table
   (`repair_seconds` of the stage) vs recomputing their literal keys from
   the full tables (`spark.induced.literal_keys`, what a new layout does).
   After both: blocks read by B1's test queries (even instances) before the
   batches, after them with repair, with the repaired cuts left stale (the
   router's behaviour without repair: the same layouts, the cuts' dimension
   versions put back), and after a full re-layout of orders and lineitem.
2. fact batches (under "facts"): the held-back orders, then their
   lineitems, as inserts (late rows routed to their blocks); blocks read
   before, after, with the cuts of lineitem through orders left stale, and
   after a full re-layout of both tables.

After every batch all test queries run in Spark on the raw tables (changed
the same way) and, rewritten with their routes, on the block folders:
`identical` says whether every answer was the same.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
import time
from pathlib import Path

from layout_core.catalog import Catalog
from layout_core.base.schema import load_schema
from layout_core.flows.changes.apply import apply_changes_in_process
from layout_core.flows.nightly import steps
from layout_core.optimizers import CandidateCut
from layout_core.predicates import loads
from layout_core.runs.sources import active_sources, source_frames
from layout_core.skipping.rewrite import rewrite_sql
from layout_core.skipping.router import RoutingIndex, route_query
from layout_core.spark.compare import same_rows
from layout_core.spark.featurize import path_tables
from layout_core.spark.induced import literal_keys
from layout_core.spark.session import local_session
from layout_core.spark.views import register_layout_views
from layout_core.workload.tpch import generate, write_sql_file
from layout_core.workload.tpch_data import generate_tpch
from layout_core.bench.sun import LONG_RUN_JVM

log = logging.getLogger("layout.bench.changes")

TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")  # parents first
LATE = "1996-01-01"  # orders from this date on arrive late
NEW_CUSTOMERS = 1_000
UNUSED_PARTS = 500


def run(sf: float = 1.0, block_rows: int = 10_000, per_template: int = 4, seed: int = 1,
        work: Path = Path(".layout/bench/changes")) -> dict:
    work = work.resolve()
    schema = load_schema("tpch")
    paths = generate_tpch(sf, work / f"tpch_sf{sf}")
    run_dir = work / f"run_sf{sf}_b{block_rows}"
    shutil.rmtree(run_dir, ignore_errors=True)
    run_dir.mkdir(parents=True)
    queries = generate(per_template, seed, scale_factor=sf)
    log_file = run_dir / "train.sql"
    write_sql_file([q for q in queries if q.instance % 2 == 1], log_file)
    test = [q.sql for q in queries if q.instance % 2 == 0]
    url = f"sqlite:///{run_dir / 'catalog.db'}"
    spark = local_session("layout-bench-changes", extra=LONG_RUN_JVM)
    try:
        raw = {t: spark.read.parquet(str(paths[t])) for t in TABLES}
        late_orders = raw["orders"].where(f"o_orderdate >= DATE'{LATE}'")
        late_lines = raw["lineitem"].join(late_orders.select("o_orderkey"),
                                          raw["lineitem"]["l_orderkey"] == late_orders["o_orderkey"], "left_semi")
        extra_parts = raw["part"].orderBy("p_partkey").limit(UNUSED_PARTS).selectExpr(
            "p_partkey + 10000000 AS p_partkey", *[c for c in raw["part"].columns if c != "p_partkey"])
        current = dict(raw)
        current["orders"] = raw["orders"].where(f"o_orderdate < DATE'{LATE}'")
        current["lineitem"] = raw["lineitem"].join(late_orders.select("o_orderkey"),
                                                   raw["lineitem"]["l_orderkey"] == late_orders["o_orderkey"],
                                                   "left_anti")
        current["part"] = raw["part"].unionByName(extra_parts)
        batches = run_dir / "batches"
        for name, frame in (("late_orders", late_orders), ("late_lines", late_lines), ("extra_parts", extra_parts)):
            frame.write.parquet(str(batches / name))
        where: dict[str, Path] = {}  # the Parquet folder of each table's current rows
        current = _materialized(spark, current, run_dir / "data", TABLES, where)

        def lay_out(table: str, run_id: str) -> None:
            with Catalog(url) as catalog:
                steps.run_in_process(spark, catalog, schema, steps.RunPaths(run_dir / "wh", table, "", run_id),
                                     str(where[table]), "mto", {"block_rows": block_rows}, str(log_file))

        t0 = time.monotonic()
        for table in TABLES:
            lay_out(table, "night-1")
        layout_seconds = round(time.monotonic() - t0, 1)
        before = _blocks_read(url, schema, test)
        identical = _same_answers(spark, url, schema, test, current)

        def apply(table: str, inserted: str | None, deleted: str | None, run_id: str) -> dict:
            with Catalog(url) as catalog:
                return apply_changes_in_process(spark, catalog, schema,
                                                steps.RunPaths(run_dir / "wh", table, "", run_id), inserted, deleted)

        # 1. dimension batches
        new_customers = current["customer"].orderBy("c_custkey").limit(NEW_CUSTOMERS).selectExpr(
            "c_custkey + 10000000 AS c_custkey", *[c for c in current["customer"].columns if c != "c_custkey"])
        new_customers.write.parquet(str(batches / "new_customers"))
        extra_parts.select("p_partkey").write.parquet(str(batches / "unused_parts"))
        dims = {}
        for table, inserted, deleted in (("customer", str(batches / "new_customers"), None),
                                         ("part", None, str(batches / "unused_parts"))):
            with Catalog(url) as catalog:
                base = catalog.active_layout(table, "").version.version_id
            metrics = apply(table, inserted, deleted, f"changes-{table}")
            staged = metrics["stage_changes"]
            frame = spark.read.parquet(inserted or deleted)
            key = schema.table(table).primary_key
            current[table] = (current[table].unionByName(frame) if inserted
                              else current[table].join(frame, on=list(key), how="left_anti"))
            dims[table] = {"repair_seconds": staged["repair_seconds"],
                           "recompute_seconds": _recompute_seconds(spark, url, schema, table, base),
                           "cuts_repaired": metrics["activate_changes"].get("cuts_repaired", 0),
                           "cuts_left_stale": staged["cuts_left_stale"], "replaces": base}
            current = _materialized(spark, current, run_dir / "data", [table], where)
            identical &= _same_answers(spark, url, schema, test, current)
        repaired = _blocks_read(url, schema, test)
        stale = _blocks_read(url, schema, test, stale_from={t: d["replaces"] for t, d in dims.items()})
        for table in ("orders", "lineitem"):
            lay_out(table, "relayout-dims")
        relayout = _blocks_read(url, schema, test)

        # 2. fact batches: the held-back orders, then their lineitems
        facts_before = relayout
        with Catalog(url) as catalog:
            orders_base = catalog.active_layout("orders", "").version.version_id
        fact_metrics = {}
        for table, name in (("orders", "late_orders"), ("lineitem", "late_lines")):
            fact_metrics[table] = apply(table, str(batches / name), None, f"changes-late-{table}")
            current[table] = current[table].unionByName(spark.read.parquet(str(batches / name)))
            current = _materialized(spark, current, run_dir / "data", [table], where)
            identical &= _same_answers(spark, url, schema, test, current)
        facts_after = _blocks_read(url, schema, test)
        facts_stale = _blocks_read(url, schema, test, stale_from={"orders": orders_base})
        for table in ("orders", "lineitem"):
            lay_out(table, "relayout-facts")
        facts_relayout = _blocks_read(url, schema, test)
        identical &= _same_answers(spark, url, schema, test, current)
    finally:
        spark.stop()
    return {
        "sf": sf, "block_rows": block_rows, "test_queries": len(test), "layout_seconds": layout_seconds,
        "repair_seconds": round(sum(d["repair_seconds"] for d in dims.values()), 3),
        "recompute_seconds": round(sum(d["recompute_seconds"] for d in dims.values()), 3),
        "batches": dims,
        "blocks_read": {"before": before, "repaired": repaired, "stale": stale, "relayout": relayout},
        "facts": {"blocks_read": {"before": facts_before, "repaired": facts_after, "stale": facts_stale,
                                  "relayout": facts_relayout},
                  "orders_inserted": fact_metrics["orders"]["stage_changes"]["inserted"],
                  "lineitems_inserted": fact_metrics["lineitem"]["stage_changes"]["inserted"],
                  "lineitem_new_blocks": fact_metrics["lineitem"]["stage_changes"]["new_blocks"],
                  "seconds": {t: round(sum(s.get("seconds", 0) for s in m.values() if isinstance(s, dict)), 2)
                              for t, m in fact_metrics.items()}},
        "identical": bool(identical),
    }


def _materialized(spark, frames: dict, folder: Path, tables, where: dict) -> dict:
    """`frames` with `tables` written as Parquet (a new folder each time, noted in `where`)
    and read back: the raw reference of the answers, and the input of a re-layout."""
    out = dict(frames)
    for table in tables:
        target = folder / f"{table}_{sum(1 for _ in folder.glob(f'{table}_*')) if folder.exists() else 0}"
        frames[table].write.parquet(str(target))
        where[table] = target
        out[table] = spark.read.parquet(str(target))
    return out


def _blocks_read(url: str, schema, statements, stale_from: dict[str, int] | None = None) -> int:
    """Blocks the statements read on the active layouts; with `stale_from` ({table: an older
    version}), as if the cuts repaired since that version had been left stale."""
    with Catalog(url) as catalog:
        snapshot = catalog.snapshot()
    if stale_from:
        snapshot = _with_cuts_unrepaired(snapshot, stale_from)
    index = RoutingIndex.from_snapshot(snapshot)
    return sum(len(ref.blocks) for sql in statements for ref in route_query(sql, index, schema).refs)


def _with_cuts_unrepaired(snapshot, older: dict[str, int]):
    """The snapshot with every cut that names a table's current version naming `older`'s version
    instead: what the cut said before it was repaired, stale since that version is retired."""
    current = {t: snapshot.layouts[(t, "")].version.version_id for t in older}
    layouts = {}
    for key, layout in snapshot.layouts.items():
        cuts = tuple(dataclasses.replace(c, source_versions=tuple(
            (t, older[t] if t in older and v == current[t] else v) for t, v in c.source_versions))
            for c in layout.cuts)
        layouts[key] = dataclasses.replace(layout, cuts=cuts)
    return dataclasses.replace(snapshot, layouts=layouts)


def _recompute_seconds(spark, url: str, schema, table: str, base_version: int) -> float:
    """Seconds to compute, from the full current tables, the literal keys of every cut the batch
    on `table` repaired (what a re-layout of the fact tables would do for them)."""
    with Catalog(url) as catalog:
        snapshot = catalog.snapshot()
        current = catalog.active_layout(table, "").version.version_id
        predicates = sorted({c.predicate for layout in snapshot.layouts.values() for c in layout.cuts
                             if c.kind == "join_induced" and (table, current) in c.source_versions})
        cuts = [loads(p) for p in predicates]
        tables = set().union(*(path_tables(CandidateCut(c, "join_induced")) for c in cuts)) if cuts else set()
        sources = active_sources(catalog, tables)
    t0 = time.monotonic()
    frames = source_frames(spark, schema, {t: s["paths"] for t, s in sources.items()})
    for cut in cuts:
        literal_keys(frames, cut)
    return round(time.monotonic() - t0, 3)


def _same_answers(spark, url: str, schema, statements, current: dict) -> bool:
    for table, frame in current.items():
        frame.createOrReplaceTempView(table)
    expected = [spark.sql(sql).collect() for sql in statements]
    with Catalog(url) as catalog:
        snapshot = catalog.snapshot()
    index = RoutingIndex.from_snapshot(snapshot)
    register_layout_views(spark, snapshot, [schema.table(t) for t in TABLES])
    same = True
    for sql, rows in zip(statements, expected):
        equal, why = same_rows(rows, spark.sql(rewrite_sql(route_query(sql, index, schema), index)).collect())
        if not equal:
            log.error("different answer after a change batch: %s\n%s", why, sql)
            same = False
    return same


def main_json(**kwargs) -> str:
    r = run(**kwargs)
    return json.dumps({"repair_seconds": r["repair_seconds"], "recompute_seconds": r["recompute_seconds"],
                       "blocks_read": r["blocks_read"], "identical": r["identical"], "facts": r["facts"],
                       "batches": r["batches"]})
