"""Vectorized zone maps agree with the per-block `might_match` (whose soundness is
property-tested against brute force in test_predicate_reasoning) and never skip more."""

import datetime as dt
from decimal import Decimal

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
