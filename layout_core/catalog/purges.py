"""What garbage collection asks of the catalog and records in it: versions whose
files may go, their block folders, and the folders it deleted."""

from __future__ import annotations

import datetime as dt
from typing import Iterable

import sqlalchemy as sa

from layout_core.catalog.connection import CatalogConnection, lock_version_row, require_state, version_row
from layout_core.catalog.db_tables import blocks_t, purges_t, versions_t
from layout_core.catalog.errors import CatalogError
from layout_core.catalog.records import STATES, PurgeRecord, VersionInfo
from layout_core.catalog.rows import as_utc, purge_record, version_info


class PurgeLedger(CatalogConnection):
    """`Catalog`'s garbage-collection methods."""

    def retired_before(self, cutoff: dt.datetime) -> list[VersionInfo]:
        """Retired versions whose files may be deleted (a naive cutoff means UTC)."""
        with self._read() as conn:
            rows = conn.execute(sa.select(versions_t).where(
                versions_t.c.state == "retired", versions_t.c.retired_at < as_utc(cutoff))
                .order_by(versions_t.c.version_id))
            return [version_info(row) for row in rows]

    def block_paths_in_states(self, states: Iterable[str]) -> dict[int, list[str]]:
        """The block folders of every version in the given states, by version id
        (one query, for garbage collection); versions without blocks are absent."""
        states = sorted(set(states))
        unknown = [state for state in states if state not in STATES]
        if unknown:
            raise CatalogError(f"unknown version states {unknown}: use {STATES}")
        query = (sa.select(blocks_t.c.version_id, blocks_t.c.path)
                 .join(versions_t, versions_t.c.version_id == blocks_t.c.version_id)
                 .where(versions_t.c.state.in_(states))
                 .order_by(blocks_t.c.version_id, blocks_t.c.block_id))
        out: dict[int, list[str]] = {}
        with self._read() as conn:
            for row in conn.execute(query):
                out.setdefault(row.version_id, []).append(row.path)
        return out

    def mark_purged(self, version_id: int) -> None:
        """Record that a retired or failed version's files were deleted."""
        with self._write() as conn:
            version = lock_version_row(conn, version_id)
            if version.state == "purged":
                return
            require_state(version, ("retired", "failed"), "purge it")
            conn.execute(versions_t.update().where(versions_t.c.version_id == version_id)
                         .values(state="purged"))

    def record_purge(self, version_id: int | None, path: str, size_bytes: int,
                     purged_at: dt.datetime | None = None) -> PurgeRecord:
        """Record that a folder was deleted: a block folder of `version_id`, or
        (version_id None) a run staging folder. `purged_at` defaults to now."""
        record = PurgeRecord(version_id, str(path), int(size_bytes), as_utc(purged_at) or self._now())
        with self._write() as conn:
            if version_id is not None:
                version_row(conn, version_id)
            conn.execute(purges_t.insert().values(version_id=version_id, path=record.path,
                                                  bytes=record.bytes, purged_at=record.purged_at))
        return record

    def purges(self) -> list[PurgeRecord]:
        """Every deletion recorded by `record_purge`, oldest first."""
        with self._read() as conn:
            rows = conn.execute(sa.select(purges_t).order_by(purges_t.c.purge_id))
            return [purge_record(row) for row in rows]
