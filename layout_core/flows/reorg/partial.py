"""Partial reorganization (MTO §5.1): rewrite only the chosen subtrees' blocks.

    plan_reorg -> write_reorg -> verify_reorg -> activate_reorg

`plan_reorg` measures the shift (`reorg.shift.measure_shift`) and, for each
partition with chosen subtrees, grows each subtree's new tree T' on its
sampled records (the same greedy tree the reward was computed with) and
reserves blocks for T''s leaves. `write_reorg` reads exactly the chosen
subtrees' blocks, featurizes their rows against the window's cuts, sends
every row to its T' leaf and cuts each leaf into ranges of the sort column,
as the nightly `write_blocks` does. `verify_reorg` compares rows and
checksum of the written blocks with the rows they replace.
`activate_reorg` builds the new version in one catalog transaction:

* cuts: the base version's (positions 0..k-1) and the window's (k..k+m-1);
* blocks: the base blocks outside the chosen subtrees keep their ids and
  folders (shared with the base version, which gc respects); their bits for
  the window's cuts are unknown (union 1, all 0: never used to skip). The
  new blocks have real bits for the window's cuts and unknown ones for the
  base cuts (their tree path still proves what the base cuts said);
* tree: the base tree with every chosen subtree replaced by its T' (cuts
  moved to k..), leaves renumbered 0..n-1 left to right.

It is activated only while the base version still serves the partition
(`Catalog.activate(replaces=...)`), so two runs from one base never both go
live, and queries routed during the rewrite use the base version. Each step
keeps its outputs in the run's staging folder (`runs.paths.RunPaths`)
and a retry redoes only its own work.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import numpy as np
from pyspark.sql import functions as F

from layout_core.algorithms.qdtree import Node, breadth_first, leaf_blocks, leaves, tree_from_json, tree_to_json
from layout_core.base.names import BLOCK_ID_COLUMN, BLOCK_INDEX_COLUMN
from layout_core.base.schema import Schema, TableSchema
from layout_core.catalog import BlockRecord, Catalog, CatalogError
from layout_core.flows.names import REORG_PLANNED, REORG_STEPS
from layout_core.flows.nightly.artifacts import CutEntry, training_log_record
from layout_core.flows.reorg.shift import (
    PartitionModel,
    ShiftReport,
    ShiftSettings,
    default_w,
    measure_shift,
    old_tree,
)
from layout_core.optimizers import CandidateCut
from layout_core.optimizers.base import sort_columns
from layout_core.predicates import dumps, loads
from layout_core.runs.artifacts import VerifiedBlocks, WrittenBlocks, read_step_artifact, write_artifact
from layout_core.runs.flow import Flow, RunContext, Step
from layout_core.runs.paths import RunPaths, StepError, read_metrics, record_metrics, write_json
from layout_core.runs.publish import block_record, cut_records, keys_file, node_records, publish
from layout_core.runs.sources import frames_of_versions
from layout_core.runs.verify import rows_fingerprint, verified_version, verify_blocks, written_frame
from layout_core.skipping.zonemaps import DEFAULT_RANGE_SETS
from layout_core.spark.assign import BlockBits, block_bits, group_ranges, leaf_column, tie_order
from layout_core.spark.blocks import summarize_blocks, write_block_folders
from layout_core.spark.featurize import path_tables, with_vectors
from layout_core.spark.induced import cut_columns, literal_keys_of, with_layout_cut_flags

log = logging.getLogger("layout.reorg")



# ---------------------------------------------------------------------------
# Artifacts


@dataclass(frozen=True)
class NewSubtree:
    """A chosen subtree of the base tree and the tree T' that replaces it."""

    node_id: int  # the base tree's node id of the subtree's root
    old_leaves: tuple[int, ...]  # base leaf ids under it: their blocks are rewritten
    tree: str  # T' as `tree_to_json` text, cuts numbered 0..m-1 (the window's cuts)
    leaf_first_block: tuple[int, ...]  # per T' leaf, its first block (0-based in the new version)
    leaf_n_blocks: tuple[int, ...]
    reward: float


