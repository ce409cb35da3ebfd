"""The layout catalog: a real database, through SQLAlchemy Core.

Layout versions move building -> active -> retired -> purged (or building ->
failed -> purged). Every state change that readers must never see half-done
(activating one version while retiring the previous one, reserving block ids)
happens in one transaction. Writers of one table are serialized by locking its
row in `layout_tables` (SELECT ... FOR UPDATE on PostgreSQL; on SQLite every
write transaction is BEGIN IMMEDIATE, which takes the database write lock).
A version only ever retires the version it was built from (see `Catalog`).

JSON is stored as Text and bit vectors as hex text, so both backends store the
same bytes and Python ints wider than 64 bits survive.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
from typing import Any, Callable, Iterable, Iterator

import sqlalchemy as sa

from layout_core.catalog.records import (
    STATES, ActiveLayout, BlockRecord, CalibrationRecord, CatalogSnapshot, CutRecord, CutUpdate,
    PurgeRecord, QueryRecord, RefRead, TableInfo, TreeNodeRecord, VersionInfo, tree_roots,
)

SQLITE_BUSY_TIMEOUT_MS = 30_000
SCHEMA_LOCK_KEY = 0x6C61796F7574  # "layout": the PostgreSQL advisory lock held while setting up tables

# SQLite only auto-increments an INTEGER PRIMARY KEY, so ids are BIGINT elsewhere.
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

metadata = sa.MetaData()


def _version_key() -> sa.Column:
    """The version a row belongs to: part of the key, deleted with its version."""
    return sa.Column("version_id", Id, sa.ForeignKey("layout_versions.version_id", ondelete="CASCADE"),
                     primary_key=True)

tables_t = sa.Table(
    "layout_tables", metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("location", sa.Text, nullable=False),
    sa.Column("partition_column", sa.String(255)),
    sa.Column("schema_json", sa.Text, nullable=False),
    # The next free block id: block ids are unique per table across versions.
    sa.Column("next_block_id", sa.BigInteger, nullable=False, default=0),
)

versions_t = sa.Table(
    "layout_versions", metadata,
    sa.Column("version_id", Id, primary_key=True, autoincrement=True),
    sa.Column("table_name", sa.String(255), sa.ForeignKey("layout_tables.name"), nullable=False),
    sa.Column("partition_name", sa.String(1024), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("optimizer", sa.String(255), nullable=False),
    sa.Column("params_json", sa.Text, nullable=False),
    sa.Column("run_id", sa.String(255), nullable=False),
    sa.Column("n_blocks", sa.BigInteger, nullable=False),
    sa.Column("first_block_id", sa.BigInteger, nullable=False),
    sa.Column("reason", sa.Text),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("activated_at", sa.DateTime(timezone=True)),
    sa.Column("retired_at", sa.DateTime(timezone=True)),
    # The version this one retired on activation. No foreign key: the column is
    # added by ALTER TABLE to older databases, and versions are never deleted.
    sa.Column("parent_version_id", sa.BigInteger),
    sa.Column("failed_at", sa.DateTime(timezone=True)),
    # The version that served the partition when begin_version made this one (NULL: none
    # did): activate refuses the version once another one has replaced that base.
    sa.Column("base_version_id", sa.BigInteger),
    sa.UniqueConstraint("table_name", "partition_name", "run_id", name="layout_versions_run_uq"),
    # The database itself refuses two active versions of one partition.
    sa.Index(
        "layout_versions_one_active", "table_name", "partition_name", unique=True,
        postgresql_where=sa.text("state = 'active'"),
        sqlite_where=sa.text("state = 'active'"),
    ),
)

cuts_t = sa.Table(
    "layout_cuts", metadata,
    _version_key(),
    sa.Column("position", sa.Integer, primary_key=True),
    sa.Column("predicate", sa.Text, nullable=False),
    sa.Column("cut_sql", sa.Text, nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("path_json", sa.Text, nullable=False),
    sa.Column("literal_keys", sa.LargeBinary),
    sa.Column("source_versions_json", sa.Text, nullable=False),
)

blocks_t = sa.Table(
    "layout_blocks", metadata,
    _version_key(),
    sa.Column("block_id", sa.BigInteger, primary_key=True),
    sa.Column("row_count", sa.BigInteger, nullable=False),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("stats_json", sa.Text, nullable=False),
    sa.Column("union_bits", sa.Text, nullable=False),  # hex
    sa.Column("all_bits", sa.Text, nullable=False),  # hex
    # Per tree, the leaf ids holding the block's rows: [[3], [0, 2]]. Older rows hold one
    # leaf per tree, [3, 0]; NULL (a first-release row) means none.
    sa.Column("leaves_json", sa.Text),
    # Pando layouts: the k-tuples of leaf ids of the block's rows, [[3, 0], [4, 2]]; NULL: not known.
    sa.Column("cells_json", sa.Text),
)

tree_nodes_t = sa.Table(
    "layout_tree_nodes", metadata,
    _version_key(),
    sa.Column("tree", sa.Integer, primary_key=True),
    sa.Column("node_id", sa.BigInteger, primary_key=True),
    sa.Column("cut", sa.Integer),  # internal nodes: cut position, bit 1 -> left_id, 0 -> right_id
    sa.Column("left_id", sa.BigInteger),
    sa.Column("right_id", sa.BigInteger),
    sa.Column("leaf_id", sa.BigInteger),  # leaves only
    sa.Column("rows", sa.BigInteger, nullable=False),
)

# A plan can be large (every node of a big tree, per-leaf block counts), so it
# has its own table and version listings never load it.
plans_t = sa.Table(
    "layout_plans", metadata,
    _version_key(),
    sa.Column("plan_json", sa.Text, nullable=False),
)

purges_t = sa.Table(
    "layout_purges", metadata,
    sa.Column("purge_id", Id, primary_key=True, autoincrement=True),
    # NULL for a run staging folder, which belongs to no version.
    sa.Column("version_id", Id, sa.ForeignKey("layout_versions.version_id", ondelete="CASCADE")),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("bytes", sa.BigInteger, nullable=False),
    sa.Column("purged_at", sa.DateTime(timezone=True), nullable=False),
)

# The query history: every routed or imported query, pruned after a retention
# period. Reads are per table reference, so a self-join records each of its scans.
queries_t = sa.Table(
    "layout_queries", metadata,
    sa.Column("query_id", Id, primary_key=True, autoincrement=True),
    sa.Column("ts", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("sql_text", sa.Text, nullable=False),
    sa.Column("fingerprint", sa.String(64), nullable=False, index=True),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("analyzed", sa.Boolean, nullable=False),
)

query_reads_t = sa.Table(
    "layout_query_reads", metadata,
    sa.Column("query_id", Id, sa.ForeignKey("layout_queries.query_id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("ref", sa.Integer, primary_key=True),
    # No foreign key: history outlives a table that is dropped from the catalog.
    sa.Column("table_name", sa.String(255), nullable=False, index=True),
    sa.Column("blocks_read", sa.BigInteger, nullable=False),
    sa.Column("blocks_total", sa.BigInteger, nullable=False),
    sa.Column("rows_read", sa.BigInteger, nullable=False),
    sa.Column("rows_total", sa.BigInteger, nullable=False),
    sa.Column("versions_json", sa.Text, nullable=False),
    sa.Column("block_ids", sa.LargeBinary),  # BitMap64, NULL when read in full
)

# `layout calibrate` measurements of w, the cost of rewriting a block in block
# reads (MTO §5.1.2); the workload-shift reward uses the latest one.
calibrations_t = sa.Table(
    "layout_calibrations", metadata,
    sa.Column("id", Id, primary_key=True, autoincrement=True),
    sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("w", sa.Float, nullable=False),
    sa.Column("write_seconds", sa.Float, nullable=False),  # per block
    sa.Column("read_seconds", sa.Float, nullable=False),  # per block
    sa.Column("block_rows", sa.BigInteger, nullable=False),
    sa.Column("blocks", sa.Integer, nullable=False),
    sa.Column("rounds", sa.Integer),
    sa.Column("location", sa.Text, nullable=False),
)

# Columns added to tables of the first release, in the order they were added.
# New tables need no entry: create_all makes them. Every added column must be
# nullable, since existing rows get NULL.
ADDED_COLUMNS: tuple[sa.Column, ...] = (
    versions_t.c.parent_version_id,
    versions_t.c.failed_at,
    blocks_t.c.leaves_json,
    versions_t.c.base_version_id,
    blocks_t.c.cells_json,
)


class CatalogError(Exception):
    """The catalog was misused: unknown table or version, or a wrong state change."""


class CatalogUnreachable(CatalogError):
    """The catalog database cannot be opened. The message names the URL with its password
    masked; `reason` is the driver's reason alone, without the URL."""

    def __init__(self, url: str, error: BaseException) -> None:
        from layout_core.base.urls import masked_url, without_secrets

        lines = str(getattr(error, "orig", None) or error).strip().splitlines()
        self.reason = without_secrets(lines[0] if lines else type(error).__name__, url)[:300]
        super().__init__(f"cannot open the catalog {masked_url(url)}: {self.reason}")


