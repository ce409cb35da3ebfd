"""Data-induced predicates (diPs, Kandula et al. §3): blocks skipped through the joins.

After each table reference has kept the blocks its own predicate may need
(cuts, trees, range sets), every semi-join edge `a -> b` of the query
(`sql.analysis.Edge`: rows of b whose column matches no row of a are never
needed) carries a diP: the union of the ranges of a's join column over a's
kept blocks. b then keeps only the blocks whose ranges on its join column
meet that union; a block whose join column holds only NULLs meets nothing,
since NULL never equals anything. When b loses blocks, its own outgoing
edges carry smaller diPs, and so on until nothing changes. Where one join
condition equates two or more column pairs (`sql.analysis.JointEdge`), a diP
over the tuple goes along too: the boxes of a's kept blocks over its columns,
which b's block must meet in every column at once (`DataBoxes`). Out of a
UNION's column (`sql.analysis.UnionEdge`) the diP is the union of the ranges
over every branch's kept blocks, and it is sent again when any branch loses
blocks.

Which way an edge points is decided by the analysis from SQL semantics (an
outer join passes diPs from its preserved side to its NULL-supplying side
only, an anti join from the outer side only, a subquery with aggregation
only through its grouping column, a derived table or CTE only through a
column it passes on, and only outwards where it is read twice or has a
LIMIT),
so every step removes only rows the answer does not need, and so does any
number of steps in any order (each is sound on the database the previous
ones left). The order: edges towards a root of the join graph first, then
back (two passes settle a tree-shaped graph, §3.4), then any edge whose
source changed again, until a fixpoint; a graph with cycles needs no
junction tree for soundness, only more rounds, bounded by the blocks.

A column without usable statistics in some kept block of a makes a's diP
unknown (no diP); a receiving block without usable statistics is kept.
Ranges are compared as float64 keys rounded outwards (numbers, dates,
timestamps) or as the strings themselves; columns of two different families
exchange nothing.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from dataclasses import dataclass, field, replace
from functools import cached_property
from decimal import Decimal
from typing import Mapping, Sequence

import numpy as np

from layout_core.skipping.zonemaps import ColumnArrays
from layout_core.sql.analysis import Edge, JointEdge, UnionEdge

log = logging.getLogger("layout.dips")

EMPTY = "empty"  # the family of a column without any value: it meets, and makes, nothing
# The exchange's work per query: it stops after building this many diPs (each step
# only removes blocks, so stopping early is sound; it reads more) and says so.
MAX_DIPS = 10_000


@dataclass(frozen=True)
class KeyRanges:
    """One column of one layout as comparable keys: per range `lo`, `hi`, `owner`
    (its block; `key_ranges` gives them in ascending lo), per block `known` (usable
    statistics) and `has_values`."""

    family: str  # "number", "string" or EMPTY
    lo: np.ndarray
    hi: np.ndarray
    owner: np.ndarray
    known: np.ndarray
    has_values: np.ndarray

    @cached_property
    def unknown(self) -> np.ndarray:
        """Per block: it has values but no usable ranges (it sends no diP; a diP cannot skip it)."""
        return ~self.known & self.has_values

    @cached_property
    def any_unknown(self) -> bool:
        return bool(self.unknown.any())

    @cached_property
    def whole(self) -> DataPred | None:
        """The diP of a reference that keeps every block, built once: a third of the diPs
        routing sends on TPC-DS (references without a filter, or whose filter skips nothing)."""
        whole = DataPred.union([(self, np.ones(self.known.size, dtype=bool))])
        if whole is None or not whole.starts.size:
            return whole  # (an empty one, e.g. of NO_RANGES, answers at once: nothing to remember)
        return replace(whole, remembered={})


NO_RANGES = KeyRanges(EMPTY, *(np.empty(0, t) for t in (np.float64, np.float64, np.int64, bool, bool)))


def key_ranges(arrays: ColumnArrays) -> KeyRanges | None:
    """The column's ranges as keys; None when its values are of no one family."""
    families = {_family(v) for v in arrays.lo} | {_family(v) for v in arrays.hi}
    if len(families) > 1 or None in families:
        return None
    family = families.pop() if families else EMPTY
    if family == "number":
        lo = np.array([_number(v) for v in arrays.lo], dtype=np.float64)
        hi = np.array([_number(v) for v in arrays.hi], dtype=np.float64)
        lo, hi = np.nextafter(lo, -np.inf), np.nextafter(hi, np.inf)  # never narrower than the values
    else:
        lo, hi = arrays.lo, arrays.hi
    # in ascending lo: the union of a diP's kept ranges then sorts runs already in order (timsort: linear)
    order = np.argsort(lo, kind="stable")
    return KeyRanges(family, lo[order], hi[order], arrays.owner[order], arrays.known, arrays.has_values)


