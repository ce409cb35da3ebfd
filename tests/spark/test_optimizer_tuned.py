"""The `tuned` baseline (diPs §13.1: rows clustered by a date column's month,
ordered by the key inside a cluster; §13.2: without a date column, sorted by
the foreign key the log filters through) and the tree optimizers' leaf_order
setting: plans without Spark, then one small table laid out in Spark with
every row's block stated by hand."""

from __future__ import annotations

import json
from datetime import date

import pytest

from layout_core.base.schema import TableSchema
from layout_core.optimizers import (
    CandidateCut,
    LayoutPlan,
    PlanError,
    PlanWorkload,
    VectorSample,
    get_optimizer,
    optimizer_names,
    plan_layout,
)
from layout_core.optimizers.plan import ClusterBlocks, SortBlocks, TreeBlocks, TupleBlocks
from layout_core.predicates import Column, Compare

# a small lineitem: the join key first in the primary key, two date columns, one timestamp
LI = TableSchema("li", (("l_orderkey", "bigint"), ("l_linenumber", "int"), ("l_quantity", "int"),
                        ("l_shipdate", "date"), ("l_receiptdate", "date"), ("l_loaded", "timestamp"),
                        ("l_comment", "string")), ("l_orderkey", "l_linenumber"))
NO_KEY = TableSchema("nokey", (("a", "int"), ("d", "date")))
Q = Column("l_quantity", "int")


def _rows(n: int) -> VectorSample:
    return VectorSample(("",), [n], n)


def _tuned(rows: int, workload: PlanWorkload | None = None, table: TableSchema = LI, **settings) -> LayoutPlan:
    return plan_layout("tuned", table, _rows(rows), [], workload, settings)


def test_tuned_is_registered_with_typed_settings():
    assert "tuned" in optimizer_names()
    tuned = get_optimizer("tuned")
    assert tuned.resolve({}) == {"block_rows": 50_000, "cluster_column": "", "cluster_granularity": "month",
                                 "order_column": "", "max_clusters": 4096}
    assert tuned.resolve({"cluster_granularity": " Year "})["cluster_granularity"] == "year"
    assert tuned.router_keeps == "zone maps only" and tuned.choose_cuts(None, tuned.resolve({})) == []
    assert "cluster_granularity (day|month|year, default 'month')" in tuned.describe()


def test_a_date_column_the_log_filters_makes_month_clusters_ordered_by_the_key():
    # 12 rows in blocks of 2; the plan cannot know the months' sizes, so it reserves
    # 6 blocks + one per further possible cluster (at most one per row): 6 + 11 ids,
    # the first 6 expected full, the rest reserved for the clusters' small last blocks
    workload = PlanWorkload(filtered_columns=("l_quantity", "l_shipdate", "l_receiptdate"))
    plan = _tuned(12, workload, block_rows=2)
    assert plan.assignment == ClusterBlocks("l_shipdate", "month", ("l_orderkey",), 2, 12)
    assert plan.n_blocks == 17 and plan.expected_block_rows == (2.0,) * 6 + (0.0,) * 11
    assert sum(plan.expected_block_rows) == 12 and plan.n_cuts == 0
    assert plan.choices == {"cluster_column": "l_shipdate"}
    assert LayoutPlan.from_json(json.loads(json.dumps(plan.to_json()))) == plan


def test_the_default_cluster_column_is_the_most_filtered_date_or_timestamp_column():
    # l_quantity is filtered most but is no date; a timestamp counts as a date
    assert _tuned(10, PlanWorkload(filtered_columns=("l_quantity", "l_loaded", "l_shipdate"))) \
        .assignment.cluster_column == "l_loaded"
    assert _tuned(10, PlanWorkload(filtered_columns=("l_receiptdate", "l_shipdate"))) \
        .assignment.cluster_column == "l_receiptdate"
    # a given column wins over the log's; the granularity and order column are taken as given
    plan = _tuned(10, PlanWorkload(filtered_columns=("l_receiptdate",)), cluster_column="l_shipdate",
                  cluster_granularity="day", order_column="l_quantity", block_rows=4, max_clusters=3)
    assert plan.assignment == ClusterBlocks("l_shipdate", "day", ("l_quantity",), 4, 3)
    assert plan.expected_block_rows == (4.0, 4.0, 2.0, 0.0, 0.0)  # ceil(10 / 4) + 3 - 1 ids


def test_no_filtered_date_column_sorts_by_the_key_with_exact_sizes():
    for workload in (None, PlanWorkload(filtered_columns=("l_quantity", "l_comment"))):
        plan = _tuned(25, workload, block_rows=10)
        assert plan.assignment == SortBlocks(("l_orderkey",), 10)
        assert plan.expected_block_rows == (10.0, 10.0, 5.0)
        assert plan.choices == {"cluster_column": ""}
    assert _tuned(0, PlanWorkload(filtered_columns=("l_shipdate",))).n_blocks == 0  # an empty table


