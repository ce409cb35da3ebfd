"""The nightly layout of one table partition, as seven restartable steps.

    ingest -> featurize -> reduce -> optimize -> write_blocks -> verify -> update_catalog

Each step reads what the previous one left under the run's staging folder
(`<warehouse>/_runs/<table>/<partition>/<run id>/`) and writes its own output
there, replacing any output of an earlier attempt: re-running a step (an
Airflow retry) gives the same result and never duplicates rows. Nothing is
visible to readers until update_catalog activates the version, in one
catalog transaction; a failure before that leaves the previous layout serving.

Every step returns a small dict of numbers (logged, and kept in
`metrics.json` so reports and benchmarks can show time per step).
"""

from __future__ import annotations

import json
import logging
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from ..catalog import BlockRecord, Catalog, CatalogError
from ..predicates import Predicate, dumps, loads, to_sql
from ..schema import Schema, TableSchema

log = logging.getLogger("layout.pipeline")

MAX_FEATURES = 62  # the bit vector is one signed 64-bit column
OPTIMIZERS = ("fineblock", "sortkey")


class StepError(RuntimeError):
    """A step cannot run or its result is wrong; nothing is activated."""


@dataclass(frozen=True)
class RunPaths:
    warehouse: Path
    table: str
    partition: str
    run_id: str

    @property
    def location(self) -> Path:
        return self.warehouse / self.table

    @property
    def staging(self) -> Path:
        safe_run = re.sub(r"[^A-Za-z0-9_.-]+", "_", self.run_id)
        return self.warehouse / "_runs" / self.table / (self.partition or "_all") / safe_run

    def file(self, name: str) -> Path:
        return self.staging / name


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(path)  # atomic: a killed step never leaves half a file


def _read_json(path: Path, step: str):
    if not path.exists():
        raise StepError(f"{path.name} is missing: run the step before {step} first")
    return json.loads(path.read_text())


def _record(paths: RunPaths, step: str, numbers: dict) -> dict:
    metrics_path = paths.file("metrics.json")
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else {}
    metrics[step] = numbers
    _write_json(metrics_path, metrics)
    log.info("%s %s/%s: %s", step, paths.table, paths.partition or "-",
             ", ".join(f"{k}={v}" for k, v in numbers.items()))
    return numbers


# ---------------------------------------------------------------------------
# ingest


def ingest(spark, paths: RunPaths, table: TableSchema, source: str, catalog: Catalog,
           date_column: str | None = None, start: str | None = None, end: str | None = None,
           partition_column: str = "dt") -> dict:
    """Copy one batch (a Parquet path, optionally a [start, end) date range) into staging."""
    from pyspark.sql import functions as F

    t0 = time.monotonic()
    df = spark.read.parquet(source)
    missing = [c for c in table.column_names if c not in df.columns]
    if missing:
        raise StepError(f"{source} lacks columns of {table.name}: {missing}")
    if start or end:
        if not date_column:
            raise StepError("a date range needs --date-column")
        if start:
            df = df.where(F.col(date_column) >= F.lit(start).cast("date"))
        if end:
            df = df.where(F.col(date_column) < F.lit(end).cast("date"))
    df = df.select(*table.column_names)
    df.write.mode("overwrite").parquet(str(paths.file("input")))
    rows = spark.read.parquet(str(paths.file("input"))).count()
    catalog.register_table(table.name, str(paths.location), partition_column if paths.partition else None,
                           schema_json={"columns": dict(table.columns)})
    if rows == 0:
        log.warning("ingest %s/%s: the batch is empty; the layout will have no blocks",
                    table.name, paths.partition)
    return _record(paths, "ingest", {"rows": rows, "seconds": round(time.monotonic() - t0, 2)})


# ---------------------------------------------------------------------------
# featurize


