"""Benchmark B1 (`layout bench tpch`): every TPC-H table laid out by five layouts.

TPC-H at `--sf`, all 8 tables, 22 templates x `--per-template` instances
(seed 1): odd instances train the optimizers, even instances are the test.
Layouts, all with blocks of `--block-rows` rows and per-block zone maps:

- sortkey: lineitem by l_shipdate, orders by o_orderdate, others by primary key;
- zorder / hilbert: a space-filling curve over the table's most frequently
  filtered columns in the training queries (what Delta/Iceberg/Hudi users run);
- qdtree: greedy qd-tree over the training queries' simple cuts (MTO §2.1.3);
- mto: the same with join-induced cuts (MTO §4), bits exact by joins.

For each layout the router (the same one queries use) decides the blocks of
every test query's table references. Reported: blocks and rows read, per table
and in total; the lower bound sum(ceil(rows needed / block rows)); optimizer
seconds per table; router latency per query.
"""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path

import numpy as np

from ..optimize.fineblock import VectorCounts
from .sun import LONG_RUN_JVM
from ..optimize.qdtree import greedy_tree, tree_blocking_map
from ..predicates import Predicate, to_sql
from ..schema import load_schema
from ..skipping.router import LayoutIndex, RoutingIndex, route_analysis, route_query
from ..sql.analysis import analyze
from ..workload.tpch import generate
from ..workload.tpch_data import generate_tpch
from ..workload.tree_inputs import candidate_cut_lists, filtered_columns, query_predicate, workload_matrices

log = logging.getLogger("layout.bench.tpch")

LAYOUTS = ("sortkey", "zorder", "hilbert", "qdtree", "mto")
SORT_KEYS = {"lineitem": ["l_shipdate"], "orders": ["o_orderdate"]}
CURVE_COLUMNS = 3


