"""MTO's bad-input cases: what a query log or the data may throw at join-induced cuts."""

from __future__ import annotations

import pytest

from layout_core.base.schema import load_schema
from layout_core.predicates import to_sql
from layout_core.sql.analysis import analyze
from layout_core.workload.tree_inputs import candidate_cut_lists

SCHEMA = load_schema("tpch")
HOPS = SCHEMA.key_hops()


def _cuts(sql: str, table: str) -> tuple[list[str], list[str]]:
    simple, induced = candidate_cut_lists([analyze(sql, SCHEMA)], table, HOPS)
    return [to_sql(c) for c in simple], [" / ".join(str(h) for h in c.hops) for c in induced]


def test_a_cyclic_join_graph_induces_only_along_key_paths():
    # customer and supplier both join nation, and each other on a non-key column: a cycle
    sql = ("SELECT count(*) FROM customer c, supplier s, nation n WHERE c.c_nationkey = n.n_nationkey "
           "AND s.s_nationkey = n.n_nationkey AND c.c_nationkey = s.s_nationkey AND n.n_name = 'FRANCE' "
           "AND s.s_acctbal > 0")
    assert _cuts(sql, "customer") == ([], ["nation.n_nationkey->customer.c_nationkey"])
    assert _cuts(sql, "supplier") == (["s_acctbal > 0"], ["nation.n_nationkey->supplier.s_nationkey"])


def test_a_self_join_induces_nothing_between_the_two_references():
    sql = ("SELECT count(*) FROM nation n1 JOIN nation n2 ON n1.n_regionkey = n2.n_regionkey "
           "WHERE n1.n_name = 'FRANCE'")
    a = analyze(sql, SCHEMA)
    first, second = (ref.key for ref in a.refs_of_table("nation"))
    assert a.induced(first, HOPS) == () and a.induced(second, HOPS) == ()
    assert _cuts(sql, "nation") == (["n_name = 'FRANCE'"], [])


@pytest.mark.parametrize("join", ["LEFT JOIN", "FULL JOIN"])
def test_an_outer_join_does_not_induce_onto_the_preserved_side(join):
    sql = f"SELECT count(*) FROM lineitem {join} orders ON l_orderkey = o_orderkey AND o_orderpriority = '1-URGENT'"
    assert _cuts(sql, "lineitem") == ([], [])


def test_an_inner_join_does_induce():
    sql = "SELECT count(*) FROM lineitem JOIN orders ON l_orderkey = o_orderkey AND o_orderpriority = '1-URGENT'"
    assert _cuts(sql, "lineitem") == ([], ["orders.o_orderkey->lineitem.l_orderkey"])


def test_a_join_on_non_key_columns_induces_nothing():
    sql = ("SELECT count(*) FROM lineitem, orders WHERE l_suppkey = o_custkey AND o_orderpriority = '1-URGENT'")
    assert _cuts(sql, "lineitem") == ([], [])


@pytest.mark.slow
def test_a_foreign_key_without_a_primary_key_row_gets_a_false_bit(spark):
    """An orphan lineitem row reaches no order: FALSE, so the inner-join queries that
    imply the cut (and never return the orphan) skip its block correctly."""
    from layout_core.predicates import Column, Compare, Hop, JoinInduced
    from layout_core.spark.induced import literal_keys, with_induced_flags

    orders = spark.createDataFrame([(1, "1-URGENT"), (2, "5-LOW")], "o_orderkey long, o_orderpriority string")
    lineitem = spark.createDataFrame([(1, 10), (2, 20), (99, 30), (None, 40)], "l_orderkey long, l_linenumber int")
    cut = JoinInduced((Hop("orders", "o_orderkey", "lineitem", "l_orderkey"),),
                      Compare(Column("o_orderpriority", "string"), "=", "1-URGENT"))
    flags = with_induced_flags(lineitem, [cut], {"orders": orders, "lineitem": lineitem})
    got = {r["l_linenumber"]: r[flags.columns[0]] for r in flags.frame.collect()}
    assert got == {10: True, 20: False, 30: False, 40: False}
    assert list(literal_keys({"orders": orders}, cut)) == [1]


def test_candidate_cuts_are_the_same_in_every_process():
    """Layouts must not depend on Python's per-process string hashing (IN lists are sets)."""
    import os
    import subprocess
    import sys

    code = ("from layout_core.base.schema import load_schema; from layout_core.sql.analysis import analyze;"
            "from layout_core.workload.tpch import generate; from layout_core.predicates import to_sql;"
            "from layout_core.workload.tree_inputs import candidate_cut_lists as c; s = load_schema('tpch');"
            "a = [analyze(q.sql, s) for q in generate(2, seed=3, templates=[12, 16, 19, 22])];"
            "print([[to_sql(p) for p in kind] for t in ('lineitem', 'part', 'customer')"
            " for kind in c(a, t, s.key_hops())]);"
            # the repr orders AND/OR operands, so it must not follow the set's hash order either
            "from layout_core.predicates.model import InList, Column;"
            "print(repr(InList(Column('m', 'string'), frozenset(['MAIL', 'SHIP', 'AIR', 'RAIL', 'FOB']))))")
    outputs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONHASHSEED": seed}).stdout for seed in ("1", "2", "3")}
    assert len(outputs) == 1 and "IN (" in outputs.pop()
