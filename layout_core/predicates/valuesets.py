"""Sets of one column's values: a union of disjoint intervals plus a NULL flag.

These are the "boxes" the reasoning works with. A single-column predicate maps
to the set of values for which it evaluates TRUE (SQL three-valued logic: a row
where it is FALSE or NULL is outside the set).

Values of one set share one Python type (int, Decimal, float, date, datetime,
str, bool); literals are coerced to the column's type before they get here.
Integers and dates are discrete, so `x > 5` normalizes to `x >= 6` and [1,3]
merges with [4,6]: that makes more implications provable, never fewer.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any, Iterable

_DAY = dt.timedelta(days=1)


def _successor(v: Any) -> Any | None:
    """The next value of a discrete domain, or None where there is none we can name."""
    if type(v) is int:
        return v + 1
    if type(v) is dt.date:
        return v + _DAY if v < dt.date.max else None
    return None


def _predecessor(v: Any) -> Any | None:
    if type(v) is int:
        return v - 1
    if type(v) is dt.date:
        return v - _DAY if v > dt.date.min else None
    return None


@dataclass(frozen=True, slots=True)
class Interval:
    """Values between lo and hi; None means unbounded on that side."""

    lo: Any = None
    hi: Any = None
    lo_closed: bool = True
    hi_closed: bool = True

    def normalized(self) -> Interval | None:
        """Closed bounds for discrete domains; None when the interval is empty."""
        lo, hi, lc, hc = self.lo, self.hi, self.lo_closed, self.hi_closed
        if lo is not None and not lc and (s := _successor(lo)) is not None:
            lo, lc = s, True
        if hi is not None and not hc and (p := _predecessor(hi)) is not None:
            hi, hc = p, True
        if lo is None:
            lc = False
        if hi is None:
            hc = False
        if lo is not None and hi is not None:
            if lo > hi or (lo == hi and not (lc and hc)):
                return None
        return Interval(lo, hi, lc, hc)

    def contains_value(self, v: Any) -> bool:
        if self.lo is not None and (v < self.lo or (v == self.lo and not self.lo_closed)):
            return False
        if self.hi is not None and (v > self.hi or (v == self.hi and not self.hi_closed)):
            return False
        return True


def _lo_before(a: Interval, b: Interval) -> bool:
    """True when a's lower bound starts at or before b's."""
    if a.lo is None:
        return True
    if b.lo is None:
        return False
    return a.lo < b.lo or (a.lo == b.lo and (a.lo_closed or not b.lo_closed))


def _hi_after(a: Interval, b: Interval) -> bool:
    """True when a's upper bound ends at or after b's."""
    if a.hi is None:
        return True
    if b.hi is None:
        return False
    return a.hi > b.hi or (a.hi == b.hi and (a.hi_closed or not b.hi_closed))


def _touches(a: Interval, b: Interval) -> bool:
    """Given a starts before b: do they overlap or meet with no value between?"""
    if a.hi is None or b.lo is None:
        return True
    if b.lo < a.hi:
        return True
    if b.lo == a.hi:
        return a.hi_closed or b.lo_closed
    return a.hi_closed and b.lo_closed and _successor(a.hi) == b.lo


def _lo_key(i: Interval):
    # Sort by lower bound: unbounded first, closed before open at the same value.
    return (i.lo is not None, i.lo, not i.lo_closed) if i.lo is not None else (False,)


@dataclass(frozen=True, slots=True)
class ValueSet:
    intervals: tuple[Interval, ...] = ()
    null: bool = False

    # -- constructors -------------------------------------------------------
    @staticmethod
    def of(intervals: Iterable[Interval], null: bool = False) -> ValueSet:
        cleaned = [n for i in intervals if (n := i.normalized()) is not None]
        cleaned.sort(key=_lo_key)
        merged: list[Interval] = []
        for cur in cleaned:
            if merged and _touches(merged[-1], cur):
                last = merged[-1]
                hi_src = last if _hi_after(last, cur) else cur
                merged[-1] = Interval(last.lo, hi_src.hi, last.lo_closed, hi_src.hi_closed)
            else:
                merged.append(cur)
        return ValueSet(tuple(merged), null)

    @staticmethod
    def empty() -> ValueSet:
        return ValueSet((), False)

    @staticmethod
    def non_null() -> ValueSet:
        return ValueSet((Interval(None, None, False, False),), False)

    @staticmethod
    def everything() -> ValueSet:
        return ValueSet((Interval(None, None, False, False),), True)

    @staticmethod
    def only_null() -> ValueSet:
        return ValueSet((), True)

    @staticmethod
    def points(values: Iterable[Any]) -> ValueSet:
        return ValueSet.of(Interval(v, v) for v in values)

    @staticmethod
    def compare(op: str, v: Any) -> ValueSet:
        """The non-null values x for which `x <op> v` is TRUE."""
        if op == "=":
            return ValueSet.points([v])
        if op == "<>":
            return ValueSet.of([Interval(None, v, False, False), Interval(v, None, False, False)])
        if op == "<":
            return ValueSet.of([Interval(None, v, False, False)])
        if op == "<=":
            return ValueSet.of([Interval(None, v, False, True)])
        if op == ">":
            return ValueSet.of([Interval(v, None, False, False)])
        if op == ">=":
            return ValueSet.of([Interval(v, None, True, False)])
        raise ValueError(f"unknown comparison {op!r}")

    # -- queries --------------------------------------------------------------
    def is_empty(self) -> bool:
        return not self.intervals and not self.null

    def is_everything(self) -> bool:
        return self.null and self.intervals == (Interval(None, None, False, False),)

    def contains_value(self, v: Any) -> bool:
        if v is None:
            return self.null
        return any(i.contains_value(v) for i in self.intervals)

    def issubset(self, other: ValueSet) -> bool:
        if self.null and not other.null:
            return False
        # other is merged, so each of our intervals must fit inside one of its.
        j = 0
        for a in self.intervals:
            while j < len(other.intervals) and not _hi_after(other.intervals[j], a):
                j += 1
            if j == len(other.intervals):
                return False
            b = other.intervals[j]
            if not (_lo_before(b, a) and _hi_after(b, a)):
                return False
        return True

    def isdisjoint(self, other: ValueSet) -> bool:
        return self.intersect(other).is_empty()

    # -- algebra --------------------------------------------------------------
    def intersect(self, other: ValueSet) -> ValueSet:
        out: list[Interval] = []
        a, b = self.intervals, other.intervals
        i = j = 0
        while i < len(a) and j < len(b):
            x, y = a[i], b[j]
            lo_src = y if _lo_before(x, y) else x
            hi_src = y if _hi_after(x, y) else x
            piece = Interval(lo_src.lo, hi_src.hi, lo_src.lo_closed, hi_src.hi_closed).normalized()
            if piece is not None:
                out.append(piece)
            # Advance whichever interval ends first.
            if _hi_after(x, y):
                j += 1
            else:
                i += 1
        return ValueSet.of(out, self.null and other.null)

    def union(self, other: ValueSet) -> ValueSet:
        return ValueSet.of(self.intervals + other.intervals, self.null or other.null)

    def complement_non_null(self) -> ValueSet:
        """Non-null values outside this set (NULL is never in the result)."""
        gaps: list[Interval] = []
        prev_hi, prev_closed, unbounded_start = None, False, True
        for iv in self.intervals:
            if unbounded_start:
                if iv.lo is not None:
                    gaps.append(Interval(None, iv.lo, False, not iv.lo_closed))
            elif iv.lo is not None:
                gaps.append(Interval(prev_hi, iv.lo, not prev_closed, not iv.lo_closed))
            if iv.hi is None:
                return ValueSet.of(gaps)
            unbounded_start = False
            prev_hi, prev_closed = iv.hi, iv.hi_closed
        if unbounded_start:
            return ValueSet.non_null()
        gaps.append(Interval(prev_hi, None, not prev_closed, False))
        return ValueSet.of(gaps)
