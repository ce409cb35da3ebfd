"""pando: k partitioning trees per table grown together, blocks shared by their cells (Pando §6)."""

from __future__ import annotations

import logging
import math
from dataclasses import replace

import numpy as np

from layout_core.algorithms.pando import (
    FIRST_TREES, Cells, admitted, admitted_tuples, cell_block_pairs, choose_k, fallback_blocks, grow_layout,
    merge_cells, mto_tree, place_cells, reads_per_block, rows_read_share, truncate,
)
from layout_core.algorithms.qdtree import leaves, tree_to_json
from layout_core.algorithms.types import VectorCounts, Workload
from layout_core.optimizers.base import (
    BLOCK_ROWS, EXCLUDE_COLUMNS, LEAF_ORDER, MAX_CUTS, SAMPLE_ROWS, SORT_COLUMN, PlanError, Setting,
    show_progress, sort_columns,
)
from layout_core.optimizers.plan import LayoutPlan, TupleBlocks, as_tuples, new_plan, packed_bits
from layout_core.optimizers.qdtree import TreeOptimizer
from layout_core.predicates import Compare

log = logging.getLogger("layout.pando")

TREES = Setting("trees", "int_or_auto", 3,
                "partitioning trees per table, 1..8 (1: mto's layout); auto: the smallest k of 1..4 whose "
                "estimated rows read are within 2% of the best k's, on the sample, each k fitted to one half "
                "of the training queries and measured on the other (Pando §6.3); larger k are not tried once "
                "a k reads over 2% more than the best so far")
TUPLES_PER_BLOCK = Setting("tuples_per_block", "int", 16,
                           "most k-tuples (cells) per block the top-down phase may make (the bound scales with "
                           "the table's blocks); its leaf threshold rises until it holds")
MAX_TUPLES = Setting("max_tuples", "int", 10_000,
                     "most k-tuples (cells) in all, whatever the blocks: the bottom-up phase is quadratic in them")
FIRST_TREE = Setting("first_tree", "choice", "grown",
                     "tree 0: grown (the k trees grow together, Pando §6.1) or mto (mto's tree; the other trees "
                     "grow around it and blocks stay inside its leaves but for outlier blocks, Pando Fig. 2c)",
                     choices=FIRST_TREES)
MAX_TREES = 8  # each tree multiplies the cells and the routing work; the paper's gains flatten by k = 4


