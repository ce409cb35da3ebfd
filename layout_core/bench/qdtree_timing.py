"""Timing smoke check of `greedy_tree` (not a unit test).

    python -m layout_core.bench.qdtree_timing
"""

from __future__ import annotations

import time

import numpy as np

from layout_core.algorithms.types import VectorCounts
from layout_core.algorithms.qdtree import greedy_tree, leaves, skipped_rows, tree_blocking_map, tree_objective
from layout_core.algorithms.types import Workload


def random_input(
    n: int = 5_000, m: int = 60, n_queries: int = 200, seed: int = 0
) -> tuple[VectorCounts, Workload]:
    """n distinct random m-bit vectors (bit j set with a per-cut probability in
    [0.05, 0.6)), counts uniform in [1, 2000); each query implies 1-4 random
    cuts and is disjoint with 0-2 others, weights uniform in [1, 5)."""
    rng = np.random.default_rng(seed)
    density = rng.uniform(0.05, 0.6, size=m)
    seen: dict[bytes, np.ndarray] = {}
    while len(seen) < n:
        for row in rng.random((n, m)) < density[None, :]:
            seen.setdefault(row.tobytes(), row)
            if len(seen) == n:
                break
    vectors = np.stack(list(seen.values()))
    counts = rng.integers(1, 2_000, size=n)
    implies = np.zeros((n_queries, m), bool)
    disjoint = np.zeros((n_queries, m), bool)
    for q in range(n_queries):
        cuts = rng.permutation(m)
        a, b = int(rng.integers(1, 5)), int(rng.integers(0, 3))
        implies[q, cuts[:a]] = True
        disjoint[q, cuts[a : a + b]] = True
    weights = rng.integers(1, 5, size=n_queries).astype(float)
    return VectorCounts(vectors, counts, np.ones(m)), Workload(implies, disjoint, weights)


def main(n: int = 5_000, m: int = 60, n_queries: int = 200) -> None:
    vc, wl = random_input(n, m, n_queries)
    total = int(vc.counts.sum())
    print(f"{vc.n} distinct vectors, {m} cuts, {n_queries} queries, {total} rows")
    for min_leaf_rows in (1_000, 10_000, 100_000):
        t0 = time.perf_counter()
        tree = greedy_tree(vc, wl, min_leaf_rows)
        t_tree = time.perf_counter() - t0
        t0 = time.perf_counter()
        bm = tree_blocking_map(vc, tree, min_leaf_rows)
        t_map = time.perf_counter() - t0
        t0 = time.perf_counter()
        skipped = skipped_rows(vc, bm, wl)
        t_skip = time.perf_counter() - t0
        n_leaves = sum(1 for _ in leaves(tree))
        obj = tree_objective(vc, tree, wl)
        routed = float(wl.weights @ skipped)
        print(
            f"min_leaf_rows={min_leaf_rows:>7}: greedy_tree {t_tree:.3f} s, {n_leaves} leaves; "
            f"tree_blocking_map {t_map:.3f} s, {bm.n_blocks} blocks; skipped_rows {t_skip:.3f} s; "
            f"objective {obj:.4g} (router {routed:.4g}, "
            f"{routed / (float(wl.weights.sum()) * total):.1%} of weighted rows)"
        )


if __name__ == "__main__":
    main()
