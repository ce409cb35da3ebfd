"""diP exchange in the router, worked by hand on small TPC-H-shaped layouts."""

from __future__ import annotations

import datetime as dt
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.base.schema import load_schema
from layout_core.predicates import ColumnStats, value_to_json
from layout_core.skipping import dips
from layout_core.skipping.dips import DataBoxes, DataPred, key_ranges
from layout_core.skipping.router import LayoutIndex, RoutingIndex, route_query
from layout_core.skipping.zonemaps import ZoneMaps

SCHEMA = load_schema("tpch")
Block = namedtuple("Block", "block_id row_count stats union_bits all_bits")


def _stats(lo=None, hi=None, nulls=0, ranges=None):
    s = {"min": value_to_json(lo), "max": value_to_json(hi), "null_count": nulls}
    if ranges:
        s["ranges"] = [[value_to_json(a), value_to_json(b)] for a, b in ranges]
    return s


def _layout(table, blocks, rows=10):
    """blocks: per block, {column: _stats(...)}; block ids 10, 11, ..."""
    return LayoutIndex.from_blocks(table, [Block(10 + i, rows, s, 0, 0) for i, s in enumerate(blocks)], [],
                                   version_id=1)


# customer: block 10 holds segment BUILDING with keys 1-100, block 11 MACHINERY with keys 101-200
CUSTOMER = _layout("customer", [
    {"c_custkey": _stats(1, 100), "c_mktsegment": _stats("BUILDING", "BUILDING")},
    {"c_custkey": _stats(101, 200), "c_mktsegment": _stats("MACHINERY", "MACHINERY")},
])
# orders: by customer key, then order key ranges
ORDERS = _layout("orders", [
    {"o_custkey": _stats(1, 50), "o_orderkey": _stats(1, 1000)},
    {"o_custkey": _stats(51, 100), "o_orderkey": _stats(1001, 2000)},
    {"o_custkey": _stats(101, 200), "o_orderkey": _stats(2001, 3000)},
    {"o_custkey": _stats(None, None, nulls=10), "o_orderkey": _stats(3001, 4000)},  # NULL customers only
])
# lineitem: order key ranges; block 13's keys have a hole (range set) between 1500 and 3500
LINEITEM = _layout("lineitem", [
    {"l_orderkey": _stats(1, 900)},
    {"l_orderkey": _stats(950, 1100)},
    {"l_orderkey": _stats(2500, 2600)},
    {"l_orderkey": _stats(1, 4000, ranges=[(1, 10), (3900, 4000)])},
    {},  # no statistics at all
])
INDEX = RoutingIndex({"customer": (CUSTOMER,), "orders": (ORDERS,), "lineitem": (LINEITEM,)}, {})


def _blocks(route, alias):
    (ref,) = [r for r in route.refs if r.alias == alias]
    return sorted(ref.blocks)


def test_an_exchange_stopped_at_its_cap_reads_more_and_says_so(monkeypatch):
    sql = """SELECT count(*) FROM customer c, orders o, lineitem l
             WHERE c.c_custkey = o.o_custkey AND o.o_orderkey = l.l_orderkey AND c.c_mktsegment = 'BUILDING'"""
    monkeypatch.setattr(dips, "MAX_DIPS", 1)
    route = route_query(sql, INDEX, SCHEMA)
    assert route.dips_built == 1
    assert any("stopped at its cap of 1 diPs" in note for note in route.dip_notes)
    # the one diP built, lineitem's (leaves up), is unknown (its block 14 has no statistics):
    # every block its own filter keeps is read, where the whole exchange reads o 10-11, l 10-11-13-14
    assert _blocks(route, "o") == [10, 11, 12, 13] and _blocks(route, "l") == [10, 11, 12, 13, 14]


