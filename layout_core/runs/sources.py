"""The data of other tables' layouts that a run reads: dimension tables whose rows
decide the bits of join-induced cuts, read from the block folders of their versions."""

from __future__ import annotations

from pathlib import Path

from layout_core.base.schema import Schema
from layout_core.runs.paths import StepError


def active_sources(catalog, tables: set[str]) -> dict[str, dict]:
    """{table: {"versions": [...], "paths": [...]}} for the tables that have active, non-empty layouts."""
    registered = {t.name for t in catalog.tables()}
    snapshot = catalog.snapshot(sorted(tables & registered))
    sources = {}
    for table in sorted(tables & registered):
        layouts = snapshot.layouts_of(table)
        block_paths = [b.path for layout in layouts for b in layout.blocks]
        if block_paths:
            sources[table] = {"versions": sorted(layout.version.version_id for layout in layouts),
                              "paths": block_paths}
    return sources


def source_frames(spark, schema: Schema, paths_by_table: dict[str, list[str]]) -> dict:
    """The data of dimension tables, read from their block folders."""
    missing = [p for paths in paths_by_table.values() for p in paths if not Path(p).is_dir()]
    if missing:
        raise StepError(f"{len(missing)} block folders of a dimension layout are missing, e.g. {missing[0]}")
    return {table: spark.read.parquet(*paths).select(*schema.table(table).column_names)
            for table, paths in paths_by_table.items()}


def frames_of_versions(spark, catalog, schema: Schema, versions) -> dict:
    """The data of the dimension layout versions `versions` ((table, version id) pairs) that
    join-induced cut bits were computed from, read from their block folders."""
    by_table: dict[str, list[str]] = {}
    for t, v in sorted(set(versions)):
        by_table.setdefault(t, []).extend(catalog.block_paths(v))
    return source_frames(spark, schema, by_table) if by_table else {}
