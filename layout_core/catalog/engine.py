"""The catalog database's engine and its read and write transactions (what opening a
catalog and upgrading its schema both need)."""

from __future__ import annotations

import contextlib
from typing import Iterator

import sqlalchemy as sa

SQLITE_BUSY_TIMEOUT_MS = 30_000


def make_engine(url: str) -> sa.Engine:
    """An engine; SQLite gets foreign keys, a busy timeout and explicit BEGINs.

    pysqlite starts transactions lazily and on its own terms; taking that over
    (the recipe from SQLAlchemy's SQLite docs) lets write transactions start
    with BEGIN IMMEDIATE, so two writers queue on the busy timeout instead of
    failing when a read lock cannot be upgraded.
    """
    if not sa.make_url(url).get_backend_name() == "sqlite":
        return sa.create_engine(url, pool_pre_ping=True)
    engine = sa.create_engine(
        url, connect_args={"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000})

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        cursor.execute("PRAGMA foreign_keys = ON")
        cursor.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        cursor.close()

    @sa.event.listens_for(engine, "begin")
    def _on_begin(conn):
        immediate = conn.get_execution_options().get("layout_write", False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


@contextlib.contextmanager
def write_transaction(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A write transaction (BEGIN IMMEDIATE on SQLite), committed on success."""
    with engine.connect() as conn:
        conn.execution_options(layout_write=True)
        with conn.begin():
            yield conn


@contextlib.contextmanager
def read_transaction(engine: sa.Engine) -> Iterator[sa.Connection]:
    """A read transaction whose statements all see the same moment.

    PostgreSQL's default READ COMMITTED gives each statement its own
    snapshot, so reads spanning several statements ask for REPEATABLE READ.
    """
    with engine.connect() as conn:
        if engine.dialect.name == "postgresql":
            conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            yield conn