def test_no_filtered_date_column_sorts_by_the_foreign_key_filters_reach_it_through_most_first():
    # TPC-DS's facts (diPs §13.2): their dates live in date_dim, filtered through the date key
    reached = PlanWorkload(filtered_columns=("l_quantity",), induced_columns=("l_partkey", "l_suppkey"))
    li = TableSchema("li", LI.columns + (("l_partkey", "bigint"), ("l_suppkey", "bigint")), LI.primary_key)
    plan = _tuned(25, reached, table=li, block_rows=10)
    assert plan.assignment == SortBlocks(("l_partkey", "l_orderkey"), 10)
    assert plan.expected_block_rows == (10.0, 10.0, 5.0) and plan.choices == {"cluster_column": ""}
    # a given order column is taken as the whole order; a key that is the order column adds nothing
    assert _tuned(25, reached, table=li, order_column="l_suppkey").assignment.columns == ("l_suppkey",)
    assert _tuned(25, PlanWorkload(induced_columns=("l_orderkey", "l_partkey")), table=li) \
        .assignment.columns == ("l_orderkey",)
    # the keys travel with the features; features written before them have none
    assert PlanWorkload.from_json(reached.to_json()) == reached
    assert PlanWorkload.from_json({k: v for k, v in reached.to_json().items() if k != "induced_columns"}) \
        .induced_columns == ()
    # a filtered date column still clusters, whatever the keys
    assert _tuned(25, PlanWorkload(filtered_columns=("l_shipdate",), induced_columns=("l_partkey",)),
                  table=li).assignment.cluster_column == "l_shipdate"


def test_unknown_or_unsuitable_columns_and_settings_are_refused():
    with pytest.raises(PlanError, match="li has no column 'l_shipdat' to cluster rows by .cluster_column."):
        _tuned(10, cluster_column="l_shipdat")
    with pytest.raises(PlanError, match="cluster_column 'l_quantity' of li is int, not a date or timestamp"):
        _tuned(10, cluster_column="l_quantity")
    with pytest.raises(PlanError, match="li has no column 'o_orderkey' to order rows by .order_column."):
        _tuned(10, order_column="o_orderkey")
    with pytest.raises(PlanError, match="tuned needs the order_column setting: nokey has no primary key"):
        _tuned(10, PlanWorkload(filtered_columns=("d",)), table=NO_KEY)
    assert _tuned(10, PlanWorkload(filtered_columns=("d",)), table=NO_KEY, order_column="a") \
        .assignment.columns == ("a",)
    with pytest.raises(PlanError, match="setting cluster_granularity takes one of day, month, year, not 'week'"):
        _tuned(10, cluster_granularity="week")
    with pytest.raises(PlanError, match="max_clusters must be positive, not 0"):
        _tuned(10, max_clusters=0)
    with pytest.raises(PlanError, match="optimizer tuned has no setting sort_column"):
        _tuned(10, sort_column="l_orderkey")


# --------------------------------------------------------------------------- leaf_order

# cut 0: l_quantity < 10; 600 rows with it, 400 without; the log filters l_shipdate by ranges
CUTS = [CandidateCut(Compare(Q, "<", 10))]
WORKLOAD = PlanWorkload(implies=((True,), (False,)), disjoint=((False,), (True,)), range_columns=("l_shipdate",))
SAMPLE = VectorSample(("1", "0"), [600, 400], 1000)


def _tree(optimizer: str, **settings) -> LayoutPlan:
    return plan_layout(optimizer, LI, SAMPLE, CUTS, WORKLOAD, {"block_rows": 200, "sample_rows": 0, **settings})


def test_leaf_order_join_key_orders_every_leaf_by_the_primary_keys_first_column():
    for optimizer in ("qdtree", "mto"):
        by_range, by_key = _tree(optimizer), _tree(optimizer, leaf_order="join_key")
        assert by_range.settings["leaf_order"] == "range" and by_key.settings["leaf_order"] == "join_key"
        assert isinstance(by_key.assignment, TreeBlocks)
        assert by_range.assignment.sort_columns == ("l_shipdate",)
        assert by_key.assignment.sort_columns == ("l_orderkey",)
        # only the order inside a leaf changes: the same tree, leaves and sizes
        assert by_key.assignment.tree == by_range.assignment.tree == (0, 1000, (0, 600), (1, 400))
        assert by_key.assignment.leaf_n_blocks == (3, 2)
        assert by_key.expected_block_rows == by_range.expected_block_rows
    one = _tree("pando", trees=1, leaf_order="join_key")  # mto's plan
    assert one.assignment.sort_columns == ("l_orderkey",)
    two = _tree("pando", trees=2, leaf_order="join_key")
    assert isinstance(two.assignment, TupleBlocks) and two.assignment.sort_columns == ("l_orderkey",)
    assert _tree("pando", trees=2).assignment.sort_columns == ("l_shipdate",)