class VersionSuperseded(CatalogError):
    """`activate` refused a version because another version replaced the one it was
    built from (its base): activating it would silently undo a newer layout. The
    version can never be activated; its run lost the race and should be marked failed."""


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    """Aware UTC datetimes everywhere: SQLite hands back naive ones (stored as UTC)."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


def _dump(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _check_bits_type(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CatalogError(f"bit vectors must be ints, not {type(value).__name__}")
    return value


# --------------------------------------------------------------------- engine


def _make_engine(url: str) -> sa.Engine:
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


def _add_missing_columns(conn: sa.Connection) -> None:
    """Bring a catalog made by older code up to date: ALTER TABLE ADD COLUMN for
    each of ADDED_COLUMNS that its table lacks.

    The caller holds the schema lock (BEGIN IMMEDIATE on SQLite, an advisory
    lock on PostgreSQL), so workers opening one old catalog together add each
    column once; IF NOT EXISTS on PostgreSQL is a second guard.
    """
    inspector = sa.inspect(conn)
    present = {table.name: {c["name"] for c in inspector.get_columns(table.name)}
               for table in {column.table for column in ADDED_COLUMNS}}
    preparer = conn.dialect.identifier_preparer
    if_not_exists = "IF NOT EXISTS " if conn.dialect.name == "postgresql" else ""
    for column in ADDED_COLUMNS:
        assert column.nullable, f"{column} must be nullable to be added to existing rows"
        if column.name in present[column.table.name]:
            continue
        conn.exec_driver_sql(
            f"ALTER TABLE {preparer.format_table(column.table)} ADD COLUMN {if_not_exists}"
            f"{preparer.format_column(column)} {column.type.compile(dialect=conn.dialect)}")
        if column is versions_t.c.base_version_id:
            _backfill_base_versions(conn)


def _backfill_base_versions(conn: sa.Connection) -> None:
    """Versions still unfinished when base_version_id is added began before anyone
    recorded their base: take the version serving their partition now, the base they
    most likely had, so that upgrading the catalog does not make them fail."""
    active = versions_t.alias("active")
    serving = (sa.select(active.c.version_id)
               .where(active.c.table_name == versions_t.c.table_name,
                      active.c.partition_name == versions_t.c.partition_name,
                      active.c.state == "active")
               .scalar_subquery())
    conn.execute(versions_t.update().where(versions_t.c.state.in_(("building", "failed")))
                 .values(base_version_id=serving))


# -------------------------------------------------------------- row -> record


def _table_info(row) -> TableInfo:
    return TableInfo(row.name, row.location, row.partition_column, json.loads(row.schema_json))


def _version_info(row) -> VersionInfo:
    return VersionInfo(
        version_id=row.version_id,
        table=row.table_name,
        partition=row.partition_name,
        state=row.state,
        optimizer=row.optimizer,
        params=json.loads(row.params_json),
        run_id=row.run_id,
        created_at=_utc(row.created_at),
        activated_at=_utc(row.activated_at),
        n_blocks=row.n_blocks,
        retired_at=_utc(row.retired_at),
        reason=row.reason,
        block_ids=range(row.first_block_id, row.first_block_id + row.n_blocks),
        parent_version=row.parent_version_id,
        failed_at=_utc(row.failed_at),
        base_version=row.base_version_id,
    )


def _cut_record(row) -> CutRecord:
    keys = row.literal_keys
    return CutRecord(
        position=row.position,
        predicate=row.predicate,
        sql=row.cut_sql,
        kind=row.kind,
        path=tuple(json.loads(row.path_json)),
        literal_keys=None if keys is None else bytes(keys),
        source_versions=tuple((t, v) for t, v in json.loads(row.source_versions_json)),
    )


def _cut_row(version_id: int, cut: CutRecord) -> dict[str, Any]:
    return {
        "version_id": version_id,
        "position": cut.position,
        "predicate": cut.predicate,
        "cut_sql": cut.sql,
        "kind": cut.kind,
        "path_json": _dump(list(cut.path)),
        "literal_keys": cut.literal_keys,
        "source_versions_json": _dump([[t, int(v)] for t, v in cut.source_versions]),
    }


def _block_record(row) -> BlockRecord:
    return BlockRecord(
        block_id=row.block_id,
        row_count=row.row_count,
        bytes=row.size_bytes,
        path=row.path,
        stats=json.loads(row.stats_json),
        union_bits=int(row.union_bits, 16),
        all_bits=int(row.all_bits, 16),
        # BlockRecord reads the int entries of older rows as one-leaf sets.
        leaves=json.loads(row.leaves_json) if row.leaves_json else (),
        cells=json.loads(row.cells_json) if row.cells_json else (),
    )


def _block_row(version_id: int, block: BlockRecord) -> dict[str, Any]:
    return {
        "version_id": version_id,
        "block_id": block.block_id,
        "row_count": block.row_count,
        "size_bytes": block.bytes,
        "path": block.path,
        "stats_json": _dump(block.stats),
        "union_bits": format(_check_bits_type(block.union_bits), "x"),
        "all_bits": format(_check_bits_type(block.all_bits), "x"),
        "leaves_json": _dump([list(leaf_ids) for leaf_ids in block.leaves]),
        "cells_json": _dump([list(cell) for cell in block.cells]) if block.cells else None,
    }


def _tree_node_record(row) -> TreeNodeRecord:
    return TreeNodeRecord(tree=row.tree, node_id=row.node_id, rows=row.rows, cut=row.cut,
                          left=row.left_id, right=row.right_id, leaf_id=row.leaf_id)


def _tree_node_row(version_id: int, node: TreeNodeRecord) -> dict[str, Any]:
    return {"version_id": version_id, "tree": node.tree, "node_id": node.node_id, "cut": node.cut,
            "left_id": node.left, "right_id": node.right, "leaf_id": node.leaf_id, "rows": node.rows}


def _ref_read(row) -> RefRead:
    return RefRead(row.ref, row.table_name, row.blocks_read, row.blocks_total, row.rows_read,
                   row.rows_total, tuple(json.loads(row.versions_json)),
                   None if row.block_ids is None else bytes(row.block_ids))


def _purge_record(row) -> PurgeRecord:
    return PurgeRecord(row.version_id, row.path, row.bytes, _utc(row.purged_at))


def _calibration_record(row) -> CalibrationRecord:
    return CalibrationRecord(row.id, _utc(row.measured_at), row.w, row.write_seconds, row.read_seconds,
                             row.block_rows, row.blocks, row.rounds, row.location)


# -------------------------------------------------------------------- catalog


class Catalog:
    """Tables, their layout versions, and each version's cuts, blocks, trees and plan.

    Concurrency. Several writers (nightly runs, partial reorganizations, change
    batches, on other machines) and many routers may use one catalog at once:

    - Readers: `snapshot()` (and every other read) is one transaction whose
      statements all see the same moment (REPEATABLE READ on PostgreSQL; one
      SQLite read transaction), so a router never mixes two versions.
    - Writers of a table are serialized by the lock on its `layout_tables` row,
      held only for each short catalog transaction, never across a Spark job.
    - A version may only retire the version it was built from. `begin_version`
      records the version serving the partition then (its base); `activate`
      retires it, or refuses with `VersionSuperseded` if another version went
      live meanwhile (`replaces=` names the base explicitly instead). So of two
      runs of one (table, partition) that overlap between begin_version and
      activate, the first to activate wins and the other fails cleanly; one run
      never undoes a layout built concurrently by another. Runs that do not
      overlap (a day run again later) simply take turns.
    - Retired versions keep their rows and files: gc deletes them only a grace
      period after `retired_at`, so a route taken just before an activation
      still names folders that exist.

    `clock` (returning aware datetimes) is there so tests can pin timestamps.
    """

    def __init__(self, url: str, *, clock: Callable[[], dt.datetime] | None = None) -> None:
        self.url = url
        self._clock = clock or _utcnow
        try:
            self._engine = _make_engine(url)
            self._is_postgres = self._engine.dialect.name == "postgresql"
            with self._write() as conn:
                if self._is_postgres:
                    # Workers opening the catalog together would race to create or alter
                    # the same table; SQLite's BEGIN IMMEDIATE already serializes them.
                    conn.execute(sa.select(sa.func.pg_advisory_xact_lock(SCHEMA_LOCK_KEY)))
                metadata.create_all(conn)
                _add_missing_columns(conn)
        except (sa.exc.SQLAlchemyError, ValueError, ImportError) as e:
            # SQLAlchemy's own messages may quote the whole URL, password included: never
            # let them reach a log (ValueError: a port that is no number; ImportError: no driver)
            raise CatalogUnreachable(url, e) from None

    def close(self) -> None:
        """Release pooled connections (the catalog can be used again afterwards)."""
        self._engine.dispose()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------ transactions

    @contextlib.contextmanager
    def _write(self) -> Iterator[sa.Connection]:
        """A write transaction (BEGIN IMMEDIATE on SQLite), committed on success."""
        with self._engine.connect() as conn:
            conn.execution_options(layout_write=True)
            with conn.begin():
                yield conn

    @contextlib.contextmanager
    def _read(self) -> Iterator[sa.Connection]:
        """A read transaction whose statements all see the same moment.

        PostgreSQL's default READ COMMITTED gives each statement its own
        snapshot, so reads spanning several statements ask for REPEATABLE READ.
        """
        with self._engine.connect() as conn:
            if self._is_postgres:
                conn.execution_options(isolation_level="REPEATABLE READ")
            with conn.begin():
                yield conn

    def _now(self) -> dt.datetime:
        return _utc(self._clock())

    # ------------------------------------------------------------------ tables

    def register_table(self, name: str, location: str, partition_column: str | None = None,
                       schema_json: dict[str, Any] | None = None) -> TableInfo:
        """Add a table or update its description; its block-id counter is kept."""
        values = {"location": location, "partition_column": partition_column,
                  "schema_json": _dump(schema_json or {})}
        try:
            self._upsert_table(name, values)
        except sa.exc.IntegrityError:
            self._upsert_table(name, values)  # lost a race to insert it: now it is an update
        return TableInfo(name, location, partition_column, dict(schema_json or {}))

    def _upsert_table(self, name: str, values: dict[str, Any]) -> None:
        with self._write() as conn:
            if _lock_table_row(conn, name, missing_ok=True) is None:
                conn.execute(tables_t.insert().values(name=name, next_block_id=0, **values))
            else:
                conn.execute(tables_t.update().where(tables_t.c.name == name).values(**values))

    def tables(self) -> list[TableInfo]:
        with self._read() as conn:
            rows = conn.execute(sa.select(tables_t).order_by(tables_t.c.name))
            return [_table_info(row) for row in rows]

    def table(self, name: str) -> TableInfo:
        with self._read() as conn:
            return _table_info(_table_row(conn, name))

    def partitions(self, table: str) -> list[str]:
        """The partitions of a table that have an active version, sorted."""
        with self._read() as conn:
            _table_row(conn, table)
            query = (sa.select(versions_t.c.partition_name)
                     .where(versions_t.c.table_name == table, versions_t.c.state == "active")
                     .order_by(versions_t.c.partition_name))
            return list(conn.scalars(query))

    # ---------------------------------------------------------------- versions

    def begin_version(self, table: str, partition: str, optimizer: str, params: dict[str, Any],
                      run_id: str, n_blocks: int) -> tuple[int, range]:
        """Start (or resume) building a version; returns its id and block ids.

        Idempotent per (table, partition, run_id) so that a retried task picks
        up its own version: a 'building' or 'failed' one is reset to
        'building' and an 'active' one is returned untouched, each with the
        block ids reserved the first time. A retired or purged run id cannot be
        reused, and a retry must ask for the same number of blocks (its block
        ids were reserved once and for all).

        The version that serves the partition now is recorded as the new
        version's base (`VersionInfo.base_version`), also under the table lock:
        `activate` retires that version and no other (see the class docstring).
        A retry keeps the base of the first attempt.
        """
        if n_blocks < 0:
            raise CatalogError(f"n_blocks must be >= 0, not {n_blocks}")
        with self._write() as conn:
            table_row = _lock_table_row(conn, table)
            existing = conn.execute(sa.select(versions_t).where(
                versions_t.c.table_name == table, versions_t.c.partition_name == partition,
                versions_t.c.run_id == run_id)).one_or_none()
            if existing is not None:
                return self._resume_version(conn, existing, n_blocks)
            first = table_row.next_block_id
            conn.execute(tables_t.update().where(tables_t.c.name == table)
                         .values(next_block_id=first + n_blocks))
            result = conn.execute(versions_t.insert().values(
                table_name=table, partition_name=partition, state="building",
                optimizer=optimizer, params_json=_dump(params), run_id=run_id,
                n_blocks=n_blocks, first_block_id=first, created_at=self._now(),
                base_version_id=_serving_version(conn, table, partition)))
            return result.inserted_primary_key[0], range(first, first + n_blocks)

    def _resume_version(self, conn: sa.Connection, row, n_blocks: int) -> tuple[int, range]:
        """The retry branch of `begin_version`."""
        name = f"version {row.version_id} (run {row.run_id!r})"
        if row.state in ("retired", "purged"):
            raise CatalogError(f"{name} is {row.state}; start a new run with a new run_id")
        if row.n_blocks != n_blocks:
            raise CatalogError(f"{name} reserved {row.n_blocks} block ids; "
                               f"a retry cannot ask for {n_blocks}")
        if row.state == "failed":
            conn.execute(versions_t.update().where(versions_t.c.version_id == row.version_id)
                         .values(state="building", reason=None, failed_at=None))
        return row.version_id, range(row.first_block_id, row.first_block_id + row.n_blocks)

    def set_cuts(self, version_id: int, cuts: Iterable[CutRecord]) -> None:
        """Replace the cuts of a version that is still being built."""
        rows = [_cut_row(version_id, cut) for cut in cuts]
        _check_unique([row["position"] for row in rows], "cut position")
        with self._write() as conn:
            _require_state(_lock_version_row(conn, version_id), ("building",), "set its cuts")
            conn.execute(cuts_t.delete().where(cuts_t.c.version_id == version_id))
            if rows:
                conn.execute(cuts_t.insert(), rows)

    def set_blocks(self, version_id: int, blocks: Iterable[BlockRecord], shared_from: int | None = None) -> None:
        """Replace the blocks of a version that is still being built.

        Every block id must come from the version's reserved range: that is
        what keeps block folders of different versions from colliding. The one
        exception is a partial reorganization (`shared_from`): a block it does
        not rewrite keeps its id and folder, which must then be a block of the
        version `shared_from` (same table and partition) with the same path.
        """
        rows = [_block_row(version_id, block) for block in blocks]
        _check_unique([row["block_id"] for row in rows], "block id")
        with self._write() as conn:
            version = _lock_version_row(conn, version_id)
            _require_state(version, ("building",), "set its blocks")
            reserved = range(version.first_block_id, version.first_block_id + version.n_blocks)
            outside = {row["block_id"]: row["path"] for row in rows if row["block_id"] not in reserved}
            if outside and shared_from is not None:
                base = _version_row(conn, shared_from)
                if (base.table_name, base.partition_name) != (version.table_name, version.partition_name):
                    raise CatalogError(f"version {shared_from} is not of {version.table_name} "
                                       f"partition {version.partition_name!r}: its blocks cannot be shared")
                paths = dict(conn.execute(sa.select(blocks_t.c.block_id, blocks_t.c.path).where(
                    blocks_t.c.version_id == shared_from, blocks_t.c.block_id.in_(list(outside)))).all())
                outside = {b: p for b, p in outside.items() if paths.get(b) != p}
            if outside:
                raise CatalogError(f"block ids {sorted(outside)[:10]} are outside version {version_id}'s "
                                   f"reserved range {reserved.start}..{reserved.stop - 1}"
                                   + (f" and are not blocks of version {shared_from} with the same folder"
                                      if shared_from is not None else ""))
            conn.execute(blocks_t.delete().where(blocks_t.c.version_id == version_id))
            if rows:
                conn.execute(blocks_t.insert(), rows)

    def set_trees(self, version_id: int, nodes: Iterable[TreeNodeRecord]) -> None:
        """Replace the tree nodes of a version that is still being built.

        The nodes must form trees numbered 0..k-1 (see `check_trees`), so
        that entry t of a block's `leaves` lists leaf ids of tree t (blocks are
        not checked against the trees: the router reads a block whose lineage
        names a leaf its tree lacks).
        """
        nodes = list(nodes)
        check_trees(nodes)
        rows = [_tree_node_row(version_id, node) for node in nodes]
        with self._write() as conn:
            _require_state(_lock_version_row(conn, version_id), ("building",), "set its trees")
            conn.execute(tree_nodes_t.delete().where(tree_nodes_t.c.version_id == version_id))
            if rows:
                conn.execute(tree_nodes_t.insert(), rows)

    def set_plan(self, version_id: int, plan: dict[str, Any]) -> None:
        """Store (or replace) the layout plan of a version that is still being built."""
        if not isinstance(plan, dict):
            raise CatalogError(f"a layout plan is a JSON object, not {type(plan).__name__}")
        text = _dump(plan)
        with self._write() as conn:
            _require_state(_lock_version_row(conn, version_id), ("building",), "set its plan")
            conn.execute(plans_t.delete().where(plans_t.c.version_id == version_id))
            conn.execute(plans_t.insert().values(version_id=version_id, plan_json=text))

    def activate(self, version_id: int, input_fingerprint: str | None = None,
                 replaces: int | None = None, cut_updates: Iterable[CutUpdate] = ()) -> list[CutUpdate]:
        """Make a built version the one that serves its partition.

        The previously active version is retired in the same transaction, so a
        reader sees either the old layout or the new one, never both or none.
        `input_fingerprint` (rows and checksum of the verified blocks) goes into
        the version's params in that transaction: readers use it to tell
        whether a new version holds the same rows as an old one. With
        `replaces`, the version is activated only while that version is the
        active one (a partial reorganization built from it); without it, only
        while the version it began from (`VersionInfo.base_version`) is. Else
        `VersionSuperseded` (a CatalogError) and nothing changes, so two runs
        from one base never both go live and no run undoes a newer layout.
        `cut_updates` (repaired join-induced cuts of other tables' versions, see
        `CutUpdate`) are written in the same transaction, so no reader sees the
        new data with the old keys; returns the updates that were applied.
        """
        cut_updates = list(cut_updates)
        with self._write() as conn:
            # Lock the table before the version, in the same order as begin_version.
            _lock_table_row(conn, _version_row(conn, version_id).table_name)
            version = _lock_version_row(conn, version_id)
            if version.state == "active":
                return []
            _require_state(version, ("building",), "activate it")
            now = self._now()
            parent = _serving_version(conn, version.table_name, version.partition_name)
            base = replaces if replaces is not None else version.base_version_id
            if parent != base:
                serving = (f"version {parent} serves the partition now" if parent is not None
                           else "no version serves the partition now")
                if replaces is not None:
                    raise VersionSuperseded(f"version {version_id} was built from version {replaces}, but "
                                            f"{serving}")
                began = f"version {base} served" if base is not None else "no version served"
                raise VersionSuperseded(
                    f"version {version_id} of {version.table_name!r} partition {version.partition_name!r} "
                    f"began when {began} the partition, but {serving}: another run went live meanwhile, "
                    f"and activating this one would undo it (start a new run to lay it out again)")
            if parent is not None:
                conn.execute(versions_t.update().where(versions_t.c.version_id == parent)
                             .values(state="retired", retired_at=now))
            values = {"state": "active", "activated_at": now, "parent_version_id": parent}
            if input_fingerprint is not None:
                values["params_json"] = _dump({**json.loads(version.params_json),
                                               "input_fingerprint": input_fingerprint})
            conn.execute(versions_t.update().where(versions_t.c.version_id == version_id).values(**values))
            return _apply_cut_updates(conn, cut_updates)

    def fail(self, version_id: int, reason: str) -> None:
        """Mark a version that could not be built; the active one keeps serving."""
        with self._write() as conn:
            _require_state(_lock_version_row(conn, version_id), ("building", "failed"),
                           "fail it")
            conn.execute(versions_t.update().where(versions_t.c.version_id == version_id)
                         .values(state="failed", reason=reason, failed_at=self._now()))

    def mark_purged(self, version_id: int) -> None:
        """Record that a retired or failed version's files were deleted."""
        with self._write() as conn:
            version = _lock_version_row(conn, version_id)
            if version.state == "purged":
                return
            _require_state(version, ("retired", "failed"), "purge it")
            conn.execute(versions_t.update().where(versions_t.c.version_id == version_id)
                         .values(state="purged"))

    def record_purge(self, version_id: int | None, path: str, size_bytes: int,
                     purged_at: dt.datetime | None = None) -> PurgeRecord:
        """Record that a folder was deleted: a block folder of `version_id`, or
        (version_id None) a run staging folder. `purged_at` defaults to now."""
        record = PurgeRecord(version_id, str(path), int(size_bytes), _utc(purged_at) or self._now())
        with self._write() as conn:
            if version_id is not None:
                _version_row(conn, version_id)
            conn.execute(purges_t.insert().values(version_id=version_id, path=record.path,
                                                  bytes=record.bytes, purged_at=record.purged_at))
        return record

    # ----------------------------------------------------------- query history

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
                         "versions_json": _dump(list(r.versions)), "block_ids": r.block_ids}
                        for r in query.reads])
            if retention is not None:
                _delete_history_before(conn, self._now() - retention)
        return ids

    def prune_history(self, before: dt.datetime) -> int:
        """Delete the queries recorded before `before` (a naive time means UTC); returns how many."""
        with self._write() as conn:
            return _delete_history_before(conn, _utc(before))

    def query_history(self, since: dt.datetime | None = None, until: dt.datetime | None = None,
                      table: str | None = None, limit: int | None = None) -> list[QueryRecord]:
        """Queries with since <= ts < until, oldest first; with `table`, only those
        that read it; with `limit`, the most recent `limit` of them."""
        query = sa.select(queries_t)
        if since is not None:
            query = query.where(queries_t.c.ts >= _utc(since))
        if until is not None:
            query = query.where(queries_t.c.ts < _utc(until))
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
                    reads.setdefault(read.query_id, []).append(_ref_read(read))
        return [QueryRecord(_utc(row.ts), row.sql_text, row.fingerprint, row.source, bool(row.analyzed),
                            tuple(reads.get(row.query_id, ())), row.query_id)
                for row in reversed(rows)]

    # ----------------------------------------------------------------- queries

    def version(self, version_id: int) -> VersionInfo:
        with self._read() as conn:
            return _version_info(_version_row(conn, version_id))

    def versions(self, table: str, partition: str | None = None) -> list[VersionInfo]:
        """All versions of a table (or of one partition), oldest first."""
        with self._read() as conn:
            _table_row(conn, table)
            query = sa.select(versions_t).where(versions_t.c.table_name == table)
            if partition is not None:
                query = query.where(versions_t.c.partition_name == partition)
            rows = conn.execute(query.order_by(versions_t.c.version_id))
            return [_version_info(row) for row in rows]

    def active_layout(self, table: str, partition: str) -> ActiveLayout | None:
        """The layout serving one partition, or None if it has none yet."""
        with self._read() as conn:
            _table_row(conn, table)
            layouts = _active_layouts(conn, [table], partition)
            return layouts.get((table, partition))

    def snapshot(self, tables: list[str] | None = None) -> CatalogSnapshot:
        """Every active layout of the given tables (default: all), read at one moment."""
        with self._read() as conn:
            if tables is None:
                rows = conn.execute(sa.select(tables_t).order_by(tables_t.c.name)).all()
            else:
                rows = [_table_row(conn, name) for name in tables]
            infos = {row.name: _table_info(row) for row in rows}
            layouts = _active_layouts(conn, list(infos))
            return CatalogSnapshot(infos, layouts, _data_fingerprints(conn, layouts))

    def block_paths(self, version_id: int) -> list[str]:
        """The block folders of one version (in any state), by block id."""
        with self._read() as conn:
            _version_row(conn, version_id)
            rows = conn.execute(sa.select(blocks_t.c.path).where(blocks_t.c.version_id == version_id)
                                .order_by(blocks_t.c.block_id))
            return [row.path for row in rows]

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

    def trees(self, version_id: int) -> tuple[TreeNodeRecord, ...]:
        """The tree nodes of one version, by tree then node id (empty without trees)."""
        with self._read() as conn:
            _version_row(conn, version_id)
            rows = conn.execute(sa.select(tree_nodes_t).where(tree_nodes_t.c.version_id == version_id)
                                .order_by(tree_nodes_t.c.tree, tree_nodes_t.c.node_id))
            return tuple(_tree_node_record(row) for row in rows)

    def plan(self, version_id: int) -> dict[str, Any] | None:
        """The layout plan stored with `set_plan`, or None."""
        with self._read() as conn:
            _version_row(conn, version_id)
            text = conn.scalar(sa.select(plans_t.c.plan_json).where(plans_t.c.version_id == version_id))
            return None if text is None else json.loads(text)

    def purges(self) -> list[PurgeRecord]:
        """Every deletion recorded by `record_purge`, oldest first."""
        with self._read() as conn:
            rows = conn.execute(sa.select(purges_t).order_by(purges_t.c.purge_id))
            return [_purge_record(row) for row in rows]

    def retired_before(self, cutoff: dt.datetime) -> list[VersionInfo]:
        """Retired versions whose files may be deleted (a naive cutoff means UTC)."""
        with self._read() as conn:
            rows = conn.execute(sa.select(versions_t).where(
                versions_t.c.state == "retired", versions_t.c.retired_at < _utc(cutoff))
                .order_by(versions_t.c.version_id))
            return [_version_info(row) for row in rows]

    # ------------------------------------------------------------ calibration

    def record_calibration(self, calibration) -> int:
        """Store a `calibrate.Calibration` (or a `CalibrationRecord`); returns its id.

        w and both timings must be finite and > 0; a naive `measured_at` means
        UTC and a missing one means now.
        """
        c = calibration
        numbers = {"w": c.w, "write_seconds_per_block": c.write_seconds_per_block,
                   "read_seconds_per_block": c.read_seconds_per_block}
        for name, value in numbers.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) \
                    or not math.isfinite(value) or value <= 0:
                raise CatalogError(f"a calibration's {name} must be a finite number > 0, not {value!r}")
        if c.block_rows < 1 or c.blocks < 1 or (c.rounds is not None and c.rounds < 1):
            raise CatalogError(f"a calibration needs block_rows, blocks and rounds >= 1, not "
                               f"{c.block_rows}, {c.blocks}, {c.rounds}")
        with self._write() as conn:
            result = conn.execute(calibrations_t.insert().values(
                measured_at=_utc(c.measured_at) or self._now(), w=float(c.w),
                write_seconds=float(c.write_seconds_per_block),
                read_seconds=float(c.read_seconds_per_block), block_rows=int(c.block_rows),
                blocks=int(c.blocks), rounds=None if c.rounds is None else int(c.rounds),
                location=str(c.location)))
            return int(result.inserted_primary_key[0])

    def latest_calibration(self) -> CalibrationRecord | None:
        """The most recently measured calibration (ties: the last recorded), or None."""
        with self._read() as conn:
            row = conn.execute(sa.select(calibrations_t).order_by(
                calibrations_t.c.measured_at.desc(), calibrations_t.c.id.desc()).limit(1)).one_or_none()
            return None if row is None else _calibration_record(row)


