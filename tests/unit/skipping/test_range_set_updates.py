"""Range sets after rows change (diPs §4.1): greedy growth (Table 4) and taint bits."""

from __future__ import annotations

import datetime as dt
from collections import namedtuple

from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.base.schema import load_schema
from layout_core.predicates import value_from_json, value_to_json
from layout_core.skipping.rangesets import coarsen_column_stats, grow_column_stats, grow_ranges, taint_column_stats
from layout_core.skipping.router import LayoutIndex, RoutingIndex, route_query

SCHEMA = load_schema("tpch")
Block = namedtuple("Block", "block_id row_count stats union_bits all_bits")


def test_table_4_of_the_paper():
    start = ((3, 5), (10, 20), (23, 27))
    after_6 = grow_ranges(start, [6], 3)
    assert after_6 == ((3, 6), (10, 20), (23, 27))
    # add 13, delete 20, change 5 to 15: deletes are ignored, 13 and 15 are covered
    assert grow_ranges(after_6, [13, 15], 3) == after_6
    assert grow_ranges(after_6, [52], 3) == ((3, 6), (10, 27), (52, 52))


def test_a_range_set_coarsens_by_closing_its_narrowest_gaps():
    def stored(*ranges):
        return {"min": value_to_json(1), "max": value_to_json(60), "null_count": 2,
                **({"ranges": [[value_to_json(a), value_to_json(b)] for a, b in ranges]} if ranges else {})}

    stats = stored((1, 2), (4, 10), (30, 31), (33, 40), (60, 60))
    # gaps: 2 (2-4), 20 (10-30), 2 (31-33), 20 (40-60): the two 2-wide ones close first, leftmost first
    assert coarsen_column_stats(stats, 4) == stored((1, 10), (30, 31), (33, 40), (60, 60))
    assert coarsen_column_stats(stats, 3) == stored((1, 10), (30, 40), (60, 60))
    assert coarsen_column_stats(stats, 1) == stored()  # min/max only
    assert coarsen_column_stats(stats, 8) == stats
    tainted = {**stats, "tainted": True}
    assert coarsen_column_stats(tainted, 1) == tainted  # unknown stays unknown


def test_with_room_a_new_value_is_a_range_of_its_own():
    assert grow_ranges(((1, 2),), [9], 3) == ((1, 2), (9, 9))
    assert grow_ranges((), [5, 1, None], 1) == ((1, 5),)
    days = grow_ranges(((dt.date(2024, 1, 1), dt.date(2024, 1, 31)),), [dt.date(2024, 3, 1)], 1)
    assert days == ((dt.date(2024, 1, 1), dt.date(2024, 3, 1)),)
    assert grow_ranges((("apple", "apricot"), ("zebra", "zoo")), ["banana"], 2) == \
        (("apple", "banana"), ("zebra", "zoo"))


@settings(max_examples=300, deadline=None)
@given(old=st.lists(st.integers(-50, 50), min_size=1, max_size=30),
       new=st.lists(st.one_of(st.none(), st.integers(-80, 80)), max_size=30),
       n_r=st.integers(1, 6), cuts=st.integers(0, 2 ** 30))
def test_grown_ranges_cover_every_old_and_new_value_and_stay_few(old, new, n_r, cuts):
    values = sorted(set(old))
    ranges, start = [], 0  # some covering range set of the old values, at most n_r ranges
    for i in range(1, len(values)):
        if cuts >> i & 1 and len(ranges) < n_r - 1:
            ranges.append((values[start], values[i - 1]))
            start = i
    ranges.append((values[start], values[-1]))
    grown = grow_ranges(ranges, new, n_r)
    assert len(grown) <= n_r
    assert all(a <= b < c for (a, b), (c, _) in zip(grown, grown[1:]))
    for v in old + [v for v in new if v is not None]:
        assert any(lo <= v <= hi for lo, hi in grown), v
    for lo, hi in ranges:  # ranges only grow
        assert any(a <= lo and hi <= b for a, b in grown)


def test_block_statistics_grow_in_their_stored_form():
    stats = {"min": value_to_json(1), "max": value_to_json(9), "null_count": 0,
             "ranges": [[value_to_json(1), value_to_json(2)], [value_to_json(8), value_to_json(9)]]}
    grown = grow_column_stats(stats, [3, None, 20], n_r=2)
    assert grown["null_count"] == 1
    assert value_from_json(grown["min"]) == 1 and value_from_json(grown["max"]) == 20
    assert [[value_from_json(a), value_from_json(b)] for a, b in grown["ranges"]] == [[1, 9], [20, 20]]
    assert stats["null_count"] == 0  # the input is not changed
    # a block whose column held only NULLs gets its first range
    first = grow_column_stats({"min": None, "max": None, "null_count": 4}, [7], n_r=4)
    assert (value_from_json(first["min"]), value_from_json(first["max"]), first["null_count"]) == (7, 7, 4)
    assert "ranges" not in first


def _layout(table, blocks):
    return LayoutIndex.from_blocks(table, [Block(10 + i, 10, s, 0, 0) for i, s in enumerate(blocks)], [],
                                   version_id=1)


def _stats(lo, hi):
    return {"min": value_to_json(lo), "max": value_to_json(hi), "null_count": 0}


def test_a_tainted_block_is_never_skipped_originates_no_diP_and_still_receives_them():
    orders = _layout("orders", [
        {"o_orderkey": _stats(1, 100), "o_custkey": _stats(1, 10)},
        {"o_orderkey": taint_column_stats(_stats(101, 200)), "o_custkey": _stats(11, 20)},
        {"o_orderkey": _stats(201, 300), "o_custkey": taint_column_stats(_stats(21, 30))},
    ])
    lineitem = _layout("lineitem", [{"l_orderkey": _stats(1, 50)}, {"l_orderkey": _stats(150, 160)},
                                    {"l_orderkey": _stats(250, 260)}])
    index = RoutingIndex({"orders": (orders,), "lineitem": (lineitem,)}, {})
    # own predicate: block 11's order keys are unknown, so it is read
    route = route_query("SELECT * FROM orders o WHERE o.o_orderkey > 250", index, SCHEMA)
    assert sorted(route.refs[0].blocks) == [11, 12]
    # orders keeps block 11, whose order keys are unknown: no diP to lineitem
    sql = ("SELECT count(*) FROM orders o JOIN lineitem l ON o.o_orderkey = l.l_orderkey "
           "WHERE o.o_custkey BETWEEN 11 AND 20")
    route = route_query(sql, index, SCHEMA)
    (o,) = [r for r in route.refs if r.alias == "o"]
    (li,) = [r for r in route.refs if r.alias == "l"]
    assert sorted(o.blocks) == [11, 12]  # block 12's customer keys are tainted: read
    assert sorted(li.blocks) == [10, 11, 12]
    # lineitem keeps block 10 (keys 1-50) only; its diP reaches orders: untainted blocks
    # outside 1-50 are skipped, the tainted one (11) is read
    sql = ("SELECT count(*) FROM orders o JOIN lineitem l ON o.o_orderkey = l.l_orderkey "
           "WHERE l.l_orderkey < 60")
    route = route_query(sql, index, SCHEMA)
    (o,) = [r for r in route.refs if r.alias == "o"]
    assert sorted(o.blocks) == [10, 11]
