"""Make a new version serve: its cuts, plan, trees and blocks written to the catalog, then
activated in one transaction that retires the version it replaces."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Sequence

from layout_core.catalog import BlockRecord, CatalogError, CutRecord, TreeNodeRecord, VersionSuperseded
from layout_core.runs.paths import RunPaths, StepError


def keys_file(paths: RunPaths, position: int) -> Path:
    """Where a run keeps the literal keys (Roaring bitmap) of its join-induced cut `position`."""
    return paths.file("literal_keys") / f"cut{position}.roaring"


def cut_records(paths: RunPaths, entries, step: str = "featurize") -> list[CutRecord]:
    """Catalog records of featurized cuts (`CutEntry`s), join-induced ones with their literal
    keys read back from the run's staging folder (`step` wrote them)."""
    records = []
    for c in entries:
        keys = None
        if c.kind == "join_induced":
            path = keys_file(paths, c.position)
            if not path.exists():
                raise StepError(f"{path} is missing: run {step} again")
            keys = path.read_bytes()
        records.append(CutRecord(c.position, c.predicate, c.sql, c.kind, path=c.path, literal_keys=keys,
                                 source_versions=c.source_versions))
    return records


def block_record(summary, meta: dict, *, union_bits: int | None = None, all_bits: int | None = None,
                 leaves: Sequence = (), cells: Sequence = ()) -> BlockRecord:
    """The catalog record of a written block: its summary (`spark.blocks.BlockSummary`) and
    the path and bytes the writing step kept (`meta`); the cut bits as summarized unless the
    flow knows better (cuts the rows were not featurized on are unknown, so both bits say so)."""
    return BlockRecord(summary.block_id, summary.row_count, meta["bytes"], meta["path"], summary.stats,
                       summary.union_bits if union_bits is None else union_bits,
                       summary.all_bits if all_bits is None else all_bits,
                       leaves=tuple(leaves), cells=tuple(cells))


def node_records(tree: int, root) -> list[TreeNodeRecord]:
    """One tree's nodes as catalog records, node ids in preorder."""
    records: list = []

    def add(node) -> int:
        node_id = len(records)
        records.append(None)
        if node.is_leaf:
            records[node_id] = TreeNodeRecord(tree, node_id, node.rows, leaf_id=node.leaf_id)
        else:
            left, right = add(node.left), add(node.right)
            records[node_id] = TreeNodeRecord(tree, node_id, node.rows, cut=node.cut, left=left, right=right)
        return node_id

    add(root)
    return records


def tree_records(plan) -> list[TreeNodeRecord]:
    """The plan's routing trees as catalog node records (tree t, node ids in preorder)."""
    return [record for tree, root in enumerate(plan.routing_trees()) for record in node_records(tree, root)]


def publish(catalog, version: int, step: str, *, cuts: Iterable, plan: dict, trees: Iterable,
            blocks: Iterable[BlockRecord], input_fingerprint: str | None, replaces: int | None = None,
            cut_updates: Iterable = ()) -> list:
    """Write the version's cuts, plan, trees and blocks and activate it; returns the cut
    updates applied. A version that can no longer serve (another run went live first, or
    the version it `replaces` no longer serves) is marked failed; any other catalog error
    fails the step and leaves the version to a retry."""
    try:
        catalog.set_cuts(version, list(cuts))
        catalog.set_plan(version, plan)
        catalog.set_trees(version, list(trees))
        if replaces is None:
            catalog.set_blocks(version, list(blocks))
        else:  # blocks it does not rewrite keep their ids and folders
            catalog.set_blocks(version, list(blocks), replaces=replaces)
        return catalog.activate(version, input_fingerprint=input_fingerprint, replaces=replaces,
                                cut_updates=list(cut_updates))
    except VersionSuperseded as e:
        catalog.fail(version, f"{step}: {e}")
        raise StepError(f"cannot activate version {version}: {e}") from None
    except CatalogError as e:
        if replaces is not None:  # built on that version's blocks: it cannot be retried onto another
            catalog.fail(version, f"{step}: {e}")
        raise StepError(f"cannot activate version {version}: {e}") from None
