"""Apply a `LayoutPlan` in Spark: the 0-based block of every row, as column `_block`.

The one place a plan's block rule becomes DataFrame operations, used by the
nightly write_blocks step and by the benchmarks alike. Every rule breaks ties
by a fixed order (a 64-bit hash of the row, then its columns), so a retry or
another code path puts every row in the same block.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ..optimizers.plan import CurveBlocks, LayoutPlan, PieceBlocks, SortBlocks, TreeBlocks
from .blocks import VECTOR_COLUMN, with_pieces

BLOCK_INDEX = "_block"


def tie_order(columns) -> list[Column]:
    return [F.xxhash64(*columns)] + [F.col(c) for c in columns]


def leaf_column(root, vector: str = VECTOR_COLUMN) -> Column:
    """The leaf each row reaches: the tree as nested CASE WHEN over the row's bit
    string (character j = cut j; '1' goes left). Routes every row, also one
    whose vector the sample the tree was built on never saw."""

    def build(node):
        if node.is_leaf:
            return F.lit(node.leaf_id)
        bit = F.substring(F.col(vector), node.cut + 1, 1) == F.lit("1")
        return F.when(bit, build(node.left)).otherwise(build(node.right))

    return build(root).cast("int")


def with_plan_blocks(df: DataFrame, plan: LayoutPlan) -> DataFrame:
    """`df` (the table's columns, the bit string `_vec` for cut-based rules) plus `_block`."""
    rule = plan.assignment
    order = tie_order(list(plan.columns))
    if isinstance(rule, SortBlocks):
        rank = F.row_number().over(Window.orderBy(*[F.col(c) for c in rule.columns], *order)) - 1
        return df.withColumn(BLOCK_INDEX, F.floor(rank / F.lit(rule.block_rows)).cast("int"))
    if isinstance(rule, CurveBlocks):
        from .curves import curve_block_index, with_curve_key

        keyed = with_curve_key(df, list(rule.columns), rule.curve)
        blocked = curve_block_index(keyed, rule.block_rows, tie_columns=list(plan.columns))
        return blocked.withColumn(BLOCK_INDEX, F.col(BLOCK_INDEX).cast("int")).drop("_curve")
    if isinstance(rule, TreeBlocks):
        return _tree_blocks(df, rule, order)
    if isinstance(rule, PieceBlocks):
        return with_pieces(df, list(rule.pieces), f"{VECTOR_COLUMN} string", order)
    raise TypeError(f"no Spark rule for {type(rule).__name__}")


def _tree_blocks(df: DataFrame, rule: TreeBlocks, order: list[Column]) -> DataFrame:
    """Rows of leaf l, ranked by the sort columns, cut into leaf_n_blocks[l] ranges of about equal size."""
    spark = df.sparkSession
    leaves = spark.createDataFrame([(leaf, first, n) for leaf, (first, n)
                                    in enumerate(zip(rule.leaf_first_block, rule.leaf_n_blocks))],
                                   "_leaf int, _first long, _n long")
    in_leaf = Window.partitionBy("_leaf")
    ranked = in_leaf.orderBy(*[F.col(c).asc_nulls_first() for c in rule.sort_columns], *order)
    return (df.withColumn("_leaf", leaf_column(rule.root()))
              .join(F.broadcast(leaves), on="_leaf", how="inner")
              .withColumn("_rn", F.row_number().over(ranked) - 1)
              .withColumn("_leaf_rows", F.count(F.lit(1)).over(in_leaf))
              .withColumn(BLOCK_INDEX, (F.col("_first") + F.floor(F.col("_rn") * F.col("_n") / F.col("_leaf_rows")))
                          .cast("int"))
              .drop("_leaf", "_first", "_n", "_rn", "_leaf_rows"))
