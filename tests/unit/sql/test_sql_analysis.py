"""Query analysis: filters per table reference, join edges, join-induced predicates.

Expected joins and filtered tables of the 22 TPC-H templates are written from
the TPC-H specification, not from the analyzer's output.
"""

import datetime as dt
from decimal import Decimal

import pytest

from layout_core.base.schema import load_schema
from layout_core.predicates import (
    TRUE,
    Between,
    Column,
    ColumnCompare,
    Compare,
    Hop,
    InList,
    IsNull,
    Like,
    Opaque,
    conj,
    conjuncts,
    negate,
    to_sql,
)
from layout_core.sql.analysis import Edge, JointEdge, QueryError, analyze, candidate_cuts
from layout_core.sql.statements import split_statements
from layout_core.workload.tpch import generate

SCHEMA = load_schema("tpch")


def _joins(a):
    return {f"{x[0][0]}.{x[0][1]}={x[1][0]}.{x[1][1]}" for x in a.joins}


def _filtered(a):
    return sorted(r.alias if r.alias != r.table else r.table for r in a.refs if a.filter(r.key) != TRUE)


# template -> (joins from the spec, references with a filter)
TPCH_EXPECTED = {
    1: (set(), ["lineitem"]),
    2: ({"part.p_partkey=partsupp.ps_partkey", "partsupp.ps_suppkey=supplier.s_suppkey",
         "nation.n_nationkey=supplier.s_nationkey", "nation.n_regionkey=region.r_regionkey"},
        ["part", "region", "region"]),
    3: ({"customer.c_custkey=orders.o_custkey", "lineitem.l_orderkey=orders.o_orderkey"},
        ["customer", "lineitem", "orders"]),
    4: ({"lineitem.l_orderkey=orders.o_orderkey"}, ["lineitem", "orders"]),
    5: ({"customer.c_custkey=orders.o_custkey", "lineitem.l_orderkey=orders.o_orderkey",
         "lineitem.l_suppkey=supplier.s_suppkey", "customer.c_nationkey=supplier.s_nationkey",
         "nation.n_nationkey=supplier.s_nationkey", "nation.n_regionkey=region.r_regionkey"},
        ["orders", "region"]),
    6: (set(), ["lineitem"]),
    7: ({"lineitem.l_suppkey=supplier.s_suppkey", "lineitem.l_orderkey=orders.o_orderkey",
         "customer.c_custkey=orders.o_custkey", "nation.n_nationkey=supplier.s_nationkey",
         "customer.c_nationkey=nation.n_nationkey"}, ["lineitem", "n1", "n2"]),
    8: ({"lineitem.l_partkey=part.p_partkey", "lineitem.l_suppkey=supplier.s_suppkey",
         "lineitem.l_orderkey=orders.o_orderkey", "customer.c_custkey=orders.o_custkey",
         "customer.c_nationkey=nation.n_nationkey", "nation.n_regionkey=region.r_regionkey",
         "nation.n_nationkey=supplier.s_nationkey"}, ["orders", "part", "region"]),
    9: ({"lineitem.l_suppkey=supplier.s_suppkey", "lineitem.l_suppkey=partsupp.ps_suppkey",
         "lineitem.l_partkey=partsupp.ps_partkey", "lineitem.l_partkey=part.p_partkey",
         "lineitem.l_orderkey=orders.o_orderkey", "nation.n_nationkey=supplier.s_nationkey"}, ["part"]),
    10: ({"customer.c_custkey=orders.o_custkey", "lineitem.l_orderkey=orders.o_orderkey",
          "customer.c_nationkey=nation.n_nationkey"}, ["lineitem", "orders"]),
    11: ({"partsupp.ps_suppkey=supplier.s_suppkey", "nation.n_nationkey=supplier.s_nationkey"},
         ["nation", "nation"]),
    12: ({"lineitem.l_orderkey=orders.o_orderkey"}, ["lineitem"]),
    13: ({"customer.c_custkey=orders.o_custkey"}, ["orders"]),
    14: ({"lineitem.l_partkey=part.p_partkey"}, ["lineitem"]),
    15: ({"lineitem.l_suppkey=supplier.s_suppkey"}, ["lineitem"]),  # through the CTE
    16: ({"part.p_partkey=partsupp.ps_partkey"}, ["part", "supplier"]),
    17: ({"lineitem.l_partkey=part.p_partkey"}, ["part"]),
    18: ({"customer.c_custkey=orders.o_custkey", "lineitem.l_orderkey=orders.o_orderkey"}, []),
    19: ({"lineitem.l_partkey=part.p_partkey"}, ["lineitem", "part"]),
    20: ({"nation.n_nationkey=supplier.s_nationkey", "partsupp.ps_suppkey=supplier.s_suppkey",
          "part.p_partkey=partsupp.ps_partkey", "lineitem.l_partkey=partsupp.ps_partkey",
          "lineitem.l_suppkey=partsupp.ps_suppkey"}, ["lineitem", "nation", "part"]),
    21: ({"lineitem.l_suppkey=supplier.s_suppkey", "lineitem.l_orderkey=orders.o_orderkey",
          "nation.n_nationkey=supplier.s_nationkey", "lineitem.l_orderkey=lineitem.l_orderkey"},
         ["l1", "l3", "nation", "orders"]),
    22: ({"customer.c_custkey=orders.o_custkey"}, ["customer", "customer"]),
}


