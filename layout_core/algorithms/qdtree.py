"""Greedy qd-tree construction over (vector, count) pairs (Yang et al.'s qd-tree
as used by MTO, Ding et al., Sections 2.1.3 and 4).

A table partition is summarized by a `VectorCounts`: distinct bit vectors over
m candidate cuts (bit j: the rows satisfy cut j) and how many rows have each.
Join-induced cuts (MTO Section 4.1) are just more columns of these vectors; the
tree does not distinguish them. `VectorCounts.weights` (the per-feature
weights of the fine-blocking optimizer) is not used here.

The workload is summarized per training query q and cut j by two bool
matrices (see `Workload`):

* ``implies[q, j]``: the query's predicate implies cut j, so rows with bit j = 0
  cannot match q;
* ``disjoint[q, j]``: the query is disjoint with cut j, so rows with bit j = 1
  cannot match q.

A node holds a set of vectors; cutting it on j sends the vectors with bit j = 1
to the left child and those with bit j = 0 to the right child. Query q skips a
leaf when some cut j on the leaf's path has (leaf on the bit-0 side and
``implies[q, j]``) or (leaf on the bit-1 side and ``disjoint[q, j]``). The tree
objective (`tree_objective`) is Σ_q w_q Σ_leaves |leaf| · skip(q, leaf).

`greedy_tree` builds the tree top-down: at each node it picks, among the cuts
leaving at least `min_leaf_rows` rows in both children, the one with the
largest gain in that objective (ties: lowest cut index); a node with no valid
cut or no cut of positive gain becomes a leaf. Each split adds its gain to the
objective, so the result is at least as good as the best single valid cut at
the root.
With ``objective="router"`` the gain is instead the rows the router will skip
in the two children, judged from the union/intersection bits of every cut the
layout keeps per block (`router_objective`), not only of the cuts on the path.

`tree_blocking_map` turns the leaves into blocks of a `BlockingMap` (the same
structure `fineblock.bottom_up` produces), and `skipped_rows` evaluates any
blocking map the way the router decides: per block, from the union ("some row
has bit j") and the intersection ("every row has bit j") of its rows' vectors.
Since every block lies inside one leaf, ``skipped_rows`` of a tree's blocking
map is, per query, at least the rows the tree path says it skips.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from layout_core.algorithms.types import BlockingMap, VectorCounts, Workload, distinct_rows

__all__ = [
    "Node",
    "greedy_tree",
    "single_leaf_tree",
    "zero_cut_tree",
    "leaves",
    "tree_objective",
    "router_objective",
    "describe",
    "tree_blocking_map",
    "skipped_rows",
    "route_vectors",
    "tree_to_json",
    "tree_from_json",
    "LeafBlocks",
    "leaf_blocks",
]

log = logging.getLogger(__name__)

_LOG_EVERY = 200  # splits between progress log lines when there is no progress bar


# ---------------------------------------------------------------------------
# Inputs


# ---------------------------------------------------------------------------
# Tree


@dataclass(frozen=True, eq=False)
class Node:
    """Immutable qd-tree node.

    Internal node: ``cut`` (cut index), ``left`` (bit j = 1 side), ``right``
    (bit j = 0 side); ``leaf_id`` and ``vector_indices`` are None.
    Leaf: ``leaf_id``, ``vector_indices`` (sorted int64 indices into the
    `VectorCounts`), and ``cut``/``left``/``right`` None.
    ``rows`` is the number of rows under the node in both cases.

    Build with `Node.leaf` / `Node.split`. Equality is structural (arrays
    compared by value); nodes are not hashable.
    """

    rows: int
    cut: int | None = None
    left: "Node | None" = None
    right: "Node | None" = None
    leaf_id: int | None = None
    vector_indices: np.ndarray | None = None

    def __post_init__(self) -> None:
        internal = (self.cut is not None, self.left is not None, self.right is not None)
        leaf = (self.leaf_id is not None, self.vector_indices is not None)
        if all(internal) and not any(leaf):
            object.__setattr__(self, "cut", int(self.cut))
        elif all(leaf) and not any(internal):
            idx = np.array(self.vector_indices, dtype=np.int64).reshape(-1)
            idx.flags.writeable = False
            object.__setattr__(self, "vector_indices", idx)
            object.__setattr__(self, "leaf_id", int(self.leaf_id))
        else:
            raise ValueError(
                "a Node is either internal (cut, left, right) or a leaf (leaf_id, vector_indices)"
            )
        object.__setattr__(self, "rows", int(self.rows))

    @classmethod
    def leaf(cls, leaf_id: int, vector_indices, rows: int) -> "Node":
        return cls(rows=rows, leaf_id=leaf_id, vector_indices=vector_indices)

    @classmethod
    def split(cls, cut: int, left: "Node", right: "Node") -> "Node":
        return cls(rows=left.rows + right.rows, cut=cut, left=left, right=right)

    @property
    def is_leaf(self) -> bool:
        return self.leaf_id is not None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Node):
            return NotImplemented
        stack = [(self, other)]
        while stack:
            a, b = stack.pop()
            if a.rows != b.rows or a.is_leaf != b.is_leaf:
                return False
            if a.is_leaf:
                if a.leaf_id != b.leaf_id or not np.array_equal(a.vector_indices, b.vector_indices):
                    return False
            else:
                if a.cut != b.cut:
                    return False
                stack.append((a.right, b.right))
                stack.append((a.left, b.left))
        return True

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self.is_leaf:
            return f"Node.leaf({self.leaf_id}, {self.vector_indices.tolist()}, rows={self.rows})"
        return f"Node.split({self.cut}, <{self.left.rows} rows>, <{self.right.rows} rows>)"


def leaves(root: Node) -> Iterator[Node]:
    """Leaves from left to right (iterative)."""
    stack = [root]
    while stack:
        node = stack.pop()
        if node.is_leaf:
            yield node
        else:
            stack.append(node.right)
            stack.append(node.left)


def breadth_first(root: Node) -> list[Node]:
    """Every node, root first, level by level, left child before right (iterative)."""
    order, head = [root], 0
    while head < len(order):
        node = order[head]
        head += 1
        if not node.is_leaf:
            order += [node.left, node.right]
    return order


def describe(node: Node, cut_names: Sequence[str] | None = None) -> str:
    """Indented text rendering for logs: 'yes' is the bit-1 (left) side."""

    def name(j: int) -> str:
        return str(cut_names[j]) if cut_names is not None else f"cut {j}"

    lines: list[str] = []
    stack: list[tuple[Node, int, str]] = [(node, 0, "")]
    while stack:
        n, depth, label = stack.pop()
        pad = "  " * depth + label
        if n.is_leaf:
            lines.append(
                f"{pad}leaf {n.leaf_id}: {n.rows} rows, {n.vector_indices.shape[0]} vectors"
            )
        else:
            lines.append(f"{pad}[{name(n.cut)}] {n.rows} rows")
            stack.append((n.right, depth + 1, "no:  "))
            stack.append((n.left, depth + 1, "yes: "))
    return "\n".join(lines)


# ---------------------------------------------------------------------------
# Construction


def _check(vc: VectorCounts, workload: Workload) -> None:
    if workload.m != vc.m:
        raise ValueError(f"workload has {workload.m} cuts, vectors have {vc.m}")


def cut_mask(allowed_cuts: np.ndarray | None, m: int) -> np.ndarray:
    if allowed_cuts is None:
        return np.ones(m, dtype=bool)
    a = np.asarray(allowed_cuts)
    if a.dtype == bool:
        if a.shape != (m,):
            raise ValueError(f"a boolean allowed_cuts must have shape ({m},)")
        return a.copy()
    idx = a.astype(np.int64).reshape(-1)
    if ((idx < 0) | (idx >= m)).any():
        raise ValueError("allowed_cuts indices out of range")
    mask = np.zeros(m, dtype=bool)
    mask[idx] = True
    return mask


def greedy_tree(
    vc: VectorCounts,
    workload: Workload,
    min_leaf_rows: int,
    allowed_cuts: np.ndarray | None = None,
    progress: bool = False,
    objective: str = "path",
    known_cuts: np.ndarray | None = None,
) -> Node:
    """Greedy qd-tree (see the module docstring).

    At a node with vector set S (T rows) and per-query flag ``skipped`` (the
    path already lets q skip the node), for every cut j:

        left_j  = counts[S] @ vectors[S, j]      right_j = T - left_j
        gain_j  = Σ_{q not skipped} w_q (implies[q, j] right_j + disjoint[q, j] left_j)

    computed as two matrix-vector products. Cut j is valid when it is allowed
    and left_j >= min_leaf_rows and right_j >= min_leaf_rows; the valid cut
    with the largest gain (ties: lowest index) splits the node if its gain is
    > 0, else the node is a leaf. The left child's flags gain
    ``disjoint[:, j]``, the right child's ``implies[:, j]``.

    `allowed_cuts` is a bool mask of shape (m,) or an array of cut indices
    (None: all cuts). Leaves are numbered 0.. from left to right. Every vector
    (also one with count 0) is in exactly one leaf. Nodes are expanded with an
    explicit stack, depth-first, left child first.

    ``objective="router"`` scores a split by what the router will skip instead
    of what the path proves (`router_skips`): the router sees the union and
    intersection bits of *every* known cut of a block, not only of the cuts on
    its path, so a cut that no query names in the path (an equivalent cut, a
    narrower range, a correlated predicate) still lets queries skip a child.
    With rows with bit j and bit k ``M[j, k]`` at the node, the left child of
    cut j has some row with bit k iff ``M[j, k] > 0`` and every row iff
    ``M[j, k] == left_j`` (right child: ``colsum_k - M[j, k]`` against
    ``right_j``); q skips a child when some known cut k it implies has no row
    there or some known cut it is disjoint with has every row there, and

        gain_j = Σ_q w_q (skip_left[q, j] left_j + skip_right[q, j] right_j - skip_node[q] T).

    `known_cuts` (mask or indices, default: all) are the cuts whose bits the
    router keeps per block (e.g. only the simple cuts for a qd-tree without
    join-induced cuts); splits use `allowed_cuts` as before. The result's
    `router_objective` is at least its `tree_objective`, and >= the router
    objective of every valid one-cut tree.
    """
    _check(vc, workload)
    if min_leaf_rows < 1:
        raise ValueError("min_leaf_rows must be >= 1")
    if objective not in ("path", "router"):
        raise ValueError(f"objective must be 'path' or 'router', not {objective!r}")
    allowed = cut_mask(allowed_cuts, vc.m)
    if objective == "path":
        return _grow(vc, min_leaf_rows, allowed, _PathGain(workload), progress, "greedy_tree")
    known = cut_mask(known_cuts, vc.m)
    used = allowed | known
    if used.all() or not vc.n:
        return _grow(vc, min_leaf_rows, allowed, _RouterGain(workload, known), progress,
                     "greedy_tree (router objective)")
    # Only the allowed and known cuts matter: grow the tree on vectors merged where
    # they are equal on those (fewer vectors, the same splits), then unmerge it.
    cols = np.flatnonzero(used)
    merged, inverse = _merge_equal_vectors(vc, cols)
    sub = Workload(workload.implies[:, cols], workload.disjoint[:, cols], workload.weights)
    tree = _grow(merged, min_leaf_rows, allowed[cols], _RouterGain(sub, known[cols]), progress,
                 "greedy_tree (router objective)")
    return _unmerge(tree, cols, inverse, merged.n)


class _Splits(NamedTuple):
    """The valid splits of one node, for a gain function to score."""

    cuts: np.ndarray  # (a,) int64: the cuts, ascending
    left_rows: np.ndarray  # (a,) float64: rows with the cut's bit 1 (exact integers)
    right_rows: np.ndarray  # (a,) float64
    rows: int  # rows at the node
    pair: np.ndarray | None  # (m, m) float64: rows with bits j and k both 1 (a gain with needs_pair)


class _Gain(Protocol):
    """How `_grow` scores splits, and what state it carries from a node to its children."""

    root: Any  # the root's state
    needs_pair: bool  # scores a node from its pair matrix (`_Splits.pair`)

    def gains(self, splits: _Splits, state: Any) -> np.ndarray:
        """(a,) the objective's gain of each valid split of a node in this state."""

    def children(self, state: Any, cut: int) -> tuple[Any, Any]:
        """The (left, right) children's states after a split on `cut`."""


