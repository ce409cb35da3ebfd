"""A change batch (inserted rows, deleted primary keys) applied to a laid-out table.

    stage_changes -> write_changes -> verify_changes -> activate_changes

An update is a delete plus an insert of the same key. `stage_changes`
checks the batch against the schema and the active version (the base),
finds the rows to delete (reading only blocks whose statistics may hold
their keys), refuses inserts of keys that exist, sends every new row
through the base version's tree to a block of its leaf (a leaf without a
block, a layout of several trees or of none: new blocks), and repairs the
join-induced cuts of other tables computed from this one
(`changes.repair`). `write_changes` writes a new folder for every block
that changes: the old files linked and a new file of the inserted rows, or,
for a block that loses rows, the block rewritten. `verify_changes` checks
rows and checksum of those blocks against the base blocks minus the
deleted rows plus the inserted ones. `activate_changes` makes the new
version (unchanged blocks shared with the base, changed blocks with their
statistics grown to cover the new rows, never shrunk) and the repaired cuts
live in one catalog transaction, only while the base still serves.

New rows get the bits of the base version's cuts: simple cuts from their
SQL, join-induced cuts from their stored literal keys (a foreign key in the
key set). A join-induced cut that is stale, or whose foreign key has no
parent row in some new row (referential integrity broken: counted), is
marked stale in the new version (no source versions), so the router stops
using it rather than trust a bit it cannot prove.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
from pyroaring import BitMap64
from pyspark.errors import AnalysisException
from pyspark.sql import Window
from pyspark.sql import functions as F

from layout_core.base.names import BLOCK_ID_COLUMN, VECTOR_COLUMN
from layout_core.base.schema import Schema, TableSchema
from layout_core.catalog import BlockRecord, Catalog, CatalogError, CutUpdate
from layout_core.flows.changes.repair import candidate_blocks, key_filtered, keys_frame, repair_cuts
from layout_core.flows.names import CHANGES_STEPS
from layout_core.flows.reorg.shift import tree_from_records
from layout_core.predicates import loads, value_from_json
from layout_core.runs.artifacts import VerifiedBlocks, WrittenBlocks, read_step_artifact, write_artifact
from layout_core.runs.flow import Flow, RunContext, Step, run_steps
from layout_core.runs.paths import RunPaths, StepError, record_metrics
from layout_core.runs.publish import block_record, publish
from layout_core.runs.sources import active_sources, source_frames
from layout_core.runs.verify import rows_fingerprint, verified_version, verify_blocks
from layout_core.skipping.rangesets import merge_column_stats
from layout_core.skipping.router import cut_is_current
from layout_core.skipping.zonemaps import DEFAULT_RANGE_SETS
from layout_core.spark.assign import leaf_column
from layout_core.spark.blocks import cut_flag_columns, summarize_blocks, with_bit_vector, write_block_folders

log = logging.getLogger("layout.changes")

TARGET = "_target"  # a new row's block: a base block id, or -1 - n for new block n


@dataclass(frozen=True)
class RepairEntry:
    version_id: int
    table: str
    partition: str
    position: int
    old_source_versions: tuple[tuple[str, int], ...]
    keys_file: str  # "" when the cut goes stale
    reason: str
    keys_before: int
    keys_after: int


@dataclass(frozen=True)
class StagedChanges:
    FILE: ClassVar[str] = "changes_staged.json"
    STEP: ClassVar[str] = "stage_changes"
    table: str
    partition: str
    replaces: int  # the version serving the partition when the run began
    inserted_rows: int
    inserted_checksum: str
    deleted_requested: int  # distinct keys asked for
    deleted_rows: int  # rows found and removed
    deleted_checksum: str
    blocks: dict  # str(base block id) -> {"inserted": n, "deleted": n}: the blocks that change
    new_blocks: tuple[tuple[tuple[int, ...], ...], ...]  # per new block, its leaves per tree
    affected_rows: int  # rows and checksum of the changing base blocks
    affected_checksum: str
    stale_cuts: tuple[int, ...]  # positions of this table's cuts the new version marks stale
    dangling_rows: int  # new rows whose foreign key of a join-induced cut has no parent row
    repairs: tuple[RepairEntry, ...]

    @property
    def empty(self) -> bool:
        return self.inserted_rows == 0 and self.deleted_rows == 0


@dataclass(frozen=True)
class WrittenChanges(WrittenBlocks):
    """The new folders of the blocks the batch changes; blocks: str(new block id) ->
    {"path", "bytes", "from": base block id or -1}; they must hold the changing base
    blocks' rows minus the deleted plus the inserted ones."""

    FILE: ClassVar[str] = "changes_written.json"
    STEP: ClassVar[str] = "write_changes"


