"""The router on a hand-built catalog whose right answers are known by construction.

lineitem (unpartitioned) has three cuts and three blocks:

    cut 0  l_shipdate < DATE '1995-01-01'
    cut 1  l_shipmode IN ('AIR', 'MAIL')
    cut 2  lineitem rows of orders with o_orderpriority = '1-URGENT' (join-induced)

    block   union  all    shipdate range           shipmode
    A       0b001  0b001  (no zone map)            mixed
    B       0b110  0b000  1995-01-01..1998-12-01   mixed
    C       0b011  0b010  (no zone map)            all AIR/MAIL

Blocks A and C carry no shipdate stats, so only the cut bits can skip them.
"""

import datetime as dt
from decimal import Decimal

import pytest

from layout_core.base.schema import load_schema
from layout_core.catalog import BlockRecord, Catalog, CutRecord
from layout_core.predicates import (
    Column,
    ColumnCompare,
    Compare,
    Hop,
    InList,
    JoinInduced,
    dumps,
    to_sql,
    value_to_json,
)
from layout_core.skipping.rewrite import rewrite_sql
from layout_core.skipping.router import RoutingIndex, route_query

SCHEMA = load_schema("tpch")
ORDERS_TO_LINEITEM = (Hop("orders", "o_orderkey", "lineitem", "l_orderkey"),)


def _stat(lo, hi, nulls=0):
    return {"min": value_to_json(lo), "max": value_to_json(hi), "null_count": nulls}


def _cut(position, predicate, kind="simple", source_versions=()):
    return CutRecord(position, dumps(predicate), to_sql(predicate), kind,
                     path=tuple(str(h) for h in getattr(predicate, "hops", ())),
                     source_versions=source_versions)


@pytest.fixture
def catalog(catalog_url):
    with Catalog(catalog_url) as cat:
        yield cat


@pytest.fixture
def blocks(catalog):
    """Lay out lineitem as in the module docstring; returns {'A': id, 'B': id, 'C': id}."""
    catalog.register_table("lineitem", "/warehouse/lineitem")
    version, ids = catalog.begin_version("lineitem", "", "handmade", {}, "run-1", 3)
    a, b, c = ids
    catalog.set_cuts(version, [
        _cut(0, Compare(Column("l_shipdate", "date"), "<", dt.date(1995, 1, 1))),
        _cut(1, InList(Column("l_shipmode", "string"), frozenset({"AIR", "MAIL"}))),
        _cut(2, JoinInduced(ORDERS_TO_LINEITEM, Compare(Column("o_orderpriority", "string"), "=", "1-URGENT")),
             kind="join_induced", source_versions=(("orders", 0),)),
    ])
    quantity = _stat(Decimal("1.00"), Decimal("50.00"))
    catalog.set_blocks(version, [
        BlockRecord(a, 100, 1000, f"/warehouse/lineitem/block_id={a}", {"l_quantity": quantity}, 0b001, 0b001),
        BlockRecord(b, 200, 2000, f"/warehouse/lineitem/block_id={b}",
                    {"l_quantity": quantity, "l_shipdate": _stat(dt.date(1995, 1, 1), dt.date(1998, 12, 1))},
                    0b110, 0b000),
        BlockRecord(c, 300, 3000, f"/warehouse/lineitem/block_id={c}", {"l_quantity": quantity}, 0b011, 0b010),
    ])
    catalog.activate(version)
    return {"A": a, "B": b, "C": c}


def _route(catalog, sql):
    index = RoutingIndex.from_snapshot(catalog.snapshot())
    return route_query(sql, index, SCHEMA), index


def _read(catalog, sql, alias="lineitem"):
    route, _ = _route(catalog, sql)
    (ref,) = [r for r in route.refs if r.alias == alias]
    return set(ref.blocks)


@pytest.mark.parametrize(
    "where,expected",
    [
        # implies cut 0 -> skip blocks with union bit 0 clear (B; B's zone map agrees)
        ("l_shipdate < DATE '1994-06-01'", "AC"),
        # disjoint with cut 0 -> skip blocks where every row satisfies it (A)
        ("l_shipdate >= DATE '1995-01-01'", "BC"),
        # disjoint with cut 1 -> skip C (all AIR/MAIL)
        ("l_shipmode = 'SHIP'", "AB"),
        # implies cut 1 -> skip A (no AIR/MAIL row)
        ("l_shipmode = 'AIR'", "BC"),
        ("l_shipmode IN ('AIR', 'MAIL') AND l_shipdate < DATE '1994-01-01'", "C"),
        # zone maps alone: every block has quantity <= 50
        ("l_quantity > 60", ""),
        # nothing provable: read everything
        ("l_comment LIKE '%x%'", "ABC"),
        ("l_shipdate < DATE '1994-06-01' OR l_shipmode = 'SHIP'", "ABC"),
        # NULL is never equal to anything, and NOT IN with a NULL is never TRUE
        ("l_shipmode NOT IN ('AIR', NULL)", ""),
        # a function the model does not understand is never used to skip
        ("upper(l_shipmode) = 'SHIP'", "ABC"),
    ],
)
def test_single_table_routing(catalog, blocks, where, expected):
    got = _read(catalog, f"SELECT count(*) FROM lineitem WHERE {where}")
    assert got == {blocks[name] for name in expected}