class _PathGain:
    """Objective "path": rows of the two children that the cuts on the path let
    queries skip. Per node: which queries the path already lets skip it."""

    needs_pair = False

    def __init__(self, workload: Workload):
        self.implies, self.disjoint, self.weights = workload.implies, workload.disjoint, workload.weights
        self.imp_f = workload.implies.astype(np.float64)
        self.dis_f = workload.disjoint.astype(np.float64)
        self.root = np.zeros(workload.n_queries, dtype=bool)

    def gains(self, s: _Splits, skipped: np.ndarray) -> np.ndarray:
        active_w = np.where(skipped, 0.0, self.weights)
        return (active_w @ self.imp_f)[s.cuts] * s.right_rows + (active_w @ self.dis_f)[s.cuts] * s.left_rows

    def children(self, skipped: np.ndarray, cut: int) -> tuple[np.ndarray, np.ndarray]:
        return skipped | self.disjoint[:, cut], skipped | self.implies[:, cut]


class _RouterGain:
    """Objective "router": rows of the two children that the router will skip,
    minus those it skips at the node, judged from every known cut's bits. No
    per-node state."""

    root = None
    needs_pair = True

    def __init__(self, workload: Workload, known: np.ndarray):
        self.known = np.flatnonzero(known)
        self.imp_k = workload.implies[:, self.known].astype(np.float64)  # (Q, k)
        self.dis_k = workload.disjoint[:, self.known].astype(np.float64)
        self.weights = workload.weights

    def gains(self, s: _Splits, state: None) -> np.ndarray:
        if not self.known.size:
            return np.zeros(s.cuts.size)  # the router reads no cut's bits: nothing to gain
        kn, w, total, pair = self.known, self.weights, s.rows, s.pair
        lr, rr = s.left_rows, s.right_rows
        colsum = np.diagonal(pair)[kn]  # (k,) rows with bit k at the node
        both = pair[np.ix_(s.cuts, kn)]  # (a, k)
        rest = colsum[None, :] - both  # rows with bit j = 0 and bit k = 1
        skip_node = router_skips(self.imp_k, self.dis_k, colsum > 0, colsum == total)
        skip_left = router_skips(self.imp_k, self.dis_k, both > 0, both == lr[:, None])  # (a, Q)
        skip_right = router_skips(self.imp_k, self.dis_k, rest > 0, rest == rr[:, None])
        return (skip_left.astype(np.float64) @ w) * lr + (skip_right.astype(np.float64) @ w) * rr \
            - float(w @ skip_node) * total

    def children(self, state: None, cut: int) -> tuple[None, None]:
        return None, None