@pytest.mark.parametrize("template", range(1, 23))
def test_tpch_template_joins_and_filtered_tables(template):
    for query in generate(3, seed=11, templates=[template]):
        a = analyze(query.sql, SCHEMA)
        joins, filtered = TPCH_EXPECTED[template]
        assert _joins(a) == joins, query.sql
        assert _filtered(a) == filtered, query.sql


def test_q5_induced_paths_reach_lineitem_from_region():
    (q5,) = generate(1, seed=1, templates=[5])
    a = analyze(q5.sql, SCHEMA)
    lineitem = a.refs_of_table("lineitem")[0].key
    paths = {" / ".join(str(h) for h in ip.hops) for ip in a.induced(lineitem, SCHEMA.key_hops())}
    assert paths == {
        "orders.o_orderkey->lineitem.l_orderkey",
        "region.r_regionkey->nation.n_regionkey / nation.n_nationkey->customer.c_nationkey"
        " / customer.c_custkey->orders.o_custkey / orders.o_orderkey->lineitem.l_orderkey",
        "region.r_regionkey->nation.n_regionkey / nation.n_nationkey->supplier.s_nationkey"
        " / supplier.s_suppkey->lineitem.l_suppkey",
    }
    # depth 3 cuts the 4-hop path
    short = {len(ip.hops) for ip in a.induced(lineitem, SCHEMA.key_hops(), max_depth=3)}
    assert short == {1, 3}


def _induced_sql(a, ref):
    return {" / ".join(map(str, ip.hops)): to_sql(ip.predicate.source)
            for ip in a.induced(ref.key, SCHEMA.key_hops())}


def test_q21_subqueries_on_lineitem_get_the_outer_orders_filter_through_the_correlation():
    # l2 and l3 match l1 on l_orderkey, and l1 matches orders on its key: only
    # orders with o_orderstatus = 'F' can be needed, in all three references.
    (q21,) = generate(1, seed=1, templates=[21])
    a = analyze(q21.sql, SCHEMA)
    by_alias = {r.alias: r for r in a.refs}
    orders_path = "orders.o_orderkey->lineitem.l_orderkey"
    for alias in ("l1", "l2", "l3"):
        assert _induced_sql(a, by_alias[alias])[orders_path] == "o_orderstatus = 'F'"
    # l1's supplier filter is not passed on: l2 and l3 join l1 on l_suppkey only by <>
    nation_path = "nation.n_nationkey->supplier.s_nationkey / supplier.s_suppkey->lineitem.l_suppkey"
    assert nation_path in _induced_sql(a, by_alias["l1"])
    assert set(_induced_sql(a, by_alias["l2"])) == set(_induced_sql(a, by_alias["l3"])) == {orders_path}


def test_q20_lineitem_gets_the_part_and_nation_filters_through_partsupp():
    # lineitem is correlated with partsupp on both keys; partsupp's part key is
    # IN the parts named like the colour, its supplier key IN the nation's suppliers
    (q20,) = generate(1, seed=1, templates=[20])
    a = analyze(q20.sql, SCHEMA)
    (lineitem,) = a.refs_of_table("lineitem")
    (nation,) = a.refs_of_table("nation")
    induced = _induced_sql(a, lineitem)
    assert induced["part.p_partkey->lineitem.l_partkey"].startswith("p_name LIKE '")
    nation_path = "nation.n_nationkey->supplier.s_nationkey / supplier.s_suppkey->lineitem.l_suppkey"
    assert induced[nation_path] == to_sql(a.filter(nation.key))


def test_no_relay_without_equal_keys_all_the_way():
    # NOT IN gives no edge; a correlation by <> is not an equality; a relay ends at
    # the parent's key column, not another of its columns
    hops = SCHEMA.key_hops()
    a = analyze("SELECT * FROM lineitem l1, orders o WHERE o.o_orderkey = l1.l_orderkey AND o.o_orderstatus = 'F' "
                "AND l1.l_orderkey NOT IN (SELECT l2.l_orderkey FROM lineitem l2)", SCHEMA)
    assert a.induced(next(r for r in a.refs if r.alias == "l2").key, hops) == ()
    a = analyze("SELECT * FROM lineitem l1, orders o WHERE o.o_orderkey = l1.l_orderkey AND o.o_orderstatus = 'F' "
                "AND EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey <> l1.l_orderkey)", SCHEMA)
    assert a.induced(next(r for r in a.refs if r.alias == "l2").key, hops) == ()
    a = analyze("SELECT * FROM lineitem l1, orders o WHERE o.o_custkey = l1.l_orderkey AND o.o_orderstatus = 'F' "
                "AND EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey)", SCHEMA)
    assert a.induced(next(r for r in a.refs if r.alias == "l2").key, hops) == ()


