"""Route a query to the blocks it must read: a pure function of query and catalog.

For every base-table reference of the query, and every partition of that
table's active layouts, a block is skipped only when one of these is proven:

1. the query's predicate on the table implies cut i, and no row of the block
   satisfies cut i (bit i of its union vector is 0);
2. the query's predicate and cut i are disjoint, and every row of the block
   satisfies cut i (bit i of its all vector is 1);
3. per-column range sets and null counts (zone maps: one range, min/max)
   show no row can match;
4. some tree of the layout (qd-tree and MTO keep one, Pando k) skips every
   leaf holding rows of the block (its lineage, `BlockRecord.leaves`). A
   query skips a leaf when a cut j on the leaf's root-to-leaf path rules it
   out: the leaf is on the bit-1 (left) side of j and the query is disjoint
   with cut j, or on the bit-0 (right) side and the query implies cut j
   (Pando §5: the block sets of the trees are intersected). A block whose
   lineage for a tree is unknown is never skipped by that tree; when some
   tree is not sound, or routes on a cut the layout does not have, no tree
   skips anything (the catalog's trees cannot be trusted). With two or more
   trees, a block whose cells are known (`BlockRecord.cells`: the k-tuples
   of leaf ids of its rows) is also skipped when no cell has all k leaves
   admitted: the trees' block sets may meet in a block only through leaves
   of different rows.

Each is a verdict of ROWS_CANNOT_MATCH for the block (`skipping.verdict`).
Then, unless turned off (`dips=False`):

5. a data-induced predicate (diP) of a join: the union of the join column's
   range sets over the blocks another reference keeps, on an edge of the
   analysis, meets none of the block's ranges on its own join column
   (`skipping.dips`).

The query's predicate on a table is its filter plus the join-induced
predicates its joins push onto it (see sql.analysis). A join-induced cut is
used only while the dimension tables it was computed from hold the same
data: the same active versions, or new versions built from identical rows.
Anything not proven means "read" (ROWS_MIGHT_MATCH). A query that cannot be
analyzed, or a table without an active layout, is read in full with a
warning; routing never raises.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Mapping, NamedTuple, Sequence

import numpy as np

from layout_core.algorithms.types import mask_bits, masks_bits
from layout_core.catalog import ActiveLayout, CatalogSnapshot, TreeNodeRecord, check_trees
from layout_core.catalog.records import tree_roots
from layout_core.predicates import (
    TRUE, ColumnStats, JoinInduced, Predicate, PredicateVisitor, Prepared, atoms, loads,
    satisfiable, value_from_json,
)
from layout_core.base.schema import Schema
from layout_core.sql.analysis import DEFAULT_MAX_DEPTH, QueryAnalysis, QueryError, analyze
from layout_core.skipping.dips import NO_RANGES, DipEffect, KeyRanges, exchange_dips, key_ranges
from layout_core.skipping.rangesets import ranges_from_json
from layout_core.skipping.verdict import Verdict
from layout_core.skipping.zonemaps import ZoneMaps, might_match_blocks

# A layout built without any dimension layout in the catalog records its
# join-induced cut sources as (table, UNMANAGED_SOURCE).
UNMANAGED_SOURCE = 0

log = logging.getLogger("layout.router")


@dataclass(frozen=True)
class LayoutIndex:
    """One active layout, decoded once so routing a query costs no JSON parsing."""

    table: str
    partition: str
    version_id: int
    cuts: tuple[Predicate | None, ...]  # None: unusable (stale join-induced cut)
    block_ids: tuple[int, ...]
    row_counts: tuple[int, ...]
    union_bits: tuple[int, ...]
    all_bits: tuple[int, ...]
    stats: tuple[dict[str, ColumnStats], ...]
    # Per block, per tree: the leaf ids holding its rows (BlockRecord.leaves; () unknown).
    leaves: tuple[tuple[tuple[int, ...], ...], ...] = ()
    trees: tuple[TreeNodeRecord, ...] = ()  # the layout's tree nodes; () without trees
    # Per block, the k-tuples of leaf ids of its rows (BlockRecord.cells; () unknown), k >= 2 trees.
    cells: tuple[tuple[tuple[int, ...], ...], ...] = ()
    _key_ranges: dict = field(default_factory=dict, compare=False, repr=False)  # column -> KeyRanges

    @staticmethod
    def from_blocks(table: str, blocks, cuts, partition: str = "", version_id: int = 0,
                    trees=()) -> LayoutIndex:
        """From block records (or summaries) carrying block_id, row_count, stats,
        union_bits and all_bits, with stats in the catalog's JSON encoding, and
        `leaves` when they have them; `trees` are the layout's tree nodes."""
        return LayoutIndex(
            table, partition, version_id, tuple(cuts),
            tuple(b.block_id for b in blocks), tuple(b.row_count for b in blocks),
            tuple(b.union_bits for b in blocks), tuple(b.all_bits for b in blocks),
            tuple(column_stats(b.stats, b.row_count) for b in blocks),
            tuple(getattr(b, "leaves", ()) for b in blocks), tuple(trees),
            tuple(getattr(b, "cells", ()) for b in blocks),
        )

    @cached_property
    def zone_maps(self) -> ZoneMaps:
        """Built once per layout, read-only."""
        return ZoneMaps.of(self.stats, self.row_counts)

    def key_ranges(self, column: str) -> KeyRanges | None:
        """A column's statistics as diP keys (`skipping.dips`), built once per column;
        None when the layout has no usable statistics of it."""
        if column not in self._key_ranges:
            arrays = self.zone_maps.columns.get(column)
            if not self.block_ids:
                self._key_ranges[column] = NO_RANGES  # an empty layout: no row to match
            else:
                self._key_ranges[column] = None if arrays is None else key_ranges(arrays)
        return self._key_ranges[column]

    @cached_property
    def cut_keys(self) -> tuple[frozenset, ...]:
        """Each cut's `relation_keys` (empty for an unusable cut), computed once, not per query."""
        return tuple(frozenset() if c is None else relation_keys(c) for c in self.cuts)

    @cached_property
    def cuts_by_key(self) -> Mapping[object, tuple[int, ...]]:
        """`cut_keys` inverted, built once: a query finds the cuts it shares a key with
        without visiting the others (a fact table's layout has hundreds)."""
        return cuts_by_relation_key(self.cut_keys)

    @cached_property
    def tree_routes(self) -> tuple[TreeRoute, ...]:
        """The trees flattened for routing, built once; () without trees, or when
        any of them is not sound: when in doubt, the trees skip nothing."""
        try:
            return tree_routes(self.trees, self.leaves, len(self.cuts), len(self.block_ids))
        except Exception as e:  # noqa: BLE001 - a catalog we cannot trust must not fail routing
            log.warning("%s partition %r version %s: its trees are not used for routing: %s",
                        self.table, self.partition, self.version_id, e)
            return ()

    @cached_property
    def cut_bit_matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """(union, all): (blocks, cuts) bool, bit j of each block's union_bits and all_bits."""
        # (a query's masks have no bit past the cuts: bits beyond them are never asked)
        return masks_bits(self.union_bits, len(self.cuts)), masks_bits(self.all_bits, len(self.cuts))

    @cached_property
    def tree_leaf_matrices(self) -> tuple[np.ndarray, ...]:
        """Per routing tree, (blocks, leaves) bool: the block holds rows of the leaf."""
        return tuple(masks_bits(tree.blocks, len(tree.left)) for tree in self.tree_routes)

    @cached_property
    def cell_index(self) -> CellIndex | None:
        """The blocks' cells over the routing trees' leaf positions, built once;
        None without two sound trees or without any known cell."""
        return cell_index(self.tree_routes, self.cells, len(self.block_ids))


