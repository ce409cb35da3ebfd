"""Benchmark: Sun et al. §7.3 on this machine (`layout bench sun`).

Setup as in the paper, scaled to the data:

- lineitem denormalized with orders, customer, nation, region (of the
  customer), part and supplier; month partitions on o_orderdate;
- training and test queries from q3 q5 q6 q8 q10 q12 q14 q19, half uniform and
  half Zipf-skewed; a query becomes the conjunction of its filters on the
  joined tables (column names are unique in TPC-H), as the paper's
  single-table rewrite of the templates;
- layouts: `range` (rows sorted by o_orderdate, equal blocks), `range2`
  (per month, sorted by r_name, c_mktsegment, l_quantity, equal blocks) and
  `fineblock` (numFeat features, date filters excluded since month
  partitions serve them; bottom-up blocks per month). Range blocks have the
  fineblock layout's mean block size, so the comparison is at equal block
  count. Blocks of every layout have zone maps; fineblock also union vectors.
- minSize: the paper's month partitions (7.7M rows) have about 100 blocks at
  minSize 50,000. Our partitions are 100-1000x smaller, so `--block-rows`
  defaults to about 10 blocks per month partition, keeping blocks at several
  hundred rows or more (one Parquet folder each); `--sweep` varies it.

Rows scanned come from the router's decisions; "actual" is the rows that
satisfy each test query. Spark time is the test queries run on each layout
written as Parquet block folders (block filters from the router).
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import Window
from pyspark.sql import functions as F

from layout_core.algorithms.features import select_features
from layout_core.base.names import BLOCK_ID_COLUMN
from layout_core.optimizers import CandidateCut, VectorSample, plan_layout
from layout_core.predicates import Predicate, TRUE, conj, conjuncts, to_sql
from layout_core.base.schema import Schema, TableSchema, load_schema
from layout_core.skipping.router import LayoutIndex, route_layout
from layout_core.spark.assign import tie_order, with_plan_blocks
from layout_core.spark.blocks import summarize_blocks, with_pieces, write_block_folders
from layout_core.spark.featurize import with_vectors
from layout_core.spark.session import local_session
from layout_core.sql.analysis import QueryError, analyze
from layout_core.workload.tpch import generate
from layout_core.workload.tpch_data import generate_tpch

log = logging.getLogger("layout.bench.sun")

TEMPLATES = (3, 5, 6, 8, 10, 12, 14, 19)
WIDE_TABLES = ("lineitem", "orders", "customer", "nation", "region", "part", "supplier")
DATE_COLUMNS = ("o_orderdate", "l_shipdate", "l_commitdate", "l_receiptdate")
# a long run: the full JIT pays off
LONG_RUN_JVM = {"spark.driver.extraJavaOptions": "-XX:ReservedCodeCacheSize=512m"}
BLOCKS_PER_PARTITION = 10
PIECE_KEYS = "month string, _vec string"  # fineblock runs per month partition  # see the module docstring


def wide_schema(schema: Schema) -> TableSchema:
    """The denormalized table's columns (TPC-H column names are unique across tables)."""
    columns = []
    for t in WIDE_TABLES:
        columns += [c for c in schema.table(t).columns if c[0] not in {n for n, _ in columns}]
    return TableSchema("wide", tuple(columns))


def wide_query(sql: str, schema: Schema) -> Predicate | None:
    """A TPC-H query as one filter on the denormalized table."""
    try:
        analysis = analyze(sql, schema)
    except QueryError:
        return None
    return conj(analysis.filter(r.key) for r in analysis.refs if r.table in WIDE_TABLES)


def workload(n_train: int, n_test: int, seed: int, sf: float) -> tuple[list, list]:
    """Half uniform, half Zipf-skewed (s=3) instances of the templates, split train/test."""
    per = lambda n: max(1, math.ceil(n / len(TEMPLATES) / 2))  # noqa: E731
    train = (generate(per(n_train), seed, TEMPLATES, scale_factor=sf)
             + generate(per(n_train), seed + 1, TEMPLATES, skew=3, scale_factor=sf))
    test = (generate(per(n_test), seed + 100, TEMPLATES, scale_factor=sf)
            + generate(per(n_test), seed + 101, TEMPLATES, skew=3, scale_factor=sf))
    return train[:n_train], test[:n_test]


@dataclass
class Layout:
    name: str
    blocks: LayoutIndex
    spark_seconds: float = 0.0