@dataclass(frozen=True)
class ReorgPlan:
    FILE: ClassVar[str] = "reorg_plan.json"
    STEP: ClassVar[str] = "plan_reorg"
    table: str
    partition: str
    replaces: int  # the version serving the partition when the run began
    optimizer: str
    settings: dict
    base_cuts: int  # k: the window's cuts follow the base version's
    cuts: tuple[CutEntry, ...]  # the window's cuts, positions k..k+m-1
    subtrees: tuple[NewSubtree, ...]
    sort_columns: tuple[str, ...]
    expected_block_rows: tuple[float, ...]
    input_fingerprint: str  # the base version's ("" if it has none): the partition's rows do not change
    # The window's queries on the table and its analyzed queries: the new version's training log.
    training_sql: tuple[str, ...] = ()
    training_log_queries: int = 0

    @property
    def n_blocks(self) -> int:
        return len(self.expected_block_rows)


@dataclass(frozen=True)
class WrittenReorg(WrittenBlocks):
    """The new blocks of the chosen subtrees; they must hold exactly the rows of the base
    blocks they replace (the expected rows and checksum)."""

    FILE: ClassVar[str] = "reorg_written.json"
    STEP: ClassVar[str] = "write_reorg"


@dataclass(frozen=True)
class VerifiedReorg(VerifiedBlocks):
    FILE: ClassVar[str] = "reorg_verified.json"
    STEP: ClassVar[str] = "verify_reorg"


def _planned_marker(warehouse: Path, table: str, run_id: str) -> Path:
    """The run's list of partitions to reorganize, in the table-wide staging folder."""
    return RunPaths(warehouse, table, "", run_id).file(REORG_PLANNED)


def run_partitions(warehouse: Path, table: str, run_id: str) -> list[RunPaths]:
    """The partitions plan_reorg chose for this run."""
    marker = _planned_marker(warehouse, table, run_id)
    if not marker.exists():
        raise StepError(f"{marker} is missing: run plan_reorg first")
    return [RunPaths(warehouse, table, p, run_id) for p in json.loads(marker.read_text())["partitions"]]


# ---------------------------------------------------------------------------
# plan_reorg


def plan_reorg(spark, warehouse: Path, run_id: str, catalog: Catalog, schema: Schema, table: str,
               settings: ShiftSettings, report: ShiftReport | None = None) -> dict:
    """Choose the subtrees and grow their new trees; nothing is written but the plan.
    A retry of the same run keeps the first attempt's plan (its block ids are reserved by it).
    `report`: the shift measured beforehand on this catalog's active layouts (the shift
    benchmark decides several sets from one measurement, `reorg.shift.rechoose`)."""

    t0 = time.monotonic()
    marker = _planned_marker(warehouse, table, run_id)
    if marker.exists():
        planned = json.loads(marker.read_text())
        return {**planned, "already_planned": True}
    report = report or measure_shift(spark, catalog, schema, table, settings)
    partitions = []
    for shift, model in zip(report.partitions, report.models):
        if not shift.chosen:
            continue
        paths = RunPaths(warehouse, table, shift.partition, run_id)
        plan = _partition_plan(schema.table(table), shift, model)
        induced = [entry for entry in plan.cuts if entry.kind == "join_induced"]
        for entry, keys in zip(induced, literal_keys_of(model.frames, [loads(e.predicate) for e in induced])):
            target = keys_file(paths, entry.position)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(keys.serialize())
        write_artifact(paths.staging, plan)
        record_metrics(paths, "plan_reorg", {"replaces": plan.replaces, "subtrees": len(plan.subtrees),
                                      "blocks_rewritten": shift.blocks_chosen, "blocks_total": shift.blocks,
                                      "new_blocks": plan.n_blocks, "reward": round(shift.reward, 3),
                                      "subtrees_evaluated": shift.subtrees_evaluated,
                                      "subtrees_total": shift.subtrees_total})
        partitions.append(shift.partition)
    numbers = {"table": table, "partitions": partitions, "reward": round(report.reward, 3),
               "reason": report.reason, "seconds": round(time.monotonic() - t0, 2),
               # every partition measured, chosen or not (the benchmark counts their subtrees)
               "measured": [{k: v for k, v in p.to_json().items() if k != "chosen"} for p in report.partitions]}
    write_json(marker, numbers)
    log.info("plan_reorg %s: %s", table, report.reason)
    return numbers