class TreeRoute(NamedTuple):
    """One tree, flattened for routing.

    Per leaf (in leaf id order): `left` and `right`, bit masks of the cut
    positions on its root-to-leaf path whose bit-1 (left) or bit-0 (right)
    side it is on. Per block: `blocks`, a bit mask over the leaves (in that
    order) holding its rows; every leaf when its lineage is unknown.
    """

    left: tuple[int, ...]
    right: tuple[int, ...]
    blocks: tuple[int, ...]
    leaf_ids: tuple[int, ...] = ()  # the leaf id at each position

    def admitted(self, masks: CutMasks) -> int:
        """The leaves the query cannot skip, as a bit mask over the leaves: a leaf's
        rows all satisfy cut j (left of j) or none does (right of j), so a query
        disjoint with, or implying, cut j needs none of them."""
        out = 0
        for leaf, (left, right) in enumerate(zip(self.left, self.right)):
            if not (left & masks.disjoint or right & masks.implied):
                out |= 1 << leaf
        return out


def tree_routes(nodes: Sequence[TreeNodeRecord], leaves: Sequence, n_cuts: int,
                n_blocks: int) -> tuple[TreeRoute, ...]:
    """Trees 0..k-1 of `nodes` ready for routing `n_blocks` blocks whose lineage
    is `leaves` (per block, per tree, leaf ids). Raises (CatalogError or
    ValueError) when the nodes are not sound trees over the layout's `n_cuts` cuts."""
    check_trees(list(nodes))
    by_tree: dict[int, list[TreeNodeRecord]] = {}
    for node in nodes:
        by_tree.setdefault(node.tree, []).append(node)
    return tuple(_tree_route(by_tree[t], [_lineage(leaves, b, t) for b in range(n_blocks)], n_cuts)
                 for t in range(len(by_tree)))