def workload_features(query_log: str | None, schema: Schema, table: str, num_features: int,
                      min_support: int, exclude_columns: Sequence[str] = ()) -> tuple[list, dict]:
    """Sun's workload analysis for one table: (features, numbers)."""
    from ..optimize.features import select_features
    from ..sql.analysis import candidate_cuts
    from ..workload.analyze import analyze_file

    if num_features > MAX_FEATURES:
        raise StepError(f"at most {MAX_FEATURES} features fit the bit vector, not {num_features}")
    if not query_log:
        return [], {"queries": 0, "parsed": 0, "failed": 0}
    summary = analyze_file(query_log, schema)
    for index, error in summary.failed:
        log.warning("query log statement %d skipped: %s", index, error)
    queries = []
    key_hops = schema.key_hops()
    for analysis in summary.analyses:
        for ref in analysis.refs_of_table(table):
            simple, _ = candidate_cuts(analysis, ref.key, key_hops)
            queries.append(simple)
    excluded = set(exclude_columns)

    def exclude(p: Predicate) -> bool:
        return bool(p.columns() & excluded) or not p.columns()

    features = select_features(queries, num_features, min_support, exclude=exclude) if queries else []
    numbers = {"queries": summary.queries, "parsed": len(summary.analyses),
               "failed": len(summary.failed), "queries_on_table": len(queries)}
    return features, numbers


def featurize(spark, paths: RunPaths, schema: Schema, query_log: str | None, num_features: int,
              min_support: int, exclude_columns: Sequence[str] = ()) -> dict:
    """Pick features from the query log and add the bit vector column to every row."""
    from ..spark.blocks import VECTOR_COLUMN, with_bit_vector, with_cut_flags

    t0 = time.monotonic()
    features, numbers = workload_features(query_log, schema, paths.table, num_features,
                                          min_support, exclude_columns)
    if not features:
        log.warning("featurize %s: no features (empty or unusable query log); "
                    "every row gets the same vector", paths.table)
    predicates = [f.predicate for f in features]
    _write_json(paths.file("features.json"), [
        {"sql": to_sql(f.predicate), "predicate": dumps(f.predicate), "support": f.support, "gain": f.gain}
        for f in features
    ])
    df = spark.read.parquet(str(paths.file("input")))
    flagged = with_bit_vector(with_cut_flags(df, [to_sql(p) for p in predicates]), len(predicates))
    out = flagged.select(*df.columns, VECTOR_COLUMN)
    out.write.mode("overwrite").parquet(str(paths.file("featurized")))
    for f in features:
        log.info("feature (support %d, gain %d): %s", f.support, f.gain, to_sql(f.predicate))
    return _record(paths, "featurize", {**numbers, "features": len(features),
                                        "seconds": round(time.monotonic() - t0, 2)})


def _features(paths: RunPaths) -> list[dict]:
    return _read_json(paths.file("features.json"), "featurize")


# ---------------------------------------------------------------------------
# reduce


def reduce_vectors(spark, paths: RunPaths) -> dict:
    """(vector, count) pairs of the partition."""
    from ..spark.blocks import VECTOR_COLUMN

    t0 = time.monotonic()
    df = spark.read.parquet(str(paths.file("featurized")))
    pairs = sorted((int(r[0]), int(r[1])) for r in df.groupBy(VECTOR_COLUMN).count().collect())
    _write_json(paths.file("vectors.json"), {"pairs": pairs})
    return _record(paths, "reduce", {"rows": sum(c for _, c in pairs), "distinct_vectors": len(pairs),
                                     "seconds": round(time.monotonic() - t0, 2)})


# ---------------------------------------------------------------------------
# optimize


