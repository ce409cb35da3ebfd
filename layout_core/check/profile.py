"""The values random queries draw their literals from, taken from the data.

A predicate with made-up literals is either always or never true; one with
the table's own values is selective, and one with a block's own minimum or
maximum is exactly where an off-by-one in skipping would show. So per column
we keep a seeded sample of its distinct values plus every block's min and
max from the catalog's statistics, and whether the column has NULLs.
"""

from __future__ import annotations

import datetime as dt
import random
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import pyarrow.parquet as pq

from layout_core.catalog import CatalogSnapshot
from layout_core.predicates import value_from_json
from layout_core.base.schema import Schema, kind_of

# Kinds the generator writes literals for; other columns are only projected or counted.
LITERAL_KINDS = ("int", "decimal", "string", "date")


@dataclass(frozen=True)
class ColumnValues:
    """What the data holds in one column: `values` sorted, distinct, never NULL."""

    kind: str
    values: tuple = ()
    has_nulls: bool = False
    distinct: int = 0  # distinct values seen in the sample (a guess at the column's cardinality)

    @property
    def low(self):
        return self.values[0] if self.values else None

    @property
    def high(self):
        return self.values[-1] if self.values else None


@dataclass(frozen=True)
class DataProfile:
    """Per table (the ones queries may read), per column, its values."""

    tables: Mapping[str, Mapping[str, ColumnValues]] = field(default_factory=dict)
    rows: Mapping[str, int] = field(default_factory=dict)  # per table, rows in all its files

    def column(self, table: str, column: str) -> ColumnValues:
        return self.tables[table][column]


def active_block_files(snapshot: CatalogSnapshot, table: str) -> list[str]:
    """The Parquet files of a table's active layouts: exactly the active versions'
    block folders (a retired version's folders may still be on disk)."""
    files = []
    for layout in snapshot.layouts_of(table):
        for block in layout.blocks:
            if block.row_count > 0:
                files += sorted(str(p) for p in Path(block.path).glob("*.parquet"))
    return files


def _safe(value) -> bool:
    """A value we can write as a literal that Spark and DuckDB read alike: strings
    without quotes or backslashes (Spark reads backslash escapes, and adjacent
    literals 'a' 'b' as one), LIKE wildcards or control characters."""
    if isinstance(value, str):
        return not any(ch in value for ch in "'\\%_") and value.isprintable()
    return isinstance(value, (int, Decimal, dt.date)) and not isinstance(value, bool)


def profile_tables(schema: Schema, files: Mapping[str, Sequence[str]], snapshot: CatalogSnapshot | None = None,
                   seed: int = 0, per_column: int = 40, max_files: int = 12,
                   max_edges: int = 200) -> DataProfile:
    """Sample each table's Parquet `files` (at most `max_files` of them, spread
    over the list) for `per_column` distinct values per column, and add (up to
    `max_edges` of) the active blocks' min, max and range ends from `snapshot`."""
    rng = random.Random(f"profile/{seed}")
    tables: dict[str, dict[str, ColumnValues]] = {}
    rows: dict[str, int] = {}
    for name, paths in files.items():
        table = schema.table(name)
        if not paths:
            continue
        step = max(1, len(paths) // max_files)
        chosen = list(paths)[::step][:max_files]
        columns = list(table.column_names)
        rows[name] = sum(pq.ParquetFile(path).metadata.num_rows for path in paths)
        data = {c: [] for c in columns}
        for path in chosen:
            part = pq.read_table(path, columns=columns)
            for c in columns:
                data[c] += part.column(c).to_pylist()
        edges = _block_edges(snapshot, name) if snapshot is not None else {}
        out = {}
        for c, spark_type in table.columns:
            kind = kind_of(spark_type)
            seen = data[c]
            distinct = sorted({v for v in seen if v is not None and _safe(v)})
            sample = rng.sample(distinct, per_column) if len(distinct) > per_column else distinct
            column_edges = sorted(v for v in edges.get(c, ()) if _safe(v) and type(v) is type(distinct[0])) \
                if distinct else []
            if len(column_edges) > max_edges:
                column_edges = rng.sample(column_edges, max_edges)
            pool = set(sample) | set(column_edges)
            if distinct:
                pool |= {distinct[0], distinct[-1]}
            out[c] = ColumnValues(kind, tuple(sorted(pool)), any(v is None for v in seen) or
                                  _stats_have_nulls(snapshot, name, c), len(distinct))
        tables[name] = out
    return DataProfile(tables, rows)


def _block_edges(snapshot: CatalogSnapshot, table: str) -> dict[str, set]:
    edges: dict[str, set] = {}
    for layout in snapshot.layouts_of(table):
        for block in layout.blocks:
            for column, stats in (block.stats or {}).items():
                # the block's min and max, and the ends of its range set's ranges (diPs
                # section 4): a literal in a gap between two ranges is skipped by them
                encoded = [stats.get("min"), stats.get("max")]
                for pair in stats.get("ranges") or ():
                    encoded += list(pair) if isinstance(pair, (list, tuple)) else []
                for item in encoded:
                    try:
                        value = value_from_json(item)
                    except (ValueError, TypeError, AttributeError):
                        continue
                    if value is not None:
                        edges.setdefault(column, set()).add(value)
    return edges


def _stats_have_nulls(snapshot: CatalogSnapshot | None, table: str, column: str) -> bool:
    if snapshot is None:
        return False
    return any(int((block.stats or {}).get(column, {}).get("null_count", 0) or 0) > 0
               for layout in snapshot.layouts_of(table) for block in layout.blocks)


def profile_of(schema: Schema, snapshot: CatalogSnapshot, raw: Mapping[str, str] | None = None,
               tables: Iterable[str] | None = None, seed: int = 0) -> DataProfile:
    """The profile of every table with an active layout (its block files) or a
    raw Parquet path in `raw` (a file or a folder)."""
    files: dict[str, list[str]] = {}
    for name in tables or schema.tables:
        block_files = active_block_files(snapshot, name)
        if block_files:
            files[name] = block_files
        elif raw and name in raw:
            path = Path(raw[name])
            files[name] = sorted(str(p) for p in path.rglob("*.parquet")) if path.is_dir() else [str(path)]
    return profile_tables(schema, files, snapshot, seed)
