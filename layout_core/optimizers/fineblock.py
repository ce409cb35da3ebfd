"""fineblock: Sun et al.'s workload features and bottom-up Balanced MaxSkip blocks (§3, §4)."""

from __future__ import annotations

import numpy as np

from layout_core.algorithms.fineblock import bottom_up
from layout_core.algorithms.types import VectorCounts
from layout_core.optimizers.base import (
    BLOCK_ROWS, EXCLUDE_COLUMNS, CandidateCut, Optimizer, Setting, excluded, show_progress,
)
from layout_core.optimizers.plan import PieceBlocks, new_plan

NUM_FEAT = Setting("num_feat", "int", 15, "features mined from the log (Sun's numFeat)")
MIN_SUPPORT = Setting("min_support", "int", 2, "queries a feature must subsume (frequent itemset support T)")


class FineBlock(Optimizer):
    name = "fineblock"
    help = "Sun et al.: features from the log, vectors clustered bottom-up into blocks of >= block_rows rows"
    settings = (BLOCK_ROWS, NUM_FEAT, MIN_SUPPORT, EXCLUDE_COLUMNS)
    router_keeps = "cut bits"

    def choose_cuts(self, workload, settings):
        # pandas and mlxtend only when features are mined: the registry imports every optimizer
        from layout_core.algorithms.features import select_features
        # sqlglot only when cuts are chosen: layout_core.optimizers imports numpy only
        from layout_core.sql.analysis import candidate_cuts

        queries = [candidate_cuts(a, ref.key, workload.key_hops)[0]
                   for a in workload.analyses for ref in a.refs_of_table(workload.table)]
        if not queries:
            return []
        features = select_features(queries, settings["num_feat"], max(1, settings["min_support"]),
                                   exclude=lambda p: excluded(p, settings["exclude_columns"]))
        return [CandidateCut(f.predicate, "simple", f.support) for f in features]

    def fit(self, inputs, settings):
        keys = inputs.vectors.keys
        if not keys:
            return new_plan(self, inputs, settings, PieceBlocks(()), ())
        # a feature weighs as many queries as it subsumes (Sun's objective)
        weights = np.array([c.support for c in inputs.cuts], dtype=float)
        vc = VectorCounts(inputs.vectors.vectors(len(inputs.cuts)), inputs.vectors.counts, weights)
        blocks = bottom_up(vc, settings["block_rows"], progress=show_progress())
        pieces = tuple((keys[v], int(b), int(s), int(e)) for v, b, s, e
                       in zip(blocks.vector_index, blocks.block, blocks.row_start, blocks.row_end))
        return new_plan(self, inputs, settings, PieceBlocks(pieces), blocks.block_sizes().tolist())