def test_a_dimension_filter_reaches_the_fact_table_through_two_joins():
    sql = """SELECT count(*) FROM customer c, orders o, lineitem l
             WHERE c.c_custkey = o.o_custkey AND o.o_orderkey = l.l_orderkey AND c.c_mktsegment = 'BUILDING'"""
    route = route_query(sql, INDEX, SCHEMA)
    assert _blocks(route, "c") == [10]
    # custkeys 1-100: orders blocks 10 and 11 (12 holds 101-200, 13 only NULL customers)
    assert _blocks(route, "o") == [10, 11]
    # order keys 1-2000: lineitem 10, 11, 13 (its range 1-10) and 14 (no statistics); not 12 (2500-2600)
    assert _blocks(route, "l") == [10, 11, 13, 14]
    plain = route_query(sql, INDEX, SCHEMA, dips=False)
    assert _blocks(plain, "o") == [10, 11, 12, 13] and _blocks(plain, "l") == [10, 11, 12, 13, 14]
    assert route.dips_built >= 2
    removed = {(d.edge.from_column, d.edge.to_column): d.removed for d in route.dips}
    assert removed[("c_custkey", "o_custkey")] == ((12, 13),)
    assert removed[("o_orderkey", "l_orderkey")] == ((12,),)


def test_the_range_set_hole_lets_a_block_be_skipped_that_min_max_would_read():
    sql = """SELECT count(*) FROM orders o JOIN lineitem l ON o.o_orderkey = l.l_orderkey
             WHERE o.o_custkey BETWEEN 120 AND 130"""
    route = route_query(sql, INDEX, SCHEMA)
    assert _blocks(route, "o") == [12]  # order keys 2001-3000
    # lineitem 13 spans 1-4000 by min/max, but holds only 1-10 and 3900-4000
    assert _blocks(route, "l") == [12, 14]


@pytest.mark.parametrize("preserved_orders, preserved_lineitem", [
    ("orders o LEFT JOIN lineitem l", "lineitem l LEFT JOIN orders o"),
    ("lineitem l RIGHT JOIN orders o", "orders o RIGHT JOIN lineitem l"),  # the mirror image
])
def test_diPs_go_from_the_preserved_side_of_an_outer_join_only(preserved_orders, preserved_lineitem):
    filtered_preserved = f"""SELECT o.o_orderkey, l.l_quantity FROM {preserved_orders}
                             ON o.o_orderkey = l.l_orderkey WHERE o.o_custkey <= 50"""
    route = route_query(filtered_preserved, INDEX, SCHEMA)
    assert _blocks(route, "o") == [10]
    assert _blocks(route, "l") == [10, 11, 13, 14]  # keys 1-1000 reach the NULL-supplying side
    filtered_nullable = f"""SELECT l.l_linenumber, o.o_orderstatus FROM {preserved_lineitem}
                            ON o.o_orderkey = l.l_orderkey AND o.o_custkey <= 50"""
    route = route_query(filtered_nullable, INDEX, SCHEMA)
    assert _blocks(route, "l") == [10, 11, 12, 13, 14]  # every lineitem row is in the answer
    assert _blocks(route, "o") == [10]


def test_an_anti_join_never_shrinks_its_outer_side():
    sql = """SELECT o.o_orderkey FROM orders o WHERE NOT EXISTS
             (SELECT * FROM lineitem l WHERE l.l_orderkey = o.o_orderkey AND l.l_orderkey < 900)"""
    route = route_query(sql, INDEX, SCHEMA)
    assert _blocks(route, "o") == [10, 11, 12, 13]


def test_null_join_keys_match_nothing_and_unknown_statistics_match_everything():
    sql = "SELECT count(*) FROM customer c JOIN orders o ON c.c_custkey = o.o_custkey"
    route = route_query(sql, INDEX, SCHEMA)
    assert _blocks(route, "o") == [10, 11, 12]  # block 13's customer keys are all NULL
    # lineitem block 14 has no l_orderkey statistics: it never originates a diP, so orders keeps all
    sql = "SELECT count(*) FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey"
    route = route_query(sql, INDEX, SCHEMA)
    assert _blocks(route, "o") == [10, 11, 12, 13]
    assert ("l_orderkey", "o_orderkey") not in {(d.edge.from_column, d.edge.to_column) for d in route.dips}