def _lineage(leaves: Sequence, block: int, tree: int):
    """The leaf ids of `tree` holding the rows of `block`; () when not recorded."""
    if block < len(leaves) and tree < len(leaves[block]):
        return leaves[block][tree]
    return ()


def _tree_route(nodes: list[TreeNodeRecord], lineage: list, n_cuts: int) -> TreeRoute:
    """One sound tree (`check_trees`) flattened: its leaves' path masks, its blocks' leaf masks."""
    by_id = {node.node_id: node for node in nodes}
    (root,) = tree_roots(nodes)[nodes[0].tree]
    paths: dict[int, tuple[int, int]] = {}  # leaf id -> (left mask, right mask)
    stack = [(root, 0, 0)]
    while stack:
        node_id, left, right = stack.pop()
        node = by_id[node_id]
        if node.is_leaf:
            paths[node.leaf_id] = (left, right)
            continue
        if node.cut >= n_cuts:  # the tree and the cuts disagree: trust neither
            raise ValueError(f"tree {node.tree} node {node.node_id} routes on cut {node.cut}, "
                             f"but the layout has {n_cuts} cuts")
        bit = 1 << node.cut
        stack += [(node.left, left | bit, right), (node.right, left, right | bit)]
    order = {leaf: i for i, leaf in enumerate(sorted(paths))}
    every = (1 << len(order)) - 1
    return TreeRoute(tuple(paths[leaf][0] for leaf in order), tuple(paths[leaf][1] for leaf in order),
                     tuple(_leaf_mask(ids, order, every) for ids in lineage), tuple(order))


def _leaf_mask(leaf_ids, order: dict[int, int], every: int) -> int:
    """The leaves holding a block's rows as a bit mask; every leaf when unknown
    (no lineage, or a leaf id the tree does not have)."""
    try:
        mask = 0
        for leaf in leaf_ids:
            mask |= 1 << order[leaf]
        return mask or every
    except (KeyError, TypeError):
        return every


class CellIndex(NamedTuple):
    """The known cells of a layout's blocks: cell c belongs to block `block[c]`
    and sits at leaf position `positions[c, t]` of tree t; `known[b]`: block b's
    cells are known (the others are never skipped by cells)."""

    block: np.ndarray  # (C,) int64
    positions: np.ndarray  # (C, k) int64
    known: np.ndarray  # (n_blocks,) bool

    def blocks_with_admitted_cell(self, admitted: Sequence[int], trees: Sequence[TreeRoute]) -> np.ndarray:
        """(n_blocks,) bool: the block has a cell whose k leaves are all admitted,
        or its cells are not known."""
        ok = np.ones(self.block.shape[0], dtype=bool)
        for t, (mask, tree) in enumerate(zip(admitted, trees)):
            ok &= mask_bits(mask, len(tree.left))[self.positions[:, t]]
        out = ~self.known
        out[self.block[ok]] = True
        return out


