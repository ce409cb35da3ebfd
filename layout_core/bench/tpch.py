"""Benchmark B1 (`layout bench tpch`): every TPC-H table laid out by five layouts.

TPC-H at `--sf`, all 8 tables, 22 templates x `--per-template` instances
(seed 1): odd instances train the optimizers, even instances are the test.
Layouts, all with blocks of `--block-rows` rows and per-block zone maps:

- sortkey: lineitem by l_shipdate, orders by o_orderdate, others by primary key;
- zorder / hilbert: a space-filling curve over the table's most frequently
  filtered columns in the training queries (what Delta/Iceberg/Hudi users run);
- qdtree: greedy qd-tree over the training queries' simple cuts (MTO §2.1.3);
- mto: the same with join-induced cuts (MTO §4), bits exact by joins;
- pando-K (asked for by `--layouts`): Pando with K trees over mto's cuts
  (Pando §6; `pando-auto` lets it choose K).

Every table is laid out by `pipeline.in_memory.lay_out_in_memory`: the
functions the nightly steps call (the registered optimizer's cut choice,
`spark.featurize`, `optimizers.plan_layout`, `spark.assign`), with the
optimizers' default settings but `block_rows` and sortkey's column. How
the tree optimizers sample, size leaves and sort inside them is theirs
(`optimizers/qdtree.py`), not the benchmark's.

For each layout the router (the same one queries use) decides the blocks of
every test query's table references. Reported: blocks and rows read, per table
and in total; the lower bound sum(ceil(rows needed / block rows)); seconds of
the same stages for every layout (featurize, reduce, optimize, assign blocks,
and write when `--spark` writes them); router latency per query (median of
ROUTER_ROUNDS runs, parsing included); the index each layout keeps for the
router besides zone maps, in bytes (`index_bytes`, as Pando's Fig. 9). The
tree layouts (qdtree, mto, pando) are also routed on their tree paths and
cells alone (`tree_paths_only`), as the papers' routers read them: our router
also reads every cut's bits and zone maps on every block.

With `spark_e2e` (`layout bench tpch --spark`), the sortkey, mto and (when
laid out) pando-3 layouts of all 8 tables are also written as block folders, and every test query runs on
Spark rewritten with its route (block_id filters) on each layout, after the
same query on the raw tables; answers must be identical, and the total Spark
seconds per layout are reported.

The measurements take any data: `run_benchmark` over a `BenchData` (schema,
Parquet tables, queries, sortkey's columns); `run` gives it TPC-H (uniform,
skewed or time-ordered: workload.tpch_skew), bench.trips the taxi trips,
bench.tpcds TPC-DS. Every table that some query reads is laid out.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import sqlglot
from sqlglot import exp

from layout_core.base.names import BLOCK_ID_COLUMN, BLOCK_INDEX_COLUMN
from layout_core.bench import inputcut
from layout_core.bench.checkpoints import Checkpoints
from layout_core.catalog import BlockRecord
from layout_core.flows.nightly.in_memory import Featurized, lay_out_in_memory
from layout_core.optimizers import TableQueries
from layout_core.optimizers.plan import TupleBlocks
from layout_core.predicates import TRUE, identifier, to_sql
from layout_core.base.schema import Schema, load_schema
from layout_core.runs.publish import tree_records
from layout_core.skipping.rangesets import coarsen_column_stats
from layout_core.skipping.rewrite import rewrite_sql
from layout_core.skipping.router import LayoutIndex, RoutingIndex, route_analysis, route_query
from layout_core.skipping.zonemaps import DEFAULT_RANGE_SETS
from layout_core.spark.assign import BlockBits, block_bits
from layout_core.spark.blocks import summarize_blocks, write_block_folders
from layout_core.spark.compare import same_rows
from layout_core.spark.induced import literal_keys
from layout_core.spark.runner import scan_metrics
from layout_core.spark.session import local_session
from layout_core.sql.analysis import analyze, parse_tagged
from layout_core.workload.tpch import generate
from layout_core.workload.tpch_skew import TpchVariant, generate_tpch_variant
from layout_core.bench.sun import LONG_RUN_JVM

log = logging.getLogger("layout.bench.tpch")

LAYOUTS = ("sortkey", "zorder", "hilbert", "qdtree", "mto")
DIP_LAYOUTS = ("tuned", "mto(join_key)")  # laid out too with --dips
DIPS = "+dips"  # a layout routed with diPs
SORT_KEYS = {"lineitem": "l_shipdate", "orders": "o_orderdate"}  # sortkey's column; others: the primary key
E2E_LAYOUTS = ("sortkey", "mto")  # and pando-3 when it is laid out
E2E_OPTIONAL = ("pando-3",)
TREE_OPTIMIZERS = ("qdtree", "mto", "pando")
NODE_BYTES = 12  # a tree node: (cut, left, right) or a leaf id, three 32-bit integers
ID_BYTES = 4
NEEDED = "needed"  # the Spark run's ideal: every reference reads exactly the rows it needs
STAGES = ("featurize", "reduce", "optimize", "assign", "write")
# Each test query is routed this often and its latency is the median: one slow
# moment of this shared machine should not decide a percentile. (The reasoning
# caches are warm in every round, the first included: the counts above routed
# every query already.)
ROUTER_ROUNDS = 5
# Ranges per block and column measured with --dips (the diPs paper considers 20, §4):
# the blocks read against the bytes of the block statistics (`range_set_sweep`).
RANGE_SET_SWEEP = (1, 2, 4, 8, 12, 16, 20, 24, 32)


def layout_optimizer(layout: str) -> tuple[str, dict]:
    """A B1 layout name as (registered optimizer, settings): `pando-3` is pando
    with 3 trees, `pando-2(mto)` pando with 2 trees around mto's tree
    (first_tree=mto), `mto(join_key)` mto with leaf_order=join_key."""
    base, order = layout, ""
    if layout.endswith(")") and "(" in layout:
        base, order = layout[:-1].split("(", 1)
    name, _, trees = base.partition("-")
    settings: dict = {}
    if trees and name == "pando" and (trees == "auto" or trees.isdigit()):
        settings["trees"] = trees
    elif trees or name not in (*LAYOUTS, "tuned"):
        name = ""
    if order == "mto" and name == "pando":
        settings["first_tree"] = "mto"
    elif order:
        if order not in ("join_key", "range") or name not in TREE_OPTIMIZERS:
            name = ""
        settings["leaf_order"] = order
    if not name:
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}, tuned, pando-K (K trees), "
                         "pando-auto, pando-K(mto) (K trees around mto's), and a tree layout with its leaf order, "
                         "e.g. mto(join_key)")
    return name, settings


def layout_settings(layout: str, table: str, block_rows: int, extra: dict | None = None,
                    sort_keys: dict[str, str] = SORT_KEYS) -> dict:
    """B1's settings of one layout for one table: the optimizers' defaults but
    block_rows, and sortkey's column (TPC-H: lineitem by ship date, orders by order date;
    "" sorts by the primary key)."""
    settings = {"block_rows": block_rows, **layout_optimizer(layout)[1], **(extra or {})}
    if layout == "sortkey":
        settings["sort_column"] = sort_keys.get(table, "")
    return settings


def index_bytes(plan, tree_nodes: int, lineage: dict, literal_key_bytes: int) -> int:
    """What the router keeps besides zone maps and cut bits: the routing trees'
    `tree_nodes` nodes, the blocks' lineage (leaf ids per tree), the cell ->
    block map Pando keeps for inserts, and the literal keys of join-induced cuts."""
    lineage_ids = sum(len(leaves) for per_tree in lineage.values() for leaves in per_tree)
    cells = 0
    if isinstance(plan.assignment, TupleBlocks):
        cells = len(plan.assignment.cells) * (plan.assignment.k + 2)
    return tree_nodes * NODE_BYTES + (lineage_ids + cells) * ID_BYTES + literal_key_bytes


@dataclass(frozen=True)
class BenchData:
    """What a benchmark lays out and asks: tables (`paths`, Parquet files by table) of
    `schema`, queries with a `template` and an `instance` number (odd instances train,
    even ones test), sortkey's column per table, and the fields that name the data in
    the report (`info`, `title`). `name` names the block folders under the work folder."""

    title: str
    schema: Schema
    paths: dict
    queries: tuple
    sort_keys: dict
    name: str
    info: dict


def run(sf: float = 1.0, block_rows: int = 10_000, per_template: int = 8, seed: int = 1,
        work: Path = Path(".layout/bench/tpch"), layouts=LAYOUTS, spark_e2e: bool = False,
        tree_settings: dict | None = None, dips: bool = False, data: TpchVariant = TpchVariant(),
        templates: Sequence[int] | None = None) -> dict:
    """B1 on TPC-H at `sf`: `data` skewed or time-ordered instead of the generator's
    uniform tables (workload.tpch_skew); `templates` (default all 22) the query templates.
    The rest as `run_benchmark`."""
    work = work.resolve()
    suffix = "" if data.uniform else f"_{data.name}"
    bench = BenchData(f"TPC-H SF {sf} ({data.name} data)", load_schema("tpch"),
                      generate_tpch_variant(sf, work / f"tpch_sf{sf}{suffix}", data),
                      tuple(generate(per_template, seed, templates, scale_factor=sf)), SORT_KEYS, f"sf{sf}{suffix}",
                      {"scale_factor": sf, "data": data.name})
    return run_benchmark(bench, block_rows, work, layouts, spark_e2e, tree_settings, dips)


def run_benchmark(data: BenchData, block_rows: int, work: Path, layouts=LAYOUTS, spark_e2e: bool = False,
                  tree_settings: dict | None = None, dips: bool = False) -> dict:
    """B1's measurements on `data` (the module docstring). `tree_settings` (e.g.
    {"max_cuts": 48, "sample_rows": 0}) override the qdtree/mto defaults, for measuring
    variants. With `dips`, every layout is also routed with diPs (rows `<layout>+dips`),
    `tuned` and `mto(join_key)` are laid out too, and the semi-join lower bound is computed."""
    if dips:
        layouts = tuple(dict.fromkeys((*layouts, *DIP_LAYOUTS)))

    work = work.resolve()
    schema, paths = data.schema, data.paths
    key_hops = schema.key_hops()
    train_q = [q for q in data.queries if q.instance % 2 == 1]
    test_q = [q for q in data.queries if q.instance % 2 == 0]
    train = tuple(analyze(q.sql, schema) for q in train_q)
    test = [analyze(q.sql, schema) for q in test_q]
    # the tables some query reads (TPC-DS has tables no template of ours touches)
    used = {ref.table for a in (*train, *test) for ref in a.refs}
    read = tuple(t for t in schema.tables if t in used)

    optimizers = {name: layout_optimizer(name)[0] for name in layouts}  # unknown names fail here
    if spark_e2e and not set(E2E_LAYOUTS) <= set(layouts):
        raise ValueError(f"the Spark run needs the layouts {E2E_LAYOUTS}")
    e2e_layouts = E2E_LAYOUTS + tuple(k for k in E2E_OPTIONAL if k in layouts)
    if dips:  # the best diPs variant is known only after routing: write every candidate
        e2e_layouts = tuple(dict.fromkeys((*e2e_layouts, *DIP_LAYOUTS, "mto")))
    spark = local_session("layout-bench-tpch", extra=LONG_RUN_JVM)
    indexes: dict[str, dict[str, LayoutIndex]] = {name: {} for name in layouts}
    ranged: dict[str, dict[str, LayoutIndex]] = {name: {} for name in layouts}  # with range sets, for diPs
    # the tree layouts as the qd-tree, MTO and Pando papers route them: tree paths (and cells) alone
    path_only: dict[str, dict[str, LayoutIndex]] = {name: {} for name in layouts if optimizers[name] in TREE_OPTIMIZERS}
    finest: dict[str, dict[str, tuple]] = {name: {} for name in layouts}  # (records, cuts, trees) at the sweep's most
    stage_seconds = {name: {} for name in layouts}
    plans: dict[str, dict[str, dict]] = {name: {} for name in layouts}
    blocks_total = {name: {} for name in layouts}
    index_size = {name: 0 for name in layouts}
    key_bytes: dict[str, int] = {}  # literal keys of a join-induced cut, by its SQL
    table_rows: dict[str, int] = {}
    folders = work / f"blocks_{data.name}_b{block_rows}"
    # a run stopped halfway goes on from the (layout, table) pairs it measured
    checkpoints = Checkpoints(work / f"checkpoints_{data.name}_b{block_rows}",
                              (data.name, sorted(data.info.items()), block_rows, [q.sql for q in train_q],
                               tree_settings))
    e2e = None
    try:
        tables = {t: spark.read.parquet(str(paths[t])).cache() for t in schema.tables}
        for t, frame in tables.items():
            frame.createOrReplaceTempView(t)
        for name in read:
            table = schema.tables[name]
            table_queries = TableQueries(name, train, key_hops)
            featurized = Featurized()  # the layouts choosing the same cuts flag the rows once
            for kind in layouts:
                extra = tree_settings if optimizers[kind] in TREE_OPTIMIZERS else None
                settings = layout_settings(kind, name, block_rows, extra, data.sort_keys)
                write = spark_e2e and kind in e2e_layouts
                inputs = (settings, dips, write)
                measured = checkpoints.load(kind, name, inputs)
                if measured is None or (write and not (folders / kind / name).exists()):
                    measured = _measure_layout(table, tables, optimizers[kind], settings, table_queries, featurized,
                                               dips, folders / kind / name if write else None, folders, key_bytes)
                    checkpoints.save(kind, name, measured, inputs)
                stage_seconds[kind][name] = measured.seconds
                blocks_total[kind][name] = len(measured.records)
                table_rows[name] = measured.rows
                plans[kind][name] = measured.plan
                index_size[kind] += measured.index_bytes
                records, predicates, nodes = measured.records, measured.predicates, measured.nodes
                if dips:
                    finest[kind][name] = (records, predicates, nodes)
                    ranged[kind][name] = LayoutIndex.from_blocks(name, coarse_records(records, DEFAULT_RANGE_SETS),
                                                                 predicates, trees=nodes)
                # the plain rows keep min/max zone maps, as B1 always measured them
                plain = [replace(r, stats=min_max_only(r.stats)) for r in records]
                indexes[kind][name] = LayoutIndex.from_blocks(name, plain, predicates, trees=nodes)
                if kind in path_only:
                    path_only[kind][name] = LayoutIndex.from_blocks(name, tree_paths_only(records, len(predicates)),
                                                                    predicates, trees=nodes)
                log.info("%s %s: %d blocks, %d cuts, seconds %s", kind, name, len(records), len(predicates),
                         measured.seconds)
            featurized.release()

        # rows each test reference needs, for the lower bound
        needed_blocks = 0
        needed_rows = 0
        needed_by_table: dict[str, int] = {}
        cache: dict[tuple[str, str], int] = {}
        needed_by_template: dict[str, int] = {}
        for tq, a in zip(test_q, test):
            for ref in a.refs:
                q = a.predicate(ref.key, key_hops)
                k = (ref.table, to_sql(q))
                if k not in cache:
                    cache[k] = spark.table(ref.table).where(to_sql(q)).count()
                blocks_needed = math.ceil(cache[k] / block_rows)
                needed_rows += cache[k]
                needed_blocks += blocks_needed
                needed_by_table[ref.table] = needed_by_table.get(ref.table, 0) + blocks_needed
                needed_by_template[str(tq.template)] = needed_by_template.get(str(tq.template), 0) + blocks_needed
        routing = {name: RoutingIndex({t: (ix,) for t, ix in indexes[name].items()}, {}) for name in layouts}
        routing.update({f"{name}{DIPS}": RoutingIndex({t: (ix,) for t, ix in ranged[name].items()}, {})
                        for name in layouts if dips})
        result_layouts = {}
        per_template: dict[str, dict[int, int]] = {}
        per_query: dict[str, list[int]] = {}
        row_names = [*layouts, *([f"{name}{DIPS}" for name in layouts] if dips else [])]
        for row in row_names:
            name = row.removesuffix(DIPS)
            n_blocks = sum(blocks_total[name].values())
            stages = {stage: round(sum(s.get(stage, 0.0) for s in stage_seconds[name].values()), 2)
                      for stage in STAGES}
            result_layouts[row] = {
                **read_counts(test_q, test, routing[row], schema, row.endswith(DIPS)),
                "blocks_total": n_blocks,
                # tree leaves hold >= block_rows rows (MTO §2.1.3), so their blocks
                # are larger on average than the others': compare rows read too
                "mean_block_rows": round(sum(table_rows.values()) / max(1, n_blocks)),
                "stage_seconds": stages, "stage_seconds_per_table": stage_seconds[name],
                "index_bytes": index_size[name], "plans": plans[name]}
            per_template[row] = result_layouts[row].pop("_per_template")
            per_query[row] = result_layouts[row].pop("_per_query")
            if row in path_only:
                on_paths = read_counts(test_q, test, RoutingIndex({t: (ix,) for t, ix in path_only[row].items()}, {}),
                                       schema, False)
                result_layouts[row]["tree_paths_only"] = {
                    "blocks_read": on_paths["blocks_read"], "rows_read": on_paths["rows_read"],
                    "blocks_per_template": {str(t): n for t, n in sorted(on_paths["_per_template"].items())}}
        best_dips = min((r for r in result_layouts if r.endswith(DIPS)),
                        key=lambda r: result_layouts[r]["blocks_read"], default=None)
        semijoin = semijoin_lower_bound(spark, test, block_rows) if dips else None
        if spark_e2e:
            for frame in tables.values():
                frame.unpersist()
            # the best diPs row among the layouts written as block folders
            best_written = min((r for r in result_layouts if r.endswith(DIPS) and r.removesuffix(DIPS) in e2e_layouts),
                               key=lambda r: result_layouts[r]["blocks_read"], default=None)
            e2e_kinds = [*E2E_LAYOUTS, *(k for k in E2E_OPTIONAL if k in layouts),
                         *([best_written] if best_written else [])]
            e2e = spark_end_to_end(spark, schema, [q.sql for q in test_q], paths, folders,
                                   {kind: routing[kind] for kind in e2e_kinds}, read)
    finally:
        spark.stop()

    for name in result_layouts:
        result_layouts[name]["blocks_per_template"] = {str(t): n for t, n in sorted(per_template[name].items())}
    latencies = router_latencies(test_q, routing["mto"], schema, dips=False) if "mto" in layouts else []
    base = result_layouts.get("sortkey", {}).get("blocks_read") or 1
    base_rows = result_layouts.get("sortkey", {}).get("rows_read") or 1
    for v in result_layouts.values():
        v["blocks_vs_sortkey"] = round(v["blocks_read"] / base, 3)
        v["rows_vs_sortkey"] = round(v["rows_read"] / base_rows, 3)
    chart = work / "b1_per_template.png"
    _chart(chart, per_template, data.title)
    if dips:  # the diPs paper's metric, per layout: its blocks without diPs over with them
        test_templates = [q.template for q in test_q]
        for name in layouts:
            result_layouts[f"{name}{DIPS}"]["inputcut"] = inputcut.summary(
                per_query[name], per_query[f"{name}{DIPS}"], test_templates)
        inputcut.cdf_chart(work / "inputcut_cdf.png",
                           {f"{name}{DIPS}": result_layouts[f"{name}{DIPS}"]["inputcut"]["per_query"]
                            for name in layouts}, data.title)
    out = {
        "dataset": data.title, **data.info, "block_rows": block_rows, "tables_laid_out": list(read),
        "train_queries": len(train_q), "test_queries": len(test_q),
        "tree_settings": tree_settings or {},
        "layouts": result_layouts,
        "lower_bound_blocks": needed_blocks, "rows_needed": needed_rows,
        "lower_bound_by_table": needed_by_table,
        "lower_bound_per_template": dict(sorted(needed_by_template.items(), key=lambda kv: int(kv[0]))),
        "router_ms": _percentiles(latencies),
        "chart": str(chart),
        **({"inputcut_chart": str(work / "inputcut_cdf.png")} if dips else {}),
    }
    if dips:
        out.update(semijoin)
        out["range_sets"] = {f"{name}{DIPS}": range_set_sweep(test_q, test, finest[name], schema) for name in layouts}
        if best_dips:
            out["best_dips"] = best_dips
            routed, parsed = router_and_sqlglot_latencies(test_q, routing[best_dips], schema, dips=True)
            out["router_ms_dips"] = _percentiles(routed)
        else:
            parsed = sqlglot_latencies(test_q)
        out["sqlglot_ms"] = _percentiles(parsed)
        if best_dips and out["sqlglot_ms"]["p50"]:
            out["router_vs_sqlglot"] = round(out["router_ms_dips"]["p50"] / out["sqlglot_ms"]["p50"], 2)
    if e2e is not None:
        out["spark"] = e2e
    return out


@dataclass(frozen=True)
class MeasuredLayout:
    """What B1 keeps of one table laid out by one layout (and checkpoints, `bench.checkpoints`)."""

    seconds: dict
    rows: int
    plan: dict  # blocks, cuts, sample scale, sort columns, the optimizer's choices
    records: list  # BlockRecord per block, as the nightly's update_catalog records them
    predicates: list  # the layout's cuts
    nodes: list  # its trees' records
    index_bytes: int


def _measure_layout(table, tables: dict, optimizer: str, settings: dict, table_queries, featurized: Featurized,
                    dips: bool, folder: Path | None, folders: Path, key_bytes: dict) -> MeasuredLayout:
    """`table` laid out in memory by `optimizer`, its blocks summarized (and written as
    block folders into `folder`, when given)."""
    name = table.name
    laid = lay_out_in_memory(table, tables[name], tables, optimizer, settings, table_queries, featurized)
    blocked = laid.blocked.withColumnRenamed(BLOCK_INDEX_COLUMN, BLOCK_ID_COLUMN)
    # without diPs every row routes on min/max alone: range sets (a sorted set of
    # each column's values per block) would be computed for nothing
    summaries = summarize_blocks(blocked, table, 0, max(RANGE_SET_SWEEP) if dips else 1)
    bits = block_bits(blocked, len(laid.cuts), laid.plan.routing_trees(), BLOCK_ID_COLUMN)
    lineage = {block: b.leaves for block, b in bits.items()}
    for cut in laid.cuts:
        if cut.kind == "join_induced" and cut.sql not in key_bytes:
            key_bytes[cut.sql] = len(literal_keys(tables, cut.predicate).serialize())
    nodes = tree_records(laid.plan)
    size = index_bytes(laid.plan, len(nodes), lineage,
                       sum(key_bytes[c.sql] for c in laid.cuts if c.kind == "join_induced"))
    seconds = dict(laid.seconds)
    if folder is not None:
        started = time.monotonic()
        shutil.rmtree(folder, ignore_errors=True)  # no block of an earlier run
        write_block_folders(blocked, table.column_names, folder, folders / "_staging")
        seconds["write"] = round(time.monotonic() - started, 3)
    laid.release()
    plan = {"blocks": laid.plan.n_blocks, "cuts": laid.plan.n_cuts, "sample_scale": laid.plan.sample_scale,
            **({"sort_columns": list(laid.plan.assignment.sort_columns)}
               if hasattr(laid.plan.assignment, "sort_columns") else {}),
            **({"choices": dict(laid.plan.choices)} if laid.plan.choices else {})}
    records = []
    for s in summaries:  # as the nightly's update_catalog records them
        b = bits.get(s.block_id, BlockBits(0, 0))
        records.append(BlockRecord(s.block_id, s.row_count, 0, "", s.stats, b.union_bits, b.all_bits,
                                   leaves=b.leaves, cells=b.cells))
    return MeasuredLayout(seconds, laid.plan.rows, plan, records, [c.predicate for c in laid.cuts], nodes, size)


def tree_paths_only(records: list[BlockRecord], n_cuts: int) -> list[BlockRecord]:
    """The block records with their cut bits and statistics withheld: routed on them,
    a tree layout skips by its tree paths (and Pando's cells) alone, as the qd-tree,
    MTO and Pando papers' routers do; ours also reads every cut's bits and zone maps."""
    unknown = (1 << n_cuts) - 1  # "some row may satisfy every cut", and no cut holds for all rows
    return [replace(r, stats={}, union_bits=unknown, all_bits=0) for r in records]


def coarse_records(records: list[BlockRecord], n_r: int) -> list[BlockRecord]:
    """The block records with at most n_r ranges per column (`coarsen_column_stats`)."""
    return [replace(r, stats={c: coarsen_column_stats(s, n_r) for c, s in r.stats.items()}) for r in records]


def range_set_sweep(queries, analyses, finest: dict[str, tuple], schema) -> dict:
    """Per number of ranges in RANGE_SET_SWEEP: the blocks the test queries read with
    diPs and the bytes of the block statistics (as the catalog stores them, JSON).
    `finest`: per table, (records, cut predicates, tree nodes) summarized with the most."""
    out = {}
    for n_r in RANGE_SET_SWEEP:
        indexes, stats_bytes = {}, 0
        for table, (records, predicates, nodes) in finest.items():
            coarse = coarse_records(records, n_r)
            stats_bytes += sum(len(json.dumps(r.stats, separators=(",", ":"))) for r in coarse)
            indexes[table] = (LayoutIndex.from_blocks(table, coarse, predicates, trees=nodes),)
        counts = read_counts(queries, analyses, RoutingIndex(indexes, {}), schema, dips=True)
        out[str(n_r)] = {"blocks_read": counts["blocks_read"], "stats_bytes": stats_bytes}
    return out


def min_max_only(stats: dict) -> dict:
    """Block statistics without range sets: the zone maps every layout had before diPs."""
    return {c: {k: v for k, v in s.items() if k != "ranges"} for c, s in stats.items()}


def read_counts(queries, analyses, index: RoutingIndex, schema, dips: bool) -> dict:
    """Blocks and rows the test queries read on one layout, per table, per template
    (`_per_template`) and per query (`_per_query`), and how many skip at least a third
    of their rows."""
    blocks = rows = skipping_third = 0
    by_table: dict[str, dict] = {}
    by_template: dict[int, int] = {}
    by_query: list[int] = []
    for q, a in zip(queries, analyses):
        route = route_analysis(a, index, schema, dips=dips)
        read = total = query_blocks = 0
        for r in route.refs:
            slot = by_table.setdefault(r.table, {"blocks_read": 0, "rows_read": 0})
            slot["blocks_read"] += len(r.blocks)
            slot["rows_read"] += r.rows
            blocks += len(r.blocks)
            rows += r.rows
            read, total = read + r.rows, total + r.rows_total
            by_template[q.template] = by_template.get(q.template, 0) + len(r.blocks)
            query_blocks += len(r.blocks)
        by_query.append(query_blocks)
        skipping_third += total > 0 and (total - read) * 3 >= total
    return {"blocks_read": blocks, "rows_read": rows, "queries_skipping_third": skipping_third,
            "tables": by_table, "_per_template": by_template, "_per_query": by_query}


def semijoin_lower_bound(spark, analyses, block_rows: int) -> dict:
    """The limit of diPs: per test reference, the rows that survive its own
    predicate and the full semi-join reduction of the query's joins (every
    edge `a -> b` of the analysis, on all its columns where one condition joins
    two or more, and out of a union from all its branches, each source reduced in turn, along a
    spanning tree rooted at the reference: exact for a tree-shaped join graph,
    a little above the limit for one with cycles), as ceil(rows / block_rows)."""
    blocks = rows = 0
    cache: dict[str, int] = {}
    for a in analyses:
        for ref in a.refs:
            sql = _reduced_sql(a, ref.key, frozenset())
            if sql not in cache:
                cache[sql] = spark.sql(f"SELECT count(*) FROM ({sql}) AS r").collect()[0][0]
            rows += cache[sql]
            blocks += math.ceil(cache[sql] / block_rows)
    return {"semijoin_lower_bound_blocks": blocks, "semijoin_rows_needed": rows}


def _reduced_sql(analysis, key: str, visited: frozenset) -> str:
    """SQL for the rows of reference `key` that pass its predicate and match, on
    every incoming edge from a reference not yet visited, that reference's reduced rows."""
    ref = analysis.ref(key)
    conditions = []
    predicate = analysis.predicate(key, ())
    if predicate != TRUE:
        conditions.append(to_sql(predicate))
    visited = visited | {key}
    # a source's joint edge first: it says what its single edges say, and more
    edges = [*analysis.joint_edges, *sorted(analysis.edges, key=lambda e: (e.from_ref, e.from_column, e.to_column))]
    for edge in edges:
        if edge.to_ref == key and edge.from_ref not in visited:
            source = _reduced_sql(analysis, edge.from_ref, visited)
            to_columns = ", ".join(map(identifier, edge.to_columns))
            if len(edge.to_columns) > 1:
                to_columns = f"({to_columns})"
            conditions.append(f"{to_columns} IN (SELECT {', '.join(map(identifier, edge.from_columns))} "
                              f"FROM ({source}) AS s)")
            visited = visited | {edge.from_ref}
    # out of a union: the values of every branch's reduced rows
    for edge in analysis.union_edges:
        senders = [ref for ref, _ in edge.sources]
        if edge.to_ref == key and not visited & set(senders):
            branches = " UNION ALL ".join(
                f"SELECT {identifier(column)} AS k FROM ({_reduced_sql(analysis, ref, visited)}) AS s{i}"
                for i, (ref, column) in enumerate(edge.sources))
            conditions.append(f"{identifier(edge.to_column)} IN (SELECT k FROM ({branches}) AS u)")
            visited = visited | set(senders)
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    return f"SELECT * FROM {identifier(ref.table)}{where}"


