"""with_tree_blocks: rows of a tree leaf become blocks that are ranges of the sort column."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

pytestmark = pytest.mark.slow


def test_leaf_rows_become_sorted_equal_blocks_and_a_retry_gives_the_same_blocks(spark):
    from layout_core.spark.blocks import with_tree_blocks

    # 100 rows: key 0 and key 2 share leaf 0 (70 rows, 3 blocks), key 1 is leaf 1 (30 rows, 1 block).
    # x counts down so that the block order must come from sorting, not from the input order.
    rows = [(i % 3 if i < 90 else 0, 100 - i, None if i % 17 == 0 else f"s{i}") for i in range(100)]
    df = spark.createDataFrame(rows, "k int, x int, s string")
    order = [F.xxhash64("k", "x", "s"), F.col("s")]

    def blocks():
        out = with_tree_blocks(df, [(0, 0), (1, 1), (2, 0)], "k int", first_block=[10, 13], n_blocks=[3, 1],
                               sort_columns=["x"], order=order)
        return sorted((r["_block"], r["k"], r["x"]) for r in out.collect())

    got = blocks()
    assert len(got) == 100 and sorted(x for _, _, x in got) == list(range(1, 101))  # every row once
    by_block: dict[int, list[int]] = {}
    for block, k, x in got:
        by_block.setdefault(block, []).append(x)
        assert (block == 13) == (k == 1)  # leaf 1 rows go only to its block
    assert sorted(by_block) == [10, 11, 12, 13]
    assert sorted(len(v) for b, v in by_block.items() if b < 13) == [23, 23, 24]
    # inside leaf 0, blocks are disjoint ranges of x, in block order
    assert max(by_block[10]) < min(by_block[11]) and max(by_block[11]) < min(by_block[12])
    assert blocks() == got