def _grow(vc: VectorCounts, min_leaf_rows: int, allowed: np.ndarray, gain: _Gain, progress: bool,
          what: str) -> Node:
    """The greedy loop of `greedy_tree` for either objective: `gain` (`_PathGain`
    or `_RouterGain`) scores a node's valid splits; the valid cut with the
    largest gain (ties: lowest index) splits the node if that gain is > 0."""
    # float32 products are exact while a node holds < 2**24 rows
    ftype = np.float32 if int(vc.counts.sum()) < 2 ** 24 else np.float64
    counts_f = vc.counts.astype(ftype)
    vec_f = vc.vectors.astype(ftype)
    candidates = np.flatnonzero(allowed)
    needs_pair = gain.needs_pair

    def pair_of(idx: np.ndarray) -> np.ndarray:
        """(m, m): rows of the vectors `idx` with bits j and k both 1 (exact integers)."""
        vs = vec_f[idx]
        return ((vs * counts_f[idx, None]).T @ vs).astype(np.float64)

    def splittable(rec: list) -> bool:
        return bool(candidates.size) and rec[1] >= 2 * min_leaf_rows

    # Mutable build records, finalized bottom-up into immutable Nodes.
    # Each record: [indices, rows, cut, left_rec, right_rec, leaf_id]
    records: list[list] = []
    root = [np.arange(vc.n, dtype=np.int64), int(vc.counts.sum()), None, None, None, None]
    records.append(root)
    # (record, gain state, its pair matrix when known: a child's is its parent's less its sibling's)
    stack: list[tuple[list, Any, np.ndarray | None]] = [(root, gain.root, None)]
    next_leaf = 0
    reporter = _SplitProgress(progress)
    while stack:
        rec, state, pair = stack.pop()
        idx, total = rec[0], rec[1]
        best_cut = -1
        if splittable(rec):
            if needs_pair:
                pair = pair_of(idx) if pair is None else pair
                left_rows = np.diagonal(pair)[candidates].copy()
            else:
                left_rows = (counts_f[idx] @ vec_f[idx][:, candidates]).astype(np.float64)  # exact integers
            right_rows = total - left_rows
            valid = (left_rows >= min_leaf_rows) & (right_rows >= min_leaf_rows)
            if valid.any():
                splits = _Splits(candidates[valid], left_rows[valid], right_rows[valid], total, pair)
                g = gain.gains(splits, state)
                t = int(np.argmax(g))  # first maximum: lowest cut index
                if g[t] > 0:
                    best_cut = int(splits.cuts[t])
        if best_cut < 0:
            rec[5] = next_leaf
            next_leaf += 1
            continue
        left_rec, right_rec = _split_record(vc, rec, best_cut)
        records.append(left_rec)
        records.append(right_rec)
        left_state, right_state = gain.children(state, best_cut)
        left_pair = right_pair = None
        if needs_pair and (splittable(left_rec) or splittable(right_rec)):
            # the child with fewer vectors directly, the other by subtraction (exact: integer sums)
            small_left = left_rec[0].size <= right_rec[0].size
            small, large = (left_rec, right_rec) if small_left else (right_rec, left_rec)
            small_pair = pair_of(small[0])
            large_pair = pair - small_pair if splittable(large) else None
            left_pair, right_pair = (small_pair, large_pair) if small_left else (large_pair, small_pair)
        stack.append((right_rec, right_state, right_pair))
        stack.append((left_rec, left_state, left_pair))
        reporter.split(len(stack))
    reporter.done(next_leaf, what)
    return _nodes(records)


