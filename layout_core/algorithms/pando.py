"""Pando's layout optimizer over (vector, count) pairs (Pando §6), pure numpy.

Pando indexes one physical layout with k partitioning trees ("logical
partitionings"). A query asks every tree for the leaves it cannot rule out
and reads only the blocks that all k trees point to (§5). The optimizer:

1. `top_down` (§6.1) grows the k trees together, one (tree, leaf, cut) split
   at a time, as if every row were its own block: query q reads a row unless
   some tree lets q skip the row's leaf. So a cut is worth something in one
   tree only for the rows the other trees do not already let q skip, and
   correlated cuts end up in different trees, not stacked in one.
2. `k_tuples` routes every vector through the k trees: its k leaf ids are its
   k-tuple (a cell of the grid in the paper's Fig. 5). The trees cannot tell
   the rows of one cell apart.
3. `bottom_up_blocks` (§6.2) starts with one block per non-empty cell and
   greedily merges the pair of blocks that adds the fewest rows read, until
   every block holds >= block_rows rows.
4. `truncate` (§6.2, last paragraph) removes the cuts whose two children point
   to the same set of blocks.

Conventions are those of `qdtree`: a `VectorCounts` (distinct bit vectors over
m candidate cuts, bit j: the rows satisfy cut j, with a row count each) and a
`Workload` (implies / disjoint (Q, m), query weights). Cutting on j sends bit-1
vectors left. Query q skips a leaf when a cut j on its path has (leaf on the
bit-0 side and implies[q, j]) or (bit-1 side and disjoint[q, j]); otherwise
the tree *admits* the leaf for q (`admitted`). Costs are Σ_q w_q · rows read.

Which blocks a query reads (`block_reads`): by default, block B is read when
some cell of B is admitted by all k trees (a router that keeps the cell ->
block map, `PandoBlocks`); this is the cost `bottom_up_blocks` minimizes.
``per_tree=True`` gives the paper's §5 router instead: each tree returns the
blocks its admitted leaves point to and the k block sets are intersected.
Both are sound (a row q needs is in a cell every tree admits); the first
never reads more, and `truncate` does not change what the second reads.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from layout_core.algorithms.fineblock import PackedUnions
from layout_core.algorithms.qdtree import Node, cut_mask, greedy_tree, leaf_blocks, leaves, route_vectors
from layout_core.algorithms.types import VectorCounts, Workload, reference_halves

__all__ = [
    "Grown",
    "PandoBlocks",
    "FIRST_TREES",
    "Truncated",
    "TupleBoundError",
    "admitted",
    "admitted_tuples",
    "block_reads",
    "rows_read",
    "choose_k",
    "grow_layout",
    "held_out_halves",
    "restricted",
    "rows_read_share",
    "bottom_up_blocks",
    "Cells",
    "cells_of_sample",
    "cut_skipped",
    "merge_cells",
    "estimated_rows_read",
    "fallback_blocks",
    "grow_within_bound",
    "k_tuples",
    "leaf_block_sets",
    "mto_tree",
    "place_cells",
    "top_down",
    "truncate",
    "tuple_reads",
]

log = logging.getLogger(__name__)

_LOG_EVERY = 200  # splits (or merges, x10) between progress log lines without a bar
_VECTOR_CHUNK = 8192  # vectors per matrix product when scoring them
_PAIR_CHUNK = 128  # rows of the pairwise merge-cost matrix computed at once
_CACHED_PAIRS = 11_000  # up to this many small cells, merge costs are kept (< 1 GB)


def _check(vc: VectorCounts, workload: Workload) -> None:
    if workload.m != vc.m:
        raise ValueError(f"workload has {workload.m} cuts, vectors have {vc.m}")


class _Progress:
    """A tqdm bar when asked for, else a log line every `every` steps."""

    def __init__(self, bar: bool, what: str, unit: str, every: int) -> None:
        self.what, self.every, self.steps, self.bar = what, every, 0, None
        if bar:
            # tqdm only when a bar is asked for: the optimizers import this module
            from tqdm import tqdm

            self.bar = tqdm(desc=what, unit=unit)

    def step(self, detail: str) -> None:
        self.steps += 1
        if self.bar is not None:
            self.bar.update(1)
        elif self.steps % self.every == 0:
            log.info("%s: %d steps, %s", self.what, self.steps, detail)

    def done(self, detail: str) -> None:
        if self.bar is not None:
            self.bar.close()
        log.info("%s: %d steps, %s", self.what, self.steps, detail)


# ---------------------------------------------------------------------------
# Top-down: k trees grown together (§6.1)


def top_down(
    vc: VectorCounts,
    workload: Workload,
    k: int,
    threshold: int,
    allowed_cuts: np.ndarray | None = None,
    progress: bool = False,
    first_tree: Node | None = None,
) -> tuple[Node, ...]:
    """k trees grown one split at a time (Pando §6.1).

    With `first_tree` (mto's tree, say), tree 0 is that tree: its splits are
    made first, whatever the threshold, and it is never split further; the
    other k - 1 trees grow around it, each split worth what the rows tree 0
    does not already let a query skip.

    Every row counts as its own block, and query q reads the rows of vector v
    unless some tree lets q skip v's leaf: ``reads[q, v]``. Cutting leaf l of
    any tree on cut j makes q stop reading the rows of l it still reads on the
    side it skips, so the gain is

        gain(l, j) = Σ_{v in l} count_v · G[v, j],
        G[v, j]    = Σ_q w_q reads[q, v] (implies[q, j] if bit j of v is 0 else disjoint[q, j]).

    G does not depend on the tree: a split changes `reads` only for the split
    leaf's vectors, so only their rows of G and the gains of the leaves (in
    every tree) holding one of them whose reads changed are recomputed, each
    exactly from G (no running sums, so a zero gain is exactly zero).

    A split is valid when the cut is allowed (`allowed_cuts`: bool mask or
    indices, None: all) and both children keep >= `threshold` rows. Each step
    takes the valid split of largest gain (ties: lowest tree, then the leaf
    leftmost in its tree, then the lowest cut) while that gain is > 0. (Gains
    never grow and a split changes no other leaf of its own tree, so two tied
    leaves of one tree are both split in either order: only the tree order
    shapes the result.)
    Leaves are numbered 0.. left to right per tree; every vector (also one of
    count 0) is in exactly one leaf of each tree.

    With k = 1 the leaves' gains are independent, so the result is
    `greedy_tree(vc, workload, threshold, allowed_cuts)` (path objective):
    Pando with k = 1 is MTO. (Gains are summed in another order than
    greedy_tree's, so with non-integer weights two gains equal up to rounding
    may be told apart differently.)

    Every leaf keeps Σ_{v in l} count_v · G[v] and its rows per bit, so a
    split sums the vectors of its smaller child only (the larger child's sums
    are the parent's minus those), and a change of G[v] is added to the
    leaves holding v in the other trees. With integer query weights every
    sum is an exact integer; otherwise a gain within 1e-9 of the total
    weighted rows counts as zero.

    Cost per split of a leaf of n_l vectors: O(Q·n_l) to update `reads`,
    O(n_c·Q·m) for the n_c vectors whose reads changed and O(k·n_c·m) to pass
    the change on, O(n_s·m) for the smaller child's n_s vectors, O(leaves)
    to pick the next split. Memory: G is (n, m) float64, reads (n, Q) bool.
    """
    _check(vc, workload)
    if k < 1:
        raise ValueError("k must be >= 1")
    if threshold < 1:
        raise ValueError("threshold must be >= 1")
    return _grow(vc, workload, k, threshold, allowed_cuts, progress, first_tree=first_tree).roots()


def _grow(vc: VectorCounts, workload: Workload, k: int, threshold: int, allowed_cuts, progress: bool,
          max_tuples: int | None = None, first_tree: Node | None = None, resume: "_Forest | None" = None,
          keep_levels: Sequence[int] = ()) -> "_Forest":
    """`top_down`'s growth; with `max_tuples`, it stops as soon as the trees make
    more non-empty k-tuples than that (splits never merge cells, so the count
    only grows: such a threshold fails, whatever comes next). `first_tree`:
    tree 0 is that tree, never split further (see `top_down`).

    `resume`: a copy of that forest (a state `keep_levels` kept, grown with the
    same inputs) grows on instead of a new one. `keep_levels`: for each level
    L above `threshold`, the state just before the first split that leaves
    fewer than L rows on a side is kept in the result's `kept[L]`. Growth at
    any threshold t in [threshold, L] makes the same splits up to that state
    (each was valid at t and the best of more candidates), so it may resume
    there (`grow_within_bound`'s later probes)."""
    if resume is None:
        forest = _Forest(vc, workload, k, int(threshold), cut_mask(allowed_cuts, vc.m))
        if first_tree is not None:
            forest.replay(0, first_tree)
    else:
        forest = resume.copy_at(int(threshold))
    # a level above a resumed state's smallest leaf is out of reach: a split before it left fewer rows
    pending = {int(level) for level in keep_levels if threshold < level <= forest.smallest_child}
    reporter = _Progress(progress, f"pando top_down (k={k})", "split", _LOG_EVERY)
    while (choice := forest.best_split()) is not None:
        smaller = forest.smaller_side(*choice)
        reached = {level for level in pending if smaller < level}  # all splits so far left >= level rows
        if reached:
            state = forest.copy_at(forest.threshold)
            forest.kept.update(dict.fromkeys(reached, state))
            pending -= reached
        forest.split(*choice)
        forest.greedy_splits += 1
        rows = forest.trees[choice[0]].rows
        forest.smallest_child = min(forest.smallest_child, rows[-1], rows[-2])  # the two new leaves
        reporter.step(f"{forest.n_leaves()} leaves")
        if max_tuples is not None and forest.n_cells > max_tuples:
            break
    reporter.done(f"{forest.n_leaves()} leaves, {forest.n_cells} k-tuples, threshold {threshold}")
    return forest


class _Tree:
    """One growing tree: nodes by creation id (root 0, children after their
    parent), the leaves left to right, and every vector's leaf."""

    def __init__(self, n: int, rows: int) -> None:
        self.idx: list[np.ndarray | None] = [np.arange(n, dtype=np.int64)]  # leaves' vectors
        self.rows = [rows]
        self.cut = [-1]  # -1: a leaf
        self.left = [-1]
        self.right = [-1]
        self.order = [0]  # leaf ids left to right
        self.leaf_of = np.zeros(n, dtype=np.int64)
        self.best_gain = np.full(1, -np.inf)  # per node: its best valid split's gain
        self.best_cut = np.full(1, -1, dtype=np.int64)
        self.gain_sum: dict[int, np.ndarray] = {}  # per leaf: Σ count_v G[v] over its vectors
        self.bit_rows: dict[int, np.ndarray] = {}  # per leaf: its rows with bit j, per cut j

    def add_children(self, node: int, cut: int, left_idx: np.ndarray, right_idx: np.ndarray,
                     counts: np.ndarray) -> tuple[int, int]:
        first = len(self.idx)
        for idx in (left_idx, right_idx):
            self.idx.append(idx)
            self.rows.append(int(counts[idx].sum()))
            self.cut.append(-1)
            self.left.append(-1)
            self.right.append(-1)
            self.leaf_of[idx] = len(self.idx) - 1
        self.idx[node] = None  # internal nodes do not keep their vectors
        self.cut[node], self.left[node], self.right[node] = cut, first, first + 1
        pos = self.order.index(node)
        self.order[pos:pos + 1] = [first, first + 1]
        self.best_gain = np.concatenate((self.best_gain, [-np.inf, -np.inf]))
        self.best_gain[node] = -np.inf
        self.best_cut = np.concatenate((self.best_cut, [-1, -1]))
        return first, first + 1

    def copied(self) -> "_Tree":
        """A copy to grow apart: the lists and arrays changed in place are copied; the
        per-leaf arrays (replaced, never changed in place) are shared."""
        twin = copy.copy(self)
        for name in ("idx", "rows", "cut", "left", "right", "order"):
            setattr(twin, name, list(getattr(self, name)))
        for name in ("leaf_of", "best_gain", "best_cut"):
            setattr(twin, name, getattr(self, name).copy())
        twin.gain_sum, twin.bit_rows = dict(self.gain_sum), dict(self.bit_rows)
        return twin

    def root(self) -> Node:
        leaf_id = {node: i for i, node in enumerate(self.order)}
        built: dict[int, Node] = {}
        for node in range(len(self.idx) - 1, -1, -1):  # children before parents
            if self.cut[node] < 0:
                built[node] = Node.leaf(leaf_id[node], self.idx[node], self.rows[node])
            else:
                built[node] = Node.split(self.cut[node], built.pop(self.left[node]), built.pop(self.right[node]))
        return built[0]


class _Forest:
    """The k trees while they grow, and the per-vector gains G (see `top_down`)."""

    def __init__(self, vc: VectorCounts, workload: Workload, k: int, threshold: int, allowed: np.ndarray):
        self.smallest_child = np.inf  # rows of the smallest leaf a greedy split made (`_grow`)
        self.greedy_splits = 0  # splits `_grow` chose (not `replay`'s)
        self.kept: dict[int, _Forest] = {}  # states kept for later thresholds (`_grow`'s keep_levels)
        self.vectors = vc.vectors
        self.counts = vc.counts
        self.counts_f = vc.counts.astype(np.float64)
        self.vec_f = vc.vectors.astype(np.float64)
        self.imp, self.dis = workload.implies, workload.disjoint
        self.imp_f = workload.implies.astype(np.float64)
        self.dis_f = workload.disjoint.astype(np.float64)
        self.weights = workload.weights
        # integer weights keep every G an exact integer, so a split may subtract what it changes
        self.integer_weights = bool(np.all(self.weights == np.round(self.weights)))
        # and below 2**24 in all, float32 products of them are exact: half the work of float64
        small = self.integer_weights and float(np.sum(self.weights)) < 2 ** 24
        self.drop_type = np.float32 if small else np.float64
        self.imp_d = self.imp_f.astype(np.float32) if small else self.imp_f
        self.dis_d = self.dis_f.astype(np.float32) if small else self.dis_f
        self.threshold = threshold
        self.allowed = allowed
        self.reads = np.ones((vc.n, workload.n_queries), dtype=bool)  # [v, q]: rows of v read by q (a row per vector)
        self.gain_of_vector = np.zeros((vc.n, vc.m))
        self._rescore_vectors(np.arange(vc.n, dtype=np.int64))
        total = int(vc.counts.sum())
        self.tolerance = 1e-9 * total * float(np.sum(self.weights))
        # every vector's cell (k-tuple) as an id, and how many cells hold rows
        self.cell_of = np.zeros(vc.n, dtype=np.int64)
        self.next_cell = 1
        self.n_cells = int(total > 0)
        self.trees = [_Tree(vc.n, total) for _ in range(k)]
        self.frozen: set[int] = set()  # trees given whole (`replay`), never split further
        for tree in self.trees:
            tree.gain_sum[0] = self.counts_f @ self.gain_of_vector
            tree.bit_rows[0] = self.counts_f @ self.vec_f
            self._rescore_leaves(tree, [0])

    def _rescore_vectors(self, vec: np.ndarray) -> None:
        """G[v] for the given vectors, from the current `reads`."""
        for s in range(0, vec.size, _VECTOR_CHUNK):
            v = vec[s:s + _VECTOR_CHUNK]
            wr = self.reads[v] * self.weights  # (chunk, Q): w_q if q reads v
            self.gain_of_vector[v] = np.where(self.vectors[v], wr @ self.dis_f, wr @ self.imp_f)

    def _dropped_gains(self, vec: np.ndarray, stopped: np.ndarray, qs: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """-(G[v, cols]'s terms of the queries that stopped reading v): `stopped`
        (len(vec), len(qs)) marks, per vector, which of the queries `qs` no longer read it."""
        ws = (stopped * self.weights[qs]).astype(self.drop_type)
        by_cut = np.ix_(qs, cols)
        return -np.where(self.vectors[np.ix_(vec, cols)], ws @ self.dis_d[by_cut], ws @ self.imp_d[by_cut]
                         ).astype(np.float64)

    def _rescore_leaves(self, tree: _Tree, nodes) -> None:
        """The best valid split (gain, cut; lowest cut among ties) of each leaf, from its sums."""
        thr = self.threshold
        for node in nodes:
            rows = tree.rows[node]
            tree.best_gain[node], tree.best_cut[node] = -np.inf, -1
            if rows < 2 * thr:
                continue  # no cut leaves >= threshold rows on both sides
            left = tree.bit_rows[node]
            valid = self.allowed & (left >= thr) & (rows - left >= thr)
            if not valid.any():
                continue
            gains = np.where(valid, tree.gain_sum[node], -np.inf)
            j = int(np.argmax(gains))
            if gains[j] > self.tolerance:
                tree.best_gain[node], tree.best_cut[node] = gains[j], j

    def copy_at(self, threshold: int) -> "_Forest":
        """This forest's state to grow on at `threshold` (its inputs shared, read only):
        every leaf's best valid split found again for the new threshold."""
        twin = copy.copy(self)
        twin.reads = self.reads.copy()
        twin.gain_of_vector = self.gain_of_vector.copy()
        twin.cell_of = self.cell_of.copy()
        twin.trees = [tree.copied() for tree in self.trees]
        twin.frozen = set(self.frozen)
        twin.kept = {}
        twin.threshold = threshold
        for tree in twin.trees:
            twin._rescore_leaves(tree, tree.order)
        return twin

    def smaller_side(self, t: int, node: int, cut: int) -> float:
        """Rows of the smaller child splitting `node` of tree t on `cut` would make."""
        tree = self.trees[t]
        left = float(tree.bit_rows[node][cut])
        return min(left, tree.rows[node] - left)

    def replay(self, t: int, root: Node) -> None:
        """Make tree t `root`'s splits, then freeze it (no further split)."""
        tree, stack = self.trees[t], [(0, root)]  # (node id in tree t, the node it becomes)
        while stack:
            node_id, node = stack.pop()
            if node.cut is None:
                continue
            self.split(t, node_id, node.cut)
            left = len(tree.idx) - 2  # split() appends the bit-1 child, then the bit-0 child
            stack += [(left, node.left), (left + 1, node.right)]
        self.frozen.add(t)

    def best_split(self) -> tuple[int, int, int] | None:
        """(tree, node, cut) of the largest positive gain, ties broken as documented."""
        best, best_tree = 0.0, -1
        for t, tree in enumerate(self.trees):
            if t in self.frozen:
                continue
            top = float(tree.best_gain.max())
            if top > best:  # strictly: the lowest tree wins ties
                best, best_tree = top, t
        if best_tree < 0:
            return None
        tree = self.trees[best_tree]
        tied = set(np.flatnonzero(tree.best_gain == best).tolist())
        node = next(n for n in tree.order if n in tied)  # the leftmost
        return best_tree, node, int(tree.best_cut[node])

    def split(self, t: int, node: int, cut: int) -> None:
        tree = self.trees[t]
        idx = tree.idx[node]
        bit = self.vectors[idx, cut]
        left, right = tree.add_children(node, cut, idx[bit], idx[~bit], self.counts)
        self._split_cells(idx, bit)
        # Queries the new children let skip: implied cut on the bit-0 side, disjoint cut on the bit-1 side.
        skip = np.where(bit[:, None], self.dis[:, cut], self.imp[:, cut])  # (n_l, Q)
        before = self.reads[idx]
        newly = before & skip  # the queries that stop reading each vector
        hit = newly.any(axis=1)
        self.reads[idx[hit]] = before[hit] & ~skip[hit]
        counted = hit & (self.counts[idx] > 0)
        changed = idx[counted]
        if self.integer_weights:
            # Only the few queries that imply or are disjoint with the cut can stop reading a
            # vector: G drops by their terms (exact in integers), not a product over all Q, and
            # only in the cuts those queries imply or are disjoint with (`cols`; a few of m).
            qs = np.flatnonzero(self.imp[:, cut] | self.dis[:, cut])
            cols = np.flatnonzero((self.imp[qs] | self.dis[qs]).any(axis=0))
            change = self._dropped_gains(changed, newly[counted][:, qs], qs, cols)
            self.gain_of_vector[np.ix_(changed, cols)] += change
        else:
            cols = np.arange(self.vectors.shape[1])
            old = self.gain_of_vector[changed]
            self._rescore_vectors(changed)
            change = self.gain_of_vector[changed] - old
        delta = self.counts_f[changed, None] * change  # (changed vectors, cols)
        # The split leaf's sums go to its children: the smaller one summed, the other the rest.
        parent_sum = tree.gain_sum.pop(node).copy()
        parent_sum[cols] += delta.sum(axis=0)
        parent_bits = tree.bit_rows.pop(node)
        small, big = (left, right) if tree.idx[left].size <= tree.idx[right].size else (right, left)
        s_idx = tree.idx[small]
        tree.gain_sum[small] = self.counts_f[s_idx] @ self.gain_of_vector[s_idx]
        tree.bit_rows[small] = self.counts_f[s_idx] @ self.vec_f[s_idx]
        tree.gain_sum[big] = parent_sum - tree.gain_sum[small]
        tree.bit_rows[big] = parent_bits - tree.bit_rows[small]
        self._rescore_leaves(tree, (left, right))
        if changed.size:
            for other in self.trees:
                if other is not tree:
                    self._rescore_leaves(other, _add_by_leaf(other, other.leaf_of[changed], delta, cols))

    def _split_cells(self, idx: np.ndarray, bit: np.ndarray) -> None:
        """The split leaf's bit-0 vectors move to new cells; a cell with rows on
        both sides becomes two."""
        held = self.counts[idx] > 0
        on_left = np.unique(self.cell_of[idx[bit & held]])
        on_right = np.unique(self.cell_of[idx[~bit & held]])
        self.n_cells += np.intersect1d(on_left, on_right, assume_unique=True).size
        right = idx[~bit]
        old = np.unique(self.cell_of[right])
        self.cell_of[right] = self.next_cell + np.searchsorted(old, self.cell_of[right])
        self.next_cell += old.size

    def n_leaves(self) -> int:
        return sum(len(tree.order) for tree in self.trees)

    def roots(self) -> tuple[Node, ...]:
        return tuple(tree.root() for tree in self.trees)


def _add_by_leaf(tree: _Tree, leaf_of_row: np.ndarray, delta: np.ndarray, cols: np.ndarray) -> list[int]:
    """Add each row of `delta` to the gain sums of its leaf, in the cuts `cols`; the leaves touched."""
    nodes = len(tree.idx)
    touched = np.flatnonzero(np.bincount(leaf_of_row, minlength=nodes))
    by_cut = np.ascontiguousarray(delta.T)
    sums = np.stack([np.bincount(leaf_of_row, weights=row, minlength=nodes)[touched] for row in by_cut], axis=1)
    touched = touched.tolist()
    for leaf, add in zip(touched, sums):
        summed = tree.gain_sum[leaf].copy()
        summed[cols] += add
        tree.gain_sum[leaf] = summed
    return touched


_KEPT_BYTES = 1 << 30  # states of earlier threshold probes kept to resume from, at most (`grow_within_bound`)


class TupleBoundError(ValueError):
    """The trees make more k-tuples than the bound even at the largest threshold allowed."""

    def __init__(self, k: int, threshold: int, n_tuples: int, bound: int) -> None:
        self.k, self.threshold, self.n_tuples, self.bound = k, threshold, n_tuples, bound
        super().__init__(f"k = {k}: the trees make more than {bound} k-tuples (at least {n_tuples}) even with "
                         f"leaves of {threshold} sampled rows")


class Grown(NamedTuple):
    """`top_down`'s trees at the threshold `grow_within_bound` chose, and their non-empty k-tuples."""

    threshold: int
    trees: tuple[Node, ...]
    n_tuples: int


def grow_within_bound(
    vc: VectorCounts,
    workload: Workload,
    k: int,
    block_rows: int,
    max_tuples: int = 10_000,
    allowed_cuts: np.ndarray | None = None,
    min_threshold: int | None = None,
    refine_steps: int = 3,
    progress: bool = False,
    max_threshold: int | None = None,
    first_tree: Node | None = None,
) -> Grown:
    """The top-down threshold: small enough for fine leaves, large enough that
    the bottom-up stage (quadratic in the number of cells) stays tractable;
    and the trees `top_down` grows at it.

    Rule (Pando §8.2: "under 10,000 k-tuples for the bottom-up stage"):

    * k = 1: `block_rows` (Pando with k = 1 is MTO, §6.2).
    * otherwise: try t0 = `min_threshold` (default ceil(block_rows / 8), at
      least 1), 2·t0, 4·t0, ... until `top_down` at that threshold gives at most
      `max_tuples` non-empty k-tuples (`k_tuples`); this ends, since once
      2·t exceeds the rows no split is valid and there is one cell. When t0
      fails, the last candidate at or below `block_rows` is probed next, and
      if it fails too the candidates between are skipped. Then up to
      `refine_steps` bisection probes between the last failing and the first
      passing candidate look for a smaller passing threshold.

    With `max_threshold` (Pando's phase assumes leaves of at most one block:
    pass `block_rows`), `max_threshold` itself is probed first: if it fails,
    `TupleBoundError` says how many k-tuples the trees make there, and no
    smaller threshold is tried (finer leaves make more cells; on a large
    table each failing probe costs as much as a fit, and `choose_k` meets
    such a k on every half). Otherwise the doubling t0, 2·t0, ... stops at
    `max_threshold`.

    A probe need not grow from the root: a probe at t keeps its state just
    before its first split that leaves fewer rows than a threshold probed next
    (states of up to `_KEPT_BYTES` in all), and a later probe at a threshold between
    t and that level goes on from there, with the same result (see `_grow`).
    On large tables most of a probe's time is its first splits, which later
    probes share.

    The cell count is not monotone in the threshold (other greedy choices), so
    the result is the smallest passing threshold among those probed; it always
    passes. Thresholds below t0 are not tried, though they might capture finer
    outliers: each probe is a full top_down run and finer leaves take longer
    to grow (pass `min_threshold` to go lower).

    `block_rows` is in the units of `vc` (divide by the sampling scale).
    `first_tree`: tree 0 as given (see `top_down`); its leaves count towards
    the k-tuples whatever the threshold.
    """
    _check(vc, workload)
    if block_rows < 1:
        raise ValueError("block_rows must be >= 1")
    if max_tuples < 1:
        raise ValueError("max_tuples must be >= 1")
    if k == 1:
        t = int(block_rows)
        trees = top_down(vc, workload, 1, t, allowed_cuts, progress, first_tree)
        return Grown(t, trees, k_tuples(trees, vc)[1].shape[0])
    t = int(min_threshold) if min_threshold is not None else -(-int(block_rows) // 8)
    t = max(1, t)
    grown: dict[int, Grown] = {}
    failed: list[tuple[int, float]] = []  # (threshold, smallest leaf its splits made) of failing probes
    # States of earlier probes to resume from: (threshold grown at, level, forest), see `_grow`.
    states: list[tuple[int, int, _Forest]] = []
    bounds = [0, np.inf]  # thresholds between them may still be probed: the largest failing, the smallest passing
    state_bytes = 8 * vc.n * vc.m + vc.n * workload.n_queries  # the per-vector gains and reads a state copies
    kept_states = int(_KEPT_BYTES // max(1, state_bytes))

    def passes(threshold: int, keep: Sequence[int] = ()) -> bool:
        # A probe at t that failed with every split leaving >= c rows on each side fails
        # at any threshold in [t, c] too: each split it chose is valid there and still the
        # best (the valid splits are fewer), so the same trees grow past the bound.
        if threshold in grown:
            return grown[threshold].n_tuples <= max_tuples
        known = next((t_ for t_, c in failed if t_ <= threshold <= c), None)
        if known is not None:
            grown[threshold] = grown[known]
            log.info("pando threshold %d: fails as at %d (its splits all left more rows)", threshold, known)
            return False
        resume = max(((state, at) for at, level, state in states if at <= threshold <= level),
                     key=lambda pair: pair[0].greedy_splits, default=(None, None))
        if resume[0] is not None:
            log.info("pando threshold %d: the first %d splits are those grown at %d", threshold,
                     resume[0].greedy_splits, resume[1])
        forest = _grow(vc, workload, k, threshold, allowed_cuts, progress, max_tuples, first_tree,
                       resume=resume[0], keep_levels=keep[:kept_states])
        grown[threshold] = Grown(threshold, forest.roots(), forest.n_cells)
        ok = forest.n_cells <= max_tuples
        if not ok:
            failed.append((threshold, forest.smallest_child))
        log.info("pando threshold %d: %s%d k-tuples (bound %d)", threshold, "" if ok else "stopped at ",
                 forest.n_cells, max_tuples)
        if ok:
            bounds[1] = min(bounds[1], threshold)
        else:
            bounds[0] = max(bounds[0], threshold)
        states.extend((threshold, level, state) for level, state in forest.kept.items())
        states[:] = [(at, level, state) for at, level, state in states if level > bounds[0] and at < bounds[1]]
        states.sort(key=lambda entry: -entry[2].greedy_splits)
        del states[kept_states:]  # each holds a copy of the per-vector gains
        return ok

    def ahead(t_: int, next_t: int) -> tuple[int, ...]:
        """The thresholds probed next if t_ fails: `next_t`, and the bisection's first two
        probes below it should `next_t` pass."""
        return next_t, (t_ + next_t) // 2, (3 * t_ + next_t) // 4

    if max_threshold is not None:
        max_threshold = max(1, int(max_threshold))
        t = min(t, max_threshold)
        if not passes(max_threshold):
            raise TupleBoundError(k, max_threshold, grown[max_threshold].n_tuples, max_tuples)
    first = t
    # Without a cap, t0 failing sends the doubling to its last step at or below one
    # block: if that fails too, the steps between are not probed (finer leaves make
    # more cells); if it passes, they are, so the result is the plain doubling's.
    one_block = t << max(0, (int(block_rows) // t).bit_length() - 1)

    def following(t_: int) -> int:
        return min(2 * t_, max_threshold) if max_threshold is not None else 2 * t_

    keep = ((one_block,) if max_threshold is None and 2 * t < one_block else ()) + ahead(t, following(t))
    failing = None
    while not passes(t, keep):  # ends: at max_threshold, or at one cell
        failing, t = t, following(t)
        if max_threshold is None and t < one_block and not passes(one_block, ahead(one_block, 2 * one_block)):
            failing, t = one_block, 2 * one_block
        keep = ahead(t, following(t))
    passing = t
    for _ in range(refine_steps):
        if failing is None or passing - failing <= 1:
            break
        mid = (failing + passing) // 2
        if passes(mid, ((mid + passing) // 2,)):
            passing = mid
        else:
            failing = mid
    if passing > first:
        log.warning("pando: threshold raised from %d to %d rows so that the trees make at most %d k-tuples "
                    "(more at the threshold %d)", first, passing, max_tuples, first)
    return grown[passing]


# ---------------------------------------------------------------------------
# k-tuples and what the trees admit


def k_tuples(trees: Sequence[Node], vc: VectorCounts) -> tuple[np.ndarray, np.ndarray]:
    """(tuple_of_vector, tuples): every vector routed through every tree.

    tuples: (T, k) int64, the distinct k-tuples (leaf id per tree) that hold
    rows, in lexicographic order. tuple_of_vector: (n,) int64, the index of
    each vector's tuple; -1 for a vector of count 0 whose tuple holds no rows
    (other vectors of count 0 get their tuple's index).
    """
    if not trees:
        raise ValueError("at least one tree is needed")
    leaf = np.stack([route_vectors(root, vc.vectors) for root in trees], axis=1)  # (n, k)
    if leaf.shape[0] == 0:
        return np.zeros(0, np.int64), np.zeros((0, len(trees)), np.int64)
    uniq, inverse = np.unique(leaf, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    keep = np.bincount(inverse, weights=vc.counts, minlength=uniq.shape[0]) > 0
    renumber = np.cumsum(keep) - 1
    tuple_of_vector = np.where(keep[inverse], renumber[inverse], -1).astype(np.int64)
    return tuple_of_vector, uniq[keep].astype(np.int64)


def _leaf_count(root: Node) -> int:
    ids = sorted(leaf.leaf_id for leaf in leaves(root))
    if ids != list(range(len(ids))):
        raise ValueError("leaf ids must be 0..n-1")
    return len(ids)


def admitted(trees: Sequence[Node], workload: Workload) -> tuple[np.ndarray, ...]:
    """Per tree, (Q, leaves) bool: the tree admits the leaf for q, i.e. no cut
    on the leaf's path lets q skip it (path semantics)."""
    out = []
    for root in trees:
        adm = np.zeros((workload.n_queries, _leaf_count(root)), dtype=bool)
        stack = [(root, np.zeros(workload.n_queries, dtype=bool))]
        while stack:
            node, skipped = stack.pop()
            if node.is_leaf:
                adm[:, node.leaf_id] = ~skipped
            else:
                if node.cut >= workload.m:
                    raise ValueError(f"the tree cuts on {node.cut}, the workload has {workload.m} cuts")
                stack.append((node.left, skipped | workload.disjoint[:, node.cut]))
                stack.append((node.right, skipped | workload.implies[:, node.cut]))
        out.append(adm)
    return tuple(out)


def tuple_reads(trees: Sequence[Node], workload: Workload, tuples: np.ndarray) -> np.ndarray:
    """(Q, T) bool: every tree admits the tuple's leaf for q."""
    return admitted_tuples(admitted(trees, workload), tuples)


def admitted_tuples(admissions: Sequence[np.ndarray], tuples: np.ndarray) -> np.ndarray:
    """(Q, T) bool from the trees' (Q, leaves) admissions (`admitted`): every
    tree admits the tuple's leaf for q."""
    tuples = np.asarray(tuples, dtype=np.int64).reshape(-1, len(admissions))
    out = np.ones((admissions[0].shape[0], tuples.shape[0]), dtype=bool)
    for i, adm in enumerate(admissions):
        out &= adm[:, tuples[:, i]]
    return out


# ---------------------------------------------------------------------------
# Bottom-up: cells into blocks (§6.2)


def _readonly(a, dtype, ndim: int) -> np.ndarray:
    out = np.array(a, dtype=dtype)  # a copy: the caller's array stays writable
    if out.ndim != ndim:
        raise ValueError(f"expected a {ndim}-D array, got shape {out.shape}")
    out.flags.writeable = False
    return out


@dataclass(frozen=True, eq=False)
class PandoBlocks:
    """Which blocks the rows of each k-tuple (cell) go to.

    tuples:            (T, k) int64, leaf id per tree of each non-empty cell (`k_tuples`).
    tuple_first_block: (T,) int64, the cell's first block.
    tuple_n_blocks:    (T,) int64 >= 1. A cell of n > 1 blocks has its rows cut
                       into n blocks first_block .. first_block + n - 1 of about
                       equal size (the Spark side cuts ranges of a sort column);
                       cells merged into one block share first_block, with n = 1.
                       A few cells may also share one block of a big cell.
    tuple_rows:        (T,) int64, rows of each cell.
    block_rows:        (n_blocks,) int64, the expected rows of each block.

    Blocks are numbered by their cells (see `bottom_up_blocks`). Arrays are
    read-only copies. With the untruncated trees, a new row's cell gives its
    block (§7: inserts).
    """

    tuples: np.ndarray
    tuple_first_block: np.ndarray
    tuple_n_blocks: np.ndarray
    tuple_rows: np.ndarray
    block_rows: np.ndarray

    def __post_init__(self) -> None:
        tuples = _readonly(self.tuples, np.int64, 2)
        t = tuples.shape[0]
        for name in ("tuple_first_block", "tuple_n_blocks", "tuple_rows"):
            arr = _readonly(getattr(self, name), np.int64, 1)
            if arr.shape != (t,):
                raise ValueError(f"{name} must have shape ({t},)")
            object.__setattr__(self, name, arr)
        object.__setattr__(self, "tuples", tuples)
        object.__setattr__(self, "block_rows", _readonly(self.block_rows, np.int64, 1))
        if (self.tuple_n_blocks < 1).any():
            raise ValueError("every tuple needs at least one block")
        if t and (self.tuple_first_block.min() < 0
                  or (self.tuple_first_block + self.tuple_n_blocks).max() > self.n_blocks):
            raise ValueError("a tuple points past the last block")

    @property
    def n_blocks(self) -> int:
        return int(self.block_rows.shape[0])

    @property
    def k(self) -> int:
        return int(self.tuples.shape[1])

    def tuple_block_pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(tuple index, block) of every block each tuple has rows in."""
        return cell_block_pairs(self.tuple_first_block, self.tuple_n_blocks)


def cell_block_pairs(first_block, n_blocks) -> tuple[np.ndarray, np.ndarray]:
    """(cell index, block) of every block each cell has rows in: cell c holds
    blocks first_block[c] .. first_block[c] + n_blocks[c] - 1."""
    first, n = np.asarray(first_block, dtype=np.int64), np.asarray(n_blocks, dtype=np.int64)
    cell = np.repeat(np.arange(n.shape[0], dtype=np.int64), n)
    starts = np.cumsum(n) - n
    return cell, (first[cell] + np.arange(cell.shape[0]) - starts[cell]).astype(np.int64)


def reads_per_block(cell_reads: np.ndarray, cell: np.ndarray, block: np.ndarray, n_blocks: int) -> np.ndarray:
    """(Q, T) cell reads -> (Q, n_blocks) bool: some cell with rows in the block
    is read (`cell`, `block`: `cell_block_pairs`)."""
    hits = np.zeros((n_blocks, cell_reads.shape[0]), dtype=np.int64)
    np.add.at(hits, block, cell_reads[:, cell].T)
    return hits.T > 0


@dataclass
class _Block:
    """A finished block before numbering: owned by one big cell (piece >= 0)
    or made of merged small cells (piece -1); `cells` are its n = 1 cells."""

    key: tuple[int, int]  # (lowest owning cell, piece): the numbering order
    rows: int
    reads: np.ndarray  # packed reads over queries
    owner: int = -1  # the big cell, for pieces
    piece: int = -1
    cells: list[int] | None = None


@dataclass(frozen=True, eq=False)
class Cells:
    """The non-empty k-tuples (cells) of a table and what merging them needs.

    tuples:  (T, k) int64, leaf id per tree, in lexicographic order (`k_tuples`).
    rows:    (T,) int64, rows of each cell.
    any_cut, all_cut: (T, m) bool, some / every row of the cell satisfies cut
             j: the cut bits the router keeps for a block of these rows. None:
             unknown, the trees' admissions alone decide what a block is read by.
    span:    (T, 2) float64 or None, the least and greatest value of the sort
             column in the cell (any order-preserving number; NaN: no value).
             Merges of equal cost go to the narrowest merged range, so the
             blocks' zone maps stay narrow for literals the workload never had.

    `cells_of_sample` makes them from (vector, count) pairs, the Spark side
    (`spark.cells`) from every row of the partition.
    """

    tuples: np.ndarray
    rows: np.ndarray
    any_cut: np.ndarray | None = None
    all_cut: np.ndarray | None = None
    span: np.ndarray | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tuples", _readonly(self.tuples, np.int64, 2))
        t = self.tuples.shape[0]
        object.__setattr__(self, "rows", _readonly(self.rows, np.int64, 1))
        if self.rows.shape != (t,):
            raise ValueError(f"rows must have shape ({t},)")
        if (self.any_cut is None) != (self.all_cut is None):
            raise ValueError("any_cut and all_cut go together")
        if self.any_cut is not None:
            for name in ("any_cut", "all_cut"):
                arr = _readonly(getattr(self, name), bool, 2)
                if arr.shape[0] != t:
                    raise ValueError(f"{name} must have {t} rows")
                object.__setattr__(self, name, arr)
            if self.any_cut.shape != self.all_cut.shape:
                raise ValueError("any_cut and all_cut must have the same shape")
        if self.span is not None:
            span = _readonly(self.span, np.float64, 2)
            if span.shape != (t, 2):
                raise ValueError(f"span must have shape ({t}, 2)")
            object.__setattr__(self, "span", span)


def cells_of_sample(trees: Sequence[Node], vc: VectorCounts) -> Cells:
    """The cells of (vector, count) pairs, with their cut bits (no values: no span)."""
    return _cells_of_vectors(vc, *k_tuples(trees, vc))


def _cells_of_vectors(vc: VectorCounts, tuple_of_vector: np.ndarray, tuples: np.ndarray) -> Cells:
    """`cells_of_sample` from the vectors already routed (`k_tuples`)."""
    n_tuples = tuples.shape[0]
    held = tuple_of_vector >= 0
    rows = np.bincount(tuple_of_vector[held], weights=vc.counts[held], minlength=n_tuples).astype(np.int64)
    any_cut = np.zeros((n_tuples, vc.m), dtype=bool)
    all_cut = np.ones((n_tuples, vc.m), dtype=bool)
    rows_of = held & (vc.counts > 0)  # a vector of count 0 has no row to set a bit
    np.logical_or.at(any_cut, tuple_of_vector[rows_of], vc.vectors[rows_of])
    np.logical_and.at(all_cut, tuple_of_vector[rows_of], vc.vectors[rows_of])
    return Cells(tuples, rows, any_cut, all_cut)


def cut_skipped(workload: Workload, any_cut: np.ndarray, all_cut: np.ndarray) -> np.ndarray:
    """(n, Q) bool: the cut bits of n groups of rows let query q skip them: q
    implies a cut no row satisfies, or is disjoint with one every row does
    (the router's rule)."""
    if any_cut.shape[0] == 0 or workload.n_queries == 0:
        return np.zeros((any_cut.shape[0], workload.n_queries), dtype=bool)
    # float32 products are exact here (counts of at most m cuts) and use BLAS
    none = (~any_cut).astype(np.float32) @ workload.implies.T.astype(np.float32)
    every = all_cut.astype(np.float32) @ workload.disjoint.T.astype(np.float32)
    return (none > 0) | (every > 0)


def bottom_up_blocks(
    vc: VectorCounts,
    workload: Workload,
    trees: Sequence[Node],
    block_rows: int,
    progress: bool = False,
    within_first_tree: bool = False,
) -> PandoBlocks:
    """Pando §6.2 on (vector, count) pairs: `merge_cells` of `cells_of_sample`."""
    _check(vc, workload)
    return merge_cells(cells_of_sample(trees, vc), admitted(trees, workload), workload, block_rows,
                       progress=progress, within_first_tree=within_first_tree)


def merge_cells(
    cells: Cells,
    admissions: Sequence[np.ndarray],
    workload: Workload,
    block_rows: int,
    progress: bool = False,
    within_first_tree: bool = False,
) -> PandoBlocks:
    """Pando §6.2: cells into blocks of >= block_rows rows.

    Query q reads a block B when some cell of B is admitted by all k trees
    (`admissions`, per tree (Q, leaves), see `admitted`) and B's cut bits do
    not let q skip it (`cut_skipped`, when `cells` has cut bits): the rule of
    the router that serves the blocks. Block B costs Σ_q w_q |B| reads(q, B).
    Per block, reads is a bool vector over queries, bit-packed
    (`PackedUnions` with the query weights), and merging A and B is scored

        (|A| + |B|) w(reads_A | reads_B) - |A| w(reads_A) - |B| w(reads_B) >= 0,

    the queries that newly scan the merged block. The merged block's reads
    are then taken from its own cut bits, which can make them more than the
    union (a query implying two cuts that each half satisfies on its own).

    1. A cell with >= block_rows rows is finished as n = rows // block_rows
       blocks of floor/ceil(rows / n) rows (the first ones get the extra row),
       so each is in [block_rows, 2·block_rows).
    2. The other cells start as one block each; the pair whose merge adds the
       least cost is merged (ties: the narrowest merged span of the sort
       column when `cells.span` is known, then the pair of lowest cells,
       comparing each block by its lowest cell), and a block reaching
       block_rows is finished.
    3. The last unfinished block (< block_rows rows) joins the finished block
       it adds the least cost to (ties: fewer rows, then the lower numbering
       key below); with no finished block (the table has < block_rows rows)
       it stays alone.

    `within_first_tree` (tree 0 is mto's tree, Pando Fig. 2c): step 2 runs
    per leaf of tree 0, so blocks stay inside its leaves; the cells each leaf
    leaves unfinished, the costliest to merge there (mostly small k-tuples off
    the trees' diagonal), are then merged across leaves into outlier blocks,
    and step 3 takes what remains.

    Blocks are numbered by key: (the big cell, piece) for a big cell's
    pieces, (lowest cell, 0) for merged cells. Every row is in exactly one
    block; every block has >= block_rows rows unless the table has fewer.
    Rows and `block_rows` are in the same units (a sample's rows, if the
    cells are a sample's). Cost: O(T^2 · Q / 16) typically for T small cells
    (each merge rescans the pairs of O(1) blocks), worst O(T^3).
    """
    if block_rows < 1:
        raise ValueError("block_rows must be >= 1")
    tuples, rows = cells.tuples, cells.rows
    n_tuples = tuples.shape[0]
    pk = PackedUnions(workload.weights)
    tree_reads = admitted_tuples(admissions, tuples).T  # (T, Q)
    if cells.any_cut is not None:
        if cells.any_cut.shape[1] != workload.m:
            raise ValueError(f"the cells have bits of {cells.any_cut.shape[1]} cuts, the workload {workload.m}")
        reads = tree_reads & ~cut_skipped(workload, cells.any_cut, cells.all_cut)
    else:
        reads = tree_reads
    packed = pk.pack(reads)  # (T, words)

    def group_reads(group: np.ndarray) -> np.ndarray:
        """The packed reads of a block made of cells `group` (indices)."""
        if cells.any_cut is None:
            return np.bitwise_or.reduce(packed[group], axis=0)
        union = tree_reads[group].any(axis=0)
        skip = cut_skipped(workload, cells.any_cut[group].any(axis=0, keepdims=True),
                           cells.all_cut[group].all(axis=0, keepdims=True))[0]
        return pk.pack((union & ~skip)[None, :])[0]

    finished: list[_Block] = []
    for cell in np.flatnonzero(rows >= block_rows).tolist():
        n = int(rows[cell]) // block_rows
        base, extra = divmod(int(rows[cell]), n)
        for p in range(n):
            finished.append(_Block((cell, p), base + (p < extra), packed[cell], owner=cell, piece=p))

    small = np.flatnonzero(rows < block_rows)
    merging = _Merging(rows[small], packed[small], pk, block_rows, lambda g: group_reads(small[g]),
                       None if cells.span is None else cells.span[small])
    if within_first_tree:
        groups, leftover = _merge_by_first_leaf(tuples[small, 0], merging, progress)
    else:
        groups, leftover = _merge_small(merging, progress)
    for g in groups:
        group = small[g]
        finished.append(_Block((int(group.min()), 0), int(rows[group].sum()), group_reads(group),
                               cells=group.tolist()))
    if leftover is not None:
        group = small[leftover]
        size = int(rows[group].sum())
        union = group_reads(group)
        if not finished:
            finished.append(_Block((int(group.min()), 0), size, union, cells=group.tolist()))
        else:
            finished.sort(key=lambda b: b.key)
            b_rows = np.array([b.rows for b in finished], dtype=np.float64)
            b_reads = np.stack([b.reads for b in finished])
            added = ((b_rows + size) * pk.weight(b_reads | union)
                     - b_rows * pk.weight(b_reads) - size * pk.weight(union[None, :]))
            target = finished[int(np.lexsort((np.arange(b_rows.size), b_rows, added))[0])]
            target.rows += size
            target.reads = target.reads | union
            target.cells = (target.cells or []) + group.tolist()
            if target.piece < 0:  # a merged block is numbered by its lowest cell
                target.key = (min(target.key[0], int(group.min())), 0)

    finished.sort(key=lambda b: b.key)
    first = np.zeros(n_tuples, dtype=np.int64)
    n_blocks = np.ones(n_tuples, dtype=np.int64)
    for number, block in enumerate(finished):
        if block.piece == 0:
            first[block.owner] = number
            n_blocks[block.owner] = int(rows[block.owner]) // block_rows
        for cell in block.cells or ():
            first[cell] = number
    return PandoBlocks(tuples, first, n_blocks, rows, np.array([b.rows for b in finished], dtype=np.int64))


class _Merging(NamedTuple):
    """What step 2 of `merge_cells` merges: small cells' sizes and packed reads,
    `group_reads(positions) -> packed reads` of a block made of those cells,
    and their spans (None: unknown)."""

    sizes: np.ndarray
    packed: np.ndarray
    pk: PackedUnions
    block_rows: int
    group_reads: Callable[[np.ndarray], np.ndarray]
    spans: np.ndarray | None = None

    def subset(self, positions: np.ndarray) -> "_Merging":
        reads = self.group_reads
        return self._replace(sizes=self.sizes[positions], packed=self.packed[positions],
                             group_reads=lambda g: reads(positions[g]),
                             spans=None if self.spans is None else self.spans[positions])


def _merge_by_first_leaf(first_leaf: np.ndarray, merging: _Merging,
                         progress: bool) -> tuple[list[np.ndarray], np.ndarray | None]:
    """`_merge_small` per leaf of tree 0 (`first_leaf`, per cell), then once more
    over the cells every leaf left unfinished (the outlier blocks); positions
    into `merging.sizes`, as `_merge_small` gives them."""
    groups, unfinished = [], []
    first_leaves = np.unique(first_leaf)
    for leaf in first_leaves:
        cells = np.flatnonzero(first_leaf == leaf)
        done, left = _merge_small(merging.subset(cells), False, quiet=True)
        groups += [cells[g] for g in done]
        if left is not None:
            unfinished.append(cells[left])
    log.info("pando bottom-up merges inside %d leaves of tree 0: %d blocks finished, %d cells left for outlier "
             "blocks", first_leaves.size, len(groups), sum(u.size for u in unfinished))
    if not unfinished:
        return groups, None
    pooled = np.sort(np.concatenate(unfinished))
    done, left = _merge_small(merging.subset(pooled), progress)
    groups += [pooled[g] for g in done]
    return groups, None if left is None else pooled[left]


def _merge_small(merging: _Merging, progress: bool, quiet: bool = False) -> tuple[list[np.ndarray], np.ndarray | None]:
    """Greedy merging of blocks of < block_rows rows (step 2 of
    `merge_cells`): the finished groups and the unfinished leftover, as
    arrays of positions into `merging.sizes`.

    A block's index is that of its lowest cell (a merge keeps the lower
    index). Every active block keeps its nearest partner (least added cost,
    then narrowest merged span, then lowest index) with that cost and span,
    so the pair merged is the one of least cost and, among ties, of
    narrowest span and then lowest (lower index, higher index). After a
    merge only the rows of the merged block and of the blocks whose partner
    was one of the two are recomputed: any other block's costs are unchanged
    but the one with the merged block, which is checked against its best.

    Up to _CACHED_PAIRS blocks, every pair's cost is kept in an (n, n) matrix
    (8 n^2 bytes), so finding a stale block's new partner is a row minimum
    instead of n union weights; the values, and so the merges, are the same.
    `quiet`: no log line at the end (the caller sums up several runs)."""
    pk, block_rows = merging.pk, merging.block_rows
    n = merging.sizes.shape[0]
    if n == 0:
        return [], None
    size = merging.sizes.astype(np.float64)
    packed = merging.packed.copy()
    cost = size * pk.weight(packed)  # |B| w(reads_B)
    members = [[i] for i in range(n)]
    active = np.ones(n, dtype=bool)
    partner = np.zeros(n, dtype=np.int64)
    best = np.full(n, np.inf)
    best_span = np.zeros(n)
    spans = np.zeros((n, 2)) if merging.spans is None else merging.spans.copy()
    lo, hi = spans[:, 0], spans[:, 1]  # views: a merge updates them in place

    def added(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        # Symmetric term by term, so added(a, b) == added(b, a) exactly.
        union_w = pk.weight(packed[rows][:, None, :] | packed[cols][None, :, :])
        return (size[rows][:, None] + size[cols][None, :]) * union_w - (cost[rows][:, None] + cost[cols][None, :])

    def span(rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        # fmax / fmin skip a cell without values (NaN); two of them span 0
        width = np.fmax(hi[rows][:, None], hi[cols][None, :]) - np.fmin(lo[rows][:, None], lo[cols][None, :])
        return np.nan_to_num(width, nan=0.0)

    def nearest(loss: np.ndarray, width: np.ndarray) -> np.ndarray:
        # per row: least loss, then narrowest span, then the first column
        return np.argmin(np.where(loss == loss.min(axis=1, keepdims=True), width, np.inf), axis=1)

    pairs = None
    if n <= _CACHED_PAIRS:
        pairs = np.empty((n, n))
        everyone = np.arange(n)
        for s in range(0, n, _PAIR_CHUNK):
            pairs[s:s + _PAIR_CHUNK] = added(everyone[s:s + _PAIR_CHUNK], everyone)
        np.fill_diagonal(pairs, np.inf)  # not with itself

    def find_partners(rows: np.ndarray, act: np.ndarray) -> None:
        for s in range(0, rows.size, _PAIR_CHUNK):
            r = rows[s:s + _PAIR_CHUNK]
            if pairs is not None:  # inactive columns hold inf
                loss, cols = pairs[r], np.arange(n)
            else:
                loss, cols = added(r, act), act
                loss[np.arange(r.size), np.searchsorted(act, r)] = np.inf  # not with itself
            width = span(r, cols)
            j = nearest(loss, width)
            at = np.arange(r.size)
            partner[r], best[r], best_span[r] = cols[j], loss[at, j], width[at, j]

    find_partners(np.arange(n), np.arange(n))
    finished: list[np.ndarray] = []
    n_active = n
    reporter = _Progress(progress, "pando bottom-up merges", "merge", 10 * _LOG_EVERY)
    while n_active > 1:
        i = int(np.argmin(np.where(best == best.min(), best_span, np.inf)))
        a, b = sorted((i, int(partner[i])))
        size[a] += size[b]
        members[a] += members[b]
        lo[a], hi[a] = np.fmin(lo[a], lo[b]), np.fmax(hi[a], hi[b])
        # from the merged block's own cut bits, which may admit more queries than either part
        packed[a] = merging.group_reads(np.array(members[a], dtype=np.int64))
        cost[a] = size[a] * pk.weight(packed[a][None, :])[0]
        active[b], best[b] = False, np.inf
        n_active -= 1
        if size[a] >= block_rows:
            finished.append(np.array(sorted(members[a]), dtype=np.int64))
            active[a], best[a] = False, np.inf
            n_active -= 1
        if pairs is not None:
            pairs[b, :] = pairs[:, b] = np.inf
            if not active[a]:
                pairs[a, :] = pairs[:, a] = np.inf
        act = np.flatnonzero(active)
        stale = (partner[act] == a) | (partner[act] == b)
        if active[a]:
            pos = int(np.searchsorted(act, a))
            stale[pos] = False
            loss = added(np.array([a]), act)[0]
            loss[pos] = np.inf
            width = span(np.array([a]), act)[0]
            if pairs is not None:
                pairs[a, act] = pairs[act, a] = loss
            j = int(nearest(loss[None, :], width[None, :])[0])
            partner[a], best[a], best_span[a] = act[j], loss[j], width[j]
            # the same order as nearest: cost, span, then the lower index
            closer = ~stale & ((loss < best[act])
                               | ((loss == best[act]) & ((width < best_span[act])
                                                         | ((width == best_span[act]) & (a < partner[act])))))
            closer[pos] = False
            partner[act[closer]], best[act[closer]], best_span[act[closer]] = a, loss[closer], width[closer]
        if stale.any():
            find_partners(act[stale], act)
        reporter.step(f"{n_active} blocks unfinished")
    if not quiet:
        reporter.done(f"{len(finished)} blocks finished")
    if n_active == 1:
        return finished, np.array(sorted(members[int(np.flatnonzero(active)[0])]), dtype=np.int64)
    return finished, None


# ---------------------------------------------------------------------------
# Truncation (§6.2, last paragraph)


def _mapped_tuples(blocks: PandoBlocks, leaf_maps: Sequence[np.ndarray] | None) -> np.ndarray:
    """blocks.tuples over the leaves of truncated trees (leaf_maps: old -> new per tree)."""
    if leaf_maps is None:
        return blocks.tuples
    if len(leaf_maps) != blocks.k:
        raise ValueError(f"{len(leaf_maps)} leaf maps for {blocks.k} trees")
    return np.stack([np.asarray(leaf_maps[i], dtype=np.int64)[blocks.tuples[:, i]] for i in range(blocks.k)],
                    axis=1)


def leaf_block_sets(trees: Sequence[Node], blocks: PandoBlocks,
                    leaf_maps: Sequence[np.ndarray] | None = None) -> tuple[tuple[np.ndarray, ...], ...]:
    """Per tree, per leaf id, the sorted blocks the leaf points to: those of the
    cells whose entry for that tree is the leaf (empty for a leaf with no rows).
    `leaf_maps` (from `truncate`) when the trees are truncated ones."""
    if len(trees) != blocks.k:
        raise ValueError(f"{len(trees)} trees for {blocks.k}-tuples")
    tuples = _mapped_tuples(blocks, leaf_maps)
    tuple_idx, block = blocks.tuple_block_pairs()
    out = []
    for i, root in enumerate(trees):
        n_leaves = _leaf_count(root)
        pairs = np.unique(np.stack([tuples[tuple_idx, i], block], axis=1), axis=0) \
            if block.size else np.zeros((0, 2), np.int64)
        bounds = np.searchsorted(pairs[:, 0], np.arange(n_leaves + 1))
        out.append(tuple(pairs[bounds[leaf]:bounds[leaf + 1], 1].copy() for leaf in range(n_leaves)))
    return tuple(out)


class Truncated(NamedTuple):
    """Truncated trees and, per tree, old leaf id -> new leaf id ((old leaves,) int64)."""

    trees: tuple[Node, ...]
    leaf_maps: tuple[np.ndarray, ...]


class _Merged(NamedTuple):
    """A subtree truncated into one leaf: its old leaves and their block set."""

    old: list[int]
    idx: list[np.ndarray]
    rows: int
    blocks: tuple[int, ...]


def truncate(trees: Sequence[Node], blocks: PandoBlocks) -> Truncated:
    """Remove every cut whose two children (after truncating below them) are
    leaves pointing to the same set of blocks (`leaf_block_sets`), bottom-up,
    so that no two sibling leaves share a block set. A merged leaf keeps its
    old leaves' vectors and rows; leaves are renumbered 0.. left to right.

    The router over truncated trees (`block_reads(..., leaf_maps=..., per_tree=True)`)
    reads what it read over the untruncated ones: a query that admits one
    child of a removed cut gets the same blocks from the merged leaf (a query
    both implied by and disjoint with a cut, so unsatisfiable, skipped both
    children and now reads their blocks). Inserts
    (§7) route through the untruncated trees and `blocks`' cell -> block map.
    """
    sets = leaf_block_sets(trees, blocks)
    out_trees, maps = [], []
    for root, tree_sets in zip(trees, sets):
        keys = [tuple(s.tolist()) for s in tree_sets]
        shape = _truncated(root, keys)
        leaf_map = np.full(len(keys), -1, dtype=np.int64)
        counter = [0]
        out_trees.append(_rebuild(shape, leaf_map, counter))
        maps.append(leaf_map)
    return Truncated(tuple(out_trees), tuple(maps))


def _truncated(node: Node, keys: list[tuple[int, ...]]):
    """A `_Merged` leaf or (cut, left, right). Recursive: depth is bounded by the
    number of cuts (a cut repeats on no path of a tree with non-empty leaves)."""
    if node.is_leaf:
        return _Merged([node.leaf_id], [node.vector_indices], node.rows, keys[node.leaf_id])
    left, right = _truncated(node.left, keys), _truncated(node.right, keys)
    if isinstance(left, _Merged) and isinstance(right, _Merged) and left.blocks == right.blocks:
        return _Merged(left.old + right.old, left.idx + right.idx, left.rows + right.rows, left.blocks)
    return node.cut, left, right


def _rebuild(shape, leaf_map: np.ndarray, counter: list[int]) -> Node:
    if isinstance(shape, _Merged):
        new_id = counter[0]
        counter[0] += 1
        leaf_map[shape.old] = new_id
        return Node.leaf(new_id, np.sort(np.concatenate(shape.idx)), shape.rows)
    cut, left, right = shape
    left_node = _rebuild(left, leaf_map, counter)  # left first: ids go left to right
    return Node.split(cut, left_node, _rebuild(right, leaf_map, counter))


# ---------------------------------------------------------------------------
# What a query reads


def block_reads(
    trees: Sequence[Node],
    workload: Workload,
    blocks: PandoBlocks,
    leaf_maps: Sequence[np.ndarray] | None = None,
    per_tree: bool = False,
) -> np.ndarray:
    """(Q, n_blocks) bool: the blocks each query reads.

    Default: block B is read when some cell of B is admitted by every tree
    (the cost `bottom_up_blocks` minimizes). ``per_tree=True``: the paper's
    §5 router, B is read when every tree has an admitted leaf pointing to B
    (possibly through different cells of B). `leaf_maps` (from `truncate`)
    when `trees` are the truncated trees.
    """
    if len(trees) != blocks.k:
        raise ValueError(f"{len(trees)} trees for {blocks.k}-tuples")
    tuples = _mapped_tuples(blocks, leaf_maps)
    tuple_idx, block = blocks.tuple_block_pairs()
    if not per_tree:
        return reads_per_block(tuple_reads(trees, workload, tuples), tuple_idx, block, blocks.n_blocks)
    out = np.ones((workload.n_queries, blocks.n_blocks), dtype=bool)
    for i, adm in enumerate(admitted(trees, workload)):
        out &= reads_per_block(adm[:, tuples[:, i]], tuple_idx, block, blocks.n_blocks)
    return out


def rows_read(
    trees: Sequence[Node],
    workload: Workload,
    blocks: PandoBlocks,
    leaf_maps: Sequence[np.ndarray] | None = None,
    per_tree: bool = False,
) -> np.ndarray:
    """(Q,) int64: rows each query reads (unweighted), per `block_reads`."""
    return block_reads(trees, workload, blocks, leaf_maps, per_tree).astype(np.int64) @ blocks.block_rows


def estimated_rows_read(vc: VectorCounts, workload: Workload, trees: Sequence[Node], blocks: PandoBlocks,
                        order: np.ndarray | None = None) -> np.ndarray:
    """(Q,) int64: the rows each query reads through the catalog's router: the
    blocks with a cell every tree admits (`block_reads`) that the per-block
    cut bits do not rule out (a query implies a cut no row of the block
    satisfies, or is disjoint with one every row satisfies). `trees` are
    those `blocks` was made from.

    A cell cut into several blocks is cut along the sort column. `order`
    ((n,) int per vector, `sort_ranks`: how many of the sort column's range
    cuts its rows lie above) places its vectors along it: block j of n gets
    the vectors whose rows, in that order, overlap its j-th n-th of the
    cell's rows (vectors of one rank all overlap the same blocks). Without
    `order`, each block is counted as holding all the cell's vectors: an
    estimate from above, which makes a tree with big leaves look worse than
    it is."""
    tuple_of_vector, tuples = k_tuples(trees, vc)
    if not np.array_equal(tuples, blocks.tuples):
        raise ValueError("the blocks were not made from these trees")
    cells = _cells_of_vectors(vc, tuple_of_vector, tuples)
    tuple_idx, block = blocks.tuple_block_pairs()
    block_any = np.zeros((blocks.n_blocks, vc.m), dtype=bool)
    block_all = np.ones((blocks.n_blocks, vc.m), dtype=bool)
    whole = np.ones(tuple_idx.shape[0], dtype=bool)  # the (cell, block) pairs that get the cell's bits
    if order is not None:
        whole = blocks.tuple_n_blocks[tuple_idx] == 1
        _split_cells_by_order(vc, tuple_of_vector, blocks, np.asarray(order), block_any, block_all)
    np.logical_or.at(block_any, block[whole], cells.any_cut[tuple_idx[whole]])
    np.logical_and.at(block_all, block[whole], cells.all_cut[tuple_idx[whole]])
    reads = block_reads(trees, workload, blocks) & ~cut_skipped(workload, block_any, block_all).T
    return reads.astype(np.int64) @ blocks.block_rows


def _split_cells_by_order(vc: VectorCounts, tuple_of_vector: np.ndarray, blocks: PandoBlocks, order: np.ndarray,
                          block_any: np.ndarray, block_all: np.ndarray) -> None:
    """The bits of the blocks of every cell with n > 1 blocks, its vectors
    placed along the sort column by `order` (see `estimated_rows_read`);
    updates `block_any` / `block_all` in place."""
    held = np.flatnonzero((tuple_of_vector >= 0) & (vc.counts > 0))
    by_cell = held[np.argsort(tuple_of_vector[held], kind="stable")]  # the vectors of each cell together
    bounds = np.searchsorted(tuple_of_vector[by_cell], np.arange(blocks.tuples.shape[0] + 1))
    for cell in np.flatnonzero(blocks.tuple_n_blocks > 1):
        mine = by_cell[bounds[cell]:bounds[cell + 1]]
        ranks = order[mine]
        rank_values, rank_of = np.unique(ranks, return_inverse=True)
        rows = np.bincount(rank_of, weights=vc.counts[mine], minlength=rank_values.size)
        end = np.cumsum(rows)
        start = end - rows  # rows of rank r lie in [start[r], end[r]) of the cell's order
        n, total = int(blocks.tuple_n_blocks[cell]), end[-1]
        edges = np.arange(n + 1) * total / n
        first = int(blocks.tuple_first_block[cell])
        for j in range(n):
            overlap = (start < edges[j + 1]) & (end > edges[j])
            vectors = mine[overlap[rank_of]]
            block_any[first + j] |= vc.vectors[vectors].any(axis=0)
            block_all[first + j] &= vc.vectors[vectors].all(axis=0)


def fallback_blocks(blocks: PandoBlocks, n_leaves: int) -> np.ndarray:
    """(n_leaves,) int64: for every leaf of tree 0, the first block of its largest
    cell (ties: the lowest cell); a leaf without cells gets the largest cell's.

    Where a row goes whose k-tuple holds no row of the sample the trees were
    built on: next to rows it shares tree 0's leaf with. Any block keeps
    skipping sound, since the catalog's lineage is taken from the rows
    written; this one grows no leaf's block set in tree 0."""
    if blocks.tuples.shape[0] == 0:
        return np.zeros(n_leaves, dtype=np.int64)
    largest_first = np.lexsort((np.arange(blocks.tuple_rows.shape[0]), -blocks.tuple_rows))
    out = np.full(n_leaves, blocks.tuple_first_block[largest_first[0]], dtype=np.int64)
    for cell in largest_first[::-1]:  # the largest cell is written last and wins
        out[blocks.tuples[cell, 0]] = blocks.tuple_first_block[cell]
    return out


_PLACE_CHUNK = 256  # unseen cells placed between two updates of the blocks' reads and sizes


def place_cells(
    new_reads: np.ndarray,
    new_rows: np.ndarray,
    planned_reads: np.ndarray,
    block_rows: np.ndarray,
    weights: np.ndarray,
) -> np.ndarray:
    """(U,) int64: the block for each of U cells the plan never saw (k-tuples of
    rows outside the sample), by §6.2's merge cost. Adding a cell of r rows
    read by queries A to a block of R rows read by queries B adds

        R w(A - B) + r w(B - A)

    rows read (the queries that newly scan the block, and those that now also
    scan the cell's rows). Cells are placed largest first, `_PLACE_CHUNK` at a
    time, each chunk seeing the blocks as the chunks before left them; ties go
    to the lowest block.

    new_reads: (Q, U) bool, the queries each new cell is admitted by (every tree).
    new_rows: (U,) rows of each new cell. planned_reads: (Q, n_blocks) bool and
    block_rows: (n_blocks,) the blocks as planned. weights: (Q,) query weights.
    """
    new_reads = np.asarray(new_reads, dtype=bool)
    new_rows = np.asarray(new_rows, dtype=np.float64)
    reads = np.array(planned_reads, dtype=bool).T.copy()  # (n_blocks, Q), updated as cells land
    rows = np.array(block_rows, dtype=np.float64)
    w = np.asarray(weights, dtype=np.float64)
    n_new = new_rows.shape[0]
    out = np.zeros(n_new, dtype=np.int64)
    if n_new == 0:
        return out
    if rows.shape[0] == 0:
        raise ValueError("no block to place cells in")
    order = np.lexsort((np.arange(n_new), -new_rows))  # largest first, ties by index
    for start in range(0, n_new, _PLACE_CHUNK):
        chunk = order[start:start + _PLACE_CHUNK]
        a = new_reads[:, chunk].T.astype(np.float64)  # (c, Q)
        both = (a * w) @ reads.T.astype(np.float64)  # (c, n_blocks): w(A & B)
        only_new = (a @ w)[:, None] - both  # w(A - B)
        only_block = (reads.astype(np.float64) @ w)[None, :] - both  # w(B - A)
        cost = rows[None, :] * only_new + new_rows[chunk, None] * only_block
        chosen = np.argmin(np.round(cost, 6), axis=1)  # rounded: ties are exact, not float noise
        out[chunk] = chosen
        np.add.at(rows, chosen, new_rows[chunk])
        np.logical_or.at(reads, chosen, new_reads[:, chunk].T)
    return out


# ---------------------------------------------------------------------------
# The number of trees (§6.3)

AUTO_TREES = (1, 2, 3, 4)
AUTO_TOLERANCE = 0.02


def grow_layout(vc: VectorCounts, workload: Workload, k: int, block_rows: int, max_tuples: int,
                progress: bool = False, max_threshold: int | None = None, first_tree: Node | None = None):
    """(Grown, PandoBlocks, Truncated): the three phases of §6 on (vector, count) pairs
    (`max_threshold`: see `grow_within_bound`). `first_tree` (mto's tree,
    `mto_tree`): tree 0 is that tree, the others grow around it and blocks
    stay inside its leaves but for outlier blocks; None: all k trees grow
    together."""
    grown = grow_within_bound(vc, workload, k, block_rows, max_tuples, progress=progress,
                              max_threshold=max_threshold, first_tree=first_tree)
    blocks = bottom_up_blocks(vc, workload, grown.trees, block_rows, progress=progress,
                              within_first_tree=first_tree is not None)
    return grown, blocks, truncate(grown.trees, blocks)


def rows_read_share(vc, workload, trees, blocks, order: np.ndarray | None = None) -> float:
    """The estimated share of the table's rows a training query reads (weighted
    mean; `order`: see `estimated_rows_read`)."""
    total = float(vc.counts.sum())
    if total == 0 or workload.n_queries == 0:
        return 0.0
    reads = estimated_rows_read(vc, workload, trees, blocks, order)
    return float(reads @ workload.weights / workload.weights.sum() / total)


FIRST_TREES = ("grown", "mto")  # the first_tree setting: tree 0 grown with the others, or mto's tree


def mto_tree(vc: VectorCounts, workload: Workload, block_rows: int) -> Node:
    """mto's tree: the greedy tree with the router's objective and leaves of >= one block."""
    return greedy_tree(vc, workload, block_rows, objective="router")


def mto_as_cells(vc, workload, block_rows: int, root: Node | None = None):
    """mto's tree (`root`, when already made) and its leaf blocks as a one-tree
    Pando layout, to compare k = 1 with the others."""
    root = mto_tree(vc, workload, block_rows) if root is None else root
    by_id = sorted(leaves(root), key=lambda leaf: leaf.leaf_id)
    split = leaf_blocks(root, block_rows)
    rows = np.array([leaf.rows for leaf in by_id], dtype=np.int64)
    sizes = np.concatenate([np.full(n, r // n) + (np.arange(n) < r % n) for r, n in zip(rows, split.n_blocks)])
    held = rows > 0
    blocks = PandoBlocks(np.flatnonzero(held)[:, None], split.first_block[held], split.n_blocks[held], rows[held],
                         sizes)
    return (root,), blocks


def held_out_halves(workload):
    """The training references split in two `Workload`s (`reference_halves`) to
    fit on one and measure on the other, or None when they cannot be split."""
    half = reference_halves(workload)
    if half is None:
        return None
    return tuple(Workload(workload.implies[half == h], workload.disjoint[half == h], workload.weights[half == h])
                 for h in (0, 1))


def restricted(workload: Workload, allowed: np.ndarray) -> Workload:
    """The workload as if only the `allowed` cuts existed: no query implies or
    is disjoint with any other cut, so no split, merge or cut bit uses it."""
    allowed = np.asarray(allowed, dtype=bool)
    return Workload(workload.implies & allowed, workload.disjoint & allowed, workload.weights)


def choose_k(vc: VectorCounts, workload: Workload, block_rows: int, max_tuples: int,
             progress: bool = False, half_cuts: np.ndarray | None = None, first_tree: str = "grown",
             order: np.ndarray | None = None) -> tuple[int, list[list], str, tuple | None]:
    """Pando §6.3, "evaluate for increasing k until the performance flattens",
    on queries the layout was not fitted to: for k = 1..4, the layout fitted
    to one half of the training references (`held_out_halves`) is measured
    by the estimated share of rows the other half reads, both ways round,
    and the smallest k within AUTO_TOLERANCE of the best mean is kept. The
    search stops at the first k that reads more than the best so far by
    over AUTO_TOLERANCE (on B1 and TPC-DS at SF 1 no larger k then won;
    docs/benchmarks.md): a k that is only flat goes on, since TPC-DS's
    date_dim and inventory gain at k = 3 after a flat k = 2.
    Measured on the queries it was fitted to, a larger k usually looks
    better: more trees fit the training literals more closely, while new
    literals of the same templates may read more (B1, docs/benchmarks.md).
    Without two distinct references the training queries measure.

    `half_cuts` ((2, m) bool: the cuts each half's own queries make, see
    `PlanWorkload.held_out_cuts`) keeps the other half's literals out of a
    fit and of the cut bits that measure it; without it every fit sees
    every cut, and the held-out estimates are optimistic.

    `order` (`estimated_rows_read`) places the rows of a cell cut into
    several blocks along the sort column, as the blocks will be; without it
    a k whose cells span several blocks (k = 1 most) is judged from above.

    A k whose trees make more than `max_tuples` k-tuples with leaves of one
    block (`block_rows`, the largest threshold Pando's top-down assumes), on
    a half or on the whole workload, is skipped: its figure is None, and the
    rule above applies to the other k.

    Returns k, the figures [[k, share or None], ...], what measured them, and
    the chosen k's `grow_layout` on the whole workload (None for k = 1: mto's plan)."""
    halves = held_out_halves(workload)
    if halves is None:
        folds = [(workload, workload)]
    elif half_cuts is None:
        folds = [halves, halves[::-1]]
    else:  # each half sees only the cuts its own queries make
        folds = [(restricted(halves[h], half_cuts[h]), restricted(halves[1 - h], half_cuts[h])) for h in (0, 1)]
    if first_tree not in FIRST_TREES:
        raise ValueError(f"first_tree is one of {', '.join(FIRST_TREES)}, not {first_tree!r}")
    mto_roots = [mto_tree(vc, fit_on, block_rows) for fit_on, _ in folds]  # k = 1, and tree 0 for "mto"
    figures, grown_on_all = [], {}
    for k in AUTO_TREES:
        shares = []
        try:
            for (fit_on, measure_on), root in zip(folds, mto_roots):
                if k == 1:
                    trees, blocks = mto_as_cells(vc, fit_on, block_rows, root)
                else:
                    layout = grow_layout(vc, fit_on, k, block_rows, max_tuples, progress, max_threshold=block_rows,
                                         first_tree=root if first_tree == "mto" else None)
                    if fit_on is workload:  # no halves: this is the layout to keep
                        grown_on_all[k] = layout
                    trees, blocks = layout[0].trees, layout[1]
                shares.append(rows_read_share(vc, measure_on, trees, blocks, order))
        except TupleBoundError as error:
            log.info("pando trees=auto: %s; k = %d skipped", error, k)
            figures.append([k, None])
            continue
        figures.append([k, round(float(np.mean(shares)), 6)])
        best = min(share for _, share in figures if share is not None)
        if figures[-1][1] > best * (1 + AUTO_TOLERANCE):  # worse than a smaller k: more trees stop paying
            log.info("pando trees=auto: k = %d reads more than the best k so far by over %.0f%% (%.4f against "
                     "%.4f); larger k not tried", k, 100 * AUTO_TOLERANCE, figures[-1][1], best)
            break
    measured_on = ("training queries" if halves is None else "held-out queries" if half_cuts is None
                   else "held-out queries, each half with its own cuts")
    tree0_of_all = None  # mto's tree on all the training queries, made when first needed
    while True:  # ends: k = 1 is never skipped
        measured = [(k, share) for k, share in figures if share is not None]
        best = min(share for _, share in measured)
        chosen = next(k for k, share in measured if share <= best * (1 + AUTO_TOLERANCE))  # the smallest
        if chosen == 1:
            return 1, figures, measured_on, None
        try:
            if chosen not in grown_on_all:  # fitted to halves: grow it on all the training queries
                if first_tree == "mto" and tree0_of_all is None:
                    tree0_of_all = mto_tree(vc, workload, block_rows)
                grown_on_all[chosen] = grow_layout(vc, workload, chosen, block_rows, max_tuples, progress,
                                                   max_threshold=block_rows, first_tree=tree0_of_all)
        except TupleBoundError as error:  # the whole workload makes more k-tuples than either half
            log.info("pando trees=auto: on all training queries %s; k = %d skipped", error, chosen)
            figures[AUTO_TREES.index(chosen)][1] = None
            continue
        return chosen, figures, measured_on, grown_on_all[chosen]