def test_join_induced_cut_used_through_the_join(catalog, blocks):
    sql = ("SELECT count(*) FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey "
           "WHERE o.o_orderpriority = '1-URGENT'")
    route, _ = _route(catalog, sql)
    lineitem = next(r for r in route.refs if r.table == "lineitem")
    orders = next(r for r in route.refs if r.table == "orders")
    assert set(lineitem.blocks) == {blocks["B"]}
    assert orders.read_all and any("orders" in w and "no active layout" in w for w in route.warnings)


def test_join_induced_cut_disjoint(catalog, blocks):
    sql = ("SELECT count(*) FROM lineitem, orders WHERE l_orderkey = o_orderkey "
           "AND o_orderpriority IN ('3-MEDIUM', '5-LOW')")
    # no block has all rows urgent, so disjointness skips nothing here
    assert _read(catalog, sql) == set(blocks.values())


def test_outer_join_preserved_side_is_not_filtered_by_the_other(catalog, blocks):
    sql = ("SELECT count(*) FROM lineitem l LEFT JOIN orders o "
           "ON l.l_orderkey = o.o_orderkey AND o.o_orderpriority = '1-URGENT'")
    assert _read(catalog, sql, alias="l") == set(blocks.values())


def test_exists_subquery_induces(catalog, blocks):
    sql = ("SELECT count(*) FROM lineitem l WHERE EXISTS (SELECT 1 FROM orders o "
           "WHERE o.o_orderkey = l.l_orderkey AND o.o_orderpriority = '1-URGENT')")
    assert _read(catalog, sql, alias="l") == {blocks["B"]}


def test_not_exists_does_not_induce(catalog, blocks):
    sql = ("SELECT count(*) FROM lineitem l WHERE NOT EXISTS (SELECT 1 FROM orders o "
           "WHERE o.o_orderkey = l.l_orderkey AND o.o_orderpriority = '1-URGENT')")
    assert _read(catalog, sql, alias="l") == set(blocks.values())


def test_stale_join_induced_cut_is_not_used(catalog, blocks):
    # orders gets a managed layout: the keys behind cut 2 may no longer be right
    catalog.register_table("orders", "/warehouse/orders")
    version, (block,) = catalog.begin_version("orders", "", "handmade", {}, "run-o", 1)
    catalog.set_blocks(version, [BlockRecord(block, 10, 10, "/warehouse/orders/x", {}, 0, 0)])
    catalog.activate(version)
    sql = ("SELECT count(*) FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey "
           "WHERE o.o_orderpriority = '1-URGENT'")
    assert _read(catalog, sql, alias="l") == set(blocks.values())


def test_two_references_routed_separately(catalog, blocks):
    sql = ("SELECT count(*) FROM lineitem l1 JOIN lineitem l2 ON l1.l_orderkey = l2.l_orderkey "
           "WHERE l1.l_shipmode = 'SHIP' AND l2.l_shipmode = 'AIR'")
    route, _ = _route(catalog, sql)
    by_alias = {r.alias: set(r.blocks) for r in route.refs}
    assert by_alias == {"l1": {blocks["A"], blocks["B"]}, "l2": {blocks["B"], blocks["C"]}}