@dataclass(frozen=True)
class VerifiedChanges(VerifiedBlocks):
    FILE: ClassVar[str] = "changes_verified.json"
    STEP: ClassVar[str] = "verify_changes"


def _base(catalog: Catalog, table: str, partition: str, replaces: int | None = None):
    layout = catalog.active_layout(table, partition)
    if layout is None:
        raise StepError(f"{table} {partition or '(unpartitioned)'} has no active layout: lay it out first "
                        f"(a change batch applies to the blocks of a layout)")
    if replaces is not None and layout.version.version_id != replaces:
        raise StepError(f"the batch was staged on version {replaces} of {table}, but version "
                        f"{layout.version.version_id} serves it now: start a new run")
    return layout


# ---------------------------------------------------------------------------
# stage_changes


def read_batch(spark, table: TableSchema, inserted: str | None, deleted: str | None):
    """(inserted rows, deleted keys) as DataFrames in the table's types (None when not given);
    a batch whose columns do not match the schema is refused, naming the columns."""
    if not table.primary_key:
        raise StepError(f"{table.name} has no primary key in the schema: changes need one")
    rows = keys = None
    if inserted:
        rows = spark.read.parquet(inserted)
        missing = [c for c in table.column_names if c not in rows.columns]
        extra = [c for c in rows.columns if c not in table.column_names]
        if missing or extra:
            raise StepError(f"{inserted} does not match {table.name}'s columns: "
                            + "; ".join(part for part in (f"missing {missing}" if missing else "",
                                                          f"not in the schema {extra}" if extra else "") if part))
        rows = _cast(rows, table, table.column_names, inserted)
    if deleted:
        keys = spark.read.parquet(deleted)
        missing = [c for c in table.primary_key if c not in keys.columns]
        if missing:
            raise StepError(f"{deleted} lacks the primary key columns {missing} of {table.name}")
        keys = _cast(keys, table, table.primary_key, deleted).distinct()
    return rows, keys


def _cast(frame, table: TableSchema, columns, source: str):
    """`columns` of `frame` in the schema's types; a column that cannot be is a clear error."""

    found = dict(frame.dtypes)
    try:
        return frame.select(*[F.col(c).cast(table.spark_type(c)).alias(c) for c in columns])
    except AnalysisException:
        wrong = [f"{c} is {found[c]}, not {table.spark_type(c)}" for c in columns
                 if found[c] != table.spark_type(c)]
        raise StepError(f"{source} has columns of the wrong type for {table.name}: {'; '.join(wrong)}") from None


