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

from ..catalog import BlockRecord, Catalog, CatalogError, CutRecord
from ..predicates import Predicate, dumps, loads, to_sql
from ..schema import Schema, TableSchema

log = logging.getLogger("layout.pipeline")

TREE_OPTIMIZERS = ("qdtree", "mto")
CURVE_OPTIMIZERS = ("zorder", "hilbert")
OPTIMIZERS = ("fineblock", "sortkey", *TREE_OPTIMIZERS, *CURVE_OPTIMIZERS)
CURVE_COLUMNS = 3  # columns a space-filling curve interleaves
MIN_SAMPLE_ROWS = 1000  # a smaller sample estimates block sizes too poorly: use all rows


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
    rows, checksum = _fingerprint(spark.read.parquet(str(paths.file("input"))), table.column_names)
    # verify compares the written blocks with this
    _write_json(paths.file("input.json"), {"rows": rows, "checksum": str(checksum)})
    catalog.register_table(table.name, str(paths.location), partition_column if paths.partition else None,
                           schema_json={"columns": dict(table.columns)})
    if rows == 0:
        log.warning("ingest %s/%s: the batch is empty; the layout will have no blocks",
                    table.name, paths.partition)
    return _record(paths, "ingest", {"rows": rows, "seconds": round(time.monotonic() - t0, 2)})


# ---------------------------------------------------------------------------
# featurize


def _read_log(query_log: str | None, schema: Schema):
    """The analyzed query log (None without one); statements that fail are logged and skipped."""
    from ..workload.analyze import analyze_file

    if not query_log:
        return None
    summary = analyze_file(query_log, schema)
    for index, error in summary.failed:
        log.warning("query log statement %d skipped: %s", index, error)
    if summary.queries and not summary.analyses:
        log.warning("query log %s: none of its %d statements could be analyzed", query_log, summary.queries)
    return summary


def _log_numbers(summary, table: str) -> dict:
    if summary is None:
        return {"queries": 0, "parsed": 0, "failed": 0, "queries_on_table": 0}
    on_table = sum(len(a.refs_of_table(table)) for a in summary.analyses)
    return {"queries": summary.queries, "parsed": len(summary.analyses), "failed": len(summary.failed),
            "queries_on_table": on_table}


def _sun_features(summary, schema: Schema, table: str, num_features: int, min_support: int,
                  exclude_columns: Sequence[str]) -> list:
    """Sun's workload analysis for one table (§3): its features."""
    from ..optimize.features import select_features
    from ..sql.analysis import candidate_cuts

    if num_features < 0:
        raise StepError(f"the number of features must not be negative, not {num_features}")
    if summary is None:
        return []
    key_hops = schema.key_hops()
    queries = [candidate_cuts(a, ref.key, key_hops)[0]
               for a in summary.analyses for ref in a.refs_of_table(table)]
    excluded = set(exclude_columns)

    def exclude(p: Predicate) -> bool:
        return bool(p.columns() & excluded) or not p.columns()

    return select_features(queries, num_features, min_support, exclude=exclude) if queries else []


def tree_cuts(analyses, schema: Schema, table: str, optimizer: str,
              exclude_columns: Sequence[str] = ()) -> tuple[list[Predicate], list[Predicate]]:
    """Candidate cuts of a qd-tree optimizer: (simple, join-induced), the most
    frequent first, as many of each kind as B1 keeps (`candidate_cut_lists`'s
    default); `qdtree` uses simple cuts only."""
    from ..workload.tree_inputs import candidate_cut_lists

    simple, induced = candidate_cut_lists(analyses, table, schema.key_hops())
    excluded = set(exclude_columns)
    simple = [c for c in simple if c.columns() and not c.columns() & excluded]
    return simple, (induced if optimizer == "mto" else [])


def _path_tables(cut) -> set[str]:
    """The tables whose data decide a join-induced cut's bits."""
    return {hop.parent_table for hop in cut.hops}