@pytest.mark.parametrize(
    "where,expected",
    [
        ("l_commitdate < l_receiptdate", "L"),  # q4's and q12's words: the cut itself
        ("l_receiptdate > l_commitdate", "L"),  # q21's words for the same rows
        ("l_receiptdate <= l_commitdate", "N"),  # the cut's negation, written the other way round
        ("l_receiptdate >= l_commitdate", "LN"),  # admits rows on both sides of the cut
    ],
)
def test_a_column_comparison_cut_routes_queries_that_write_it_either_way(catalog, where, expected):
    # L: every row is late (receipt after commit); N: no row is late.
    catalog.register_table("lineitem", "/warehouse/lineitem")
    version, (late, on_time) = catalog.begin_version("lineitem", "", "handmade", {}, "run-1", 2)
    cut = ColumnCompare(Column("l_commitdate", "date"), "<", Column("l_receiptdate", "date"))
    catalog.set_cuts(version, [_cut(0, cut)])
    catalog.set_blocks(version, [
        BlockRecord(late, 10, 100, f"/warehouse/lineitem/block_id={late}", {}, 0b1, 0b1),
        BlockRecord(on_time, 10, 100, f"/warehouse/lineitem/block_id={on_time}", {}, 0b0, 0b0),
    ])
    catalog.activate(version)
    ids = {"L": late, "N": on_time}
    assert _read(catalog, f"SELECT count(*) FROM lineitem WHERE {where}") == {ids[n] for n in expected}


@pytest.mark.parametrize("sql", ["SELEC oops", "SELECT * FROM nope", "SELECT l_nope FROM lineitem", ""])
def test_bad_query_reads_everything_with_a_warning(catalog, blocks, sql):
    route, index = _route(catalog, sql)
    assert not route.analyzed and route.refs == ()
    assert route.warnings and route.warnings[0].startswith("reading everything")
    assert rewrite_sql(route, index) == sql


def test_table_without_layout_reads_everything(catalog):
    route, index = _route(catalog, "SELECT count(*) FROM orders WHERE o_orderkey = 1")
    (ref,) = route.refs
    assert ref.read_all and "no active layout" in route.warnings[0]
    assert "block_id" not in rewrite_sql(route, index)


def test_rewrite_adds_block_filters(catalog, blocks):
    route, index = _route(catalog, "SELECT count(*) FROM lineitem AS l WHERE l.l_shipmode = 'AIR'")
    expected = (f"SELECT COUNT(*) FROM (SELECT * FROM lineitem WHERE block_id IN ({blocks['B']}, {blocks['C']})) "
                "AS l WHERE l.l_shipmode = 'AIR'")
    assert rewrite_sql(route, index) == expected


def test_rewrite_with_no_block_reads_nothing(catalog, blocks):
    route, index = _route(catalog, "SELECT count(*) FROM lineitem WHERE l_quantity > 60")
    assert "(SELECT * FROM lineitem WHERE FALSE) AS lineitem" in rewrite_sql(route, index)


def test_partitioned_table_gets_partition_filter(catalog):
    catalog.register_table("orders", "/warehouse/orders", partition_column="dt")
    ids = {}
    for dt_value, (lo, hi) in {"1995-01": ("1995-01-01", "1995-01-31"),
                               "1995-02": ("1995-02-01", "1995-02-28")}.items():
        version, (block,) = catalog.begin_version("orders", dt_value, "handmade", {}, f"run-{dt_value}", 1)
        stats = {"o_orderdate": _stat(dt.date.fromisoformat(lo), dt.date.fromisoformat(hi))}
        catalog.set_blocks(version, [BlockRecord(block, 5, 50, f"/w/orders/dt={dt_value}/block_id={block}",
                                                 stats, 0, 0)])
        catalog.activate(version)
        ids[dt_value] = block
    route, index = _route(catalog, "SELECT * FROM orders WHERE o_orderdate >= DATE '1995-02-10'")
    (ref,) = route.refs
    assert ref.blocks == (ids["1995-02"],) and ref.blocks_total == 2 and ref.rows == 5
    assert f"WHERE dt IN ('1995-02') AND block_id IN ({ids['1995-02']})" in rewrite_sql(route, index)


def test_route_json_shape(catalog, blocks):
    route, _ = _route(catalog, "SELECT * FROM lineitem WHERE l_shipmode = 'AIR'")
    j = route.to_json()
    assert j["analyzed"] is True
    (ref,) = j["refs"]
    assert ref["table"] == "lineitem" and sorted(ref["blocks"]) == sorted([blocks["B"], blocks["C"]])
    assert ref["rows"] == 500 and ref["rows_total"] == 600 and ref["blocks_total"] == 3