# ------------------------------------------------------------------- helpers


def _apply_cut_updates(conn: sa.Connection, updates: list[CutUpdate]) -> list[CutUpdate]:
    """Write the updates whose version is active and whose cut still names the old sources."""
    applied = []
    for update in updates:
        state = conn.scalar(sa.select(versions_t.c.state).where(versions_t.c.version_id == update.version_id))
        where = sa.and_(cuts_t.c.version_id == update.version_id, cuts_t.c.position == update.position,
                        cuts_t.c.kind == "join_induced")
        row = conn.execute(sa.select(cuts_t.c.source_versions_json).where(where)).first()
        if state != "active" or row is None:
            continue
        if [tuple(tv) for tv in json.loads(row.source_versions_json)] != [tuple(tv) for tv in update.old_source_versions]:
            continue
        conn.execute(cuts_t.update().where(where).values(
            literal_keys=update.literal_keys,
            source_versions_json=_dump([[t, int(v)] for t, v in update.source_versions])))
        applied.append(update)
    return applied


def _delete_history_before(conn: sa.Connection, cutoff: dt.datetime) -> int:
    # Reads go first rather than by ON DELETE CASCADE alone: a SQLite connection
    # made without `PRAGMA foreign_keys` would leave them behind.
    old = sa.select(queries_t.c.query_id).where(queries_t.c.ts < cutoff)
    conn.execute(query_reads_t.delete().where(query_reads_t.c.query_id.in_(old)))
    return conn.execute(queries_t.delete().where(queries_t.c.ts < cutoff)).rowcount


