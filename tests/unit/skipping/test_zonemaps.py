"""Vectorized zone maps agree with the per-block `might_match` (whose soundness is
property-tested against brute force in test_predicate_reasoning) and never skip more."""

import datetime as dt
from decimal import Decimal

import numpy as np

from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.predicates import Column, ColumnCompare, ColumnStats, Compare, InList, IsNull, might_match, negate
from layout_core.skipping.zonemaps import ZoneMaps, might_match_blocks
from tests.helpers.sql3vl import evaluate
from tests.unit.predicates.test_predicate_reasoning import (
    COMMON,
    _interpretations,
    block_stats,
    focused,
    predicates,
    row_sets,
)


@settings(max_examples=500, **COMMON)
@given(st.one_of(predicates(3), focused(1)), st.lists(row_sets(min_size=1, max_size=6), min_size=1, max_size=5),
       st.data())
def test_vectorized_zone_maps_match_the_scalar_rule(p, blocks, data):
    stats = [block_stats(data.draw, rows) for rows in blocks]
    mask = might_match_blocks(p, ZoneMaps.of(stats, [len(rows) for rows in blocks]))
    for i, rows in enumerate(blocks):
        scalar = might_match(p, stats[i], len(rows))
        assert mask[i] or not scalar, f"block {i}: vectorized skips what the scalar rule keeps"
        if not mask[i]:  # and a skipped block truly has no matching row
            for fn in _interpretations(p):
                assert all(evaluate(p, row, fn) is not True for row in rows)


def test_known_blocks():
    d, s, day = Column("d", "decimal"), Column("s", "string"), Column("day", "date")
    stats = [
        {"d": ColumnStats(Decimal("1.10"), Decimal("1.90"), 0, 3), "s": ColumnStats("a", "c", 1, 3)},
        {"d": ColumnStats(None, None, 2, 2), "s": ColumnStats("x", "z", 0, 2)},
        {"s": ColumnStats("b", "b", 0, 5), "day": ColumnStats(dt.date(2020, 1, 1), dt.date(2020, 1, 31), 0, 5)},
        {"d": ColumnStats(Decimal(5), Decimal(9), 0, 0)},  # empty block
    ]
    zm = ZoneMaps.of(stats, [3, 2, 5, 0])
    assert list(might_match_blocks(Compare(d, ">", 1), zm)) == [True, False, True, False]
    assert list(might_match_blocks(Compare(d, ">", 2), zm)) == [False, False, True, False]
    assert list(might_match_blocks(IsNull(d), zm)) == [False, True, True, False]
    assert list(might_match_blocks(negate(IsNull(s)), zm)) == [True, True, True, False]
    assert list(might_match_blocks(InList(s, frozenset({"b", "y"})), zm)) == [True, True, True, False]
    assert list(might_match_blocks(Compare(day, ">=", dt.date(2020, 2, 1)), zm)) == [True, True, False, False]
    # column comparisons are not read from zone maps
    assert list(might_match_blocks(ColumnCompare(d, "<", d), zm)) == [True, True, True, False]


def _values(kind):
    return {"int": st.integers(-5, 5), "decimal": st.decimals(-3, 3, places=1),
            "date": st.dates(dt.date(2020, 1, 1), dt.date(2020, 1, 9)), "string": st.text("abc", max_size=2)}[kind]


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(["int", "decimal", "date", "string"]), st.data())
def test_ranges_placed_by_bisection_meet_exactly_the_intervals_compared_one_by_one(kind, data):
    from layout_core.predicates.valuesets import Interval
    from layout_core.skipping.zonemaps import _Ordered, _ranges_meet

    pairs = data.draw(st.lists(st.tuples(_values(kind), _values(kind)), min_size=1, max_size=12))
    lo = np.array([min(a, b) for a, b in pairs], dtype=object)
    hi = np.array([max(a, b) for a, b in pairs], dtype=object)
    bound = st.one_of(st.none(), _values(kind))
    intervals = [Interval(lo=data.draw(bound), hi=data.draw(bound), lo_closed=data.draw(st.booleans()),
                          hi_closed=data.draw(st.booleans()))
                 for _ in range(data.draw(st.integers(0, 3)))]
    ordered = _Ordered.of(lo, hi)
    assert ordered.meet(intervals).tolist() == _ranges_meet(intervals, lo, hi).tolist()


def test_values_that_cannot_be_sorted_are_compared_one_by_one():
    from layout_core.skipping.zonemaps import _Ordered

    assert _Ordered.of(np.array([1.0, float("nan")], dtype=object), np.array([2.0, 3.0], dtype=object)) is None
    assert _Ordered.of(np.array([1, "a"], dtype=object), np.array([2, "b"], dtype=object)) is None

