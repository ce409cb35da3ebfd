"""Join-induced cut bits computed by joins equal Spark's own evaluation of the cut's SQL."""

import pytest

from layout_core.predicates import Column, Compare, Hop, InList, JoinInduced, to_sql

pytestmark = pytest.mark.slow

R_N = Hop("region", "r_regionkey", "nation", "n_regionkey")
N_C = Hop("nation", "n_nationkey", "customer", "c_nationkey")
C_O = Hop("customer", "c_custkey", "orders", "o_custkey")
O_L = Hop("orders", "o_orderkey", "lineitem", "l_orderkey")

CUTS = [
    JoinInduced((C_O,), Compare(Column("c_mktsegment", "string"), "=", "BUILDING")),
    JoinInduced((R_N, N_C, C_O), Compare(Column("r_name", "string"), "=", "ASIA")),
    JoinInduced((N_C, C_O), InList(Column("n_name", "string"), frozenset({"FRANCE", "GERMANY"}))),
    JoinInduced((C_O,), Compare(Column("c_acctbal", "decimal"), ">", 9000)),
]


def test_flags_match_nested_in_subqueries(spark, tpch_views):
    from layout_core.spark.induced import with_induced_flags

    tables = {t: spark.table(t) for t in tpch_views}
    flags = with_induced_flags(tables["orders"], CUTS, tables)
    assert flags.frame.count() == tables["orders"].count()  # left joins keep every row once
    for i, cut in enumerate(CUTS):
        by_join = {r[0] for r in flags.frame.where(flags.columns[i]).select("o_orderkey").collect()}
        by_sql = {r[0] for r in spark.table("orders").where(to_sql(cut)).select("o_orderkey").collect()}
        assert by_join == by_sql and by_join, to_sql(cut)


def test_flags_through_four_hops_and_literal_keys(spark, tpch_views):
    from layout_core.spark.induced import literal_keys, with_induced_flags

    tables = {t: spark.table(t) for t in tpch_views}
    cut = JoinInduced((R_N, N_C, C_O, O_L), Compare(Column("r_name", "string"), "=", "EUROPE"))
    flags = with_induced_flags(tables["lineitem"], [cut], tables)
    flagged = flags.frame.where(flags.columns[0]).count()
    expected = spark.table("lineitem").where(to_sql(cut)).count()
    assert flagged == expected > 0
    keys = literal_keys(tables, cut)  # order keys of European customers
    expected_keys = {r[0] for r in spark.sql(
        "SELECT o_orderkey FROM orders JOIN customer ON o_custkey = c_custkey JOIN nation ON c_nationkey = n_nationkey "
        "JOIN region ON n_regionkey = r_regionkey WHERE r_name = 'EUROPE'").collect()}
    assert set(keys) == expected_keys


def test_the_keys_of_many_cuts_come_from_one_pass_and_equal_each_cuts_own(spark, tpch_views):
    from layout_core.spark.induced import literal_keys, literal_keys_of

    tables = {t: spark.table(t) for t in tpch_views}
    through_orders = JoinInduced((C_O, O_L), Compare(Column("c_mktsegment", "string"), "=", "BUILDING"))
    keys = literal_keys_of(tables, CUTS + [through_orders])
    # CUTS end in customer -> orders: customer keys; the last one in orders -> lineitem: order keys
    expected = [{r[0] for r in spark.sql(sql).collect()} for sql in (
        "SELECT c_custkey FROM customer WHERE c_mktsegment = 'BUILDING'",
        "SELECT c_custkey FROM customer JOIN nation ON c_nationkey = n_nationkey "
        "JOIN region ON n_regionkey = r_regionkey WHERE r_name = 'ASIA'",
        "SELECT c_custkey FROM customer JOIN nation ON c_nationkey = n_nationkey "
        "WHERE n_name IN ('FRANCE', 'GERMANY')",
        "SELECT c_custkey FROM customer WHERE c_acctbal > 9000",
        "SELECT o_orderkey FROM orders JOIN customer ON o_custkey = c_custkey WHERE c_mktsegment = 'BUILDING'")]
    assert [set(k) for k in keys] == expected and all(expected)
    assert set(literal_keys(tables, CUTS[1])) == expected[1]
    assert literal_keys_of(tables, []) == []