def router_latencies(queries, index: RoutingIndex, schema, dips: bool) -> list[float]:
    """Per query, the median milliseconds of routing it (parsing included) over ROUTER_ROUNDS."""
    (routed,) = median_ms(queries, _router(index, schema, dips))
    return routed


def sqlglot_latencies(queries) -> list[float]:
    """The baseline of router latency: a plain sqlglot parse and generate of each query."""
    (parsed,) = median_ms(queries, _parse_and_generate)
    return parsed


def router_and_sqlglot_latencies(queries, index: RoutingIndex, schema, dips: bool) -> tuple[list[float], list[float]]:
    """`router_latencies` and `sqlglot_latencies` with their rounds taken in turn, so
    that a slower period of this shared machine falls on both alike (their ratio is
    issue 34's target)."""
    routed, parsed = median_ms(queries, _router(index, schema, dips), _parse_and_generate)
    return routed, parsed


def _router(index: RoutingIndex, schema, dips: bool):
    return lambda sql: route_query(sql, index, schema, dips=dips)


def _parse_and_generate(sql: str) -> None:
    sqlglot.parse_one(sql, dialect="spark").sql(dialect="spark")


def median_ms(queries, *calls) -> list[list[float]]:
    """Per call, per query: the median milliseconds of `call(sql)` over ROUTER_ROUNDS
    rounds; within a round the calls run one after the other."""
    out: list[list[float]] = [[] for _ in calls]
    for q in queries:
        rounds = np.zeros((ROUTER_ROUNDS, len(calls)))
        for i in range(ROUTER_ROUNDS):
            for j, call in enumerate(calls):
                started = time.perf_counter()
                call(q.sql)
                rounds[i, j] = (time.perf_counter() - started) * 1000
        for j, medians in enumerate(np.median(rounds, axis=0)):
            out[j].append(float(medians))
    return out