class Pando(TreeOptimizer):
    """k qd-trees over mto's candidate cuts, grown together so each split helps
    the queries the other trees do not already serve (§6.1); every row's k
    leaf ids are its cell, cells merged bottom-up into blocks of >= block_rows
    rows by the rows the workload reads (§6.2), trees truncated where a cut no
    longer separates block sets. Built on the same sample as mto, with leaf
    thresholds and block sizes in sampled rows (block_rows / scale). With
    k = 1 the plan is mto's (Pando with one tree is MTO)."""

    name = "pando"
    help = ("k qd-trees over mto's cuts grown together (Pando §6); a query reads the blocks every tree "
            "admits, also ruled out by cut bits and zone maps")
    settings = (BLOCK_ROWS, SORT_COLUMN, SAMPLE_ROWS, MAX_CUTS, EXCLUDE_COLUMNS, TREES, FIRST_TREE, TUPLES_PER_BLOCK,
                MAX_TUPLES, LEAF_ORDER)
    router_keeps = "cut bits and the trees' leaf blocks"
    join_induced = True

    def resolve(self, raw=None):
        resolved = super().resolve(raw)
        k = resolved["trees"]
        if k != "auto" and not 1 <= k <= MAX_TREES:
            raise PlanError(f"pando takes 1 to {MAX_TREES} trees (or auto), not {k}")
        for name in ("tuples_per_block", "max_tuples"):
            if resolved[name] < 1:
                raise PlanError(f"{name} must be positive, not {resolved[name]}")
        return resolved

    def fit(self, inputs, settings):
        m, sample = len(inputs.cuts), inputs.vectors
        if sample.rows == 0:
            return self.tree_plan(inputs, settings, {"trees": 1})
        if m == 0 or inputs.workload.queries == 0:
            log.warning("pando %s: the workload has no usable predicate on this table: one tree with one "
                        "leaf, the rows in sort order (the sortkey layout)", inputs.table.name)
            return self.tree_plan(inputs, settings, {"trees": 1})
        vc = VectorCounts(sample.vectors(m), sample.counts, np.ones(m))
        workload = inputs.workload.matrices(m)
        order_by = sort_columns(inputs.table, inputs.workload, settings["sort_column"], settings["leaf_order"])
        ranks = sort_ranks(inputs.cuts, order_by[0] if order_by else "", vc.vectors)
        block_rows = max(1, math.ceil(settings["block_rows"] / sample.scale))  # in sampled rows
        bound = tuple_bound(sample.sampled_rows, block_rows, settings["tuples_per_block"], settings["max_tuples"])
        choices: dict = {}
        k, layout = settings["trees"], None
        if k == "auto":
            choices["k_tuple_bound"] = bound
            half_cuts = np.array(inputs.workload.held_out_cuts, dtype=bool).reshape(-1, m)
            k, choices["trees_evaluated"], choices["trees_evaluated_on"], layout = choose_k(
                vc, workload, block_rows, bound, progress=show_progress(),
                half_cuts=half_cuts if half_cuts.shape[0] == 2 else None, first_tree=settings["first_tree"],
                order=ranks)
            log.info("pando %s: trees=auto chose k = %d (estimated share of rows read by %s, per k: %s)",
                     inputs.table.name, k, choices["trees_evaluated_on"],
                     ", ".join(f"{kk}: " + ("skipped (over the k-tuple bound with one-block leaves)"
                                            if share is None else f"{share:.4f}")
                               for kk, share in choices["trees_evaluated"]))
        if k == 1:
            return self.tree_plan(inputs, settings, {"trees": 1, **choices})
        if layout is None:
            tree0 = mto_tree(vc, workload, block_rows) if settings["first_tree"] == "mto" else None
            layout = grow_layout(vc, workload, k, block_rows, bound, progress=show_progress(), first_tree=tree0)
        grown, blocks, truncated = layout
        share = rows_read_share(vc, workload, grown.trees, blocks, ranks)
        choices.update({"trees": k, "first_tree": settings["first_tree"], "k_tuple_bound": bound,
                        "threshold_sampled_rows": grown.threshold,
                        "threshold_blocks": round(grown.threshold / block_rows, 3), "k_tuples": grown.n_tuples,
                        "estimated_rows_read_share": round(share, 6)})
        if grown.threshold > block_rows:
            log.warning("pando %s: k = %d needs leaves of %.1f blocks to stay within %d k-tuples, where Pando's "
                        "top-down assumes at most one (trees=auto skips such a k)", inputs.table.name, k,
                        grown.threshold / block_rows, bound)
        log.info("pando %s: k = %d, threshold %d sampled rows, %d k-tuples, %d blocks, estimated share of "
                 "rows read %.4f", inputs.table.name, k, grown.threshold, grown.n_tuples, blocks.n_blocks, share)
        rule = tuple_blocks(layout, order_by, workload)
        return new_plan(self, inputs, settings, rule, (blocks.block_rows * sample.scale).tolist(), choices)


RANGE_OPS = {"<": False, "<=": False, ">": True, ">=": True}  # the flag a row above the literal has


def sort_ranks(cuts, column: str, vectors: np.ndarray) -> np.ndarray | None:
    """(n,) int64: for each vector, how many range cuts on `column` (column <op>
    literal) its rows lie above: rows of a lower rank come first in the
    column's order (`algorithms.pando.estimated_rows_read`). None when no cut
    is a range on the column."""
    above = [(j, RANGE_OPS[c.predicate.op]) for j, c in enumerate(cuts)
             if isinstance(c.predicate, Compare) and c.predicate.op in RANGE_OPS
             and c.predicate.column.name == column]
    if not above:
        return None
    idx = np.array([j for j, _ in above], dtype=np.int64)
    flag = np.array([f for _, f in above], dtype=bool)
    return (np.asarray(vectors, dtype=bool)[:, idx] == flag).sum(axis=1).astype(np.int64)