def run(sf: float = 0.1, n_train: int = 800, n_test: int = 80, num_feat: int = 15,
        block_rows: int | None = None, sweep: bool = False, spark_time: bool = True,
        work: Path = Path(".layout/bench/sun"), seed: int = 1) -> dict:
    work = work.resolve()
    steps: dict[str, float] = {}
    schema = load_schema("tpch")
    wide_table = wide_schema(schema)
    tpch = generate_tpch(sf, work / f"tpch_sf{sf}")
    spark = local_session("layout-bench-sun", extra=LONG_RUN_JVM)
    try:
        t0 = time.monotonic()
        raw = {t: spark.read.parquet(str(tpch[t])) for t in WIDE_TABLES}
        wide = (raw["lineitem"]
                .join(raw["orders"], F.col("l_orderkey") == F.col("o_orderkey"))
                .join(raw["customer"], F.col("o_custkey") == F.col("c_custkey"))
                .join(raw["nation"], F.col("c_nationkey") == F.col("n_nationkey"))
                .join(raw["region"], F.col("n_regionkey") == F.col("r_regionkey"))
                .join(raw["part"], F.col("l_partkey") == F.col("p_partkey"))
                .join(raw["supplier"], F.col("l_suppkey") == F.col("s_suppkey"))
                .select(*wide_table.column_names)
                .withColumn("month", F.date_format("o_orderdate", "yyyy-MM")))
        wide_path = work / f"wide_sf{sf}"
        if not (wide_path / "_SUCCESS").exists():
            wide.write.mode("overwrite").parquet(str(wide_path))
        wide = spark.read.parquet(str(wide_path)).cache()
        total_rows = wide.count()
        months = wide.select("month").distinct().count()
        steps["ingest_denormalize"] = time.monotonic() - t0

        train, test = workload(n_train, n_test, seed, sf)
        train_preds = [p for p in (wide_query(q.sql, schema) for q in train) if p is not None]
        test_preds = [p for p in (wide_query(q.sql, schema) for q in test) if p is not None]
        block_rows = block_rows or max(1, total_rows // months // BLOCKS_PER_PARTITION)

        t0 = time.monotonic()
        features = select_features([list(conjuncts(p)) for p in train_preds], num_feat, min_support=max(2, len(train_preds) // 100),
                                   exclude=lambda p: bool(p.columns() & set(DATE_COLUMNS)))
        cuts = [CandidateCut(f.predicate, "simple", f.support) for f in features]
        flagged = with_vectors(wide, cuts, {}).cache()
        pairs = flagged.groupBy("month", "_vec").count().collect()
        steps["featurize_reduce"] = time.monotonic() - t0

        def fineblock_map(size: int):
            """Per month partition, the fineblock plan (`plan_layout`, as the nightly
            DAG makes it); returns (pieces with their month, n_blocks, seconds)."""
            started = time.monotonic()
            by_month: dict[str, list] = {}
            for r in pairs:
                by_month.setdefault(r["month"], []).append((r["_vec"], int(r["count"])))
            pieces, offset = [], 0
            for month in sorted(by_month):
                items = sorted(by_month[month])
                sample = VectorSample(tuple(v for v, _ in items), [c for _, c in items], sum(c for _, c in items))
                plan = plan_layout("fineblock", wide_table, sample, cuts, settings={"block_rows": size})
                pieces += [(month, key, block + offset, s, e) for key, block, s, e in plan.assignment.pieces]
                offset += plan.n_blocks
            return pieces, offset, time.monotonic() - started

        pieces, n_fine, steps["optimize"] = fineblock_map(block_rows)

        t0 = time.monotonic()
        data_cols = list(wide_table.column_names)
        order = tie_order(data_cols)
        fine = (with_pieces(flagged, pieces, PIECE_KEYS, order)
                .withColumnRenamed("_block", BLOCK_ID_COLUMN).cache())
        fine_summaries = summarize_blocks(fine, wide_table, len(cuts))
        steps["assign_and_stats"] = time.monotonic() - t0

        mean_block = max(1, total_rows // max(1, n_fine))
        # range: the sortkey optimizer's plan on o_orderdate, blocks of fineblock's mean size
        everything = VectorSample(*_whole_table(pairs))
        range_plan = plan_layout("sortkey", wide_table, everything, cuts,
                                 settings={"block_rows": mean_block, "sort_column": "o_orderdate"})
        range1 = with_plan_blocks(flagged, range_plan).withColumnRenamed("_block", BLOCK_ID_COLUMN)
        per_month = F.row_number().over(Window.partitionBy("month").orderBy(
            "r_name", "c_mktsegment", "l_quantity", *order)) - 1
        month_rank = F.dense_rank().over(Window.orderBy("month")) * 100000
        range2 = flagged.withColumn(BLOCK_ID_COLUMN, (month_rank + F.floor(per_month / mean_block)).cast("int"))
        layouts = {
            "range": LayoutIndex.from_blocks("range", summarize_blocks(range1, wide_table, 0), []),
            "range2": LayoutIndex.from_blocks("range2", summarize_blocks(range2, wide_table, 0), []),
            "fineblock": LayoutIndex.from_blocks("fineblock", fine_summaries, [c.predicate for c in cuts]),
        }

        # rows actually needed: rows satisfying each test query
        actual = 0
        for p in test_preds:
            actual += flagged.where(to_sql(p)).count() if p != TRUE else total_rows

        result_layouts = {}
        router_seconds = {}
        for name, index in layouts.items():
            t0 = time.monotonic()
            scanned = blocks_read = 0
            for p in test_preds:
                route = route_layout(p, p, index)
                scanned += route.rows
                blocks_read += len(route.blocks)
            router_seconds[name] = time.monotonic() - t0
            result_layouts[name] = {
                "rows_scanned_fraction": scanned / (total_rows * len(test_preds)),
                "blocks_read": blocks_read,
                "blocks": len(index.block_ids),
                "spark_seconds": 0.0,
            }

        if spark_time:
            frames = {"range": range1, "range2": range2, "fineblock": fine}
            for name, frame in frames.items():
                path = work / f"layout_{name}_sf{sf}"
                shutil.rmtree(path, ignore_errors=True)  # no block of an earlier run
                started = time.monotonic()
                write_block_folders(frame, data_cols, path, work / "_staging")
                if name == "fineblock":
                    steps["write"] = time.monotonic() - started
                view = spark.read.parquet(str(path))
                view.createOrReplaceTempView(f"wide_{name}")
                started = time.monotonic()
                for p in test_preds:
                    route = route_layout(p, p, layouts[name])
                    ids = ",".join(str(b) for b in route.blocks) or "NULL"
                    spark.sql(f"SELECT count(*), sum(l_extendedprice) FROM wide_{name} "
                              f"WHERE block_id IN ({ids}) AND ({to_sql(p)})").collect()
                result_layouts[name]["spark_seconds"] = round(time.monotonic() - started, 2)

        sweep_result = {}
        if sweep:
            for size in sorted({max(1, int(block_rows * f)) for f in (0.1, 0.25, 0.5, 1, 2, 4)}):
                sweep_pieces, n_blocks, _ = fineblock_map(size)
                blocked = with_pieces(flagged, sweep_pieces, PIECE_KEYS, order) \
                    .withColumnRenamed("_block", BLOCK_ID_COLUMN)
                index = LayoutIndex.from_blocks("sweep", summarize_blocks(blocked, wide_table, len(cuts)),
                                              [c.predicate for c in cuts])
                scanned = sum(route_layout(p, p, index).rows for p in test_preds)
                sweep_result[str(size)] = {"blocks": n_blocks,
                                           "rows_scanned_fraction": scanned / (total_rows * len(test_preds))}
    finally:
        spark.stop()
    pipeline = sum(steps.values())
    return {
        "scale_factor": sf,
        "rows": total_rows,
        "month_partitions": months,
        "block_rows": block_rows,
        "features": [c.sql for c in cuts],
        "train_queries": len(train_preds),
        "test_queries": len(test_preds),
        "layouts": result_layouts,
        "actual_fraction": actual / (total_rows * len(test_preds)),
        "steps_seconds": {k: round(v, 2) for k, v in steps.items()},
        "optimize_share_of_pipeline": round(steps["optimize"] / pipeline, 4) if pipeline else 0.0,
        "router_seconds": {k: round(v, 2) for k, v in router_seconds.items()},
        "block_rows_sweep": sweep_result,
    }


def _whole_table(pairs) -> tuple:
    """(keys, counts, rows) of the (vector, count) pairs summed over months."""
    counts: dict[str, int] = {}
    for r in pairs:
        counts[r["_vec"]] = counts.get(r["_vec"], 0) + int(r["count"])
    keys = tuple(sorted(counts))
    return keys, [counts[k] for k in keys], sum(counts.values())


def format_result(r: dict) -> str:
    lines = [f"Sun §7.3 on TPC-H SF {r['scale_factor']}: {r['rows']} rows, {r['month_partitions']} month "
             f"partitions, minSize {r['block_rows']}, {r['train_queries']} training / {r['test_queries']} test queries",
             f"{'layout':10s} {'blocks':>7s} {'rows scanned':>13s} {'vs range':>9s} {'spark s':>8s}"]
    base = r["layouts"]["range"]["rows_scanned_fraction"] or 1.0
    for name, v in r["layouts"].items():
        lines.append(f"{name:10s} {v['blocks']:7d} {v['rows_scanned_fraction']:13.2%} "
                     f"{v['rows_scanned_fraction'] / base:9.2f} {v['spark_seconds']:8.1f}")
    lines.append(f"{'actual':10s} {'':7s} {r['actual_fraction']:13.2%} {r['actual_fraction'] / base:9.2f}")
    lines.append("steps (s): " + ", ".join(f"{k} {v}" for k, v in r["steps_seconds"].items())
                 + f"; optimize share {r['optimize_share_of_pipeline']:.1%}")
    for size, v in r["block_rows_sweep"].items():
        lines.append(f"  minSize {size:>7s}: {v['blocks']} blocks, rows scanned {v['rows_scanned_fraction']:.2%}")
    return "\n".join(lines)


def main_json(**kwargs) -> str:
    return json.dumps(run(**kwargs), indent=2)