def _table_row(conn: sa.Connection, name: str):
    row = conn.execute(sa.select(tables_t).where(tables_t.c.name == name)).one_or_none()
    if row is None:
        raise CatalogError(f"unknown table {name!r}: register it with register_table first")
    return row


def _lock_table_row(conn: sa.Connection, name: str, missing_ok: bool = False):
    """Read a table row and hold it locked: the per-table writer mutex on PostgreSQL."""
    row = conn.execute(
        sa.select(tables_t).where(tables_t.c.name == name).with_for_update()).one_or_none()
    if row is None and not missing_ok:
        raise CatalogError(f"unknown table {name!r}: register it with register_table first")
    return row


def _serving_version(conn: sa.Connection, table: str, partition: str) -> int | None:
    """The id of the version active for (table, partition), or None."""
    return conn.scalar(sa.select(versions_t.c.version_id).where(
        versions_t.c.table_name == table, versions_t.c.partition_name == partition,
        versions_t.c.state == "active"))


def _version_row(conn: sa.Connection, version_id: int):
    row = conn.execute(
        sa.select(versions_t).where(versions_t.c.version_id == version_id)).one_or_none()
    if row is None:
        raise CatalogError(f"unknown layout version {version_id}")
    return row


def _lock_version_row(conn: sa.Connection, version_id: int):
    row = conn.execute(sa.select(versions_t).where(versions_t.c.version_id == version_id)
                       .with_for_update()).one_or_none()
    if row is None:
        raise CatalogError(f"unknown layout version {version_id}")
    return row


