"""Database rows <-> records: JSON as sorted compact text, bit vectors as hex text,
and every datetime aware and in UTC."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from layout_core.catalog.errors import CatalogError
from layout_core.catalog.records import (
    BlockRecord, CalibrationRecord, CutRecord, PurgeRecord, RefRead, TableInfo, TreeNodeRecord,
    VersionInfo,
)


def utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def as_utc(value: dt.datetime | None) -> dt.datetime | None:
    """Aware UTC datetimes everywhere: SQLite hands back naive ones (stored as UTC)."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=dt.timezone.utc)
    return value.astimezone(dt.timezone.utc)


def dump_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _check_bits_type(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise CatalogError(f"bit vectors must be ints, not {type(value).__name__}")
    return value


def table_info(row) -> TableInfo:
    return TableInfo(row.name, row.location, row.partition_column, json.loads(row.schema_json))


def version_info(row) -> VersionInfo:
    return VersionInfo(
        version_id=row.version_id,
        table=row.table_name,
        partition=row.partition_name,
        state=row.state,
        optimizer=row.optimizer,
        params=json.loads(row.params_json),
        run_id=row.run_id,
        created_at=as_utc(row.created_at),
        activated_at=as_utc(row.activated_at),
        n_blocks=row.n_blocks,
        retired_at=as_utc(row.retired_at),
        reason=row.reason,
        block_ids=range(row.first_block_id, row.first_block_id + row.n_blocks),
        failed_at=as_utc(row.failed_at),
        replaces=row.replaces_version_id,
    )


def cut_record(row) -> CutRecord:
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


def cut_row(version_id: int, cut: CutRecord) -> dict[str, Any]:
    return {
        "version_id": version_id,
        "position": cut.position,
        "predicate": cut.predicate,
        "cut_sql": cut.sql,
        "kind": cut.kind,
        "path_json": dump_json(list(cut.path)),
        "literal_keys": cut.literal_keys,
        "source_versions_json": dump_json([[t, int(v)] for t, v in cut.source_versions]),
    }


def block_record(row) -> BlockRecord:
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


def block_row(version_id: int, block: BlockRecord) -> dict[str, Any]:
    return {
        "version_id": version_id,
        "block_id": block.block_id,
        "row_count": block.row_count,
        "size_bytes": block.bytes,
        "path": block.path,
        "stats_json": dump_json(block.stats),
        "union_bits": format(_check_bits_type(block.union_bits), "x"),
        "all_bits": format(_check_bits_type(block.all_bits), "x"),
        "leaves_json": dump_json([list(leaf_ids) for leaf_ids in block.leaves]),
        "cells_json": dump_json([list(cell) for cell in block.cells]) if block.cells else None,
    }


def tree_node_record(row) -> TreeNodeRecord:
    return TreeNodeRecord(tree=row.tree, node_id=row.node_id, rows=row.rows, cut=row.cut,
                          left=row.left_id, right=row.right_id, leaf_id=row.leaf_id)


def tree_node_row(version_id: int, node: TreeNodeRecord) -> dict[str, Any]:
    return {"version_id": version_id, "tree": node.tree, "node_id": node.node_id, "cut": node.cut,
            "left_id": node.left, "right_id": node.right, "leaf_id": node.leaf_id, "rows": node.rows}


def ref_read(row) -> RefRead:
    return RefRead(row.ref, row.table_name, row.blocks_read, row.blocks_total, row.rows_read,
                   row.rows_total, tuple(json.loads(row.versions_json)),
                   None if row.block_ids is None else bytes(row.block_ids))


def purge_record(row) -> PurgeRecord:
    return PurgeRecord(row.version_id, row.path, row.bytes, as_utc(row.purged_at))


def calibration_record(row) -> CalibrationRecord:
    return CalibrationRecord(row.id, as_utc(row.measured_at), row.w, row.write_seconds, row.read_seconds,
                             row.block_rows, row.blocks, row.rounds, row.location)
