"""Inputs of MTO's partial-reorganization reward (Ding et al., §5.1.2), from data.

After a workload shift we have a window Q of new queries. For every subtree T
of a table's active qd-tree the reward of re-laying out T's records is
R(T) = (q / w) · B(T, Q) - C(T), where

* C(T) (`OldSubtrees.blocks`): the blocks in T, the cost of rewriting them;
* A(T) (`OldSubtrees.reads`): the blocks of T an average query of Q reads on
  the current layout (the upper bound of B, MTO's pruning property 1);
* B(T, Q) (`SubtreeBenefits.benefit`): the blocks an average query of Q would
  read less if T's records were laid out by a fresh qd-tree T' grown for Q on
  T's records only, clipped at 0 (a worse T' would not be written).

The workload monitor (`reorg.shift`) takes from this module the old tree's
subtrees (`OldSubtrees`: children, nodes, the records under each) and T'
(`SubtreeBenefits.new_subtree`, what a partial reorganization writes); its
C, A and B come from the catalog, the router and `reorg.simulated_reads`.
The leaf-level estimates of C, A and B below (`OldSubtrees.blocks/reads`,
`SubtreeBenefits.benefit`) are the earlier estimator: the monitor no longer
uses them.

Setting: `vc` holds the active version's records (all, or a sample with
`scale` = full rows / sampled rows) featurized against a combined cut list,
the old version's cuts first, then the window's candidate cuts; the old tree
cuts only on the old cuts, the workload and T' may use all m. The old tree's
leaves are rebuilt by routing vc's vectors through it (`route_vectors`), so
the stored tree needs no vector sets (`tree_from_json` trees work).

How blocks are counted, the same for T and T' so that B compares layouts and
not estimates:

* blocks per leaf: `leaf_blocks` (max(1, rows · scale // block_rows), the
  qdtree/mto optimizers' rule), except that a leaf without rows has 0 blocks
  (nothing to rewrite or read; a leaf the current data never reaches);
* a query reads all of a leaf's blocks unless the router can skip the leaf as
  one block: some cut j with (implies[q, j] and no row of the leaf has bit j)
  or (disjoint[q, j] and every row has bit j). The optimizers cut a leaf into
  ranges of a sort column the vectors do not describe, so which vectors share
  a block inside a leaf is unknown; judging every block by its whole leaf is
  the estimate that needs no such guess (`tree_blocking_map` would instead
  cut blocks in vector-index order, an order the writer never uses, and
  counts blocks without `scale`). It is the router's view of the leaf in
  `router_objective`, per block.
* averages are weighted by `Workload.weights` (1 each by default, so "/ |Q|").
  An empty workload (or all weights 0) is a ValueError: there is no average
  query, and a caller with no new queries has no reason to reorganize.

T' is grown as the optimizers grow a tree: `greedy_tree(objective="router")`
with leaves of at least block_rows / scale sampled rows (`min_leaf_rows`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from layout_core.algorithms.qdtree import (
    Node,
    breadth_first,
    greedy_tree,
    leaf_blocks,
    leaves,
    route_vectors,
    router_skips,
)
from layout_core.algorithms.types import VectorCounts, Workload

__all__ = ["OldSubtrees", "old_subtrees", "SubtreeBenefits", "min_leaf_rows", "reindexed_tree"]


def min_leaf_rows(block_rows: int, scale: float) -> int:
    """Sampled rows a leaf must hold: one block of the full table (as `TreeOptimizer.tree_plan`)."""
    return max(1, math.ceil(block_rows / scale))


# ---------------------------------------------------------------------------
# The old tree's subtrees


@dataclass(frozen=True, eq=False)
class OldSubtrees:
    """The old tree's nodes in breadth-first order (root 0, left child before right).

    children[i]: (left, right) node indices, or None for a leaf.
    blocks[i]:   C, blocks in node i's subtree (int).
    reads[i]:    A, blocks of the subtree an average query of the window reads.
    nodes[i]:    node i of the old tree rebuilt over `vc`: same cuts and leaf
                 ids, leaves hold the indices of vc's vectors routed to them and
                 `rows` their (sampled) row count.
    """

    children: tuple[tuple[int, int] | None, ...]
    blocks: tuple[int, ...]
    reads: tuple[float, ...]
    nodes: tuple[Node, ...]

    def __len__(self) -> int:
        return len(self.nodes)

    def vector_indices(self, node_index: int) -> np.ndarray:
        """Sorted indices of vc's vectors under node `node_index` (T's records)."""
        parts = [leaf.vector_indices for leaf in leaves(self.nodes[node_index])]
        return np.sort(np.concatenate(parts))


def old_subtrees(vc: VectorCounts, old_root: Node, workload: Workload, block_rows: int,
                 scale: float = 1.0, leaf_of_vector: np.ndarray | None = None) -> OldSubtrees:
    """C and A of every subtree of `old_root` over the records in `vc` (see the module docstring).

    `leaf_of_vector` gives each of vc's vectors its old leaf when it is known
    without routing (the leaf of the block a record was read from); the old
    tree's cuts then need not be among vc's cuts."""
    _check_inputs(vc, workload, block_rows, scale)
    if leaf_of_vector is None:
        _check_cuts(old_root, vc.m)
        leaf_of_vector = route_vectors(old_root, vc.vectors)
    root = _with_leaf_vectors(old_root, vc, np.asarray(leaf_of_vector, dtype=np.int64))

    order = breadth_first(root)
    index = {id(node): i for i, node in enumerate(order)}
    children = [None if node.is_leaf else (index[id(node.left)], index[id(node.right)]) for node in order]

    leaf_ids, leaf_block_counts, leaf_reads = _leaf_costs(vc, root, workload, block_rows, scale)
    blocks_of_leaf = dict(zip(leaf_ids.tolist(), leaf_block_counts.tolist()))
    reads_of_leaf = dict(zip(leaf_ids.tolist(), leaf_reads.tolist()))
    # Children come after their parent in breadth-first order: sum bottom-up.
    blocks = [0] * len(order)
    reads = [0.0] * len(order)
    for i in reversed(range(len(order))):
        if children[i] is None:
            blocks[i] = blocks_of_leaf[order[i].leaf_id]
            reads[i] = reads_of_leaf[order[i].leaf_id]
        else:
            left, right = children[i]
            blocks[i] = blocks[left] + blocks[right]
            reads[i] = reads[left] + reads[right]
    total_weight = float(workload.weights.sum())
    return OldSubtrees(tuple(children), tuple(blocks), tuple(r / total_weight for r in reads), tuple(order))


# ---------------------------------------------------------------------------
# Re-optimizing one subtree


@dataclass(frozen=True, eq=False)
class SubtreeBenefits:
    """B(T, Q) and T' for the subtrees of `old` (build with `SubtreeBenefits.of`).

    `benefit` grows a qd-tree, the expensive step: the caller caches it and
    asks only for the subtrees it cannot prune. `new_subtree` grows the same
    (deterministic) tree again for a chosen subtree, for the step that writes it.
    """

    vc: VectorCounts
    workload: Workload
    block_rows: int
    scale: float
    old: OldSubtrees

    def __post_init__(self) -> None:
        _check_inputs(self.vc, self.workload, self.block_rows, self.scale)

    @classmethod
    def of(cls, vc: VectorCounts, old_root: Node, workload: Workload, block_rows: int,
           scale: float = 1.0, leaf_of_vector: np.ndarray | None = None) -> "SubtreeBenefits":
        return cls(vc, workload, block_rows, scale,
                   old_subtrees(vc, old_root, workload, block_rows, scale, leaf_of_vector))

    def new_subtree(self, node_index: int) -> Node:
        """T': a greedy qd-tree for the window over the records under node
        `node_index` only, all m cuts allowed. Its leaves are numbered 0.. and
        hold indices of vc's vectors (not of the subset it was grown on)."""
        members = self.old.vector_indices(self._checked(node_index))
        subset = VectorCounts(self.vc.vectors[members], self.vc.counts[members], self.vc.weights)
        tree = greedy_tree(subset, self.workload, min_leaf_rows(self.block_rows, self.scale), objective="router")
        return reindexed_tree(tree, members)

    def reads_after(self, node_index: int) -> float:
        """Blocks of T' an average query of the window reads (A of the new subtree)."""
        _, _, leaf_reads = _leaf_costs(self.vc, self.new_subtree(node_index), self.workload, self.block_rows,
                                       self.scale)
        return float(leaf_reads.sum()) / float(self.workload.weights.sum())

    def benefit(self, node_index: int) -> float:
        """B(T, Q) = max(0, A(T) - A(T')): blocks an average query reads less after re-laying out T."""
        return max(0.0, self.old.reads[self._checked(node_index)] - self.reads_after(node_index))

    def _checked(self, node_index: int) -> int:
        if not 0 <= node_index < len(self.old):
            raise ValueError(f"node index {node_index} is not in 0..{len(self.old) - 1}")
        return node_index


