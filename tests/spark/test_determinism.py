"""Laying out the same rows with the same settings twice gives the same blocks, for every
registered optimizer (the tree optimizers also on a sample).

The second run reads the rows in another order (repartitioned into 7 partitions) with
another shuffle partition count, so any block choice that depends on Spark's row order
(a sample taken by position, ties in a sort, the order `collect()` returns) shows up as a
different checksum of (primary key, block index).
"""

from __future__ import annotations

import pytest

from layout_core.base.schema import load_schema
from layout_core.flows.nightly import in_memory
from layout_core.flows.nightly.in_memory import Featurized, lay_out_in_memory
from layout_core.optimizers import REGISTRY, TableQueries
from layout_core.workload.analyze import analyze_statements
from layout_core.workload.tpch import generate

pytestmark = pytest.mark.slow
SCHEMA = load_schema("tpch")
LINEITEM = SCHEMA.table("lineitem")
# lineitem at SF 0.01 has 60,175 rows: 4,000-row blocks, trees planned on a third of them
SAMPLED = {"sample_rows": 20_000}


def _settings(optimizer: str) -> dict:
    names = {s.name for s in REGISTRY[optimizer].settings}
    return {"block_rows": 4000, **{k: v for k, v in SAMPLED.items() if k in names}}


@pytest.fixture(scope="module")
def lineitem_inputs(spark, tpch_sf001):
    frames = {t: spark.read.parquet(str(tpch_sf001 / f"{t}.parquet")) for t in SCHEMA.tables}
    log = generate(2, seed=3, templates=[1, 3, 4, 6, 10, 12, 14, 19], scale_factor=0.01)
    queries = TableQueries("lineitem", tuple(analyze_statements([q.sql for q in log], SCHEMA).analyses),
                           SCHEMA.key_hops())
    return frames, queries


def _checksum(spark, rows, frames, optimizer, queries, shuffle_partitions: int = 8,
              featurized: Featurized | None = None, settings: dict | None = None) -> tuple[int, int, int]:
    """(rows, blocks, sum of a 64-bit hash of (primary key, block index)) of one layout."""
    from pyspark.sql import functions as F

    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    try:
        laid = lay_out_in_memory(LINEITEM, rows, frames, optimizer, {**_settings(optimizer), **(settings or {})},
                                 queries, featurized)
        try:
            keys = [F.col(c) for c in LINEITEM.primary_key]
            row = laid.blocked.agg(F.count(F.lit(1)), F.countDistinct("_block"),
                                   F.sum(F.xxhash64(*keys, F.col("_block")).cast("decimal(38,0)"))).collect()[0]
        finally:
            laid.release()
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", before)
    return int(row[0]), int(row[1]), int(row[2])


# make test: mto (a tree on a row sample, join-induced cuts); pando (mto's sample and cuts, its
# cells placed by the same plan), zorder (a curve on quantiles), qdtree (mto's tree without
# join-induced cuts), hilbert (zorder's quantiles, another curve), sortkey, tuned and fineblock
# (a sort, month clusters, blocks from the counts of every row's vector, no sample): make test-full.
EXTENDED = ("fineblock", "hilbert", "pando", "qdtree", "sortkey", "tuned", "zorder")


@pytest.mark.parametrize("optimizer", [pytest.param(name, marks=pytest.mark.extended) if name in EXTENDED else name
                                       for name in sorted(REGISTRY)])
def test_the_same_input_twice_gives_the_same_blocks(spark, lineitem_inputs, optimizer):
    frames, queries = lineitem_inputs
    rows = frames["lineitem"]
    first = _checksum(spark, rows, frames, optimizer, queries, 8)
    # the same rows, read in another order, shuffled into another number of partitions
    second = _checksum(spark, rows.repartition(7), frames, optimizer, queries, 3)
    assert first[0] == 60_175 and first[1] >= 3  # every row, in a real layout
    assert second == first


def test_layouts_with_the_same_cuts_flag_the_rows_once_and_place_them_as_alone(spark, lineitem_inputs, monkeypatch):
    # mto and pando (another optimizer, and k trees) choose the same cuts: the benchmarks flag the
    # rows once (B1's mto with its leaves in key order shares them the same way)
    frames, queries = lineitem_inputs
    rows = frames["lineitem"]
    kinds = [("mto", {}), ("pando", {"trees": 2})]
    alone = [_checksum(spark, rows, frames, optimizer, queries, settings=extra) for optimizer, extra in kinds]
    flaggings = []
    featurize = in_memory._featurize
    monkeypatch.setattr(in_memory, "_featurize", lambda *args: flaggings.append(1) or featurize(*args))
    featurized = Featurized()
    try:
        shared = [_checksum(spark, rows, frames, optimizer, queries, featurized=featurized, settings=extra)
                  for optimizer, extra in kinds]
    finally:
        featurized.release()
    assert shared == alone
    assert len(flaggings) == 1