@pytest.mark.timeout(60)
def test_a_long_chain_of_equal_keys_is_walked_once_per_reference():
    # twelve lineitem references on one order key: a transitively closed class
    # whose simple paths number in the billions; the relay visits each once
    refs = ", ".join(f"lineitem l{i}" for i in range(12))
    joins = " AND ".join(f"l{i}.l_orderkey = l{i + 1}.l_orderkey" for i in range(11))
    a = analyze(f"SELECT count(*) FROM orders o, {refs} WHERE o.o_orderkey = l0.l_orderkey "
                f"AND o.o_orderstatus = 'F' AND {joins}", SCHEMA)
    for r in a.refs_of_table("lineitem"):
        assert _induced_sql(a, r) == {"orders.o_orderkey->lineitem.l_orderkey": "o_orderstatus = 'F'"}


# ---------------------------------------------------------------------------
# Features, one at a time

D = Column("o_orderdate", "date")


def _only(sql, table=None):
    a = analyze(sql, SCHEMA)
    refs = a.refs if table is None else a.refs_of_table(table)
    (ref,) = refs
    return a.filter(ref.key)


def test_date_and_interval_arithmetic_folds():
    p = _only("SELECT * FROM orders WHERE o_orderdate >= date '1994-01-31' "
              "AND o_orderdate < date '1994-01-31' + interval '1' month")
    assert p == conj(Compare(D, ">=", dt.date(1994, 1, 31)), Compare(D, "<", dt.date(1994, 2, 28)))


def test_between_in_like_null_and_column_compare():
    p = _only("SELECT * FROM lineitem WHERE l_quantity BETWEEN 1 AND 1 + 10 AND l_shipmode IN ('AIR', NULL) "
              "AND l_comment NOT LIKE 'x%' AND l_tax IS NOT NULL AND l_commitdate < l_receiptdate")
    q = Column("l_quantity", "decimal")
    assert p == conj(
        Between(q, Decimal(1), Decimal(11)),
        InList(Column("l_shipmode", "string"), frozenset({"AIR"}), False, True),
        negate(Like(Column("l_comment", "string"), "x%")),
        negate(IsNull(Column("l_tax", "decimal"))),
        ColumnCompare(Column("l_commitdate", "date"), "<", Column("l_receiptdate", "date")),
    )


def test_or_of_equalities_becomes_in_and_common_parts_factor_out():
    p = _only("SELECT * FROM part WHERE (p_size = 1 AND p_brand = 'B') OR (p_size = 2 AND p_brand = 'B') "
              "OR (p_brand = 'B' AND p_size = 3)")
    assert p == conj(Compare(Column("p_brand", "string"), "=", "B"),
                     InList(Column("p_size", "int"), frozenset({1, 2, 3})))


def test_functions_stay_opaque_and_deterministic_flag():
    p = _only("SELECT * FROM orders WHERE year(o_orderdate) = 1995 AND o_totalprice * rand() < 0.5")
    year, random = sorted(p.children, key=lambda c: not c.deterministic)
    assert year == Opaque("YEAR(`o_orderdate`) = 1995", frozenset({"o_orderdate"}))
    assert isinstance(random, Opaque) and not random.deterministic


def test_aliases_and_comma_joins():
    a = analyze("SELECT * FROM orders o, customer AS c WHERE o.o_custkey = c.c_custkey AND c.c_mktsegment = 'X'",
                SCHEMA)
    o, c = a.refs
    assert (o.alias, c.alias) == ("o", "c")
    assert Edge(c.key, "c_custkey", o.key, "o_custkey") in a.edges
    assert Edge(o.key, "o_custkey", c.key, "c_custkey") in a.edges


def test_left_join_filters_and_edges():
    a = analyze("SELECT * FROM customer c LEFT JOIN orders o ON c.c_custkey = o.o_custkey "
                "AND o.o_orderstatus = 'F' AND c.c_acctbal > 0 WHERE c.c_mktsegment = 'X' "
                "AND (o.o_totalprice > 5 OR o.o_totalprice IS NULL)", SCHEMA)
    c, o = a.refs
    # the ON conjunct on the preserved side does not filter it; the WHERE OR keeps NULL rows: not usable
    assert a.filter(c.key) == Compare(Column("c_mktsegment", "string"), "=", "X")
    assert a.filter(o.key) == Compare(Column("o_orderstatus", "string"), "=", "F")
    assert a.edges == (Edge(c.key, "c_custkey", o.key, "o_custkey"),)