def _active_sources(catalog: Catalog, tables: set[str]) -> dict[str, dict]:
    """{table: {"versions": [...], "paths": [...]}} for the tables that have active, non-empty layouts."""
    registered = {t.name for t in catalog.tables()}
    snapshot = catalog.snapshot(sorted(tables & registered))
    sources = {}
    for table in sorted(tables & registered):
        layouts = snapshot.layouts_of(table)
        block_paths = [b.path for layout in layouts for b in layout.blocks]
        if block_paths:
            sources[table] = {"versions": sorted(layout.version.version_id for layout in layouts),
                              "paths": block_paths}
    return sources


def _source_frames(spark, schema: Schema, paths_by_table: dict[str, list[str]]) -> dict:
    """The data of dimension tables, read from their block folders."""
    missing = [p for paths in paths_by_table.values() for p in paths if not Path(p).is_dir()]
    if missing:
        raise StepError(f"{len(missing)} block folders of a dimension layout are missing, e.g. {missing[0]}")
    return {table: spark.read.parquet(*paths).select(*schema.table(table).column_names)
            for table, paths in paths_by_table.items()}


def _keys_file(paths: RunPaths, position: int) -> Path:
    return paths.file("literal_keys") / f"cut{position}.roaring"


def _literal_keys(paths: RunPaths, position: int) -> bytes:
    keys = _keys_file(paths, position)
    if not keys.exists():
        raise StepError(f"{keys} is missing: run featurize again")
    return keys.read_bytes()