def test_an_empty_table_gives_its_inner_join_partner_nothing_to_read():
    empty = RoutingIndex({"customer": (_layout("customer", []),), "orders": (ORDERS,)}, {})
    sql = "SELECT count(*) FROM customer c JOIN orders o ON c.c_custkey = o.o_custkey"
    route = route_query(sql, empty, SCHEMA)
    assert _blocks(route, "c") == [] and _blocks(route, "o") == []
    left = "SELECT count(*) FROM orders o LEFT JOIN customer c ON c.c_custkey = o.o_custkey"
    assert _blocks(route_query(left, empty, SCHEMA), "o") == [10, 11, 12, 13]


def test_a_join_on_an_expression_carries_no_diP():
    sql = """SELECT count(*) FROM customer c JOIN orders o ON c.c_custkey + 1 = o.o_custkey
             WHERE c.c_mktsegment = 'BUILDING'"""
    route = route_query(sql, INDEX, SCHEMA)
    assert _blocks(route, "o") == [10, 11, 12, 13] and route.dips == ()
    assert route.dip_notes == ("c.c_custkey + 1 = o.o_custkey: a join on expressions carries no diP",)


def test_a_cycle_of_joins_settles_and_keeps_what_every_edge_admits():
    # l1 -- l2 on the order key, l2 -- o and o -- l1 on the order key as well: a triangle
    sql = """SELECT count(*) FROM lineitem l1, lineitem l2, orders o
             WHERE l1.l_orderkey = l2.l_orderkey AND l2.l_orderkey = o.o_orderkey
               AND o.o_orderkey = l1.l_orderkey AND o.o_custkey > 150"""
    route = route_query(sql, INDEX, SCHEMA)
    assert _blocks(route, "o") == [12]
    assert _blocks(route, "l1") == _blocks(route, "l2") == [12, 14]


def test_route_json_says_which_diP_removed_which_blocks():
    sql = """SELECT count(*) FROM orders o JOIN lineitem l ON o.o_orderkey = l.l_orderkey
             WHERE o.o_custkey BETWEEN 120 AND 130"""
    out = route_query(sql, INDEX, SCHEMA).to_json()
    assert {"edge": "diP o.o_orderkey -> l.l_orderkey", "to": out["dips"][0]["to"],
            "blocks_removed": [10, 11, 13]} in out["dips"]


def test_a_diP_is_the_merged_union_of_the_kept_blocks_ranges():
    zm = ZoneMaps.of([{"k": ColumnStats(1, 9, 0, 3, ((1, 2), (8, 9)))}, {"k": ColumnStats(2, 5, 0, 3)},
                      {"k": ColumnStats(20, 30, 0, 3)}], [3, 3, 3])
    ranges = key_ranges(zm.columns["k"])
    dip = DataPred.union([(ranges, np.array([True, True, False]))])
    assert [(round(a), round(b)) for a, b in zip(dip.starts, dip.ends)] == [(1, 5), (8, 9)]
    target = key_ranges(ZoneMaps.of([{"k": ColumnStats(6, 7, 0, 1)}, {"k": ColumnStats(5, 6, 0, 1)},
                                     {"k": ColumnStats(9, 12, 0, 1)}], [1, 1, 1]).columns["k"])
    assert list(dip.meets(target)) == [False, True, True]


@settings(max_examples=200, deadline=None)
@given(blocks=st.lists(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 6)), min_size=1, max_size=3),
                       min_size=1, max_size=8),
       kept=st.lists(st.booleans(), min_size=8, max_size=8))
