"""Repair of join-induced cuts when a table on their path changes (MTO §5.2).

A join-induced cut of a fact table F with path F -> P1 -> ... -> Pn keeps its
literal keys K: the keys of P1 whose chain reaches a row of Pn satisfying
the cut's predicate. When a batch changes table D = Pj, only the changed
rows of D are evaluated (joined down the path to the source with the
current data), giving per key of D whether it newly reaches the predicate
(`on`), no longer does (`off`) or was deleted for good (`gone`). A changed
row's flag is the source predicate itself when D is the source table; below
that it is whether the row's foreign key is among the literal keys of the
same path's cut on D (MTO's candidate cuts keep one per path prefix, stored
and current in D's own layout), read from the catalog without touching the
tables below; only when no such cut is stored is the row joined down the path
in Spark. These move
up the path one level at a time: the rows of P(j-1) that reference a
touched key are read (only blocks whose statistics may hold such a key), and
their own keys flip the same way. At P1 the new key set is
(K - off) | on. Work is proportional to the batch and to the rows that
reference it, not to D.

The repair is refused, and the cut is left to go stale (the router then
stops using it, as before), when the change would move unchanged rows
across the cut or break referential integrity: some row of the next table
(or of F) references a key that flipped or was deleted. Keys must be
non-negative integers (Roaring bitmaps); anything else is refused as well.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from pyroaring import BitMap64
from pyspark.sql import functions as F

from layout_core.base.schema import Schema, TableSchema
from layout_core.catalog import ActiveLayout, CatalogSnapshot
from layout_core.predicates import Between, Column, JoinInduced, dumps, in_list, loads, to_sql
from layout_core.skipping.router import column_stats, cut_is_current
from layout_core.skipping.zonemaps import ZoneMaps, might_match_blocks
from layout_core.spark.induced import with_induced_flags

log = logging.getLogger("layout.changes")

# More keys than this are matched by a broadcast join, and blocks are pruned by their range only.
IN_LIST_LIMIT = 10_000
INTEGER_TYPES = frozenset({"tinyint", "smallint", "int", "integer", "bigint", "long", "short", "byte"})


@dataclass(frozen=True)
class KeyChanges:
    """How a batch moves the keys of one table on a cut's path."""

    on: BitMap64  # keys that now reach a source row satisfying the cut and did not before
    off: BitMap64  # keys that did and no longer do
    gone: BitMap64  # keys deleted and not inserted again

    @property
    def touched(self) -> BitMap64:
        return self.on | self.off | self.gone

    @staticmethod
    def of(deleted_keys: np.ndarray, deleted_flags: np.ndarray, inserted_keys: np.ndarray,
           inserted_flags: np.ndarray) -> KeyChanges:
        """From the old rows' keys and flags (deleted, updates included) and the new rows'."""
        old_true = BitMap64(deleted_keys[deleted_flags].tolist())
        new_true = BitMap64(inserted_keys[inserted_flags].tolist())
        return KeyChanges(new_true - old_true, old_true - new_true,
                          BitMap64(deleted_keys.tolist()) - BitMap64(inserted_keys.tolist()))


def repaired_keys(keys: BitMap64, changes: KeyChanges) -> BitMap64:
    """The literal keys after the changes at the fact table's parent."""
    return (keys - changes.off) | changes.on


@dataclass(frozen=True)
class CutRepair:
    """The outcome for one cut: new literal keys, or why it goes stale (`reason`)."""

    version_id: int
    table: str
    partition: str
    position: int
    old_source_versions: tuple[tuple[str, int], ...]
    literal_keys: bytes | None  # None when stale
    reason: str = ""
    keys_before: int = 0
    keys_after: int = 0


def cuts_to_repair(snapshot: CatalogSnapshot, table: str, replaced: int):
    """(layout, cut) of every other table's active version whose join-induced cut
    was computed from `replaced` of `table` and is current now."""
    active = snapshot.active_versions()
    for (name, _), layout in sorted(snapshot.layouts.items()):
        if name == table:
            continue
        for cut in layout.cuts:
            if (cut.kind == "join_induced" and (table, replaced) in cut.source_versions
                    and cut_is_current(cut.source_versions, active, snapshot.data_fingerprints)):
                yield layout, cut