def test_null_rejecting_where_on_outer_side_filters():
    a = analyze("SELECT * FROM customer c LEFT JOIN orders o ON c.c_custkey = o.o_custkey "
                "WHERE o.o_totalprice > 5", SCHEMA)
    _, o = a.refs
    assert a.filter(o.key) == Compare(Column("o_totalprice", "decimal"), ">", Decimal(5))


def test_a_full_join_gives_nothing_for_either_side():
    a = analyze("SELECT * FROM customer c FULL JOIN orders o ON c.c_custkey = o.o_custkey "
                "AND o.o_orderstatus = 'F'", SCHEMA)
    assert a.filters == {} and a.edges == ()


def test_a_right_join_mirrors_a_left_join():
    a = analyze("SELECT * FROM customer c RIGHT JOIN orders o ON c.c_custkey = o.o_custkey "
                "AND c.c_mktsegment = 'X' AND o.o_orderstatus = 'F' WHERE c.c_name IS NULL", SCHEMA)
    c, o = a.refs
    # orders is preserved: its ON conjunct does not filter it, and customer rows cannot shrink it;
    # customer is NULL-supplying: its ON conjunct filters it, `IS NULL` in WHERE does not
    assert a.filters == {c.key: Compare(Column("c_mktsegment", "string"), "=", "X")}
    assert a.edges == (Edge(o.key, "o_custkey", c.key, "c_custkey"),)


def test_a_right_join_after_an_inner_join_receives_on_every_table_joined_before_it():
    a = analyze("SELECT * FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey "
                "RIGHT JOIN customer c ON o.o_custkey = c.c_custkey WHERE c.c_mktsegment = 'X' "
                "AND l.l_quantity > 5", SCHEMA)
    l, o, c = a.refs
    # `l_quantity > 5` is FALSE on a NULL-extended lineitem row, so it still filters lineitem
    assert a.filters == {l.key: Compare(Column("l_quantity", "decimal"), ">", Decimal(5)),
                         c.key: Compare(Column("c_mktsegment", "string"), "=", "X")}
    assert set(a.edges) == {Edge(c.key, "c_custkey", o.key, "o_custkey"),
                            Edge(l.key, "l_orderkey", o.key, "o_orderkey"),
                            Edge(o.key, "o_orderkey", l.key, "l_orderkey")}


def test_a_table_in_redundant_parentheses_on_the_outer_side_is_still_null_extended():
    # o is NULL-extended for customers without a matching order: its WHERE filter
    # `IS NULL` keeps exactly those, so it must not restrict the orders o reads
    a = analyze("SELECT c.c_custkey FROM customer c LEFT JOIN ((orders o)) ON o.o_custkey = c.c_custkey "
                "WHERE o.o_orderstatus IS NULL AND c.c_mktsegment = 'X'", SCHEMA)
    c, o = a.refs
    assert a.filter(o.key) == TRUE
    assert a.filter(c.key) == Compare(Column("c_mktsegment", "string"), "=", "X")


def test_a_join_in_parentheses_is_refused_not_taken_as_inner():
    # l is NULL-extended with o here; as an inner join, l's IS NULL would skip its rows
    with pytest.raises(QueryError, match="join in parentheses"):
        analyze("SELECT c.c_custkey FROM customer c LEFT JOIN (orders o JOIN lineitem l "
                "ON l.l_orderkey = o.o_orderkey) ON o.o_custkey = c.c_custkey WHERE l.l_quantity IS NULL", SCHEMA)


def test_an_aliased_join_in_parentheses_is_a_derived_table_whose_columns_filter_nothing():
    a = analyze("SELECT c.c_custkey FROM customer c LEFT JOIN (orders o JOIN lineitem l "
                "ON l.l_orderkey = o.o_orderkey) AS t ON t.o_custkey = c.c_custkey WHERE t.l_quantity IS NULL", SCHEMA)
    assert [r.table for r in a.refs] == ["customer", "orders", "lineitem"]
    assert a.filters == {}


def test_a_set_operation_inside_a_where_subquery_is_analyzed_around():
    a = analyze("SELECT count(*) FROM orders o WHERE o.o_totalprice > 5 AND o.o_orderkey IN "
                "(SELECT l1.l_orderkey FROM lineitem l1 WHERE l1.l_orderkey = o.o_orderkey "
                "UNION ALL SELECT l2.l_orderkey FROM lineitem l2)", SCHEMA)
    assert [r.table for r in a.refs] == ["orders", "lineitem", "lineitem"]
    assert a.filter(a.refs[0].key) == Compare(Column("o_totalprice", "decimal"), ">", Decimal(5))