def _partition_plan(table: TableSchema, shift, model: PartitionModel) -> ReorgPlan:

    new_subtrees = model.new_subtrees
    scale = new_subtrees.scale
    block_rows = int(model.settings["block_rows"])
    index_of = {node_id: i for i, node_id in enumerate(model.tree.node_ids)}
    subtrees, expected, first = [], [], 0
    for chosen in shift.chosen:
        new = new_subtrees.new_subtree(index_of[chosen.node_id])
        by_id = sorted(leaves(new), key=lambda leaf: leaf.leaf_id)
        rows = [leaf.rows * scale for leaf in by_id]
        n_blocks = leaf_blocks(new, block_rows, scale).n_blocks.tolist()
        starts = [first + s for s in np.concatenate(([0], np.cumsum(n_blocks)[:-1])).astype(int).tolist()]
        first += sum(n_blocks)
        expected += [r / n for r, n in zip(rows, n_blocks) for _ in range(n)]
        subtrees.append(NewSubtree(chosen.node_id, chosen.leaves, json.dumps(tree_to_json(new)), tuple(starts),
                                   tuple(n_blocks), chosen.reward))
    k = len(model.layout.cuts)
    cuts = tuple(CutEntry(k + j, c.kind, c.sql, dumps(c.predicate), 0,
                          tuple(str(h) for h in c.predicate.hops) if c.kind == "join_induced" else (),
                          source_versions=_source_versions(c, model) if c.kind == "join_induced" else ())
                 for j, c in enumerate(model.cuts))
    order = sort_columns(table, model.workload, model.settings.get("sort_column", ""),
                         model.settings.get("leaf_order", "range"))
    version = model.layout.version
    return ReorgPlan(table.name, version.partition, version.version_id, model.optimizer,
                     {k_: v for k_, v in model.settings.items() if isinstance(v, (int, float, str, bool))},
                     k, cuts, tuple(subtrees), tuple(order), tuple(expected),
                     str(version.params.get("input_fingerprint", "")), tuple(model.window_sql),
                     model.window_queries)


def _source_versions(cut, model: PartitionModel) -> tuple[tuple[str, int], ...]:
    """The dimension versions a join-induced cut's bits come from (the active ones when measured)."""

    return tuple(sorted((t, int(v)) for t in path_tables(cut) for v in model.source_versions.get(t, ())))


# ---------------------------------------------------------------------------
# write_reorg


def _base_layout(catalog: Catalog, plan: ReorgPlan):
    layout = catalog.active_layout(plan.table, plan.partition)
    if layout is None or layout.version.version_id != plan.replaces:
        serving = "no version" if layout is None else f"version {layout.version.version_id}"
        raise StepError(f"the reorganization was planned from version {plan.replaces} of {plan.table} "
                        f"{plan.partition or '(unpartitioned)'}, but {serving} serves it now: start a new run")
    return layout


def _moved_blocks(layout, plan: ReorgPlan) -> dict[int, int]:
    """Base block id -> index of the chosen subtree that holds it (blocks with rows only)."""

    tree = old_tree(layout)
    subtree_of_leaf = {leaf: i for i, s in enumerate(plan.subtrees) for leaf in s.old_leaves}
    return {b.block_id: subtree_of_leaf[tree.leaf_of_block[b.block_id]] for b in layout.blocks
            if b.row_count > 0 and tree.leaf_of_block[b.block_id] in subtree_of_leaf}


def _dimension_frames(spark, catalog: Catalog, schema: Schema, plan: ReorgPlan) -> dict:
    return frames_of_versions(spark, catalog, schema, (tv for c in plan.cuts for tv in c.source_versions))


