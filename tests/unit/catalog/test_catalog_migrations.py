"""The catalog's schema revisions (Alembic) on SQLite and PostgreSQL: older catalogs are
upgraded on open and keep their rows, newer ones and databases that are not catalogs are
refused with one line, and `layout catalog upgrade` reports the revisions."""

from __future__ import annotations

import datetime as dt
import logging

import pytest
import sqlalchemy as sa

from layout_core.base.errors import UserError
from layout_core.catalog import BlockRecord, Catalog, CatalogError, CatalogSchemaError, TreeNodeRecord, upgrade_catalog
from layout_core.catalog.db_tables import metadata
from layout_core.catalog.migrations import VERSION_TABLE, head_revision, stored_revision
from layout_core.cli import main
from tests.unit.catalog.test_catalog import DIALECT_TYPES, make_first_release_catalog, run_in_threads

UTC = dt.timezone.utc
T1 = dt.datetime(2024, 3, 2, 12, 0, 0, tzinfo=UTC)

# A catalog as the code of 2026-11-25 to 2026-11-27 created it: every table and column of
# today's but the blocks' cells_json, with parent_version_id and base_version_id where
# today's catalog has replaces_version_id.
BEFORE_CELLS_DDL = """
CREATE TABLE layout_tables (
    name VARCHAR(255) PRIMARY KEY, location TEXT NOT NULL, partition_column VARCHAR(255),
    schema_json TEXT NOT NULL, next_block_id BIGINT NOT NULL);
CREATE TABLE layout_versions (
    version_id {id} PRIMARY KEY,
    table_name VARCHAR(255) NOT NULL REFERENCES layout_tables (name),
    partition_name VARCHAR(1024) NOT NULL, state VARCHAR(16) NOT NULL,
    optimizer VARCHAR(255) NOT NULL, params_json TEXT NOT NULL, run_id VARCHAR(255) NOT NULL,
    n_blocks BIGINT NOT NULL, first_block_id BIGINT NOT NULL, reason TEXT, created_at {ts} NOT NULL,
    activated_at {ts}, retired_at {ts}, parent_version_id BIGINT, failed_at {ts}, base_version_id BIGINT,
    CONSTRAINT layout_versions_run_uq UNIQUE (table_name, partition_name, run_id));
CREATE UNIQUE INDEX layout_versions_one_active ON layout_versions (table_name, partition_name)
    WHERE state = 'active';
CREATE TABLE layout_cuts (
    version_id {fk_id} NOT NULL REFERENCES layout_versions (version_id) ON DELETE CASCADE,
    position INTEGER NOT NULL, predicate TEXT NOT NULL, cut_sql TEXT NOT NULL,
    kind VARCHAR(32) NOT NULL, path_json TEXT NOT NULL, literal_keys {blob},
    source_versions_json TEXT NOT NULL, PRIMARY KEY (version_id, position));
CREATE TABLE layout_blocks (
    version_id {fk_id} NOT NULL REFERENCES layout_versions (version_id) ON DELETE CASCADE,
    block_id BIGINT NOT NULL, row_count BIGINT NOT NULL, size_bytes BIGINT NOT NULL,
    path TEXT NOT NULL, stats_json TEXT NOT NULL, union_bits TEXT NOT NULL, all_bits TEXT NOT NULL,
    leaves_json TEXT, PRIMARY KEY (version_id, block_id));
CREATE TABLE layout_tree_nodes (
    version_id {fk_id} NOT NULL REFERENCES layout_versions (version_id) ON DELETE CASCADE,
    tree INTEGER NOT NULL, node_id BIGINT NOT NULL, cut INTEGER, left_id BIGINT, right_id BIGINT,
    leaf_id BIGINT, rows BIGINT NOT NULL, PRIMARY KEY (version_id, tree, node_id));
CREATE TABLE layout_plans (
    version_id {fk_id} NOT NULL PRIMARY KEY REFERENCES layout_versions (version_id) ON DELETE CASCADE,
    plan_json TEXT NOT NULL);
CREATE TABLE layout_purges (
    purge_id {id} PRIMARY KEY,
    version_id {fk_id} REFERENCES layout_versions (version_id) ON DELETE CASCADE,
    path TEXT NOT NULL, bytes BIGINT NOT NULL, purged_at {ts} NOT NULL);
CREATE TABLE layout_queries (
    query_id {id} PRIMARY KEY, ts {ts} NOT NULL, sql_text TEXT NOT NULL,
    fingerprint VARCHAR(64) NOT NULL, source VARCHAR(16) NOT NULL, analyzed BOOLEAN NOT NULL);
CREATE INDEX ix_layout_queries_ts ON layout_queries (ts);
CREATE INDEX ix_layout_queries_fingerprint ON layout_queries (fingerprint);
CREATE TABLE layout_query_reads (
    query_id {fk_id} NOT NULL REFERENCES layout_queries (query_id) ON DELETE CASCADE,
    ref INTEGER NOT NULL, table_name VARCHAR(255) NOT NULL, blocks_read BIGINT NOT NULL,
    blocks_total BIGINT NOT NULL, rows_read BIGINT NOT NULL, rows_total BIGINT NOT NULL,
    versions_json TEXT NOT NULL, block_ids {blob}, PRIMARY KEY (query_id, ref));
CREATE INDEX ix_layout_query_reads_table_name ON layout_query_reads (table_name);
CREATE TABLE layout_calibrations (
    id {id} PRIMARY KEY, measured_at {ts} NOT NULL, w FLOAT NOT NULL, write_seconds FLOAT NOT NULL,
    read_seconds FLOAT NOT NULL, block_rows BIGINT NOT NULL, blocks INTEGER NOT NULL, rounds INTEGER,
    location TEXT NOT NULL);
CREATE INDEX ix_layout_calibrations_measured_at ON layout_calibrations (measured_at);
INSERT INTO layout_tables VALUES ('orders', '/w/orders', NULL, '{{}}', 6);
INSERT INTO layout_versions (table_name, partition_name, state, optimizer, params_json, run_id, n_blocks,
                             first_block_id, created_at, activated_at, retired_at)
    VALUES ('orders', '', 'retired', 'qdtree', '{{}}', 'run-1', 2, 0, {t0}, {t0}, {t1});
INSERT INTO layout_versions (table_name, partition_name, state, optimizer, params_json, run_id, n_blocks,
                             first_block_id, created_at, activated_at, parent_version_id, base_version_id)
    VALUES ('orders', '', 'active', 'qdtree', '{{"input_fingerprint": "20:7"}}', 'run-2', 2, 2, {t0}, {t1}, 1, 1);
INSERT INTO layout_versions (table_name, partition_name, state, optimizer, params_json, run_id, n_blocks,
                             first_block_id, created_at, base_version_id)
    VALUES ('orders', '', 'building', 'qdtree', '{{}}', 'run-3', 1, 4, {t1}, 2);
INSERT INTO layout_versions (table_name, partition_name, state, optimizer, params_json, run_id, n_blocks,
                             first_block_id, created_at, failed_at, reason, base_version_id)
    VALUES ('orders', '', 'failed', 'qdtree', '{{}}', 'run-4', 1, 5, {t1}, {t1}, 'disk full', 2);
INSERT INTO layout_blocks VALUES (2, 2, 10, 100, '/w/orders/block_id=2', '{{}}', '3', '1', '[[0]]');
INSERT INTO layout_blocks VALUES (2, 3, 10, 100, '/w/orders/block_id=3', '{{}}', '2', '0', '[1]');
INSERT INTO layout_cuts VALUES (2, 0, 'pred', 'o_orderkey < 5', 'simple', '[]', NULL, '[]');
INSERT INTO layout_tree_nodes VALUES (2, 0, 0, 0, 1, 2, NULL, 20);
INSERT INTO layout_tree_nodes VALUES (2, 0, 1, NULL, NULL, NULL, 0, 10);
INSERT INTO layout_tree_nodes VALUES (2, 0, 2, NULL, NULL, NULL, 1, 10);
INSERT INTO layout_plans VALUES (2, '{{"kind":"tree"}}');
INSERT INTO layout_purges (version_id, path, bytes, purged_at) VALUES (1, '/w/orders/block_id=0', 100, {t1});
INSERT INTO layout_queries (ts, sql_text, fingerprint, source, analyzed)
    VALUES ({t1}, 'SELECT 1 FROM orders', 'abc', 'route', TRUE);
INSERT INTO layout_query_reads VALUES (1, 0, 'orders', 1, 2, 10, 20, '[2]', NULL);
INSERT INTO layout_calibrations (measured_at, w, write_seconds, read_seconds, block_rows, blocks, rounds, location)
    VALUES ({t1}, 2.0, 0.2, 0.1, 1000, 4, 3, '/w');
"""