def test_leaf_order_join_key_conflicts_with_a_sort_column_and_needs_a_primary_key():
    for optimizer in ("qdtree", "mto", "pando"):
        with pytest.raises(PlanError, match="leaf_order=join_key and sort_column='l_shipdate' conflict"):
            get_optimizer(optimizer).resolve({"leaf_order": "join_key", "sort_column": "l_shipdate"})
        with pytest.raises(PlanError, match="setting leaf_order takes one of range, join_key, not 'key'"):
            get_optimizer(optimizer).resolve({"leaf_order": "key"})
    assert _tree("mto", sort_column="l_quantity").assignment.sort_columns == ("l_quantity",)  # range: as before
    keyless = TableSchema("t", (("x", "int"), ("l_quantity", "int")))
    with pytest.raises(PlanError, match="leaf_order=join_key needs a primary key: t has none"):
        plan_layout("mto", keyless, SAMPLE, CUTS, WORKLOAD, {"block_rows": 200, "leaf_order": "join_key"})


# --------------------------------------------------------------------------- Spark

# (key, ship date): January 5 rows, February 3, March 4, keys not in date order
MONTHS = [(7, date(1995, 1, 30)), (2, date(1995, 1, 3)), (11, date(1995, 1, 1)), (5, date(1995, 1, 17)),
          (9, date(1995, 1, 9)), (4, date(1995, 2, 28)), (12, date(1995, 2, 1)), (1, date(1995, 2, 14)),
          (3, date(1995, 3, 31)), (10, date(1995, 3, 2)), (6, date(1995, 3, 2)), (8, date(1995, 3, 15))]


@pytest.mark.slow
def test_spark_blocks_never_span_two_months_and_follow_month_then_key_order(spark):
    from layout_core.spark.assign import with_plan_blocks

    table = TableSchema("s", (("k", "bigint"), ("d", "date")), ("k",))
    df = spark.createDataFrame(MONTHS, "k bigint, d date")

    def blocks(plan) -> dict[int, int]:
        return {r["k"]: r["_block"] for r in with_plan_blocks(df, plan).collect()}

    plan = plan_layout("tuned", table, _rows(12), [], PlanWorkload(filtered_columns=("d",)), {"block_rows": 2})
    assert plan.n_blocks == 6 + 11
    # by hand: January keys 2 5 | 7 9 | 11, February 1 4 | 12, March 3 6 | 8 10
    expected = {2: 0, 5: 0, 7: 1, 9: 1, 11: 2, 1: 3, 4: 3, 12: 4, 3: 5, 6: 5, 8: 6, 10: 6}
    got = blocks(plan)
    assert got == expected
    assert blocks(plan) == got  # a second run puts every row in the same block
    months = {k: d.month for k, d in MONTHS}
    assert all(len({months[k] for k in got if got[k] == b}) == 1 for b in set(got.values()))
    in_order = [got[k] for k in sorted(got, key=lambda k: (months[k], k))]
    assert in_order == sorted(in_order) and max(in_order) < plan.n_blocks

    # two clusters at most: February and March share the last cluster's blocks,
    # so block 4 holds February's key 12 and March's key 3, and every id stays reserved
    capped = plan_layout("tuned", table, _rows(12), [], PlanWorkload(filtered_columns=("d",)),
                         {"block_rows": 2, "max_clusters": 2})
    assert capped.n_blocks == 6 + 1
    assert blocks(capped) == {2: 0, 5: 0, 7: 1, 9: 1, 11: 2, 1: 3, 4: 3, 12: 4, 3: 4, 6: 5, 8: 5, 10: 6}


@pytest.mark.slow
def test_spark_null_dates_are_the_first_cluster_and_day_clusters_of_a_timestamp(spark):
    from layout_core.spark.assign import with_plan_blocks

    table = TableSchema("s", (("k", "bigint"), ("t", "timestamp")), ("k",))
    rows = [(1, "2020-05-02 23:00:00"), (2, None), (3, "2020-05-01 08:00:00"), (4, "2020-05-02 01:00:00"),
            (5, "2020-05-01 22:00:00"), (6, None), (7, "2020-05-01 09:00:00")]
    df = spark.createDataFrame(rows, "k bigint, t string").selectExpr("k", "cast(t as timestamp) as t")
    plan = plan_layout("tuned", table, _rows(7), [], PlanWorkload(),
                       {"block_rows": 2, "cluster_column": "t", "cluster_granularity": "day"})
    got = {r["k"]: r["_block"] for r in with_plan_blocks(df, plan).collect()}
    # NULL: keys 2 6 | May 1: keys 3 5 | 7 | May 2: keys 1 4
    assert got == {2: 0, 6: 0, 3: 1, 5: 1, 7: 2, 1: 3, 4: 3}
