"""Plain, immutable records that the layout catalog stores and hands back.

They hold only JSON-ready data (predicates as `predicates.dumps` text, stats
values in `predicates.value_to_json` encoding) so that a record read back from
the database compares equal to the one that was written, on every backend.
"""

from __future__ import annotations

import datetime as dt
import operator
from dataclasses import dataclass, field
from typing import Any, Iterable

from pyroaring import BitMap64

CUT_KINDS = ("simple", "join_induced", "opaque")
STATES = ("building", "active", "retired", "failed", "purged")
UNPARTITIONED = ""  # the partition name of a table that has no partitions


@dataclass(frozen=True, slots=True)
class CutRecord:
    """One cut (a predicate used as a layout feature) at a fixed bit position.

    `literal_keys`, for a join-induced cut, is `BitMap64(...).serialize()` of
    the key values that satisfy it; `source_versions` names the dimension
    layouts (table, version_id) that the keys were computed from, so a reader
    can tell when they went stale.
    """

    position: int
    predicate: str
    sql: str
    kind: str
    path: tuple[str, ...] = ()
    literal_keys: bytes | None = None
    source_versions: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in CUT_KINDS:
            raise ValueError(f"cut kind must be one of {CUT_KINDS}, not {self.kind!r}")
        if self.position < 0:
            raise ValueError(f"cut position must be >= 0, not {self.position}")

    def keys(self) -> BitMap64 | None:
        """The key values of a join-induced cut, or None when there are none."""
        if self.literal_keys is None:
            return None
        return BitMap64.deserialize(self.literal_keys)


@dataclass(frozen=True, slots=True)
class CutUpdate:
    """A repaired join-induced cut of another table's active version (MTO §5.2),
    written in the transaction that activates the change that made it necessary.

    It is applied only while version `version_id` is active and its cut at
    `position` still names `old_source_versions`: a cut changed meanwhile is
    left alone (and so stays stale, which is safe).
    """

    version_id: int
    position: int
    old_source_versions: tuple[tuple[str, int], ...]
    literal_keys: bytes
    source_versions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class BlockRecord:
    """One block of a layout: its files, column stats and cut bit vectors.

    Bit i of `union_bits` is set when some row satisfies cut i, bit i of
    `all_bits` when every row does; both may exceed 64 bits. `leaves` is the
    block's lineage in a tree layout: entry t is the sorted, distinct leaf ids
    of tree t that hold the block's rows (one leaf for a qd-tree or MTO block,
    possibly several for a Pando block made of cells). It is empty for layouts
    without trees; an empty entry, or a missing one, means "not known", and
    the router then never skips the block by that tree. An int entry is read
    as a one-leaf set, so `leaves=(3,)` means leaf 3 of tree 0.

    `cells`, for a layout of two or more trees (Pando), lists the distinct
    k-tuples (one leaf id per tree) of the block's rows, taken from the rows
    themselves: the router reads the block only when every tree admits all
    leaves of one of them (tighter than intersecting the trees' block sets,
    which may pair leaves of different rows). Empty means not known: the
    trees are then intersected per tree only.
    """

    block_id: int
    row_count: int
    bytes: int
    path: str
    stats: dict[str, dict[str, Any]]
    union_bits: int
    all_bits: int
    leaves: tuple[tuple[int, ...], ...] = ()
    cells: tuple[tuple[int, ...], ...] = ()

    def __post_init__(self) -> None:
        if self.union_bits < 0 or self.all_bits < 0:
            raise ValueError("bit vectors must be non-negative integers")
        object.__setattr__(self, "leaves", leaf_sets(self.leaves))
        cells = tuple(sorted({tuple(int(leaf) for leaf in cell) for cell in self.cells}))
        if len({len(cell) for cell in cells}) > 1:
            raise ValueError("every cell of a block names one leaf per tree")
        object.__setattr__(self, "cells", cells)


