"""The catalog's schema revisions (Alembic), applied when a catalog is opened.

`versions/` holds one script per schema change, 0001 being the first
release's tables. They run programmatically (no alembic.ini, no env.py), in
the transaction that holds the schema lock: BEGIN IMMEDIATE on SQLite, an
advisory lock on PostgreSQL, so processes opening one catalog together
upgrade it once. The revision is kept in `layout_alembic_version`, not
`alembic_version`, since Airflow's metadata may live in the same database.

A catalog written before the revisions existed has no version table: its
revision is recognised by its tables and columns (`recognise_revision`) and
stamped before the later revisions run. A revision this code does not know (a
catalog written by newer code), or catalog tables of no known revision, are
refused with a `CatalogSchemaError`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from layout_core.base.urls import masked_url
from layout_core.catalog.engine import make_engine, read_transaction, write_transaction
from layout_core.catalog.errors import CatalogSchemaError, CatalogUnreachable

log = logging.getLogger("layout.catalog")

VERSION_TABLE = "layout_alembic_version"
SCHEMA_LOCK_KEY = 0x6C61796F7574  # "layout": the PostgreSQL advisory lock held while upgrading
SCRIPTS = Path(__file__).parent

# What each revision made before the version table existed, for recognising such
# catalogs: (revision, tables it created, (table, column) pairs it added).
_FIRST_RELEASE_COLUMNS = {
    "layout_tables": {"name", "location", "partition_column", "schema_json", "next_block_id"},
    "layout_versions": {"version_id", "table_name", "partition_name", "state", "optimizer", "params_json",
                        "run_id", "n_blocks", "first_block_id", "reason", "created_at", "activated_at",
                        "retired_at"},
    "layout_cuts": {"version_id", "position", "predicate", "cut_sql", "kind", "path_json", "literal_keys",
                    "source_versions_json"},
    "layout_blocks": {"version_id", "block_id", "row_count", "size_bytes", "path", "stats_json",
                      "union_bits", "all_bits"},
}
UNVERSIONED_REVISIONS: tuple[tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]], ...] = (
    ("0001", tuple(_FIRST_RELEASE_COLUMNS),
     tuple((table, column) for table, columns in _FIRST_RELEASE_COLUMNS.items() for column in columns)),
    ("0002", ("layout_tree_nodes", "layout_plans", "layout_purges"),
     (("layout_versions", "parent_version_id"), ("layout_versions", "failed_at"),
      ("layout_blocks", "leaves_json"))),
    ("0003", ("layout_queries", "layout_query_reads"), ()),
    ("0004", ("layout_calibrations",), ()),
    ("0005", (), (("layout_versions", "base_version_id"),)),
    ("0006", (), (("layout_blocks", "cells_json"),)),
)
CATALOG_TABLES = frozenset(t for _, tables, _ in UNVERSIONED_REVISIONS for t in tables)


class _QuietUpgrade(logging.Filter):
    """Drops Alembic's line per revision while this thread upgrades a catalog (one line
    of our own says what changed); Alembic's other users in the process keep theirs."""

    active = threading.local()

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(self.active, "on", False)


_QUIET = _QuietUpgrade()
for _name in ("alembic.runtime.migration", "alembic.runtime.plugins"):
    logging.getLogger(_name).addFilter(_QUIET)


@contextlib.contextmanager
def _quiet_alembic():
    before = getattr(_QUIET.active, "on", False)
    _QUIET.active.on = True
    try:
        yield
    finally:
        _QUIET.active.on = before


@dataclass(frozen=True)
class SchemaUpgrade:
    """What `upgrade_to_head` found and left: `before` is None for a database without
    a catalog; `recognised` says `before` was read from the tables' columns (a catalog
    written before the version table existed)."""

    before: str | None
    after: str
    recognised: bool = False

    @property
    def changed(self) -> bool:
        return self.before != self.after


_SCRIPTS_LOCK = threading.Lock()


@functools.cache
def _scripts():
    with _SCRIPTS_LOCK, _quiet_alembic():  # threads opening catalogs at once read the scripts once
        from alembic.script import (
            ScriptDirectory,  # alembic only when a schema must change: an up-to-date open skips it
        )

        scripts = ScriptDirectory(str(SCRIPTS))
        scripts.get_current_head()  # loads the revision map now, not lazily in each thread
        return scripts


def head_revision() -> str:
    """The newest revision this code knows."""
    return _scripts().get_current_head()


def known_revisions() -> set[str]:
    return {script.revision for script in _scripts().walk_revisions()}


def stored_revision(conn: sa.Connection) -> str | None:
    """The revision in the version table, or None (no table, or no row)."""
    if not sa.inspect(conn).has_table(VERSION_TABLE):
        return None
    return conn.scalar(sa.text(f"SELECT version_num FROM {VERSION_TABLE}"))