def _percentiles(latencies: list[float]) -> dict:
    return {"p50": round(float(np.percentile(latencies, 50)), 3) if latencies else 0.0,
            "p99": round(float(np.percentile(latencies, 99)), 3) if latencies else 0.0,
            "rounds": ROUTER_ROUNDS}


def spark_end_to_end(spark, schema, statements: list[str], raw_paths: dict, folders: Path,
                     indexes: dict, tables=None) -> dict:
    """Every statement on the raw tables (the reference answer, and the JVM's
    warm-up), then rewritten with its route on each layout's block folders,
    and on `NEEDED`: the rows each reference needs, as files of their own.

    `NEEDED` is about the time no layout can beat with this engine: every
    table reference of a query reads a Parquet copy of exactly the rows its
    predicate admits (a perfect layout for that one query; its predicate is
    what the router can prove, join-induced predicates included). The copies
    are written before the timed runs, once per distinct (table, predicate),
    in the raw files' row order: TPC-H's generator writes lineitem and orders
    in order key order, which also makes joins and aggregations on the order
    key faster than on any layout that clusters rows by date.

    The layouts take turns per query (the first one rotates), so a slower or
    faster period of this shared machine does not fall on one layout only.
    Times are wall seconds of `collect()`; the rewriting (routing) itself is
    not timed here (B1 reports router latency).
    """
    kinds = [*indexes, NEEDED]
    tables = tuple(schema.tables if tables is None else tables)  # the ones laid out as block folders
    raw = {t: spark.read.parquet(str(raw_paths[t])) for t in schema.tables}
    # `mto+dips` reads mto's blocks, routed with diPs
    laid = {k: {t: spark.read.parquet(str(folders / k.removesuffix(DIPS) / t)) for t in tables}
            for k in indexes}
    locations = {k: {t: str(folders / k.removesuffix(DIPS) / t) for t in tables} for k in indexes}

    def use(frames):
        for t, frame in frames.items():
            frame.createOrReplaceTempView(t)

    def timed(sql):
        df = spark.sql(sql)
        t0 = time.monotonic()
        rows = df.collect()
        return rows, time.monotonic() - t0, df

    started = time.monotonic()
    use(raw)
    reference, raw_seconds = [], 0.0
    for sql in statements:
        rows, seconds, _ = timed(sql)
        reference.append(rows)
        raw_seconds += seconds
    rewritten = {k: [rewrite_sql(route_query(sql, indexes[k], schema, dips=k.endswith(DIPS)), indexes[k])
                     for sql in statements]
                 for k in indexes}
    needed_started = time.monotonic()
    rewritten[NEEDED] = needed_rows_queries(spark, schema, statements, raw_paths, folders / NEEDED)
    needed_seconds = time.monotonic() - needed_started
    per_query = []
    totals = {k: 0.0 for k in kinds}
    files = {k: 0 for k in indexes}
    mismatches = []
    for i, sql in enumerate(statements):
        entry = {"query": i}
        for k in kinds[i % len(kinds):] + kinds[:i % len(kinds)]:
            if k in laid:
                use(laid[k])
            rows, seconds, df = timed(rewritten[k][i])
            equal, why = same_rows(reference[i], rows)
            if not equal:
                mismatches.append({"query": i, "layout": k, "difference": why})
            totals[k] += seconds
            entry[k] = {"seconds": round(seconds, 3), "equal": equal}
            if k in locations:
                metrics = scan_metrics(df, locations[k])
                files[k] += metrics.files
                entry[k]["block_folders"] = metrics.partitions
        per_query.append(entry)
    use(raw)
    base = totals.get("sortkey") or 1.0
    log.info("Spark end to end: %s", totals)
    return {
        "queries": len(statements), "raw_seconds": round(raw_seconds, 2),
        "seconds": {k: round(v, 2) for k, v in totals.items()},
        "vs_sortkey": {k: round(v / base, 3) for k, v in totals.items()},
        "files_read": files,
        "needed_copies_seconds": round(needed_seconds, 1),
        "identical_answers": not mismatches, "mismatches": mismatches,
        "wall_seconds": round(time.monotonic() - started, 1),
        "per_query": per_query,
    }


