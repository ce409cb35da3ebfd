"""Zone-map and range-set pruning for all blocks of a layout at once (numpy over blocks).

A block's statistics of a column are a NULL count and a range set: at most
n_r disjoint [lo, hi] ranges covering every non-NULL value (diPs §4). A zone
map is the one-range case [min, max]: a block stored without `ranges` has
exactly that range, so there is one implementation for both.

Same rule as `predicates.might_match`, which decides one block: a block may
match an atom when the atom's value set (an over-approximation of the values
that make it TRUE) meets one of the block's ranges or, for sets that admit
NULL, the block has NULLs. AND/OR combine per block. Atoms the value sets do
not describe (column comparisons, functions, join-induced predicates) say
ROWS_MIGHT_MATCH, and so do bounds that are missing or of the wrong type.
Values stay Python objects (object arrays) so decimals, dates and strings
compare exactly.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from layout_core.predicates import And, ColumnStats, Const, Or, Predicate, PredicateVisitor
from layout_core.predicates.model import Column
from layout_core.predicates.reasoning import as_kind, atom_sets, value_fits
from layout_core.skipping.verdict import Verdict

# Ranges per block and column (n_r); 1 keeps min/max only. The diPs paper's 20, kept by
# measurement (docs/benchmarks.md, "the range-set sweep"): on TPC-DS 20 reads 1.5-2% fewer
# blocks with diPs than 16 or 12, for 15-20% more bytes of statistics.
DEFAULT_RANGE_SETS = 20


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class ColumnArrays:
    """One column's statistics over all blocks (read-only arrays).

    Per block: `null_counts`, `has_values` (some non-NULL value) and `known`
    (its ranges are recorded). Per range, in block order: `lo`, `hi` and the
    index of the block it belongs to (`owner`); a known block with values
    has at least one range, a block without values none.
    """

    lo: np.ndarray  # object
    hi: np.ndarray  # object
    owner: np.ndarray  # int64, non-decreasing
    null_counts: np.ndarray  # int64
    has_values: np.ndarray  # bool
    known: np.ndarray  # bool
    _usable: dict = field(default_factory=dict, compare=False, repr=False)  # kind -> usable(...)

    @property
    def mins(self) -> np.ndarray:
        """Per block, the lowest value (None when unknown or no value)."""
        return self._per_block(self.lo, first=True)

    @property
    def maxs(self) -> np.ndarray:
        """Per block, the highest value (None when unknown or no value)."""
        return self._per_block(self.hi, first=False)

    def _per_block(self, values: np.ndarray, first: bool) -> np.ndarray:
        out = np.full(self.known.size, None, dtype=object)
        if self.owner.size:
            starts = np.flatnonzero(np.r_[True, self.owner[1:] != self.owner[:-1]])
            picks = starts if first else np.r_[starts[1:] - 1, self.owner.size - 1]
            out[self.owner[picks]] = values[picks]
        return _read_only(out)

    def meeting(self, column: Column, intervals) -> tuple[np.ndarray, np.ndarray]:
        """(the ranges of blocks whose ranges are all usable for this column kind, which of
        them meet one of the intervals): `_ranges_meet` on them, each bound placed once by
        bisection in the ranges sorted by lo and by hi instead of compared with every range."""
        fits, lo, hi = self.usable(column)
        key = ("ordered", column.kind)  # the usable ranges and their order, once per kind
        if key not in self._usable:
            usable_ranges = _read_only(np.flatnonzero(fits[self.owner]))
            self._usable[key] = (usable_ranges, _Ordered.of(lo[usable_ranges], hi[usable_ranges]))
        ranges, ordered = self._usable[key]
        if ordered is None or not ranges.size:
            return ranges, _ranges_meet(intervals, lo[ranges], hi[ranges])
        try:
            return ranges, ordered.meet(intervals)
        except TypeError:  # a bound that does not compare with the values: say nothing
            return ranges, np.ones(ranges.size, dtype=bool)

    def usable(self, column: Column) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(blocks whose ranges are all usable for this column kind, lo, hi as the kind's values)."""
        hit = self._usable.get(column.kind)
        if hit is None:
            fits = np.array([value_fits(column, lo) and value_fits(column, hi) for lo, hi in zip(self.lo, self.hi)],
                            dtype=bool)
            unfit_blocks = np.bincount(self.owner[~fits], minlength=self.known.size) > 0
            lo = np.array([as_kind(column, v) for v in self.lo], dtype=object)
            hi = np.array([as_kind(column, v) for v in self.hi], dtype=object)
            hit = self._usable[column.kind] = (_read_only(self.known & ~unfit_blocks), _read_only(lo), _read_only(hi))
        return hit


