"""The old qd-tree's subtrees, and the new subtree T' grown for a window on one of them.

MTO's partial reorganization (Ding et al., §5.1.2) re-lays out the records of
chosen subtrees T of a table's active qd-tree with fresh trees T' grown for a
window Q of new queries. The workload monitor (`reorg.shift`) takes from this
module the old tree's subtrees (`OldSubtrees`: children, nodes, the records
under each); the partial reorganization (`reorg.partial`) takes T'
(`NewSubtrees.new_subtree`), the tree it writes. The reward's C, A and B come
from the catalog, the router and `reorg.simulated_reads`.

Setting: `vc` holds the active version's records (all, or a sample with
`scale` = full rows / sampled rows) featurized against the window's candidate
cuts. The old tree's leaves are rebuilt from the leaf of the block each
sampled record was read from (`leaf_of_vector`), or by routing vc's vectors
through the old tree when its cuts are among vc's (`route_vectors`), so the
stored tree needs no vector sets (`tree_from_json` trees work).

T' is grown as the optimizers grow a tree: `greedy_tree(objective="router")`
with leaves of at least block_rows / scale sampled rows (`min_leaf_rows`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from layout_core.algorithms.qdtree import Node, breadth_first, greedy_tree, leaves, route_vectors, vectors_by_leaf
from layout_core.algorithms.types import VectorCounts, Workload

__all__ = ["OldSubtrees", "old_subtrees", "NewSubtrees", "min_leaf_rows", "reindexed_tree"]


def min_leaf_rows(block_rows: int, scale: float) -> int:
    """Sampled rows a leaf must hold: one block of the full table (as `TreeOptimizer.tree_plan`)."""
    return max(1, math.ceil(block_rows / scale))


# ---------------------------------------------------------------------------
# The old tree's subtrees


@dataclass(frozen=True, eq=False)
class OldSubtrees:
    """The old tree's nodes in breadth-first order (root 0, left child before right).

    children[i]: (left, right) node indices, or None for a leaf.
    nodes[i]:    node i of the old tree rebuilt over `vc`: same cuts and leaf
                 ids, leaves hold the indices of vc's vectors routed to them and
                 `rows` their (sampled) row count.
    """

    children: tuple[tuple[int, int] | None, ...]
    nodes: tuple[Node, ...]

    def __len__(self) -> int:
        return len(self.nodes)

    def vector_indices(self, node_index: int) -> np.ndarray:
        """Sorted indices of vc's vectors under node `node_index` (T's records)."""
        if not 0 <= node_index < len(self.nodes):
            raise ValueError(f"node index {node_index} is not in 0..{len(self.nodes) - 1}")
        parts = [leaf.vector_indices for leaf in leaves(self.nodes[node_index])]
        return np.sort(np.concatenate(parts))


def old_subtrees(vc: VectorCounts, old_root: Node, leaf_of_vector: np.ndarray | None = None) -> OldSubtrees:
    """The subtrees of `old_root` over the records in `vc` (see the module docstring).

    `leaf_of_vector` gives each of vc's vectors its old leaf when it is known
    without routing (the leaf of the block a record was read from); the old
    tree's cuts then need not be among vc's cuts."""
    if leaf_of_vector is None:
        _check_cuts(old_root, vc.m)
        leaf_of_vector = route_vectors(old_root, vc.vectors)
    root = _with_leaf_vectors(old_root, vc, np.asarray(leaf_of_vector, dtype=np.int64))
    order = breadth_first(root)
    index = {id(node): i for i, node in enumerate(order)}
    children = [None if node.is_leaf else (index[id(node.left)], index[id(node.right)]) for node in order]
    return OldSubtrees(tuple(children), tuple(order))


# ---------------------------------------------------------------------------
# Re-optimizing one subtree


@dataclass(frozen=True, eq=False)
class NewSubtrees:
    """T' for any subtree of `old`, grown for `workload` (build with `NewSubtrees.of`).

    `new_subtree` grows a (deterministic) qd-tree, the expensive step: the
    partial reorganization asks only for the subtrees it writes."""

    vc: VectorCounts
    workload: Workload
    block_rows: int
    scale: float
    old: OldSubtrees

    def __post_init__(self) -> None:
        _check_inputs(self.vc, self.workload, self.block_rows, self.scale)

    @classmethod
    def of(cls, vc: VectorCounts, old_root: Node, workload: Workload, block_rows: int,
           scale: float = 1.0, leaf_of_vector: np.ndarray | None = None) -> "NewSubtrees":
        return cls(vc, workload, block_rows, scale, old_subtrees(vc, old_root, leaf_of_vector))

    def new_subtree(self, node_index: int) -> Node:
        """T': a greedy qd-tree for the window over the records under node
        `node_index` only, all m cuts allowed. Its leaves are numbered 0.. and
        hold indices of vc's vectors (not of the subset it was grown on)."""
        members = self.old.vector_indices(node_index)
        subset = VectorCounts(self.vc.vectors[members], self.vc.counts[members], self.vc.weights)
        tree = greedy_tree(subset, self.workload, min_leaf_rows(self.block_rows, self.scale), objective="router")
        return reindexed_tree(tree, members)


