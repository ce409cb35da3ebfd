"""What tree layouts take from the training queries: the in-leaf sort column and the
candidate cuts (pure, no Spark)."""

from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.algorithms.qdtree import greedy_tree, skipped_rows, tree_blocking_map
from layout_core.algorithms.types import VectorCounts
from layout_core.base.schema import load_schema
from layout_core.predicates import And, Between, Column, Compare, InList, Or, disjoint, implies, to_sql
from layout_core.sql.analysis import analyze
from layout_core.workload.tree_inputs import (
    candidate_cut_lists,
    induced_columns,
    is_range_atom,
    or_hull_cuts,
    range_filtered_columns,
    workload_matrices,
)
from tests.helpers.sql3vl import evaluate

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
    assert _sort_columns(log, "lineitem") == ("l_quantity",)


def test_the_foreign_keys_filters_reach_a_table_through_most_come_first():
    log = analyses(
        # two filters on part reach lineitem through l_partkey: the reference counts once
        "SELECT count(*) FROM lineitem JOIN part ON l_partkey = p_partkey WHERE p_size = 3 AND p_brand = 'Brand#12'",
        "SELECT count(*) FROM lineitem JOIN part ON l_partkey = p_partkey WHERE p_size < 10",
        # customer's filter reaches it through orders: l_orderkey
        "SELECT count(*) FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
        "JOIN customer ON o_custkey = c_custkey WHERE c_mktsegment = 'BUILDING'",
        # part is joined but not filtered here: only l_suppkey counts
        "SELECT count(*) FROM lineitem JOIN supplier ON l_suppkey = s_suppkey "
        "JOIN part ON l_partkey = p_partkey WHERE s_nationkey = 7",
        "SELECT count(*) FROM lineitem WHERE l_shipdate < DATE '1995-01-01'",  # its own column: none
    )
    assert induced_columns(log, "lineitem", SCHEMA.key_hops()) == [
        ("l_partkey", 2), ("l_orderkey", 1), ("l_suppkey", 1)]
    assert induced_columns(log, "part", SCHEMA.key_hops()) == []  # nothing filters part's parents
    # the plan's workload lists them for a fact table only: orders is referenced by lineitem
    from layout_core.optimizers import TableQueries

    log.append(analyses("SELECT count(*) FROM orders JOIN customer ON o_custkey = c_custkey "
                        "WHERE c_mktsegment = 'BUILDING'")[0])
    assert induced_columns(log, "orders", SCHEMA.key_hops()) == [("o_custkey", 2)]
    lineitem, orders = (TableQueries(t, tuple(log), SCHEMA.key_hops()) for t in ("lineitem", "orders"))
    assert lineitem.is_fact and not orders.is_fact
    assert lineitem.summary([], SCHEMA.table("lineitem")).induced_columns == ("l_partkey", "l_orderkey", "l_suppkey")
    assert orders.summary([], SCHEMA.table("orders")).induced_columns == ()


def test_no_range_filter_falls_back():
    log = analyses("SELECT count(*) FROM lineitem WHERE l_returnflag = 'R'",
                   "SELECT count(*) FROM orders WHERE o_orderdate < DATE '1995-01-01'")
    assert _sort_columns(log, "lineitem") == ("l_orderkey", "l_linenumber")  # the primary key
    assert _sort_columns(log, "orders") == ("o_orderdate",)
    assert _sort_columns([], "part") == ("p_partkey",)


def _sort_columns(log, table: str) -> tuple:
    """The in-leaf order a tree optimizer picks for `table` from the log."""
    from layout_core.optimizers import TableQueries
    from layout_core.optimizers.base import sort_columns

    schema_table = SCHEMA.table(table)
    workload = TableQueries(table, tuple(log), SCHEMA.key_hops()).summary([], schema_table)
    return sort_columns(schema_table, workload, "")


def test_each_half_of_the_references_keeps_the_cuts_it_makes():
    # Four distinct references alternate between the halves: {q0, q2} and {q1, q3}.
    from layout_core.optimizers import CandidateCut, TableQueries

    log = analyses(
        "SELECT count(*) FROM lineitem WHERE l_shipmode = 'AIR'",
        "SELECT count(*) FROM lineitem WHERE l_shipmode = 'MAIL'",
        "SELECT count(*) FROM lineitem WHERE l_shipmode = 'SHIP' AND l_quantity < 10",
        "SELECT count(*) FROM lineitem WHERE l_quantity < 20",
    )
    simple, _ = candidate_cut_lists(log, "lineitem", SCHEMA.key_hops())
    cuts = [CandidateCut(c) for c in simple]
    summary = TableQueries("lineitem", tuple(log), SCHEMA.key_hops()).summary(cuts, SCHEMA.table("lineitem"))
    own = [{to_sql(c.predicate) for c, mine in zip(cuts, half) if mine} for half in summary.held_out_cuts]
    # half 0 names AIR and SHIP (the range between them is its own) and l_quantity < 10;
    # half 1 names MAIL and l_quantity < 20, and no range: one literal separates nothing
    assert own[0] == {"l_shipmode = 'AIR'", "l_shipmode = 'SHIP'", "l_shipmode < 'SHIP'", "l_quantity < 10"}
    assert own[1] == {"l_shipmode = 'MAIL'", "l_quantity < 20"}
    # l_shipmode < 'MAIL' lies between literals of both halves: neither makes it alone
    assert "l_shipmode < 'MAIL'" in {to_sql(c.predicate) for c in cuts}
    # one reference cannot be split
    one = TableQueries("lineitem", tuple(log[:1]), SCHEMA.key_hops()).summary(cuts, SCHEMA.table("lineitem"))
    assert one.held_out_cuts == ()


