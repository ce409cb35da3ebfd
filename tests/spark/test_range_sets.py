"""Range-set statistics (diPs §4): at most n_r disjoint ranges per block and
column, cut at the widest gaps, computed by Spark; zone maps are n_r = 1."""

from __future__ import annotations

import datetime as dt
import itertools
import random
from decimal import Decimal

import pytest

from layout_core.base.schema import TableSchema
from layout_core.predicates import ColumnStats, Compare, InList, might_match, value_from_json
from layout_core.predicates.model import Column
from layout_core.skipping.zonemaps import ZoneMaps, might_match_blocks
from layout_core.spark.blocks import ranges_between_gaps

X = Column("x", "int")


def test_ranges_between_gaps_cut_a_block_at_its_gaps():
    assert ranges_between_gaps(1, 20, [(9, 15), (3, 7)]) == [(1, 3), (7, 9), (15, 20)]
    assert ranges_between_gaps(1, 20, []) == []
    assert ranges_between_gaps(None, None, [(1, 2)]) == []


def test_a_range_set_skips_a_value_between_its_ranges():
    # a block of x in {1, 2, 3, 50, 51, 99}: min/max admit 20, the range set does not
    block = ColumnStats(1, 99, 0, 6, ((1, 3), (50, 51), (99, 99)))
    assert not might_match(Compare(X, "=", 20), {"x": block}, 6)
    assert might_match(Compare(X, "=", 20), {"x": ColumnStats(1, 99, 0, 6)}, 6)
    assert might_match(Compare(X, "=", 50), {"x": block}, 6)
    assert not might_match(InList(X, (4, 49, 100)), {"x": block}, 6)


def test_zone_maps_over_blocks_use_range_sets_and_min_max_alike():
    stats = [
        {"x": ColumnStats(1, 99, 0, 6, ((1, 3), (50, 51), (99, 99)))},  # a range set
        {"x": ColumnStats(10, 30, 0, 4)},  # min/max only: one range
        {"x": ColumnStats(None, None, 5, 5)},  # NULLs only
        {},  # no statistics: unknown
    ]
    zm = ZoneMaps.of(stats, [6, 4, 5, 7])
    assert list(might_match_blocks(Compare(X, "=", 20), zm)) == [False, True, False, True]
    assert list(might_match_blocks(Compare(X, ">=", 60), zm)) == [True, False, False, True]
    assert list(zm.columns["x"].mins) == [1, 10, None, None]
    assert list(zm.columns["x"].maxs) == [99, 30, None, None]


def _brute_force_width(values: list[int], n_r: int) -> int:
    """The smallest total width of at most n_r ranges covering the values."""
    values = sorted(set(values))
    gaps = range(len(values) - 1)
    best = values[-1] - values[0]
    for k in range(1, min(n_r - 1, len(values) - 1) + 1):
        for chosen in itertools.combinations(gaps, k):
            best = min(best, values[-1] - values[0] - sum(values[g + 1] - values[g] for g in chosen))
    return best


@pytest.mark.slow
def test_spark_range_sets_are_optimal_and_cover_every_value(spark):
    from layout_core.spark.blocks import summarize_blocks

    rnd = random.Random(7)
    rows, blocks = [], {}
    for block in range(60):
        n = rnd.randint(0, 12)
        values = [rnd.choice([None, *range(rnd.randint(1, 40))]) for _ in range(n)]
        values = [v if rnd.random() > 0.1 else None for v in values]
        blocks[block] = values
        rows += [(block, v) for v in values]
    table = TableSchema("t", (("block_id", "int"), ("x", "bigint")), ("block_id",))
    df = spark.createDataFrame(rows, "block_id int, x bigint")
    n_r = 4
    summaries = {s.block_id: s for s in summarize_blocks(df, table, 0, range_sets=n_r)}
    for block, values in blocks.items():
        present = [v for v in values if v is not None]
        if not values:
            assert block not in summaries
            continue
        stats = summaries[block].stats["x"]
        assert stats["null_count"] == len(values) - len(present)
        if len(set(present)) <= 1:
            assert "ranges" not in stats  # min/max says it all
            continue
        ranges = [(value_from_json(lo), value_from_json(hi)) for lo, hi in stats["ranges"]]
        assert 2 <= len(ranges) <= n_r
        assert all(a <= b < c for (a, b), (c, _) in zip(ranges, ranges[1:]))  # disjoint, in order
        assert all(any(lo <= v <= hi for lo, hi in ranges) for v in present)  # every value covered
        assert all(lo in present and hi in present for lo, hi in ranges)  # ends are values
        assert sum(hi - lo for lo, hi in ranges) == _brute_force_width(present, n_r)


