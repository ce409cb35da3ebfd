"""Building a layout version and putting it into service: begin_version, its cuts,
blocks, trees and plan, then activate (or fail).

A version only ever retires the version it replaces (see `Catalog`).
"""

from __future__ import annotations

import json
from typing import Any, Iterable

import sqlalchemy as sa

from layout_core.catalog.connection import (
    CatalogConnection, lock_table_row, lock_version_row, require_state, serving_version, version_row,
)
from layout_core.catalog.db_tables import blocks_t, cuts_t, plans_t, tables_t, tree_nodes_t, versions_t
from layout_core.catalog.errors import CatalogError, VersionSuperseded
from layout_core.catalog.records import BlockRecord, CutRecord, CutUpdate, TreeNodeRecord
from layout_core.catalog.rows import block_row, cut_row, dump_json, tree_node_row
from layout_core.catalog.trees import check_trees


class VersionBuilder(CatalogConnection):
    """`Catalog`'s methods that build versions and change their state."""

    def begin_version(self, table: str, partition: str, optimizer: str, params: dict[str, Any],
                      run_id: str, n_blocks: int) -> tuple[int, range]:
        """Start (or resume) building a version; returns its id and block ids.

        Idempotent per (table, partition, run_id) so that a retried task picks
        up its own version: a 'building' or 'failed' one is reset to
        'building' and an 'active' one is returned untouched, each with the
        block ids reserved the first time. A retired or purged run id cannot be
        reused, and a retry must ask for the same number of blocks (its block
        ids were reserved once and for all).

        The version that serves the partition now is recorded as the version the
        new one replaces (`VersionInfo.replaces`), also under the table lock:
        `activate` retires that version and no other (see the class docstring).
        A retry keeps what the first attempt recorded.
        """
        if n_blocks < 0:
            raise CatalogError(f"n_blocks must be >= 0, not {n_blocks}")
        with self._write() as conn:
            table_row = lock_table_row(conn, table)
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
                optimizer=optimizer, params_json=dump_json(params), run_id=run_id,
                n_blocks=n_blocks, first_block_id=first, created_at=self._now(),
                replaces_version_id=serving_version(conn, table, partition)))
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
        rows = [cut_row(version_id, cut) for cut in cuts]
        _check_unique([row["position"] for row in rows], "cut position")
        with self._write() as conn:
            require_state(lock_version_row(conn, version_id), ("building",), "set its cuts")
            conn.execute(cuts_t.delete().where(cuts_t.c.version_id == version_id))
            if rows:
                conn.execute(cuts_t.insert(), rows)

    def set_blocks(self, version_id: int, blocks: Iterable[BlockRecord], replaces: int | None = None) -> None:
        """Replace the blocks of a version that is still being built.

        Every block id must come from the version's reserved range: that is
        what keeps block folders of different versions from colliding. The one
        exception is a partial reorganization or a change batch (`replaces`, the
        version it is built from): a block it does not rewrite keeps its id and
        folder, which must then be a block of the version `replaces` (same table
        and partition) with the same path.
        """
        rows = [block_row(version_id, block) for block in blocks]
        _check_unique([row["block_id"] for row in rows], "block id")
        with self._write() as conn:
            version = lock_version_row(conn, version_id)
            require_state(version, ("building",), "set its blocks")
            reserved = range(version.first_block_id, version.first_block_id + version.n_blocks)
            outside = {row["block_id"]: row["path"] for row in rows if row["block_id"] not in reserved}
            if outside and replaces is not None:
                base = version_row(conn, replaces)
                if (base.table_name, base.partition_name) != (version.table_name, version.partition_name):
                    raise CatalogError(f"version {replaces} is not of {version.table_name} "
                                       f"partition {version.partition_name!r}: its blocks cannot be shared")
                paths = dict(conn.execute(sa.select(blocks_t.c.block_id, blocks_t.c.path).where(
                    blocks_t.c.version_id == replaces, blocks_t.c.block_id.in_(list(outside)))).all())
                outside = {b: p for b, p in outside.items() if paths.get(b) != p}
            if outside:
                raise CatalogError(f"block ids {sorted(outside)[:10]} are outside version {version_id}'s "
                                   f"reserved range {reserved.start}..{reserved.stop - 1}"
                                   + (f" and are not blocks of version {replaces} with the same folder"
                                      if replaces is not None else ""))
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
        rows = [tree_node_row(version_id, node) for node in nodes]
        with self._write() as conn:
            require_state(lock_version_row(conn, version_id), ("building",), "set its trees")
            conn.execute(tree_nodes_t.delete().where(tree_nodes_t.c.version_id == version_id))
            if rows:
                conn.execute(tree_nodes_t.insert(), rows)

    def set_plan(self, version_id: int, plan: dict[str, Any]) -> None:
        """Store (or replace) the layout plan of a version that is still being built."""
        if not isinstance(plan, dict):
            raise CatalogError(f"a layout plan is a JSON object, not {type(plan).__name__}")
        text = dump_json(plan)
        with self._write() as conn:
            require_state(lock_version_row(conn, version_id), ("building",), "set its plan")
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
        while the version recorded by begin_version (`VersionInfo.replaces`) is.
        Else `VersionSuperseded` (a CatalogError) and nothing changes, so two runs
        from one base never both go live and no run undoes a newer layout.
        `cut_updates` (repaired join-induced cuts of other tables' versions, see
        `CutUpdate`) are written in the same transaction, so no reader sees the
        new data with the old keys; returns the updates that were applied.
        """
        cut_updates = list(cut_updates)
        with self._write() as conn:
            # Lock the table before the version, in the same order as begin_version.
            lock_table_row(conn, version_row(conn, version_id).table_name)
            version = lock_version_row(conn, version_id)
            if version.state == "active":
                return []
            require_state(version, ("building",), "activate it")
            now = self._now()
            serving = serving_version(conn, version.table_name, version.partition_name)
            expected = replaces if replaces is not None else version.replaces_version_id
            if serving != expected:
                now_serving = (f"version {serving} serves the partition now" if serving is not None
                               else "no version serves the partition now")
                if replaces is not None:
                    raise VersionSuperseded(f"version {version_id} was built from version {replaces}, but "
                                            f"{now_serving}")
                began = f"version {expected} served" if expected is not None else "no version served"
                raise VersionSuperseded(
                    f"version {version_id} of {version.table_name!r} partition {version.partition_name!r} "
                    f"began when {began} the partition, but {now_serving}: another run went live meanwhile, "
                    f"and activating this one would undo it (start a new run to lay it out again)")
            if serving is not None:
                conn.execute(versions_t.update().where(versions_t.c.version_id == serving)
                             .values(state="retired", retired_at=now))
            values = {"state": "active", "activated_at": now, "replaces_version_id": serving}
            if input_fingerprint is not None:
                values["params_json"] = dump_json({**json.loads(version.params_json),
                                                   "input_fingerprint": input_fingerprint})
            conn.execute(versions_t.update().where(versions_t.c.version_id == version_id).values(**values))
            return _apply_cut_updates(conn, cut_updates)

    def fail(self, version_id: int, reason: str) -> None:
        """Mark a version that could not be built; the active one keeps serving."""
        with self._write() as conn:
            require_state(lock_version_row(conn, version_id), ("building", "failed"),
                          "fail it")
            conn.execute(versions_t.update().where(versions_t.c.version_id == version_id)
                         .values(state="failed", reason=reason, failed_at=self._now()))


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
            source_versions_json=dump_json([[t, int(v)] for t, v in update.source_versions])))
        applied.append(update)
    return applied


def _check_unique(values: list[int], what: str) -> None:
    if len(set(values)) != len(values):
        seen: set[int] = set()
        dupes = sorted({v for v in values if v in seen or seen.add(v)})
        raise CatalogError(f"duplicate {what}s: {dupes[:10]}")
