"""The shift measurement reads its sampled rows through Arrow: each column's values must be
those `collect()` gives, NULLs and all, whatever the column's type."""

import datetime as dt
from decimal import Decimal

import pytest

from layout_core.flows.reorg.simulated_reads import ColumnValues

pytestmark = pytest.mark.slow

SCHEMA = ("i int, b bigint, d double, m decimal(12,2), s string, day date, ts timestamp, "
          "ntz timestamp_ntz, flag boolean")
ROWS = [
    (3, 10 ** 12, 2.5, Decimal("19.99"), "b", dt.date(1995, 3, 15), dt.datetime(2024, 1, 1, 8, 30, 0, 123456),
     dt.datetime(2024, 1, 1, 8, 30), True),
    (None, None, None, None, None, None, None, None, None),
    (-1, -5, -0.5, Decimal("-3.10"), "", dt.date(1992, 1, 1), dt.datetime(1999, 12, 31, 23, 59, 59),
     dt.datetime(1970, 1, 1), False),
    (3, 10 ** 12, 2.5, Decimal("19.99"), "b", dt.date(1995, 3, 15), dt.datetime(2024, 1, 1, 8, 30, 0, 123456),
     dt.datetime(2024, 1, 1, 8, 30), True),
    (7, 0, 1e300, Decimal("0.00"), "Ωmega", dt.date(2038, 1, 19), dt.datetime(2038, 1, 19, 3, 14, 8),
     dt.datetime(2100, 6, 1, 12), None),
]


def test_arrow_columns_give_the_values_collect_gives(spark):
    from layout_core.spark.featurize import encoded_column

    frame = spark.createDataFrame(ROWS * 3, SCHEMA)  # duplicates, in several batches' worth of rows
    collected = frame.collect()
    table = frame.toArrow()
    for name in frame.columns:
        expected = ColumnValues.of([r[name] for r in collected])
        got = ColumnValues.of_encoded(*encoded_column(table.column(name)))
        assert got.codes.tolist() == expected.codes.tolist(), name
        assert list(got.values) == list(expected.values), name
        assert [type(v) for v in got.values] == [type(v) for v in expected.values], name
    assert ColumnValues.of([r["ts"] for r in collected]).values[0] == dt.datetime(1999, 12, 31, 23, 59, 59)