def test_a_diP_merges_exactly_the_overlapping_ranges_of_the_kept_blocks(blocks, kept):
    # each block: ranges (start, length) on integer keys; the expected union merged by hand below
    stats = []
    for ranges in blocks:
        spans = sorted((a, a + n) for a, n in ranges)
        disjoint = [list(spans[0])]
        for a, b in spans[1:]:
            if a <= disjoint[-1][1]:
                disjoint[-1][1] = max(disjoint[-1][1], b)
            else:
                disjoint.append([a, b])
        stats.append({"k": ColumnStats(disjoint[0][0], disjoint[-1][1], 0, 1, tuple(map(tuple, disjoint)))})
    keep = np.array(kept[:len(blocks)])
    dip = DataPred.union([(key_ranges(ZoneMaps.of(stats, [1] * len(blocks)).columns["k"]), keep)])
    spans = sorted((a, a + n) for ranges, k in zip(blocks, keep) if k for a, n in ranges)
    expected = []
    for a, b in spans:  # touching or overlapping ranges merge (keys are rounded outwards)
        if expected and a <= expected[-1][1]:
            expected[-1][1] = max(expected[-1][1], b)
        else:
            expected.append([a, b])
    assert [(round(a), round(b)) for a, b in zip(dip.starts, dip.ends)] == [tuple(e) for e in expected]


def test_the_diP_of_every_block_is_built_once_and_answers_as_a_fresh_one():
    zm = ZoneMaps.of([{"k": ColumnStats(1, 9, 0, 3, ((1, 2), (8, 9)))}, {"k": ColumnStats(20, 30, 0, 3)},
                      {"k": ColumnStats(None, None, 3, 3)}], [3, 3, 3])  # the last block: NULLs only
    ranges = key_ranges(zm.columns["k"])
    whole = ranges.whole
    assert whole is ranges.whole
    assert [(round(a), round(b)) for a, b in zip(whole.starts, whole.ends)] == [(1, 2), (8, 9), (20, 30)]
    target = key_ranges(ZoneMaps.of([{"k": ColumnStats(3, 7, 0, 1)}, {"k": ColumnStats(5, 8, 0, 1)},
                                     {"k": ColumnStats(31, 40, 0, 1)}], [1, 1, 1]).columns["k"])
    first = whole.meets(target)
    assert list(first) == [False, True, False] and whole.meets(target) is first  # remembered
    assert not first.flags.writeable  # shared by every query routed: nobody may change it
    # a block without usable statistics sends no diP: neither does the whole column
    unknown = key_ranges(ZoneMaps.of([{"k": ColumnStats(1, 2, 0, 1)}, {"k": ColumnStats(None, None, 0, 1)}],
                                     [1, 1]).columns["k"])
    assert unknown.whole is None


def test_dates_and_strings_make_diPs_too():
    days = key_ranges(ZoneMaps.of([{"d": ColumnStats(dt.date(2024, 1, 1), dt.date(2024, 1, 31), 0, 1)}],
                                  [1]).columns["d"])
    other = key_ranges(ZoneMaps.of([{"d": ColumnStats(dt.date(2024, 2, 1), dt.date(2024, 2, 2), 0, 1)},
                                    {"d": ColumnStats(dt.date(2024, 1, 31), dt.date(2024, 2, 2), 0, 1)}],
                                   [1, 1]).columns["d"])
    assert list(DataPred.union([(days, np.array([True]))]).meets(other)) == [False, True]
    names = key_ranges(ZoneMaps.of([{"s": ColumnStats("apple", "banana", 0, 1)}], [1]).columns["s"])
    probe = key_ranges(ZoneMaps.of([{"s": ColumnStats("cherry", "date", 0, 1)},
                                    {"s": ColumnStats("b", "c", 0, 1)}], [1, 1]).columns["s"])
    assert list(DataPred.union([(names, np.array([True]))]).meets(probe)) == [False, True]
    # two families exchange nothing
    assert list(DataPred.union([(names, np.array([True]))]).meets(other)) == [True, True]


def test_a_full_join_passes_no_diP_either_way():
    sql = """SELECT o.o_orderkey, l.l_quantity FROM orders o FULL JOIN lineitem l ON o.o_orderkey = l.l_orderkey
             WHERE o.o_custkey <= 50 OR o.o_custkey IS NULL"""
    route = route_query(sql, INDEX, SCHEMA)
    assert _blocks(route, "l") == [10, 11, 12, 13, 14] and route.dips == ()