# ---------------------------------------------------------------------------
# Helpers


def _check_inputs(vc: VectorCounts, workload: Workload, block_rows: int, scale: float) -> None:
    if workload.m != vc.m:
        raise ValueError(f"the workload has {workload.m} cuts, the vectors have {vc.m}")
    if workload.n_queries == 0 or not workload.weights.sum() > 0:
        raise ValueError("the workload has no queries (or only weight 0): there is no average query to "
                         "reorganize for")
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
    if leaf_of_vector.shape != (vc.n,) or (vc.n and not 0 <= leaf_of_vector.min() <= leaf_of_vector.max() < len(leaf_ids)):
        raise ValueError(f"leaf_of_vector must give each of the {vc.n} vectors a leaf id in 0..{len(leaf_ids) - 1}")
    by_leaf = np.argsort(leaf_of_vector, kind="stable")  # leaf l: by_leaf[starts[l]:starts[l + 1]], sorted
    starts = np.searchsorted(leaf_of_vector[by_leaf], np.arange(len(leaf_ids) + 1))
    rows = np.bincount(leaf_of_vector, weights=vc.counts, minlength=len(leaf_ids)).astype(np.int64)

    def rebuild(node: Node) -> Node:
        if node.is_leaf:
            lid = node.leaf_id
            return Node.leaf(lid, by_leaf[starts[lid]:starts[lid + 1]], int(rows[lid]))
        return Node.split(node.cut, rebuild(node.left), rebuild(node.right))

    return rebuild(root)


