"""Spark temp views over the blocks of a catalog snapshot.

A view lists exactly the block folders of the active layouts, so files of a
version being built, or of a retired one not yet purged, are never read.
Partition and block folder names become columns (`dt`, `block_id`) through
Spark's partition discovery, which is what lets `block_id IN (...)` prune.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession

from layout_core.catalog import CatalogSnapshot
from layout_core.base.schema import TableSchema
from layout_core.base.names import BLOCK_ID_COLUMN


def _quoted(name: str) -> str:
    """A Spark SQL quoted identifier (a backtick in it doubled, so it cannot end the name)."""
    return "`" + name.replace("`", "``") + "`"


def _empty(spark: SparkSession, table: TableSchema, partition_column: str | None) -> DataFrame:
    ddl = [f"{_quoted(name)} {spark_type}" for name, spark_type in table.columns]
    if partition_column:
        ddl.append(f"{_quoted(partition_column)} string")
    ddl.append(f"{_quoted(BLOCK_ID_COLUMN)} int")
    return spark.createDataFrame([], ", ".join(ddl))


def layout_frame(spark: SparkSession, snapshot: CatalogSnapshot, table: TableSchema) -> DataFrame | None:
    """The rows of a table's active layouts, or None when it has none."""
    info = snapshot.tables.get(table.name)
    layouts = snapshot.layouts_of(table.name)
    if info is None or not layouts:
        return None
    paths = [block.path for layout in layouts for block in layout.blocks if block.row_count > 0]
    if not paths:
        return _empty(spark, table, info.partition_column)
    return spark.read.option("basePath", info.location).parquet(*paths)


def register_layout_views(spark: SparkSession, snapshot: CatalogSnapshot, tables: list[TableSchema]) -> list[str]:
    """Register a temp view per table that has an active layout; returns their names."""
    registered = []
    for table in tables:
        frame = layout_frame(spark, snapshot, table)
        if frame is not None:
            frame.createOrReplaceTempView(table.name)
            registered.append(table.name)
    return registered