def leaf_sets(leaves: Iterable[int | Iterable[int]]) -> tuple[tuple[int, ...], ...]:
    """`BlockRecord.leaves` normalized: per tree, the sorted distinct leaf ids,
    an int entry read as a one-leaf set (the single-leaf lineage of old records)."""
    out = []
    for tree, entry in enumerate(leaves):
        try:
            ids = (operator.index(entry),)
        except TypeError:
            ids = tuple(map(operator.index, entry))
        if any(leaf < 0 for leaf in ids):
            raise ValueError(f"leaf ids must be >= 0, not {ids} (tree {tree})")
        out.append(tuple(sorted(set(ids))))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class TreeNodeRecord:
    """One node of a layout tree (qd-tree, MTO: tree 0; Pando: trees 0..k-1).

    An internal node routes on the cut at bit position `cut` of its version's
    cuts: rows with bit 1 go to the node `left`, rows with bit 0 to `right`.
    A leaf has `leaf_id` instead, one of the ids that entry `tree` of a block's
    `BlockRecord.leaves` lists when some of the block's rows reach this leaf.
    `rows` is the number of rows the layout put under the node.
    """

    tree: int
    node_id: int
    rows: int
    cut: int | None = None
    left: int | None = None
    right: int | None = None
    leaf_id: int | None = None

    def __post_init__(self) -> None:
        where = f"tree {self.tree} node {self.node_id}"
        numbers = {"tree": self.tree, "node_id": self.node_id, "rows": self.rows, "cut": self.cut,
                   "left": self.left, "right": self.right, "leaf_id": self.leaf_id}
        negative = [name for name, value in numbers.items() if value is not None and value < 0]
        if negative:
            raise ValueError(f"{where}: {', '.join(negative)} must be >= 0")
        internal = (self.cut, self.left, self.right)
        if self.leaf_id is None:
            if None in internal:
                raise ValueError(f"{where}: an internal node needs cut, left and right "
                                 f"(a leaf needs leaf_id), got cut={self.cut} left={self.left} "
                                 f"right={self.right}")
            if self.left == self.right or self.node_id in (self.left, self.right):
                raise ValueError(f"{where}: left ({self.left}) and right ({self.right}) must be "
                                 f"two other nodes")
        elif internal != (None, None, None):
            raise ValueError(f"{where}: a leaf (leaf_id={self.leaf_id}) has no cut, left or right")

    @property
    def is_leaf(self) -> bool:
        return self.leaf_id is not None


def tree_roots(nodes: Iterable[TreeNodeRecord]) -> dict[int, list[int]]:
    """Per tree, the ids of its nodes that are nobody's child (a sound tree has one)."""
    children: dict[int, set[int]] = {}
    ids: dict[int, list[int]] = {}
    for node in nodes:
        ids.setdefault(node.tree, []).append(node.node_id)
        if not node.is_leaf:
            children.setdefault(node.tree, set()).update((node.left, node.right))
    return {tree: [n for n in sorted(found) if n not in children.get(tree, set())]
            for tree, found in ids.items()}


def leaf_of(nodes: Iterable[TreeNodeRecord], tree: int, bits: str) -> int:
    """The leaf id of `tree` that a row with bit vector `bits` is routed to.

    Character j of `bits` is the row's bit for cut j; '1' goes left, '0' right.
    """
    nodes = [node for node in nodes if node.tree == tree]
    roots = tree_roots(nodes).get(tree, [])
    if len(roots) != 1:
        raise ValueError(f"tree {tree} has {len(roots)} roots, not 1")
    by_id = {node.node_id: node for node in nodes}
    node = by_id[roots[0]]
    for _ in range(len(by_id)):  # a path visits each node at most once
        if node.is_leaf:
            return node.leaf_id
        if node.cut >= len(bits):
            raise ValueError(f"tree {tree} node {node.node_id} routes on cut {node.cut}, "
                             f"but the bit vector has only {len(bits)} bits")
        bit = bits[node.cut]
        if bit not in "01":
            raise ValueError(f"bit vectors are strings of '0' and '1', not {bits!r}")
        child = node.left if bit == "1" else node.right
        if child not in by_id:
            raise ValueError(f"tree {tree} node {node.node_id} has no child node {child}")
        node = by_id[child]
    raise ValueError(f"tree {tree} has a cycle")


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """One layout version of a (table, partition) and where it is in its life.

    `n_blocks` is the number of block ids reserved by `begin_version`;
    `block_ids` is that reserved range. `failed_at` is when it was last marked
    failed (None unless failed). `replaces` is the version this one replaces:
    the one that served the partition when `begin_version` made it (None: none
    did), the only version activating it may retire, and once it is activated
    the one it retired (`activate(replaces=...)` may name it instead).
    """

    version_id: int
    table: str
    partition: str
    state: str
    optimizer: str
    params: dict[str, Any]
    run_id: str
    created_at: dt.datetime
    activated_at: dt.datetime | None
    n_blocks: int
    retired_at: dt.datetime | None = None
    reason: str | None = None
    block_ids: range = field(default=range(0))
    failed_at: dt.datetime | None = None
    replaces: int | None = None