def stage_changes(spark, paths: RunPaths, catalog: Catalog, schema: Schema, inserted: str | None,
                  deleted: str | None) -> dict:
    """Check the batch, find the rows to delete, route the new rows, repair other tables' cuts."""


    t0 = time.monotonic()
    table = schema.table(paths.table)
    layout = _base(catalog, table.name, paths.partition)
    rows, keys = read_batch(spark, table, inserted, deleted)
    pk = list(table.primary_key)
    empty = spark.createDataFrame([], ", ".join(f"`{c}` {table.spark_type(c)}" for c in table.column_names))
    rows = rows if rows is not None else empty
    keys = keys if keys is not None else empty.select(*pk)
    _check_keys(rows, keys, pk, inserted)

    location = catalog.table(table.name).location
    base_rows = _rows_with_keys(spark, layout, location, table, rows.select(*pk).union(keys))
    found = base_rows.join(keys, on=pk, how="left_semi").cache()
    clash = base_rows.join(rows.select(*pk), on=pk, how="left_semi").join(keys, on=pk, how="left_anti")
    clashes = clash.select(*pk).limit(5).collect()
    if clashes:
        raise StepError(f"{len(clashes) if len(clashes) < 5 else '5 or more'} inserted keys of {table.name} "
                        f"exist already (e.g. {tuple(clashes[0])}): an update is a delete plus an insert; "
                        f"nothing was written")
    snapshot = catalog.snapshot()
    routed, new_leaves, stale, dangling = rows.withColumn(VECTOR_COLUMN, F.lit("")) \
        .withColumn(TARGET, F.lit(0).cast("long")), [], [], 0
    if rows.limit(1).count():
        sort_column = sort_column_of(catalog.plan(layout.version.version_id), table)
        routed, new_leaves, stale, dangling = _route_new_rows(spark, rows, layout, table, snapshot, schema,
                                                              sort_column, paths.file("changes_keys"))
    routed.write.mode("overwrite").parquet(str(paths.file("changes_inserted")))
    found.write.mode("overwrite").parquet(str(paths.file("changes_deleted")))
    found.unpersist()
    routed = spark.read.parquet(str(paths.file("changes_inserted")))
    found = spark.read.parquet(str(paths.file("changes_deleted")))
    ins_rows, ins_sum = rows_fingerprint(routed, table.column_names)
    del_rows, del_sum = rows_fingerprint(found, table.column_names)
    requested = keys.count()

    changed: dict[str, dict] = {}
    for row in routed.where(F.col(TARGET) >= 0).groupBy(TARGET).count().collect():
        changed.setdefault(str(row[TARGET]), {"inserted": 0, "deleted": 0})["inserted"] = int(row["count"])
    for row in found.groupBy(BLOCK_ID_COLUMN).count().collect():
        changed.setdefault(str(row[BLOCK_ID_COLUMN]), {"inserted": 0, "deleted": 0})["deleted"] = int(row["count"])
    affected = [b.path for b in layout.blocks if str(b.block_id) in changed]
    aff_rows, aff_sum = (rows_fingerprint(spark.read.parquet(*affected), table.column_names) if affected
                         else (0, 0))

    repairs: list[RepairEntry] = []
    t_repair = time.monotonic()
    if ins_rows or del_rows:
        # the tables below are read only for paths whose keys the catalog does not hold
        @functools.cache
        def frames(tables: frozenset[str]):
            sources = active_sources(catalog, set(tables))
            return source_frames(spark, schema, {t: s["paths"] for t, s in sources.items()})

        for r in repair_cuts(spark, snapshot, schema, table.name, layout.version.version_id,
                             routed.select(*table.column_names) if ins_rows else None,
                             found.select(*table.column_names) if del_rows else None, frames,
                             paths.file("changes_keys")):
            keys_path = ""
            if r.literal_keys is not None:
                target = paths.file("repaired_keys") / f"v{r.version_id}_cut{r.position}.roaring"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(r.literal_keys)
                keys_path = str(target)
            repairs.append(RepairEntry(r.version_id, r.table, r.partition, r.position, r.old_source_versions,
                                       keys_path, r.reason, r.keys_before, r.keys_after))
    staged = StagedChanges(table.name, paths.partition, layout.version.version_id, ins_rows, str(ins_sum),
                           requested, del_rows, str(del_sum), changed, tuple(new_leaves), aff_rows, str(aff_sum),
                           tuple(stale), dangling, tuple(repairs))
    write_artifact(paths.staging, staged)
    if requested > del_rows:
        log.warning("%d of %d deleted keys are not in %s %s: ignored", requested - del_rows, requested,
                    table.name, paths.partition or "")
    return record_metrics(paths, "stage_changes", {
        "replaces": staged.replaces, "inserted": ins_rows, "deleted": del_rows,
        "deleted_missing": requested - del_rows, "blocks_changed": len(changed), "new_blocks": len(new_leaves),
        "stale_cuts": len(stale), "dangling_rows": dangling,
        "cuts_repaired": sum(bool(r.keys_file) for r in repairs),
        "cuts_left_stale": sum(not r.keys_file for r in repairs),
        "repair_seconds": round(time.monotonic() - t_repair, 3), "seconds": round(time.monotonic() - t0, 2)})


