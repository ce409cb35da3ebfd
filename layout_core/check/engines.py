"""Engines that run a query over exactly the active layouts' block folders.

Both read the same Parquet: one view per table listing the active versions'
block folders (never a glob of the table's location: a retired version's
folders may still be on disk), with the `block_id=` (and partition) folder
names as columns, so a rewritten query's `block_id IN (...)` selects blocks.

The router and the rewrite speak Spark SQL. DuckDB gets every statement
through `to_duckdb`, the one place SQL is transpiled: the query as written and
the rewritten one go through the same translation, so a difference between
their answers is a skipping bug, not a dialect difference.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Mapping, Sequence

import sqlglot
from sqlglot import exp

from layout_core.catalog import CatalogSnapshot
from layout_core.base.schema import Schema
from layout_core.check.profile import active_block_files


class EngineError(Exception):
    """The engine could not run a statement (it does not support it, or it timed out)."""


def to_duckdb(spark_sql: str) -> str:
    """A Spark SQL statement in DuckDB's dialect (sqlglot)."""
    (statement,) = sqlglot.transpile(spark_sql, read="spark", write="duckdb")
    return statement


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _name(identifier: str) -> str:
    """A DuckDB quoted identifier (a quote in it doubled, so it cannot end the name)."""
    return '"' + identifier.replace('"', '""') + '"'


class DuckDBEngine:
    """An in-memory DuckDB with a view per table over its block files (or a raw
    Parquet path for a table without a layout)."""

    name = "duckdb"

    def __init__(self, schema: Schema, snapshot: CatalogSnapshot, raw: Mapping[str, str] | None = None,
                 timeout_seconds: float = 60.0, threads: int | None = None):
        import duckdb  # only where this engine runs: the Spark engine's checks do not load it

        self.timeout_seconds = timeout_seconds
        self.connection = duckdb.connect(":memory:")
        if threads:
            self.connection.execute(f"SET threads = {int(threads)}")
        self.tables: list[str] = []
        for table in schema.tables.values():
            statement = self._view(table, snapshot, raw or {})
            if statement:
                self.connection.execute(statement)
                self.tables.append(table.name)

    @staticmethod
    def _view(table, snapshot: CatalogSnapshot, raw: Mapping[str, str]) -> str | None:
        name = _name(table.name)
        info = snapshot.tables.get(table.name)
        if snapshot.layouts_of(table.name) and info is not None:
            files = active_block_files(snapshot, table.name)
            if not files:  # an active layout without rows: an empty view of the right columns
                return f"CREATE VIEW {name} AS {_empty_select(table, info.partition_column)}"
            listed = ", ".join(_quote(f) for f in files)
            # block_id as Spark's partition discovery types it (int); the partition
            # column as a string, as the rewrite's `dt IN ('...')` compares it
            types = {"block_id": "INTEGER"}
            if info.partition_column:
                types[info.partition_column] = "VARCHAR"
            hive_types = "{" + ", ".join(f"{_quote(k)}: {_quote(v)}" for k, v in types.items()) + "}"
            return (f"CREATE VIEW {name} AS SELECT * FROM read_parquet([{listed}], hive_partitioning = true, "
                    f"hive_types = {hive_types})")
        if table.name in raw:
            path = Path(raw[table.name])
            source = str(path / "**" / "*.parquet") if path.is_dir() else str(path)
            return f"CREATE VIEW {name} AS SELECT * FROM read_parquet({_quote(source)})"
        return None

    def run(self, spark_sql: str) -> list[tuple]:
        """The rows of a Spark SQL query, run by DuckDB; EngineError when it cannot."""
        import duckdb  # only where this engine runs: the Spark engine's checks do not load it

        try:
            statement = to_duckdb(spark_sql)
        except Exception as e:  # noqa: BLE001 - any transpile failure: the query is not comparable
            raise EngineError(f"cannot transpile: {type(e).__name__}: {e}") from None
        timer = threading.Timer(self.timeout_seconds, self.connection.interrupt)
        timer.start()
        try:
            return self.connection.execute(statement).fetchall()
        except duckdb.Error as e:
            raise EngineError(f"{type(e).__name__}: {e}") from None
        finally:
            timer.cancel()

    def close(self) -> None:
        self.connection.close()


def _empty_select(table, partition_column: str | None) -> str:
    items = [f"CAST(NULL AS {exp.DataType.build(t, dialect='spark').sql('duckdb')}) AS {_name(c)}"
             for c, t in table.columns]
    if partition_column:
        items.append(f'CAST(NULL AS VARCHAR) AS {_name(partition_column)}')
    items.append('CAST(NULL AS INTEGER) AS "block_id"')
    return f"SELECT {', '.join(items)} WHERE FALSE"


class SparkEngine:
    """Spark temp views over the block folders (`spark.views`), raw Parquet for the rest."""

    name = "spark"

    def __init__(self, spark, schema: Schema, snapshot: CatalogSnapshot, raw: Mapping[str, str] | None = None):
        # pyspark only for the Spark engine: a DuckDB check runs without it
        from layout_core.spark.views import register_layout_views

        self.spark = spark
        tables = list(schema.tables.values())
        self.tables = register_layout_views(spark, snapshot, tables)
        for name, path in (raw or {}).items():
            if name not in self.tables and name in schema.tables:
                spark.read.parquet(str(path)).createOrReplaceTempView(name)
                self.tables.append(name)

    def run(self, spark_sql: str) -> list[tuple]:
        try:
            return [tuple(row) for row in self.spark.sql(spark_sql).collect()]
        except Exception as e:  # noqa: BLE001 - AnalysisException, unsupported subqueries, ...
            message = " ".join(str(e).split())[:500]
            raise EngineError(f"{type(e).__name__}: {message}") from None

    def close(self) -> None:
        pass


def raw_tables(folder: str | Path | None, tables: Sequence[str]) -> dict[str, str]:
    """`<folder>/<table>.parquet` (file or folder) per table that has one."""
    if not folder:
        return {}
    out: dict[str, str] = {}
    for name in tables:
        path = Path(folder) / f"{name}.parquet"
        if path.exists():
            out[name] = str(path)
    return out