def featurize(spark, paths: RunPaths, schema: Schema, query_log: str | None, num_features: int,
              min_support: int, exclude_columns: Sequence[str] = (), optimizer: str = "fineblock",
              catalog: Catalog | None = None) -> dict:
    """Pick cuts from the query log and add the bit vector column to every row.

    fineblock and sortkey use Sun's features; qdtree and mto the queries' own
    predicates (mto also join-induced ones, with bits computed exactly from the
    active layouts of the dimension tables on their paths, whose literal keys
    are kept as Roaring bitmaps); zorder and hilbert use no cuts.
    """
    from ..spark.blocks import ORDERABLE_KINDS, VECTOR_COLUMN, with_bit_vector
    from ..spark.induced import hops_with_duplicate_keys, literal_keys, with_layout_cut_flags
    from ..workload.tree_inputs import filtered_columns, leaf_sort_column, workload_matrices

    t0 = time.monotonic()
    if optimizer not in OPTIMIZERS:
        raise StepError(f"unknown optimizer {optimizer!r} (choose from {', '.join(OPTIMIZERS)})")
    table = schema.table(paths.table)
    summary = _read_log(query_log, schema)
    analyses = summary.analyses if summary is not None else []
    numbers = _log_numbers(summary, table.name)
    cuts: list[dict] = []
    predicates: list[Predicate] = []
    frames: dict = {}
    if optimizer in TREE_OPTIMIZERS:
        simple, induced = tree_cuts(analyses, schema, table.name, optimizer, exclude_columns)
        if induced:
            if catalog is None:
                raise StepError("join-induced cuts need the catalog of the dimension layouts")
            sources = _active_sources(catalog, set().union(*map(_path_tables, induced)))
            usable = [c for c in induced if _path_tables(c) <= set(sources)]
            if len(usable) < len(induced):
                log.warning("featurize %s: %d of %d join-induced cuts dropped: a table on their path "
                            "has no active layout yet (lay out dimension tables first)",
                            table.name, len(induced) - len(usable), len(induced))
            frames = _source_frames(spark, schema, {t: sources[t]["paths"] for t in sources})
            # a parent key held by two rows breaks "at most one source row", which the
            # router's disjointness proofs rely on: such paths give no cut
            duplicated = hops_with_duplicate_keys(frames, {hop for c in usable for hop in c.hops})
            if duplicated:
                log.warning("featurize %s: join-induced cuts through %s dropped: the parent key is not "
                            "unique in the active layout", table.name, ", ".join(sorted(map(str, duplicated))))
            induced = [c for c in usable if not set(c.hops) & duplicated]
        predicates = [*simple, *induced]
        matrices = workload_matrices(analyses, table.name, schema.key_hops(), predicates)
        _write_json(paths.file("workload.json"), {"implies": matrices.implies.astype(int).tolist(),
                                                  "disjoint": matrices.disjoint.astype(int).tolist()})
        support = (matrices.implies | matrices.disjoint).sum(axis=0)
        for position, cut in enumerate(predicates):
            entry = {"position": position, "kind": "simple", "sql": to_sql(cut), "predicate": dumps(cut),
                     "support": int(support[position])}
            if position >= len(simple):
                keys_path = _keys_file(paths, position)
                keys_path.parent.mkdir(parents=True, exist_ok=True)
                keys = literal_keys(frames, cut)
                keys_path.write_bytes(keys.serialize())
                entry.update(kind="join_induced", path=[str(h) for h in cut.hops], literal_keys=len(keys),
                             source_versions=[[t, v] for t in sorted(_path_tables(cut))
                                              for v in sources[t]["versions"]])
            cuts.append(entry)
        if not analyses:
            log.warning("featurize %s: no usable queries; %s falls back to a sort-key layout",
                        table.name, optimizer)
    elif optimizer not in CURVE_OPTIMIZERS:
        features = _sun_features(summary, schema, table.name, num_features, min_support, exclude_columns)
        if not features:
            log.warning("featurize %s: no features (empty or unusable query log); "
                        "every row gets the same vector", table.name)
        predicates = [f.predicate for f in features]
        cuts = [{"position": i, "kind": "simple", "sql": to_sql(f.predicate), "predicate": dumps(f.predicate),
                 "support": f.support, "gain": f.gain} for i, f in enumerate(features)]
    orderable = {c for c in table.column_names if table.column(c).kind in ORDERABLE_KINDS}
    filtered = [c for c in filtered_columns(analyses, table.name, len(table.column_names))
                if c in orderable and c not in set(exclude_columns)]
    _write_json(paths.file("features.json"), {
        "optimizer": optimizer, "cuts": cuts, "filtered_columns": filtered,
        # inside a tree leaf, blocks are ranges of this: the most range-filtered column
        "leaf_sort_columns": leaf_sort_column(analyses, table.name, table.primary_key)})
    df = spark.read.parquet(str(paths.file("input")))
    flagged = with_bit_vector(with_layout_cut_flags(df, predicates, frames), len(predicates))
    flagged.select(*df.columns, VECTOR_COLUMN).write.mode("overwrite").parquet(str(paths.file("featurized")))
    for c in cuts:
        log.info("cut %d (%s, support %d): %s", c["position"], c["kind"], c["support"], c["sql"])
    kinds = [c["kind"] for c in cuts]
    return _record(paths, "featurize", {
        **numbers, "features": len(cuts), "join_induced": kinds.count("join_induced"),
        "seconds": round(time.monotonic() - t0, 2)})


def _features(paths: RunPaths) -> dict:
    features = _read_json(paths.file("features.json"), "featurize")
    if not isinstance(features, dict):
        raise StepError("features.json was written by an older version: run featurize again")
    return features


# ---------------------------------------------------------------------------
# reduce


def reduce_vectors(spark, paths: RunPaths, sample_fraction: float = 1.0, seed: int = 1) -> dict:
    """(vector, count) pairs of the partition, or of a uniform sample of its rows.

    The qd-tree optimizers can run on a sample: bits stay exact (join-induced
    ones come from the full dimension data), so a sampled count divided by the
    fraction estimates the full count with no cardinality adjustment (MTO §4.2
    needs one because it samples the dimension tables too).
    """
    from ..spark.blocks import VECTOR_COLUMN

    t0 = time.monotonic()
    if not 0 < sample_fraction <= 1:
        raise StepError(f"the sample fraction must be in (0, 1], not {sample_fraction}")
    df = spark.read.parquet(str(paths.file("featurized")))
    if dict(df.dtypes).get(VECTOR_COLUMN) != "string":
        raise StepError("the featurized rows were written by an older version: run featurize again")
    pairs = _vector_counts(df.sample(fraction=sample_fraction, seed=seed) if sample_fraction < 1 else df)
    if sample_fraction < 1 and sum(c for _, c in pairs) < MIN_SAMPLE_ROWS:
        log.warning("reduce %s/%s: a %.4g sample has only %d rows, too few to estimate blocks; using all rows",
                    paths.table, paths.partition or "-", sample_fraction, sum(c for _, c in pairs))
        sample_fraction = 1.0
        pairs = _vector_counts(df)
    _write_json(paths.file("vectors.json"), {"pairs": pairs, "sample_fraction": sample_fraction})
    return _record(paths, "reduce", {"rows": sum(c for _, c in pairs), "distinct_vectors": len(pairs),
                                     "sample_fraction": sample_fraction,
                                     "seconds": round(time.monotonic() - t0, 2)})