def test_a_derived_table_grouped_by_the_join_key_receives_diPs():
    sql = """SELECT o.o_orderkey, t.n FROM orders o,
             (SELECT l.l_orderkey, count(*) AS n FROM lineitem l GROUP BY l.l_orderkey) t
             WHERE t.l_orderkey = o.o_orderkey AND o.o_custkey <= 50"""
    route = route_query(sql, INDEX, SCHEMA)
    # a group holds the rows of one order key: the groups of keys 1-1000 need lineitem 10, 11, 13 and 14
    assert _blocks(route, "l") == [10, 11, 13, 14]


def test_a_cte_read_twice_sends_diPs_but_receives_none():
    once = """WITH o2 AS (SELECT o.o_custkey, o.o_orderkey FROM orders o)
              SELECT count(*) FROM customer c, o2 WHERE c.c_custkey = o2.o_custkey AND c.c_mktsegment = 'BUILDING'"""
    # BUILDING is customer block 10, keys 1-100: orders blocks 10 and 11
    assert _blocks(route_query(once, INDEX, SCHEMA), "o") == [10, 11]
    twice = once + " AND o2.o_orderkey = (SELECT max(o_orderkey) FROM o2)"
    route = route_query(twice, INDEX, SCHEMA)
    assert _blocks(route, "o") == [10, 11, 12, 13]  # the max reads every order
    assert _blocks(route, "c") == [10]


def test_in_over_a_group_by_of_the_key_passes_diPs_both_ways():
    sql = """SELECT l.l_quantity FROM lineitem l WHERE l.l_orderkey IN
             (SELECT o.o_orderkey FROM orders o WHERE o.o_custkey BETWEEN 120 AND 130 GROUP BY o.o_orderkey)"""
    route = route_query(sql, INDEX, SCHEMA)
    assert _blocks(route, "o") == [12]
    assert _blocks(route, "l") == [12, 14]


def test_a_union_receives_diPs_and_filters_in_every_branch():
    sql = """SELECT count(*) FROM orders o2,
             (SELECT l.l_orderkey AS k FROM lineitem l UNION ALL SELECT o.o_orderkey AS k FROM orders o) u
             WHERE u.k = o2.o_orderkey AND o2.o_custkey BETWEEN 120 AND 130"""
    route = route_query(sql, INDEX, SCHEMA)
    # customers 120-130 are in orders block 12 (order keys 2001-3000); lineitem blocks meeting
    # those keys: 12 (2500-2600) and 14 (no statistics); the orders branch: block 12
    assert _blocks(route, "o2") == [12]
    assert _blocks(route, "l") == [12, 14] and _blocks(route, "o") == [12]
    filtered = """SELECT count(*) FROM (SELECT l.l_orderkey AS k FROM lineitem l
                  UNION SELECT o.o_orderkey FROM orders o) u WHERE u.k > 3500"""
    route = route_query(filtered, INDEX, SCHEMA)
    assert _blocks(route, "l") == [13, 14] and _blocks(route, "o") == [13]  # 13: the range 3900-4000


def test_a_union_sends_the_union_of_its_branches_diPs_out():
    """customer: block 10 keys 1-100, block 11 keys 101-200. The union's keys are its
    branches' customers: orders 1-1000 (block 10, customers 1-50) and 1001-2000 (block 11,
    51-100) need customer block 10 only; 1-1000 and 2001-3000 (block 12, 101-200) need both;
    1-1000 and 3001-4000 need block 10: block 13 holds NULL customers only, which match
    no customer (the join skips it) and send nothing."""
    template = """SELECT count(*) FROM customer c JOIN
                  (SELECT o.o_custkey AS k FROM orders o WHERE o.o_orderkey <= 1000
                   UNION ALL SELECT o3.o_custkey FROM orders o3 WHERE o3.o_orderkey BETWEEN {} AND {}) u
                  ON c.c_custkey = u.k"""
    for (low, high), customers, second in (((1001, 2000), [10], [11]), ((2001, 3000), [10, 11], [12]),
                                           ((3001, 4000), [10], [])):
        route = route_query(template.format(low, high), INDEX, SCHEMA)
        assert _blocks(route, "o") == [10] and _blocks(route, "o3") == second
        assert _blocks(route, "c") == customers
    effects = [e.describe({"t0": "c", "t1": "o", "t2": "o3"}) for e in route.dips]
    assert effects == ["diP union(o.o_custkey | o3.o_custkey) -> c.c_custkey", "diP c.c_custkey -> o3.o_custkey"]
    # a branch that computes the column passes nothing on, so nothing comes out of the union
    computed = template.format(1001, 2000).replace("SELECT o3.o_custkey FROM", "SELECT o3.o_custkey + 0 FROM")
    assert _blocks(route_query(computed, INDEX, SCHEMA), "c") == [10, 11]