def _family(v) -> str | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, Decimal, dt.date)):  # (datetime is a date)
        return "number"
    if isinstance(v, float):
        return None if math.isnan(v) else "number"
    if isinstance(v, str):
        return "string"
    return None


_EPOCH = dt.datetime(1970, 1, 1)


def _number(v) -> float:
    if isinstance(v, dt.datetime):
        return (v.replace(tzinfo=None) - _EPOCH).total_seconds() / 86400.0  # days, like dates
    if isinstance(v, dt.date):
        return float(v.toordinal() - _EPOCH.toordinal())
    return float(v)


@dataclass(frozen=True)
class DataPred:
    """A diP: sorted disjoint ranges [starts[i], ends[i]] of one key family."""

    family: str
    starts: np.ndarray
    ends: np.ndarray
    # `meets` answers per receiving KeyRanges (by id, with the object to tell a reused id), for a
    # diP that lives as long as its layout (`KeyRanges.whole`); None: not remembered
    remembered: dict | None = field(default=None, compare=False, repr=False)

    @staticmethod
    def union(parts: Sequence[tuple[KeyRanges, np.ndarray]]) -> DataPred | None:
        """The ranges of the kept blocks (`keep`, a bool mask per layout) of every
        layout; None (no diP) when some kept block's ranges are unknown or the
        layouts' values are of two families. An empty union (no row left on
        that side) is a diP that admits nothing."""
        families = {k.family for k, _ in parts} - {EMPTY}
        if len(families) > 1:
            return None
        los, his = [], []
        for ranges, keep in parts:
            if ranges.any_unknown and np.any(keep & ranges.unknown):
                return None
            mine = keep[ranges.owner]
            los.append(ranges.lo[mine])
            his.append(ranges.hi[mine])
        family = families.pop() if families else EMPTY
        dtype = np.float64 if family == "number" else object
        if len(los) == 1 and los[0].dtype == dtype:
            lo, hi = los[0], his[0]  # one layout: its ranges are in ascending lo already (`key_ranges`)
        else:
            lo = np.concatenate(los).astype(dtype) if los else np.empty(0, dtype)
            hi = np.concatenate(his).astype(dtype) if his else np.empty(0, dtype)
            order = np.argsort(lo, kind="stable")
            lo, hi = lo[order], hi[order]
        # merge overlapping ranges: a range starts a new group unless it starts
        # at or before the furthest end seen so far
        if lo.size:
            furthest = np.maximum.accumulate(hi) if family == "number" else _running_max(hi)
            # (filled in place, not np.r_ or np.append: this runs for every diP, and they cost more than the work)
            new_group = np.empty(lo.size, dtype=bool)
            new_group[0] = True
            new_group[1:] = lo[1:] > furthest[:-1]
            last_of_group = np.empty(lo.size, dtype=bool)
            last_of_group[:-1] = new_group[1:]
            last_of_group[-1] = True
            starts, ends = lo[new_group], furthest[last_of_group]
        else:
            starts, ends = lo, hi
        return DataPred(family, starts, ends)

    def meets(self, ranges: KeyRanges) -> np.ndarray:
        """Per block of `ranges`: might it hold a value of this diP? (True when unknown)"""
        if self.remembered is None:
            return self._meets(ranges)
        found = self.remembered.get(id(ranges))
        if found is None or found[0] is not ranges:
            found = ranges, self._meets(ranges)
            found[1].setflags(write=False)  # shared by every query: never changed in place
            self.remembered[id(ranges)] = found
        return found[1]

    def _meets(self, ranges: KeyRanges) -> np.ndarray:
        n = ranges.known.size
        if not self.starts.size:
            return np.zeros(n, dtype=bool)  # no row on the other side: nothing here can match
        if ranges.family not in (self.family, EMPTY):
            return np.ones(n, dtype=bool)
        hit = np.zeros(ranges.lo.size, dtype=bool)
        if self.starts.size and ranges.lo.size:
            # the last diP range starting at or before each range's end
            j = np.searchsorted(self.starts, ranges.hi, side="right") - 1
            ok = j >= 0
            hit[ok] = (self.ends[j[ok]] >= ranges.lo[ok]).astype(bool)
        blocks = np.bincount(ranges.owner[hit], minlength=n) > 0
        return blocks | ranges.unknown