def _vector_counts(df) -> list[tuple[str, int]]:
    """(bit string, rows) of every distinct vector, sorted."""
    from ..spark.blocks import VECTOR_COLUMN

    return sorted((r[0], int(r[1])) for r in df.groupBy(VECTOR_COLUMN).count().collect())


# ---------------------------------------------------------------------------
# optimize


def _cut_family(optimizer: str) -> str:
    """Optimizers of one family share the cuts featurize picks."""
    return "sun" if optimizer in ("fineblock", "sortkey") else optimizer


def _sort_columns(features: dict, table: TableSchema, sort_column: str | None) -> list[str]:
    """The in-leaf order of a tree layout: the given column, else the most range-filtered one, else the key."""
    if sort_column:
        return [sort_column]
    return features.get("leaf_sort_columns") or list(table.primary_key)


def _tree_blocking(pairs: list, features: dict, workload: dict, block_size: int, fraction: float,
                   sort_columns: list[str]) -> dict:
    import numpy as np

    from ..optimize.fineblock import VectorCounts, unpack_bit_strings
    from ..optimize.qdtree import Workload, greedy_tree, leaf_blocks, leaves, tree_to_json

    m = len(features["cuts"])
    vectors = unpack_bit_strings([v for v, _ in pairs], m)
    vc = VectorCounts(vectors, np.array([c for _, c in pairs], dtype=np.int64), np.ones(m))
    queries = len(workload["implies"])
    matrices = Workload(np.array(workload["implies"], dtype=bool).reshape(queries, m),
                        np.array(workload["disjoint"], dtype=bool).reshape(queries, m))
    # leaves hold at least one block of the full data: block_size x fraction sampled rows;
    # splits are scored by what the router will skip with every cut's block bits (B1: mto 0.565 -> 0.532)
    root = greedy_tree(vc, matrices, max(1, round(block_size * fraction)), objective="router")
    plan = leaf_blocks(root, block_size, scale=1 / fraction)
    leaf_rows = [leaf.rows / fraction for leaf in sorted(leaves(root), key=lambda leaf: leaf.leaf_id)]
    return {"kind": "tree", "n_cuts": m, "tree": tree_to_json(root), "n_blocks": plan.total,
            "leaf_first_block": plan.first_block.tolist(), "leaf_n_blocks": plan.n_blocks.tolist(),
            "leaf_estimated_rows": [round(r, 1) for r in leaf_rows],
            "sample_fraction": fraction, "sort_columns": sort_columns}


