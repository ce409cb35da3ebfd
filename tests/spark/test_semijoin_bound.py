"""B1's semi-join lower bound (`bench.tpch.semijoin_lower_bound`) on TPC-H SF 0.01 in
Spark: each reference's rows that survive its predicate and its joins' reductions,
counted against SQL written out by hand with EXISTS."""

from __future__ import annotations

import pytest

from layout_core.base.schema import load_schema
from layout_core.bench.tpch import semijoin_lower_bound
from layout_core.sql.analysis import analyze

pytestmark = pytest.mark.slow
SCHEMA = load_schema("tpch")


def _count(spark, sql: str) -> int:
    return spark.sql(sql).collect()[0][0]


def test_a_join_on_two_columns_reduces_each_side_on_both_at_once(spark, tpch_views):
    sql = """SELECT count(*) FROM partsupp ps, lineitem l
             WHERE ps.ps_partkey = l.l_partkey AND ps.ps_suppkey = l.l_suppkey
               AND ps.ps_availqty < 300 AND l.l_quantity < 3"""
    partsupp_needed = _count(spark, """SELECT count(*) FROM partsupp WHERE ps_availqty < 300 AND EXISTS (
        SELECT 1 FROM lineitem WHERE l_quantity < 3 AND l_partkey = ps_partkey AND l_suppkey = ps_suppkey)""")
    lineitem_needed = _count(spark, """SELECT count(*) FROM lineitem WHERE l_quantity < 3 AND EXISTS (
        SELECT 1 FROM partsupp WHERE ps_availqty < 300 AND ps_partkey = l_partkey AND ps_suppkey = l_suppkey)""")
    # one column at a time would keep lineitem rows of a low-stock part sold by another supplier
    lineitem_by_part = _count(spark, """SELECT count(*) FROM lineitem WHERE l_quantity < 3 AND l_partkey IN (
        SELECT ps_partkey FROM partsupp WHERE ps_availqty < 300)""")
    assert 0 < lineitem_needed < lineitem_by_part

    bound = semijoin_lower_bound(spark, [analyze(sql, SCHEMA)], block_rows=100)
    assert bound["semijoin_rows_needed"] == partsupp_needed + lineitem_needed
    assert bound["semijoin_lower_bound_blocks"] == -(-partsupp_needed // 100) - (-lineitem_needed // 100)


def test_a_union_reduces_the_other_side_by_all_its_branches(spark, tpch_views):
    sql = """SELECT count(*) FROM customer c JOIN (
                 SELECT o_custkey AS k FROM orders WHERE o_totalprice > 400000
                 UNION ALL SELECT s_suppkey FROM supplier WHERE s_acctbal < 0) u ON c.c_custkey = u.k"""
    customer_needed = _count(spark, """SELECT count(*) FROM customer WHERE
        EXISTS (SELECT 1 FROM orders WHERE o_totalprice > 400000 AND o_custkey = c_custkey)
        OR EXISTS (SELECT 1 FROM supplier WHERE s_acctbal < 0 AND s_suppkey = c_custkey)""")
    by_orders = _count(spark, """SELECT count(*) FROM customer WHERE
        EXISTS (SELECT 1 FROM orders WHERE o_totalprice > 400000 AND o_custkey = c_custkey)""")
    assert by_orders < customer_needed < _count(spark, "SELECT count(*) FROM customer")  # both branches count
    orders_needed = _count(spark, """SELECT count(*) FROM orders WHERE o_totalprice > 400000
        AND EXISTS (SELECT 1 FROM customer WHERE c_custkey = o_custkey)""")
    supplier_needed = _count(spark, """SELECT count(*) FROM supplier WHERE s_acctbal < 0
        AND EXISTS (SELECT 1 FROM customer WHERE c_custkey = s_suppkey)""")

    bound = semijoin_lower_bound(spark, [analyze(sql, SCHEMA)], block_rows=100)
    assert bound["semijoin_rows_needed"] == customer_needed + orders_needed + supplier_needed