# Receiving blocks compared with every box at once, in chunks of this many (box, block) pairs.
_BOX_CHUNK = 1 << 21


@dataclass(frozen=True)
class DataBoxes:
    """A diP over a tuple of columns (a `JointEdge`): per kept source block with a
    value in every column, the box of its per-column ranges (min to max), as
    `lo`, `hi` of shape (boxes, columns). A receiving block is kept when its own
    box meets one of them in every column at once: one source row must match all
    the columns. Numbers only (join keys); other families give no joint diP."""

    lo: np.ndarray
    hi: np.ndarray

    @staticmethod
    def union(parts: Sequence[tuple[Sequence[KeyRanges], np.ndarray]]) -> DataBoxes | None:
        """The boxes of the kept blocks (`keep` per layout) over each layout's columns;
        None when a kept block's statistics are unknown or a column is not numeric."""
        los, his = [], []
        for columns, keep in parts:
            if any(r.family not in ("number", EMPTY) for r in columns):
                return None
            if any(np.any(keep & r.unknown) for r in columns):
                return None
            # a row NULL in some column matches nothing: only blocks with values everywhere send boxes
            sending = keep & np.logical_and.reduce([r.has_values for r in columns])
            hulls = [_block_hulls(r) for r in columns]
            los.append(np.column_stack([lo[sending] for lo, _ in hulls]))
            his.append(np.column_stack([hi[sending] for _, hi in hulls]))
        width = len(parts[0][0]) if parts else 0
        lo = np.concatenate(los) if los else np.empty((0, width))
        hi = np.concatenate(his) if his else np.empty((0, width))
        boxes = np.unique(np.hstack([lo, hi]), axis=0)  # equal boxes (blocks of one key run) once
        return DataBoxes(boxes[:, :width], boxes[:, width:])

    def meets(self, columns: Sequence[KeyRanges]) -> np.ndarray:
        """Per block of the receiving layout's `columns`: might it hold a row whose values
        lie in one box? (True when a column's statistics are unknown.)"""
        n = columns[0].known.size
        if not self.lo.shape[0]:
            return np.zeros(n, dtype=bool)  # no row on the other side: nothing here can match
        if any(r.family not in ("number", EMPTY) for r in columns):
            return np.ones(n, dtype=bool)
        hulls = [_block_hulls(r) for r in columns]
        lo = np.column_stack([h[0] for h in hulls])
        hi = np.column_stack([h[1] for h in hulls])
        hit = np.zeros(n, dtype=bool)
        step = max(1, _BOX_CHUNK // self.lo.shape[0])
        for start in range(0, n, step):
            end = min(n, start + step)
            overlap = ((self.lo[:, None, :] <= hi[None, start:end, :])
                       & (self.hi[:, None, :] >= lo[None, start:end, :])).all(axis=2)
            hit[start:end] = overlap.any(axis=0)
        unknown = np.logical_or.reduce([r.unknown for r in columns])
        return (hit | unknown) & np.logical_and.reduce([r.has_values for r in columns])


def _block_hulls(ranges: KeyRanges) -> tuple[np.ndarray, np.ndarray]:
    """Per block, the lowest and highest key of its ranges (+inf, -inf without any)."""
    n = ranges.known.size
    lo, hi = np.full(n, np.inf), np.full(n, -np.inf)
    if ranges.lo.size:
        np.minimum.at(lo, ranges.owner, ranges.lo.astype(np.float64))
        np.maximum.at(hi, ranges.owner, ranges.hi.astype(np.float64))
    return lo, hi


def _running_max(values: np.ndarray) -> np.ndarray:
    out = np.empty(values.size, dtype=object)
    best = None
    for i, v in enumerate(values):
        best = v if best is None or v > best else best
        out[i] = best
    return out


@dataclass(frozen=True)
class DipEffect:
    """One diP that removed blocks: the edge it crossed and the block ids it
    removed from the receiving reference (per partition, in layout order)."""

    edge: Edge | JointEdge | UnionEdge
    removed: tuple[tuple[int, ...], ...]

    @property
    def blocks_removed(self) -> int:
        return sum(map(len, self.removed))

    def describe(self, names: Mapping[str, str]) -> str:
        e = self.edge
        source = f"{names.get(e.from_ref, e.from_ref)}.{e.from_column}"
        if isinstance(e, UnionEdge):
            source = f"union({' | '.join(f'{names.get(ref, ref)}.{column}' for ref, column in e.sources)})"
        return f"diP {source} -> {names.get(e.to_ref, e.to_ref)}.{e.to_column}"


@dataclass(frozen=True)
class DipExchange:
    keep: dict[str, list[np.ndarray]]  # ref -> per layout, the blocks still read
    built: int  # diPs computed
    effects: tuple[DipEffect, ...]  # those that removed blocks, in order
    notes: tuple[str, ...] = ()  # edges that carried no diP, and why


def exchange_dips(edges: Sequence[Edge | JointEdge | UnionEdge], layouts: Mapping[str, Sequence],
                  keep: Mapping[str, Sequence[np.ndarray]], ranges_of, max_dips: int | None = None) -> DipExchange:
    """Run the diP exchange over `edges` between references that have layouts: an
    `Edge` carries a `DataPred`, a `JointEdge` `DataBoxes` over its columns.

    `layouts[ref]` are the reference's layouts (its partitions), `keep[ref]`
    their kept-block masks; `ranges_of(layout, column)` gives a layout's
    `KeyRanges` for a column (None without statistics). Returns new masks.
    """
    max_dips = MAX_DIPS if max_dips is None else max_dips
    keep = {ref: [m.copy() for m in masks] for ref, masks in keep.items()}
    usable = [e for e in edges if e.to_ref in layouts
              and all(ref in layouts and ref != e.to_ref for ref, _ in _senders(e))]
    queue = _schedule(usable)
    queued = set(queue)
    built, effects, notes = 0, [], {}
    sent: dict[tuple, DataPred | None] = {}
    out_edges: dict[str, list[Edge]] = {}
    for e in usable:
        for ref, _ in _senders(e):
            out_edges.setdefault(ref, []).append(e)
    while queue and built < max_dips:
        edge = queue.pop(0)
        queued.discard(edge)
        joint = isinstance(edge, JointEdge)
        source = [([ranges_of(layout, c) for c in columns], mask)
                  for ref, columns in _senders(edge) for layout, mask in zip(layouts[ref], keep[ref])]
        if any(r is None for columns, _ in source for r in columns):
            notes[edge] = f"{edge.from_ref}.{edge.from_column} has no usable statistics: it sends no diP"
            continue
        # one reference's column often feeds several edges (equalities are closed
        # transitively): build its diP once per state of its kept blocks
        state = (edge.from_ref, edge.from_columns, tuple(m.tobytes() for _, m in source))
        if state not in sent:
            if joint:
                sent[state] = DataBoxes.union(source)
            elif len(source) == 1 and source[0][1].all():  # every block of one layout: built once per column
                sent[state] = source[0][0][0].whole
            else:
                sent[state] = DataPred.union([(columns[0], mask) for columns, mask in source])
            built += 1
        dip = sent[state]
        if dip is None:
            notes[edge] = (f"{edge.from_ref}.{edge.from_column}: a kept block's statistics are unknown "
                           f"(missing or tainted), or of another type: no diP to {edge.to_ref}.{edge.to_column}")
            continue
        removed = []
        for layout, mask in zip(layouts[edge.to_ref], keep[edge.to_ref]):
            target = [ranges_of(layout, c) for c in edge.to_columns]
            if any(r is None for r in target):
                notes[edge] = f"{edge.to_ref}.{edge.to_column} has no usable statistics: it receives no diP"
                removed.append(())
                continue
            after = mask & dip.meets(target if joint else target[0])
            ids = layout.block_ids
            removed.append(tuple([ids[i] for i in np.flatnonzero(mask & ~after).tolist()]))  # (Python ints: faster)
            mask &= after
        if any(removed):
            effects.append(DipEffect(edge, tuple(removed)))
            for nxt in out_edges.get(edge.to_ref, ()):  # b's diPs shrank: send them again
                if nxt not in queued:
                    queue.append(nxt)
                    queued.add(nxt)
    stopped = (f"the diP exchange stopped at its cap of {max_dips} diPs with {len(queue)} edges still to send: "
               "it reads more blocks than it would have",) if queue else ()
    if stopped:
        log.warning(stopped[0])
    return DipExchange(keep, built, tuple(effects), (*dict.fromkeys(notes.values()), *stopped))


def _senders(edge: Edge | JointEdge | UnionEdge) -> list[tuple[str, tuple[str, ...]]]:
    """The references whose kept blocks make the edge's diP, each with its columns."""
    if isinstance(edge, UnionEdge):
        return [(ref, (column,)) for ref, column in edge.sources]
    return [(edge.from_ref, edge.from_columns)]


def _schedule(edges: Sequence[Edge]) -> list[Edge]:
    """Edges towards a root first (leaves up), then away from it (root down), per
    connected part of the join graph, deterministic: a tree settles in these two
    passes; a graph with cycles gets its remaining edges in the same order and
    whatever changes is queued again by `exchange_dips`."""
    neighbours: dict[str, set[str]] = {}
    for e in edges:
        neighbours.setdefault(e.from_ref, set()).add(e.to_ref)
        neighbours.setdefault(e.to_ref, set()).add(e.from_ref)
    depth: dict[str, int] = {}
    for root in sorted(neighbours):
        if root in depth:
            continue
        depth[root] = 0
        frontier = [root]
        while frontier:
            nxt = []
            for ref in frontier:
                for other in sorted(neighbours[ref]):
                    if other not in depth:
                        depth[other] = depth[ref] + 1
                        nxt.append(other)
            frontier = nxt
    ordered = sorted(edges, key=lambda e: (e.from_ref, e.from_column, e.to_ref, e.to_column))
    up = sorted((e for e in ordered if depth[e.from_ref] > depth[e.to_ref]), key=lambda e: -depth[e.from_ref])
    down = sorted((e for e in ordered if depth[e.from_ref] < depth[e.to_ref]), key=lambda e: depth[e.from_ref])
    level = [e for e in ordered if depth[e.from_ref] == depth[e.to_ref]]
    return up + level + down