def reindexed_tree(tree: Node, members: np.ndarray) -> Node:
    """`tree` grown on vc restricted to `members`, with leaves holding vc's own vector indices."""
    if tree.is_leaf:
        return Node.leaf(tree.leaf_id, members[tree.vector_indices], tree.rows)
    return Node.split(tree.cut, reindexed_tree(tree.left, members), reindexed_tree(tree.right, members))


def _leaf_costs(vc: VectorCounts, root: Node, workload: Workload, block_rows: int,
                scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per leaf of `root` (leaves hold vc indices; ids 0..n-1), in leaf-id order:
    (leaf ids, blocks, weighted block reads Σ_q w_q · blocks · read(q, leaf))."""
    by_id = sorted(leaves(root), key=lambda leaf: leaf.leaf_id)
    n_blocks = leaf_blocks(root, block_rows, scale).n_blocks.copy()
    # The leaves' vectors one after another: leaf l is the segment [bounds[l], bounds[l + 1]).
    members = np.concatenate([leaf.vector_indices for leaf in by_id])
    bounds = np.concatenate(([0], np.cumsum([leaf.vector_indices.size for leaf in by_id])))
    counts = vc.counts[members]
    # Rows with bit j per leaf, as differences of a running sum (exact int64; empty segments give 0).
    running = np.zeros((members.size + 1, vc.m), dtype=np.int64)
    np.cumsum(vc.vectors[members] * counts[:, None], axis=0, out=running[1:])
    bit_rows = running[bounds[1:]] - running[bounds[:-1]]  # (leaves, m)
    row_running = np.concatenate(([0], np.cumsum(counts)))
    rows = row_running[bounds[1:]] - row_running[bounds[:-1]]
    n_blocks[rows == 0] = 0  # leaf_blocks gives an empty leaf a block to route unseen rows to; it holds none
    skip = router_skips(workload.implies.astype(np.float64), workload.disjoint.astype(np.float64),
                        bit_rows > 0, bit_rows == rows[:, None])  # (leaves, Q)
    read_weight = (~skip).astype(np.float64) @ workload.weights  # (leaves,) Σ_q w_q read(q, leaf)
    ids = np.array([leaf.leaf_id for leaf in by_id], dtype=np.int64)
    return ids, n_blocks, n_blocks * read_weight