def cell_index(trees: Sequence[TreeRoute], cells: Sequence, n_blocks: int) -> CellIndex | None:
    """`CellIndex` of `cells` (per block, k-tuples of leaf ids) over the routing
    `trees`; a block with no cells, a cell of another length or a leaf id a
    tree does not have is not known. None for fewer than two trees or no
    known block."""
    k = len(trees)
    if k < 2:
        return None
    position = [{leaf: i for i, leaf in enumerate(tree.leaf_ids)} for tree in trees]
    known = np.zeros(n_blocks, dtype=bool)
    blocks: list[int] = []
    positions: list[tuple[int, ...]] = []
    for b, block_cells in enumerate(cells[:n_blocks]):
        try:
            mapped = [tuple(position[t][leaf] for t, leaf in enumerate(cell)) for cell in block_cells]
        except (KeyError, IndexError, TypeError):  # a leaf id or a tree the layout does not have
            continue
        if mapped and all(len(cell) == k for cell in mapped):
            known[b] = True
            blocks += [b] * len(mapped)
            positions += mapped
    if not known.any():
        return None
    return CellIndex(np.array(blocks, dtype=np.int64), np.array(positions, dtype=np.int64).reshape(-1, k), known)


def relation_keys(p: Predicate) -> frozenset:
    """What a query and a cut must share for `implies` or `disjoint` to relate
    them: the column of a plain atom; for a join-induced atom, its induction
    path (a tuple of hops) paired with each key of its source predicate, since
    the reasoning compares join-induced atoms only on equal paths, by their
    sources, and never with the foreign key's own values. (Sources on other
    columns of the same parent relate only when one is never TRUE.)"""
    return frozenset().union(*map(_RELATION_KEYS, atoms(p)))


class _RelationKeys(PredicateVisitor[frozenset]):
    def join_induced(self, atom: JoinInduced) -> frozenset:
        return frozenset((atom.hops, key) for key in relation_keys(atom.source))

    def default(self, atom: Predicate) -> frozenset:
        return atom.columns()


_RELATION_KEYS = _RelationKeys()


@dataclass(frozen=True)
class RoutingIndex:
    """Every active layout of a catalog snapshot, ready for routing."""

    layouts: dict[str, tuple[LayoutIndex, ...]]  # table -> its partitions' layouts
    partition_columns: dict[str, str | None]
    stale_cuts: int = 0

    @staticmethod
    def from_snapshot(snapshot: CatalogSnapshot) -> RoutingIndex:
        active_versions = snapshot.active_versions()
        layouts: dict[str, list[LayoutIndex]] = {}
        stale = 0
        for (table, _), layout in sorted(snapshot.layouts.items()):
            index = _layout_index(layout, active_versions, snapshot.data_fingerprints)
            stale += sum(c is None for c in index.cuts)
            layouts.setdefault(table, []).append(index)
        return RoutingIndex(
            {t: tuple(ls) for t, ls in layouts.items()},
            {name: info.partition_column for name, info in snapshot.tables.items()},
            stale,
        )


def cut_is_current(source_versions, active_versions: dict[str, set[int]],
                    fingerprints: dict[int, str] | None = None) -> bool:
    """A join-induced cut's key set is valid while its source tables hold the data it
    was computed from: the same active versions, or versions built from the same rows
    (a dimension table laid out again without changes)."""
    if not source_versions:
        return False  # where its keys came from is unknown: not proven current
    fingerprints = fingerprints or {}
    recorded: dict[str, set[int]] = {}
    for table, version in source_versions:
        recorded.setdefault(table, set()).add(version)
    for table, versions in recorded.items():
        current = active_versions.get(table)
        if current is None:
            if versions != {UNMANAGED_SOURCE}:
                return False
        elif versions != current and not _same_data(versions, current, fingerprints):
            return False
    return True


def _same_data(recorded: set[int], current: set[int], fingerprints: dict[int, str]) -> bool:
    if not all(v in fingerprints for v in recorded | current):
        return False  # unknown: not proven the same
    return sorted(fingerprints[v] for v in recorded) == sorted(fingerprints[v] for v in current)


def _layout_index(layout: ActiveLayout, active_versions: dict[str, set[int]],
                  fingerprints: dict[int, str]) -> LayoutIndex:
    n_cuts = max((c.position for c in layout.cuts), default=-1) + 1
    cuts: list[Predicate | None] = [None] * n_cuts
    for c in layout.cuts:
        if c.kind != "join_induced" or cut_is_current(c.source_versions, active_versions, fingerprints):
            cuts[c.position] = loads(c.predicate)
    return LayoutIndex.from_blocks(layout.version.table, layout.blocks, cuts,
                                   layout.version.partition, layout.version.version_id, layout.trees)


