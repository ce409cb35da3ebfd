"""The query history: every routed or imported query and what each of its table
references read, pruned after a retention period."""

from __future__ import annotations

import datetime as dt
from typing import Iterable

import sqlalchemy as sa

from layout_core.catalog.connection import CatalogConnection
from layout_core.catalog.db_tables import queries_t, query_reads_t
from layout_core.catalog.records import QueryRecord, RefRead
from layout_core.catalog.rows import as_utc, dump_json, ref_read


class QueryHistory(CatalogConnection):
    """`Catalog`'s query-history methods."""

    def record_queries(self, queries: Iterable[QueryRecord],
                       retention: dt.timedelta | None = None) -> list[int]:
        """Add queries to the history in one transaction; with `retention`, also
        delete the history older than now - retention. Returns the new query ids."""
        queries = list(queries)
        ids = []
        with self._write() as conn:
            for query in queries:
                query_id = conn.execute(queries_t.insert().values(
                    ts=query.ts, sql_text=query.sql, fingerprint=query.fingerprint,
                    source=query.source, analyzed=query.analyzed)).inserted_primary_key[0]
                ids.append(int(query_id))
                if query.reads:
                    conn.execute(query_reads_t.insert(), [
                        {"query_id": query_id, "ref": r.ref, "table_name": r.table,
                         "blocks_read": r.blocks_read, "blocks_total": r.blocks_total,
                         "rows_read": r.rows_read, "rows_total": r.rows_total,
                         "versions_json": dump_json(list(r.versions)), "block_ids": r.block_ids}
                        for r in query.reads])
            if retention is not None:
                _delete_history_before(conn, self._now() - retention)
        return ids

    def prune_history(self, before: dt.datetime) -> int:
        """Delete the queries recorded before `before` (a naive time means UTC); returns how many."""
        with self._write() as conn:
            return _delete_history_before(conn, as_utc(before))

    def query_history(self, since: dt.datetime | None = None, until: dt.datetime | None = None,
                      table: str | None = None, limit: int | None = None) -> list[QueryRecord]:
        """Queries with since <= ts < until, oldest first; with `table`, only those
        that read it; with `limit`, the most recent `limit` of them."""
        query = sa.select(queries_t)
        if since is not None:
            query = query.where(queries_t.c.ts >= as_utc(since))
        if until is not None:
            query = query.where(queries_t.c.ts < as_utc(until))
        if table is not None:
            query = query.where(queries_t.c.query_id.in_(
                sa.select(query_reads_t.c.query_id).where(query_reads_t.c.table_name == table)))
        query = query.order_by(queries_t.c.ts.desc(), queries_t.c.query_id.desc())
        if limit is not None:
            query = query.limit(limit)
        with self._read() as conn:
            rows = conn.execute(query).all()
            reads: dict[int, list[RefRead]] = {}
            ids = [row.query_id for row in rows]
            for start in range(0, len(ids), 500):  # bounded IN lists
                chunk = ids[start:start + 500]
                for read in conn.execute(sa.select(query_reads_t)
                                         .where(query_reads_t.c.query_id.in_(chunk))
                                         .order_by(query_reads_t.c.query_id, query_reads_t.c.ref)):
                    reads.setdefault(read.query_id, []).append(ref_read(read))
        return [QueryRecord(as_utc(row.ts), row.sql_text, row.fingerprint, row.source, bool(row.analyzed),
                            tuple(reads.get(row.query_id, ())), row.query_id)
                for row in reversed(rows)]


def _delete_history_before(conn: sa.Connection, cutoff: dt.datetime) -> int:
    # Reads go first rather than by ON DELETE CASCADE alone: a SQLite connection
    # made without `PRAGMA foreign_keys` would leave them behind.
    old = sa.select(queries_t.c.query_id).where(queries_t.c.ts < cutoff)
    conn.execute(query_reads_t.delete().where(query_reads_t.c.query_id.in_(old)))
    return conn.execute(queries_t.delete().where(queries_t.c.ts < cutoff)).rowcount