def optimize(paths: RunPaths, optimizer: str, block_size: int, sort_column: str | None = None) -> dict:
    """The blocking map: which rows of which vector go to which block."""
    import numpy as np

    from ..optimize.fineblock import VectorCounts, bottom_up, unpack_vectors

    t0 = time.monotonic()
    if optimizer not in OPTIMIZERS:
        raise StepError(f"unknown optimizer {optimizer!r} (choose from {', '.join(OPTIMIZERS)})")
    if block_size <= 0:
        raise StepError(f"block size must be positive, not {block_size}")
    pairs = _read_json(paths.file("vectors.json"), "optimize")["pairs"]
    features = _features(paths)
    total = sum(c for _, c in pairs)
    if optimizer == "sortkey":
        if not sort_column:
            raise StepError("the sortkey optimizer needs --sort-column")
        n_blocks = math.ceil(total / block_size) if total else 0
        blocking = {"kind": "sortkey", "column": sort_column, "rows_per_block": block_size,
                    "n_blocks": n_blocks}
    elif not pairs:
        blocking = {"kind": "fineblock", "n_blocks": 0, "pieces": []}
    else:
        m = len(features)
        vectors = unpack_vectors(np.array([v for v, _ in pairs], dtype=np.int64), m)
        counts = np.array([c for _, c in pairs], dtype=np.int64)
        weights = np.array([f["support"] for f in features], dtype=float)
        result = bottom_up(VectorCounts(vectors, counts, weights), block_size, progress=False)
        pieces = [
            [int(pairs[vi][0]), int(b), int(s), int(e)]
            for vi, b, s, e in zip(result.vector_index, result.block, result.row_start, result.row_end)
        ]
        blocking = {"kind": "fineblock", "n_blocks": int(result.n_blocks), "pieces": pieces}
    _write_json(paths.file("blocking.json"), blocking)
    return _record(paths, "optimize", {"optimizer": optimizer, "blocks": blocking["n_blocks"],
                                       "rows": total, "seconds": round(time.monotonic() - t0, 3)})


# ---------------------------------------------------------------------------
# write_blocks


