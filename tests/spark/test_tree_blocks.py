"""A tree plan in Spark: rows of a leaf become blocks that are ranges of the sort column."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from layout_core.optimizers.plan import LayoutPlan, TreeBlocks

pytestmark = pytest.mark.slow


def test_leaf_rows_become_sorted_equal_blocks_and_a_retry_gives_the_same_blocks(spark):
    from layout_core.spark.assign import with_plan_blocks

    # 100 rows: keys 0 and 2 have bit '1' (leaf 0: 70 rows, 3 blocks), key 1 bit '0' (leaf 1: 30 rows, 1 block).
    # x counts down so that the block order must come from sorting, not from the input order.
    rows = [(i % 3 if i < 90 else 0, 100 - i, None if i % 17 == 0 else f"s{i}") for i in range(100)]
    df = spark.createDataFrame(rows, "k int, x int, s string") \
        .withColumn("_vec", F.when(F.col("k") == 1, "0").otherwise("1"))
    tree = (0, 100, (0, 70), (1, 30))  # cut 0: bit 1 goes left to leaf 0
    plan = LayoutPlan("qdtree", {}, "t", "-", ("k", "x", "s"), ("k <> 1",),
                      TreeBlocks(tree, (0, 3), (3, 1), ("x",)), (23.3, 23.3, 23.3, 30.0), 100)

    def blocks():
        return sorted((r["_block"], r["k"], r["x"]) for r in with_plan_blocks(df, plan).collect())

    got = blocks()
    assert len(got) == 100 and sorted(x for _, _, x in got) == list(range(1, 101))  # every row once
    by_block: dict[int, list[int]] = {}
    for block, k, x in got:
        by_block.setdefault(block, []).append(x)
        assert (block == 3) == (k == 1)  # leaf 1 rows go only to its block
    assert sorted(by_block) == [0, 1, 2, 3]
    assert sorted(len(v) for b, v in by_block.items() if b < 3) == [23, 23, 24]
    # inside leaf 0, blocks are disjoint ranges of x, in block order
    assert max(by_block[0]) < min(by_block[1]) and max(by_block[1]) < min(by_block[2])
    assert blocks() == got
    # the plan survives its JSON form
    assert LayoutPlan.from_json(plan.to_json()) == plan


def test_a_k_tuple_the_plan_never_saw_goes_to_the_block_it_adds_the_fewest_reads_to(spark):
    from layout_core.optimizers.plan import TupleBlocks
    from layout_core.spark.assign import with_plan_blocks

    # Two trees: tree 0 cuts x < 50 (cut 0), tree 1 cuts y < 50 (cut 1); bit 1 goes left to leaf 0.
    # Queries q0 x < 40, q1 x > 60, q2 y < 40, q3 y > 60 (weight 1 each) admit the leaves
    #   tree 0: leaf 0 {q0, q2, q3}, leaf 1 {q1, q2, q3}; tree 1: leaf 0 {q0, q1, q2}, leaf 1 {q0, q1, q3}
    # (hex of the packed bits q0..q3: 1011 -> b0, 0111 -> 70, 1110 -> e0, 1101 -> d0).
    # The plan's cells: (0,0) -> block 0 (45 rows, read by q0 q2), (1,1) -> block 1 (45 rows,
    # q1 q3), (0,1) -> block 2 (10 rows, q0 q3). The data also has 5 rows of (1,0) (x >= 50,
    # y < 50), read by {q1, q2}. Rows read added by putting them in
    #   block 0: 45 * |{q1}| + 5 * |{q0}| = 50;  block 1: 45 * |{q2}| + 5 * |{q3}| = 50;
    #   block 2: 10 * |{q1, q2}| + 5 * |{q0, q3}| = 30   -> block 2
    # (tree 0's fallback for leaf 1 would have been block 1).
    vec_of = {(0, 0): "11", (1, 1): "00", (0, 1): "10", (1, 0): "01"}
    counts = {(0, 0): 45, (1, 1): 45, (0, 1): 10, (1, 0): 5}
    cell_of_row = [cell for cell, n in counts.items() for _ in range(n)]
    df = spark.createDataFrame([(i, vec_of[cell], i % 7) for i, cell in enumerate(cell_of_row)],
                               "id int, _vec string, s int")
    rule = TupleBlocks(trees=((0, 105, (0, 55), (1, 50)), (1, 105, (0, 50), (1, 55))),
                       cells=((0, 0), (0, 1), (1, 1)), cell_first_block=(0, 2, 1), cell_n_blocks=(1, 1, 1),
                       fallback_block=(0, 1), sort_columns=("s",),
                       routing_trees=((0, 105, (0, 55), (1, 50)), (1, 105, (0, 50), (1, 55))),
                       leaf_reads=(("b0", "70"), ("e0", "d0")), query_weights=(1.0, 1.0, 1.0, 1.0))
    plan = LayoutPlan("pando", {}, "t", "-", ("id", "s"), ("x < 50", "y < 50"), rule, (45.0, 45.0, 10.0), 105)
    got = {(r["_vec"], r["_block"]) for r in with_plan_blocks(df, plan).collect()}
    assert got == {("11", 0), ("00", 1), ("10", 2), ("01", 2)}
    assert with_plan_blocks(df, plan).count() == 105
    assert LayoutPlan.from_json(plan.to_json()) == plan