def write_reorg(spark, paths: RunPaths, catalog: Catalog, schema: Schema) -> dict:
    """Reserve block ids for the new version and write the rewritten blocks."""


    t0 = time.monotonic()
    plan = read_step_artifact(paths, ReorgPlan, "write_reorg")
    table = schema.table(plan.table)
    params = {**plan.settings, "reorganized_from": plan.replaces,
              "reorganized_nodes": [s.node_id for s in plan.subtrees]}
    try:
        version, ids = catalog.begin_version(table.name, plan.partition, plan.optimizer, params, paths.run_id,
                                             plan.n_blocks)
    except CatalogError as e:
        raise StepError(f"{e} (start a new run)") from None
    if catalog.version(version).state == "active":
        return record_metrics(paths, "write_reorg", {"version": version, "already_active": True})
    paths.file(VerifiedReorg.FILE).unlink(missing_ok=True)
    try:
        layout = _base_layout(catalog, plan)
    except StepError as e:
        catalog.fail(version, str(e))
        raise
    moved = _moved_blocks(layout, plan)
    if not moved:
        reason = "the chosen subtrees hold no rows: nothing to rewrite"
        catalog.fail(version, reason)
        raise StepError(reason)
    info = catalog.table(table.name)
    by_id = {b.block_id: b for b in layout.blocks}
    rows = (spark.read.option("basePath", info.location).parquet(*[by_id[b].path for b in sorted(moved)])
            .select(*table.column_names, BLOCK_ID_COLUMN))
    moved_rows, moved_checksum = rows_fingerprint(rows, table.column_names)

    cuts = [loads(c.predicate) for c in plan.cuts]
    flagged = with_vectors(rows, [CandidateCut(p, c.kind) for p, c in zip(cuts, plan.cuts)],
                           _dimension_frames(spark, catalog, schema, plan))
    subtree_of_block = spark.createDataFrame(sorted(moved.items()), f"{BLOCK_ID_COLUMN} int, _subtree int")
    roots = [tree_from_json(json.loads(s.tree)) for s in plan.subtrees]
    offsets = np.concatenate(([0], np.cumsum([len(s.leaf_n_blocks) for s in plan.subtrees]))).tolist()
    leaf = F.lit(None).cast("int")
    for i, root in enumerate(roots):  # the T' of the row's subtree sends it to a leaf
        leaf = F.when(F.col("_subtree") == i, F.lit(offsets[i]) + leaf_column(root)).otherwise(leaf)
    groups = [(offsets[i] + l, first, n) for i, s in enumerate(plan.subtrees)
              for l, (first, n) in enumerate(zip(s.leaf_first_block, s.leaf_n_blocks))]
    grouped = (flagged.join(F.broadcast(subtree_of_block), on=BLOCK_ID_COLUMN).drop(BLOCK_ID_COLUMN)
               .withColumn("_group", leaf.cast("int")))
    blocked = (group_ranges(grouped, groups, list(plan.sort_columns), tie_order(table.column_names))
               .withColumn(BLOCK_ID_COLUMN, F.col(BLOCK_INDEX_COLUMN) + F.lit(ids.start)))
    written = write_block_folders(blocked, table.column_names, info.location, paths.file("block_staging"),
                                  info.partition_column if plan.partition else None, plan.partition)
    write_artifact(paths.staging, WrittenReorg(
        version, ids.start, {str(b): {"path": str(p), "bytes": n} for b, (p, n) in written.items()},
        moved_rows, str(moved_checksum)))
    return record_metrics(paths, "write_reorg", {"version": version, "blocks_read": len(moved), "blocks_written": len(written),
                                          "rows": moved_rows, "seconds": round(time.monotonic() - t0, 2)})


# ---------------------------------------------------------------------------
# verify_reorg


def verify_reorg(spark, paths: RunPaths, catalog: Catalog, schema: Schema) -> dict:
    """The written blocks hold exactly the rows of the blocks they replace; else the version fails."""
    plan = read_step_artifact(paths, ReorgPlan, "verify_reorg")
    return verify_blocks(spark, paths, catalog, schema.table(plan.table), WrittenReorg, VerifiedReorg)


# ---------------------------------------------------------------------------
# activate_reorg


