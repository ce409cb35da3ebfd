"""The catalog's connection to its database (`engine` makes the engine and its
transactions), the row locks that serialize writers, and the lookups every part of
the catalog uses.

Writers of one table are serialized by locking its row in `layout_tables`
(SELECT ... FOR UPDATE on PostgreSQL; on SQLite every write transaction is
BEGIN IMMEDIATE, which takes the database write lock). Opening a catalog brings
its schema to the newest revision first (`migrations.upgrade_to_head`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
from typing import Callable

import sqlalchemy as sa

from layout_core.catalog.db_tables import tables_t, versions_t
from layout_core.catalog.engine import make_engine, read_transaction, write_transaction
from layout_core.catalog.errors import CatalogError, CatalogUnreachable
from layout_core.catalog.migrations import upgrade_to_head
from layout_core.catalog.rows import as_utc, utcnow


class CatalogConnection:
    """Opens the catalog database (upgrading its schema) and hands out transactions;
    the parts of `Catalog` build on it."""

    def __init__(self, url: str, *, clock: Callable[[], dt.datetime] | None = None) -> None:
        self.url = url
        self._clock = clock or utcnow
        try:
            self._engine = make_engine(url)
            self._is_postgres = self._engine.dialect.name == "postgresql"
            upgrade_to_head(self._engine, url)
        except (sa.exc.SQLAlchemyError, ValueError, ImportError) as e:
            # SQLAlchemy's own messages may quote the whole URL, password included: never
            # let them reach a log (ValueError: a port that is no number; ImportError: no driver)
            raise CatalogUnreachable(url, e) from None

    def close(self) -> None:
        """Release pooled connections (the catalog can be used again afterwards)."""
        self._engine.dispose()

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _write(self) -> contextlib.AbstractContextManager[sa.Connection]:
        """A write transaction (BEGIN IMMEDIATE on SQLite), committed on success."""
        return write_transaction(self._engine)

    def _read(self) -> contextlib.AbstractContextManager[sa.Connection]:
        """A read transaction whose statements all see the same moment."""
        return read_transaction(self._engine)

    def _now(self) -> dt.datetime:
        return as_utc(self._clock())


# ------------------------------------------------------------------ lookups


def table_row(conn: sa.Connection, name: str):
    row = conn.execute(sa.select(tables_t).where(tables_t.c.name == name)).one_or_none()
    if row is None:
        raise CatalogError(f"unknown table {name!r}: register it with register_table first")
    return row


def lock_table_row(conn: sa.Connection, name: str, missing_ok: bool = False):
    """Read a table row and hold it locked: the per-table writer mutex on PostgreSQL."""
    row = conn.execute(
        sa.select(tables_t).where(tables_t.c.name == name).with_for_update()).one_or_none()
    if row is None and not missing_ok:
        raise CatalogError(f"unknown table {name!r}: register it with register_table first")
    return row


def version_row(conn: sa.Connection, version_id: int):
    row = conn.execute(
        sa.select(versions_t).where(versions_t.c.version_id == version_id)).one_or_none()
    if row is None:
        raise CatalogError(f"unknown layout version {version_id}")
    return row


def lock_version_row(conn: sa.Connection, version_id: int):
    row = conn.execute(sa.select(versions_t).where(versions_t.c.version_id == version_id)
                       .with_for_update()).one_or_none()
    if row is None:
        raise CatalogError(f"unknown layout version {version_id}")
    return row


def serving_version(conn: sa.Connection, table: str, partition: str) -> int | None:
    """The id of the version active for (table, partition), or None."""
    return conn.scalar(sa.select(versions_t.c.version_id).where(
        versions_t.c.table_name == table, versions_t.c.partition_name == partition,
        versions_t.c.state == "active"))


def require_state(row, allowed: tuple[str, ...], action: str) -> None:
    if row.state not in allowed:
        raise CatalogError(f"cannot {action}: version {row.version_id} of "
                           f"{row.table_name!r} partition {row.partition_name!r} is {row.state}, "
                           f"not {' or '.join(allowed)}")
