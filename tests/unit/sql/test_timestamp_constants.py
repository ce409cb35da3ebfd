"""Timestamp constants: Spark reads `TIMESTAMP '...'` (and a string or a date compared
with a timestamp column) in the session's time zone, which the router does not know,
so each comparison is widened by 26 hours (UTC-12:00 to UTC+14:00), the other way
under NOT. Worked by hand on the trips schema, then routed against one-day blocks."""

from __future__ import annotations

import datetime as dt
from collections import namedtuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.base.schema import load_schema
from layout_core.predicates import TRUE, Between, Column, Compare, disj, negate, value_to_json
from layout_core.skipping.router import LayoutIndex, RoutingIndex, route_query
from layout_core.sql.analysis import analyze

SCHEMA = load_schema("trips")
PICKUP = Column("tr_pickup", "timestamp")
Block = namedtuple("Block", "block_id row_count stats union_bits all_bits")


def _filter(where: str):
    a = analyze(f"SELECT tr_id FROM trips WHERE {where}", SCHEMA)
    return a.filters.get(a.refs[0].key, TRUE)



@pytest.mark.parametrize("where, expected", [
    # March 1st 00:00 less 26 hours is February 28th 22:00 (2024 is a leap year)
    ("tr_pickup >= TIMESTAMP '2024-03-01 00:00:00'", Compare(PICKUP, ">=", dt.datetime(2024, 2, 28, 22))),
    ("tr_pickup < TIMESTAMP '2024-03-02 12:00:00'", Compare(PICKUP, "<", dt.datetime(2024, 3, 3, 14))),
    ("NOT (tr_pickup >= TIMESTAMP '2024-03-01 00:00:00')", Compare(PICKUP, "<", dt.datetime(2024, 3, 2, 2))),
    ("tr_pickup = TIMESTAMP '2024-03-05 10:00:00'",
     Between(PICKUP, dt.datetime(2024, 3, 4, 8), dt.datetime(2024, 3, 6, 12))),
    ("NOT (tr_pickup = TIMESTAMP '2024-03-05 10:00:00')", TRUE),
    ("tr_pickup <> TIMESTAMP '2024-03-05 10:00:00'", TRUE),
    ("tr_pickup BETWEEN TIMESTAMP '2024-03-05 00:00:00' AND TIMESTAMP '2024-03-09 00:00:00'",
     Between(PICKUP, dt.datetime(2024, 3, 3, 22), dt.datetime(2024, 3, 10, 2))),
    # NOT BETWEEN keeps what lies outside the range narrowed by the slack at both ends
    ("tr_pickup NOT BETWEEN TIMESTAMP '2024-03-05 00:00:00' AND TIMESTAMP '2024-03-09 00:00:00'",
     negate(Between(PICKUP, dt.datetime(2024, 3, 6, 2), dt.datetime(2024, 3, 7, 22)))),
    ("tr_pickup < '2024-03-01'", Compare(PICKUP, "<", dt.datetime(2024, 3, 2, 2))),  # a string, read as a timestamp
    ("tr_pickup >= DATE '2024-03-01'", Compare(PICKUP, ">=", dt.datetime(2024, 2, 28, 22))),
    ("tr_pickup IN (TIMESTAMP '2024-03-01 00:00:00', TIMESTAMP '2024-03-20 00:00:00')",
     disj(Between(PICKUP, dt.datetime(2024, 2, 28, 22), dt.datetime(2024, 3, 2, 2)),
          Between(PICKUP, dt.datetime(2024, 3, 18, 22), dt.datetime(2024, 3, 21, 2)))),
    ("tr_pickup NOT IN (TIMESTAMP '2024-03-01 00:00:00')", TRUE),
])
def test_a_timestamp_constant_widens_its_comparison_by_26_hours(where, expected):
    assert _filter(where) == expected


def test_an_instant_with_an_offset_is_read_as_its_utc_wall_time():
    assert _filter("tr_pickup >= TIMESTAMP '2024-03-01 05:00:00+05:00'") == Compare(
        PICKUP, ">=", dt.datetime(2024, 2, 28, 22))


def test_a_range_of_one_day_reads_the_blocks_within_a_day_of_it():
    # ten blocks, one day of pickups each: March 1st (block 1) to March 10th (block 10)
    blocks = [Block(day, 100, {"tr_pickup": {"min": value_to_json(dt.datetime(2024, 3, day)),
                                             "max": value_to_json(dt.datetime(2024, 3, day, 23, 59)),
                                             "null_count": 0}}, 0, 0) for day in range(1, 11)]
    index = RoutingIndex({"trips": (LayoutIndex.from_blocks("trips", blocks, [], version_id=1),)}, {})
    route = route_query("SELECT count(*) FROM trips WHERE tr_pickup >= TIMESTAMP '2024-03-05 00:00:00' "
                        "AND tr_pickup < TIMESTAMP '2024-03-06 00:00:00'", index, SCHEMA)
    # widened to March 3rd 22:00 - March 7th 02:00: the days 3 to 7
    assert sorted(route.refs[0].blocks) == [3, 4, 5, 6, 7]
    route = route_query("SELECT count(*) FROM trips WHERE NOT (tr_pickup < TIMESTAMP '2024-03-09 00:00:00')",
                        index, SCHEMA)
    assert sorted(route.refs[0].blocks) == [7, 8, 9, 10]  # from March 7th 22:00


OPS = {"<": lambda a, b: a < b, "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
       "=": lambda a, b: a == b, "<>": lambda a, b: a != b}
hours = st.integers(30, 90)  # around the constant: where a slack too small would show
offsets = st.sampled_from([-12, -11, -6, 0, 1, 6, 13, 14])  # hours east of UTC, the extremes often


@settings(max_examples=300, deadline=None)
@given(rows=st.lists(st.tuples(hours, st.integers(0, 9)), min_size=1, max_size=20),
       literal=st.integers(58, 62), op=st.sampled_from(sorted(OPS)), negated=st.booleans(),
       stats_offset=offsets, session_offset=offsets)
def test_no_block_with_a_matching_row_is_skipped_in_any_pair_of_time_zones(
        rows, literal, op, negated, stats_offset, session_offset):
    """Rows hold instants; the statistics show them as wall times of one zone, the query's
    constant is a wall time of another: the router must keep every block with a match."""
    start = dt.datetime(2024, 3, 1)
    walls: dict[int, list[dt.datetime]] = {}
    for hour, block in rows:  # the instant, as a wall time of the statistics' zone
        walls.setdefault(block, []).append(start + dt.timedelta(hours=hour + stats_offset))
    blocks = [Block(b, len(v), {"tr_pickup": {"min": value_to_json(min(v)), "max": value_to_json(max(v)),
                                              "null_count": 0}}, 0, 0) for b, v in sorted(walls.items())]
    index = RoutingIndex({"trips": (LayoutIndex.from_blocks("trips", blocks, [], version_id=1),)}, {})
    wall = start + dt.timedelta(hours=literal)
    condition = f"tr_pickup {op} TIMESTAMP '{wall:%Y-%m-%d %H:%M:%S}'"
    route = route_query(f"SELECT count(*) FROM trips WHERE {'NOT ' if negated else ''}({condition})", index, SCHEMA)
    constant = start + dt.timedelta(hours=literal - session_offset)  # the instant the session reads
    for hour, block in rows:
        if OPS[op](start + dt.timedelta(hours=hour), constant) != negated:
            assert block in route.refs[0].blocks, (hour, block, route.refs[0].blocks)