def _check_keys(rows, keys, pk: list[str], inserted: str | None) -> None:

    null_key = F.lit(False)
    for c in pk:
        null_key = null_key | F.col(c).isNull()
    if rows.where(null_key).limit(1).count():
        raise StepError(f"{inserted} has rows with a NULL primary key ({', '.join(pk)}): nothing was written")
    twice = rows.groupBy(*pk).count().where("count > 1").limit(1).collect()
    if twice:
        raise StepError(f"{inserted} inserts the key {tuple(twice[0])[:-1]} twice: nothing was written")


def _rows_with_keys(spark, layout, location: str, table: TableSchema, wanted):
    """The base version's rows (with their block id) whose primary key is in `wanted`,
    read from the blocks whose statistics may hold the keys' first column."""


    pk = list(table.primary_key)
    first = pk[0]
    values = sorted(r[0] for r in wanted.select(first).distinct().collect() if r[0] is not None)
    empty = spark.createDataFrame([], ", ".join([f"`{c}` {table.spark_type(c)}" for c in table.column_names]
                                                + [f"`{BLOCK_ID_COLUMN}` int"]))
    if not values:
        return empty
    blocks = candidate_blocks(layout, table.column(first), values)
    paths = [b.path for b in blocks if b.row_count > 0]
    if not paths:
        return empty
    frame = spark.read.option("basePath", location).parquet(*paths)
    return (frame.select(*table.column_names, F.col(BLOCK_ID_COLUMN).cast("int").alias(BLOCK_ID_COLUMN))
            .join(wanted.distinct(), on=pk, how="left_semi"))