def run(sf: float = 1.0, block_rows: int = 10_000, per_template: int = 8, seed: int = 1,
        work: Path = Path(".layout/bench/tpch"), layouts=LAYOUTS) -> dict:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from ..spark.blocks import BLOCK_COLUMN, summarize_blocks, with_cut_flags, with_pieces
    from ..spark.curves import curve_block_index, with_curve_key
    from ..spark.induced import with_induced_flags
    from ..spark_session import local_session

    work = work.resolve()
    schema = load_schema("tpch")
    key_hops = schema.key_hops()
    paths = generate_tpch(sf, work / f"tpch_sf{sf}")
    queries = generate(per_template, seed, scale_factor=sf)
    train_q = [q for q in queries if q.instance % 2 == 1]
    test_q = [q for q in queries if q.instance % 2 == 0]
    train = [analyze(q.sql, schema) for q in train_q]
    test = [analyze(q.sql, schema) for q in test_q]

    spark = local_session("layout-bench-tpch", extra=LONG_RUN_JVM)
    indexes: dict[str, dict[str, LayoutIndex]] = {name: {} for name in layouts}
    optimize_seconds = {name: {} for name in layouts}
    try:
        tables = {t: spark.read.parquet(str(paths[t])).cache() for t in schema.tables}
        for t, frame in tables.items():
            frame.createOrReplaceTempView(t)
        for name, table in schema.tables.items():
            df = tables[name]
            data_cols = list(table.column_names)
            order = [F.xxhash64(*data_cols)]
            simple, induced = candidate_cut_lists(train, name, key_hops)
            cuts: list[Predicate] = simple + induced
            flagged = with_cut_flags(df, [to_sql(c) for c in simple])
            flagged = with_induced_flags(flagged, induced, tables).frame
            flag_cols = [f"_cut{i}" for i in range(len(simple))] + [f"_ji{i}" for i in range(len(induced))]
            renamed = flagged.select(*data_cols, *[F.col(c).alias(f"_f{i}") for i, c in enumerate(flag_cols)])
            flags = [f"_f{i}" for i in range(len(cuts))]
            keyed = renamed.withColumn("_key", F.concat_ws("", F.lit("k"), *[F.col(c).cast("int") for c in flags]))
            keyed = keyed.cache()
            n_rows = keyed.count()
            log.info("%s: %d rows, %d simple and %d join-induced cuts", name, n_rows, len(simple), len(induced))

            def summarize(blocked, with_cuts: list[Predicate]):
                renamed_flags = blocked.select(
                    *data_cols, BLOCK_COLUMN, *[F.col(f).alias(f"_cut{i}") for i, f in enumerate(flags)])
                summaries = summarize_blocks(renamed_flags, table, len(cuts))
                # layouts that do not know the cuts get zone maps only
                return LayoutIndex.from_blocks(name, summaries, with_cuts)

            if "sortkey" in layouts:
                started = time.monotonic()
                sort_cols = SORT_KEYS.get(name, list(table.primary_key))
                rn = F.row_number().over(Window.orderBy(*sort_cols, *order)) - 1
                blocked = keyed.withColumn(BLOCK_COLUMN, F.floor(rn / block_rows).cast("int"))
                indexes["sortkey"][name] = summarize(blocked, [])
                optimize_seconds["sortkey"][name] = round(time.monotonic() - started, 2)
            curve_cols = filtered_columns(train, name, CURVE_COLUMNS) or list(table.primary_key)
            for kind in ("zorder", "hilbert"):
                if kind not in layouts:
                    continue
                started = time.monotonic()
                with_key = with_curve_key(keyed, curve_cols, kind)
                blocked = curve_block_index(with_key, block_rows).withColumn(BLOCK_COLUMN, F.col("_block"))
                indexes[kind][name] = summarize(blocked, [])
                optimize_seconds[kind][name] = round(time.monotonic() - started, 2)

            tree_layouts = [x for x in ("qdtree", "mto") if x in layouts]
            if tree_layouts:
                pairs = keyed.groupBy("_key").count().collect()
                keys = [r["_key"] for r in pairs]
                counts = np.array([r["count"] for r in pairs], dtype=np.int64)
                vectors = np.array([[ch == "1" for ch in k[1:]] for k in keys], dtype=bool).reshape(len(keys), len(cuts))
                workload = workload_matrices(train, name, key_hops, cuts)
                vc = VectorCounts(vectors, counts, np.ones(len(cuts)))
                for kind in tree_layouts:
                    started = time.monotonic()
                    allowed = np.arange(len(simple)) if kind == "qdtree" else None
                    root = greedy_tree(vc, workload, block_rows, allowed_cuts=allowed)
                    bmap = tree_blocking_map(vc, root, block_rows)
                    optimize_seconds[kind][name] = round(time.monotonic() - started, 3)
                    pieces = [(keys[int(v)], int(b), int(s), int(e)) for v, b, s, e in
                              zip(bmap.vector_index, bmap.block, bmap.row_start, bmap.row_end)]
                    blocked = with_pieces(keyed, pieces, "_key string", order) \
                        .withColumnRenamed("_block", BLOCK_COLUMN)
                    used = cuts if kind == "mto" else simple + [None] * len(induced)
                    indexes[kind][name] = summarize(blocked, used)
            keyed.unpersist()

        # rows each test reference needs, for the lower bound
        needed_blocks = 0
        needed_rows = 0
        cache: dict[tuple[str, str], int] = {}
        for a in test:
            for ref in a.refs:
                q = query_predicate(a, ref.key, key_hops)
                k = (ref.table, to_sql(q))
                if k not in cache:
                    cache[k] = spark.table(ref.table).where(to_sql(q)).count()
                needed_rows += cache[k]
                needed_blocks += math.ceil(cache[k] / block_rows)
    finally:
        spark.stop()

    result_layouts = {}
    per_template: dict[str, dict[int, int]] = {}
    for name in layouts:
        index = RoutingIndex({t: (ix,) for t, ix in indexes[name].items()}, {})
        blocks = rows = 0
        by_table: dict[str, dict] = {}
        per_template[name] = {}
        for q, a in zip(test_q, test):
            route = route_analysis(a, index, schema)
            for r in route.refs:
                slot = by_table.setdefault(r.table, {"blocks_read": 0, "rows_read": 0})
                slot["blocks_read"] += len(r.blocks)
                slot["rows_read"] += r.rows
                blocks += len(r.blocks)
                rows += r.rows
                per_template[name][q.template] = per_template[name].get(q.template, 0) + len(r.blocks)
        result_layouts[name] = {"blocks_read": blocks, "rows_read": rows,
                                "optimize_seconds": round(sum(optimize_seconds[name].values()), 2),
                                "optimize_seconds_per_table": optimize_seconds[name], "tables": by_table}
    latencies = []
    if "mto" in layouts:
        index = RoutingIndex({t: (ix,) for t, ix in indexes["mto"].items()}, {})
        for q in test_q:
            started = time.perf_counter()
            route_query(q.sql, index, schema)
            latencies.append((time.perf_counter() - started) * 1000)
    base = result_layouts.get("sortkey", {}).get("blocks_read") or 1
    for v in result_layouts.values():
        v["blocks_vs_sortkey"] = round(v["blocks_read"] / base, 3)
    chart = work / "b1_per_template.png"
    _chart(chart, per_template)
    return {
        "scale_factor": sf, "block_rows": block_rows,
        "train_queries": len(train_q), "test_queries": len(test_q),
        "layouts": result_layouts,
        "lower_bound_blocks": needed_blocks, "rows_needed": needed_rows,
        "router_ms": {"p50": round(float(np.percentile(latencies, 50)), 3) if latencies else 0.0,
                      "p99": round(float(np.percentile(latencies, 99)), 3) if latencies else 0.0},
        "chart": str(chart),
    }


def _chart(path: Path, per_template: dict[str, dict[int, int]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    templates = sorted({t for v in per_template.values() for t in v})
    fig, ax = plt.subplots(figsize=(11, 4))
    width = 0.8 / max(1, len(per_template))
    for i, (name, values) in enumerate(per_template.items()):
        ax.bar([x + i * width for x in range(len(templates))], [max(values.get(t, 0), 0.5) for t in templates],
               width, label=name)
    ax.set_yscale("log")
    ax.set_xticks([x + width * (len(per_template) - 1) / 2 for x in range(len(templates))],
                  [f"q{t}" for t in templates])
    ax.set_ylabel("blocks read (test queries, log)")
    ax.set_title("B1: blocks read per TPC-H template (lower is better)")
    ax.legend(ncol=5, fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def format_result(r: dict) -> str:
    lines = [f"B1 on TPC-H SF {r['scale_factor']}, blocks of {r['block_rows']} rows, "
             f"{r['train_queries']} training / {r['test_queries']} test queries",
             f"{'layout':9s} {'blocks read':>12s} {'vs sortkey':>10s} {'rows read':>12s} {'optimize s':>10s}"]
    for name, v in r["layouts"].items():
        lines.append(f"{name:9s} {v['blocks_read']:12d} {v['blocks_vs_sortkey']:10.3f} {v['rows_read']:12d} "
                     f"{v['optimize_seconds']:10.2f}")
    lines.append(f"lower bound: {r['lower_bound_blocks']} blocks; router p50 {r['router_ms']['p50']} ms, "
                 f"p99 {r['router_ms']['p99']} ms; chart {r['chart']}")
    return "\n".join(lines)


def main_json(**kwargs) -> str:
    return json.dumps(run(**kwargs), indent=2)