def test_spark_range_sets_cut_equal_gaps_at_the_larger_values(spark):
    from layout_core.spark.blocks import summarize_blocks

    table = TableSchema("t", (("block_id", "int"), ("x", "bigint")), ("block_id",))
    df = spark.createDataFrame([(0, v) for v in (1, 2, 3, 4, 10, 11, 12)], "block_id int, x bigint")
    (summary,) = summarize_blocks(df, table, 0, range_sets=3)
    # gaps 4 -> 10 (width 6), then five of width 1: the widest and, of the ties, the last (11 -> 12)
    ranges = [(value_from_json(lo), value_from_json(hi)) for lo, hi in summary.stats["x"]["ranges"]]
    assert ranges == [(1, 4), (10, 11), (12, 12)]


@pytest.mark.slow
def test_spark_range_sets_of_every_column_kind(spark):
    from layout_core.spark.blocks import summarize_blocks

    table = TableSchema("t", (("block_id", "int"), ("d", "date"), ("p", "decimal(10,2)"), ("s", "string")), ("k",))
    day = dt.date(2024, 1, 1)
    rows = [(0, day, Decimal("1.00"), "apple"), (0, day + dt.timedelta(days=1), Decimal("1.50"), "apricot"),
            (0, day + dt.timedelta(days=300), Decimal("90.00"), "zebra")]
    df = spark.createDataFrame(rows, "block_id int, d date, p decimal(10,2), s string")
    (summary,) = summarize_blocks(df, table, 0, range_sets=2)
    from layout_core.skipping.router import column_stats
    stats = column_stats(summary.stats, summary.row_count)
    assert stats["d"].ranges == ((day, day + dt.timedelta(days=1)),
                                 (day + dt.timedelta(days=300), day + dt.timedelta(days=300)))
    assert stats["p"].ranges == ((Decimal("1.00"), Decimal("1.50")), (Decimal("90.00"), Decimal("90.00")))
    assert stats["s"].ranges == (("apple", "apricot"), ("zebra", "zebra"))
    assert not might_match(Compare(Column("s", "string"), "=", "banana"), stats, 3)
    assert might_match(Compare(Column("s", "string"), "=", "zebra"), stats, 3)
    # n_r = 1: min/max only
    (plain,) = summarize_blocks(df, table, 0, range_sets=1)
    assert all("ranges" not in s for s in plain.stats.values())
    assert column_stats(plain.stats, 3)["d"] == ColumnStats(day, day + dt.timedelta(days=300), 0, 3)


def test_spark_union_and_all_bits_of_130_cuts_cross_the_packed_words(spark):
    # 130 cuts: flags are packed 62 to a long, so cuts 61/62 and 123/124 sit on either
    # side of a word boundary. Block 0: rows x = 1, 2; block 1: x = 3. Cut i is
    # "x <= 1" for i in {0, 61, 124}, "x >= 2" for i in {62, 129}, "x = 3" for
    # i = 123, and FALSE otherwise (a NULL flag counts as FALSE: cut 5 is "NULL").
    from layout_core.base.names import BLOCK_ID_COLUMN
    from layout_core.spark.blocks import summarize_blocks, with_cut_flags

    sqls = ["FALSE"] * 130
    for i in (0, 61, 124):
        sqls[i] = "x <= 1"
    for i in (62, 129):
        sqls[i] = "x >= 2"
    sqls[123], sqls[5] = "x = 3", "NULL"
    df = spark.createDataFrame([(1, 0), (2, 0), (3, 1)], f"x int, {BLOCK_ID_COLUMN} int")
    table = TableSchema("t", (("x", "int"),), ("x",))
    block0, block1 = summarize_blocks(with_cut_flags(df, sqls), table, 130, range_sets=1)
    assert block0.union_bits == (1 << 0) | (1 << 61) | (1 << 124) | (1 << 62) | (1 << 129)
    assert block0.all_bits == 0  # x = 1 and x = 2 share no cut
    assert block1.union_bits == block1.all_bits == (1 << 62) | (1 << 123) | (1 << 129)
    assert (block0.row_count, block1.row_count) == (2, 1)
