"""Pando's cells counted on every row of a partition (Pando §6.2 on the full data).

The optimizer grows Pando's trees and merges their cells on a sample; the
blocks are then merged again here on what one aggregation over all rows
gives per k-tuple: its rows, its cut bits (some row / every row satisfies
each cut) and the span of the sort column. No k-tuple of the data is then
unseen, and the merges are scored with the cut bits the router keeps.
"""

from __future__ import annotations

import logging
import time

import numpy as np
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from layout_core.algorithms.pando import Cells
from layout_core.algorithms.types import mask_bits
from layout_core.base.names import VECTOR_COLUMN
from layout_core.base.schema import TableSchema
from layout_core.optimizers.pando import exact_plan, merges_on_every_row
from layout_core.optimizers.plan import LayoutPlan
from layout_core.predicates import identifier
from layout_core.spark.assign import leaf_column
from layout_core.spark.blocks import WORD_BITS, order_code, words_mask

log = logging.getLogger("layout.cells")


def cell_statistics(df: DataFrame, roots, n_cuts: int, value_column: str | None = None,
                    kind: str = "int") -> Cells:
    """Every k-tuple of `df` (rows with the bit string `_vec`) through the
    trees `roots`: rows, cut bits and the span of `value_column` (its
    `order_code` for `kind`), in lexicographic order of the tuples."""
    names = [f"_leaf{t}" for t in range(len(roots))]
    words = vector_words(n_cuts)
    aggregates = [F.count(F.lit(1)).alias("_rows")]
    for w, word in enumerate(words):
        aggregates += [F.bit_or(word).alias(f"_any{w}"), F.bit_and(word).alias(f"_all{w}")]
    if value_column:
        code = F.expr(order_code(identifier(value_column), kind))
        aggregates += [F.min(code).alias("_lo"), F.max(code).alias("_hi")]
    leafed = df.select("*", *[leaf_column(root).alias(name) for root, name in zip(roots, names)])
    rows = sorted(leafed.groupBy(*names).agg(*aggregates).collect(), key=lambda r: tuple(r[n] for n in names))
    tuples = np.array([[int(r[n]) for n in names] for r in rows], dtype=np.int64).reshape(-1, len(roots))
    any_cut, all_cut = (np.array([mask_bits(words_mask(r[f"_{which}{w}"] for w in range(len(words))), n_cuts)
                                  for r in rows], dtype=bool).reshape(-1, n_cuts) for which in ("any", "all"))
    span = None
    if value_column:
        span = np.array([[np.nan if r["_lo"] is None else r["_lo"], np.nan if r["_hi"] is None else r["_hi"]]
                         for r in rows], dtype=np.float64).reshape(-1, 2)
    return Cells(tuples, np.array([int(r["_rows"]) for r in rows], dtype=np.int64), any_cut, all_cut, span)


def vector_words(n_cuts: int) -> list[Column]:
    """The bit string `_vec` as longs of WORD_BITS cuts each (bit j of word w:
    cut WORD_BITS·w + j), as `spark.blocks.cut_words` packs the cut flags:
    each piece of the string reversed and read in base 2, one expression
    per word instead of one per cut (lineitem at SF 0.1 with 165 cuts: 17.6 s
    to count its cells with one per cut)."""
    return [F.conv(F.reverse(F.substring(F.col(VECTOR_COLUMN), start + 1, WORD_BITS)), 2, 10).cast("long")
            for start in range(0, n_cuts, WORD_BITS)]


def with_exact_cells(df: DataFrame, plan: LayoutPlan, table: TableSchema) -> LayoutPlan:
    """A Pando plan with its cells merged again on every row of `df` (the
    table's rows with `_vec`): `optimizers.pando.exact_plan`. Other plans,
    and Pando plans already merged so or without their queries' cut
    relations, come back as they are."""
    if not merges_on_every_row(plan):
        return plan
    rule = plan.assignment
    column = rule.sort_columns[0] if rule.sort_columns else None
    kind = table.column(column).kind if column else "other"
    started = time.monotonic()
    cells = cell_statistics(df, rule.roots(), plan.n_cuts, column, kind)
    counted = time.monotonic()
    exact = exact_plan(plan, cells)
    log.info("pando %s: %d k-tuples counted on every row in %.1f s, merged in %.1f s", plan.table,
             cells.tuples.shape[0], counted - started, time.monotonic() - counted)
    return exact