def test_except_passes_no_diP_between_its_sides():
    sql = """SELECT o.o_orderkey FROM orders o WHERE o.o_custkey <= 50
             EXCEPT SELECT l.l_orderkey FROM lineitem l"""
    route = route_query(sql, INDEX, SCHEMA)
    assert _blocks(route, "l") == [10, 11, 12, 13, 14]


def test_an_edge_without_statistics_says_so():
    sql = "SELECT count(*) FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey"
    route = route_query(sql, INDEX, SCHEMA)
    assert any("statistics are unknown" in note for note in route.dip_notes), route.dip_notes
    sql = "SELECT count(*) FROM orders o JOIN lineitem l ON l.l_suppkey = o.o_custkey WHERE o.o_custkey < 5"
    route = route_query(sql, INDEX, SCHEMA)
    assert any("l_suppkey has no usable statistics" in note for note in route.dip_notes), route.dip_notes


def test_explain_names_what_skipped_each_block():
    from layout_core.skipping.explain import explain_query

    sql = """SELECT count(*) FROM customer c, orders o, lineitem l
             WHERE c.c_custkey = o.o_custkey AND o.o_orderkey = l.l_orderkey AND c.c_mktsegment = 'BUILDING'"""
    out = explain_query(sql, INDEX, SCHEMA).to_json()
    by_alias = {r["alias"]: r for r in out["refs"]}
    assert by_alias["c"]["skipped"] == [{"block_id": 11, "by": "statistics: c_mktsegment = 'BUILDING'"}]
    assert by_alias["o"]["skipped"] == [{"block_id": 12, "by": "diP c.c_custkey -> o.o_custkey"},
                                        {"block_id": 13, "by": "diP c.c_custkey -> o.o_custkey"}]
    assert by_alias["l"]["skipped"] == [{"block_id": 12, "by": "diP o.o_orderkey -> l.l_orderkey"}]
    assert (by_alias["l"]["blocks_read"], by_alias["l"]["blocks_total"]) == (4, 5)
    plain = explain_query(sql, INDEX, SCHEMA, dips=False).to_json()
    assert [r["skipped"] for r in plain["refs"] if r["alias"] == "l"] == [[]]


def test_explain_of_a_never_true_predicate_and_of_bad_sql():
    from layout_core.skipping.explain import explain_query

    out = explain_query("SELECT * FROM orders o WHERE o.o_custkey < 1 AND o.o_custkey > 2", INDEX, SCHEMA)
    (ref,) = out.to_json()["refs"]
    assert ref["blocks_read"] == 0
    assert {s["by"] for s in ref["skipped"]} == {"the query's predicate on this table is never TRUE"}
    bad = explain_query("SELEC nonsense", INDEX, SCHEMA).to_json()
    assert bad["analyzed"] is False and bad["refs"] == []