def recognise_revision(conn: sa.Connection, url: str) -> str | None:
    """The revision of a catalog without a version table, from its tables and columns;
    None when the database holds none of the catalog's tables (a new catalog)."""
    inspector = sa.inspect(conn)
    present = CATALOG_TABLES & set(inspector.get_table_names())
    if not present:
        return None
    columns = {table: {c["name"] for c in inspector.get_columns(table)} for table in present}

    def lacking(tables, added) -> list[str]:
        return [t for t in tables if t not in present] + \
               [f"{t}.{c}" for t, c in added if c not in columns.get(t, ())]

    def found(tables, added) -> bool:
        return any(t in present for t in tables) or any(c in columns.get(t, ()) for t, c in added)

    revision = None
    for i, (name, tables, added) in enumerate(UNVERSIONED_REVISIONS):
        missing = lacking(tables, added)
        if missing:
            # A catalog stops at a revision: nothing of this one or a later one may be there.
            if revision is None or any(found(t, a) for _, t, a in UNVERSIONED_REVISIONS[i:]):
                raise _not_a_catalog(url, present, ", ".join(sorted(missing)[:5]))
            return revision
        revision = name
    return revision


def _not_a_catalog(url: str, present: set[str], missing: str) -> CatalogSchemaError:

    return CatalogSchemaError(
        f"{masked_url(url)} is not a layout catalog this code knows: it has the tables "
        f"{', '.join(sorted(present))} but not {missing or 'their columns'}; point --catalog "
        f"(LAYOUT_CATALOG_URL) at a layout catalog or an empty database and run `layout catalog upgrade`")


def _newer(url: str, revision: str) -> CatalogSchemaError:

    return CatalogSchemaError(
        f"the catalog {masked_url(url)} has schema revision {revision}, newer than this layout-core "
        f"knows (newest {head_revision()}): run `pip install --upgrade layout-core` (or use the code "
        f"that wrote it)")


def upgrade_to_head(engine: sa.Engine, url: str) -> SchemaUpgrade:
    """Bring the catalog at `engine` to the newest revision (see the module docstring).

    A catalog already there costs one read transaction; otherwise the schema lock
    is taken and the revision read again under it, so of several processes opening
    one catalog the first upgrades it and the others find it done.
    """

    head = head_revision()
    with read_transaction(engine) as conn:
        stored = stored_revision(conn)
    if stored == head:
        return SchemaUpgrade(head, head)
    if stored is not None and stored not in known_revisions():
        raise _newer(url, stored)
    with write_transaction(engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.select(sa.func.pg_advisory_xact_lock(SCHEMA_LOCK_KEY)))
        return _upgrade_locked(conn, url)


def _upgrade_locked(conn: sa.Connection, url: str) -> SchemaUpgrade:
    with _quiet_alembic():
        upgrade = _run_revisions(conn, url)
    if upgrade.changed:

        before = upgrade.before or "none (new catalog)"
        # an existing catalog's upgrade is worth a line in the log; a new catalog's is not
        log.log(logging.INFO if upgrade.before else logging.DEBUG, "catalog %s: schema revision %s -> %s",
                masked_url(url), f"{before} (recognised by its columns)" if upgrade.recognised else before,
                upgrade.after)
    return upgrade


def _run_revisions(conn: sa.Connection, url: str) -> SchemaUpgrade:
    # alembic only when a schema must change: opening an up-to-date catalog does not load it
    from alembic.operations import Operations
    from alembic.runtime.migration import MigrationContext, MigrationStep

    scripts, head = _scripts(), head_revision()
    before, recognised = stored_revision(conn), False
    if before is None:
        before = recognise_revision(conn, url)
        recognised = before is not None
    elif before not in known_revisions():
        raise _newer(url, before)
    if before == head:
        return SchemaUpgrade(before, head)

    def steps(heads, _context):
        return [MigrationStep.upgrade_from_script(scripts.revision_map, script)
                for script in reversed(list(scripts.iterate_revisions("head", heads, implicit_base=True)))]

    # The connection is in our transaction already: Alembic runs every step inside it.
    context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE, "fn": steps})
    if recognised:
        context.stamp(scripts, before)
    with Operations.context(context):
        context.run_migrations()
    return SchemaUpgrade(before, head, recognised)


def upgrade_catalog(url: str) -> SchemaUpgrade:
    """Upgrade the catalog at `url` to the newest revision (what `layout catalog upgrade`
    runs); returns the revisions before and after."""

    try:
        engine = make_engine(url)
    except (sa.exc.SQLAlchemyError, ValueError, ImportError) as e:
        raise CatalogUnreachable(url, e) from None
    try:
        return upgrade_to_head(engine, url)
    except sa.exc.SQLAlchemyError as e:
        raise CatalogUnreachable(url, e) from None
    finally:
        engine.dispose()