def _merge_equal_vectors(vc: VectorCounts, cols: np.ndarray) -> tuple[VectorCounts, np.ndarray]:
    """The distinct vectors over `cols` with their summed counts, and for each
    vector of vc the index of its merged vector."""
    uniq, inverse = distinct_rows(vc.vectors[:, cols])
    counts = np.bincount(inverse, weights=vc.counts, minlength=len(uniq)).astype(np.int64)
    return VectorCounts(uniq, counts, np.ones(len(cols))), inverse


def _unmerge(tree: Node, cols: np.ndarray, inverse: np.ndarray, n_merged: int) -> Node:
    """A tree grown on `_merge_equal_vectors` output, over the original cut and vector indices."""
    found = list(leaves(tree))
    leaf_of_merged = np.zeros(n_merged, dtype=np.int64)
    for leaf in found:
        leaf_of_merged[leaf.vector_indices] = leaf.leaf_id
    members = vectors_by_leaf(leaf_of_merged[inverse], len(found))  # a grown tree's leaf ids are 0..n-1

    def expand(node: Node) -> Node:
        if node.is_leaf:
            return Node.leaf(node.leaf_id, members[node.leaf_id], node.rows)
        return Node.split(int(cols[node.cut]), expand(node.left), expand(node.right))

    return expand(tree)


