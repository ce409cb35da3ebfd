"""Feature selection (Sun et al. Section 3) and Balanced MaxSkip bottom-up
partitioning (Section 4)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.algorithms.features import Feature, augment_queries, select_features
from layout_core.algorithms.fineblock import bottom_up, objective
from layout_core.algorithms.types import BlockingMap, VectorCounts, unpack_bit_strings
from layout_core.predicates import Column, Compare, conj, in_list, to_sql

# ---------------------------------------------------------------------------
# Sun's Example 1

PRODUCT = Column("product", "string")
REVENUE = Column("revenue", "int")
SHOES = Compare(PRODUCT, "=", "shoes")
SHIRTS = Compare(PRODUCT, "=", "shirts")
SHOES_OR_SHIRTS = in_list(PRODUCT, ["shoes", "shirts"])
REV_32 = Compare(REVENUE, ">", 32)
REV_21 = Compare(REVENUE, ">", 21)

# Q1: product = 'shoes'
# Q2: product in ('shoes', 'shirts'), revenue > 32
# Q3: product = 'shirts', revenue > 21
EXAMPLE_1 = [[SHOES], [SHOES_OR_SHIRTS, REV_32], [SHIRTS, REV_21]]


def test_example_1_augmentation_matches_paper():
    augmented = augment_queries(EXAMPLE_1)
    assert augmented == [
        frozenset({SHOES, SHOES_OR_SHIRTS}),
        frozenset({SHOES_OR_SHIRTS, REV_32, REV_21}),
        frozenset({SHIRTS, REV_21, SHOES_OR_SHIRTS}),
    ]
    # Occurrences after augmentation = number of queries each predicate subsumes
    # (the paper: revenue > 21 and product in (...) each subsume 2 and 3 queries).
    counts = {p: sum(p in a for a in augmented) for p in {SHOES, SHIRTS, SHOES_OR_SHIRTS, REV_32, REV_21}}
    assert counts == {SHOES: 1, SHIRTS: 1, SHOES_OR_SHIRTS: 3, REV_32: 1, REV_21: 2}


def test_example_1_features_t2():
    # The paper gives no T for Example 1; with T = 2 the frequent sets are
    # {in}: 3, {rev>21}: 2, {in, rev>21}: 2. Visiting the most specific first,
    # {in, rev>21} covers Q2, Q3 (I = 2); then {rev>21} adds nothing (I = 0)
    # and {in} adds only Q1 (I = 1 < T): both are redundant.
    features = select_features(EXAMPLE_1, num_features=10, min_support=2)
    assert features == [
        Feature(conj(SHOES_OR_SHIRTS, REV_21), (SHOES_OR_SHIRTS, REV_21), support=2, gain=2)
    ]


def test_example_1_features_t3_and_t1():
    assert select_features(EXAMPLE_1, 10, 3) == [
        Feature(SHOES_OR_SHIRTS, (SHOES_OR_SHIRTS,), 3, 3)
    ]
    # T = 1: each query's own most specific set wins (I = 1 each); items implied
    # by another item of the set are dropped (simplify=True).
    got = select_features(EXAMPLE_1, 10, 1)
    assert [(f.items, f.support, f.gain) for f in got] == [
        ((SHIRTS, REV_21), 1, 1),
        ((SHOES,), 1, 1),
        ((SHOES_OR_SHIRTS, REV_32), 1, 1),
    ]
    raw = select_features(EXAMPLE_1, 10, 1, simplify=False)
    assert [set(f.items) for f in raw] == [
        {SHIRTS, REV_21, SHOES_OR_SHIRTS},
        {SHOES, SHOES_OR_SHIRTS},
        {REV_32, REV_21, SHOES_OR_SHIRTS},
    ]
    assert select_features(EXAMPLE_1, 2, 1) == got[:2]


def test_redundant_general_predicate_is_eliminated():
    # revenue > 32 twice, revenue > 21 once: {rev>21} adds only one query.
    queries = [[REV_32], [REV_32], [REV_21]]
    assert select_features(queries, 10, 2) == [Feature(REV_32, (REV_32,), 2, 2)]
    # With T = 1 the general one is kept for the query only it subsumes.
    assert select_features(queries, 10, 1) == [
        Feature(REV_32, (REV_32,), 2, 2),
        Feature(REV_21, (REV_21,), 3, 1),
    ]


def test_conjunction_of_query_implies_candidate():
    # Neither conjunct alone implies the BETWEEN, their conjunction does.
    from layout_core.predicates import Between

    q = [Compare(REVENUE, ">=", 10), Compare(REVENUE, "<=", 20)]
    between = Between(REVENUE, 5, 25)
    aug = augment_queries([q, [between]])
    assert between in aug[0]


def test_exclude_drops_predicates_before_mining():
    day = Column("day", "date")
    import datetime as dt

    d1 = Compare(day, ">=", dt.date(2024, 1, 1))
    queries = [[d1, SHOES], [d1, SHOES], [d1, REV_32], [d1]]
    with_dates = select_features(queries, 10, 2)
    assert with_dates[0].items == (d1,) or d1 in with_dates[0].items
    no_dates = select_features(queries, 10, 2, exclude=lambda p: "day" in p.columns())
    assert no_dates == [Feature(SHOES, (SHOES,), 2, 2)]
    assert all(d1 not in a for a in augment_queries(queries, exclude=lambda p: p == d1))


def test_feature_selection_edge_cases():
    assert select_features([], 5, 1) == []
    assert select_features([[SHOES]], 5, 2) == []
    assert select_features([[], []], 5, 1) == []
    with pytest.raises(ValueError):
        select_features(EXAMPLE_1, 5, 0)


def test_feature_selection_is_deterministic_under_query_permutation():
    queries = EXAMPLE_1 + [[REV_32], [SHOES, REV_21], [SHIRTS]]
    first = select_features(queries, 10, 1)
    for perm in itertools.permutations(range(len(queries)), 2):
        shuffled = [queries[i] for i in perm] + [q for i, q in enumerate(queries) if i not in perm]
        shuffled = [list(reversed(q)) for q in shuffled]
        assert [to_sql(f.predicate) for f in select_features(shuffled, 10, 1)] == [
            to_sql(f.predicate) for f in first
        ]


# ---------------------------------------------------------------------------
# Naive reference helpers (tests only)


def naive_objective(vectors, counts, weights, bm: BlockingMap) -> float:
    """C(P) by plain loops over blocks, pieces and features."""
    total = 0.0
    for b in range(bm.n_blocks):
        rows = 0
        union = [False] * len(weights)
        for v, blk, s, e in zip(bm.vector_index, bm.block, bm.row_start, bm.row_end):
            if blk == b:
                rows += e - s
                union = [u or bool(x) for u, x in zip(union, vectors[v])]
        total += rows * sum(w for w, u in zip(weights, union) if not u)
    return total


def check_map(vectors, counts, weights, min_size, bm: BlockingMap):
    """Invariants every bottom_up result satisfies (see fineblock docstring)."""
    vectors = np.asarray(vectors, dtype=bool)
    counts = np.asarray(counts)
    n, m = vectors.shape
    # Every row of every vector in exactly one piece; no empty pieces.
    for v in range(n):
        sel = bm.vector_index == v
        starts, ends = bm.row_start[sel], bm.row_end[sel]
        assert (ends > starts).all()
        order = np.argsort(starts)
        starts, ends = starts[order], ends[order]
        if counts[v] == 0:
            assert starts.size == 0
        else:
            assert starts[0] == 0 and ends[-1] == counts[v]
            assert (starts[1:] == ends[:-1]).all()
    assert ((bm.vector_index >= 0) & (bm.vector_index < n)).all()
    # Pieces sorted by (vector, row_start); blocks numbered 0..k-1 by first piece.
    keys = list(zip(bm.vector_index.tolist(), bm.row_start.tolist()))
    assert keys == sorted(keys)
    _, first = np.unique(bm.block, return_index=True)
    assert list(bm.block[np.sort(first)]) == list(range(bm.n_blocks))
    # Union vectors consistent with the pieces.
    for b in range(bm.n_blocks):
        members = bm.vector_index[bm.block == b]
        assert members.size > 0
        assert (bm.union_vectors()[b] == vectors[members].any(axis=0)).all()
    # Block sizes.
    sizes = bm.block_sizes()
    total = int(counts.sum())
    assert sizes.sum() == total
    if total == 0:
        assert bm.n_blocks == 0
    elif total < min_size:
        assert bm.n_blocks == 1
    else:
        assert (sizes >= min_size).all()
        assert (sizes <= 3 * min_size - 2).all()
        assert (sizes >= 2 * min_size).sum() <= 1
    # Objective.
    assert objective(VectorCounts(vectors, counts, weights), bm) == pytest.approx(
        naive_objective(vectors, counts, weights, bm)
    )


def blocks_as_sets(bm: BlockingMap) -> set[frozenset]:
    return {
        frozenset(zip(bm.vector_index[bm.block == b].tolist(), bm.row_start[bm.block == b].tolist()))
        for b in range(bm.n_blocks)
    }


# ---------------------------------------------------------------------------
# bottom_up on hand-made inputs


def test_two_features_groups_by_heavier_feature():
    # Weights (2, 1): blocks {00, 01} and {10, 11} keep feature 0 (weight 2)
    # prunable for 4 rows: C = 8; grouping by feature 1 gives only 4.
    vectors = [[0, 0], [1, 0], [0, 1], [1, 1]]
    counts = [2, 2, 2, 2]
    weights = [2.0, 1.0]
    vc = VectorCounts(np.array(vectors), np.array(counts), np.array(weights))
    bm = bottom_up(vc, min_size=4)
    check_map(vectors, counts, weights, 4, bm)
    assert blocks_as_sets(bm) == {frozenset({(0, 0), (2, 0)}), frozenset({(1, 0), (3, 0)})}
    assert objective(vc, bm) == 8.0
    assert bm.union_vectors().tolist() == [[False, True], [True, True]]


def test_large_vector_is_split_into_pure_blocks():
    vc = VectorCounts(np.array([[1, 0], [0, 1]]), np.array([10, 3]), np.array([1.0, 1.0]))
    bm = bottom_up(vc, min_size=3)
    check_map(vc.vectors, vc.counts, vc.weights, 3, bm)
    assert bm.vector_index.tolist() == [0, 0, 0, 1]
    assert bm.row_start.tolist() == [0, 4, 7, 0]
    assert bm.row_end.tolist() == [4, 7, 10, 3]
    assert bm.block.tolist() == [0, 1, 2, 3]
    assert bm.block_sizes().tolist() == [4, 3, 3, 3]
    assert objective(vc, bm) == 13.0  # every block prunes one feature


def test_leftover_joins_block_with_least_loss():
    # 00 x5 and 10 x4 are finished alone (>= min_size 4); 11 x1 is left over.
    # Into 00's block the loss is 6*3 - (0 + 3) = 15, into 10's block
    # 5*3 - (4*2 + 1*3) = 4: it joins 10.
    vectors = [[0, 0], [1, 0], [1, 1]]
    counts = [5, 4, 1]
    weights = [2.0, 1.0]
    vc = VectorCounts(np.array(vectors), np.array(counts), np.array(weights))
    bm = bottom_up(vc, min_size=4)
    check_map(vectors, counts, weights, 4, bm)
    assert blocks_as_sets(bm) == {frozenset({(0, 0)}), frozenset({(1, 0), (2, 0)})}
    assert bm.block_sizes().tolist() == [5, 5]


def test_small_total_is_one_block_and_zero_counts_are_ignored():
    vc = VectorCounts(np.array([[1], [0], [1]]), np.array([1, 0, 2]), np.array([1.0]))
    bm = bottom_up(vc, min_size=10)
    assert bm.n_blocks == 1 and bm.block_sizes().tolist() == [3]
    assert bm.vector_index.tolist() == [0, 2]
    empty = bottom_up(VectorCounts(np.zeros((0, 2), bool), np.zeros(0, int), np.ones(2)), 5)
    assert empty.n_blocks == 0 and empty.union_vectors().shape == (0, 2)


def test_subset_vectors_merge_for_free_first():
    # Six 1-row vectors, min_size 2: the greedy pairing equals the exhaustive
    # optimum (pair the equal vectors, and 110 with its subset 100).
    vectors = np.array([[1, 1, 0], [1, 0, 0], [0, 0, 1], [0, 0, 1], [0, 1, 0], [0, 1, 0]], bool)
    counts = np.ones(6, dtype=np.int64)
    weights = np.array([1.0, 1.0, 1.0])
    vc = VectorCounts(vectors, counts, weights)
    bm = bottom_up(vc, min_size=2)
    check_map(vectors, counts, weights, 2, bm)
    best = 0.0
    for perm in itertools.permutations(range(6)):
        pairs = [perm[0:2], perm[2:4], perm[4:6]]
        c = sum(2 * weights[~vectors[list(p)].any(axis=0)].sum() for p in pairs)
        best = max(best, c)
    assert objective(vc, bm) == best == 10.0
    assert blocks_as_sets(bm) == {
        frozenset({(0, 0), (1, 0)}),
        frozenset({(2, 0), (3, 0)}),
        frozenset({(4, 0), (5, 0)}),
    }


def test_skipped_rows_and_from_rows():
    rows = np.array([[1, 0], [1, 0], [0, 1], [0, 0], [1, 0]], bool)
    vc = VectorCounts.from_rows(rows, np.array([1.0, 1.0]))
    assert vc.vectors.tolist() == [[False, False], [False, True], [True, False]]
    assert vc.counts.tolist() == [1, 1, 3]
    bm = bottom_up(vc, min_size=2)
    check_map(vc.vectors, vc.counts, vc.weights, 2, bm)
    q = np.array([[True, False], [False, True], [False, False]])
    expected = [
        sum(int(s) for s, u in zip(bm.block_sizes(), bm.union_vectors()) if (qi & ~u).any())
        for qi in q
    ]
    assert bm.skipped_rows(q).tolist() == expected


def test_bad_inputs():
    with pytest.raises(ValueError):
        VectorCounts(np.zeros((2, 2), bool), np.array([1, -1]), np.ones(2))
    with pytest.raises(ValueError):
        VectorCounts(np.zeros((2, 2), bool), np.array([1, 1]), np.ones(3))
    with pytest.raises(ValueError):
        bottom_up(VectorCounts(np.zeros((1, 1), bool), np.array([1]), np.ones(1)), 0)


# ---------------------------------------------------------------------------
# Properties


@st.composite
def vector_counts(draw):
    m = draw(st.integers(0, 5))
    n = draw(st.integers(0, 14))
    vectors = np.array(
        draw(st.lists(st.lists(st.booleans(), min_size=m, max_size=m), min_size=n, max_size=n)),
        dtype=bool,
    ).reshape(n, m)
    counts = np.array(draw(st.lists(st.integers(0, 25), min_size=n, max_size=n)), dtype=np.int64)
    weights = np.array(draw(st.lists(st.integers(0, 6), min_size=m, max_size=m)), dtype=float)
    min_size = draw(st.integers(1, 12))
    return vectors, counts, weights, min_size


@settings(max_examples=300, deadline=None)
@given(vector_counts())
def test_bottom_up_properties(data):
    vectors, counts, weights, min_size = data
    vc = VectorCounts(vectors, counts, weights)
    bm = bottom_up(vc, min_size)
    check_map(vectors, counts, weights, min_size, bm)
    # Not worse than putting every row in one block.
    single = counts.sum() * weights[~vectors[counts > 0].any(axis=0)].sum() if counts.sum() else 0
    assert objective(vc, bm) >= single - 1e-9
    # Deterministic.
    assert bottom_up(vc, min_size) == bm


def test_determinism_on_random_input():
    rng = np.random.default_rng(7)
    vectors = np.unique(rng.random((400, 8)) < 0.4, axis=0)
    counts = rng.integers(1, 60, size=vectors.shape[0])
    weights = rng.integers(0, 10, size=8).astype(float)
    vc = VectorCounts(vectors, counts, weights)
    first = bottom_up(vc, 100)
    second = bottom_up(VectorCounts(vectors.copy(), counts.copy(), weights.copy()), 100)
    assert first == second
    check_map(vectors, counts, weights, 100, first)


def test_wide_vectors_use_several_words():
    # m = 37 features: unions span three 16-bit words.
    from layout_core.algorithms.fineblock import PackedUnions

    rng = np.random.default_rng(3)
    vectors = rng.random((120, 37)) < 0.3
    weights = rng.integers(0, 9, size=37).astype(float)
    pk = PackedUnions(weights)
    assert np.allclose(pk.weight(pk.pack(vectors)), vectors.astype(float) @ weights)
    counts = rng.integers(0, 30, size=120)
    vc = VectorCounts(vectors, counts, weights)
    bm = bottom_up(vc, 50)
    check_map(vectors, counts, weights, 50, bm)
    assert bottom_up(vc, 50) == bm


def test_bit_strings_unpack_to_one_row_per_vector():
    # character j is feature j: '101' holds features 0 and 2
    assert unpack_bit_strings(["101", "000", "011"], 3).tolist() == [
        [True, False, True], [False, False, False], [False, True, True]]
    # 70 features, more than a long holds: feature 69 is the last character
    wide = unpack_bit_strings(["0" * 69 + "1", "1" + "0" * 69], 70)
    assert wide.shape == (2, 70) and np.flatnonzero(wide[0]).tolist() == [69] and wide[1, 0]
    assert unpack_bit_strings(["", ""], 0).shape == (2, 0)  # no cuts: every row has the empty vector
    with pytest.raises(ValueError):
        unpack_bit_strings(["10", "1"], 2)  # a string of the wrong length
    with pytest.raises(ValueError):
        unpack_bit_strings(["1x"], 2)