# --- range cuts between the literals of equality cuts -------------------------------

def _sqls(cuts):
    return {to_sql(c) for c in cuts}


def test_range_cuts_between_the_literals_of_one_column():
    log = analyses(
        "SELECT count(*) FROM lineitem WHERE l_shipmode IN ('MAIL', 'SHIP')",
        "SELECT count(*) FROM lineitem WHERE l_shipmode = 'AIR'",
        "SELECT count(*) FROM lineitem WHERE l_shipmode = 'AIR' AND l_returnflag = 'R'",
    )
    simple, induced = candidate_cut_lists(log, "lineitem", SCHEMA.key_hops())
    # AIR < MAIL < SHIP: a cut below every literal but the smallest; one literal of
    # l_returnflag separates nothing
    assert {s for s in _sqls(simple) if "<" in s} == {"l_shipmode < 'MAIL'", "l_shipmode < 'SHIP'"}
    # counted like the equality cuts they separate (3 references), so they rank first
    assert _sqls(simple[:2]) == {"l_shipmode < 'MAIL'", "l_shipmode < 'SHIP'"}
    assert induced == []


def test_join_induced_range_cuts_keep_their_induction_path():
    log = analyses(*[
        f"SELECT sum(l_extendedprice) FROM lineitem, part WHERE l_partkey = p_partkey AND p_brand = '{b}'"
        for b in ("Brand#45", "Brand#12", "Brand#23")])
    _, induced = candidate_cut_lists(log, "lineitem", SCHEMA.key_hops())
    ranges = [c for c in induced if isinstance(c.source, Compare) and c.source.op == "<"]
    assert sorted(to_sql(c.source) for c in ranges) == ["p_brand < 'Brand#23'", "p_brand < 'Brand#45'"]
    assert all([(h.parent_table, h.child_table) for h in c.hops] == [("part", "lineitem")] for c in ranges)


def test_a_range_cut_is_decided_for_every_value_no_training_query_used():
    log = analyses(*[f"SELECT count(*) FROM part WHERE p_brand = 'Brand#{b}'" for b in (12, 23, 45)])
    simple, _ = candidate_cut_lists(log, "part", SCHEMA.key_hops())
    ranges = [c for c in simple if c.op == "<"]
    brand = ranges[0].column
    for n in (11, 15, 22, 31, 44, 55):  # unseen brands
        query = Compare(brand, "=", f"Brand#{n}")
        assert all(implies(query, c) or disjoint(query, c) for c in ranges)


def test_a_tree_with_range_cuts_skips_more_for_an_unseen_literal():
    """8 ship modes of 2,000 rows each; training asks for b, e and g, the test for
    c, which no training query used. With equality cuts only, c can skip at most
    the leaves of b, e and g (6,000 rows); a range cut l_shipmode < 'e' lets it
    skip the half of the table from e on."""
    values = list("abcdefgh")
    rows = np.repeat(values, 2000)
    log = analyses(*[f"SELECT count(*) FROM lineitem WHERE l_shipmode = '{v}'" for v in "beg"])
    test = analyses("SELECT count(*) FROM lineitem WHERE l_shipmode = 'c'")
    simple, _ = candidate_cut_lists(log, "lineitem", SCHEMA.key_hops())
    equality_only = [c for c in simple if c.op == "="]

    def skipped_by_test(cuts):
        ops = {"=": np.equal, "<": np.less}
        bits = np.stack([ops[c.op](rows, c.value) for c in cuts], axis=1)
        vc = VectorCounts.from_rows(bits, np.ones(len(cuts)))
        root = greedy_tree(vc, workload_matrices(log, "lineitem", SCHEMA.key_hops(), cuts), 2000,
                           objective="router")
        blocks = tree_blocking_map(vc, root, 2000)
        return int(skipped_rows(vc, blocks, workload_matrices(test, "lineitem", SCHEMA.key_hops(), cuts))[0])

    assert skipped_by_test(equality_only) <= 6000
    assert skipped_by_test(simple) >= 8000