# partsupp: blocks 10 and 11 hold small availqty, 12 large; each holds one box of (partkey, suppkey)
PARTSUPP = _layout("partsupp", [
    {"ps_partkey": _stats(1, 100), "ps_suppkey": _stats(1, 10), "ps_availqty": _stats(1, 10)},
    {"ps_partkey": _stats(101, 200), "ps_suppkey": _stats(11, 20), "ps_availqty": _stats(1, 10)},
    {"ps_partkey": _stats(201, 300), "ps_suppkey": _stats(1, 20), "ps_availqty": _stats(500, 600)},
])
PARTS_SOLD = _layout("lineitem", [
    {"l_partkey": _stats(1, 50), "l_suppkey": _stats(1, 5)},  # inside partsupp 10's box
    {"l_partkey": _stats(150, 160), "l_suppkey": _stats(1, 5)},  # each key alone meets a kept block, the pair none
    {"l_partkey": _stats(250, 260), "l_suppkey": _stats(1, 5)},  # parts of partsupp 12 only
    {"l_partkey": _stats(1, 200), "l_suppkey": _stats(1, 20)},  # meets both boxes
    {"l_partkey": _stats(None, None, nulls=10), "l_suppkey": _stats(1, 5)},  # NULL parts match nothing
    {},  # no statistics: kept
])
PAIRS = RoutingIndex({"partsupp": (PARTSUPP,), "lineitem": (PARTS_SOLD,)}, {})


def test_a_join_on_two_columns_sends_one_diP_over_the_pair():
    sql = """SELECT count(*) FROM partsupp ps, lineitem l
             WHERE ps.ps_partkey = l.l_partkey AND ps.ps_suppkey = l.l_suppkey AND ps.ps_availqty < 100"""
    route = route_query(sql, PAIRS, SCHEMA)
    assert _blocks(route, "ps") == [10, 11]
    # the keys one at a time admit parts 1-200 and suppliers 1-20: block 11 (parts 150-160 of
    # suppliers 1-5) passes both, but only partsupp 11 holds those parts, with suppliers 11-20
    assert _blocks(route, "l") == [10, 13, 15]
    removed_by = {d.edge.to_column: set(d.removed[0]) for d in route.dips if d.edge.to_ref == route.refs[1].ref}
    assert 11 in removed_by["(l_partkey, l_suppkey)"]
    assert all(11 not in blocks for column, blocks in removed_by.items() if not column.startswith("("))


def test_a_pair_diP_is_the_boxes_of_the_kept_blocks():
    source = ZoneMaps.of([{"a": ColumnStats(1, 10, 0, 3), "b": ColumnStats(100, 110, 0, 3)},
                          {"a": ColumnStats(20, 30, 0, 3), "b": ColumnStats(200, 210, 0, 3)},
                          {"a": ColumnStats(1, 30, 0, 3), "b": ColumnStats(None, None, 3, 3)},  # b all NULL
                          {"a": ColumnStats(40, 50, 0, 3), "b": ColumnStats(100, 210, 0, 3)}], [3, 3, 3, 3])
    boxes = DataBoxes.union([([key_ranges(source.columns["a"]), key_ranges(source.columns["b"])],
                              np.array([True, True, True, False]))])
    assert sorted((round(a), round(b), round(c), round(d)) for (a, b), (c, d) in zip(boxes.lo, boxes.hi)) == [
        (1, 100, 10, 110), (20, 200, 30, 210)]
    target = ZoneMaps.of([{"x": ColumnStats(5, 6, 0, 1), "y": ColumnStats(105, 106, 0, 1)},  # in the first box
                          {"x": ColumnStats(5, 6, 0, 1), "y": ColumnStats(205, 206, 0, 1)},  # a from one, b from other
                          {"x": ColumnStats(10, 20, 0, 1), "y": ColumnStats(110, 200, 0, 1)},  # touches both corners
                          {"x": ColumnStats(45, 45, 0, 1), "y": ColumnStats(105, 105, 0, 1)},  # the unkept block's
                          {"x": ColumnStats(5, 6, 0, 1), "y": ColumnStats(None, None, 1, 1)}],  # y NULL only
                         [1, 1, 1, 1, 1])
    meets = boxes.meets([key_ranges(target.columns["x"]), key_ranges(target.columns["y"])])
    assert list(meets) == [True, False, True, False, False]
    assert not DataBoxes.union([([key_ranges(source.columns["a"]), key_ranges(source.columns["b"])],
                                 np.zeros(4, dtype=bool))]).meets(
        [key_ranges(target.columns["x"]), key_ranges(target.columns["y"])]).any()
