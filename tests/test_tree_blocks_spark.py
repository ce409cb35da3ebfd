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