def _require_state(row, allowed: tuple[str, ...], action: str) -> None:
    if row.state not in allowed:
        raise CatalogError(f"cannot {action}: version {row.version_id} of "
                           f"{row.table_name!r} partition {row.partition_name!r} is {row.state}, "
                           f"not {' or '.join(allowed)}")


def _check_unique(values: list[int], what: str) -> None:
    if len(set(values)) != len(values):
        seen: set[int] = set()
        dupes = sorted({v for v in values if v in seen or seen.add(v)})
        raise CatalogError(f"duplicate {what}s: {dupes[:10]}")


def check_trees(nodes: list[TreeNodeRecord]) -> None:
    """Refuse nodes that do not form trees 0..k-1: each with unique node and
    leaf ids, children that exist in the same tree, exactly one root, and
    every node reachable from it (no node with two parents, no cycle)."""
    by_tree: dict[int, dict[int, TreeNodeRecord]] = {}
    for node in nodes:
        same_tree = by_tree.setdefault(node.tree, {})
        if node.node_id in same_tree:
            raise CatalogError(f"tree {node.tree}: duplicate node id {node.node_id}")
        same_tree[node.node_id] = node
    if sorted(by_tree) != list(range(len(by_tree))):
        raise CatalogError(f"trees must be numbered 0..{len(by_tree) - 1}, not {sorted(by_tree)}")
    for tree, tree_nodes in by_tree.items():
        _check_tree(tree, tree_nodes)


