"""Greedy qd-tree (MTO Section 2.1.3), its blocking map and router-style skipping."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.algorithms.fineblock import bottom_up
from layout_core.algorithms.qdtree import (
    Node,
    describe,
    greedy_tree,
    leaf_blocks,
    leaves,
    route_vectors,
    router_objective,
    single_leaf_tree,
    skipped_rows,
    tree_blocking_map,
    tree_from_json,
    tree_objective,
    tree_to_json,
    zero_cut_tree,
)
from layout_core.algorithms.types import BlockingMap, VectorCounts, Workload


def vcounts(vectors, counts) -> VectorCounts:
    vectors = np.asarray(vectors, dtype=bool)
    if vectors.ndim != 2:  # a 2-D array keeps its width, also with no rows
        vectors = vectors.reshape(len(counts), -1)
    return VectorCounts(vectors, np.asarray(counts, dtype=np.int64), np.ones(vectors.shape[1]))


def workload(m, implies=(), disjoint=(), n_queries=None, weights=None) -> Workload:
    """implies / disjoint: lists of (query, cut) pairs."""
    q = n_queries if n_queries is not None else 1 + max([p[0] for p in (*implies, *disjoint)], default=-1)
    imp = np.zeros((q, m), bool)
    dis = np.zeros((q, m), bool)
    for i, j in implies:
        imp[i, j] = True
    for i, j in disjoint:
        dis[i, j] = True
    return Workload(imp, dis, weights)


L, S = Node.leaf, Node.split

# Two cuts, four vectors: bits (cut0, cut1) and counts, 100 rows in all.
#   v0 = 11: 10 rows, v1 = 10: 20 rows, v2 = 01: 30 rows, v3 = 00: 40 rows
# Rows with bit 1 per cut: cut0 30 (v0, v1), cut1 40 (v0, v2).
VC4 = vcounts([[1, 1], [1, 0], [0, 1], [0, 0]], [10, 20, 30, 40])
# q0, q1 imply cut1 (a bit-0 row cannot match), q2 implies cut0.
WL4 = workload(2, implies=[(0, 1), (1, 1), (2, 0)])


# ---------------------------------------------------------------------------
# Hand-built trees


def test_cut1_is_best_at_root_then_cut0_below():
    # Root gains: cut0 -> q2 skips the 70 bit-0 rows = 70;
    #             cut1 -> q0 and q1 skip the 60 bit-0 rows = 120.
    # Left child {v0, v2}: cut0 lets q2 skip v2 (30). Right child {v1, v3}
    # (q0, q1 already skip it): cut0 lets q2 skip v3 (40).
    tree = greedy_tree(VC4, WL4, min_leaf_rows=10)
    expected = S(1, S(0, L(0, [0], 10), L(1, [2], 30)), S(0, L(2, [1], 20), L(3, [3], 40)))
    assert tree == expected
    assert tree_objective(VC4, tree, WL4) == 120 + 30 + 40


def test_min_leaf_rows_limits_splits():
    # 35: cut0 would leave 30 rows on its left -> only cut1 at the root, and
    # neither child (40, 60 rows) can be split into two halves of >= 35.
    assert greedy_tree(VC4, WL4, min_leaf_rows=35) == S(1, L(0, [0, 2], 40), L(1, [1, 3], 60))
    # 45: no cut leaves >= 45 rows on both sides -> one leaf.
    assert greedy_tree(VC4, WL4, min_leaf_rows=45) == L(0, [0, 1, 2, 3], 100)
    # 21: cut1 at the root; cut0 would leave 10 < 21 rows in the left child
    # and 20 < 21 rows in the right child.
    assert greedy_tree(VC4, WL4, min_leaf_rows=21) == S(1, L(0, [0, 2], 40), L(1, [1, 3], 60))


def test_min_leaf_rows_20_splits_only_the_right_child():
    # 20: the left child {v0: 10, v2: 30} cannot be cut on cut0 (10 < 20),
    # the right child {v1: 20, v3: 40} can.
    tree = greedy_tree(VC4, WL4, min_leaf_rows=20)
    assert tree == S(1, L(0, [0, 2], 40), S(0, L(1, [1], 20), L(2, [3], 40)))
    assert tree_objective(VC4, tree, WL4) == 120 + 40


def test_weights_change_the_root_cut():
    # q2 (implies cut0) weighted 2: cut0 gains 140 > 120.
    wl = workload(2, implies=[(0, 1), (1, 1), (2, 0)], weights=[1.0, 1.0, 2.0])
    tree = greedy_tree(VC4, wl, min_leaf_rows=35)
    # cut0 splits 30 / 70 and 30 < 35, so cut1 is still the only valid cut.
    assert tree.cut == 1
    tree = greedy_tree(VC4, wl, min_leaf_rows=10)
    assert tree.cut == 0
    # Left {v0, v1} (30 rows), right {v2, v3} (70 rows, q2 skips it already).
    # cut1 gains 2 * 20 = 40 on the left (q0, q1 skip v1) and 2 * 40 on the right.
    assert tree == S(0, S(1, L(0, [0], 10), L(1, [1], 20)), S(1, L(2, [2], 30), L(3, [3], 40)))
    assert tree_objective(VC4, tree, wl) == 2 * 70 + 2 * 20 + 2 * 40


def test_disjoint_only_workload_chooses_a_cut():
    # q0 is disjoint with cut0: rows with bit0 = 1 cannot match it.
    wl = workload(2, disjoint=[(0, 0)])
    tree = greedy_tree(VC4, wl, min_leaf_rows=1)
    # cut0 gains the 30 bit-1 rows; then nothing is left to gain.
    assert tree == S(0, L(0, [0, 1], 30), L(1, [2, 3], 70))
    assert tree_objective(VC4, tree, wl) == 30
    bm = tree_blocking_map(VC4, tree, block_rows=1000)
    assert skipped_rows(VC4, bm, wl).tolist() == [30]


def test_ties_go_to_the_lowest_cut():
    vc = vcounts([[1, 1], [1, 0], [0, 1], [0, 0]], [10, 10, 10, 10])
    wl = workload(2, implies=[(0, 0), (1, 1)])
    tree = greedy_tree(vc, wl, min_leaf_rows=1)
    assert tree.cut == 0
    assert tree == S(0, S(1, L(0, [0], 10), L(1, [1], 10)), S(1, L(2, [2], 10), L(3, [3], 10)))


def test_allowed_cuts_mask_and_indices():
    expected = S(0, L(0, [0, 1], 30), L(1, [2, 3], 70))
    assert greedy_tree(VC4, WL4, 10, allowed_cuts=np.array([True, False])) == expected
    assert greedy_tree(VC4, WL4, 10, allowed_cuts=np.array([0])) == expected
    assert greedy_tree(VC4, WL4, 10, allowed_cuts=np.array([], dtype=np.int64)) == single_leaf_tree(VC4)


def test_no_useful_cut_is_one_leaf():
    # Queries that do not interact with any cut.
    wl = workload(2, n_queries=3)
    assert greedy_tree(VC4, wl, 1) == L(0, [0, 1, 2, 3], 100)


def test_zero_cuts():
    vc = VectorCounts(np.zeros((1, 0), bool), np.array([100]), np.zeros(0))
    wl = Workload(np.zeros((4, 0), bool), np.zeros((4, 0), bool))
    tree = greedy_tree(vc, wl, 1)
    assert tree == zero_cut_tree(vc) == L(0, [0], 100)
    bm = tree_blocking_map(vc, tree, block_rows=30)
    assert bm.block_sizes().tolist() == [34, 33, 33]
    assert bm.row_start.tolist() == [0, 34, 67] and bm.row_end.tolist() == [34, 67, 100]
    assert bm.unions.shape == (3, 0)
    assert skipped_rows(vc, bm, wl).tolist() == [0, 0, 0, 0]


def test_empty_input():
    vc = VectorCounts(np.zeros((0, 2), bool), np.zeros(0, np.int64), np.ones(2))
    tree = greedy_tree(vc, WL4, 5)
    assert tree == L(0, [], 0)
    bm = tree_blocking_map(vc, tree, 10)
    assert bm.n_blocks == 0
    assert skipped_rows(vc, bm, WL4).tolist() == [0, 0, 0]


def test_blocking_map_of_hand_tree():
    tree = greedy_tree(VC4, WL4, min_leaf_rows=10)
    bm = tree_blocking_map(VC4, tree, block_rows=10)
    # Leaves {v0}: 1 block, {v2}: 3, {v1}: 2, {v3}: 4; blocks numbered by vector.
    assert bm.vector_index.tolist() == [0, 1, 1, 2, 2, 2, 3, 3, 3, 3]
    assert bm.block.tolist() == list(range(10))
    assert bm.row_start.tolist() == [0, 0, 10, 0, 10, 20, 0, 10, 20, 30]
    assert (bm.block_sizes() == 10).all()
    # q0, q1 skip v1 and v3 (60 rows); q2 skips v2 and v3 (70 rows).
    assert skipped_rows(VC4, bm, WL4).tolist() == [60, 60, 70]


def test_blocking_map_splits_a_leaf_across_vectors():
    bm = tree_blocking_map(VC4, single_leaf_tree(VC4), block_rows=45)
    # 100 rows -> 2 blocks of 50, rows taken v0, v1, v2, v3.
    assert bm.vector_index.tolist() == [0, 1, 2, 2, 3]
    assert bm.block.tolist() == [0, 0, 0, 1, 1]
    assert bm.row_start.tolist() == [0, 0, 0, 20, 0]
    assert bm.row_end.tolist() == [10, 20, 20, 30, 40]
    assert bm.unions.tolist() == [[True, True], [False, True]]
    wl = workload(2, implies=[(0, 0), (1, 1)], disjoint=[(2, 1), (3, 0)])
    # q0 (implies cut0) skips block 1 (no bit0 row); q3 (disjoint cut0) skips
    # nothing (block 1 has no bit0 row, but not every row has it either).
    assert skipped_rows(VC4, bm, wl).tolist() == [50, 0, 0, 0]


def test_describe_and_validation():
    tree = greedy_tree(VC4, WL4, min_leaf_rows=35)
    text = describe(tree, ["a > 1", "b = 2"])
    assert text.splitlines() == [
        "[b = 2] 100 rows",
        "  yes: leaf 0: 40 rows, 2 vectors",
        "  no:  leaf 1: 60 rows, 2 vectors",
    ]
    assert "cut 1" in describe(tree)
    with pytest.raises(ValueError):
        greedy_tree(VC4, WL4, min_leaf_rows=0)
    with pytest.raises(ValueError):
        greedy_tree(VC4, workload(3, implies=[(0, 2)]), 1)
    with pytest.raises(ValueError):
        Workload(np.zeros((2, 2), bool), np.zeros((2, 3), bool))
    with pytest.raises(ValueError):
        Workload(np.zeros((2, 2), bool), np.zeros((2, 2), bool), np.array([1.0, -1.0]))
    with pytest.raises(ValueError):
        Node(rows=3, cut=1, leaf_id=0, vector_indices=[0])
    with pytest.raises(ValueError):
        tree_blocking_map(VC4, tree, 0)


def test_progress_bar_runs(capsys):
    assert greedy_tree(VC4, WL4, 10, progress=True) == greedy_tree(VC4, WL4, 10)


# ---------------------------------------------------------------------------
# Brute-force references


def path_skips(wl: Workload, path) -> np.ndarray:
    """(Q,) bool: skip decided by a path [(cut, bit), ...]."""
    out = np.zeros(wl.n_queries, bool)
    for q in range(wl.n_queries):
        for j, bit in path:
            if (bit == 0 and wl.implies[q, j]) or (bit == 1 and wl.disjoint[q, j]):
                out[q] = True
    return out


def reference_greedy(vc: VectorCounts, wl: Workload, min_leaf_rows: int) -> Node:
    """Slow greedy: the gain of a cut is the increase of the brute-force
    path objective Σ_q w_q Σ_children rows · skip(q, child)."""
    counter = [0]

    def rows_of(idx):
        return sum(int(vc.counts[i]) for i in idx)

    def build(idx, path):
        total = rows_of(idx)
        here = float(np.dot(wl.weights, path_skips(wl, path))) * total
        best, best_gain = None, 0.0
        for j in range(vc.m):
            left = [i for i in idx if vc.vectors[i, j]]
            right = [i for i in idx if not vc.vectors[i, j]]
            if rows_of(left) < min_leaf_rows or rows_of(right) < min_leaf_rows:
                continue
            after = float(np.dot(wl.weights, path_skips(wl, path + [(j, 1)]))) * rows_of(left)
            after += float(np.dot(wl.weights, path_skips(wl, path + [(j, 0)]))) * rows_of(right)
            if after - here > best_gain:
                best, best_gain = j, after - here
        if best is None:
            counter[0] += 1
            return L(counter[0] - 1, idx, total)
        left = build([i for i in idx if vc.vectors[i, best]], path + [(best, 1)])
        right = build([i for i in idx if not vc.vectors[i, best]], path + [(best, 0)])
        return S(best, left, right)

    return build(list(range(vc.n)), [])


def brute_skipped_rows(vc: VectorCounts, bm: BlockingMap, wl: Workload) -> np.ndarray:
    out = np.zeros(wl.n_queries, np.int64)
    for b in range(bm.n_blocks):
        pieces = [(int(v), int(e - s)) for v, blk, s, e in
                  zip(bm.vector_index, bm.block, bm.row_start, bm.row_end) if blk == b]
        rows = [vc.vectors[v] for v, length in pieces for _ in range(length)]
        for q in range(wl.n_queries):
            skip = False
            for j in range(vc.m):
                if wl.implies[q, j] and not any(r[j] for r in rows):
                    skip = True
                if wl.disjoint[q, j] and all(r[j] for r in rows):
                    skip = True
            if skip:
                out[q] += len(rows)
    return out


@st.composite
def instances(draw):
    n = draw(st.integers(0, 8))
    m = draw(st.integers(0, 5))
    q = draw(st.integers(0, 5))
    bits = st.lists(st.booleans(), min_size=n * m, max_size=n * m)
    vectors = np.array(draw(bits), bool).reshape(n, m)
    counts = np.array(draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)), np.int64)
    qbits = st.lists(st.booleans(), min_size=q * m, max_size=q * m)
    implies = np.array(draw(qbits), bool).reshape(q, m)
    disjoint = np.array(draw(qbits), bool).reshape(q, m)
    weights = np.array(draw(st.lists(st.integers(0, 3), min_size=q, max_size=q)), float)
    vc = VectorCounts(vectors, counts, np.ones(m))
    return vc, Workload(implies, disjoint, weights), draw(st.integers(1, 40)), draw(st.integers(1, 40))


def leaf_paths(root: Node):
    """(leaf, path) pairs, path = [(cut, bit), ...]."""
    out, stack = [], [(root, [])]
    while stack:
        node, path = stack.pop()
        if node.is_leaf:
            out.append((node, path))
        else:
            stack.append((node.right, path + [(node.cut, 0)]))
            stack.append((node.left, path + [(node.cut, 1)]))
    return out


@settings(max_examples=300, deadline=None)
@given(instances())
def test_tree_properties(inst):
    vc, wl, min_leaf_rows, block_rows = inst
    tree = greedy_tree(vc, wl, min_leaf_rows)
    # Determinism and agreement with the slow reference.
    assert tree == greedy_tree(vc, wl, min_leaf_rows)
    assert tree == reference_greedy(vc, wl, min_leaf_rows)

    pairs = leaf_paths(tree)
    leaf_list = list(leaves(tree))
    assert [lf.leaf_id for lf in leaf_list] == list(range(len(leaf_list)))
    assert [p[0].leaf_id for p in pairs] == list(range(len(pairs)))
    # Every vector (hence every row) in exactly one leaf, consistent with its path.
    all_idx = np.concatenate([lf.vector_indices for lf in leaf_list])
    assert sorted(all_idx.tolist()) == list(range(vc.n))
    for lf, path in pairs:
        assert lf.rows == int(vc.counts[lf.vector_indices].sum())
        for j, bit in path:
            assert (vc.vectors[lf.vector_indices, j] == bool(bit)).all()
    total = int(vc.counts.sum())
    assert tree.rows == total
    if len(leaf_list) > 1:
        assert all(lf.rows >= min_leaf_rows for lf in leaf_list)
    else:
        assert leaf_list[0].rows == total

    # Objective: >= single leaf (0) and >= every valid one-cut tree.
    obj = tree_objective(vc, tree, wl)
    assert obj >= tree_objective(vc, single_leaf_tree(vc), wl) == 0
    for j in range(vc.m):
        left = vc.vectors[:, j]
        lr, rr = int(vc.counts[left].sum()), int(vc.counts[~left].sum())
        if lr >= min_leaf_rows and rr >= min_leaf_rows:
            stump = S(j, L(0, np.flatnonzero(left), lr), L(1, np.flatnonzero(~left), rr))
            assert obj >= tree_objective(vc, stump, wl)
    # Brute-force path objective agrees.
    brute = sum(float(np.dot(wl.weights, path_skips(wl, path))) * lf.rows for lf, path in pairs)
    assert obj == brute

    # Blocking map: every row exactly once, block sizes, no block straddles leaves.
    bm = tree_blocking_map(vc, tree, block_rows)
    assert bm == tree_blocking_map(vc, tree, block_rows)
    for v in range(vc.n):
        sel = bm.vector_index == v
        starts, ends = bm.row_start[sel], bm.row_end[sel]
        if vc.counts[v] == 0:
            assert not sel.any()
            continue
        assert starts[0] == 0 and ends[-1] == vc.counts[v]
        assert (starts[1:] == ends[:-1]).all() and (ends > starts).all()
    leaf_of_vector = np.empty(vc.n, np.int64)
    for lf in leaf_list:
        leaf_of_vector[lf.vector_indices] = lf.leaf_id
    sizes = bm.block_sizes()
    assert sizes.sum() == total
    for b in range(bm.n_blocks):
        owners = set(leaf_of_vector[bm.vector_index[bm.block == b]].tolist())
        assert len(owners) == 1
        leaf_rows = leaf_list[owners.pop()].rows
        if leaf_rows >= block_rows:
            assert block_rows <= sizes[b] < 2 * block_rows
        else:
            assert sizes[b] == leaf_rows
    # Blocks numbered by first piece; unions match the pieces.
    _, first = np.unique(bm.block, return_index=True)
    assert (np.diff(first) > 0).all()
    for b in range(bm.n_blocks):
        vs = bm.vector_index[bm.block == b]
        assert (bm.unions[b] == vc.vectors[vs].any(axis=0)).all()

    # Router-style skipping: matches brute force, at least the path skipping.
    skipped = skipped_rows(vc, bm, wl)
    assert skipped.tolist() == brute_skipped_rows(vc, bm, wl).tolist()
    assert float(np.dot(wl.weights, skipped)) >= obj


@settings(max_examples=150, deadline=None)
@given(instances())
def test_skipped_rows_brute_force_on_other_maps(inst):
    # Any blocking map (here the fine-blocking one) is evaluated the same way.
    vc, wl, min_size, _ = inst
    bm = bottom_up(vc, min_size)
    assert skipped_rows(vc, bm, wl).tolist() == brute_skipped_rows(vc, bm, wl).tolist()


@settings(max_examples=100, deadline=None)
@given(instances(), st.data())
def test_allowed_cuts_are_respected(inst, data):
    vc, wl, min_leaf_rows, _ = inst
    mask = np.array(data.draw(st.lists(st.booleans(), min_size=vc.m, max_size=vc.m)), bool)
    tree = greedy_tree(vc, wl, min_leaf_rows, allowed_cuts=mask)
    for _, path in leaf_paths(tree):
        assert all(mask[j] for j, _ in path)
    assert tree == greedy_tree(vc, wl, min_leaf_rows, allowed_cuts=np.flatnonzero(mask))


# ---------------------------------------------------------------------------
# Routing any vector, keeping the tree, blocks per leaf

# [cut1] yes: [cut0] yes: leaf 0 (v0, 10 rows) / no: leaf 1 (v2, 30 rows); no: leaf 2 (v1, v3, 60 rows)
HAND = S(1, S(0, L(0, [0], 10), L(1, [2], 30)), L(2, [1, 3], 60))


def test_route_vectors_follows_the_cuts_for_seen_and_unseen_vectors():
    # the four vectors of VC4, then 01 again (a duplicate) and the 3-bit vector 111 (extra bit ignored)
    assert route_vectors(HAND, VC4.vectors).tolist() == [0, 2, 1, 2]
    assert route_vectors(HAND, [[0, 1, 0], [1, 1, 1]]).tolist() == [1, 0]
    assert route_vectors(HAND, np.zeros((0, 2), bool)).tolist() == []
    with pytest.raises(ValueError, match="bit 1"):
        route_vectors(HAND, [[1]])


def test_tree_json_round_trip_keeps_cuts_rows_and_leaf_ids():
    data = tree_to_json(HAND)
    assert data == [1, 100, [0, 40, [0, 10], [1, 30]], [2, 60]]
    back = tree_from_json(data)
    assert route_vectors(back, VC4.vectors).tolist() == [0, 2, 1, 2]
    assert [(leaf.leaf_id, leaf.rows) for leaf in leaves(back)] == [(0, 10), (1, 30), (2, 60)]
    with pytest.raises(ValueError):
        tree_from_json([1, 2, 3])


def test_leaf_blocks_at_least_one_per_leaf_and_scaled_by_the_sample():
    plan = leaf_blocks(HAND, 20)  # 10 -> 1 (at least one), 30 -> 1, 60 -> 3
    assert plan.n_blocks.tolist() == [1, 1, 3]
    assert plan.first_block.tolist() == [0, 1, 2]
    assert plan.total == 5
    sampled = leaf_blocks(HAND, 20, scale=10.0)  # a 10% sample: 100, 300, 600 rows
    assert sampled.n_blocks.tolist() == [5, 15, 30]
    assert sampled.first_block.tolist() == [0, 5, 20]
    with pytest.raises(ValueError):
        leaf_blocks(HAND, 0)


# ---------------------------------------------------------------------------
# objective="router": splits scored by what the router skips (every known cut's bits)


def router_skip_brute(vc: VectorCounts, wl: Workload, idx, known) -> np.ndarray:
    """(Q,) bool: q skips the rows of vectors `idx` (count > 0 only) from their union/intersection bits."""
    rows = [vc.vectors[i] for i in idx if vc.counts[i] > 0]
    out = np.zeros(wl.n_queries, bool)
    for q in range(wl.n_queries):
        for k in known:
            if wl.implies[q, k] and not any(r[k] for r in rows):
                out[q] = True
            if wl.disjoint[q, k] and all(r[k] for r in rows):
                out[q] = True
    return out


def reference_router_greedy(vc, wl, min_leaf_rows, allowed, known) -> Node:
    counter = [0]

    def rows_of(idx):
        return sum(int(vc.counts[i]) for i in idx)

    def value(idx):
        return float(np.dot(wl.weights, router_skip_brute(vc, wl, idx, known))) * rows_of(idx)

    def build(idx):
        here = value(idx)
        best, best_gain = None, 0.0
        for j in allowed:
            left = [i for i in idx if vc.vectors[i, j]]
            right = [i for i in idx if not vc.vectors[i, j]]
            if rows_of(left) < min_leaf_rows or rows_of(right) < min_leaf_rows:
                continue
            gain = value(left) + value(right) - here
            if gain > best_gain:
                best, best_gain = j, gain
        if best is None or not known:
            counter[0] += 1
            return L(counter[0] - 1, idx, rows_of(idx))
        left = build([i for i in idx if vc.vectors[i, best]])
        right = build([i for i in idx if not vc.vectors[i, best]])
        return S(best, left, right)

    return build(list(range(vc.n)))


def test_router_objective_sees_an_equivalent_cut_the_path_does_not():
    # cut0 and cut1 hold the same rows (v0: 11, v1: 00); q0 implies cut1 only.
    vc = vcounts([[1, 1], [0, 0]], [10, 30])
    wl = workload(2, implies=[(0, 1)])
    only_cut0 = np.array([0])
    # The path objective cannot use cut0 for q0: no split at all.
    assert greedy_tree(vc, wl, 1, allowed_cuts=only_cut0) == L(0, [0, 1], 40)
    # The router keeps cut1's bits per block: splitting on cut0 lets q0 skip the 30 bit-0 rows.
    tree = greedy_tree(vc, wl, 1, allowed_cuts=only_cut0, objective="router")
    assert tree == S(0, L(0, [0], 10), L(1, [1], 30))
    assert router_objective(vc, tree, wl) == 30 and tree_objective(vc, tree, wl) == 0
    # ... unless the router does not keep cut1 (a qd-tree without those cuts)
    assert greedy_tree(vc, wl, 1, allowed_cuts=only_cut0, objective="router", known_cuts=only_cut0) == L(0, [0, 1], 40)
    with pytest.raises(ValueError):
        greedy_tree(vc, wl, 1, objective="blocks")


@settings(max_examples=300, deadline=None)
@given(instances(), st.data())
def test_router_greedy_matches_the_brute_force_reference(inst, data):
    vc, wl, min_leaf_rows, _ = inst
    allowed = np.array(data.draw(st.lists(st.booleans(), min_size=vc.m, max_size=vc.m)), bool)
    known = allowed | np.array(data.draw(st.lists(st.booleans(), min_size=vc.m, max_size=vc.m)), bool)
    tree = greedy_tree(vc, wl, min_leaf_rows, allowed_cuts=allowed, objective="router", known_cuts=known)
    assert tree == reference_router_greedy(vc, wl, min_leaf_rows, np.flatnonzero(allowed).tolist(),
                                           np.flatnonzero(known).tolist())
    leaf_list = list(leaves(tree))
    assert sorted(np.concatenate([lf.vector_indices for lf in leaf_list]).tolist()) == list(range(vc.n))
    obj = router_objective(vc, tree, wl, known)
    assert obj >= tree_objective(vc, tree, wl) if known.all() else True
    for j in np.flatnonzero(allowed):  # at least every valid one-cut tree
        left = vc.vectors[:, j]
        lr, rr = int(vc.counts[left].sum()), int(vc.counts[~left].sum())
        if lr >= min_leaf_rows and rr >= min_leaf_rows:
            stump = S(int(j), L(0, np.flatnonzero(left), lr), L(1, np.flatnonzero(~left), rr))
            assert obj >= router_objective(vc, stump, wl, known)
    # the blocks of a tree's leaves skip at least what the router objective counts
    bm = tree_blocking_map(vc, tree, 10 ** 6)  # one block per leaf
    if known.all():
        assert float(np.dot(wl.weights, skipped_rows(vc, bm, wl))) == obj
