"""MTO §5.1.3: the optimal set of subtrees to reorganize, with and without pruning."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.flows.reorg.optimal_set import Reorganization, SubtreeShape, optimal_set


def counting(values):
    """benefit(node) = values[node], recording every call in `.calls`."""
    calls = []

    def benefit(node):
        calls.append(node)
        return values[node]

    benefit.calls = calls
    return benefit


def never_called(node):
    raise AssertionError(f"benefit({node}) must not be called")


# A hand-made tree in the spirit of the paper's Figure 8 (q/w = 2), numbered breadth-first:
#
#                  0
#          1               2
#      3       4       5       6
#    7   8                   9   10
#
# Leaf blocks C: 7: 4, 8: 4, 4: 8, 5: 8, 9: 8, 10: 8, so C = 8, 16, 16, 24, 40 for 3, 1, 6, 2, 0.
# Leaf reads A:  7: 4, 8: 4, 4: 7, 5: 6, 9: 8, 10: 7, so A = 8, 15, 15, 21, 36 for 3, 1, 6, 2, 0.
FIG_CHILDREN = ((1, 2), (3, 4), (5, 6), (7, 8), None, None, (9, 10), None, None, None, None)
FIG_BLOCKS = (40, 16, 24, 8, 8, 8, 16, 4, 4, 8, 8)
FIG_READS = (36.0, 15.0, 21.0, 8.0, 7.0, 6.0, 15.0, 4.0, 4.0, 8.0, 7.0)
# B <= A everywhere and B(T) >= B(T_L) + B(T_R): 30.5 >= 14 + 16, 14 >= 5.5 + 6, 16 >= 2 + 13,
# 5.5 >= 3 + 1, 13 >= 6 + 5.
FIG_BENEFITS = (30.5, 14.0, 16.0, 5.5, 6.0, 2.0, 13.0, 3.0, 1.0, 6.0, 5.0)
# R = 2B - C: 0: 21, 1: 12, 2: 8, 3: 3, 4: 4, 5: -4, 6: 10, 7: 2, 8: -2, 9: 4, 10: 2.
# By hand, leaves first: best(3) = max(3, 2 + 0) = 3; best(1) = max(12, 3 + 4) = 12, {1};
# best(6) = max(10, 4 + 2) = 10, {6}; best(2) = max(8, 0 + 10) = 10, {6};
# best(0) = max(21, 12 + 10) = 22, {1, 6}. The runner-up is {0} with 21.
FIG_SHAPE = SubtreeShape(FIG_CHILDREN, FIG_BLOCKS, FIG_READS)


@pytest.mark.parametrize("prune", [True, False])
def test_figure_8_flavour_chooses_two_subtrees(prune):
    result = optimal_set(FIG_SHAPE, counting(FIG_BENEFITS), q=200, w=100, prune=prune)
    assert result.nodes == (1, 6)
    assert result.reward == 22.0
    assert result.considered == 11
    assert result.bound_violations == ()
    assert "2 non-overlapping subtrees" in result.reason
    assert result.rewards[0] == 21.0 and result.rewards[1] == 12.0 and result.rewards[6] == 10.0


def test_pruning_skips_nodes_of_the_figure_tree():
    benefit = counting(FIG_BENEFITS)
    result = optimal_set(FIG_SHAPE, benefit, q=200, w=100)
    # Traced by hand (U = upper bound of B, best(c) <= max(0, 2U(c) - m(c)), m = fewest blocks below):
    # after B(4) = 6, node 1's children can add at most (2*5.5 - 4) + (2*6 - 8) = 11 <= R(1) = 12,
    # so nothing below 3 and 4 is looked at (7, 8 skipped). After B(9) = 6, U(10) = B(6) - 6 = 7,
    # and node 6's children can add at most (12 - 8) + (14 - 8) = 10 <= R(6) = 10 (10 skipped).
    assert benefit.calls == [0, 1, 2, 3, 4, 5, 6, 9]  # breadth-first, each once
    assert result.evaluated == 8 < result.considered == 11
    assert sorted(result.rewards) == [0, 1, 2, 3, 4, 5, 6, 9]
    unpruned = optimal_set(FIG_SHAPE, counting(FIG_BENEFITS), q=200, w=100, prune=False)
    assert unpruned.evaluated == 11
    assert unpruned.rewards[10] == 2.0 and unpruned.rewards[8] == -2.0


def test_a_cold_tree_is_pruned_without_any_evaluation():
    # A query reads 2 of 10 blocks on average: even B = A gives 2*2 - 5 < 0 for the smallest node.
    shape = SubtreeShape(((1, 2), None, None), (10, 5, 5), (2.0, 1.0, 1.0))
    result = optimal_set(shape, never_called, q=2, w=1)
    assert result.nodes == () and result.reward == 0.0 and result.evaluated == 0


def test_a_node_that_cannot_pay_off_is_skipped_but_its_children_are_not():
    # Root: 2 * A = 10 = C, so R(0) <= 0 even if B = A: B(0) is never needed; node 1:
    # 2 * 2 - 2 > 0; node 2: its bound min(A, 5 - B(1)) = 1 gives 2 * 1 - 8 < 0.
    shape = SubtreeShape(((1, 2), None, None), (10, 2, 8), (5.0, 2.0, 1.0))
    benefit = counting({1: 2.0})
    result = optimal_set(shape, benefit, q=2, w=1)
    assert benefit.calls == [1]
    assert result.nodes == (1,) and result.reward == 2.0


def test_a_parents_benefit_bounds_its_children():
    # A(1) = A(2) = 10 would allow R = 2 * 10 - 10 > 0, but B(0) = 4 bounds them (property 2):
    # 2 * 4 - 10 < 0, so neither child is evaluated.
    shape = SubtreeShape(((1, 2), None, None), (20, 10, 10), (20.0, 10.0, 10.0))
    benefit = counting({0: 4.0})
    result = optimal_set(shape, benefit, q=2, w=1)
    assert benefit.calls == [0]
    assert result.nodes == () and result.reward == 0.0 and result.rewards == {0: -12.0}


def test_empty_leaves_do_not_weaken_property_3():
    # 0 -> (1, 2), 2 -> (3, 4); leaf 4 holds no blocks. R(0) = 2 * 4 - 4 = 4; a set inside 1
    # adds at most 2 * 2 - 2 = 2, one inside 2 at most 2 * 2 - 2 = 2 (its smallest non-empty
    # node has 2 blocks; the empty leaf has reward 0): 4 >= 2 + 2, so {0} without more work.
    shape = SubtreeShape(((1, 2), None, (3, 4), None, None), (4, 2, 2, 2, 0), (4.0, 2.0, 2.0, 2.0, 0.0))
    values = [4.0, 2.0, 2.0, 2.0, 0.0]
    benefit = counting(values)
    result = optimal_set(shape, benefit, q=2, w=1)
    assert benefit.calls == [0]
    assert result.nodes == (0,) and result.reward == 4.0
    assert optimal_set(shape, counting(values), q=2, w=1, prune=False).nodes == (0,)


@pytest.mark.parametrize("q, w", [(100, 100), (5, 100), (0.5, 1.0)])
def test_q_at_most_w_reorganizes_nothing_and_evaluates_nothing(q, w):
    result = optimal_set(FIG_SHAPE, never_called, q=q, w=w)
    assert result.nodes == () and result.reward == 0.0
    assert result.evaluated == 0 and result.rewards == {}
    assert result.considered == 11
    assert result.reason.startswith("q <= w")


def test_empty_tree():
    result = optimal_set(SubtreeShape((), (), ()), never_called, q=10, w=1)
    assert result == Reorganization((), 0.0, {}, 0, 0, result.reason)
    assert "no nodes" in result.reason


@pytest.mark.parametrize("prune", [True, False])
@pytest.mark.parametrize("benefit, nodes, reward", [
    (3.0, (0,), 2.0),  # R = 2 * 3 - 4 = 2 > 0
    (2.0, (), 0.0),  # R = 0 is not worth a rewrite
    (0.5, (), 0.0),  # R = -3
])
def test_one_leaf_tree(prune, benefit, nodes, reward):
    shape = SubtreeShape((None,), (4,), (4.0,))
    result = optimal_set(shape, counting([benefit]), q=2, w=1, prune=prune)
    assert (result.nodes, result.reward) == (nodes, reward)
    assert result.evaluated == 1  # A = 4 allows R up to 4, so B must be computed


def test_zero_block_nodes_are_never_chosen():
    # Node 2 is a leaf no record reaches: 0 blocks, read by no query.
    shape = SubtreeShape(((1, 2), None, None), (3, 3, 0), (3.0, 3.0, 0.0))
    for prune in (True, False):
        result = optimal_set(shape, counting([3.0, 3.0, 0.0]), q=2, w=1, prune=prune)
        assert result.nodes == (0,) and result.reward == 3.0  # tie with {1}: one rewrite of the parent


def test_a_deep_tree_needs_no_recursion():
    # A caterpillar of 3000 leaves (each spine node: a leaf, then the rest), every block read by
    # every query and B = A = C: R(T) = (3 - 1) * C(T), so every antichain covering all leaves
    # has 2 * 3000; ties go to the one rewrite of the root.
    leaves = 3000
    children, blocks = [], []
    for spine in range(leaves - 1):
        node = len(children)
        children += [(node + 1, node + 2), None]
        blocks += [leaves - spine, 1]
    children.append(None)
    blocks.append(1)
    shape = SubtreeShape(tuple(children), tuple(blocks), tuple(float(b) for b in blocks))
    for prune in (True, False):
        result = optimal_set(shape, lambda node: float(blocks[node]), q=3, w=1, prune=prune)
        assert result.nodes == (0,) and result.reward == 6000.0
        assert result.considered == 2 * leaves - 1


def test_benefit_errors_propagate():
    def failing(node):
        raise RuntimeError("optimizer crashed")

    with pytest.raises(RuntimeError, match="optimizer crashed"):
        optimal_set(FIG_SHAPE, failing, q=200, w=100)


@pytest.mark.parametrize("value, message", [
    (40.0, "property 1"),  # more than A(0) = 36
    (-1.0, ">= 0"),
    (math.nan, ">= 0"),
    ("many", "not a number"),
])
def test_benefit_values_outside_property_1_raise(value, message):
    with pytest.raises(ValueError, match=message):
        optimal_set(FIG_SHAPE, lambda node: value, q=200, w=100)


@pytest.mark.parametrize("prune", [True, False])
def test_benefits_breaking_property_2_are_reported(prune):
    # 0 -> (1, 2), 2 -> (3, 4). B(2) = 3 > B(0) - B(1) = 2: re-optimizing 1 and 2 separately
    # would beat re-optimizing 0, which property 2 rules out.
    shape = SubtreeShape(((1, 2), None, (3, 4), None, None), (6, 2, 4, 2, 2), (6.0, 2.0, 4.0, 2.0, 2.0))
    result = optimal_set(shape, counting([3.0, 1.0, 3.0, 1.5, 1.5]), q=4, w=1, prune=prune)
    assert result.bound_violations == (2,)
    assert "property 2" in result.reason


@pytest.mark.parametrize("children, blocks, reads, message", [
    (((1, 2), None, None), (2, 1), (1.0, 1.0, 1.0), "one entry per node"),
    (((1, 2), None, None), (2, 1, 1), (1.0, 1.0), "one entry per node"),
    (((1, 3), None, None), (2, 1, 1), (1.0, 1.0, 1.0), "not a node index"),
    (((1, -1), None, None), (2, 1, 1), (1.0, 1.0, 1.0), "not a node index"),
    (((0, 1), None), (2, 1), (1.0, 1.0), "reached twice"),  # the root as a child
    (((1, 2), (2, 3), None, None), (3, 2, 1, 1), (1.0, 1.0, 1.0, 1.0), "reached twice"),  # two parents
    ((None, (2, 3), None, None), (1, 2, 1, 1), (1.0, 1.0, 1.0, 1.0), "not reachable"),
    (((1, 2, 3), None, None, None), (3, 1, 1, 1), (1.0, 1.0, 1.0, 1.0), "two children"),
    (((1, 2.0), None, None), (2, 1, 1), (1.0, 1.0, 1.0), "two children"),
    ((3, None), (1, 1), (1.0, 1.0), "two children"),
    (((1, 2), None, None), (3, 1, 1), (1.0, 1.0, 1.0), "children .* have 1 \\+ 1 blocks"),
    (((1, 2), None, None), (2, 1.5, 0.5), (1.0, 1.0, 1.0), "blocks are ints"),
    (((1, 2), None, None), (0, 1, -1), (0.0, 0.0, 0.0), "blocks are ints >= 0"),
    (((1, 2), None, None), (2, 1, 1), (1.0, -0.5, 1.0), "finite numbers >= 0"),
    (((1, 2), None, None), (2, 1, 1), (math.nan, 1.0, 1.0), "finite numbers >= 0"),
])
def test_invalid_shapes_raise(children, blocks, reads, message):
    with pytest.raises(ValueError, match=message):
        SubtreeShape(children, blocks, reads)


@pytest.mark.parametrize("q, w", [(0, 1), (1, 0), (-5, 1), (math.inf, 1), (math.nan, 1), (True, 1)])
def test_invalid_q_and_w_raise(q, w):
    with pytest.raises(ValueError, match="finite number > 0"):
        optimal_set(FIG_SHAPE, never_called, q=q, w=w)


def test_shape_must_be_a_checked_subtree_shape():
    with pytest.raises(TypeError, match="SubtreeShape"):
        optimal_set(object(), never_called, q=2, w=1)


def test_lists_and_numpy_numbers_are_stored_as_python_tuples():
    shape = SubtreeShape([[1, 2], None, None], np.array([4, 2, 2]), np.array([3.0, 1.5, 1.5]))
    assert shape.children == ((1, 2), None, None)
    assert shape.blocks == (4, 2, 2) and type(shape.blocks[0]) is int
    assert shape.reads == (3.0, 1.5, 1.5) and type(shape.reads[0]) is float
    assert len(shape) == 3


# ---------------------------------------------------------------------------
# Random trees against a brute force over all sets of non-overlapping subtrees


@st.composite
def trees(draw, max_leaves=8, exact=True):
    """(children, blocks, reads, benefits) of a random tree satisfying properties 1 and 2.

    exact: values are multiples of 1/4 (exact in floats, so ties are real ties);
    otherwise arbitrary floats, as averages over queries are.
    """
    children: list = [None]
    for _ in range(draw(st.integers(0, max_leaves - 1))):
        leaf = draw(st.sampled_from([i for i, c in enumerate(children) if c is None]))
        children[leaf] = (len(children), len(children) + 1)
        children += [None, None]
    n = len(children)

    def share(low, high):  # a value in [low, high]
        if exact:
            return low + Fraction(draw(st.integers(0, int(4 * (high - low)))), 4)
        return low + (high - low) * draw(st.floats(0, 1))

    blocks, reads, benefits = [0] * n, [0] * n, [0] * n
    for node in reversed(range(n)):  # children were created after their parent
        if children[node] is None:
            blocks[node] = draw(st.integers(0, 6))
            reads[node] = share(0, blocks[node])
            benefits[node] = share(0, reads[node])
        else:
            left, right = children[node]
            blocks[node] = blocks[left] + blocks[right]
            reads[node] = share(reads[left] + reads[right], blocks[node])
            benefits[node] = share(benefits[left] + benefits[right], reads[node])
    # Number the nodes at random (root stays 0): nothing may depend on the numbering.
    new = [0, *draw(st.permutations(range(1, n)))]
    shuffled = [None] * n
    for old, pair in enumerate(children):
        shuffled[new[old]] = None if pair is None else (new[pair[0]], new[pair[1]])

    def renumbered(values):
        out = [None] * n
        for old, value in enumerate(values):
            out[new[old]] = value
        return out

    return shuffled, renumbered(blocks), renumbered(reads), renumbered(benefits)


def antichains(children) -> list[frozenset[int]]:
    """Every set of non-overlapping subtrees (the empty set included), by enumeration."""
    below: dict[int, list[frozenset[int]]] = {}
    pending = [0]
    order = []
    while pending:
        node = pending.pop()
        order.append(node)
        if children[node] is not None:
            pending.extend(children[node])
    for node in reversed(order):  # children before parents
        if children[node] is None:
            below[node] = [frozenset(), frozenset([node])]
        else:
            left, right = children[node]
            below[node] = [frozenset([node])] + [a | b for a in below[left] for b in below[right]]
    return below[0]


def exact_reward(nodes, ratio, blocks, benefits):
    return sum((ratio * Fraction(benefits[t]) - blocks[t] for t in nodes), Fraction(0))


@settings(max_examples=300, deadline=None)
@given(tree=trees(), q=st.integers(1, 40), w=st.sampled_from([1, 2, 4]))
def test_random_trees_match_the_brute_force(tree, q, w):
    children, blocks, reads, benefits = tree
    shape = SubtreeShape(tuple(children), tuple(blocks), tuple(float(a) for a in reads))
    ratio = Fraction(q, w)
    options = antichains(children)
    best = max(exact_reward(s, ratio, blocks, benefits) for s in options)

    results = {}
    for prune in (True, False):
        benefit = counting([float(b) for b in benefits])
        result = optimal_set(shape, benefit, q, w, prune=prune)
        results[prune] = result
        assert len(benefit.calls) == len(set(benefit.calls)) == result.evaluated
        assert Fraction(result.reward) == best
        assert frozenset(result.nodes) in options
        assert list(result.nodes) == sorted(result.nodes)
        assert exact_reward(result.nodes, ratio, blocks, benefits) == best
        assert all(Fraction(r) == exact_reward([t], ratio, blocks, benefits) for t, r in result.rewards.items())
        assert result.bound_violations == ()
        assert result.considered == len(children)
    assert results[True].nodes == results[False].nodes
    assert results[True].reward == results[False].reward
    assert results[True].evaluated <= results[False].evaluated == (len(children) if q > w else 0)


@settings(max_examples=200, deadline=None)
@given(tree=trees(exact=False), q=st.floats(1, 50), w=st.floats(0.5, 5))
def test_random_float_trees_reach_the_brute_force_reward(tree, q, w):
    children, blocks, reads, benefits = tree
    shape = SubtreeShape(tuple(children), tuple(blocks), tuple(reads))
    ratio = q / w
    best = max(sum(ratio * benefits[t] - blocks[t] for t in s) for s in antichains(children))
    for prune in (True, False):
        result = optimal_set(shape, lambda node: benefits[node], q, w, prune=prune)
        assert result.reward == pytest.approx(best, rel=1e-9, abs=1e-9)
        assert result.bound_violations == ()
