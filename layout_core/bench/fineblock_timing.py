"""Timing smoke check of `bottom_up` (not a unit test).

    python -m layout_core.bench.fineblock_timing
"""

from __future__ import annotations

import time

import numpy as np

from layout_core.algorithms.fineblock import bottom_up, objective
from layout_core.algorithms.types import VectorCounts


def random_input(n: int, m: int = 15, seed: int = 0, density: float = 0.5) -> VectorCounts:
    """n distinct random m-bit vectors (each bit set with probability
    `density`), counts uniform in [1, 2000), weights uniform in [1, 50)."""
    rng = np.random.default_rng(seed)
    if n > 2**m:
        raise ValueError("more distinct vectors than 2**m")
    seen: dict[bytes, np.ndarray] = {}
    while len(seen) < n:
        batch = rng.random((n, m)) < density
        for row in batch:
            seen.setdefault(row.tobytes(), row)
            if len(seen) == n:
                break
    vectors = np.stack(list(seen.values()))
    counts = rng.integers(1, 2_000, size=n)
    weights = rng.integers(1, 50, size=m).astype(float)
    return VectorCounts(vectors, counts, weights)


def main(sizes=(2_000, 5_000), m: int = 15) -> None:
    for n in sizes:
        for density, min_size in ((0.5, 10_000), (0.2, 10_000), (0.5, 1_000), (0.5, 10**9)):
            vc = random_input(n, m, seed=n, density=density)
            t0 = time.perf_counter()
            bm = bottom_up(vc, min_size)
            dt = time.perf_counter() - t0
            sizes_ = bm.block_sizes()
            print(
                f"n={vc.n:5d} distinct vectors, m={m}, density={density}, min_size={min_size}: "
                f"{dt:.2f} s, {bm.n_blocks} blocks "
                f"(sizes {sizes_.min()}..{sizes_.max()}), objective {objective(vc, bm):.4g}"
            )


if __name__ == "__main__":
    main()