@pytest.mark.timeout(300, method="thread")  # the old planning hang blocks in Py4J: only a thread timer ends it
def test_the_keys_of_thirty_cuts_through_two_hops(spark, tpch_views):
    """lineitem's suppliers by nation, as a window of TPC-H 12-22 gives them: 25 such cuts once
    never finished planning (a filter OR-ing their flags sent constraint propagation into
    exponential time). 30 cuts `s_nationkey IN (SELECT n_nationkey FROM nation WHERE n_name
    < X)` / `= X`; each cut's keys are the suppliers Spark's own SQL finds."""
    from layout_core.spark.induced import literal_keys_of

    s_l = Hop("supplier", "s_suppkey", "lineitem", "l_suppkey")
    n_s = Hop("nation", "n_nationkey", "supplier", "s_nationkey")
    names = sorted(r[0] for r in spark.table("nation").select("n_name").collect())[:15]
    name = Column("n_name", "string")
    cuts = [JoinInduced((n_s, s_l), Compare(name, op, n)) for n in names for op in ("<", "=")]
    tables = {t: spark.table(t) for t in ("nation", "supplier")}
    keys = literal_keys_of(tables, cuts)
    for cut, got in zip(cuts, keys):
        nations = f"SELECT n_nationkey FROM nation WHERE {to_sql(cut.source)}"
        expected = {r[0] for r in spark.table("supplier").where(f"s_nationkey IN ({nations})")
                    .select("s_suppkey").collect()}
        assert set(got) == expected, to_sql(cut)
    assert len(keys) == 30 and sum(1 for k in keys if len(k)) >= 29  # only n_name < the first name is empty


def test_a_samples_bits_from_parents_narrowed_to_its_keys_equal_those_from_whole_parents(spark, tpch_views):
    """The shift measurement joins its row sample with parent rows narrowed to the sample's keys
    (`frames_for_rows`): the bits must be those of the whole parents, for rows whose key is NULL
    or names no parent too; a table a path goes through (customer, nation) keeps every row."""
    from pyspark.sql import functions as F

    from layout_core.optimizers.base import CandidateCut
    from layout_core.spark.featurize import frames_for_rows
    from layout_core.spark.induced import with_layout_cut_flags

    tables = {t: spark.table(t) for t in tpch_views}
    sample = (tables["lineitem"].where("l_orderkey % 7 = 0 AND l_linenumber <= 2")
              .select(F.col("l_orderkey").cast("long").alias("l_orderkey"), "l_linenumber")
              .unionByName(spark.createDataFrame([(None, 1), (10 ** 9, 1)], "l_orderkey bigint, l_linenumber int"))
              .localCheckpoint())
    predicates = [JoinInduced((O_L,), Compare(Column("o_orderpriority", "string"), "=", "1-URGENT")),
                  JoinInduced((C_O, O_L), Compare(Column("c_mktsegment", "string"), "=", "BUILDING")),
                  JoinInduced((R_N, N_C, C_O, O_L), Compare(Column("r_name", "string"), "=", "EUROPE"))]
    cuts = [CandidateCut(p, "join_induced") for p in predicates]

    narrowed = frames_for_rows(sample, cuts, tables)

    assert narrowed["orders"].count() < tables["orders"].count()
    assert {t: narrowed[t] for t in ("customer", "nation", "region")} == {
        t: tables[t] for t in ("customer", "nation", "region")}
    columns = ["l_orderkey", "l_linenumber", "_cut0", "_cut1", "_cut2"]

    def flags(frames):
        rows = with_layout_cut_flags(sample, predicates, frames).select(*columns).collect()
        return sorted((tuple(r) for r in rows), key=lambda r: (r[0] is None, r[0] or 0, r[1:]))

    whole = flags(tables)
    assert flags(narrowed) == whole
    assert [r[2:] for r in whole if r[0] in (None, 10 ** 9)] == [(False, False, False)] * 2
    assert all(any(r[2 + j] for r in whole) for j in range(3))  # every cut holds for some sampled row
    # a path through orders (an odd one, keys matched as numbers) keeps orders whole
    through_orders = JoinInduced((Hop("orders", "o_orderkey", "customer", "c_custkey"),
                                  Hop("customer", "c_custkey", "lineitem", "l_orderkey")),
                                 Compare(Column("o_orderpriority", "string"), "=", "1-URGENT"))
    assert frames_for_rows(sample, cuts + [CandidateCut(through_orders, "join_induced")], tables)["orders"] \
        is tables["orders"]