def column_stats(raw: dict, row_count: int) -> dict[str, ColumnStats]:
    out = {}
    for column, s in raw.items():
        if s.get("tainted"):
            continue  # rows changed since the statistics were made (diPs §4.1): unknown
        try:
            out[column] = ColumnStats(
                value_from_json(s.get("min")), value_from_json(s.get("max")),
                int(s.get("null_count", 0)), row_count,
                ranges_from_json(s.get("ranges", ())),
            )
        except (ValueError, TypeError, AttributeError):
            continue  # unreadable stats: this column's zone map is not used
    return out


# ---------------------------------------------------------------------------
# Routes


@dataclass(frozen=True)
class PartitionRoute:
    partition: str
    version_id: int
    blocks: tuple[int, ...]  # to read
    rows: int  # rows in those blocks
    blocks_total: int
    rows_total: int


@dataclass(frozen=True)
class RefRoute:
    ref: str
    ref_id: int
    table: str
    alias: str
    partitions: tuple[PartitionRoute, ...]
    read_all: bool  # no active layout: the whole table is read

    @property
    def blocks(self) -> tuple[int, ...]:
        return tuple(b for p in self.partitions for b in p.blocks)

    @property
    def rows(self) -> int:
        return sum(p.rows for p in self.partitions)

    @property
    def blocks_total(self) -> int:
        return sum(p.blocks_total for p in self.partitions)

    @property
    def rows_total(self) -> int:
        return sum(p.rows_total for p in self.partitions)


@dataclass(frozen=True)
class Route:
    sql: str
    refs: tuple[RefRoute, ...]
    warnings: tuple[str, ...] = ()
    analyzed: bool = True  # False: the query could not be analyzed and is read in full
    analysis: QueryAnalysis | None = field(default=None, compare=False, repr=False)
    dips_built: int = 0  # diPs computed for the query
    dips: tuple[DipEffect, ...] = ()  # the diPs that removed blocks
    dip_notes: tuple[str, ...] = ()  # join edges that carried no diP, and why
    # Why a query that could not be analyzed reads everything: the QueryError's kind
    # ("parse error", "unknown table", ...), or "unexpected error" (a bug, counted in
    # UNEXPECTED_ERRORS); "" when the query was analyzed.
    failure: str = ""

    def ref(self, ref_id: int) -> RefRoute | None:
        for r in self.refs:
            if r.ref_id == ref_id:
                return r
        return None

    def to_json(self) -> dict:
        names = {r.ref: r.alias or r.table for r in self.refs}
        return {
            "analyzed": self.analyzed,
            "failure": self.failure,
            "warnings": list(self.warnings),
            "dips_built": self.dips_built,
            "dips": [{"edge": d.describe(names), "to": d.edge.to_ref,
                      "blocks_removed": [b for part in d.removed for b in part]} for d in self.dips],
            "dip_notes": list(self.dip_notes),
            "refs": [
                {
                    "ref": r.ref, "table": r.table, "alias": r.alias, "read_all": r.read_all,
                    "blocks": list(r.blocks), "blocks_total": r.blocks_total,
                    "rows": r.rows, "rows_total": r.rows_total,
                    "partitions": [
                        {"partition": p.partition, "version": p.version_id, "blocks": list(p.blocks),
                         "blocks_total": p.blocks_total, "rows": p.rows, "rows_total": p.rows_total}
                        for p in r.partitions
                    ],
                }
                for r in self.refs
            ],
        }