def _check_tree(tree: int, nodes: dict[int, TreeNodeRecord]) -> None:
    leaf_ids = [node.leaf_id for node in nodes.values() if node.is_leaf]
    if len(set(leaf_ids)) != len(leaf_ids):
        raise CatalogError(f"tree {tree}: duplicate leaf ids")
    for node in nodes.values():
        missing = [c for c in (node.left, node.right) if c is not None and c not in nodes]
        if missing:
            raise CatalogError(f"tree {tree}: node {node.node_id} has children {missing} "
                               f"that are not nodes of the tree")
    roots = tree_roots(nodes.values())[tree]
    if len(roots) != 1:
        raise CatalogError(f"tree {tree} must have exactly one root (a node that is nobody's "
                           f"child), not {len(roots)}: {roots[:10]}")
    seen, stack = set(), [roots[0]]
    while stack:
        node = nodes[stack.pop()]
        if node.node_id in seen:
            raise CatalogError(f"tree {tree}: node {node.node_id} has two parents")
        seen.add(node.node_id)
        if not node.is_leaf:
            stack += [node.left, node.right]
    if len(seen) != len(nodes):
        unreachable = sorted(set(nodes) - seen)
        raise CatalogError(f"tree {tree}: nodes {unreachable[:10]} cannot be reached from the "
                           f"root {roots[0]} (a cycle)")