def test_semi_and_anti_joins():
    a = analyze("SELECT * FROM customer c LEFT SEMI JOIN orders o ON c.c_custkey = o.o_custkey "
                "AND o.o_orderstatus = 'F'", SCHEMA)
    c, o = a.refs
    assert set(a.edges) == {Edge(c.key, "c_custkey", o.key, "o_custkey"), Edge(o.key, "o_custkey", c.key, "c_custkey")}
    a = analyze("SELECT * FROM customer c LEFT ANTI JOIN orders o ON c.c_custkey = o.o_custkey "
                "AND o.o_orderstatus = 'F'", SCHEMA)
    c, o = a.refs
    assert a.edges == (Edge(c.key, "c_custkey", o.key, "o_custkey"),)
    assert a.filter(o.key) != TRUE and a.filter(c.key) == TRUE


def test_in_subquery_edges_depend_on_aggregation():
    plain = analyze("SELECT * FROM orders WHERE o_custkey IN (SELECT c_custkey FROM customer "
                    "WHERE c_mktsegment = 'X')", SCHEMA)
    o, c = plain.refs
    assert set(plain.edges) == {Edge(c.key, "c_custkey", o.key, "o_custkey"),
                                Edge(o.key, "o_custkey", c.key, "c_custkey")}
    limited = analyze("SELECT * FROM orders WHERE o_custkey IN (SELECT c_custkey FROM customer LIMIT 5)", SCHEMA)
    o, c = limited.refs
    assert limited.edges == (Edge(c.key, "c_custkey", o.key, "o_custkey"),)
    negated = analyze("SELECT * FROM orders WHERE o_custkey NOT IN (SELECT c_custkey FROM customer)", SCHEMA)
    assert negated.edges == ()


def test_exists_under_or_gives_only_correlation_edge():
    a = analyze("SELECT * FROM orders o WHERE o.o_orderstatus = 'F' OR EXISTS "
                "(SELECT 1 FROM lineitem l WHERE l.l_orderkey = o.o_orderkey)", SCHEMA)
    o, l = a.refs
    assert a.edges == (Edge(o.key, "o_orderkey", l.key, "l_orderkey"),)
    assert a.filter(o.key) == TRUE


def test_a_cte_or_derived_table_read_once_passes_its_columns_through_both_ways():
    a = analyze("WITH big AS (SELECT o_custkey AS who FROM orders WHERE o_totalprice > 100) "
                "SELECT * FROM customer c JOIN big ON c.c_custkey = big.who "
                "JOIN (SELECT * FROM nation WHERE n_name = 'PERU') n ON c.c_nationkey = n.n_nationkey "
                "WHERE big.who < 500", SCHEMA)
    c, n, o = (a.refs_of_table(t)[0] for t in ("customer", "nation", "orders"))
    # big.who < 500 reaches orders, the CTE's only reader
    assert set(conjuncts(a.filter(o.key))) == {Compare(Column("o_totalprice", "decimal"), ">", Decimal(100)),
                                               Compare(Column("o_custkey", "int"), "<", 500)}
    assert a.filter(n.key) == Compare(Column("n_name", "string"), "=", "PERU")
    assert a.filter(c.key) == TRUE
    assert set(a.edges) == {Edge(c.key, "c_custkey", o.key, "o_custkey"), Edge(o.key, "o_custkey", c.key, "c_custkey"),
                            Edge(c.key, "c_nationkey", n.key, "n_nationkey"),
                            Edge(n.key, "n_nationkey", c.key, "c_nationkey")}


def test_a_union_read_once_takes_filters_and_edges_into_every_branch_and_sends_from_all():
    a = analyze("SELECT count(*) FROM customer c JOIN (SELECT o_custkey AS k FROM orders WHERE o_orderstatus = 'F' "
                "UNION ALL SELECT s_suppkey FROM supplier) u ON c.c_custkey = u.k "
                "WHERE c.c_mktsegment = 'BUILDING' AND u.k < 100 AND (u.k > 5 OR c.c_acctbal > 0)", SCHEMA)
    c, o, s = (a.refs_of_table(t)[0] for t in ("customer", "orders", "supplier"))
    assert set(conjuncts(a.filter(o.key))) == {Compare(Column("o_orderstatus", "string"), "=", "F"),
                                               Compare(Column("o_custkey", "int"), "<", 100)}
    assert a.filter(s.key) == Compare(Column("s_suppkey", "int"), "<", 100)  # not the OR: it names customer
    assert set(a.edges) == {Edge(c.key, "c_custkey", o.key, "o_custkey"), Edge(c.key, "c_custkey", s.key, "s_suppkey")}
    # out of the union: customers matching no order's nor supplier's key are not needed
    (out,) = a.union_edges
    assert (out.sources, out.to_ref, out.to_column) == (((o.key, "o_custkey"), (s.key, "s_suppkey")), c.key,
                                                        "c_custkey")
    # branches of different types, a LIMIT on the union: nothing goes in
    for sql in ("SELECT count(*) FROM customer c JOIN (SELECT o_custkey AS k FROM orders UNION ALL "
                "SELECT l_quantity FROM lineitem) u ON c.c_custkey = u.k WHERE u.k < 100",
                "SELECT count(*) FROM customer c JOIN (SELECT o_custkey AS k FROM orders UNION ALL "
                "SELECT s_suppkey FROM supplier LIMIT 10) u ON c.c_custkey = u.k WHERE u.k < 100",
                # (a derived table with a LIMIT over a union: nothing comes out of the union either)
                "SELECT count(*) FROM customer c JOIN (SELECT u.k FROM (SELECT o_custkey AS k FROM orders "
                "UNION ALL SELECT s_suppkey FROM supplier) u LIMIT 10) d ON c.c_custkey = d.k WHERE d.k < 100"):
        a = analyze(sql, SCHEMA)
        assert a.edges == () and all(r.table == "customer" for r in a.refs if a.filter(r.key) != TRUE)
        assert a.union_edges == ()


