"""Pando's cells counted on every row in Spark (`spark.cells`): rows, cut bits
and the sort column's span of every k-tuple, worked out by hand."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from layout_core.algorithms.qdtree import Node

pytestmark = pytest.mark.slow
L, S = Node.leaf, Node.split
EMPTY = np.zeros(0, dtype=np.int64)


def bits(*ones: int, n: int = 64) -> str:
    return "".join("1" if j in ones else "0" for j in range(n))


def test_every_k_tuple_with_its_rows_cut_bits_and_span(spark):
    from layout_core.spark.cells import cell_statistics

    # Tree 0 cuts on cut 0, tree 1 on cut 1 (bit 1 goes left, leaf 0).
    trees = (S(0, L(0, EMPTY, 0), L(1, EMPTY, 0)), S(1, L(0, EMPTY, 0), L(1, EMPTY, 0)))
    rows = [  # 64 cuts: cut 63 is in the second word of flags
        (1, dt.date(2020, 1, 1), bits(0, 1, 63)),  # cell (0, 0)
        (3, dt.date(2020, 1, 2), bits(0, 1, 2)),  # cell (0, 0)
        (5, dt.date(2020, 1, 3), bits(0)),  # cell (0, 1)
        (None, None, bits(1, 2, 63)),  # cell (1, 0)
    ]
    df = spark.createDataFrame(rows, "x int, d date, _vec string")
    cells = cell_statistics(df, trees, 64, "d", "date")
    assert cells.tuples.tolist() == [[0, 0], [0, 1], [1, 0]]
    assert cells.rows.tolist() == [2, 1, 1]
    assert [np.flatnonzero(a).tolist() for a in cells.any_cut] == [[0, 1, 2, 63], [0], [1, 2, 63]]
    assert [np.flatnonzero(a).tolist() for a in cells.all_cut] == [[0, 1], [0], [1, 2, 63]]
    # dates as days since 1970-01-01: 2020-01-01 is day 18262; no value: NaN
    assert cells.span[:2].tolist() == [[18262.0, 18263.0], [18264.0, 18264.0]]
    assert np.isnan(cells.span[2]).all()
    by_x = cell_statistics(df, trees, 64, "x", "int")
    assert by_x.span[:2].tolist() == [[1.0, 3.0], [5.0, 5.0]]
    assert cell_statistics(df, trees, 64).span is None
