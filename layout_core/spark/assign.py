"""Apply a `LayoutPlan` in Spark: the 0-based block of every row, as column `_block`.

The one place a plan's block rule becomes DataFrame operations, used by the
nightly write_blocks step and by the benchmarks alike. Every rule breaks ties
by a fixed order (a 64-bit hash of the row, then its columns), so a retry or
another code path puts every row in the same block.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from layout_core.optimizers.pando import EVERY_ROW, place_unseen_cells
from layout_core.optimizers.plan import (
    ClusterBlocks, CurveBlocks, LayoutPlan, PieceBlocks, SortBlocks, TreeBlocks, TupleBlocks,
)
from layout_core.base.names import BLOCK_INDEX_COLUMN, VECTOR_COLUMN
from layout_core.predicates import identifier
from layout_core.spark.blocks import WORD_BITS, cut_words, with_pieces, word_bit, words_mask
from layout_core.spark.curves import curve_block_index, with_curve_key


log = logging.getLogger("layout.assign")


def tie_order(columns) -> list[Column]:
    return [F.xxhash64(*columns)] + [F.col(c) for c in columns]


def leaf_column(root, vector: str = VECTOR_COLUMN, bit=None) -> Column:
    """The leaf each row reaches: the tree as nested CASE WHEN over the row's bits
    ('1' goes left): `bit(j)` is the row's bit of cut j as a boolean column (by
    default character j of the bit string `vector`). Routes every row, also one
    whose vector the sample the tree was built on never saw."""
    if bit is None:
        def bit(j: int) -> Column:
            return F.expr(f"substring({identifier(vector)}, {j + 1}, 1) = '1'")

    def build(node):
        if node.is_leaf:
            return F.lit(node.leaf_id)
        return F.when(bit(node.cut), build(node.left)).otherwise(build(node.right))

    return build(root).cast("int")


def with_plan_blocks(df: DataFrame, plan: LayoutPlan) -> DataFrame:
    """`df` (the table's columns, the bit string `_vec` for cut-based rules) plus `_block`."""
    rule = plan.assignment
    order = tie_order(list(plan.columns))
    if isinstance(rule, SortBlocks):
        rank = F.row_number().over(Window.orderBy(*[F.col(c) for c in rule.columns], *order)) - 1
        return df.withColumn(BLOCK_INDEX_COLUMN, F.floor(rank / F.lit(rule.block_rows)).cast("int"))
    if isinstance(rule, ClusterBlocks):
        return _cluster_blocks(df, rule, order)
    if isinstance(rule, CurveBlocks):
        keyed = with_curve_key(df, list(rule.columns), rule.curve)
        blocked = curve_block_index(keyed, rule.block_rows, tie_columns=list(plan.columns))
        return blocked.withColumn(BLOCK_INDEX_COLUMN, F.col(BLOCK_INDEX_COLUMN).cast("int")).drop("_curve")
    if isinstance(rule, TreeBlocks):
        return _tree_blocks(df, rule, order)
    if isinstance(rule, TupleBlocks):
        return _tuple_blocks(df, rule, plan.expected_block_rows, order,
                             every_row=plan.choices.get("cells_counted") == EVERY_ROW)
    if isinstance(rule, PieceBlocks):
        return with_pieces(df, list(rule.pieces), f"{VECTOR_COLUMN} string", order)
    raise TypeError(f"no Spark rule for {type(rule).__name__}")


def _cluster_blocks(df: DataFrame, rule: ClusterBlocks, order: list[Column]) -> DataFrame:
    """Clusters (the column truncated to the granularity, NULL first) in order,
    the first max_clusters - 1 each a group of their own and the rest one last
    group; a group's rows ranked by (cluster, columns, tie order) and cut every
    block_rows rows, its blocks numbered after the previous groups' blocks.
    The per-cluster counts and block offsets are computed on the (small) table
    of distinct clusters, then joined back to the rows."""
    truncated = F.date_trunc(rule.granularity, F.col(rule.cluster_column))
    keyed = df.withColumn("_cluster", truncated)
    by_cluster = Window.orderBy(F.col("_cluster").asc_nulls_first())
    before = Window.orderBy("_group").rowsBetween(Window.unboundedPreceding, -1)
    clusters = (keyed.groupBy("_cluster").agg(F.count(F.lit(1)).alias("_cluster_rows"))
                .withColumn("_group", F.least(F.row_number().over(by_cluster) - 1, F.lit(rule.max_clusters - 1))))
    groups = (clusters.groupBy("_group").agg(F.sum("_cluster_rows").alias("_group_rows"))
              .withColumn("_first", F.coalesce(
                  F.sum(F.ceil(F.col("_group_rows") / F.lit(rule.block_rows))).over(before), F.lit(0))))
    mapping = (clusters.join(groups, on="_group").select(F.col("_cluster").alias("_cluster_key"), "_group", "_first"))
    ranked = Window.partitionBy("_group").orderBy(
        F.col("_cluster").asc_nulls_first(), *[F.col(c).asc_nulls_first() for c in rule.columns], *order)
    return (keyed.join(F.broadcast(mapping), keyed["_cluster"].eqNullSafe(mapping["_cluster_key"]), "inner")
                 .withColumn("_rn", F.row_number().over(ranked) - 1)
                 .withColumn(BLOCK_INDEX_COLUMN, (F.col("_first") + F.floor(F.col("_rn") / F.lit(rule.block_rows)))
                             .cast("int"))
                 .drop("_cluster", "_cluster_key", "_group", "_first", "_rn"))


def _tree_blocks(df: DataFrame, rule: TreeBlocks, order: list[Column]) -> DataFrame:
    """Rows of leaf l cut into leaf_n_blocks[l] ranges of the sort columns."""
    groups = [(leaf, first, n) for leaf, (first, n) in enumerate(zip(rule.leaf_first_block, rule.leaf_n_blocks))]
    return group_ranges(df.withColumn("_group", leaf_column(rule.root())), groups, rule.sort_columns, order)


def _tuple_blocks(df: DataFrame, rule: TupleBlocks, expected_block_rows, order: list[Column],
                  every_row: bool = False) -> DataFrame:
    """Every row's leaf in each of the k trees is its cell; cell c is cut into
    cell_n_blocks[c] ranges of the sort columns. For a plan whose cells were
    counted on a sample, the k-tuples of the data that are no cell are
    counted first (one aggregation over the leaf columns) and each goes
    whole to the block `place_unseen_cells` picks for it; a plan merged on
    `every_row` (`spark.cells`) has them all."""
    spark = df.sparkSession
    leaf_names = [f"_leaf{t}" for t in range(rule.k)]
    leafed = df.withColumns({name: leaf_column(root) for name, root in zip(leaf_names, rule.roots())})
    known = set(rule.cells)
    counted = [] if every_row else [(tuple(int(r[n]) for n in leaf_names), int(r["count"]))
                                    for r in leafed.groupBy(*leaf_names).count().collect()]
    unseen = sorted((cell, n) for cell, n in counted if cell not in known)
    placed = place_unseen_cells(rule, expected_block_rows, [c for c, _ in unseen], [n for _, n in unseen]).tolist()
    if unseen:
        log.info("pando: %d rows in %d k-tuples the plan's sample did not hold (%d cells) placed by the "
                 "merge cost", sum(n for _, n in unseen), len(unseen), len(rule.cells))
    cells = list(rule.cells) + [c for c, _ in unseen]
    table = spark.createDataFrame([(c, *cell) for c, cell in enumerate(cells)],
                                  ", ".join(["_group int"] + [f"{n} int" for n in leaf_names]))
    groups = [(c, first, n) for c, (first, n) in enumerate(zip(rule.cell_first_block, rule.cell_n_blocks))]
    groups += [(len(rule.cells) + u, block, 1) for u, block in enumerate(placed)]
    # Every k-tuple of the data was counted above; the tree-0 fallback only keeps a
    # row that could still miss (data changed under the frame) from being dropped.
    groups += [(len(cells) + leaf, block, 1) for leaf, block in enumerate(rule.fallback_block)]
    with_cells = (leafed.join(F.broadcast(table), on=leaf_names, how="left")
                        .withColumn("_group", F.coalesce(F.col("_group"), F.lit(len(cells)) + F.col("_leaf0")))
                        .drop(*leaf_names))
    return group_ranges(with_cells, groups, rule.sort_columns, order)


def group_ranges(df: DataFrame, groups: list[tuple[int, int, int]], sort_columns, order: list[Column]) -> DataFrame:
    """`df` has an int column `_group`; `groups` are (group, first block, n blocks):
    the rows of a group, ranked by the sort columns, are cut into n ranges of
    about equal size, blocks first .. first + n - 1."""
    spark = df.sparkSession
    table = spark.createDataFrame(groups, "_group int, _first long, _n long")
    in_group = Window.partitionBy("_group")
    ranked = in_group.orderBy(*[F.col(c).asc_nulls_first() for c in sort_columns], *order)
    return (df.join(F.broadcast(table), on="_group", how="inner")
              .withColumn("_rn", F.row_number().over(ranked) - 1)
              .withColumn("_group_rows", F.count(F.lit(1)).over(in_group))
              .withColumn(BLOCK_INDEX_COLUMN, (F.col("_first") + F.floor(F.col("_rn") * F.col("_n") / F.col("_group_rows")))
                          .cast("int"))
              .drop("_group", "_first", "_n", "_rn", "_group_rows"))


@dataclass(frozen=True)
class BlockBits:
    """What a block's rows say about the cuts and trees: the OR and the AND of their bits
    (bit j = cut j); its lineage, per tree the sorted leaf ids its rows reach
    (`BlockRecord.leaves`), and for two or more trees the distinct k-tuples of those leaf
    ids (`BlockRecord.cells`; () for fewer trees, where the leaf sets say as much). The
    lineage is taken from the rows themselves: the router skips a block only when no
    admitted leaf (or cell) holds its rows, so it must see where every row really went
    (rows of k-tuples the plan's sample never saw included)."""
    union_bits: int
    all_bits: int
    leaves: tuple[tuple[int, ...], ...] = ()
    cells: tuple[tuple[int, ...], ...] = ()


def block_bits(flagged: DataFrame, n_cuts: int, roots, block_column: str) -> dict[int, BlockBits]:
    """Per block its `BlockBits`, in one pass over `flagged`: the block column and the
    cut flag columns `_cut0..`. The flags are packed into words first (`cut_words`), so the
    aggregates and the trees' leaf tests read a few longs per row, not a bit string."""
    packed = cut_words(n_cuts)
    if not packed and not roots:
        return {}
    words = [f"_word{w}" for w in range(len(packed))]
    worded = flagged.select(block_column, *[w.alias(name) for w, name in zip(packed, words)])

    def bit(j: int) -> Column:
        return word_bit(words[j // WORD_BITS], j % WORD_BITS)

    # the words in a select of their own: each leaf test reads one, and Spark keeps a
    # column read many times computed once instead of inlining it where it is read
    leafed = worded.select(block_column, *words, *_leaf_columns(roots, bit))
    aggregates = [a for name in words for a in (F.bit_or(name).alias(f"_any{name}"),
                                                 F.bit_and(name).alias(f"_all{name}"))]
    out = {}
    for row in leafed.groupBy(block_column).agg(*aggregates, *_lineage_aggregates(roots)).collect():
        leaves, cells = _lineage_of(row, len(roots))
        out[int(row[block_column])] = BlockBits(words_mask(row[f"_any{name}"] for name in words),
                                                words_mask(row[f"_all{name}"] for name in words), leaves, cells)
    return out


def _leaf_columns(roots, bit=None) -> list[Column]:
    return [leaf_column(root, bit=bit).alias(f"_leaf{t}") for t, root in enumerate(roots)]


def _lineage_aggregates(roots) -> list[Column]:
    names = [f"_leaf{t}" for t in range(len(roots))]
    aggregates = [F.array_sort(F.collect_set(name)).alias(f"_leaves{t}") for t, name in enumerate(names)]
    if len(roots) >= 2:
        aggregates.append(F.collect_set(F.array(*names)).alias("_cells"))
    return aggregates


def _lineage_of(row, trees: int) -> tuple[tuple, tuple]:
    """A block's leaves per tree and its cells (() for fewer than two trees) from its aggregated row."""
    leaves = tuple(tuple(int(x) for x in row[f"_leaves{t}"]) for t in range(trees))
    cells = tuple(tuple(int(x) for x in cell) for cell in row["_cells"]) if trees >= 2 else ()
    return leaves, cells