def _active_layouts(conn: sa.Connection, tables: list[str],
                    partition: str | None = None) -> dict[tuple[str, str], ActiveLayout]:
    """The active layouts of some tables (optionally one partition), with cuts, blocks and trees."""
    if not tables:
        return {}
    active = sa.select(versions_t.c.version_id).where(
        versions_t.c.state == "active", versions_t.c.table_name.in_(tables))
    if partition is not None:
        active = active.where(versions_t.c.partition_name == partition)
    versions = {row.version_id: _version_info(row) for row in conn.execute(
        sa.select(versions_t).where(versions_t.c.version_id.in_(active)))}
    cuts: dict[int, list[CutRecord]] = {vid: [] for vid in versions}
    for row in conn.execute(sa.select(cuts_t).where(cuts_t.c.version_id.in_(active))
                            .order_by(cuts_t.c.version_id, cuts_t.c.position)):
        cuts[row.version_id].append(_cut_record(row))
    blocks: dict[int, list[BlockRecord]] = {vid: [] for vid in versions}
    for row in conn.execute(sa.select(blocks_t).where(blocks_t.c.version_id.in_(active))
                            .order_by(blocks_t.c.version_id, blocks_t.c.block_id)):
        blocks[row.version_id].append(_block_record(row))
    trees: dict[int, list[TreeNodeRecord]] = {vid: [] for vid in versions}
    for row in conn.execute(sa.select(tree_nodes_t).where(tree_nodes_t.c.version_id.in_(active))
                            .order_by(tree_nodes_t.c.version_id, tree_nodes_t.c.tree,
                                      tree_nodes_t.c.node_id)):
        trees[row.version_id].append(_tree_node_record(row))
    return {
        (info.table, info.partition): ActiveLayout(info, tuple(cuts[vid]), tuple(blocks[vid]),
                                                   tuple(trees[vid]))
        for vid, info in versions.items()
    }


def _data_fingerprints(conn: sa.Connection, layouts: dict[tuple[str, str], ActiveLayout]) -> dict[int, str]:
    """Input fingerprints of the active versions and of the versions their cuts were computed from."""
    ids = {layout.version.version_id for layout in layouts.values()}
    ids |= {v for layout in layouts.values() for cut in layout.cuts for _, v in cut.source_versions}
    if not ids:
        return {}
    rows = conn.execute(sa.select(versions_t.c.version_id, versions_t.c.params_json)
                        .where(versions_t.c.version_id.in_(sorted(ids))))
    out = {}
    for row in rows:
        fingerprint = json.loads(row.params_json).get("input_fingerprint")
        if fingerprint:
            out[row.version_id] = str(fingerprint)
    return out
