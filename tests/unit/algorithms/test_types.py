"""distinct_rows: np.unique(axis=0)'s answer on packed words."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from layout_core.algorithms.types import VectorCounts, distinct_rows


def test_distinct_rows_are_sorted_with_false_first_and_every_row_finds_its_own():
    rows = np.array([[1, 0, 1], [0, 0, 0], [1, 0, 1], [0, 1, 0], [0, 0, 0]], dtype=bool)
    uniq, inverse = distinct_rows(rows)
    assert uniq.tolist() == [[False, False, False], [False, True, False], [True, False, True]]
    assert inverse.tolist() == [2, 0, 2, 1, 0]


def test_rows_that_differ_only_past_the_first_64_columns_stay_apart():
    rows = np.zeros((3, 130), dtype=bool)
    rows[0, 129] = True
    rows[2, 64] = True
    uniq, inverse = distinct_rows(rows)
    assert len(uniq) == 3
    assert inverse.tolist() == [1, 0, 2]  # bit 64 weighs more than bit 129


def test_no_rows_and_no_columns():
    uniq, inverse = distinct_rows(np.zeros((0, 4), dtype=bool))
    assert uniq.shape == (0, 4) and inverse.size == 0
    uniq, inverse = distinct_rows(np.zeros((3, 0), dtype=bool))
    assert uniq.shape == (1, 0) and inverse.tolist() == [0, 0, 0]


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.sampled_from([1, 7, 8, 9, 63, 64, 65, 129]), st.data())
def test_distinct_rows_agree_with_numpy_unique(n, m, data):
    rows = data.draw(arrays(bool, (n, m)))
    uniq, inverse = distinct_rows(rows[:, ::-1][:, ::-1])  # a view that is not contiguous as given
    expected, expected_inverse = np.unique(rows, axis=0, return_inverse=True)
    assert np.array_equal(uniq, expected)
    assert np.array_equal(inverse, expected_inverse.reshape(-1))


def test_vector_counts_from_rows_counts_each_distinct_row():
    vc = VectorCounts.from_rows(np.array([[1, 0], [1, 0], [0, 0]], dtype=bool), np.ones(2))
    assert vc.vectors.tolist() == [[False, False], [True, False]]
    assert vc.counts.tolist() == [1, 2]
