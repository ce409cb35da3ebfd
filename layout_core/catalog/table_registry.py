"""The tables the catalog lays out: registering them and listing them."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from layout_core.catalog.connection import CatalogConnection, lock_table_row, table_row
from layout_core.catalog.db_tables import tables_t, versions_t
from layout_core.catalog.records import TableInfo
from layout_core.catalog.rows import dump_json, table_info


class TableRegistry(CatalogConnection):
    """`Catalog`'s table methods."""

    def register_table(self, name: str, location: str, partition_column: str | None = None,
                       schema_json: dict[str, Any] | None = None) -> TableInfo:
        """Add a table or update its description; its block-id counter is kept."""
        values = {"location": location, "partition_column": partition_column,
                  "schema_json": dump_json(schema_json or {})}
        try:
            self._upsert_table(name, values)
        except sa.exc.IntegrityError:
            self._upsert_table(name, values)  # lost a race to insert it: now it is an update
        return TableInfo(name, location, partition_column, dict(schema_json or {}))

    def _upsert_table(self, name: str, values: dict[str, Any]) -> None:
        with self._write() as conn:
            if lock_table_row(conn, name, missing_ok=True) is None:
                conn.execute(tables_t.insert().values(name=name, next_block_id=0, **values))
            else:
                conn.execute(tables_t.update().where(tables_t.c.name == name).values(**values))

    def tables(self) -> list[TableInfo]:
        with self._read() as conn:
            rows = conn.execute(sa.select(tables_t).order_by(tables_t.c.name))
            return [table_info(row) for row in rows]

    def table(self, name: str) -> TableInfo:
        with self._read() as conn:
            return table_info(table_row(conn, name))

    def partitions(self, table: str) -> list[str]:
        """The partitions of a table that have an active version, sorted."""
        with self._read() as conn:
            table_row(conn, table)
            query = (sa.select(versions_t.c.partition_name)
                     .where(versions_t.c.table_name == table, versions_t.c.state == "active")
                     .order_by(versions_t.c.partition_name))
            return list(conn.scalars(query))
