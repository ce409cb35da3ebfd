"""The old qd-tree's subtrees over a sample, and the new subtree T' a partial reorganization grows."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.algorithms.qdtree import Node, greedy_tree, leaves
from layout_core.algorithms.types import Workload
from layout_core.flows.reorg.subtrees import NewSubtrees, min_leaf_rows, old_subtrees
from tests.unit.algorithms.test_qdtree import vcounts, workload

L, S = Node.leaf, Node.split


# Cut 0 is the old version's cut ("region = EU"), cut 1 a cut of the new window ("year < 2000").
# Bits (cut0, cut1): v0 = 11, v1 = 10, v2 = 01, v3 = 00, 4 rows each.
VC = vcounts([[1, 1], [1, 0], [0, 1], [0, 0]], [4, 4, 4, 4])
# The old tree cuts on cut 0 only; as stored in the catalog, its leaves hold no vectors.
OLD = S(0, L(0, [], 0), L(1, [], 0))  # breadth-first: 0 root, 1 = EU (v0, v1), 2 = not EU (v2, v3)
# The new window filters by year only: q0 implies cut 1, q1 is disjoint with it.
NEW = workload(2, implies=[(0, 1)], disjoint=[(1, 1)])


def test_the_old_tree_is_rebuilt_over_the_sample_breadth_first():
    old = old_subtrees(VC, OLD)
    assert old.children == ((1, 2), None, None)
    assert [n.vector_indices.tolist() for n in old.nodes[1:]] == [[0, 1], [2, 3]]
    assert [n.rows for n in old.nodes[1:]] == [8, 8]
    assert old.vector_indices(0).tolist() == [0, 1, 2, 3]


def test_leaves_known_from_the_blocks_need_no_routing():
    # v0 and v3 were read from leaf 1's blocks, v1 and v2 from leaf 0's: the old tree's cut
    # (here cut 5, not among the sample's 2) is not consulted.
    old = old_subtrees(VC, S(5, L(0, [], 0), L(1, [], 0)), leaf_of_vector=np.array([1, 0, 0, 1]))
    assert [n.vector_indices.tolist() for n in old.nodes[1:]] == [[1, 2], [0, 3]]


def test_a_leaf_the_data_never_reaches_holds_no_vectors():
    vc = vcounts([[1, 0], [0, 1], [0, 0]], [4, 4, 4])  # no row has both bits
    old = old_subtrees(vc, S(0, S(1, L(0, [], 0), L(1, [], 0)), L(2, [], 0)))
    # breadth-first: 0 root, 1 = cut-1 node, 2 = leaf 2 (v1, v2), 3 = leaf 0 (empty), 4 = leaf 1 (v0)
    assert old.children == ((1, 2), (3, 4), None, None, None)
    assert [n.leaf_id for n in old.nodes[2:]] == [2, 0, 1]
    assert [n.vector_indices.tolist() for n in old.nodes[2:]] == [[1, 2], [], [0]]
    assert [n.rows for n in old.nodes[2:]] == [8, 0, 4]


def test_new_subtrees_cut_on_the_window_and_name_the_samples_vectors():
    # block_rows 2, full data: leaves need >= 2 rows.
    new = NewSubtrees.of(VC, OLD, NEW, block_rows=2, scale=1.0)
    # Root: T' cuts on year: {v0, v2} (q1 skips it) and {v1, v3} (q0 skips it).
    assert new.new_subtree(0) == S(1, L(0, [0, 2], 8), L(1, [1, 3], 8))
    # EU child: T' over v0, v1 only; its leaves name vc's vectors, not positions in the subset.
    assert new.new_subtree(1) == S(1, L(0, [0], 4), L(1, [1], 4))
    assert new.new_subtree(2) == S(1, L(0, [2], 4), L(1, [3], 4))


def test_a_window_query_on_the_old_cut_makes_t_prime_cut_on_both():
    # q2 implies cut 0. T' at the root: year first (it splits 16 rows for two queries),
    # then region under both sides (q2 skips v2 or v3): four leaves of one vector.
    window = workload(2, implies=[(0, 1), (2, 0)], disjoint=[(1, 1)])
    new = NewSubtrees.of(VC, OLD, window, block_rows=2)
    assert new.new_subtree(0) == S(1, S(0, L(0, [0], 4), L(1, [2], 4)), S(0, L(2, [1], 4), L(3, [3], 4)))


def test_the_minimum_leaf_size_can_forbid_a_new_tree():
    # block_rows 10 on a sample with scale 2: leaves need ceil(10 / 2) = 5 sampled rows, so the
    # EU child (8 rows) cannot be cut in two (4 + 4); the root's 16 rows can (8 + 8).
    assert min_leaf_rows(10, 2.0) == 5
    assert min_leaf_rows(4, 2.5) == 2
    new = NewSubtrees.of(VC, OLD, NEW, block_rows=10, scale=2.0)
    assert new.new_subtree(1).is_leaf
    assert new.new_subtree(0) == S(1, L(0, [0, 2], 8), L(1, [1, 3], 8))


def test_bad_input_is_a_value_error():
    with pytest.raises(ValueError, match="cuts on cut 2"):
        old_subtrees(VC, S(2, L(0, [], 0), L(1, [], 0)))
    with pytest.raises(ValueError, match="leaf ids"):
        old_subtrees(VC, S(0, L(0, [], 0), L(5, [], 0)))
    with pytest.raises(ValueError, match="a leaf id in 0..1"):
        old_subtrees(VC, OLD, leaf_of_vector=np.array([0, 1, 2, 0]))
    with pytest.raises(ValueError, match="no queries"):
        NewSubtrees.of(VC, OLD, Workload(np.zeros((0, 2), bool), np.zeros((0, 2), bool)), block_rows=2)
    with pytest.raises(ValueError, match="no queries"):
        NewSubtrees.of(VC, OLD, workload(2, implies=[(0, 1)], weights=[0.0]), block_rows=2)
    with pytest.raises(ValueError, match="3 cuts"):
        NewSubtrees.of(VC, OLD, workload(3, implies=[(0, 1)]), block_rows=2)
    with pytest.raises(ValueError, match="block_rows"):
        NewSubtrees.of(VC, OLD, NEW, block_rows=0)
    with pytest.raises(ValueError, match="scale"):
        NewSubtrees.of(VC, OLD, NEW, block_rows=2, scale=0.0)
    with pytest.raises(ValueError, match="node index 3"):
        NewSubtrees.of(VC, OLD, NEW, block_rows=2).new_subtree(3)


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
def test_subtrees_partition_the_sample_and_t_prime_holds_exactly_its_subtrees_records(case):
    vc, old, window, block_rows, scale = case
    new_subtrees = NewSubtrees.of(vc, old, window, block_rows, scale)
    sub = new_subtrees.old
    assert len(sub) == len(sub.children)
    for i, kids in enumerate(sub.children):
        if kids is not None:
            # a node's records are its children's, which share none
            left, right = (sub.vector_indices(k).tolist() for k in kids)
            assert not set(left) & set(right)
            assert sorted(left + right) == sub.vector_indices(i).tolist()
        # T' holds exactly T's vectors, by their indices in vc, in leaves of at least one block
        new = new_subtrees.new_subtree(i)
        held = np.sort(np.concatenate([leaf.vector_indices for leaf in leaves(new)]))
        assert held.tolist() == sub.vector_indices(i).tolist()
        assert new.rows == int(vc.counts[held].sum())
        if not new.is_leaf:
            assert min(leaf.rows for leaf in leaves(new)) >= min_leaf_rows(block_rows, scale)
    # every vector is under the root exactly once
    assert sub.vector_indices(0).tolist() == list(range(vc.n))
