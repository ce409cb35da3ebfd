"""Inputs of MTO's reorganization reward (§5.1.2): C, A and B of the old tree's subtrees."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.algorithms.qdtree import Node, greedy_tree, leaves
from layout_core.algorithms.types import Workload
from layout_core.flows.reorg.subtree_rewards import SubtreeBenefits, min_leaf_rows, old_subtrees
from tests.unit.algorithms.test_qdtree import vcounts, workload

L, S = Node.leaf, Node.split


# Cut 0 is the old version's cut ("region = EU"), cut 1 a cut of the new window ("year < 2000").
# Bits (cut0, cut1): v0 = 11, v1 = 10, v2 = 01, v3 = 00, 4 rows each.
VC = vcounts([[1, 1], [1, 0], [0, 1], [0, 0]], [4, 4, 4, 4])
# The old tree cuts on cut 0 only; as stored in the catalog, its leaves hold no vectors.
OLD = S(0, L(0, [], 0), L(1, [], 0))  # breadth-first: 0 root, 1 = EU (v0, v1), 2 = not EU (v2, v3)
# The new window filters by year only: q0 implies cut 1, q1 is disjoint with it.
NEW = workload(2, implies=[(0, 1)], disjoint=[(1, 1)])


def test_hand_computed_rewards_when_the_window_ignores_the_old_cut():
    # block_rows 2, full data: a leaf of 8 rows is 4 blocks, of 4 rows 2 blocks; leaves need >= 2 rows.
    benefits = SubtreeBenefits.of(VC, OLD, NEW, block_rows=2, scale=1.0)
    old = benefits.old
    assert old.children == ((1, 2), None, None)
    assert old.blocks == (8, 4, 4)
    # Both old leaves mix rows with and without bit 1: neither query can skip a block.
    assert old.reads == pytest.approx((8.0, 4.0, 4.0))
    assert [n.vector_indices.tolist() for n in old.nodes[1:]] == [[0, 1], [2, 3]]
    assert old.vector_indices(0).tolist() == [0, 1, 2, 3]

    # Root: T' cuts on year: {v0, v2} (every row bit 1, q1 skips its 4 blocks) and
    # {v1, v3} (no row bit 1, q0 skips its 4 blocks): each query reads 4 of 8.
    assert benefits.new_subtree(0) == S(1, L(0, [0, 2], 8), L(1, [1, 3], 8))
    assert benefits.reads_after(0) == pytest.approx(4.0)
    assert benefits.benefit(0) == pytest.approx(8.0 - 4.0)
    # EU child: T' over v0, v1 only cuts on year into 2 + 2 blocks; each query reads 2 of 4.
    # Its leaves name vc's vectors, not positions in the subset.
    assert benefits.new_subtree(1) == S(1, L(0, [0], 4), L(1, [1], 4))
    assert benefits.benefit(1) == pytest.approx(4.0 - 2.0)
    assert benefits.new_subtree(2) == S(1, L(0, [2], 4), L(1, [3], 4))
    assert benefits.benefit(2) == pytest.approx(4.0 - 2.0)


def test_a_window_query_on_the_old_cut_lowers_reads_and_benefit():
    # q2 implies cut 0: it skips the old tree's not-EU leaf (no row has bit 0).
    window = workload(2, implies=[(0, 1), (2, 0)], disjoint=[(1, 1)])
    benefits = SubtreeBenefits.of(VC, OLD, window, block_rows=2)
    # Reads per query: root 8, 8, 4; EU leaf 4, 4, 4; not-EU leaf 4, 4, 0.
    assert benefits.old.reads == pytest.approx((20 / 3, 4.0, 8 / 3))
    # T' at the root: year first (gain 16 rows > region's 8), then region under both sides
    # (q2 skips v2 or v3: gain 4), four leaves of one vector, 2 blocks each;
    # q0 reads v0, v2; q1 reads v1, v3; q2 reads v0, v1: 4 blocks each.
    assert benefits.new_subtree(0) == S(1, S(0, L(0, [0], 4), L(1, [2], 4)), S(0, L(2, [1], 4), L(3, [3], 4)))
    assert benefits.benefit(0) == pytest.approx(20 / 3 - 4.0)


def test_weights_average_the_reads_per_query():
    weighted = workload(2, implies=[(0, 1)], disjoint=[(1, 1)], weights=[3.0, 1.0])
    benefits = SubtreeBenefits.of(VC, OLD, weighted, block_rows=2)
    assert benefits.old.reads == pytest.approx((8.0, 4.0, 4.0))
    assert benefits.benefit(0) == pytest.approx(8.0 - (3 * 4 + 1 * 4) / 4)


def test_sampled_rows_count_as_scale_times_as_many():
    # scale 2.5, block_rows 4: a leaf of 8 sampled rows holds 20 rows, 5 blocks; one of
    # 4 sampled rows 10 rows, 2 blocks (floor of 2.5); leaves need ceil(4 / 2.5) = 2 sampled rows.
    assert min_leaf_rows(4, 2.5) == 2
    benefits = SubtreeBenefits.of(VC, OLD, NEW, block_rows=4, scale=2.5)
    assert benefits.old.blocks == (10, 5, 5)
    assert benefits.old.reads == pytest.approx((10.0, 5.0, 5.0))
    assert benefits.benefit(0) == pytest.approx(10.0 - 5.0)  # two leaves of 5 blocks, one read per query
    assert benefits.benefit(1) == pytest.approx(5.0 - 2.0)


def test_the_minimum_leaf_size_can_forbid_a_re_optimization():
    # block_rows 10 on a sample with scale 2: leaves need ceil(10 / 2) = 5 sampled rows, so the
    # EU child (8 rows) cannot be cut in two (4 + 4); an old leaf of 8 sampled rows is 16 // 10 = 1 block.
    assert min_leaf_rows(10, 2.0) == 5
    benefits = SubtreeBenefits.of(VC, OLD, NEW, block_rows=10, scale=2.0)
    assert benefits.old.blocks == (2, 1, 1)
    assert benefits.new_subtree(1).is_leaf
    assert benefits.benefit(1) == 0.0
    assert benefits.benefit(0) == pytest.approx(2.0 - 1.0)  # year split: 8 + 8 rows, 1 block each


def test_a_leaf_the_data_never_reaches_has_no_blocks():
    vc = vcounts([[1, 0], [0, 1], [0, 0]], [4, 4, 4])  # no row has both bits
    old = S(0, S(1, L(0, [], 0), L(1, [], 0)), L(2, [], 0))
    subtrees = old_subtrees(vc, old, NEW, block_rows=2)
    # breadth-first: 0 root, 1 = cut-1 node, 2 = leaf 2 (v1, v2), 3 = leaf 0 (empty), 4 = leaf 1 (v0)
    assert subtrees.children == ((1, 2), (3, 4), None, None, None)
    assert [n.leaf_id for n in subtrees.nodes[2:]] == [2, 0, 1]
    assert subtrees.blocks == (6, 2, 4, 0, 2)
    # leaf 1 (no bit 1): q0 skips it; leaf 2 mixes bit 1: both read it.
    assert subtrees.reads == pytest.approx((5.0, 1.0, 4.0, 0.0, 1.0))


def test_no_benefit_when_the_window_is_what_the_old_tree_was_grown_for():
    vc = vcounts([[1, 1, 0], [1, 0, 1], [0, 1, 1], [0, 0, 0], [1, 1, 1]], [5, 7, 3, 6, 4])
    window = workload(3, implies=[(0, 0), (1, 2)], disjoint=[(2, 1), (0, 2)])
    old = greedy_tree(vc, window, min_leaf_rows(3, 1.0), objective="router")
    assert not old.is_leaf  # the case is not trivial
    benefits = SubtreeBenefits.of(vc, old, window, block_rows=3)
    assert benefits.reads_after(0) == pytest.approx(benefits.old.reads[0])
    assert benefits.benefit(0) == pytest.approx(0.0)


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="cuts on cut 2"):
        old_subtrees(VC, S(2, L(0, [], 0), L(1, [], 0)), NEW, block_rows=2)
    with pytest.raises(ValueError, match="no queries"):
        old_subtrees(VC, OLD, Workload(np.zeros((0, 2), bool), np.zeros((0, 2), bool)), block_rows=2)
    with pytest.raises(ValueError, match="no queries"):
        old_subtrees(VC, OLD, workload(2, implies=[(0, 1)], weights=[0.0]), block_rows=2)
    with pytest.raises(ValueError, match="3 cuts"):
        old_subtrees(VC, OLD, workload(3, implies=[(0, 1)]), block_rows=2)
    with pytest.raises(ValueError, match="leaf ids"):
        old_subtrees(VC, S(0, L(0, [], 0), L(5, [], 0)), NEW, block_rows=2)
    with pytest.raises(ValueError, match="block_rows"):
        old_subtrees(VC, OLD, NEW, block_rows=0)
    with pytest.raises(ValueError, match="scale"):
        old_subtrees(VC, OLD, NEW, block_rows=2, scale=0.0)
    with pytest.raises(ValueError, match="node index 3"):
        SubtreeBenefits.of(VC, OLD, NEW, block_rows=2).benefit(3)


# ---------------------------------------------------------------------------
# Random inputs


@st.composite
def cases(draw):
    m = draw(st.integers(1, 3))
    k = draw(st.integers(1, m))  # the old version's cuts are 0..k-1
    n = draw(st.integers(0, 7))
    bits = st.lists(st.booleans(), min_size=m, max_size=m)
    vectors = np.array(draw(st.lists(bits, min_size=n, max_size=n)), dtype=bool).reshape(n, m)
    counts = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    vc = vcounts(vectors, counts)

    def matrices(queries):
        return [np.array(draw(st.lists(bits, min_size=queries, max_size=queries)), dtype=bool).reshape(queries, m)
                for _ in range(2)]

    old_window = Workload(*matrices(draw(st.integers(1, 3))))
    new_window = Workload(*matrices(draw(st.integers(1, 3))))
    block_rows = draw(st.integers(1, 4))
    scale = draw(st.sampled_from([1.0, 1.5, 3.0]))
    old = greedy_tree(vc, old_window, min_leaf_rows(block_rows, scale), allowed_cuts=np.arange(k),
                      objective="router")
    return vc, old, new_window, block_rows, scale


@settings(max_examples=80, deadline=None)
@given(cases())
def test_benefit_reads_and_blocks_are_ordered(case):
    vc, old, window, block_rows, scale = case
    benefits = SubtreeBenefits.of(vc, old, window, block_rows, scale)
    sub = benefits.old
    assert len(sub) == len(sub.children) == len(sub.blocks) == len(sub.reads)
    for i, kids in enumerate(sub.children):
        b = benefits.benefit(i)
        assert 0.0 <= b <= sub.reads[i] + 1e-9
        assert sub.reads[i] <= sub.blocks[i] + 1e-9
        node = sub.nodes[i]
        if kids is None:
            # a leaf of r sampled rows is max(1, r * scale // block_rows) blocks, none when empty
            rows = int(vc.counts[node.vector_indices].sum())
            assert sub.blocks[i] == (max(1, math.floor(rows * scale / block_rows)) if rows else 0)
        else:
            left, right = kids
            assert sub.blocks[i] == sub.blocks[left] + sub.blocks[right]
            assert sub.reads[i] == pytest.approx(sub.reads[left] + sub.reads[right])
        # T' holds exactly T's vectors, by their indices in vc
        new = benefits.new_subtree(i)
        held = np.sort(np.concatenate([leaf.vector_indices for leaf in leaves(new)]))
        assert held.tolist() == sub.vector_indices(i).tolist()
        assert new.rows == int(vc.counts[held].sum())
    # every vector is under the root exactly once
    assert sub.vector_indices(0).tolist() == list(range(vc.n))


@settings(max_examples=40, deadline=None)
@given(cases())
def test_root_benefit_is_zero_for_the_window_the_old_tree_was_grown_for(case):
    vc, _, window, block_rows, scale = case
    old = greedy_tree(vc, window, min_leaf_rows(block_rows, scale), objective="router")
    benefits = SubtreeBenefits.of(vc, old, window, block_rows, scale)
    assert benefits.reads_after(0) == pytest.approx(benefits.old.reads[0])
    assert benefits.benefit(0) == 0.0