def needed_rows_queries(spark, schema, statements: list[str], raw_paths: dict, folder: Path) -> list[str]:
    """Each statement with every table reference replaced by a view of a Parquet
    copy of the rows its predicate admits (the raw file where that is all rows).
    The raw tables must be the registered views: join-induced predicates read them."""
    shutil.rmtree(folder, ignore_errors=True)
    key_hops = schema.key_hops()
    views: dict[tuple[str, str], str] = {}
    out = []
    for sql in statements:
        analysis = analyze(sql, schema)
        view_of_ref = {}
        for ref in analysis.refs:
            predicate = analysis.predicate(ref.key, key_hops)
            key = (ref.table, to_sql(predicate))
            if key not in views:
                name = f"needed_copy_{len(views)}"  # no leading "_": Spark takes such folders for hidden files
                if predicate == TRUE:
                    path = str(raw_paths[ref.table])
                else:
                    path = str(folder / name)
                    spark.table(ref.table).where(key[1]).write.parquet(path)
                spark.read.parquet(path).createOrReplaceTempView(name)
                views[key] = name
            view_of_ref[ref.ref_id] = views[key]
        parsed = parse_tagged(sql)
        for table in parsed.tables:
            view = view_of_ref.get(table.meta["ref_id"])
            if view is not None:
                table.replace(exp.to_table(view).as_(table.alias_or_name))
        out.append(parsed.tree.sql(dialect="spark"))
    return out