def optimize(paths: RunPaths, table: TableSchema, optimizer: str, block_size: int,
             sort_column: str | None = None) -> dict:
    """The blocking map: which rows go to which block."""
    import numpy as np

    from ..optimize.fineblock import VectorCounts, bottom_up, unpack_bit_strings

    t0 = time.monotonic()
    if optimizer not in OPTIMIZERS:
        raise StepError(f"unknown optimizer {optimizer!r} (choose from {', '.join(OPTIMIZERS)})")
    if block_size <= 0:
        raise StepError(f"block size must be positive, not {block_size}")
    reduced = _read_json(paths.file("vectors.json"), "optimize")
    pairs, fraction = reduced["pairs"], reduced.get("sample_fraction", 1.0)
    if pairs and not isinstance(pairs[0][0], str):
        raise StepError("vectors.json was written by an older version: run featurize and reduce again")
    features = _features(paths)
    if _cut_family(features["optimizer"]) != _cut_family(optimizer):
        raise StepError(f"featurize ran for {features['optimizer']}, not {optimizer}: run it again")
    if fraction < 1 and optimizer not in TREE_OPTIMIZERS:
        raise StepError(f"only {' and '.join(TREE_OPTIMIZERS)} can optimize on a sample")
    total = sum(c for _, c in pairs)
    estimated = round(total / fraction)
    n_blocks = math.ceil(estimated / block_size) if total else 0
    if sort_column and not table.has_column(sort_column):
        raise StepError(f"{table.name} has no column {sort_column!r} to sort by")
    if optimizer == "sortkey":
        sort_column = sort_column or (table.primary_key[0] if table.primary_key else None)
        if not sort_column:
            raise StepError("the sortkey optimizer needs --sort-column (the table has no primary key)")
        blocking = {"kind": "sortkey", "column": sort_column, "rows_per_block": block_size,
                    "n_blocks": n_blocks}
    elif optimizer in CURVE_OPTIMIZERS:
        columns = features["filtered_columns"][:CURVE_COLUMNS] or list(table.primary_key)
        if not columns:
            raise StepError(f"{optimizer} needs filtered columns in the query log or a primary key")
        blocking = {"kind": "curve", "curve": optimizer, "columns": columns, "rows_per_block": block_size,
                    "n_blocks": n_blocks}
    elif optimizer in TREE_OPTIMIZERS:
        if not total:
            blocking = {"kind": "tree", "n_blocks": 0}
        else:
            sort_columns = _sort_columns(features, table, sort_column)
            workload = _read_json(paths.file("workload.json"), "optimize")
            blocking = _tree_blocking(pairs, features, workload, block_size, fraction, sort_columns)
    elif not pairs:
        blocking = {"kind": "fineblock", "n_blocks": 0, "pieces": []}
    else:
        m = len(features["cuts"])
        vectors = unpack_bit_strings([v for v, _ in pairs], m)
        counts = np.array([c for _, c in pairs], dtype=np.int64)
        weights = np.array([f["support"] for f in features["cuts"]], dtype=float)
        result = bottom_up(VectorCounts(vectors, counts, weights), block_size, progress=False)
        pieces = [
            [pairs[vi][0], int(b), int(s), int(e)]
            for vi, b, s, e in zip(result.vector_index, result.block, result.row_start, result.row_end)
        ]
        blocking = {"kind": "fineblock", "n_blocks": int(result.n_blocks), "pieces": pieces}
    _write_json(paths.file("blocking.json"), blocking)
    numbers = {"optimizer": optimizer, "blocks": blocking["n_blocks"], "rows": estimated}
    if blocking["kind"] == "tree" and blocking["n_blocks"]:
        numbers["leaves"] = len(blocking["leaf_n_blocks"])
    return _record(paths, "optimize", {**numbers, "seconds": round(time.monotonic() - t0, 3)})


# ---------------------------------------------------------------------------
# write_blocks