def test_a_union_joined_to_a_union_sends_each_of_its_branches_the_other_ones_keys():
    """Each side's branches receive a diP from all of the other side's branches; no join-induced
    predicate goes through a union (this query once raised KeyError there)."""
    a = analyze("SELECT count(*) FROM (SELECT n_nationkey AS k FROM nation UNION ALL "
                "SELECT s_nationkey FROM supplier) x "
                "JOIN (SELECT c_nationkey AS k FROM customer WHERE c_acctbal > 10 UNION ALL "
                "SELECT r_regionkey FROM region) y ON x.k = y.k", SCHEMA)
    n, s, c, r = (a.refs_of_table(t)[0].key for t in ("nation", "supplier", "customer", "region"))
    found = {(e.sources, e.to_ref) for e in a.union_edges}
    assert found == {(((n, "n_nationkey"), (s, "s_nationkey")), c), (((n, "n_nationkey"), (s, "s_nationkey")), r),
                     (((c, "c_nationkey"), (r, "r_regionkey")), n), (((c, "c_nationkey"), (r, "r_regionkey")), s)}
    assert a.edges == ()
    assert all(a.induced(ref.key, SCHEMA.key_hops()) == () for ref in a.refs)


Q15_SHAPE = """WITH revenue AS (SELECT l_suppkey AS supplier_no, sum(l_extendedprice) AS total FROM lineitem
                                WHERE l_shipdate >= DATE '1996-01-01' GROUP BY l_suppkey)
               SELECT s_name FROM supplier, revenue WHERE s_suppkey = supplier_no AND s_acctbal > 0
                 AND supplier_no < 100 AND total = (SELECT max(total) FROM revenue)"""


def test_a_cte_read_twice_sends_diPs_out_and_takes_nothing_in():
    a = analyze(Q15_SHAPE, SCHEMA)
    l, s = a.refs_of_table("lineitem")[0], a.refs_of_table("supplier")[0]
    # the max over the second read needs every supplier's revenue: no filter or diP reaches lineitem
    assert a.filter(l.key) == Compare(Column("l_shipdate", "date"), ">=", dt.date(1996, 1, 1))
    assert a.edges == (Edge(l.key, "l_suppkey", s.key, "s_suppkey"),)


@pytest.mark.parametrize("derived", [
    "SELECT l_orderkey FROM lineitem LIMIT 10",  # which rows the LIMIT keeps depends on all of them
    "SELECT l_orderkey, row_number() OVER (ORDER BY l_quantity) AS r FROM lineitem",
    "SELECT l_orderkey, count(*) AS n FROM lineitem GROUP BY ROLLUP (l_orderkey)",  # its total row
    "SELECT o.o_orderkey AS l_orderkey FROM customer c LEFT JOIN orders o ON o.o_custkey = c.c_custkey",
])
def test_a_derived_table_that_is_not_transparent_for_a_column_only_sends_it(derived):
    a = analyze(f"SELECT * FROM ({derived}) t JOIN part p ON p.p_partkey = t.l_orderkey "
                "WHERE p.p_size = 5 AND t.l_orderkey > 10", SCHEMA)
    (inner,) = [r for r in a.refs if r.table in ("lineitem", "orders")]
    p = a.refs_of_table("part")[0]
    assert Edge(inner.key, inner.table[0] + "_orderkey", p.key, "p_partkey") in a.edges
    assert [e for e in a.edges if e.from_ref == p.key] == []
    assert inner.key not in a.filters


def test_a_group_by_passes_its_keys_through_and_nothing_else():
    a = analyze("SELECT * FROM orders o JOIN (SELECT l_orderkey, l_suppkey, max(l_partkey) AS top FROM lineitem "
                "GROUP BY l_orderkey, l_suppkey) t ON t.l_orderkey = o.o_orderkey "
                "JOIN part p ON p.p_partkey = t.top WHERE t.l_suppkey = 7", SCHEMA)
    o, l = a.refs_of_table("orders")[0], a.refs_of_table("lineitem")[0]
    assert a.filters == {l.key: Compare(Column("l_suppkey", "int"), "=", 7)}
    assert set(a.edges) == {Edge(o.key, "o_orderkey", l.key, "l_orderkey"),
                            Edge(l.key, "l_orderkey", o.key, "o_orderkey")}  # not `top`: an aggregate