def test_or_hulls_are_what_every_branch_says_about_a_column():
    # q19's shape: the brands change per instance, containers and sizes do not
    q19 = ("SELECT sum(l_extendedprice) FROM lineitem, part WHERE p_partkey = l_partkey AND ("
           " (p_brand = '{0}' AND p_container IN ('SM CASE', 'SM BOX') AND p_size BETWEEN 1 AND 5)"
           " OR (p_brand = '{1}' AND p_container IN ('MED BAG', 'MED BOX') AND p_size BETWEEN 1 AND 10)"
           " OR (p_brand = '{1}' AND p_container = 'LG CASE' AND p_size >= 3))")
    log = analyses(q19.format("Brand#12", "Brand#23"), q19.format("Brand#34", "Brand#45"))
    _, induced = candidate_cut_lists(log, "lineitem", SCHEMA.key_hops())
    sources = _sqls(c.source for c in induced)
    # p_size: the third branch has no upper bound, so only the common lower bound holds
    assert "p_size >= 1" in sources
    assert "p_container IN ('LG CASE', 'MED BAG', 'MED BOX', 'SM BOX', 'SM CASE')" in sources
    assert "p_brand IN ('Brand#12', 'Brand#23')" in sources
    # an instance no training query was still implies the instance-free hulls
    unseen = analyses(q19.format("Brand#51", "Brand#52"))[0]
    query = unseen.predicate(unseen.refs_of_table("lineitem")[0].key, SCHEMA.key_hops())
    implied = {to_sql(c.source) for c in induced if implies(query, c)}
    assert {"p_size >= 1", "p_container IN ('LG CASE', 'MED BAG', 'MED BOX', 'SM BOX', 'SM CASE')"} <= implied


def test_or_hull_cuts_skip_columns_some_branch_leaves_free():
    log = analyses("SELECT count(*) FROM part WHERE (p_size = 1 AND p_brand = 'Brand#12') OR p_brand = 'Brand#23'")
    simple, _ = candidate_cut_lists(log, "part", SCHEMA.key_hops())
    assert not any("p_size" in s and " OR " not in s for s in _sqls(simple))
    assert "p_brand IN ('Brand#12', 'Brand#23')" in _sqls(simple)



X, Y = Column("x", "int"), Column("y", "int")
_VALUE = st.one_of(st.none(), st.integers(0, 6))


@st.composite
def _bound_atom(draw):
    column = draw(st.sampled_from([X, Y]))
    kind = draw(st.sampled_from(["=", "in", "between", "<", "<=", ">", ">=", "<>"]))
    if kind == "in":
        return InList(column, frozenset(draw(st.lists(st.integers(0, 6), max_size=3))), draw(st.booleans()),
                      draw(st.booleans()))
    if kind == "between":
        return Between(column, draw(_VALUE), draw(_VALUE), draw(st.booleans()))
    return Compare(column, kind, draw(_VALUE))


_BRANCH = st.lists(_bound_atom(), min_size=1, max_size=3).map(lambda xs: And(tuple(xs)) if len(xs) > 1 else xs[0])


@settings(max_examples=300, deadline=None)
@given(branches=st.lists(_BRANCH, min_size=2, max_size=3),
       rows=st.lists(st.fixed_dictionaries({"x": _VALUE, "y": _VALUE}), min_size=1, max_size=20))
def test_every_row_an_or_selects_satisfies_its_hulls(branches, rows):
    """NULLs, duplicates, empty and NULL-holding IN lists, NOT BETWEEN, <>: a hull
    is a cut the OR must imply, so a row the OR selects is TRUE for every hull."""
    p = Or(tuple(branches))
    for hull in or_hull_cuts(Counter({p: 1})):
        for row in rows:
            if evaluate(p, row) is True:
                assert evaluate(hull, row) is True, (to_sql(p), to_sql(hull), row)


def test_the_cut_limit_grows_with_the_log():
    from layout_core.optimizers import TableQueries, get_optimizer

    # 60 sizes, one query each: 60 equality cuts and 59 range cuts between them
    log = tuple(analyses(*[f"SELECT count(*) FROM part WHERE p_size = {v}" for v in range(1, 61)]))
    mto = get_optimizer("mto")
    workload = TableQueries("part", log, SCHEMA.key_hops())
    # auto: two per reference (120), so all 119 are kept; a fixed limit still holds
    assert len(mto.choose_cuts(workload, mto.resolve({}))) == 119
    assert len(mto.choose_cuts(workload, mto.resolve({"max_cuts": 96}))) == 96
    # a small log keeps at least 96 per kind: 30 lists of three sizes offer 30 IN
    # cuts and 89 range cuts between their 90 sizes, more than 96 and than 2 x 30
    lists = analyses(*[f"SELECT count(*) FROM part WHERE p_size IN ({3 * i}, {3 * i + 1}, {3 * i + 2})"
                       for i in range(30)])
    small = TableQueries("part", tuple(lists), SCHEMA.key_hops())
    assert len(mto.choose_cuts(small, mto.resolve({"max_cuts": "auto"}))) == 96