def _chart(path: Path, per_template: dict[str, dict[int, int]], title: str) -> None:
    # matplotlib only when the chart is drawn: bench.shift and the tests count blocks without it
    import matplotlib

    matplotlib.use("Agg")
    # pyplot after matplotlib.use('Agg'), so the backend is chosen first
    import matplotlib.pyplot as plt

    templates = sorted({t for v in per_template.values() for t in v})
    fig, ax = plt.subplots(figsize=(max(11, 0.4 * len(templates)), 4))  # TPC-DS has 36 templates
    width = 0.8 / max(1, len(per_template))
    for i, (name, values) in enumerate(per_template.items()):
        ax.bar([x + i * width for x in range(len(templates))], [max(values.get(t, 0), 0.5) for t in templates],
               width, label=name)
    ax.set_yscale("log")
    ax.set_xticks([x + width * (len(per_template) - 1) / 2 for x in range(len(templates))],
                  [f"q{t}" for t in templates], rotation=90 if len(templates) > 25 else 0)
    ax.set_ylabel("blocks read (test queries, log)")
    ax.set_title(f"B1 on {title}: blocks read per template (lower is better)")
    ax.legend(ncol=5, fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_result(r: dict) -> str:
    lines = [f"B1 on {r['dataset']}, blocks of {r['block_rows']} rows, "
             f"{r['train_queries']} training / {r['test_queries']} test queries",
             f"{'layout':9s} {'blocks read':>12s} {'vs sortkey':>10s} {'rows read':>12s} {'vs sortkey':>10s} "
             f"{'rows/block':>10s} {'index KiB':>9s}  seconds ({', '.join(STAGES)})"]
    width = max(9, *(len(name) for name in r["layouts"]))
    for name, v in r["layouts"].items():
        lines.append(f"{name:{width}s} {v['blocks_read']:12d} {v['blocks_vs_sortkey']:10.3f} {v['rows_read']:12d} "
                     f"{v['rows_vs_sortkey']:10.3f} {v['mean_block_rows']:10d} {v['index_bytes'] / 1024:9.1f}  "
                     + " ".join(f"{v['stage_seconds'][stage]:.1f}" for stage in STAGES)
                     + f"  (skip >= 1/3: {v['queries_skipping_third']} queries)")
    lines.append(f"lower bound: {r['lower_bound_blocks']} blocks; router p50 {r['router_ms']['p50']} ms, "
                 f"p99 {r['router_ms']['p99']} ms; chart {r['chart']}")
    if "semijoin_lower_bound_blocks" in r:
        lines.append(f"semi-join lower bound (the limit of diPs): {r['semijoin_lower_bound_blocks']} blocks")
    paths = {name: v["tree_paths_only"]["blocks_read"] for name, v in r["layouts"].items() if "tree_paths_only" in v}
    if paths:
        lines.append("blocks read on tree paths and cells alone (the papers' routers): "
                     + ", ".join(f"{name} {n}" for name, n in paths.items()))
    cuts = {name: v["inputcut"] for name, v in r["layouts"].items() if "inputcut" in v}
    if cuts:
        lines.append("INPUTCUT (blocks without diPs / with, per test query; the diPs paper's Figs. 12-14), "
                     f"chart {r['inputcut_chart']}:")
        lines += [f"  {name:{width}s} >= 1.5: {c['share_at_least_1_5']:.1%} of queries, >= 2: "
                  f"{c['share_at_least_2']:.1%}, median {c['median']}" for name, c in cuts.items()]
    if r.get("range_sets"):
        lines.append("range sets (ranges per block and column: blocks read with diPs / KiB of block statistics):")
        lines += [f"  {name:{width}s} " + "  ".join(f"{n}: {v['blocks_read']}/{v['stats_bytes'] / 1024:.0f}"
                                                   for n, v in sweep.items())
                  for name, sweep in r["range_sets"].items()]
    if "router_ms_dips" in r:
        lines.append(f"router with diPs ({r['best_dips']}): p50 {r['router_ms_dips']['p50']} ms, "
                     f"p99 {r['router_ms_dips']['p99']} ms; sqlglot parse+generate p50 {r['sqlglot_ms']['p50']} ms "
                     f"({r.get('router_vs_sqlglot')}x, measured in turn)")
    if "spark" in r:
        e = r["spark"]
        lines.append(f"Spark, {e['queries']} test queries: raw tables {e['raw_seconds']} s, "
                     + ", ".join(f"{k} {v} s" for k, v in e["seconds"].items())
                     + f"; vs sortkey {e['vs_sortkey']}; identical answers: {e['identical_answers']}")
    return "\n".join([*lines, "", *per_template_table(r), *inputcut_table(r)])


def per_template_table(r: dict) -> list[str]:
    """Blocks the test queries of each template read, one row per template, one column per layout."""
    names = list(r["layouts"])
    widths = [max(7, len(n)) for n in names]
    lines = ["blocks read per template: " + "  ".join(f"{n:>{w}s}" for n, w in zip(names, widths))
             + "  lower bound"]
    for template, bound in r["lower_bound_per_template"].items():
        cells = [f"{r['layouts'][n]['blocks_per_template'].get(template, 0):>{w}d}" for n, w in zip(names, widths)]
        lines.append(f"{'q' + template:>25s}  " + "  ".join(cells) + f"  {bound:>11d}")
    return lines


def inputcut_table(r: dict) -> list[str]:
    """INPUTCUT per template (its test queries' blocks summed, without diPs over with), one
    column per layout routed with diPs; nothing without --dips."""
    names = [n for n, v in r["layouts"].items() if "inputcut" in v]
    if not names:
        return []
    widths = [max(7, len(n)) for n in names]
    lines = ["", "INPUTCUT per template:    " + "  ".join(f"{n:>{w}s}" for n, w in zip(names, widths))]
    for template in r["lower_bound_per_template"]:
        cells = [f"{str(r['layouts'][n]['inputcut']['per_template'].get(template, 1.0)):>{w}s}"
                 for n, w in zip(names, widths)]
        lines.append(f"{'q' + template:>25s}  " + "  ".join(cells))
    return lines


def main_json(**kwargs) -> str:
    return json.dumps(run(**kwargs), indent=2)