def grafted_tree(base_root: Node, base_node_ids: tuple[int, ...], plan: ReorgPlan):
    """The base tree with each chosen subtree replaced by its T' (cuts moved past the
    base cuts), leaves renumbered 0..n-1 left to right. Returns (root, base leaf ->
    new leaf for the leaves kept, [per subtree: its T' leaf -> new leaf])."""
    index_of = {node_id: i for i, node_id in enumerate(base_node_ids)}
    chosen = {index_of[s.node_id]: (i, tree_from_json(json.loads(s.tree))) for i, s in enumerate(plan.subtrees)}
    # breadth-first indices of the base tree's nodes (the numbering of base_node_ids)
    index = {id(node): i for i, node in enumerate(breadth_first(base_root))}
    kept: dict[int, int] = {}
    new_leaf_of: list[dict[int, int]] = [{} for _ in plan.subtrees]
    counter = [0]

    def shifted(node: Node, subtree: int) -> Node:
        if node.is_leaf:
            new_leaf_of[subtree][node.leaf_id] = counter[0]
            counter[0] += 1
            return Node.leaf(new_leaf_of[subtree][node.leaf_id], np.zeros(0, np.int64), node.rows)
        left = shifted(node.left, subtree)
        return Node.split(node.cut + plan.base_cuts, left, shifted(node.right, subtree))

    def build(node: Node) -> Node:
        if index[id(node)] in chosen:
            subtree, new = chosen[index[id(node)]]
            return shifted(new, subtree)
        if node.is_leaf:
            kept[node.leaf_id] = counter[0]
            counter[0] += 1
            return Node.leaf(kept[node.leaf_id], np.zeros(0, np.int64), node.rows)
        left = build(node.left)
        return Node.split(node.cut, left, build(node.right))

    return build(base_root), kept, new_leaf_of


def activate_reorg(spark, paths: RunPaths, catalog: Catalog, schema: Schema, range_sets: int) -> dict:
    """The new version in one transaction: cuts, the kept and new blocks, the grafted tree; then
    activated, retiring the base version, only if the base version still serves the partition."""

    t0 = time.monotonic()
    plan = read_step_artifact(paths, ReorgPlan, "activate_reorg")
    written, verified = verified_version(paths, WrittenReorg, VerifiedReorg, "activate_reorg")
    version = written.version
    if catalog.version(version).state == "active":
        return record_metrics(paths, "activate_reorg", {"version": version, "already_active": True})
    table = schema.table(plan.table)
    try:
        layout = _base_layout(catalog, plan)
    except StepError as e:
        catalog.fail(version, str(e))
        raise
    k, m = plan.base_cuts, len(plan.cuts)
    base = old_tree(layout)
    root, kept_leaf, new_leaf_of = grafted_tree(base.root, base.node_ids, plan)
    moved = _moved_blocks(layout, plan)

    # Base blocks outside the chosen subtrees: the window's cuts are unknown to them.
    unknown_new = ((1 << m) - 1) << k
    blocks = [BlockRecord(b.block_id, b.row_count, b.bytes, b.path, b.stats, b.union_bits | unknown_new, b.all_bits,
                          leaves=((kept_leaf[base.leaf_of_block[b.block_id]],),))
              for b in layout.blocks if b.block_id not in moved and base.leaf_of_block[b.block_id] in kept_leaf]
    # New blocks: real bits for the window's cuts, the base cuts unknown; the leaf from the plan.
    leaf_of_new_block = {}
    for i, s in enumerate(plan.subtrees):
        for leaf, (first, n) in enumerate(zip(s.leaf_first_block, s.leaf_n_blocks)):
            for b in range(first, first + n):
                leaf_of_new_block[written.first_block_id + b] = new_leaf_of[i][leaf]
    frame = written_frame(spark, table, written)
    if frame is not None:
        predicates = [loads(c.predicate) for c in plan.cuts]
        flagged = with_layout_cut_flags(cut_columns(frame, predicates, [BLOCK_ID_COLUMN]), predicates,
                                        _dimension_frames(spark, catalog, schema, plan))
        bits = block_bits(flagged, m, (), BLOCK_ID_COLUMN)
        for s in summarize_blocks(frame, table, 0, range_sets):
            b = bits.get(s.block_id, BlockBits(0, 0))
            blocks.append(block_record(s, written.blocks[str(s.block_id)],
                                       union_bits=((1 << k) - 1) | (b.union_bits << k), all_bits=b.all_bits << k,
                                       leaves=((leaf_of_new_block[s.block_id],),)))
    cuts = list(layout.cuts) + cut_records(paths, plan.cuts, "plan_reorg")
    plan_json = {"optimizer": plan.optimizer, "reorganized_from": plan.replaces,
                 "subtrees": [{"node": s.node_id, "old_leaves": list(s.old_leaves), "reward": s.reward}
                              for s in plan.subtrees],
                 "expected_block_rows": list(plan.expected_block_rows), "tree": tree_to_json(root),
                 # the workload monitor's noise floor for this version is the window it was made for
                 **training_log_record(plan.training_sql, plan.training_log_queries)}
    publish(catalog, version, "activate_reorg", cuts=cuts, plan=plan_json, trees=node_records(0, root),
            blocks=blocks, input_fingerprint=plan.input_fingerprint or None, replaces=plan.replaces)
    new_blocks = len(blocks) - (len(layout.blocks) - len(moved))
    return record_metrics(paths, "activate_reorg", {
        "version": version, "replaces": plan.replaces, "blocks": len(blocks),
        "blocks_shared": len(blocks) - new_blocks, "blocks_rewritten": len(moved), "blocks_new": new_blocks,
        "cuts": len(cuts), "seconds": round(time.monotonic() - t0, 2)})