def repair_cuts(spark, snapshot: CatalogSnapshot, schema: Schema, table: str, replaced: int,
                inserted, deleted, frames: Callable[[frozenset[str]], Mapping[str, object]],
                scratch: Path) -> list[CutRepair]:
    """Every current cut of another table computed from `table`'s `replaced`,
    repaired for a batch: `inserted` (new rows of `table`, updates included) and
    `deleted` (the old rows removed, updates included) are DataFrames with
    `table`'s columns (None when the batch has none); `frames(tables)` gives the
    current data of those tables (`pipeline.steps.source_frames`), called only for
    the tables below a path whose keys are not stored; `scratch` is a folder for key lists."""
    found = list(cuts_to_repair(snapshot, table, replaced))
    predicates = {c.predicate: loads(c.predicate) for _, c in found}
    placed = {text: _level(p, table) for text, p in predicates.items()}
    usable = {text: predicates[text] for text, (level, _) in placed.items() if level is not None}
    stored = stored_path_keys(snapshot, schema.table(table))
    # one small Spark job per side of the batch flags its rows for every cut at once
    old = _flags_of_rows(deleted, table, usable, frames, stored)
    new = _flags_of_rows(inserted, table, usable, frames, stored)
    out = []
    walked: dict[str, tuple[KeyChanges | None, str]] = {}  # predicate -> changes at the fact's parent
    referenced: dict[tuple, object] = {}  # shared reads of referencing rows
    for layout, cut in found:
        predicate = predicates[cut.predicate]
        if cut.predicate not in walked:
            level, why = placed[cut.predicate]
            walked[cut.predicate] = (None, why) if level is None else _changes_at_parent(
                spark, snapshot, schema, predicate, level, old[cut.predicate], new[cut.predicate], scratch,
                referenced)
        changes, reason = walked[cut.predicate]
        keys = cut.keys()
        if changes is not None and keys is None:
            changes, reason = None, "its literal keys were never stored"
        if changes is not None:
            hop = predicate.hops[-1]
            check = ("count", layout.version.version_id, hop.child_column, changes.touched.serialize())
            if check not in referenced:  # cuts of one layout through one foreign key share the check
                referenced[check] = _referencing(spark, schema, layout, snapshot, hop.child_column,
                                                 changes.touched, scratch)
            if referenced[check]:
                changes, reason = None, (f"{referenced[check]} rows of {layout.version.table} reference keys "
                                         f"of {hop.parent_table} that the batch changed or deleted")
        after = None if changes is None else repaired_keys(keys, changes) if changes.on or changes.off else keys
        repair = CutRepair(layout.version.version_id, layout.version.table, layout.version.partition,
                           cut.position, cut.source_versions,
                           None if after is None else cut.literal_keys if after is keys else after.serialize(),
                           reason, len(keys) if keys is not None else 0, len(after) if after is not None else 0)
        log.info("cut %d of %s %s: %s", cut.position, layout.version.table, layout.version.partition or "",
                 f"repaired, {repair.keys_before} -> {repair.keys_after} keys" if changes is not None
                 else f"left to go stale: {reason}")
        out.append(repair)
    return out


def _level(cut: JoinInduced, table: str) -> tuple[int | None, str]:
    """The hop whose parent is `table` on the cut's path, or (None, why it cannot be repaired)."""
    levels = [i for i, hop in enumerate(cut.hops) if hop.parent_table == table]
    if len(levels) != 1:
        return None, f"{table} appears {len(levels)} times on the cut's path"
    return levels[0], ""


def stored_path_keys(snapshot: CatalogSnapshot, table: TableSchema) -> dict[str, BitMap64]:
    """Literal keys of the current join-induced cuts of `table`'s active layouts whose
    foreign key column is an integer (what a bitmap can hold), by predicate text: a
    row of `table` reaches the cut's source exactly when its foreign key is one of them."""
    active = snapshot.active_versions()
    out = {}
    for (name, _), layout in sorted(snapshot.layouts.items()):
        if name != table.name:
            continue
        for cut in layout.cuts:
            if (cut.kind != "join_induced" or cut.predicate in out
                    or not cut_is_current(cut.source_versions, active, snapshot.data_fingerprints)):
                continue
            predicate = loads(cut.predicate)
            keys = cut.keys()
            if (keys is not None and not predicate.negated
                    and table.spark_type(predicate.hops[-1].child_column).lower() in INTEGER_TYPES):
                out[cut.predicate] = keys
    return out


