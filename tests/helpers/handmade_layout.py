"""A test fixture: a layout whose blocks are the distinct values of a hand-chosen key.

The router's golden tests want blocks they can reason about (one per ship
year, say) with a few chosen cuts; no optimizer makes those, so this writes
them directly with the same Spark helpers the nightly steps use (block
folders, block summaries) and records them in the catalog.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from layout_core.base.names import BLOCK_ID_COLUMN
from layout_core.base.schema import TableSchema
from layout_core.catalog import BlockRecord, Catalog, CutRecord
from layout_core.predicates import JoinInduced, Predicate, dumps, to_sql
from layout_core.skipping.router import UNMANAGED_SOURCE
from layout_core.spark.blocks import summarize_blocks, with_cut_flags, write_block_folders


def with_block_ids(df: DataFrame, key: Column, block_ids: Sequence[int], spark: SparkSession) -> DataFrame:
    """Give each distinct value of `key` one of `block_ids`, in sorted key order."""
    keys = [r[0] for r in df.select(key.alias("_key")).distinct().orderBy("_key").collect()]
    if len(keys) > len(block_ids):
        raise ValueError(f"{len(keys)} blocks but only {len(block_ids)} block ids reserved")
    mapping = spark.createDataFrame(list(zip(keys, block_ids[: len(keys)])), ["_key", BLOCK_ID_COLUMN])
    return df.withColumn("_key", key).join(F.broadcast(mapping), on="_key", how="inner").drop("_key")


def cut_records(cuts: Sequence[Predicate], source_versions=()) -> list[CutRecord]:
    """Catalog records of `cuts`; a join-induced cut without `source_versions` is
    recorded as computed from unmanaged tables (current while they have no layout)."""
    records = []
    for position, cut in enumerate(cuts):
        induced = isinstance(cut, JoinInduced)
        sources = tuple(source_versions) or tuple(
            (table, UNMANAGED_SOURCE) for table in sorted({h.parent_table for h in cut.hops})) if induced else ()
        records.append(CutRecord(
            position, dumps(cut), to_sql(cut),
            "join_induced" if induced else "simple",
            path=tuple(str(h) for h in cut.hops) if induced else (),
            source_versions=sources,
        ))
    return records


def lay_out(
    spark: SparkSession,
    catalog: Catalog,
    table: TableSchema,
    rows: DataFrame,
    block_key: Column,
    cuts: Sequence[Predicate],
    location: str | Path,
    run_id: str,
    optimizer: str = "custom",
    partition: str = "",
    partition_column: str | None = None,
) -> int:
    """Write `rows` as blocks (one per distinct `block_key`) and activate the layout; returns the version id."""
    catalog.register_table(table.name, str(location), partition_column)
    n_blocks = rows.select(block_key).distinct().count()
    version, ids = catalog.begin_version(table.name, partition, optimizer, {}, run_id, n_blocks)
    try:
        flagged = with_cut_flags(rows, [to_sql(c) for c in cuts])
        blocked = with_block_ids(flagged, block_key, list(ids), spark).cache()
        written = write_block_folders(blocked, table.column_names, location,
                                      Path(location) / "_staging" / str(version),
                                      partition_column, partition)
        summaries = summarize_blocks(blocked, table, len(cuts))
        blocked.unpersist()
        catalog.set_cuts(version, cut_records(cuts))
        catalog.set_blocks(version, [
            BlockRecord(s.block_id, s.row_count, written[s.block_id][1], str(written[s.block_id][0]),
                        s.stats, s.union_bits, s.all_bits)
            for s in summaries
        ])
        catalog.activate(version)
    except Exception as e:
        catalog.fail(version, f"{type(e).__name__}: {e}")
        raise
    return version