T1_LITERAL = {"sqlite": "'2024-03-02 12:00:00.000000'", "postgresql": "'2024-03-02 12:00:00+00'"}


def run_sql(url: str, script: str) -> None:
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for statement in script.split(";"):
            if statement.strip():
                conn.exec_driver_sql(statement)
    engine.dispose()


def make_catalog_before_cells(url: str) -> None:
    dialect = sa.make_url(url).get_backend_name()
    run_sql(url, BEFORE_CELLS_DDL.format(**DIALECT_TYPES[dialect], t1=T1_LITERAL[dialect]))


def columns_of(url: str, table: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return {c["name"] for c in sa.inspect(engine).get_columns(table)}
    finally:
        engine.dispose()


def revision_of(url: str) -> str | None:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return stored_revision(conn)
    finally:
        engine.dispose()


def table_names(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_a_new_catalog_is_at_the_newest_revision_in_its_own_version_table(catalog_url):
    with Catalog(catalog_url) as cat:
        assert cat.tables() == []
    assert revision_of(catalog_url) == head_revision() == "0007"
    names = table_names(catalog_url)
    assert VERSION_TABLE in names and "alembic_version" not in names


def test_the_revisions_make_the_tables_the_code_queries(catalog_url):
    """The migrations' result and db_tables' description agree (Alembic's comparison)."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    Catalog(catalog_url).close()
    engine = sa.create_engine(catalog_url)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"version_table": VERSION_TABLE})
        assert compare_metadata(context, metadata) == []
    engine.dispose()


def test_a_first_release_catalog_is_upgraded_on_open_and_keeps_its_rows(catalog_url):
    make_first_release_catalog(catalog_url)
    assert revision_of(catalog_url) is None

    with Catalog(catalog_url) as cat:
        (old,) = cat.versions("orders")
        assert (old.state, old.run_id, old.replaces, old.block_ids) == ("active", "run-1", None, range(0, 2))
        assert cat.active_layout("orders", "").blocks == (
            BlockRecord(1, 10, 1000, "/warehouse/orders/block_id=1", {}, 10, 0),)
        new, ids = cat.begin_version("orders", "", "greedy", {}, "run-2", 1)
        assert ids == range(2, 3)
        cat.set_blocks(new, [BlockRecord(2, 5, 50, "/w/b2", {}, 1, 1, leaves=((0, 1),), cells=((0,), (1,)))])
        cat.activate(new)
        assert cat.version(new).replaces == old.version_id
    assert revision_of(catalog_url) == head_revision()
    versions = columns_of(catalog_url, "layout_versions")
    assert "replaces_version_id" in versions and "routing_index_json" not in versions
    assert not {"parent_version_id", "base_version_id"} & versions


def test_a_catalog_from_before_the_cells_column_is_upgraded_on_open_and_keeps_its_rows(catalog_url):
    make_catalog_before_cells(catalog_url)

    with Catalog(catalog_url) as cat:
        retired, active, building, failed = cat.versions("orders")
        # activated versions keep the one they retired, the others the one they began from
        assert [v.replaces for v in (retired, active, building, failed)] == [None, 1, 2, 2]
        assert (failed.state, failed.reason, failed.failed_at) == ("failed", "disk full", T1)
        layout = cat.active_layout("orders", "")
        assert layout.version.params == {"input_fingerprint": "20:7"}
        assert [(b.block_id, b.leaves, b.cells, b.union_bits) for b in layout.blocks] == [
            (2, ((0,),), (), 3), (3, ((1,),), (), 2)]
        assert [c.sql for c in layout.cuts] == ["o_orderkey < 5"]
        assert layout.trees == (TreeNodeRecord(0, 0, 20, cut=0, left=1, right=2),
                                TreeNodeRecord(0, 1, 10, leaf_id=0), TreeNodeRecord(0, 2, 10, leaf_id=1))
        assert cat.plan(active.version_id) == {"kind": "tree"}
        assert [(p.version_id, p.bytes) for p in cat.purges()] == [(1, 100)]
        (query,) = cat.query_history()
        assert (query.sql, query.ts, [r.blocks_read for r in query.reads]) == ("SELECT 1 FROM orders", T1, [1])
        assert cat.latest_calibration().w == 2.0
        # the unfinished version still replaces the version it began from
        cat.set_blocks(building.version_id, [BlockRecord(4, 1, 1, "/w/b4", {}, 0, 0, cells=((0, 1),))])
        cat.activate(building.version_id)
        assert cat.active_layout("orders", "").blocks[0].cells == ((0, 1),)
    assert revision_of(catalog_url) == head_revision()
    assert "cells_json" in columns_of(catalog_url, "layout_blocks")


def test_a_catalog_newer_than_the_code_is_refused_with_one_line(catalog_url, caplog):
    Catalog(catalog_url).close()
    run_sql(catalog_url, f"UPDATE {VERSION_TABLE} SET version_num = '0999'")
    with pytest.raises(CatalogSchemaError) as refused:
        Catalog(catalog_url)
    message = str(refused.value)
    assert isinstance(refused.value, UserError) and isinstance(refused.value, CatalogError)
    assert "\n" not in message and "schema revision 0999" in message and "newest 0007" in message
    assert "pip install --upgrade layout-core" in message
    with caplog.at_level(logging.ERROR):
        assert main(["catalog", "show", "--catalog", catalog_url]) == 1
        assert main(["catalog", "upgrade", "--catalog", catalog_url]) == 1
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR] == [message, message]
    assert revision_of(catalog_url) == "0999"  # left as it was


def test_tables_named_like_the_catalogs_that_are_no_catalog_are_refused(catalog_url):
    run_sql(catalog_url, "CREATE TABLE layout_tables (name VARCHAR(10) PRIMARY KEY, owner VARCHAR(10))")
    with pytest.raises(CatalogSchemaError, match=r"is not a layout catalog this code knows: it has the tables "
                                                 r"layout_tables but not layout_blocks, .*layout catalog upgrade"):
        Catalog(catalog_url)
    assert table_names(catalog_url) == {"layout_tables"}  # nothing was created


def test_a_catalog_with_a_later_feature_but_not_an_earlier_one_is_refused(catalog_url):
    make_first_release_catalog(catalog_url)
    run_sql(catalog_url, "ALTER TABLE layout_blocks ADD COLUMN cells_json TEXT")  # 0006 without 0002..0005
    with pytest.raises(CatalogSchemaError, match="not a layout catalog this code knows"):
        Catalog(catalog_url)


def test_other_tables_and_airflows_alembic_version_are_left_alone(catalog_url):
    """Airflow's metadata may share the database: its tables and its own alembic_version stay."""
    run_sql(catalog_url, "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY);"
                         "INSERT INTO alembic_version VALUES ('29ce7909c52b');"
                         "CREATE TABLE dag_run (id INTEGER PRIMARY KEY)")
    with Catalog(catalog_url) as cat:
        cat.register_table("orders", "/w/orders")
    engine = sa.create_engine(catalog_url)
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars().all() == ["29ce7909c52b"]
    engine.dispose()
    assert revision_of(catalog_url) == head_revision()


@pytest.mark.timeout(180)
def test_workers_opening_a_new_catalog_together_create_it_once(catalog_url):
    def work(i: int) -> str:
        with Catalog(catalog_url) as cat:
            cat.register_table(f"t{i}", f"/w/t{i}")
            return revision_of(catalog_url)

    assert run_in_threads(6, work) == [head_revision()] * 6
    with Catalog(catalog_url) as cat:
        assert [t.name for t in cat.tables()] == [f"t{i}" for i in range(6)]


@pytest.mark.timeout(180)
def test_workers_opening_a_catalog_from_before_the_cells_column_together_upgrade_it_once(catalog_url):
    make_catalog_before_cells(catalog_url)

    def work(_: int) -> list:
        with Catalog(catalog_url) as cat:
            return [v.replaces for v in cat.versions("orders")]

    assert run_in_threads(6, work) == [[None, 1, 2, 2]] * 6


def test_layout_catalog_upgrade_prints_the_revision_before_and_after(catalog_url, capsys):
    make_first_release_catalog(catalog_url)
    assert main(["catalog", "upgrade", "--catalog", catalog_url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == ["schema revision before: 0001 (recognised by its tables: it had no version table)",
                       "schema revision after:  0007"]
    assert main(["catalog", "upgrade", "--catalog", catalog_url]) == 0
    assert capsys.readouterr().out.splitlines()[1:] == ["schema revision before: 0007",
                                                        "schema revision after:  0007 (already the newest)"]
    with Catalog(catalog_url) as cat:
        assert cat.active_layout("orders", "").blocks[0].path == "/warehouse/orders/block_id=1"


def test_layout_catalog_upgrade_of_an_empty_database_creates_the_catalog(catalog_url, capsys):
    assert main(["catalog", "upgrade", "--catalog", catalog_url]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1:] == ["schema revision before: none (no catalog tables yet)", "schema revision after:  0007"]
    assert upgrade_catalog(catalog_url).changed is False


def test_an_upgrade_logs_one_line_and_an_up_to_date_catalog_nothing(catalog_url, caplog):
    caplog.set_level(logging.DEBUG)
    make_first_release_catalog(catalog_url)
    Catalog(catalog_url).close()
    Catalog(catalog_url).close()  # at the newest revision: nothing to log
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name.startswith(("alembic", "layout"))]
    assert len(lines) == 1 and lines[0][0] == logging.INFO
    assert lines[0][1].endswith("schema revision 0001 (recognised by its columns) -> 0007")
