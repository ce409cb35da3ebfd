"""Lay out one table partition in one call: flag cuts, assign blocks, write, record, activate.

Used by tests and small tools; the nightly pipeline runs the same steps as
separate Spark jobs so that each can be retried on its own.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from pyspark.sql import Column, DataFrame, SparkSession

from ..catalog import BlockRecord, Catalog, CutRecord
from ..predicates import JoinInduced, Predicate, dumps, to_sql
from ..schema import TableSchema
from ..skipping.router import UNMANAGED_SOURCE
from .blocks import summarize_blocks, with_block_ids, with_cut_flags, write_block_folders


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
