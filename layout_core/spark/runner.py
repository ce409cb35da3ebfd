"""Run a workload on Spark as written and as rewritten by the router; compare; measure scans.

Scan numbers come from Spark itself: after `collect()`, the executed plan's
file scan nodes report `numFiles`, `numPartitions` (block folders listed
after pruning) and `filesSize`.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

from layout_core.base.schema import Schema
from layout_core.skipping.rewrite import rewrite_sql
from layout_core.skipping.router import RoutingIndex, route_query
from layout_core.spark.compare import same_rows


@dataclass(frozen=True)
class ScanMetrics:
    files: int = 0
    partitions: int = 0  # block folders (Hive partitions) read
    bytes: int = 0
    rows: int = 0
    by_table: dict = field(default_factory=dict)  # table -> {"files", "partitions", "bytes", "rows"}


@dataclass(frozen=True)
class QueryRun:
    index: int
    sql: str
    rewritten: str
    equal: bool | None  # None: not compared
    difference: str
    rows_returned: int
    seconds_original: float | None
    seconds_rewritten: float
    scan_original: ScanMetrics | None
    scan_rewritten: ScanMetrics
    routed_blocks: dict  # table -> blocks the router chose (all references)
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return asdict(self)


def _children(plan) -> list:
    seq = plan.children()
    return [seq.apply(i) for i in range(seq.size())]


def _leaf_plans(plan):
    """Every node of an executed plan, looking inside adaptive plans, query stages and subqueries."""
    name = plan.getClass().getSimpleName()
    if name == "AdaptiveSparkPlanExec":
        yield from _leaf_plans(plan.executedPlan())
        return
    if name.endswith("QueryStageExec"):
        yield from _leaf_plans(plan.plan())
        return
    if name in ("ReusedExchangeExec", "ReusedSubqueryExec"):
        return  # the reused plan is counted where it ran
    yield plan
    for child in _children(plan):
        yield from _leaf_plans(child)
    subqueries = plan.subqueries()
    for i in range(subqueries.size()):
        yield from _leaf_plans(subqueries.apply(i))


def _metric(node, name: str) -> int:
    option = node.metrics().get(name)
    return int(option.get().value()) if option.isDefined() else 0


def scan_metrics(df, table_locations: dict[str, str]) -> ScanMetrics:
    """Files, block folders, bytes and rows read by the file scans of an executed DataFrame."""
    plan = df._jdf.queryExecution().executedPlan()
    totals = {"files": 0, "partitions": 0, "bytes": 0, "rows": 0}
    by_table: dict[str, dict] = {}
    for node in _leaf_plans(plan):
        if node.getClass().getSimpleName() != "FileSourceScanExec":
            continue
        numbers = {
            "files": _metric(node, "numFiles"),
            "partitions": _metric(node, "numPartitions"),
            "bytes": _metric(node, "filesSize"),
            "rows": _metric(node, "numOutputRows"),
        }
        roots = node.relation().location().rootPaths()
        first = str(roots.apply(0)) if roots.size() else ""
        table = next((t for t, loc in table_locations.items() if loc and loc.rstrip("/") in first), "?")
        slot = by_table.setdefault(table, {k: 0 for k in totals})
        for k, v in numbers.items():
            totals[k] += v
            slot[k] += v
    return ScanMetrics(**totals, by_table=by_table)


def _timed_collect(spark, sql: str, table_locations):
    df = spark.sql(sql)
    t0 = time.monotonic()
    rows = df.collect()
    return rows, time.monotonic() - t0, scan_metrics(df, table_locations)


def run_workload(spark, statements: Sequence[str], index: RoutingIndex, schema: Schema,
                 table_locations: dict[str, str], compare: bool = True, progress=None,
                 record=None) -> list[QueryRun]:
    """Each statement routed, rewritten and run; with compare, the original too.
    `record(route)` (a `workload.history.QueryRecorder`) adds each route to the history."""
    runs = []
    for i, sql in enumerate(statements):
        route = route_query(sql, index, schema)
        if record is not None:
            record(route)
        rewritten = rewrite_sql(route, index)
        routed: dict[str, int] = {}
        for ref in route.refs:
            if not ref.read_all:
                routed[ref.table] = routed.get(ref.table, 0) + len(ref.blocks)
        got, seconds_rw, scan_rw = _timed_collect(spark, rewritten, table_locations)
        equal, why, seconds_orig, scan_orig = None, "", None, None
        if compare:
            expected, seconds_orig, scan_orig = _timed_collect(spark, sql, table_locations)
            equal, why = same_rows(expected, got)
        runs.append(QueryRun(i, sql, rewritten, equal, why, len(got), seconds_orig, seconds_rw,
                             scan_orig, scan_rw, routed, route.warnings))
        if progress is not None:
            progress(runs[-1])
    return runs


def register_raw_tables(spark, raw_dir: str | Path, tables: Sequence[str]) -> list[str]:
    """Views over `<raw_dir>/<table>.parquet` (or a folder of that name) for tables without a layout."""
    done = []
    for table in tables:
        for candidate in (Path(raw_dir) / f"{table}.parquet", Path(raw_dir) / table):
            if candidate.exists():
                spark.read.parquet(str(candidate)).createOrReplaceTempView(table)
                done.append(table)
                break
    return done
