"""Zone-map pruning for all blocks of a layout at once (numpy over blocks).

Same rule as `predicates.might_match`, which decides one block: a block may
match an atom when the atom's value set (an over-approximation of the values
that make it TRUE) meets the block's [min, max] range or, for sets that admit
NULL, the block has NULLs. AND/OR combine per block. Atoms the value sets do
not describe (column comparisons, functions, join-induced predicates) say
"may match". Bounds that are missing or of the wrong type say "may match".
Values stay Python objects (object arrays) so decimals, dates and strings
compare exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from ..predicates import And, ColumnStats, Const, Or, Predicate
from ..predicates.model import Column
from ..predicates.reasoning import _as_kind, _value_fits, atom_sets


@dataclass
class ColumnArrays:
    mins: np.ndarray  # object
    maxs: np.ndarray  # object
    null_counts: np.ndarray  # int64
    has_values: np.ndarray  # bool: some non-NULL value
    known: np.ndarray  # bool: min and max recorded
    _usable: dict = field(default_factory=dict)  # kind -> (bool mask, converted mins, maxs)

    def usable(self, column: Column):
        """(blocks whose bounds are usable for this column kind, mins, maxs) as the kind's values."""
        hit = self._usable.get(column.kind)
        if hit is None:
            fits = np.array([k and _value_fits(column, lo) and _value_fits(column, hi)
                             for k, lo, hi in zip(self.known, self.mins, self.maxs)], dtype=bool)
            mins = np.array([_as_kind(column, v) for v in self.mins], dtype=object)
            maxs = np.array([_as_kind(column, v) for v in self.maxs], dtype=object)
            hit = self._usable[column.kind] = (fits, mins, maxs)
        return hit


@dataclass
class ZoneMaps:
    row_counts: np.ndarray
    columns: dict[str, ColumnArrays]

    @staticmethod
    def of(stats: Sequence[Mapping[str, ColumnStats]], row_counts: Sequence[int]) -> ZoneMaps:
        n = len(row_counts)
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
            rows = np.asarray(row_counts, dtype=np.int64)
            known = present & np.array([m is not None for m in mins]) & np.array([m is not None for m in maxs])
            # a column without stats in a block: treat as unknown bounds with possible NULLs
            nulls = np.where(present, nulls, rows)
            has_values = np.where(present, rows > nulls, True)
            columns[name] = ColumnArrays(mins, maxs, nulls, has_values, known)
        return ZoneMaps(np.asarray(row_counts, dtype=np.int64), columns)


def _compare(a: np.ndarray, op: str, v) -> np.ndarray:
    if op == "<":
        return (a < v).astype(bool)
    if op == "<=":
        return (a <= v).astype(bool)
    if op == ">":
        return (a > v).astype(bool)
    return (a >= v).astype(bool)


def _atom_mask(p: Predicate, zm: ZoneMaps, n: int) -> np.ndarray:
    sets = atom_sets(p)
    if sets is None:
        return np.ones(n, dtype=bool)
    arrays = zm.columns.get(sets.column)
    if arrays is None:
        return np.ones(n, dtype=bool)
    over = sets.over
    fits, mins, maxs = arrays.usable(p.column)
    meets = np.zeros(n, dtype=bool)
    idx = np.flatnonzero(fits & arrays.has_values)
    if idx.size:
        lo_arr, hi_arr = mins[idx], maxs[idx]
        try:
            hit = np.zeros(idx.size, dtype=bool)
            for interval in over.intervals:
                ok = np.ones(idx.size, dtype=bool)
                if interval.hi is not None:
                    ok &= _compare(lo_arr, "<=" if interval.hi_closed else "<", interval.hi)
                if interval.lo is not None:
                    ok &= _compare(hi_arr, ">=" if interval.lo_closed else ">", interval.lo)
                hit |= ok
        except TypeError:  # incomparable values: say nothing
            hit = np.ones(idx.size, dtype=bool)
        meets[idx] = hit
    unusable = arrays.has_values & ~fits
    nulls = (arrays.null_counts > 0) if over.null else np.zeros(n, dtype=bool)
    return meets | unusable | nulls


def might_match_blocks(p: Predicate, zm: ZoneMaps) -> np.ndarray:
    """Per block: False only when no row of the block can make p TRUE."""
    n = zm.row_counts.size
    if isinstance(p, Const):
        mask = np.full(n, bool(p.value))
    elif isinstance(p, And):
        mask = np.ones(n, dtype=bool)
        for c in p.children:
            mask &= might_match_blocks(c, zm)
    elif isinstance(p, Or):
        mask = np.zeros(n, dtype=bool)
        for c in p.children:
            mask |= might_match_blocks(c, zm)
    else:
        mask = _atom_mask(p, zm, n)
    return mask & (zm.row_counts > 0)