def vectors_by_leaf(leaf_of_vector: np.ndarray, n_leaves: int) -> list[np.ndarray]:
    """Per leaf id 0..n_leaves-1, the indices of the vectors `leaf_of_vector` puts in it, ascending."""
    order = np.argsort(leaf_of_vector, kind="stable")
    starts = np.searchsorted(leaf_of_vector[order], np.arange(n_leaves + 1))
    return [order[starts[leaf]:starts[leaf + 1]] for leaf in range(n_leaves)]


class _SplitProgress:
    """A tqdm bar of splits when asked for, else a log line every _LOG_EVERY splits."""

    def __init__(self, bar: bool) -> None:
        self.splits = 0
        self.bar = None
        if bar:
            # tqdm only when a bar is asked for: the optimizers import this module
            from tqdm import tqdm

            self.bar = tqdm(desc="qd-tree splits", unit="split")

    def split(self, pending: int) -> None:
        self.splits += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.splits % _LOG_EVERY == 0:
            log.info("greedy_tree: %d splits, %d nodes pending", self.splits, pending)

    def done(self, leaves: int, what: str) -> None:
        if self.bar is not None:
            self.bar.close()
        log.info("%s: %d splits, %d leaves", what, self.splits, leaves)


def _split_record(vc: VectorCounts, rec: list, cut: int) -> tuple[list, list]:
    """Make build record `rec` ([indices, rows, cut, left, right, leaf_id]) an
    internal node on `cut`; returns the records of its two children."""
    idx = rec[0]
    bit = vc.vectors[idx, cut]
    left_idx, right_idx = idx[bit], idx[~bit]
    left = [left_idx, int(vc.counts[left_idx].sum()), None, None, None, None]
    right = [right_idx, int(vc.counts[right_idx].sum()), None, None, None, None]
    rec[0] = None  # internal nodes do not keep their vector set
    rec[2], rec[3], rec[4] = cut, left, right
    return left, right