def test_a_derived_table_on_the_null_supplying_side_takes_only_null_rejecting_filters():
    a = analyze("SELECT * FROM lineitem l LEFT JOIN (SELECT o_orderkey, o_totalprice FROM orders) t "
                "ON t.o_orderkey = l.l_orderkey AND t.o_totalprice > 5 WHERE t.o_orderkey IS NULL", SCHEMA)
    l, o = a.refs
    assert a.filters == {o.key: Compare(Column("o_totalprice", "decimal"), ">", Decimal(5))}
    assert a.edges == (Edge(l.key, "l_orderkey", o.key, "o_orderkey"),)


def test_subquery_filter_on_outer_table_does_not_filter_it():
    a = analyze("SELECT * FROM orders o WHERE EXISTS (SELECT 1 FROM lineitem l "
                "WHERE l.l_orderkey = o.o_orderkey AND o.o_orderstatus = 'F')", SCHEMA)
    assert a.filter(a.refs_of_table("orders")[0].key) == TRUE


def test_non_key_join_induces_nothing():
    a = analyze("SELECT * FROM orders o JOIN customer c ON o.o_orderkey = c.c_nationkey "
                "WHERE c.c_mktsegment = 'X'", SCHEMA)
    o = a.refs_of_table("orders")[0].key
    assert a.induced(o, SCHEMA.key_hops()) == ()


def test_candidate_cuts_are_per_conjunct():
    a = analyze("SELECT * FROM lineitem, orders WHERE l_orderkey = o_orderkey AND o_orderstatus = 'F' "
                "AND o_totalprice > 10 AND l_tax = 0", SCHEMA)
    lineitem = a.refs_of_table("lineitem")[0].key
    simple, induced = candidate_cuts(a, lineitem, SCHEMA.key_hops())
    assert [to_sql(p) for p in simple] == ["l_tax = 0"]
    hop = (Hop("orders", "o_orderkey", "lineitem", "l_orderkey"),)
    assert {(i.hops, to_sql(i.source)) for i in induced} == {
        (hop, "o_orderstatus = 'F'"), (hop, "o_totalprice > 10")}


@pytest.mark.parametrize(
    "sql,reason",
    [
        ("SELEC * FROM orders", "cannot parse SQL"),
        ("SELECT * FROM orderz", "unknown table 'orderz'"),
        ("SELECT o_nope FROM orders", "cannot resolve columns"),
        ("CREATE VIEW v AS SELECT 1 FROM a WITH whatever", "not a query: a CREATE statement"),
        ("SHOW TABLES", "not a query: a SHOW statement"),
        ("INSERT INTO orders SELECT * FROM orders", "not a query"),
        ("SELECT 1; SELECT 2", "expected one statement"),
    ],
)
def test_bad_statements_raise_clear_errors(sql, reason):
    with pytest.raises(QueryError, match=reason):
        analyze(sql, SCHEMA)


def test_parsing_bad_sql_leaves_the_sqlglot_logger_alone(caplog, monkeypatch):
    """parse_query neither changes sqlglot's logger (not even for a moment) nor
    lets it warn about the statements it refuses (sqlglot warns before it parses
    some of them as a generic Command)."""
    import logging

    from layout_core.sql.analysis import parse_query

    logger = logging.getLogger("sqlglot")

    def settings():
        return logger.level, list(logger.handlers), list(logger.filters), logger.propagate, logger.disabled

    def changed(*args):
        raise AssertionError("parse_query changed the sqlglot logger")

    before = settings()
    for method in ("setLevel", "addHandler", "removeHandler", "addFilter", "removeFilter"):
        monkeypatch.setattr(logger, method, changed)
    caplog.set_level(logging.WARNING)  # (on the root logger, where sqlglot's records go)
    for sql in ["SHOW TABLES", "CREATE VIEW v AS SELECT 1 FROM a WITH whatever", "SELEC * FROM orders",
                "SELECT * FROM t WHERE", "SELECT 1; SHOW TABLES", "IF x THEN SELECT 1 END IF",
                "ALTER TABLE t SET TBLPROPERTIES ('a' = 'b')"]:
        with pytest.raises(QueryError):
            parse_query(sql)
        assert settings() == before
    assert [r.getMessage() for r in caplog.records if r.name == "sqlglot"] == []


def test_split_statements_keeps_quotes_comments_and_headers():
    text = """-- tpch q1 instance 1 params {}
select ';' as x from t; /* a ; in a comment */ select 2
-- trailing comment only
;
;
select "a;b" from u -- end ; here
"""
    statements = split_statements(text)
    assert [s.sql for s in statements] == [
        "select ';' as x from t",
        "/* a ; in a comment */ select 2\n-- trailing comment only",
        'select "a;b" from u -- end ; here',
    ]
    assert statements[0].comments == ("tpch q1 instance 1 params {}",)


