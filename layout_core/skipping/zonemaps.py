"""Zone-map pruning for all blocks of a layout at once (numpy over blocks).

Same rule as `predicates.might_match`, which decides one block: a block may
match an atom when the atom's value set (an over-approximation of the values
that make it TRUE) meets the block's [min, max] range or, for sets that admit
NULL, the block has NULLs. AND/OR combine per block. Atoms the value sets do
not describe (column comparisons, functions, join-induced predicates) say
ROWS_MIGHT_MATCH, and so do bounds that are missing or of the wrong type.
Values stay Python objects (object arrays) so decimals, dates and strings
compare exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from ..predicates import And, ColumnStats, Const, Or, Predicate, PredicateVisitor
from ..predicates.model import Column
from ..predicates.reasoning import as_kind, atom_sets, value_fits
from .verdict import Verdict


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


@dataclass(frozen=True)
class ColumnArrays:
    """One column's zone maps over all blocks (read-only arrays)."""

    mins: np.ndarray  # object
    maxs: np.ndarray  # object
    null_counts: np.ndarray  # int64
    has_values: np.ndarray  # bool: some non-NULL value
    known: np.ndarray  # bool: min and max recorded
    _usable: dict = field(default_factory=dict, compare=False, repr=False)  # kind -> usable(...)

    def usable(self, column: Column) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(blocks whose bounds are usable for this column kind, mins, maxs) as the kind's values."""
        hit = self._usable.get(column.kind)
        if hit is None:
            fits = np.array([k and value_fits(column, lo) and value_fits(column, hi)
                             for k, lo, hi in zip(self.known, self.mins, self.maxs)], dtype=bool)
            mins = np.array([as_kind(column, v) for v in self.mins], dtype=object)
            maxs = np.array([as_kind(column, v) for v in self.maxs], dtype=object)
            hit = self._usable[column.kind] = (_read_only(fits), _read_only(mins), _read_only(maxs))
        return hit


@dataclass(frozen=True)
class ZoneMaps:
    """Per-column min/max/null counts of every block of a layout (read-only: a
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
            mins = np.empty(n, dtype=object)
            maxs = np.empty(n, dtype=object)
            nulls = np.zeros(n, dtype=np.int64)
            present = np.zeros(n, dtype=bool)
            for i, s in enumerate(stats):
                cs = s.get(name)
                if cs is not None:
                    mins[i], maxs[i], nulls[i], present[i] = cs.min, cs.max, cs.null_count, True
            known = present & np.array([m is not None for m in mins]) & np.array([m is not None for m in maxs])
            # a column without stats in a block: treat as unknown bounds with possible NULLs
            nulls = np.where(present, nulls, rows)
            has_values = np.where(present, rows > nulls, True)
            columns[name] = ColumnArrays(*map(_read_only, (mins, maxs, nulls, has_values, known)))
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
        """An atom: from its value sets and the bounds of its column."""
        sets = atom_sets(p)
        arrays = None if sets is None else self.zm.columns.get(sets.column)
        if arrays is None:
            return self.everywhere(Verdict.ROWS_MIGHT_MATCH)  # not understood, or no zone map
        fits, mins, maxs = arrays.usable(p.column)
        meets = np.zeros(self.n, dtype=bool)
        idx = np.flatnonzero(fits & arrays.has_values)
        if idx.size:
            meets[idx] = _ranges_meet(sets.over.intervals, mins[idx], maxs[idx])
        unusable = arrays.has_values & ~fits
        nulls = (arrays.null_counts > 0) if sets.over.null else np.zeros(self.n, dtype=bool)
        return meets | unusable | nulls


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