def _nodes(records: list[list]) -> Node:
    """Immutable nodes from build records (records[0] is the root); children are
    appended after their parent, so they are built in reverse order."""
    built: dict[int, Node] = {}
    for rec in reversed(records):
        if rec[5] is not None:
            node = Node.leaf(rec[5], rec[0], rec[1])
        else:
            node = Node.split(rec[2], built.pop(id(rec[3])), built.pop(id(rec[4])))
        built[id(rec)] = node
    return built[id(records[0])]


def router_skips(imp_k: np.ndarray, dis_k: np.ndarray, has: np.ndarray, every: np.ndarray) -> np.ndarray:
    """(..., Q) bool: q skips a row set with per-known-cut flags `has` / `every` (..., k)."""
    return ((~has).astype(np.float64) @ imp_k.T > 0) | (every.astype(np.float64) @ dis_k.T > 0)


def router_objective(vc: VectorCounts, root: Node, workload: Workload,
                     known_cuts: np.ndarray | None = None) -> float:
    """Σ_q w_q Σ_leaves |leaf| · skip(q, leaf), with skip decided as the router
    decides for a block holding exactly the leaf's rows: from the union and
    intersection of the leaf's vectors over the `known_cuts` (default: all)."""
    _check(vc, workload)
    kn = np.flatnonzero(cut_mask(known_cuts, vc.m))
    imp_k = workload.implies[:, kn].astype(np.float64)
    dis_k = workload.disjoint[:, kn].astype(np.float64)
    total = 0.0
    for leaf in leaves(root):
        idx = leaf.vector_indices[vc.counts[leaf.vector_indices] > 0]
        if idx.size == 0:
            continue
        v = vc.vectors[idx][:, kn]
        skip = router_skips(imp_k, dis_k, v.any(axis=0), v.all(axis=0))
        total += float(workload.weights @ skip) * leaf.rows
    return total


