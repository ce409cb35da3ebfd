"""A block's cut bits and lineage from its rows, and join-induced flags packed into words
for their joins: checked against answers worked out by hand or with pandas."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from layout_core.algorithms.qdtree import Node
from layout_core.predicates import Column, Compare, Hop, JoinInduced

pytestmark = pytest.mark.slow

C_O = Hop("customer", "c_custkey", "orders", "o_custkey")


def _leaf(leaf_id: int) -> Node:
    return Node.leaf(leaf_id, [leaf_id], 1)


def test_union_and_all_bits_cross_words_and_leaves_follow_bits_past_the_first_word(spark):
    from layout_core.spark.assign import BlockBits, block_bits

    n = 70  # two words of 62 flags
    # block 1: two rows; row a has cuts 0 and 65, row b cuts 0 and 3. block 2: one row with no cut.
    # block 3: one row whose flag 65 is NULL (counts as FALSE).
    flags_a = {0, 65}
    flags_b = {0, 3}
    rows = [(1, [j in flags_a for j in range(n)]), (1, [j in flags_b for j in range(n)]),
            (2, [False] * n), (3, [j == 0 for j in range(n)])]
    df = spark.createDataFrame([(b, *fl) for b, fl in rows],
                               "block_id int, " + ", ".join(f"_cut{j} boolean" for j in range(n)))
    df = df.withColumn("_cut65", F.when(F.col("block_id") == 3, F.lit(None)).otherwise(F.col("_cut65")))
    # tree 0 splits on cut 65 (left: leaf 0) then cut 3; tree 1 on cut 0 only
    tree0 = Node.split(65, _leaf(0), Node.split(3, _leaf(1), _leaf(2)))
    tree1 = Node.split(0, _leaf(0), _leaf(1))

    got = block_bits(df, n, [tree0, tree1], "block_id")

    cells = {b: sorted(bits.cells) for b, bits in got.items()}  # a set per block, in no order
    assert cells == {1: [(0, 0), (1, 0)], 2: [(2, 1)], 3: [(2, 0)]}
    assert {b: (bits.union_bits, bits.all_bits, bits.leaves) for b, bits in got.items()} == {
        1: ((1 << 0) | (1 << 3) | (1 << 65), 1 << 0, ((0, 1), (0,))),
        2: (0, 0, ((2,), (1,))),
        3: (1 << 0, 1 << 0, ((2,), (0,))),
    }


def test_block_bits_without_trees_or_cuts(spark):
    from layout_core.spark.assign import BlockBits, block_bits

    df = spark.createDataFrame([(1, True), (1, False), (2, True)], "block_id int, _cut0 boolean")
    assert block_bits(df, 1, [], "block_id") == {1: BlockBits(1, 0), 2: BlockBits(1, 1)}
    assert block_bits(df.select("block_id"), 0, [], "block_id") == {}


def test_seventy_cuts_through_one_hop_equal_pandas(spark, tpch_views):
    """More join-induced cuts through one hop than a word holds: each flag equals the
    customers' own test, joined in pandas."""
    from layout_core.spark.induced import with_induced_flags

    tables = {t: spark.table(t) for t in tpch_views}
    thresholds = [-900 + 150 * i for i in range(70)]
    cuts = [JoinInduced((C_O,), Compare(Column("c_acctbal", "decimal"), ">", t)) for t in thresholds]
    flags = with_induced_flags(tables["orders"].select("o_orderkey", "o_custkey"), cuts, tables)
    got = flags.frame.toPandas().set_index("o_orderkey").sort_index()

    customers = tables["customer"].select("c_custkey", "c_acctbal").toPandas()
    orders = tables["orders"].select("o_orderkey", "o_custkey").toPandas().set_index("o_orderkey").sort_index()
    assert len(got) == len(orders)
    for i, t in enumerate(thresholds):
        rich = set(customers.loc[customers["c_acctbal"].astype(float) > t, "c_custkey"])
        expected = orders["o_custkey"].isin(rich)
        assert (got[flags.columns[i]] == expected).all(), t
    assert 0 < got[flags.columns[69]].sum() < got[flags.columns[0]].sum() < len(got)