def _block_index(df, blocking: dict):
    """The 0-based block index of every row, from the blocking map (deterministic)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from ..optimize.fineblock import unpack_bit_strings
    from ..optimize.qdtree import route_vectors, tree_from_json
    from ..spark.blocks import VECTOR_COLUMN, with_pieces, with_tree_blocks
    from ..spark.curves import curve_block_index, with_curve_key

    data_columns = [c for c in df.columns if c != VECTOR_COLUMN]
    # A fixed row order (hash, then every column) so a retry assigns the same rows to the same blocks.
    order = [F.xxhash64(*data_columns)] + [F.col(c) for c in data_columns]
    kind = blocking["kind"]
    if kind == "sortkey":
        rn = F.row_number().over(Window.orderBy(F.col(blocking["column"]), *order)) - 1
        return df.withColumn("_block", F.floor(rn / F.lit(blocking["rows_per_block"])).cast("int"))
    if kind == "curve":
        keyed = with_curve_key(df.drop(VECTOR_COLUMN), blocking["columns"], blocking["curve"])
        blocked = curve_block_index(keyed, blocking["rows_per_block"])
        return blocked.withColumn("_block", F.col("_block").cast("int")).drop("_curve")
    if kind == "tree":
        # every vector of the full data, also one a sample never saw, reaches a leaf
        keys = [r[0] for r in df.select(VECTOR_COLUMN).distinct().collect()]
        leaf_of = route_vectors(tree_from_json(blocking["tree"]), unpack_bit_strings(keys, blocking["n_cuts"]))
        return with_tree_blocks(df, [(k, int(leaf)) for k, leaf in zip(keys, leaf_of)], f"{VECTOR_COLUMN} string",
                                blocking["leaf_first_block"], blocking["leaf_n_blocks"],
                                blocking["sort_columns"], order)
    return with_pieces(df, [tuple(p) for p in blocking["pieces"]], f"{VECTOR_COLUMN} string", order)


def write_blocks(spark, paths: RunPaths, table: TableSchema, catalog: Catalog, optimizer: str,
                 params: dict, partition_column: str = "dt") -> dict:
    """Reserve block ids (one catalog version per run id) and write the block folders."""
    from pyspark.sql import functions as F

    from ..spark.blocks import BLOCK_COLUMN, write_block_folders

    t0 = time.monotonic()
    blocking = _read_json(paths.file("blocking.json"), "write_blocks")
    try:
        version, ids = catalog.begin_version(table.name, paths.partition, optimizer, params,
                                             paths.run_id, blocking["n_blocks"])
    except CatalogError as e:
        raise StepError(f"{e} (the optimizer's result changed since the first attempt of this run: "
                        f"start a new run)") from None
    if catalog.version(version).state == "active" and paths.file("written.json").exists():
        # A retry after this run already went live: its folders are being read; leave them.
        return _record(paths, "write_blocks", {"version": version, "already_active": True})
    for stale in ("verified.json", "written.json"):  # an earlier attempt's: never trust them now
        paths.file(stale).unlink(missing_ok=True)
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

    # xxhash64 skips NULL arguments: (1, 'A', NULL) and (1, NULL, 'A') would hash alike
    # without a null flag per column.
    row_hash = F.xxhash64(*[x for c in columns for x in (F.col(c), F.col(c).isNull())]).cast("decimal(38,0)")
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
    paths.file("verified.json").unlink(missing_ok=True)  # only this attempt's verdict counts
    written = _read_json(paths.file("written.json"), "verify")
    missing = [b["path"] for b in written["blocks"].values() if not Path(b["path"]).is_dir()]
    if missing:
        reason = f"verify failed: {len(missing)} written block folders are missing, e.g. {missing[0]}"
        catalog.fail(written["version"], reason)
        raise StepError(reason)
    ingested = _read_json(paths.file("input.json"), "verify")
    expected = (int(ingested["rows"]), int(ingested["checksum"]))
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


def _sample_error(blocking: dict, summaries, first_id: int) -> float | None:
    """Largest relative error of the sample's block size estimates against the written blocks."""
    import numpy as np

    if blocking.get("kind") != "tree" or blocking.get("sample_fraction", 1.0) >= 1 or not summaries:
        return None
    first = np.array(blocking["leaf_first_block"])
    n = np.array(blocking["leaf_n_blocks"])
    estimated = np.array(blocking["leaf_estimated_rows"]) / n  # rows per block of each leaf
    errors = []
    for s in summaries:
        leaf = int(np.searchsorted(first, s.block_id - first_id, side="right")) - 1
        errors.append(abs(s.row_count - estimated[leaf]) / estimated[leaf])
    return round(float(max(errors)), 4)