def _block_index(df, blocking: dict):
    """The 0-based block index of every row, from the blocking map (deterministic)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from ..spark.blocks import VECTOR_COLUMN, with_pieces

    data_columns = [c for c in df.columns if c != VECTOR_COLUMN]
    # A fixed row order (hash, then every column) so a retry assigns the same rows to the same blocks.
    order = [F.xxhash64(*data_columns)] + [F.col(c) for c in data_columns]
    if blocking["kind"] == "sortkey":
        rn = F.row_number().over(Window.orderBy(F.col(blocking["column"]), *order)) - 1
        return df.withColumn("_block", F.floor(rn / F.lit(blocking["rows_per_block"])).cast("int"))
    return with_pieces(df, [tuple(p) for p in blocking["pieces"]], f"{VECTOR_COLUMN} long", order)


def write_blocks(spark, paths: RunPaths, table: TableSchema, catalog: Catalog, optimizer: str,
                 params: dict, partition_column: str = "dt") -> dict:
    """Reserve block ids (one catalog version per run id) and write the block folders."""
    from pyspark.sql import functions as F

    from ..spark.blocks import BLOCK_COLUMN, write_block_folders

    t0 = time.monotonic()
    blocking = _read_json(paths.file("blocking.json"), "write_blocks")
    version, ids = catalog.begin_version(table.name, paths.partition, optimizer, params,
                                         paths.run_id, blocking["n_blocks"])
    if catalog.version(version).state == "active" and paths.file("written.json").exists():
        # A retry after this run already went live: its folders are being read; leave them.
        return _record(paths, "write_blocks", {"version": version, "already_active": True})
    df = spark.read.parquet(str(paths.file("featurized")))
    written = {}
    if blocking["n_blocks"]:
        blocked = _block_index(df, blocking).withColumn(BLOCK_COLUMN, F.col("_block") + F.lit(ids.start))
        written = write_block_folders(blocked, table.column_names, paths.location,
                                      paths.file("block_staging"),
                                      partition_column if paths.partition else None, paths.partition)
    _write_json(paths.file("written.json"), {
        "version": version,
        "blocks": {str(b): {"path": str(p), "bytes": n} for b, (p, n) in written.items()},
    })
    return _record(paths, "write_blocks", {"version": version, "blocks": len(written),
                                           "bytes": sum(n for _, n in written.values()),
                                           "seconds": round(time.monotonic() - t0, 2)})


# ---------------------------------------------------------------------------
# verify


def _fingerprint(df, columns: Sequence[str]) -> tuple[int, int]:
    """(rows, order-independent checksum): the sum of a 64-bit hash of every row."""
    from pyspark.sql import functions as F

    row_hash = F.xxhash64(*[F.col(c) for c in columns]).cast("decimal(38,0)")
    row = df.agg(F.count(F.lit(1)).alias("n"), F.coalesce(F.sum(row_hash), F.lit(0)).alias("h")).collect()[0]
    return int(row["n"]), int(row["h"])


def _written_frame(spark, table: TableSchema, written: dict):
    from ..spark.blocks import BLOCK_COLUMN

    block_paths = [b["path"] for b in written["blocks"].values()]
    if not block_paths:
        return None
    base = str(Path(block_paths[0]).parent)
    frame = spark.read.option("basePath", base).parquet(*block_paths)
    return frame.select(*table.column_names, BLOCK_COLUMN)


def verify(spark, paths: RunPaths, table: TableSchema, catalog: Catalog) -> dict:
    """Rows and checksum of the written blocks equal those of the input; else fail the version."""
    t0 = time.monotonic()
    written = _read_json(paths.file("written.json"), "verify")
    missing = [b["path"] for b in written["blocks"].values() if not Path(b["path"]).is_dir()]
    if missing:
        reason = f"verify failed: {len(missing)} written block folders are missing, e.g. {missing[0]}"
        catalog.fail(written["version"], reason)
        raise StepError(reason)
    source = spark.read.parquet(str(paths.file("input")))
    expected = _fingerprint(source, table.column_names)
    frame = _written_frame(spark, table, written)
    actual = _fingerprint(frame, table.column_names) if frame is not None else (0, 0)
    if expected != actual:
        reason = (f"verify failed: input has {expected[0]} rows (checksum {expected[1]}), "
                  f"written blocks have {actual[0]} rows (checksum {actual[1]})")
        catalog.fail(written["version"], reason)
        raise StepError(reason)
    _write_json(paths.file("verified.json"), {"version": written["version"], "rows": actual[0],
                                              "checksum": str(actual[1])})
    return _record(paths, "verify", {"rows": actual[0], "seconds": round(time.monotonic() - t0, 2)})


# ---------------------------------------------------------------------------
# update_catalog


def update_catalog(spark, paths: RunPaths, table: TableSchema, catalog: Catalog) -> dict:
    """Cuts, per-block stats and union vectors, then activate (retiring the old version)."""
    from ..spark.blocks import summarize_blocks, with_cut_flags
    from ..spark.layout import cut_records

    t0 = time.monotonic()
    verified = _read_json(paths.file("verified.json"), "update_catalog")
    written = _read_json(paths.file("written.json"), "update_catalog")
    version = written["version"]
    if verified["version"] != version:
        raise StepError("verified.json belongs to another version: run verify again")
    info = catalog.version(version)
    if info.state == "active":
        return _record(paths, "update_catalog", {"version": version, "already_active": True})
    predicates = [loads(f["predicate"]) for f in _features(paths)]
    frame = _written_frame(spark, table, written)
    summaries = []
    if frame is not None:
        summaries = summarize_blocks(with_cut_flags(frame, [to_sql(p) for p in predicates]), table,
                                     len(predicates))
    blocks = []
    for s in summaries:
        meta = written["blocks"][str(s.block_id)]
        blocks.append(BlockRecord(s.block_id, s.row_count, meta["bytes"], meta["path"],
                                  s.stats, s.union_bits, s.all_bits))
    try:
        catalog.set_cuts(version, cut_records(predicates))
        catalog.set_blocks(version, blocks)
        catalog.activate(version)
    except CatalogError as e:
        raise StepError(f"cannot activate version {version}: {e}") from None
    return _record(paths, "update_catalog", {
        "version": version, "blocks": len(blocks), "rows": sum(b.row_count for b in blocks),
        "seconds": round(time.monotonic() - t0, 2)})