def test_sqlglot_schema_is_built_once_per_schema_and_never_shared():
    from layout_core.base.schema import schema_from_dict
    from layout_core.sql.analysis import sqlglot_schema

    one = schema_from_dict({"tables": {"t": {"columns": {"a": "int"}}}})
    two = schema_from_dict({"tables": {"t": {"columns": {"b": "int"}}}})
    assert sqlglot_schema(one) is sqlglot_schema(one)
    assert analyze("SELECT a FROM t WHERE a = 1", one).filter("t0") == Compare(Column("a", "int"), "=", 1)
    assert analyze("SELECT a FROM t WHERE a = 2", one).filter("t0") == Compare(Column("a", "int"), "=", 2)
    with pytest.raises(QueryError, match="cannot resolve columns"):
        analyze("SELECT a FROM t WHERE a = 1", two)  # not the first schema's columns
    assert analyze("SELECT b FROM t WHERE b > 1", two).filter("t0") == Compare(Column("b", "int"), ">", 1)


def test_analysis_does_not_depend_on_earlier_queries():
    """Analyzing a workload twice, in two orders, gives equal analyses (nothing
    per query is kept between calls except what the schema determines)."""
    queries = [q.sql for q in generate(1, 3)]
    first = [analyze(sql, SCHEMA) for sql in queries]
    again = [analyze(sql, SCHEMA) for sql in reversed(queries)][::-1]
    assert first == again


def test_two_equalities_between_the_same_tables_make_one_joint_edge_each_way():
    a = analyze("SELECT * FROM partsupp ps, lineitem l, part p WHERE ps.ps_partkey = l.l_partkey "
                "AND l.l_suppkey = ps.ps_suppkey AND p.p_partkey = l.l_partkey", SCHEMA)
    ps, l, p = a.refs
    # part meets each of the others on one column (the closure relates it to partsupp too): no pair
    assert set(a.joint_edges) == {JointEdge(ps.key, ("ps_partkey", "ps_suppkey"), l.key, ("l_partkey", "l_suppkey")),
                                  JointEdge(l.key, ("l_partkey", "l_suppkey"), ps.key, ("ps_partkey", "ps_suppkey"))}
    assert Edge(ps.key, "ps_suppkey", l.key, "l_suppkey") in a.edges  # the single edges stay


def test_an_outer_join_on_two_columns_sends_its_pair_from_the_preserved_side_only():
    a = analyze("SELECT * FROM lineitem l LEFT JOIN partsupp ps ON ps.ps_partkey = l.l_partkey "
                "AND ps.ps_suppkey = l.l_suppkey", SCHEMA)
    l, ps = a.refs
    assert a.joint_edges == (JointEdge(l.key, ("l_partkey", "l_suppkey"), ps.key, ("ps_partkey", "ps_suppkey")),)
    a = analyze("SELECT * FROM lineitem l RIGHT JOIN partsupp ps ON ps.ps_partkey = l.l_partkey "
                "AND ps.ps_suppkey = l.l_suppkey", SCHEMA)
    l, ps = a.refs
    assert a.joint_edges == (JointEdge(ps.key, ("ps_partkey", "ps_suppkey"), l.key, ("l_partkey", "l_suppkey")),)


def test_a_correlated_subquery_on_two_columns_pairs_them():
    exists = ("SELECT * FROM partsupp ps WHERE {} (SELECT * FROM lineitem l WHERE l.l_partkey = ps.ps_partkey "
              "AND l.l_suppkey = ps.ps_suppkey AND l.l_quantity > 5)")
    a = analyze(exists.format("EXISTS"), SCHEMA)
    ps, l = a.refs
    outer_to_inner = JointEdge(ps.key, ("ps_partkey", "ps_suppkey"), l.key, ("l_partkey", "l_suppkey"))
    inner_to_outer = JointEdge(l.key, ("l_partkey", "l_suppkey"), ps.key, ("ps_partkey", "ps_suppkey"))
    assert set(a.joint_edges) == {outer_to_inner, inner_to_outer}
    a = analyze(exists.format("NOT EXISTS"), SCHEMA)
    assert a.joint_edges == (outer_to_inner,)  # lineitem never shrinks the outer side of an anti join


def test_equalities_from_two_conditions_make_no_joint_edge():
    # each subquery has its own lineitem: no one row matches both columns
    a = analyze("SELECT * FROM partsupp ps WHERE ps.ps_partkey IN (SELECT l_partkey FROM lineitem) "
                "AND ps.ps_suppkey IN (SELECT l_suppkey FROM lineitem)", SCHEMA)
    assert a.joint_edges == ()
    a = analyze("SELECT * FROM partsupp ps JOIN lineitem l ON ps.ps_partkey = l.l_partkey", SCHEMA)
    assert a.joint_edges == ()
