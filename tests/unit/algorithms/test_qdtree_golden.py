"""`greedy_tree` builds bit-for-bit the trees it built before its two greedy
loops (path and router objective) became one loop with a scoring function.

tests/data/qdtree_golden.json holds the trees the old code built for the
random instances of `cases()` (cut, rows, leaf id and vector indices of every
node). Regenerate it only when a change of the trees is intended:

    .venv/bin/python -m tests.unit.algorithms.test_qdtree_golden
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from layout_core.algorithms.qdtree import Node, greedy_tree
from layout_core.algorithms.types import VectorCounts, Workload
from tests.helpers.paths import TEST_DATA

GOLDEN = TEST_DATA / "qdtree_golden.json"


def cases():
    """(name, VectorCounts, Workload, greedy_tree keyword arguments), from fixed seeds."""
    out = []
    for seed in range(45):
        rng = np.random.default_rng(seed)
        large = seed >= 40  # deeper trees over more cuts
        n = int(rng.integers(300, 500)) if large else int(rng.integers(0, 60))
        m = int(rng.integers(16, 30)) if large else int(rng.integers(0, 12))
        q = int(rng.integers(8, 16)) if large else int(rng.integers(1, 8))
        vectors = rng.random((n, m)) < rng.uniform(0.1, 0.9)
        # seed 7, 17, ...: more than 2**24 rows, so the router loop works in float64
        scale = 2 ** 20 if seed % 10 == 7 else 1
        counts = rng.integers(0, 50, size=n) * scale
        implies = rng.random((q, m)) < 0.25
        disjoint = (rng.random((q, m)) < 0.25) & ~implies
        weights = None if seed % 3 == 0 else rng.uniform(0, 3, size=q).round(2)
        vc = VectorCounts(vectors, counts, np.ones(m))
        wl = Workload(implies, disjoint, weights)
        min_leaf_rows = int(rng.integers(1, 40)) * scale
        allowed = None if seed % 4 == 0 else rng.random(m) < 0.7
        known = None if seed % 5 == 0 else rng.random(m) < 0.6
        for objective in ("path", "router"):
            kwargs = {"min_leaf_rows": min_leaf_rows, "allowed_cuts": allowed, "objective": objective}
            if objective == "router":
                kwargs["known_cuts"] = known
            out.append((f"seed{seed}-{objective}", vc, wl, kwargs))
    return out


def encode(node: Node) -> list:
    """A leaf: [leaf_id, rows, vector indices]; an internal node: [cut, rows, left, right]."""
    if node.is_leaf:
        return [node.leaf_id, node.rows, node.vector_indices.tolist()]
    return [node.cut, node.rows, encode(node.left), encode(node.right)]


def build_all() -> dict[str, list]:
    return {name: encode(greedy_tree(vc, wl, **kwargs)) for name, vc, wl, kwargs in cases()}


@pytest.fixture(scope="module")
def recorded() -> dict[str, list]:
    return json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("case", cases(), ids=lambda c: c[0])
def test_trees_are_the_recorded_ones(case, recorded):
    name, vc, wl, kwargs = case
    assert encode(greedy_tree(vc, wl, **kwargs)) == recorded[name]


def test_the_recorded_trees_are_not_trivial(recorded):
    """The instances exercise splits under both objectives, not only single leaves."""
    for objective in ("path", "router"):
        split = [t for name, t in recorded.items() if name.endswith(objective) and len(t) == 4]
        assert len(split) >= 10


if __name__ == "__main__":
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(build_all(), sort_keys=True) + "\n")
    print(f"wrote {GOLDEN}")