def _flags_of_rows(rows, table: str, cuts: Mapping[str, JoinInduced], frames, stored: Mapping[str, BitMap64]
                   ) -> dict[str, tuple]:
    """Per cut: (keys of `rows`, whether each reaches a source row satisfying the cut). At
    the source the predicate itself; below it, the row's foreign key among the `stored`
    keys of the path's prefix (`stored_path_keys`), or else the rows joined down the path
    in Spark (`frames(tables)`, the tables below)."""

    empty = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=bool))
    if rows is None or not cuts:
        return {text: empty for text in cuts}
    texts = sorted(cuts)
    levels = {text: _level(cuts[text], table)[0] for text in texts}
    below = {text: JoinInduced(tuple(cuts[text].hops[:levels[text]]), cuts[text].source)
             for text in texts if levels[text] > 0}
    path_texts = {text: dumps(p) for text, p in below.items()}
    by_keys = {text: stored[path] for text, path in path_texts.items() if path in stored}
    joined = [text for text in below if text not in by_keys]
    marked = (with_induced_flags(rows, [below[t] for t in joined],
                                 frames(frozenset(source_frame_tables([cuts[t] for t in joined], table))))
              if joined else None)
    frame = marked.frame if marked else rows
    flag_of = dict(zip(joined, marked.columns)) if marked else {}
    fk_of = {text: below[text].hops[-1].child_column for text in by_keys}
    key_of = {text: cuts[text].hops[levels[text]].parent_column for text in texts}
    # as SQL text: one call into the JVM however many cuts (building Columns costs one per part)
    columns = [f"CAST(`{k}` AS BIGINT) AS `_key_{k}`" for k in sorted(set(key_of.values()) | set(fk_of.values()))]
    columns += [f"`{flag_of[t]}` AS `_f{i}`" for i, t in enumerate(texts) if t in flag_of]
    columns += [f"COALESCE(({to_sql(cuts[t].source)}), FALSE) AS `_f{i}`"
                for i, t in enumerate(texts) if levels[t] == 0]
    data = frame.selectExpr(*columns).toPandas()
    negative = {path_texts[t] for t, fk in fk_of.items() if (data[f"_key_{fk}"] < 0).any()}
    if negative:  # a bitmap holds no negative key: join those paths instead
        return _flags_of_rows(rows, table, cuts, frames, {k: v for k, v in stored.items() if k not in negative})
    out = {}
    for i, text in enumerate(texts):
        keys = data[f"_key_{key_of[text]}"]
        present = keys.notna().to_numpy()
        if text in by_keys:
            fks = data[f"_key_{fk_of[text]}"]
            known = fks.notna().to_numpy()  # a NULL foreign key reaches no row
            flags = np.zeros(len(data), dtype=bool)
            flags[known] = np.isin(fks[known].to_numpy(dtype=np.int64), np.asarray(by_keys[text], dtype=np.int64))
        else:
            flags = data[f"_f{i}"].to_numpy(dtype=bool)
        out[text] = (keys[present].to_numpy(dtype=np.int64), flags[present])
    return out


def _changes_at_parent(spark, snapshot, schema: Schema, cut: JoinInduced, level: int, old: tuple, new: tuple,
                       scratch: Path, referenced: dict) -> tuple[KeyChanges | None, str]:
    """The changes of the keys of the fact table's parent, or (None, why not), from the
    changed table's (keys, flags) before (`old`) and after (`new`) the batch."""
    if (old[0] < 0).any() or (new[0] < 0).any():
        return None, f"the batch holds negative keys in {cut.hops[level].parent_column}"
    changes = KeyChanges.of(*old, *new)
    for hop, above in zip(cut.hops[level:-1], cut.hops[level + 1:]):  # up to the fact table's parent
        if not changes.touched:
            break
        layouts = snapshot.layouts_of(hop.child_table)
        if not layouts:
            return None, f"{hop.child_table} has no active layout to read its references from"
        check = ("rows", hop.child_table, hop.child_column, above.parent_column, changes.touched.serialize())
        if check not in referenced:
            referenced[check] = _referencing_rows(spark, schema, layouts, snapshot, hop.child_column,
                                                  changes.touched, above.parent_column, scratch)
        pairs = referenced[check]
        if not len(pairs):
            return KeyChanges(BitMap64(), BitMap64(), BitMap64()), ""
        fks, own = pairs[:, 0], pairs[:, 1]
        if np.isin(fks, np.asarray(changes.gone, dtype=np.int64)).any():
            return None, f"rows of {hop.child_table} reference deleted keys of {hop.parent_table}"
        if (own < 0).any():
            return None, f"{hop.child_table}.{above.parent_column} holds negative keys"
        changes = KeyChanges(BitMap64(own[np.isin(fks, np.asarray(changes.on, dtype=np.int64))].tolist()),
                             BitMap64(own[np.isin(fks, np.asarray(changes.off, dtype=np.int64))].tolist()),
                             BitMap64())
    return changes, ""