def route_query(
    sql: str, index: RoutingIndex, schema: Schema, max_depth: int = DEFAULT_MAX_DEPTH, dips: bool = True,
) -> Route:
    """The blocks each table reference of `sql` reads. A query that cannot be
    analyzed reads everything; so does one whose analysis or routing fails
    unexpectedly (a bug: logged with its traceback), since a failed route
    must never fail, or change, the user's query."""
    try:
        return route_analysis(analyze(sql, schema), index, schema, max_depth, dips)
    except QueryError as e:
        return Route(sql, (), (f"reading everything: {e}",), analyzed=False, failure=e.kind)
    except Exception as e:  # noqa: BLE001 - "when in doubt, read"
        UNEXPECTED_ERRORS.add()
        log.warning("routing failed unexpectedly (%d so far in this process); the query reads everything",
                    UNEXPECTED_ERRORS.count, exc_info=True)
        message = " ".join(str(e).split())[:200]
        return Route(sql, (), (f"reading everything: routing failed ({type(e).__name__}: {message})",),
                     analyzed=False, failure="unexpected error")


class ErrorCount:
    """How many routes failed unexpectedly (a bug, not a bad query) in this process."""

    def __init__(self) -> None:
        self.count = 0

    def add(self) -> None:
        self.count += 1


UNEXPECTED_ERRORS = ErrorCount()


def route_analysis(
    analysis: QueryAnalysis, index: RoutingIndex, schema: Schema, max_depth: int = DEFAULT_MAX_DEPTH,
    dips: bool = True,
) -> Route:
    """Per reference, the blocks its own predicate may need; then, with `dips`,
    the blocks the diPs of its joins still admit (`skipping.dips`)."""
    key_hops = schema.key_hops()
    warnings = []
    laid_out: dict[str, tuple[LayoutIndex, ...]] = {}
    keep: dict[str, list[np.ndarray]] = {}
    for ref in analysis.refs:
        layouts = index.layouts.get(ref.table, ())
        if not layouts:
            warnings.append(f"{ref.table} ({ref.alias}): no active layout, reading everything")
            continue
        table_filter = analysis.filter(ref.key)
        query_predicate = analysis.predicate(ref.key, key_hops, max_depth)
        laid_out[ref.key] = layouts
        keep[ref.key] = [layout_keep(query_predicate, table_filter, layout) for layout in layouts]
    exchange = None
    if dips and (analysis.edges or analysis.union_edges):
        exchange = exchange_dips((*analysis.edges, *analysis.joint_edges, *analysis.union_edges), laid_out, keep,
                                 LayoutIndex.key_ranges)
        keep = exchange.keep
    refs = []
    for ref in analysis.refs:
        if ref.key not in laid_out:
            refs.append(RefRoute(ref.key, ref.ref_id, ref.table, ref.alias, (), True))
            continue
        partitions = tuple(partition_route(layout, mask) for layout, mask in zip(laid_out[ref.key], keep[ref.key]))
        refs.append(RefRoute(ref.key, ref.ref_id, ref.table, ref.alias, partitions, False))
    return Route(analysis.sql, tuple(refs), tuple(warnings), True, analysis,
                 exchange.built if exchange else 0, exchange.effects if exchange else (),
                 (*(f"{sql}: a join on expressions carries no diP" for sql in analysis.expression_joins),
                  *(exchange.notes if exchange else ())))


def route_layout(query_predicate: Predicate, table_filter: Predicate, layout: LayoutIndex) -> PartitionRoute:
    """The blocks of one layout that may hold rows making query_predicate TRUE."""
    return partition_route(layout, layout_keep(query_predicate, table_filter, layout))


def layout_keep(query_predicate: Predicate, table_filter: Predicate, layout: LayoutIndex) -> np.ndarray:
    """Per block of the layout: may it hold rows making query_predicate TRUE (rules 1-4)?"""
    keep = np.zeros(len(layout.block_ids), dtype=bool)
    if satisfiable(query_predicate):  # (a query never TRUE, e.g. x NOT IN (1, NULL), reads no block)
        masks = cut_masks(query_predicate, layout.cuts, layout.cuts_by_key)
        might_match = might_match_blocks(table_filter, layout.zone_maps)
        admitted = admitted_leaves(masks, layout.tree_routes)
        if admitted and layout.cell_index is not None:
            might_match &= layout.cell_index.blocks_with_admitted_cell(admitted, layout.tree_routes)
        keep = might_match & ~cuts_exclude(masks, layout) & trees_admit(admitted, layout)
    return keep


