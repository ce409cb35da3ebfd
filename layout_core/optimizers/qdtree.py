"""qdtree: a greedy qd-tree over the log's simple cuts (MTO §2.1.3), leaves cut into sorted ranges."""

from __future__ import annotations

import math

import numpy as np

from layout_core.algorithms.qdtree import greedy_tree, leaf_blocks, leaves, tree_to_json
from layout_core.algorithms.types import VectorCounts
from layout_core.optimizers.base import (
    BLOCK_ROWS, EXCLUDE_COLUMNS, LEAF_ORDER, MAX_CUTS, SAMPLE_ROWS, SORT_COLUMN, CandidateCut,
    Optimizer, check_leaf_order, excluded, show_progress, sort_columns,
)
from layout_core.optimizers.plan import TreeBlocks, as_tuples, new_plan


class TreeOptimizer(Optimizer):
    """A qd-tree grown greedily, splits scored by the rows the router will skip
    (the union/intersection bits of every kept cut per block, B1: mto 0.565 ->
    0.532 of sortkey's blocks), built on a sample of about `sample_rows` rows
    with leaves of block_rows / scale sampled rows; every leaf becomes
    max(1, estimated rows // block_rows) blocks that are ranges of the in-leaf
    sort column, so zone maps work inside a leaf (leaf_order=join_key: of the
    primary key's first column, so every block holds a narrow range of the
    key joins match on)."""

    settings = (BLOCK_ROWS, SORT_COLUMN, SAMPLE_ROWS, MAX_CUTS, EXCLUDE_COLUMNS, LEAF_ORDER)
    router_keeps = "cut bits"
    samples = True
    join_induced = False

    def resolve(self, raw=None):
        resolved = super().resolve(raw)
        check_leaf_order(resolved["sort_column"], resolved["leaf_order"])  # at featurize, not after it
        return resolved

    def choose_cuts(self, workload, settings):
        # sqlglot (via sql.analysis) only when cuts are chosen: layout_core.optimizers imports numpy only
        from layout_core.workload.tree_inputs import candidate_cut_lists, cuts_per_kind

        limit = cuts_per_kind(settings["max_cuts"], workload.references)
        simple, induced = candidate_cut_lists(workload.analyses, workload.table, workload.key_hops, max_per_kind=limit)
        simple = [c for c in simple if not excluded(c, settings["exclude_columns"])]
        cuts = [CandidateCut(c, "simple") for c in simple]
        if self.join_induced:
            cuts += [CandidateCut(c, "join_induced") for c in induced]
        return cuts

    def fit(self, inputs, settings):
        return self.tree_plan(inputs, settings)

    def tree_plan(self, inputs, settings, choices=None):
        """The greedy tree's plan (also Pando's with one tree)."""
        block_rows = settings["block_rows"]
        order = sort_columns(inputs.table, inputs.workload, settings["sort_column"], settings["leaf_order"])
        m = len(inputs.cuts)
        sample = inputs.vectors
        vc = VectorCounts(sample.vectors(m), sample.counts, np.ones(m))
        # a leaf holds at least one block of the full table: block_rows / scale sampled rows
        root = greedy_tree(vc, inputs.workload.matrices(m), max(1, math.ceil(block_rows / sample.scale)),
                           objective="router", progress=show_progress())
        if sample.rows == 0:
            rule = TreeBlocks(as_tuples(tree_to_json(root)), (0,), (0,), order)
            return new_plan(self, inputs, settings, rule, (), choices)
        blocks = leaf_blocks(root, block_rows, scale=sample.scale)
        by_leaf = sorted(leaves(root), key=lambda leaf: leaf.leaf_id)
        expected = [leaf.rows * sample.scale / n for leaf, n in zip(by_leaf, blocks.n_blocks.tolist())
                    for _ in range(n)]
        rule = TreeBlocks(as_tuples(tree_to_json(root)), tuple(blocks.first_block.tolist()),
                          tuple(blocks.n_blocks.tolist()), order)
        return new_plan(self, inputs, settings, rule, expected, choices)


class QdTree(TreeOptimizer):
    name = "qdtree"
    help = "greedy qd-tree over the log's simple cuts; leaves become ranges of sort_column"