def candidate_blocks(layout: ActiveLayout, column: Column, keys: Sequence) -> list:
    """The blocks of a layout whose statistics may hold one of `keys` (sorted, e.g. a
    Roaring bitmap) in `column`: by the keys themselves, or by their range when many."""
    if not len(keys):
        return []
    span = Between(column, keys[0], keys[-1])

    def zone_maps(ranges: bool) -> ZoneMaps:  # of this column only (a repair asks per cut and layout)
        stats = [column_stats({column.name: b.stats[column.name] if ranges else
                               {**b.stats[column.name], "ranges": ()}} if column.name in b.stats else {},
                              b.row_count) for b in layout.blocks]
        return ZoneMaps.of(stats, [b.row_count for b in layout.blocks])

    # min/max against the keys' range first: cheap, and new keys usually lie beyond every block
    might = might_match_blocks(span, zone_maps(ranges=False))
    if might.any():
        might &= might_match_blocks(in_list(column, keys) if len(keys) <= IN_LIST_LIMIT else span,
                                    zone_maps(ranges=True))
    return [b for b, m in zip(layout.blocks, might) if m]


def key_filtered(spark, schema: Schema, layouts: Sequence[ActiveLayout], snapshot: CatalogSnapshot, column: str,
                 keys: BitMap64, scratch: Path):
    """The rows of some layouts of one table whose `column` holds one of `keys` (None: no block may);
    many keys are joined as a Parquet file written to `scratch`."""

    table = schema.table(layouts[0].version.table)
    paths = [b.path for layout in layouts for b in candidate_blocks(layout, table.column(column), keys)]
    if not paths:
        return None
    frame = spark.read.option("basePath", snapshot.tables[table.name].location).parquet(*paths)
    values = np.asarray(keys, dtype=np.int64)
    if len(values) <= IN_LIST_LIMIT:
        return frame.where(F.col(column).isin(values.tolist()))
    wanted = keys_frame(spark, scratch, values)
    return frame.join(wanted, frame[column] == wanted["_key"], "left_semi")


def keys_frame(spark, scratch: Path, values: np.ndarray, flags: Mapping[str, np.ndarray] | None = None):
    """A frame of `values` (`_key`) and optional boolean columns, written with pyarrow into a new
    file under `scratch` and read back: fast for millions of keys, unlike a Python list."""


    scratch.mkdir(parents=True, exist_ok=True)
    path = scratch / f"keys-{uuid.uuid4().hex}.parquet"
    pq.write_table(pa.table({"_key": np.asarray(values, dtype=np.int64), **(flags or {})}), path)
    return spark.read.parquet(str(path))


def _referencing(spark, schema: Schema, layout: ActiveLayout, snapshot: CatalogSnapshot, column: str,
                 keys: BitMap64, scratch: Path) -> int:
    """How many rows of one layout reference one of `keys` through `column`."""
    frame = key_filtered(spark, schema, [layout], snapshot, column, keys, scratch)
    return 0 if frame is None else frame.count()


def _referencing_rows(spark, schema: Schema, layouts, snapshot, column: str, keys: BitMap64,
                      own_key: str, scratch: Path) -> np.ndarray:
    """(referenced key, own key) of the rows whose `column` holds one of `keys`, as an (n, 2) array."""
    frame = key_filtered(spark, schema, layouts, snapshot, column, keys, scratch)
    if frame is None:
        return np.zeros((0, 2), dtype=np.int64)
    data = frame.select(column, own_key).where(f"`{own_key}` IS NOT NULL").toPandas()
    return data.to_numpy(dtype=np.int64).reshape(-1, 2)


def source_frame_tables(cuts: Sequence[JoinInduced], changed: str) -> set[str]:
    """The tables whose current data the repair of `cuts` joins with: those below
    the changed table on each path (the changed table's own rows come from the batch)."""
    out: set[str] = set()
    for cut in cuts:
        for i, hop in enumerate(cut.hops):
            if hop.parent_table == changed:
                out |= {h.parent_table for h in cut.hops[:i]} | {h.child_table for h in cut.hops[:i]}
    return out - {changed}


__all__ = ["CutRepair", "KeyChanges", "candidate_blocks", "cuts_to_repair", "key_filtered", "keys_frame",
           "repair_cuts", "repaired_keys", "source_frame_tables", "stored_path_keys"]