def cuts_exclude(masks: CutMasks, layout: LayoutIndex) -> np.ndarray:
    """(blocks,) bool: `cut_verdict` is ROWS_CANNOT_MATCH, for every block at once."""
    out = np.zeros(len(layout.block_ids), dtype=bool)
    if not (masks.implied or masks.disjoint):
        return out
    union, all_ = layout.cut_bit_matrices
    implied, disjoint = set_bits(masks.implied), set_bits(masks.disjoint)
    if implied.size:
        out |= ~union[:, implied].all(axis=1)
    if disjoint.size:
        out |= all_[:, disjoint].any(axis=1)
    return out


def trees_admit(admitted: Sequence[int], layout: LayoutIndex) -> np.ndarray:
    """(blocks,) bool: every tree admits a leaf holding rows of the block. Where some
    tree admits none of them, the block holds no row the query needs: each tree's
    admitted leaves (`admitted_leaves`) hold every such row."""
    out = np.ones(len(layout.block_ids), dtype=bool)
    for leaves, matrix in zip(admitted, layout.tree_leaf_matrices):
        out &= matrix[:, set_bits(leaves)].any(axis=1)
    return out


def set_bits(mask: int) -> np.ndarray:
    """The positions of the 1 bits of a non-negative int, ascending."""
    return np.flatnonzero(mask_bits(mask, mask.bit_length()))


def partition_route(layout: LayoutIndex, keep: np.ndarray) -> PartitionRoute:
    read = np.flatnonzero(keep)
    return PartitionRoute(
        layout.partition, layout.version_id, tuple(layout.block_ids[i] for i in read),
        sum(layout.row_counts[i] for i in read), len(layout.block_ids), sum(layout.row_counts),
    )


class CutMasks(NamedTuple):
    """Bit i set: the query implies cut i (`implied`), or is disjoint with it (`disjoint`)."""

    implied: int
    disjoint: int


def cut_verdict(masks: CutMasks, union_bits: int, all_bits: int) -> Verdict:
    """ROWS_CANNOT_MATCH when the query implies a cut no row of the block
    satisfies (union bit 0), or is disjoint with a cut every row satisfies (all bit 1)."""
    if masks.implied & ~union_bits or masks.disjoint & all_bits:
        return Verdict.ROWS_CANNOT_MATCH
    return Verdict.ROWS_MIGHT_MATCH


def admitted_leaves(masks: CutMasks, trees: Sequence[TreeRoute]) -> tuple[int, ...]:
    """Per tree, the leaves the query cannot skip (`TreeRoute.admitted`); () when
    the query is related to no cut, so every leaf of every tree is admitted."""
    if not (masks.implied or masks.disjoint):
        return ()
    return tuple(tree.admitted(masks) for tree in trees)


def cuts_by_relation_key(cut_keys: Sequence[frozenset]) -> Mapping[object, tuple[int, ...]]:
    """Relation key -> the positions of the cuts that have it, ascending."""
    out: dict[object, list[int]] = {}
    for position, keys in enumerate(cut_keys):
        for key in keys:
            out.setdefault(key, []).append(position)
    return MappingProxyType({key: tuple(positions) for key, positions in out.items()})


def cut_masks(
    query_predicate: Predicate,
    cuts: Sequence[Predicate | None],
    cuts_by_key: Mapping[object, tuple[int, ...]] | None = None,
) -> CutMasks:
    """Which cuts the query implies, and which it is disjoint with.

    cuts_by_key, when given, is `cuts_by_relation_key` of the cuts (LayoutIndex.cuts_by_key).
    """
    implied_mask = disjoint_mask = 0
    if query_predicate == TRUE:
        return CutMasks(0, 0)
    if cuts_by_key is None:
        cuts_by_key = cuts_by_relation_key([frozenset() if c is None else relation_keys(c) for c in cuts])
    # A cut sharing no column or induction path with the query can only be proven
    # related to a query that is never TRUE; not trying costs no correctness (not
    # proven = read) and saves most calls. (An unusable cut, None, has no key.)
    related = sorted({position for key in relation_keys(query_predicate) for position in cuts_by_key.get(key, ())})
    query = Prepared(query_predicate)  # expanded once for all cuts
    for position in related:
        cut = cuts[position]
        if query.implies(cut):
            implied_mask |= 1 << position
        elif query.disjoint(cut):
            disjoint_mask |= 1 << position
    return CutMasks(implied_mask, disjoint_mask)
