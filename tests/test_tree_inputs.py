"""Choosing the in-leaf sort column of tree layouts from the training queries (pure, no Spark)."""

from layout_core.schema import load_schema
from layout_core.sql.analysis import analyze
from layout_core.workload.tree_inputs import is_range_atom, leaf_sort_column, range_filtered_columns
from layout_core.predicates import Between, Column, Compare, InList

SCHEMA = load_schema("tpch")


def analyses(*sqls):
    return [analyze(sql, SCHEMA) for sql in sqls]


def test_range_atoms():
    c = Column("l_quantity", "decimal")
    assert is_range_atom(Compare(c, "<", 5)) and is_range_atom(Compare(c, ">=", 5))
    assert is_range_atom(Between(c, 1, 5))
    assert not is_range_atom(Compare(c, "=", 5)) and not is_range_atom(Compare(c, "<>", 5))
    assert not is_range_atom(InList(c, frozenset({1, 2})))


def test_the_most_range_filtered_column_wins_and_a_reference_counts_once():
    log = analyses(
        "SELECT count(*) FROM lineitem WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'",
        "SELECT count(*) FROM lineitem WHERE l_quantity < 24 AND l_discount BETWEEN 0.05 AND 0.07",
        "SELECT count(*) FROM lineitem WHERE l_quantity > 10",
        "SELECT count(*) FROM lineitem WHERE l_returnflag = 'R'",  # equality: not a range
    )
    assert range_filtered_columns(log, "lineitem") == [("l_quantity", 2), ("l_discount", 1), ("l_shipdate", 1)]
    assert leaf_sort_column(log, "lineitem", ["l_orderkey", "l_linenumber"]) == ["l_quantity"]


def test_no_range_filter_falls_back():
    log = analyses("SELECT count(*) FROM lineitem WHERE l_returnflag = 'R'",
                   "SELECT count(*) FROM orders WHERE o_orderdate < DATE '1995-01-01'")
    assert leaf_sort_column(log, "lineitem", ["l_orderkey", "l_linenumber"]) == ["l_orderkey", "l_linenumber"]
    assert leaf_sort_column(log, "orders", ["o_orderkey"]) == ["o_orderdate"]
    assert leaf_sort_column([], "part", ["p_partkey"]) == ["p_partkey"]
