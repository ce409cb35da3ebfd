"""Reading versions and the layouts they serve: one version, a table's versions, the
active layout of a partition, a snapshot of every active layout, trees and plans."""

from __future__ import annotations

import json
from typing import Any

import sqlalchemy as sa

from layout_core.catalog.connection import CatalogConnection, table_row, version_row
from layout_core.catalog.db_tables import blocks_t, cuts_t, plans_t, tables_t, tree_nodes_t, versions_t
from layout_core.catalog.records import (
    ActiveLayout, BlockRecord, CatalogSnapshot, CutRecord, TreeNodeRecord, VersionInfo,
)
from layout_core.catalog.rows import block_record, cut_record, table_info, tree_node_record, version_info


class LayoutReader(CatalogConnection):
    """`Catalog`'s methods that read versions and layouts."""

    def version(self, version_id: int) -> VersionInfo:
        with self._read() as conn:
            return version_info(version_row(conn, version_id))

    def versions(self, table: str, partition: str | None = None) -> list[VersionInfo]:
        """All versions of a table (or of one partition), oldest first."""
        with self._read() as conn:
            table_row(conn, table)
            query = sa.select(versions_t).where(versions_t.c.table_name == table)
            if partition is not None:
                query = query.where(versions_t.c.partition_name == partition)
            rows = conn.execute(query.order_by(versions_t.c.version_id))
            return [version_info(row) for row in rows]

    def active_layout(self, table: str, partition: str) -> ActiveLayout | None:
        """The layout serving one partition, or None if it has none yet."""
        with self._read() as conn:
            table_row(conn, table)
            layouts = _active_layouts(conn, [table], partition)
            return layouts.get((table, partition))

    def snapshot(self, tables: list[str] | None = None) -> CatalogSnapshot:
        """Every active layout of the given tables (default: all), read at one moment."""
        with self._read() as conn:
            if tables is None:
                rows = conn.execute(sa.select(tables_t).order_by(tables_t.c.name)).all()
            else:
                rows = [table_row(conn, name) for name in tables]
            infos = {row.name: table_info(row) for row in rows}
            layouts = _active_layouts(conn, list(infos))
            return CatalogSnapshot(infos, layouts, _data_fingerprints(conn, layouts))

    def block_paths(self, version_id: int) -> list[str]:
        """The block folders of one version (in any state), by block id."""
        with self._read() as conn:
            version_row(conn, version_id)
            rows = conn.execute(sa.select(blocks_t.c.path).where(blocks_t.c.version_id == version_id)
                                .order_by(blocks_t.c.block_id))
            return [row.path for row in rows]

    def trees(self, version_id: int) -> tuple[TreeNodeRecord, ...]:
        """The tree nodes of one version, by tree then node id (empty without trees)."""
        with self._read() as conn:
            version_row(conn, version_id)
            rows = conn.execute(sa.select(tree_nodes_t).where(tree_nodes_t.c.version_id == version_id)
                                .order_by(tree_nodes_t.c.tree, tree_nodes_t.c.node_id))
            return tuple(tree_node_record(row) for row in rows)

    def plan(self, version_id: int) -> dict[str, Any] | None:
        """The layout plan stored with `set_plan`, or None."""
        with self._read() as conn:
            version_row(conn, version_id)
            text = conn.scalar(sa.select(plans_t.c.plan_json).where(plans_t.c.version_id == version_id))
            return None if text is None else json.loads(text)


def _active_layouts(conn: sa.Connection, tables: list[str],
                    partition: str | None = None) -> dict[tuple[str, str], ActiveLayout]:
    """The active layouts of some tables (optionally one partition), with cuts, blocks and trees."""
    if not tables:
        return {}
    active = sa.select(versions_t.c.version_id).where(
        versions_t.c.state == "active", versions_t.c.table_name.in_(tables))
    if partition is not None:
        active = active.where(versions_t.c.partition_name == partition)
    versions = {row.version_id: version_info(row) for row in conn.execute(
        sa.select(versions_t).where(versions_t.c.version_id.in_(active)))}
    cuts: dict[int, list[CutRecord]] = {vid: [] for vid in versions}
    for row in conn.execute(sa.select(cuts_t).where(cuts_t.c.version_id.in_(active))
                            .order_by(cuts_t.c.version_id, cuts_t.c.position)):
        cuts[row.version_id].append(cut_record(row))
    blocks: dict[int, list[BlockRecord]] = {vid: [] for vid in versions}
    for row in conn.execute(sa.select(blocks_t).where(blocks_t.c.version_id.in_(active))
                            .order_by(blocks_t.c.version_id, blocks_t.c.block_id)):
        blocks[row.version_id].append(block_record(row))
    trees: dict[int, list[TreeNodeRecord]] = {vid: [] for vid in versions}
    for row in conn.execute(sa.select(tree_nodes_t).where(tree_nodes_t.c.version_id.in_(active))
                            .order_by(tree_nodes_t.c.version_id, tree_nodes_t.c.tree,
                                      tree_nodes_t.c.node_id)):
        trees[row.version_id].append(tree_node_record(row))
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