def tuple_bound(rows: int, block_rows: int, per_block: int, cap: int) -> int:
    """The most k-tuples the top-down phase may make: `per_block` per block of
    the table (rows / block_rows, rounded up), at most `cap`."""
    return max(1, min(cap, per_block * -(-rows // block_rows)))


def tuple_blocks(layout, order: tuple[str, ...], workload) -> TupleBlocks:
    grown, blocks, truncated = layout
    leaf_reads = tuple(tuple(packed_bits(adm[:, leaf]) for leaf in range(adm.shape[1]))
                       for adm in admitted(grown.trees, workload))
    return TupleBlocks(tuple(as_tuples(tree_to_json(r)) for r in grown.trees), sort_columns=order,
                       leaf_reads=leaf_reads, query_weights=tuple(float(x) for x in workload.weights),
                       query_implies=tuple(packed_bits(row) for row in workload.implies),
                       query_disjoint=tuple(packed_bits(row) for row in workload.disjoint),
                       **cell_map(grown.trees, blocks, truncated))


def cell_map(trees, blocks, truncated) -> dict:
    """The `TupleBlocks` fields that follow from the blocks made of the trees'
    cells: the cell -> block map, tree 0's fallback blocks, the truncated trees."""
    n_leaves_0 = sum(1 for _ in leaves(trees[0]))
    return {"cells": as_tuples(blocks.tuples.tolist()),
            "cell_first_block": tuple(blocks.tuple_first_block.tolist()),
            "cell_n_blocks": tuple(blocks.tuple_n_blocks.tolist()),
            "fallback_block": tuple(fallback_blocks(blocks, n_leaves_0).tolist()),
            "routing_trees": tuple(as_tuples(tree_to_json(r)) for r in truncated.trees)}


EVERY_ROW = "every row"  # choices["cells_counted"] of a plan whose cells were merged on the whole partition


def merges_on_every_row(plan: LayoutPlan) -> bool:
    """A Pando plan made on a sample, with what `exact_plan` needs (its
    training queries' cut relations; earlier versions' plans lack them)."""
    rule = plan.assignment
    return (isinstance(rule, TupleBlocks) and plan.choices.get("cells_counted") != EVERY_ROW
            and rule.query_cuts(plan.n_cuts) is not None)


def exact_plan(plan: LayoutPlan, cells: Cells) -> LayoutPlan:
    """Pando §6.2 again on `cells` counted on every row of the partition (the
    Spark side, `spark.cells`): the plan's trees and training queries, the
    exact rows of every k-tuple (none is unseen) with the cut bits and sort
    column span of its rows, so that merges are scored as the router will
    read the blocks and ties go to the narrowest blocks. The sample's
    blocks are replaced; so are the truncated trees and the fallback blocks
    that depend on them. A plan without its training queries' cut relations
    (an earlier version's) is returned unchanged."""
    if not merges_on_every_row(plan):
        return plan
    rule = plan.assignment
    workload = Workload(*rule.query_cuts(plan.n_cuts), np.array(rule.query_weights, dtype=np.float64))
    trees = rule.roots()
    blocks = merge_cells(cells, rule.admissions(), workload, int(plan.settings["block_rows"]),
                         progress=show_progress(), within_first_tree=plan.settings.get("first_tree") == "mto")
    exact = replace(rule, **cell_map(trees, blocks, truncate(trees, blocks)))
    choices = {**plan.choices, "cells_counted": EVERY_ROW, "k_tuples": int(blocks.tuples.shape[0]),
               "blocks_on_the_sample": plan.n_blocks}
    log.info("pando %s: cells merged again on all %d rows: %d k-tuples (%d on the sample), %d blocks (%d on "
             "the sample)", plan.table, int(cells.rows.sum()), blocks.tuples.shape[0], len(rule.cells),
             blocks.n_blocks, plan.n_blocks)
    return replace(plan, assignment=exact, expected_block_rows=tuple(float(r) for r in blocks.block_rows),
                   rows=int(cells.rows.sum()), choices=choices)


def place_unseen_cells(rule: TupleBlocks, expected_block_rows, tuples, rows) -> np.ndarray:
    """(U,) int64: the block of each k-tuple the plan holds no cell for (rows of
    the table outside the plan's sample), with `rows` rows each in the data:
    the block whose queries it adds the fewest rows read to
    (`algorithms.pando.place_cells`), or the fallback block of its tree-0 leaf
    for a plan without the leaves' queries."""
    tuples = np.asarray(tuples, dtype=np.int64).reshape(-1, rule.k)
    if not rule.leaf_reads:
        return np.asarray(rule.fallback_block, dtype=np.int64)[tuples[:, 0]]
    admissions = rule.admissions()
    cell, block = cell_block_pairs(rule.cell_first_block, rule.cell_n_blocks)
    planned = reads_per_block(admitted_tuples(admissions, rule.cells), cell, block, len(expected_block_rows))
    return place_cells(admitted_tuples(admissions, tuples), rows, planned, expected_block_rows, rule.query_weights)