def _route_new_rows(spark, rows, layout, table: TableSchema, snapshot, schema: Schema, sort_column: str | None,
                    folder: Path):
    """New rows with their bit string and target block (`TARGET`); the leaves of the new
    blocks; this table's cut positions to mark stale; rows with a dangling foreign key.
    `folder` keeps the literal keys as Parquet for the join that gives join-induced bits."""


    active = snapshot.active_versions()
    flagged, stale, dangling = rows, [], 0
    names = cut_flag_columns(len(layout.cuts))
    by_hop: dict = {}  # hop -> [(flag name, literal keys)]: one join per foreign key
    for cut, name in zip(layout.cuts, names):
        if cut.kind != "join_induced":
            flagged = flagged.withColumn(name, F.coalesce(F.expr(cut.sql), F.lit(False)))
            continue
        keys = cut.keys()
        if keys is None or not cut_is_current(cut.source_versions, active, snapshot.data_fingerprints):
            stale.append(cut.position)
            flagged = flagged.withColumn(name, F.lit(False))
            continue
        by_hop.setdefault(loads(cut.predicate).hops[-1], []).append((cut.position, name, keys))
    for i, (hop, group) in enumerate(sorted(by_hop.items(), key=lambda kv: str(kv[0]))):
        missing = _dangling(spark, rows, hop, snapshot, schema, folder)
        if missing:
            dangling = max(dangling, missing)
            stale += [position for position, _, _ in group]
            log.warning("%d new rows of %s have a %s with no %s row: cuts %s are marked stale", missing,
                        table.name, hop.child_column, hop.parent_table, [p for p, _, _ in group])
        flags = _membership_frame(spark, folder, [(n, k) for _, n, k in group])
        flagged = (flagged.join(flags, F.col(hop.child_column).cast("long") == flags["_key"], "left")
                   .drop("_key"))
        for _, name, _ in group:
            flagged = flagged.withColumn(name, F.coalesce(F.col(name), F.lit(False)))
    vectors = with_bit_vector(flagged, len(layout.cuts)).drop(*names)

    roots = _roots(layout)
    for t, root in enumerate(roots):
        vectors = vectors.withColumn(f"_leaf{t}", leaf_column(root, VECTOR_COLUMN))
    pk = list(table.primary_key)
    if len(roots) == 1 and all(len(b.leaves) == 1 and len(b.leaves[0]) == 1 for b in layout.blocks):
        in_leaf = _leaf_blocks(spark, layout, table, sort_column)
        with_block = vectors.join(F.broadcast(in_leaf), on="_leaf0", how="left")
        fits = F.coalesce(F.col("_lo") <= F.col(sort_column), F.lit(False)) if sort_column else F.lit(False)
        with_block = with_block.withColumn("_fits", fits)
        rank = F.row_number().over(Window.partitionBy(*pk).orderBy(
            F.col("_fits").desc(), F.when(F.col("_fits"), F.col("_lo")).desc_nulls_last(),
            F.col("_lo").asc_nulls_last(), F.col("_block").asc_nulls_last()))
        chosen = with_block.withColumn("_rank", rank).where("_rank = 1")
        # a leaf without a block gets one new block
        empty_leaves = sorted(r[0] for r in chosen.where(F.col("_block").isNull()).select("_leaf0").distinct().collect())
        new_index = {leaf: i for i, leaf in enumerate(empty_leaves)}
        target = F.col("_block")
        for leaf, i in new_index.items():
            target = F.when(F.col("_leaf0") == leaf, F.lit(-1 - i)).otherwise(target)
        routed = chosen.withColumn(TARGET, target.cast("long"))
        new_leaves = [((leaf,),) for leaf in empty_leaves]
    else:
        block_rows = int(layout.version.params.get("block_rows") or 50_000)
        n = rows.count()
        order = Window.orderBy(*[F.col(c) for c in pk])
        routed = vectors.withColumn(TARGET, (-1 - F.floor((F.row_number().over(order) - 1) / block_rows)).cast("long"))
        n_new = -(-n // block_rows)
        if roots:
            sets = {}
            agg = [F.array_sort(F.collect_set(f"_leaf{t}")).alias(f"_l{t}") for t in range(len(roots))]
            for r in routed.groupBy(TARGET).agg(*agg).collect():
                sets[-1 - int(r[TARGET])] = tuple(tuple(int(x) for x in r[f"_l{t}"]) for t in range(len(roots)))
            new_leaves = [sets.get(i, ()) for i in range(n_new)]
        else:
            new_leaves = [() for _ in range(n_new)]
    return (routed.select(*table.column_names, VECTOR_COLUMN, TARGET), new_leaves, sorted(set(stale)), dangling)


def _membership_frame(spark, folder: Path, key_sets):
    """A frame of every key in some key sets (`_key`) with one boolean column per set."""


    union = BitMap64()
    for _, keys in key_sets:
        union |= keys
    values = np.asarray(union, dtype=np.int64)
    return keys_frame(spark, folder, values, {name: np.isin(values, np.asarray(keys, dtype=np.int64),
                                                            assume_unique=True) for name, keys in key_sets})


def _dangling(spark, rows, hop, snapshot, schema: Schema, scratch: Path) -> int:
    """How many of `rows` have a non-NULL foreign key (of `hop`) that no parent row holds."""


    fks = rows.where(F.col(hop.child_column).isNotNull()).select(F.col(hop.child_column).cast("long").alias("_fk"))
    values = sorted({int(r[0]) for r in fks.distinct().collect()})
    if not values:
        return 0
    layouts = snapshot.layouts_of(hop.parent_table)
    if not layouts or values[0] < 0:
        return fks.count()  # nothing to prove the parents exist with

    parents = key_filtered(spark, schema, layouts, snapshot, hop.parent_column, BitMap64(values), scratch)
    present = set() if parents is None else {int(r[0]) for r in parents.select(hop.parent_column).collect()}
    missing = [v for v in values if v not in present]
    if not missing:
        return 0
    return fks.where(F.col("_fk").isin(missing)).count()


def _roots(layout):
    """The layout's trees as optimizer nodes (tree 0, 1, ...); () without trees."""

    trees = sorted({n.tree for n in layout.trees})
    return [tree_from_records([n for n in layout.trees if n.tree == t])[0] for t in trees]


def _leaf_blocks(spark, layout, table: TableSchema, sort_column: str | None):
    """(leaf, block, lower bound of the sort column in the block) of a one-tree layout's
    blocks: a new row goes to the block of its leaf whose range of the sort column starts
    at or below its value, else to the leaf's first block."""
    rows = [(b.leaves[0][0], b.block_id,
             value_from_json((b.stats.get(sort_column) or {}).get("min")) if sort_column else None)
            for b in layout.blocks]
    lo_type = table.spark_type(sort_column) if sort_column else "int"
    return spark.createDataFrame(rows, f"_leaf0 int, _block long, _lo {lo_type}")


def sort_column_of(plan: dict | None, table: TableSchema) -> str | None:
    """The first in-leaf sort column of a version's plan (None when it has none)."""
    columns = ((plan or {}).get("assignment") or {}).get("sort_columns") or ()
    return columns[0] if columns and table.has_column(columns[0]) else None


# ---------------------------------------------------------------------------
# write_changes


def _new_block_ids(staged: StagedChanges, first: int) -> tuple[dict[int, int], int]:
    """Base block id -> its new id (changed blocks, in id order), and the first id of the new blocks."""
    changed = sorted(int(b) for b in staged.blocks)
    return {old: first + i for i, old in enumerate(changed)}, first + len(changed)


def _inserted_in_new_blocks(spark, paths: RunPaths, staged: StagedChanges, first: int):
    """The staged new rows with the new version's block id of each."""


    renamed, first_new = _new_block_ids(staged, first)
    mapping = spark.createDataFrame([(old, new) for old, new in renamed.items()] or [(-1, -1)],
                                    f"{TARGET} long, _new long")
    rows = spark.read.parquet(str(paths.file("changes_inserted")))
    return (rows.join(F.broadcast(mapping), on=TARGET, how="left")
            .withColumn(BLOCK_ID_COLUMN, F.when(F.col(TARGET) >= 0, F.col("_new"))
                        .otherwise(F.lit(first_new) - 1 - F.col(TARGET)).cast("int"))
            .drop("_new"))


def write_changes(spark, paths: RunPaths, catalog: Catalog, schema: Schema) -> dict:
    """Reserve block ids and write a new folder for every block the batch changes."""


    t0 = time.monotonic()
    staged = read_step_artifact(paths, StagedChanges, "write_changes")
    if staged.empty:
        return record_metrics(paths, "write_changes", {"empty": True})
    table = schema.table(staged.table)
    base = catalog.version(staged.replaces)
    params = {k: v for k, v in base.params.items() if k != "input_fingerprint"}
    params["changes_from"] = staged.replaces
    n_blocks = len(staged.blocks) + len(staged.new_blocks)
    try:
        version, ids = catalog.begin_version(table.name, staged.partition, base.optimizer, params, paths.run_id,
                                             n_blocks)
    except CatalogError as e:
        raise StepError(f"{e} (start a new run)") from None
    if catalog.version(version).state == "active":
        return record_metrics(paths, "write_changes", {"version": version, "already_active": True})
    paths.file(VerifiedChanges.FILE).unlink(missing_ok=True)
    try:
        layout = _base(catalog, table.name, staged.partition, staged.replaces)
    except StepError as e:
        catalog.fail(version, str(e))
        raise
    info = catalog.table(table.name)
    renamed, _ = _new_block_ids(staged, ids.start)
    by_id = {b.block_id: b for b in layout.blocks}
    pk = list(table.primary_key)
    frames = [_inserted_in_new_blocks(spark, paths, staged, ids.start).select(*table.column_names, BLOCK_ID_COLUMN)]
    losing = [b for b in sorted(renamed) if staged.blocks[str(b)]["deleted"] > 0]
    if losing:
        mapping = spark.createDataFrame([(b, renamed[b]) for b in losing], f"{BLOCK_ID_COLUMN} int, _new int")
        deleted = spark.read.parquet(str(paths.file("changes_deleted"))).select(*pk)
        kept = (spark.read.option("basePath", info.location).parquet(*[by_id[b].path for b in losing])
                .withColumn(BLOCK_ID_COLUMN, F.col(BLOCK_ID_COLUMN).cast("int"))
                .join(deleted, on=pk, how="left_anti")
                .join(F.broadcast(mapping), on=BLOCK_ID_COLUMN)
                .select(*table.column_names, F.col("_new").alias(BLOCK_ID_COLUMN)))
        frames.append(kept)
    rows = frames[0] if len(frames) == 1 else frames[0].unionByName(frames[1])
    written = write_block_folders(rows, table.column_names, info.location, paths.file("block_staging"),
                                  info.partition_column if staged.partition else None, staged.partition)
    origin = {new: old for old, new in renamed.items()}
    linked = 0
    for old in sorted(renamed):
        if staged.blocks[str(old)]["deleted"] == 0 and renamed[old] in written:
            linked += _link_files(Path(by_id[old].path), written[renamed[old]][0])
    blocks = {}
    for block_id, (folder, _) in written.items():
        size = sum(f.stat().st_size for f in folder.glob("*.parquet"))
        blocks[str(block_id)] = {"path": str(folder), "bytes": size, "from": origin.get(block_id, -1)}
    write_artifact(paths.staging, WrittenChanges(
        version, ids.start, blocks, staged.affected_rows - staged.deleted_rows + staged.inserted_rows,
        str(int(staged.affected_checksum) - int(staged.deleted_checksum) + int(staged.inserted_checksum))))
    return record_metrics(paths, "write_changes", {
        "version": version, "blocks_written": len(blocks), "blocks_rewritten": len(losing),
        "files_linked": linked, "seconds": round(time.monotonic() - t0, 2)})


def _link_files(source: Path, target: Path) -> int:
    """The base block's Parquet files in the new block's folder: hard links (copies where
    the file system has none); the base block's folder is never changed, since it still serves."""

    n = 0
    for f in sorted(source.glob("*.parquet")):
        destination = target / f.name
        destination.unlink(missing_ok=True)
        try:
            os.link(f, destination)
        except OSError:
            shutil.copy2(f, destination)
        n += 1
    return n


# ---------------------------------------------------------------------------
# verify_changes


def verify_changes(spark, paths: RunPaths, catalog: Catalog, schema: Schema) -> dict:
    """The new blocks hold the changed base blocks' rows minus the deleted plus the inserted ones."""
    staged = read_step_artifact(paths, StagedChanges, "verify_changes")
    if staged.empty:
        return record_metrics(paths, "verify_changes", {"empty": True})
    return verify_blocks(spark, paths, catalog, schema.table(staged.table), WrittenChanges, VerifiedChanges)


# ---------------------------------------------------------------------------
# activate_changes


def activate_changes(spark, paths: RunPaths, catalog: Catalog, schema: Schema, range_sets: int) -> dict:
    """The new version and the repaired cuts of other tables, in one transaction, while the base serves."""


    t0 = time.monotonic()
    staged = read_step_artifact(paths, StagedChanges, "activate_changes")
    if staged.empty:
        return record_metrics(paths, "activate_changes", {"empty": True, "version": staged.replaces})
    written, verified = verified_version(paths, WrittenChanges, VerifiedChanges, "activate_changes")
    version = written.version
    if catalog.version(version).state == "active":
        return record_metrics(paths, "activate_changes", {"version": version, "already_active": True})
    table = schema.table(staged.table)
    try:
        layout = _base(catalog, table.name, staged.partition, staged.replaces)
    except StepError as e:
        catalog.fail(version, str(e))
        raise
    k = len(layout.cuts)
    first = catalog.version(version).block_ids.start
    inserted = _inserted_in_new_blocks(spark, paths, staged, first)
    flags = [(F.substring(F.col(VECTOR_COLUMN), i + 1, 1) == F.lit("1")).alias(name)
             for i, name in enumerate(cut_flag_columns(k))]
    added = {s.block_id: s for s in summarize_blocks(inserted.select(*table.column_names, BLOCK_ID_COLUMN, *flags),
                                                     table, k, range_sets)}
    unknown = sum(1 << p for p in staged.stale_cuts)
    by_id = {b.block_id: b for b in layout.blocks}
    blocks = [b for b in layout.blocks if str(b.block_id) not in staged.blocks]
    for key, meta in sorted(written.blocks.items(), key=lambda kv: int(kv[0])):
        block_id, old = int(key), by_id.get(int(meta["from"]))
        new = added.get(block_id)
        if old is None:  # a new block: its rows are all new
            blocks.append(block_record(new, meta, union_bits=new.union_bits | unknown, all_bits=new.all_bits & ~unknown,
                                       leaves=staged.new_blocks[block_id - first - len(staged.blocks)]))
            continue
        change = staged.blocks[str(old.block_id)]
        rows = old.row_count - change["deleted"] + change["inserted"]
        if new is None:  # only lost rows: statistics never shrink
            blocks.append(replace(old, block_id=block_id, row_count=rows, bytes=meta["bytes"], path=meta["path"]))
            continue
        stats = {c: merge_column_stats(old.stats.get(c), new.stats.get(c), range_sets)
                 for c in sorted(set(old.stats) | set(new.stats))}
        blocks.append(BlockRecord(block_id, rows, meta["bytes"], meta["path"], stats,
                                  old.union_bits | new.union_bits | unknown,
                                  old.all_bits & new.all_bits & ~unknown, leaves=old.leaves))
    cuts = [replace(c, source_versions=()) if c.position in staged.stale_cuts else c for c in layout.cuts]
    updates = [CutUpdate(r.version_id, r.position, r.old_source_versions, Path(r.keys_file).read_bytes(),
                         tuple(sorted((t, version if (t, v) == (table.name, staged.replaces) else v)
                                      for t, v in r.old_source_versions)))
               for r in staged.repairs if r.keys_file]
    plan = {**(catalog.plan(staged.replaces) or {}), "changes_from": staged.replaces}
    applied = publish(catalog, version, "activate_changes", cuts=cuts, plan=plan, trees=layout.trees, blocks=blocks,
                      input_fingerprint=_fingerprint(layout, staged, verified), replaces=staged.replaces,
                      cut_updates=updates)
    return record_metrics(paths, "activate_changes", {
        "version": version, "replaces": staged.replaces, "blocks": len(blocks),
        "blocks_changed": len(written.blocks), "rows": sum(b.row_count for b in blocks),
        "cuts_repaired": len(applied), "cuts_stale": len(staged.stale_cuts) + len(staged.repairs) - len(updates),
        "seconds": round(time.monotonic() - t0, 2)})


def _fingerprint(layout, staged: StagedChanges, verified: VerifiedChanges) -> str | None:
    """The partition's rows fingerprint after the batch: the checksum is a sum of row hashes,
    so the base's plus the inserted rows' minus the deleted rows' (None if the base has none)."""
    base = str(layout.version.params.get("input_fingerprint") or "")
    try:
        rows, checksum = (int(x) for x in base.split(":"))
    except ValueError:
        return None
    return (f"{rows + staged.inserted_rows - staged.deleted_rows}:"
            f"{checksum + int(staged.inserted_checksum) - int(staged.deleted_checksum)}")


# ---------------------------------------------------------------------------
# all steps in one process


CHANGES = Flow("changes", (
    Step("stage_changes", lambda c: stage_changes(c.spark, c.paths, c.catalog, c.schema, c.input("inserted"),
                                                  c.input("deleted"))),
    Step("write_changes", lambda c: write_changes(c.spark, c.paths, c.catalog, c.schema)),
    Step("verify_changes", lambda c: verify_changes(c.spark, c.paths, c.catalog, c.schema)),
    Step("activate_changes", lambda c: activate_changes(c.spark, c.paths, c.catalog, c.schema, c.range_sets)),
), declared=CHANGES_STEPS)


def apply_changes_in_process(spark, catalog: Catalog, schema: Schema, paths: RunPaths, inserted: str | None,
                             deleted: str | None, range_sets: int = DEFAULT_RANGE_SETS) -> dict:
    """The four steps in order in one Spark session (`layout changes apply`, tests, the
    benchmark); the layout_changes DAG runs the same steps as separate jobs."""
    inputs = {"inserted": inserted, "deleted": deleted}
    return run_steps(CHANGES, RunContext(spark, catalog, schema, paths, inputs, range_sets))


__all__ = ["CHANGES", "StagedChanges", "activate_changes", "apply_changes_in_process",
           "read_batch", "stage_changes", "verify_changes", "write_changes"]