def test_cut_keys_are_kept_per_layout_and_give_the_same_masks():
    from layout_core.predicates import conj
    from layout_core.skipping.router import LayoutIndex, cut_masks

    date, mode = Column("l_shipdate", "date"), Column("l_shipmode", "string")
    cuts = [
        Compare(date, "<", dt.date(1995, 1, 1)),
        None,  # a stale join-induced cut
        InList(mode, frozenset({"AIR", "MAIL"})),
        JoinInduced(ORDERS_TO_LINEITEM, Compare(Column("o_orderpriority", "string"), "=", "1-URGENT")),
    ]
    layout = LayoutIndex.from_blocks("lineitem", [], cuts)
    # a join-induced cut is keyed by its induction path with its source's columns, not by the
    # foreign key column
    assert layout.cut_keys == (frozenset({"l_shipdate"}), frozenset(), frozenset({"l_shipmode"}),
                               frozenset({(ORDERS_TO_LINEITEM, "o_orderpriority")}))
    urgent = JoinInduced(ORDERS_TO_LINEITEM, Compare(Column("o_orderpriority", "string"), "=", "1-URGENT"))
    # the same path, another column of orders: not checked against the priority cut
    early = JoinInduced(ORDERS_TO_LINEITEM, Compare(Column("o_orderdate", "date"), "<", dt.date(1993, 1, 1)))
    for query in [Compare(date, "<", dt.date(1994, 1, 1)), Compare(mode, "=", "SHIP"), early,
                  conj(Compare(date, ">=", dt.date(1996, 1, 1)), Compare(mode, "=", "AIR"), urgent)]:
        assert cut_masks(query, layout.cuts, layout.cuts_by_key) == cut_masks(query, layout.cuts)
    assert dict(layout.cuts_by_key) == {"l_shipdate": (0,), "l_shipmode": (2,),
                                        (ORDERS_TO_LINEITEM, "o_orderpriority"): (3,)}
    assert cut_masks(Compare(mode, "=", "SHIP"), layout.cuts, layout.cuts_by_key) == (0, 0b100)
    assert cut_masks(conj(Compare(date, "<", dt.date(1994, 1, 1)), urgent), layout.cuts) == (0b1001, 0)


# Two induction paths ending in the same foreign key column: a cut on one path must
# still be checked against a query on it, and never needs checking against the other.
_VIA_P = (Hop("p", "k", "c", "fk"),)
_VIA_Q = (Hop("q", "k", "p", "k2"), Hop("p", "k", "c", "fk"))


def _induced_or_plain():
    from hypothesis import strategies as st

    from tests.unit.predicates.test_predicate_reasoning import I, S, column_atom, predicates

    induced = st.tuples(st.sampled_from([_VIA_P, _VIA_Q]), st.one_of(column_atom(S), column_atom(I))).map(
        lambda hs: JoinInduced(hs[0], hs[1]))
    return st.one_of(predicates(2, nondeterministic=False), induced)


def test_skipping_unrelated_cuts_gives_the_masks_of_checking_every_cut():
    """cut_masks checks only the cuts sharing a column or an induction path with
    the query (relation_keys); the masks must equal those of asking
    implies/disjoint of every cut. Left out: a query the reasoning finds never
    TRUE (it implies everything), and a cut that no row or every row satisfies
    (its block bits are all 0 or all 1, so neither mask can skip a block with it)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from layout_core.predicates import Prepared, conj, disjoint, implies, negate, satisfiable
    from layout_core.skipping.router import cut_masks

    plain_or_induced = _induced_or_plain()

    @settings(max_examples=400, deadline=None)
    @given(query_parts=st.lists(plain_or_induced, min_size=1, max_size=3),
           cuts=st.lists(plain_or_induced, min_size=1, max_size=6))
    def check(query_parts, cuts):
        query = conj(*query_parts)
        cuts = [c for c in cuts if satisfiable(c) and satisfiable(negate(c))]
        if not Prepared(query).boxes:
            return
        implied = sum(1 << i for i, c in enumerate(cuts) if implies(query, c))
        disjoint_ = sum(1 << i for i, c in enumerate(cuts) if not implies(query, c) and disjoint(query, c))
        assert cut_masks(query, cuts) == (implied, disjoint_)

    check()


def test_an_unexpected_failure_while_routing_reads_everything_and_logs_its_traceback(
        catalog, blocks, monkeypatch, caplog):
    import layout_core.skipping.router as router

    def broken(*args, **kwargs):
        raise KeyError("a bug in the reasoning")

    monkeypatch.setattr(router, "layout_keep", broken)
    sql = "SELECT count(*) FROM lineitem WHERE l_shipdate < DATE '1994-01-01'"
    route, index = _route(catalog, sql)
    assert not route.analyzed and route.refs == ()
    assert "routing failed (KeyError" in route.warnings[0]
    assert rewrite_sql(route, index) == sql  # the query runs as written
    (record,) = [r for r in caplog.records if r.name == "layout.router"]
    assert record.levelname == "WARNING" and record.exc_info is not None