# ---------------------------------------------------------------------------
# Helpers


def _check_inputs(vc: VectorCounts, workload: Workload, block_rows: int, scale: float) -> None:
    if workload.m != vc.m:
        raise ValueError(f"the workload has {workload.m} cuts, the vectors have {vc.m}")
    if workload.n_queries == 0 or not workload.weights.sum() > 0:
        raise ValueError("the workload has no queries (or only weight 0): there is no window to grow a tree for")
    if block_rows < 1:
        raise ValueError(f"block_rows must be >= 1, not {block_rows}")
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a finite number > 0, not {scale}")


def _check_cuts(root: Node, m: int) -> None:
    for node in _internal_nodes(root):
        if not 0 <= node.cut < m:
            raise ValueError(f"the old tree cuts on cut {node.cut}, the vectors have cuts 0..{m - 1}")


def _internal_nodes(root: Node):
    stack = [root]
    while stack:
        node = stack.pop()
        if not node.is_leaf:
            yield node
            stack.extend((node.left, node.right))


def _with_leaf_vectors(root: Node, vc: VectorCounts, leaf_of_vector: np.ndarray) -> Node:
    """`root` with every leaf holding the vc vectors assigned to it and their row count."""
    leaf_ids = sorted(leaf.leaf_id for leaf in leaves(root))
    if leaf_ids != list(range(len(leaf_ids))):
        raise ValueError("the old tree's leaf ids must be 0..n-1")
    shaped = leaf_of_vector.shape == (vc.n,)
    if not shaped or (vc.n and not 0 <= leaf_of_vector.min() <= leaf_of_vector.max() < len(leaf_ids)):
        raise ValueError(f"leaf_of_vector must give each of the {vc.n} vectors a leaf id in 0..{len(leaf_ids) - 1}")
    by_leaf = vectors_by_leaf(leaf_of_vector, len(leaf_ids))
    rows = np.bincount(leaf_of_vector, weights=vc.counts, minlength=len(leaf_ids)).astype(np.int64)

    def rebuild(node: Node) -> Node:
        if node.is_leaf:
            lid = node.leaf_id
            return Node.leaf(lid, by_leaf[lid], int(rows[lid]))
        return Node.split(node.cut, rebuild(node.left), rebuild(node.right))

    return rebuild(root)


def reindexed_tree(tree: Node, members: np.ndarray) -> Node:
    """`tree` grown on vc restricted to `members`, with leaves holding vc's own vector indices."""
    if tree.is_leaf:
        return Node.leaf(tree.leaf_id, members[tree.vector_indices], tree.rows)
    return Node.split(tree.cut, reindexed_tree(tree.left, members), reindexed_tree(tree.right, members))