def update_catalog(spark, paths: RunPaths, table: TableSchema, catalog: Catalog,
                   schema: Schema | None = None) -> dict:
    """Cuts (with literal keys), per-block stats and cut bit vectors, then activate (retiring the old version)."""
    from ..spark.blocks import summarize_blocks
    from ..spark.induced import with_layout_cut_flags

    t0 = time.monotonic()
    verified = _read_json(paths.file("verified.json"), "update_catalog")
    written = _read_json(paths.file("written.json"), "update_catalog")
    version = written["version"]
    if verified["version"] != version:
        raise StepError("verified.json belongs to another version: run verify again")
    info = catalog.version(version)
    if info.state == "active":
        return _record(paths, "update_catalog", {"version": version, "already_active": True})
    cuts = _features(paths)["cuts"]
    predicates = [loads(c["predicate"]) for c in cuts]
    # the bits of join-induced cuts come from the dimension versions featurize used
    source_versions = {(t, v) for c in cuts for t, v in c.get("source_versions", [])}
    frames = {}
    if source_versions:
        if schema is None:
            raise StepError("join-induced cuts need the schema of their dimension tables")
        by_table: dict[str, list[str]] = {}
        for t, v in sorted(source_versions):
            by_table.setdefault(t, []).extend(catalog.block_paths(v))
        frames = _source_frames(spark, schema, by_table)
    frame = _written_frame(spark, table, written)
    summaries = []
    if frame is not None:
        summaries = summarize_blocks(with_layout_cut_flags(frame, predicates, frames), table, len(predicates))
    blocks = []
    for s in summaries:
        meta = written["blocks"][str(s.block_id)]
        blocks.append(BlockRecord(s.block_id, s.row_count, meta["bytes"], meta["path"],
                                  s.stats, s.union_bits, s.all_bits))
    records = [CutRecord(c["position"], c["predicate"], c["sql"], c["kind"], path=tuple(c.get("path", ())),
                         literal_keys=(_literal_keys(paths, c["position"])
                                       if c["kind"] == "join_induced" else None),
                         source_versions=tuple((t, int(v)) for t, v in c.get("source_versions", [])))
               for c in cuts]
    try:
        catalog.set_cuts(version, records)
        catalog.set_blocks(version, blocks)
        # the fingerprint of the rows verified in the blocks, not of an earlier attempt's input
        catalog.activate(version, input_fingerprint=f"{verified['rows']}:{verified['checksum']}")
    except CatalogError as e:
        raise StepError(f"cannot activate version {version}: {e}") from None
    numbers = {"version": version, "blocks": len(blocks), "rows": sum(b.row_count for b in blocks)}
    error = _sample_error(_read_json(paths.file("blocking.json"), "update_catalog"), summaries,
                          info.block_ids.start)
    if error is not None:
        numbers["sample_block_rows_error_max"] = error
    return _record(paths, "update_catalog", {**numbers, "seconds": round(time.monotonic() - t0, 2)})


# ---------------------------------------------------------------------------
# all steps in one process


def run_in_process(spark, catalog: Catalog, schema: Schema, paths: RunPaths, source: str, optimizer: str,
                   block_size: int, query_log: str | None = None, *, date_column: str | None = None,
                   start: str | None = None, end: str | None = None, sort_column: str | None = None,
                   num_features: int = 15, min_support: int = 2, sample_fraction: float = 1.0,
                   exclude_columns: Sequence[str] = (), partition_column: str = "dt") -> dict:
    """The seven steps in order in one Spark session (tests, the demo's baseline, tools);
    returns the run's metrics. The nightly DAG runs the same functions as separate jobs."""
    table = schema.table(paths.table)
    ingest(spark, paths, table, source, catalog, date_column, start, end, partition_column)
    featurize(spark, paths, schema, query_log, num_features, min_support, exclude_columns, optimizer, catalog)
    reduce_vectors(spark, paths, sample_fraction)
    optimize(paths, table, optimizer, block_size, sort_column)
    write_blocks(spark, paths, table, catalog, optimizer,
                 {"block_size": block_size, "sort_column": sort_column, "sample_fraction": sample_fraction},
                 partition_column)
    verify(spark, paths, table, catalog)
    update_catalog(spark, paths, table, catalog, schema)
    return _read_json(paths.file("metrics.json"), "run_in_process")