# ---------------------------------------------------------------------------
# all steps in one process


def _shift_settings(context: RunContext) -> ShiftSettings:
    """The run's shift settings: given whole (in-process runs), or q, w and the window from the
    job's arguments, w defaulting to what `layout calibrate` measured on this storage."""
    if context.input("settings") is not None:
        return context.inputs["settings"]
    try:
        return ShiftSettings(q=context.inputs["q"], w=context.input("w") or default_w(context.catalog),
                             window_hours=context.inputs["window_hours"])
    except ValueError as e:
        raise StepError(str(e)) from None


def _each_partition(context: RunContext, step) -> dict:
    """A step run on every partition plan_reorg chose, in turn: {partition: metrics}."""
    c = context
    return {paths.partition: step(paths) for paths in run_partitions(c.paths.warehouse, c.paths.table, c.paths.run_id)}


# The reorganization of one table; its run folder (`RunContext.paths`) is the table-wide one.
REORG = Flow("reorg", (
    Step("plan_reorg", lambda c: plan_reorg(c.spark, c.paths.warehouse, c.paths.run_id, c.catalog, c.schema,
                                            c.paths.table, _shift_settings(c), c.input("report"))),
    Step("write_reorg", lambda c: _each_partition(c, lambda p: write_reorg(c.spark, p, c.catalog, c.schema))),
    Step("verify_reorg", lambda c: _each_partition(c, lambda p: verify_reorg(c.spark, p, c.catalog, c.schema))),
    Step("activate_reorg", lambda c: _each_partition(
        c, lambda p: activate_reorg(c.spark, p, c.catalog, c.schema, c.range_sets))),
), declared=REORG_STEPS)


def reorganize_in_process(spark, catalog: Catalog, schema: Schema, warehouse: Path, table: str, run_id: str,
                          settings: ShiftSettings, range_sets: int = DEFAULT_RANGE_SETS,
                          report: ShiftReport | None = None) -> dict:
    """The four steps in order in one Spark session (tests, the shift benchmark, `layout reorganize`);
    the layout_reoptimize DAG runs the same steps as separate jobs. Returns the plan and per
    partition its metrics. `report`: see `plan_reorg`."""
    context = RunContext(spark, catalog, schema, RunPaths(warehouse, table, "", run_id),
                         {"settings": settings, "report": report}, range_sets)
    planned = REORG.steps[0].run(context)
    for step in REORG.steps[1:]:
        step.run(context)
    return {"plan": planned,
            "partitions": {paths.partition: read_metrics(paths) for paths in run_partitions(warehouse, table, run_id)}}