@dataclass(frozen=True, slots=True)
class ActiveLayout:
    """A version with its cuts (by position), blocks (by block id) and tree nodes
    (by tree, then node id; empty for layouts without trees)."""

    version: VersionInfo
    cuts: tuple[CutRecord, ...]
    blocks: tuple[BlockRecord, ...]
    trees: tuple[TreeNodeRecord, ...] = ()


@dataclass(frozen=True, slots=True)
class PurgeRecord:
    """A folder that garbage collection deleted: a retired or failed version's
    block folder, or (version_id None) an orphaned run staging folder."""

    version_id: int | None
    path: str
    bytes: int
    purged_at: dt.datetime


@dataclass(frozen=True, slots=True)
class TableInfo:
    name: str
    location: str
    partition_column: str | None
    schema_json: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CatalogSnapshot:
    """Every active layout of some tables, as of one moment.

    `data_fingerprints` maps a version id to the fingerprint of the rows it
    was built from (`params["input_fingerprint"]`), for the active versions and
    every version an active join-induced cut was computed from: a cut stays
    valid while its sources hold the same data, even under a new layout.
    """

    tables: dict[str, TableInfo]
    layouts: dict[tuple[str, str], ActiveLayout]
    data_fingerprints: dict[int, str] = field(default_factory=dict)

    def active_versions(self) -> dict[str, set[int]]:
        """The active version ids of each table (one per partition)."""
        out: dict[str, set[int]] = {}
        for (name, _), layout in self.layouts.items():
            out.setdefault(name, set()).add(layout.version.version_id)
        return out

    def layouts_of(self, table: str) -> list[ActiveLayout]:
        """The active layouts of one table, sorted by partition."""
        found = [layout for (name, _), layout in self.layouts.items() if name == table]
        return sorted(found, key=lambda layout: layout.version.partition)


QUERY_SOURCES = ("route", "rewrite", "explain", "run", "demo", "import", "api")


@dataclass(frozen=True, slots=True)
class RefRead:
    """What one table reference of a routed query read: its blocks (all active
    versions of the table together) against the blocks it could have read.

    `block_ids` is `BitMap64(ids).serialize()` of the blocks read, None when the
    reference was read in full (no active layout, or the query was not analyzed).
    """

    ref: int  # position of the reference in the query (a self-join has several)
    table: str
    blocks_read: int
    blocks_total: int
    rows_read: int
    rows_total: int
    versions: tuple[int, ...] = ()
    block_ids: bytes | None = None

    @property
    def read_all(self) -> bool:
        return self.block_ids is None

    def blocks(self) -> BitMap64:
        """The ids of the blocks read (empty for a reference read in full)."""
        return BitMap64() if self.block_ids is None else BitMap64.deserialize(self.block_ids)


@dataclass(frozen=True, slots=True)
class QueryRecord:
    """One query of the history: when, what, its template, and what it read.

    `fingerprint` names the query's template (the SQL with its literals
    abstracted), so instances of one template share it. `reads` is empty for an
    imported query (it was not routed here) and for one that could not be parsed.
    """

    ts: dt.datetime
    sql: str
    fingerprint: str
    source: str
    analyzed: bool = True
    reads: tuple[RefRead, ...] = ()
    query_id: int | None = None

    def __post_init__(self) -> None:
        if self.source not in QUERY_SOURCES:
            raise ValueError(f"query source must be one of {QUERY_SOURCES}, not {self.source!r}")
        if self.ts.tzinfo is None:
            raise ValueError("query timestamps must be timezone-aware")


@dataclass(frozen=True, slots=True)
class CalibrationRecord:
    """One stored `layout calibrate` measurement: on the warehouse's storage,
    rewriting a block (shuffle, encode, compress, write) took
    `write_seconds_per_block`, reading it back fully `read_seconds_per_block`,
    so w = write / read is what the workload-shift reward (MTO §5.1.2) divides by.
    Field names match `calibrate.Calibration`, so either can be recorded."""

    calibration_id: int
    measured_at: dt.datetime
    w: float
    write_seconds_per_block: float
    read_seconds_per_block: float
    block_rows: int
    blocks: int
    rounds: int | None
    location: str