@dataclass(frozen=True)
class ZoneMaps:
    """Per-column statistics of every block of a layout (read-only: a
    `LayoutIndex` keeps one for all the queries it routes)."""

    row_counts: np.ndarray
    columns: Mapping[str, ColumnArrays]

    @staticmethod
    def of(stats: Sequence[Mapping[str, ColumnStats]], row_counts: Sequence[int]) -> ZoneMaps:
        n = len(row_counts)
        rows = _read_only(np.asarray(row_counts, dtype=np.int64))
        names = sorted({c for s in stats for c in s})
        columns = {}
        for name in names:
            lo, hi, owner = [], [], []
            nulls = rows.copy()  # a column without stats in a block: unknown bounds, maybe NULLs
            known = np.zeros(n, dtype=bool)
            has_values = np.ones(n, dtype=bool)
            for i, s in enumerate(stats):
                cs = s.get(name)
                if cs is None:
                    continue
                nulls[i] = cs.null_count
                has_values[i] = rows[i] > cs.null_count
                if not has_values[i]:
                    known[i] = True
                    continue
                ranges = cs.ranges or ((cs.min, cs.max),)
                if all(a is not None and b is not None for a, b in ranges):
                    known[i] = True
                    for a, b in ranges:
                        lo.append(a)
                        hi.append(b)
                        owner.append(i)
            columns[name] = ColumnArrays(
                _read_only(np.array(lo, dtype=object)),
                _read_only(np.array(hi, dtype=object)),
                _read_only(np.asarray(owner, dtype=np.int64)),
                *map(_read_only, (nulls, has_values, known)),
            )
        return ZoneMaps(rows, MappingProxyType(columns))


def might_match_blocks(p: Predicate, zm: ZoneMaps) -> np.ndarray:
    """`might_match` per block: False (ROWS_CANNOT_MATCH) only when no row of the
    block can make p TRUE."""
    return _BlockVerdicts(zm)(p) & (zm.row_counts > 0)


class _BlockVerdicts(PredicateVisitor[np.ndarray]):
    """`might_match` of a predicate for every block of some zone maps."""

    def __init__(self, zm: ZoneMaps):
        self.zm = zm
        self.n = zm.row_counts.size

    def everywhere(self, verdict: Verdict) -> np.ndarray:
        return np.full(self.n, verdict.value, dtype=bool)

    def const(self, p: Const) -> np.ndarray:
        return self.everywhere(Verdict.ROWS_MIGHT_MATCH if p.value else Verdict.ROWS_CANNOT_MATCH)

    def and_(self, p: And) -> np.ndarray:
        might_match = self.everywhere(Verdict.ROWS_MIGHT_MATCH)
        for c in p.children:
            might_match &= self(c)
        return might_match

    def or_(self, p: Or) -> np.ndarray:
        might_match = self.everywhere(Verdict.ROWS_CANNOT_MATCH)
        for c in p.children:
            might_match |= self(c)
        return might_match

    def default(self, p: Predicate) -> np.ndarray:
        """An atom: from its value sets and the ranges of its column."""
        sets = atom_sets(p)
        arrays = None if sets is None else self.zm.columns.get(sets.column)
        if arrays is None:
            return self.everywhere(Verdict.ROWS_MIGHT_MATCH)  # not understood, or no statistics
        fits, _, _ = arrays.usable(p.column)
        ranges, hit = arrays.meeting(p.column, sets.over.intervals)
        meets = np.bincount(arrays.owner[ranges[hit]], minlength=self.n) > 0
        unusable = arrays.has_values & ~fits
        nulls = (arrays.null_counts > 0) if sets.over.null else np.zeros(self.n, dtype=bool)
        return meets | unusable | nulls


@dataclass(frozen=True)
class _Ordered:
    """Ranges' lo and hi values in sorted order with each range's place (`rank`), so that
    `lo <= v` is `lo_rank < bisect_right(lo_sorted, v)`: O(log n) comparisons of Python
    objects per bound instead of n."""

    lo_sorted: list
    lo_rank: np.ndarray
    hi_sorted: list
    hi_rank: np.ndarray

    @staticmethod
    def of(lo: np.ndarray, hi: np.ndarray) -> "_Ordered | None":
        """None when the values cannot be sorted: of types that do not compare, or with a NaN
        (which compares false with everything, so no order places it)."""
        if any(isinstance(v, float) and v != v for v in (*lo, *hi)):
            return None
        try:
            return _Ordered(*_sorted_with_rank(lo), *_sorted_with_rank(hi))
        except TypeError:
            return None

    def meet(self, intervals) -> np.ndarray:
        """Per range: does [lo, hi] meet one of the intervals? (`_ranges_meet`)"""
        hit = np.zeros(self.lo_rank.size, dtype=bool)
        for interval in intervals:
            ok = np.ones(self.lo_rank.size, dtype=bool)
            if interval.hi is not None:  # lo <= hi_bound (or <)
                bisect = bisect_right if interval.hi_closed else bisect_left
                ok &= self.lo_rank < bisect(self.lo_sorted, interval.hi)
            if interval.lo is not None:  # hi >= lo_bound (or >)
                bisect = bisect_left if interval.lo_closed else bisect_right
                ok &= self.hi_rank >= bisect(self.hi_sorted, interval.lo)
            hit |= ok
        return hit


def _sorted_with_rank(values: np.ndarray) -> tuple[list, np.ndarray]:
    order = np.array(sorted(range(len(values)), key=values.__getitem__), dtype=np.int64)
    rank = np.empty(len(values), dtype=np.int64)
    rank[order] = np.arange(len(values))
    return values[order].tolist(), rank


def _ranges_meet(intervals, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per block: does [lo, hi] meet one of the intervals? (True when the values do not compare)"""
    hit = np.zeros(lo.size, dtype=bool)
    try:
        for interval in intervals:
            ok = np.ones(lo.size, dtype=bool)
            if interval.hi is not None:
                ok &= (lo <= interval.hi if interval.hi_closed else lo < interval.hi).astype(bool)
            if interval.lo is not None:
                ok &= (hi >= interval.lo if interval.lo_closed else hi > interval.lo).astype(bool)
            hit |= ok
    except TypeError:  # incomparable values: say nothing
        return np.ones(lo.size, dtype=bool)
    return hit