def single_leaf_tree(vc: VectorCounts) -> Node:
    """The tree with no cut: one leaf holding every vector."""
    return Node.leaf(0, np.arange(vc.n, dtype=np.int64), int(vc.counts.sum()))


zero_cut_tree = single_leaf_tree


def tree_objective(vc: VectorCounts, root: Node, workload: Workload) -> float:
    """Σ_q w_q Σ_leaves |leaf| · skip(q, leaf), with skip decided by the cuts on
    the leaf's path (the quantity `greedy_tree` maximizes)."""
    _check(vc, workload)
    total = 0.0
    stack = [(root, np.zeros(workload.n_queries, dtype=bool))]
    while stack:
        node, skipped = stack.pop()
        if node.is_leaf:
            total += float(workload.weights[skipped].sum()) * node.rows
        else:
            stack.append((node.left, skipped | workload.disjoint[:, node.cut]))
            stack.append((node.right, skipped | workload.implies[:, node.cut]))
    return total


# ---------------------------------------------------------------------------
# Blocks


def tree_blocking_map(vc: VectorCounts, root: Node, block_rows: int) -> BlockingMap:
    """Blocks from the leaves: a leaf with R > 0 rows becomes max(1, R //
    block_rows) blocks of floor/ceil(R / k) rows (so in [block_rows,
    2·block_rows) when R >= block_rows), cut as contiguous ranges of its rows
    taken vector by vector in vector-index order. Vectors with count 0 (and
    0-row leaves) get no piece. Blocks never straddle leaves. Numbering follows
    the `BlockingMap` convention (order of first piece by vector index)."""
    if block_rows < 1:
        raise ValueError("block_rows must be >= 1")
    counts = vc.counts
    blocks_pieces: list[list[tuple[int, int, int]]] = []
    for leaf in leaves(root):
        idx = np.sort(leaf.vector_indices)
        idx = idx[counts[idx] > 0]
        rows = int(counts[idx].sum())
        if rows == 0:
            continue
        k = max(1, rows // block_rows)
        base, extra = divmod(rows, k)
        sizes = np.full(k, base, dtype=np.int64)
        sizes[:extra] += 1
        bounds = np.concatenate(([0], np.cumsum(sizes)))  # block b: [bounds[b], bounds[b+1])
        vstart = np.concatenate(([0], np.cumsum(counts[idx])))  # vector t: [vstart[t], vstart[t+1])
        start_block = len(blocks_pieces)
        blocks_pieces.extend([] for _ in range(k))
        for t, v in enumerate(idx.tolist()):
            lo, hi = int(vstart[t]), int(vstart[t + 1])
            b = int(np.searchsorted(bounds, lo, side="right")) - 1
            while lo < hi:
                end = min(hi, int(bounds[b + 1]))
                blocks_pieces[start_block + b].append(
                    (v, lo - int(vstart[t]), end - int(vstart[t]))
                )
                lo = end
                b += 1
    return BlockingMap.from_pieces(vc, blocks_pieces)


def skipped_rows(vc: VectorCounts, blocking_map: BlockingMap, workload: Workload) -> np.ndarray:
    """(Q,) int64: rows each query skips (unweighted), deciding per block from
    its rows as the router does: q skips block B when some cut j has
    (implies[q, j] and no row of B has bit j) or (disjoint[q, j] and every row
    of B has bit j). Union and intersection are recomputed from the pieces."""
    _check(vc, workload)
    bm = blocking_map
    k = bm.n_blocks
    lengths = (bm.row_end - bm.row_start).astype(np.float64)
    hits = np.zeros((k, vc.m), dtype=np.float64)
    np.add.at(hits, bm.block, vc.vectors[bm.vector_index] * lengths[:, None])
    sizes = bm.block_sizes()
    skip = router_skips(workload.implies, workload.disjoint, hits > 0, hits == sizes[:, None])  # (k, Q)
    return skip.T.astype(np.int64) @ sizes


# ---------------------------------------------------------------------------
# Routing records and keeping the tree


def route_vectors(root: Node, vectors: np.ndarray) -> np.ndarray:
    """(n,) int64: the leaf id each bit vector reaches (bit j = 1 goes left at a cut on j).

    Works for any vector, also one the tree was not built from (a row of the
    full data when the tree came from a sample)."""
    vectors = np.asarray(vectors, dtype=bool)
    if vectors.ndim != 2:
        raise ValueError("vectors must be a 2-D (n, m) array")
    out = np.full(vectors.shape[0], -1, dtype=np.int64)
    stack = [(root, np.arange(vectors.shape[0], dtype=np.int64))]
    while stack:
        node, idx = stack.pop()
        if node.is_leaf:
            out[idx] = node.leaf_id
            continue
        if node.cut >= vectors.shape[1]:
            raise ValueError(f"the tree cuts on bit {node.cut}, the vectors have {vectors.shape[1]}")
        bit = vectors[idx, node.cut]
        stack.append((node.left, idx[bit]))
        stack.append((node.right, idx[~bit]))
    return out


def tree_to_json(root: Node) -> list:
    """Nested lists: a leaf is [leaf_id, rows], an internal node [cut, rows, left, right].

    Leaves do not keep their vector sets: routing needs only the cuts."""
    def encode(node: Node) -> list:
        if node.is_leaf:
            return [node.leaf_id, node.rows]
        return [node.cut, node.rows, encode(node.left), encode(node.right)]

    return encode(root)


def tree_from_json(data: list) -> Node:
    """The tree `tree_to_json` wrote (leaves with empty vector sets)."""
    if len(data) == 2:
        return Node.leaf(int(data[0]), np.zeros(0, dtype=np.int64), int(data[1]))
    if len(data) != 4:
        raise ValueError(f"not a serialized tree node: {data!r}")
    return Node.split(int(data[0]), tree_from_json(data[2]), tree_from_json(data[3]))


@dataclass(frozen=True, eq=False)
class LeafBlocks:
    """How the leaves of a tree become blocks: leaf l is cut into n_blocks[l]
    blocks of about equal size, numbered first_block[l], first_block[l] + 1, ..."""

    n_blocks: np.ndarray  # (leaves,) int64, >= 1
    first_block: np.ndarray  # (leaves,) int64

    @property
    def total(self) -> int:
        return int(self.n_blocks.sum())


def leaf_blocks(root: Node, block_rows: int, scale: float = 1.0) -> LeafBlocks:
    """max(1, estimated rows // block_rows) blocks per leaf, where estimated rows
    = leaf rows x `scale` (1 / sampling fraction when the tree was built on a
    sample). Every leaf gets at least one block, so a row of a vector the tree
    never saw still has a block to go to."""
    if block_rows < 1:
        raise ValueError("block_rows must be >= 1")
    if scale <= 0:
        raise ValueError("scale must be > 0")
    by_id = sorted(leaves(root), key=lambda leaf: leaf.leaf_id)
    if [leaf.leaf_id for leaf in by_id] != list(range(len(by_id))):
        raise ValueError("leaf ids must be 0..n-1")
    rows = np.array([leaf.rows for leaf in by_id], dtype=np.float64) * scale
    n_blocks = np.maximum(1, np.floor(rows / block_rows)).astype(np.int64)
    first = np.concatenate(([0], np.cumsum(n_blocks)[:-1])).astype(np.int64)
    return LeafBlocks(n_blocks, first)
