"""Workload shift: is re-laying out part of a table worth it for the recent queries? (MTO §5.1)

For a window Q of the query history and every active layout (partition) of
a table, each subtree T of the layout's tree gets the reward
R(T) = (q / w) · B(T, Q) - C(T) and `reorg.optimal_set` picks the best set of
non-overlapping subtrees. Nothing is written: the data is only read.

* C(T): the catalog's non-empty blocks under T (what rewriting T costs);
* A(T): the blocks of T the router reads for an average reference of Q to
  the table now (zone maps and cuts included; diPs off, they depend on the
  other tables), from routing every window query against the active layouts;
* B(T) = max(0, A(T) - A(T')), where T' is a greedy qd-tree grown for Q on
  T's records (`reorg.subtree_rewards`: a sample of the layout's rows,
  featurized against the cuts the version's optimizer picks from Q, each
  record placed in its block's leaf).

A layout without a qd-tree (sortkey, zorder, fineblock, Pando's k trees) is
one subtree: the whole partition is re-laid out, or nothing.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
from pyspark.sql import functions as F

from layout_core.algorithms.qdtree import Node, leaves
from layout_core.algorithms.types import VectorCounts, unpack_bit_strings
from layout_core.base.names import BLOCK_ID_COLUMN, VECTOR_COLUMN
from layout_core.base.schema import Schema, TableSchema
from layout_core.catalog import ActiveLayout, CatalogSnapshot, QueryRecord, TreeNodeRecord
from layout_core.catalog.records import tree_roots
from layout_core.flows.reorg.calibrate import calibrated_w
from layout_core.flows.reorg.optimal_set import SubtreeShape, optimal_set
from layout_core.flows.reorg.subtree_rewards import SubtreeBenefits
from layout_core.optimizers import TableQueries, get_optimizer
from layout_core.runs.sources import active_sources, source_frames
from layout_core.skipping.router import RoutingIndex, route_query
from layout_core.spark.featurize import path_tables, usable_cuts, vector_sample, with_vectors
from layout_core.sql.analysis import QueryAnalysis, QueryError, analyze

log = logging.getLogger(__name__)

TREE_OPTIMIZERS = ("qdtree", "mto")
DEFAULT_REOPTIMIZER = "mto"  # re-lays out a partition whose optimizer grows no qd-tree


@dataclass(frozen=True)
class ShiftSettings:
    """q: queries expected before the next shift; w: writing a block costs w block reads
    (`layout calibrate` measures it); window_hours: how far back Q reaches; min_references:
    fewer references to the table than this is too small a window to act on."""

    q: float = 200.0
    w: float = 100.0
    window_hours: float = 24.0
    min_references: int = 10
    sample_rows: int = 150_000
    prune: bool = True

    def __post_init__(self) -> None:
        for name in ("q", "w", "window_hours"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, not {getattr(self, name)!r}")
        if self.min_references < 1 or self.sample_rows < 0:
            raise ValueError("min_references must be >= 1 and sample_rows >= 0")


def default_w(catalog) -> float:
    """The w `layout calibrate` measured on this storage, else the paper's 100."""
    return calibrated_w(catalog) or ShiftSettings.w


# ---------------------------------------------------------------------------
# The window


@dataclass(frozen=True)
class Window:
    """The history of one window, analyzed for one table."""

    table: str
    start: dt.datetime
    end: dt.datetime
    queries: int  # in the history
    sql: tuple[str, ...]  # the queries that read the table, analyzed
    analyses: tuple[QueryAnalysis, ...]
    unparsable: int = 0  # skipped: not SQL we can parse
    unknown: int = 0  # skipped: name a table or column the schema no longer has
    other_tables: int = 0  # analyzed, but do not read the table

    @property
    def references(self) -> int:
        """References to the table: a self-join counts each of its scans."""
        return sum(len(a.refs_of_table(self.table)) for a in self.analyses)


def window_queries(history: Sequence[QueryRecord], schema: Schema, table: str,
                   start: dt.datetime, end: dt.datetime) -> Window:
    """The window's queries that read `table`, analyzed; the others counted by why they were left out."""
    reasons: Counter = Counter()
    sql, analyses = [], []
    for query in history:
        try:
            analysis = analyze(query.sql, schema)
        except QueryError as e:
            text = str(e)
            reasons["unknown" if text.startswith(("unknown", "cannot resolve")) else "unparsable"] += 1
            continue
        if not analysis.refs_of_table(table):
            reasons["other_tables"] += 1
            continue
        sql.append(query.sql)
        analyses.append(analysis)
    return Window(table, start, end, len(history), tuple(sql), tuple(analyses), reasons["unparsable"],
                  reasons["unknown"], reasons["other_tables"])


# ---------------------------------------------------------------------------
# Trees from the catalog


@dataclass(frozen=True)
class OldTree:
    """Tree 0 of a layout as optimizer nodes, with the catalog's node ids in
    breadth-first order (left child first: `subtree_rewards`' numbering)."""

    root: Node
    node_ids: tuple[int, ...]
    leaf_of_block: dict[int, int]  # block id -> leaf id
    whole_partition: bool  # no qd-tree: one leaf holding every block


def old_tree(layout: ActiveLayout) -> OldTree:
    """The layout's qd-tree, or one leaf for a layout without one (see the module docstring)."""
    nodes = [n for n in layout.trees if n.tree == 0]
    single_leaf = all(len(b.leaves) >= 1 and len(b.leaves[0]) == 1 for b in layout.blocks)
    several_trees = any(n.tree > 0 for n in layout.trees)
    if layout.version.optimizer in TREE_OPTIMIZERS and nodes and single_leaf and not several_trees:
        root, node_ids = tree_from_records(nodes)
        return OldTree(root, node_ids, {b.block_id: b.leaves[0][0] for b in layout.blocks}, False)
    return OldTree(Node.leaf(0, np.zeros(0, np.int64), 0), (0,), {b.block_id: 0 for b in layout.blocks}, True)


def tree_from_records(nodes: Sequence[TreeNodeRecord]) -> tuple[Node, tuple[int, ...]]:
    by_id = {n.node_id: n for n in nodes}
    (root_id,) = tree_roots(nodes)[0]
    order, queue = [], deque([root_id])
    while queue:
        node = by_id[queue.popleft()]
        order.append(node.node_id)
        if not node.is_leaf:
            queue.extend((node.left, node.right))
    built: dict[int, Node] = {}
    for node_id in reversed(order):  # children before parents
        n = by_id[node_id]
        built[node_id] = (Node.leaf(n.leaf_id, np.zeros(0, np.int64), n.rows) if n.is_leaf
                          else Node.split(n.cut, built[n.left], built[n.right]))
    return built[root_id], tuple(order)


# ---------------------------------------------------------------------------
# Rewards of one partition


@dataclass(frozen=True)
class ChosenSubtree:
    node_id: int  # catalog node id of the subtree's root (0 for a whole partition)
    leaves: tuple[int, ...]
    blocks: int  # C
    reads: float  # A
    benefit: float  # B
    reward: float  # R


@dataclass(frozen=True)
class PartitionShift:
    partition: str
    version_id: int
    optimizer: str
    whole_partition: bool
    blocks: int
    reads: float  # A(root): blocks an average reference reads now
    chosen: tuple[ChosenSubtree, ...]
    reward: float
    subtrees_evaluated: int
    subtrees_total: int
    reason: str
    seconds: float = 0.0
    bound_violations: int = 0  # subtrees whose greedy B broke MTO's property 2 (pruning may miss a set)

    @property
    def blocks_chosen(self) -> int:
        return sum(c.blocks for c in self.chosen)

    def to_json(self) -> dict:
        return {"partition": self.partition, "version": self.version_id, "optimizer": self.optimizer,
                "whole_partition": self.whole_partition, "blocks": self.blocks, "reads": round(self.reads, 3),
                "reward": round(self.reward, 3), "blocks_chosen": self.blocks_chosen,
                "subtrees_evaluated": self.subtrees_evaluated, "subtrees_total": self.subtrees_total,
                "reason": self.reason, "seconds": round(self.seconds, 3),
                "bound_violations": self.bound_violations,
                "chosen": [{"node": c.node_id, "leaves": list(c.leaves), "blocks": c.blocks,
                            "reads": round(c.reads, 3), "benefit": round(c.benefit, 3),
                            "reward": round(c.reward, 3)} for c in self.chosen]}


def partition_rewards(tree: OldTree, reads_per_block: dict[int, int], references: int, keys: Sequence[str],
                      counts: Sequence[int], rows: int, workload, block_rows: int,
                      block_sizes: dict[int, int], settings: ShiftSettings) -> tuple:
    """(the optimal set as a `Reorganization`, the `SubtreeBenefits`, the `SubtreeShape`
    with C and A) for one partition.

    keys: "<block id>|<bit string>" of the sampled records (bits of the
    window's cuts), counts: their sampled rows, rows: the partition's rows;
    reads_per_block: per block id, how many references of the window read it;
    block_sizes: per block id, its rows (blocks of 0 rows cost nothing)."""

    m = workload.m
    blocks_of_key = np.array([int(k.split("|", 1)[0]) for k in keys], dtype=np.int64)
    vectors = unpack_bit_strings([k.split("|", 1)[1] for k in keys], m) if keys else np.zeros((0, m), bool)
    vc = VectorCounts(vectors, np.asarray(counts, dtype=np.int64), np.ones(m))
    leaf_of_vector = np.array([tree.leaf_of_block[b] for b in blocks_of_key.tolist()], dtype=np.int64)
    sampled = int(vc.counts.sum())
    scale = rows / sampled if sampled else 1.0
    benefits = SubtreeBenefits.of(vc, tree.root, workload, block_rows, scale, leaf_of_vector)

    # C and A from the catalog's blocks and the router, per leaf, then summed up the tree.
    n_leaves = len(list(leaves(tree.root)))
    leaf_blocks = np.zeros(n_leaves, dtype=np.int64)
    leaf_reads = np.zeros(n_leaves, dtype=np.float64)
    for block, leaf in tree.leaf_of_block.items():
        if block_sizes.get(block, 0) > 0:
            leaf_blocks[leaf] += 1
            leaf_reads[leaf] += reads_per_block.get(block, 0)
    leaf_reads /= max(1, references)
    old = benefits.old
    blocks, reads = [0] * len(old), [0.0] * len(old)
    for i in reversed(range(len(old))):
        if old.children[i] is None:
            blocks[i], reads[i] = int(leaf_blocks[old.nodes[i].leaf_id]), float(leaf_reads[old.nodes[i].leaf_id])
        else:
            left, right = old.children[i]
            blocks[i], reads[i] = blocks[left] + blocks[right], reads[left] + reads[right]
    shape = SubtreeShape(old.children, tuple(blocks), tuple(min(r, b) for r, b in zip(reads, blocks)))

    def benefit(i: int) -> float:
        return max(0.0, shape.reads[i] - benefits.reads_after(i))

    return optimal_set(shape, benefit, settings.q, settings.w, prune=settings.prune), benefits, shape


# ---------------------------------------------------------------------------
# The report


@dataclass(frozen=True, eq=False)
class PartitionModel:
    """What one partition's rewards were computed from; the partial reorganization
    grows each chosen subtree's new tree from it."""

    layout: ActiveLayout
    tree: OldTree
    optimizer: str  # the re-optimizing one (the version's own, or mto for a layout without a qd-tree)
    settings: dict  # its resolved settings
    cuts: tuple  # the window's CandidateCuts, positions 0..m-1
    frames: dict  # dimension data of the join-induced cuts (Spark DataFrames)
    source_versions: dict  # table -> the active version ids `frames` were read from
    workload: Any  # PlanWorkload of the window against `cuts`
    benefits: SubtreeBenefits | None  # None when the partition had no rows or no cuts


@dataclass(frozen=True)
class ShiftReport:
    table: str
    window_start: dt.datetime
    window_end: dt.datetime
    q: float
    w: float
    queries: int  # in the window's history
    references: int  # to the table, from analyzed queries
    skipped_unparsable: int
    skipped_unknown: int
    partitions: tuple[PartitionShift, ...] = ()
    reason: str = ""
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())
    models: tuple[PartitionModel, ...] = field(default=(), compare=False, repr=False)

    @property
    def reward(self) -> float:
        return sum(p.reward for p in self.partitions)

    @property
    def reorganize(self) -> bool:
        return self.reward > 0

    def to_json(self) -> dict:
        return {"table": self.table, "window": [self.window_start.isoformat(), self.window_end.isoformat()],
                "q": self.q, "w": self.w, "queries": self.queries, "references": self.references,
                "skipped_unparsable": self.skipped_unparsable, "skipped_unknown": self.skipped_unknown,
                "reward": round(self.reward, 3), "reorganize": self.reorganize, "reason": self.reason,
                "seconds": round(self.seconds, 3), "notes": list(self.notes),
                "partitions": [p.to_json() for p in self.partitions]}


def measure_shift(spark, catalog, schema: Schema, table: str, settings: ShiftSettings,
                  now: dt.datetime | None = None, history: Sequence[QueryRecord] | None = None) -> ShiftReport:
    """The reward of re-laying out `table`'s subtrees for the window ending `now`
    (default: the catalog's history of the last `window_hours`)."""
    started = time.monotonic()
    now = now or dt.datetime.now(dt.timezone.utc)
    start = now - dt.timedelta(hours=settings.window_hours)
    if history is None:
        history = catalog.query_history(since=start, until=now)
    window = window_queries(history, schema, table, start, now)
    snapshot = catalog.snapshot()

    def report(reason: str, partitions=(), notes=(), models=()) -> ShiftReport:
        log.info("workload shift of %s: %s", table, reason)
        return ShiftReport(table, start, now, settings.q, settings.w, window.queries, window.references,
                           window.unparsable, window.unknown, tuple(partitions), reason,
                           time.monotonic() - started, tuple(notes), tuple(models))

    skipped = []
    if window.unparsable:
        skipped.append(f"{window.unparsable} queries of the window could not be parsed and were skipped")
    if window.unknown:
        skipped.append(f"{window.unknown} queries name tables or columns that no longer exist and were skipped")
    layouts = snapshot.layouts_of(table)
    if not layouts:
        return report(f"{table} has no active layout: nothing to reorganize", notes=skipped)
    if window.references < settings.min_references:
        return report(f"the window holds {window.references} references to {table}, fewer than "
                      f"{settings.min_references}: too few to act on; no reorganization", notes=skipped)
    if settings.q <= settings.w:
        return report(f"q ({settings.q:g}) <= w ({settings.w:g}): reorganizing can never pay off "
                      f"(MTO §5.1.2); no reorganization", notes=skipped)

    reads = _block_reads(window, snapshot, schema, table)
    measured = [_partition_shift(spark, catalog, schema, snapshot, layout, window, reads, settings)
                for layout in layouts]
    partitions = [p for p, _ in measured]
    total = sum(p.reward for p in partitions)
    chosen = sum(len(p.chosen) for p in partitions)
    reason = (f"reward {total:.1f}: reorganize {chosen} subtrees "
              f"({sum(p.blocks_chosen for p in partitions)} of {sum(p.blocks for p in partitions)} blocks)"
              if total > 0 else "no subtree has a positive reward: no reorganization")
    return report(reason, partitions, skipped, [m for _, m in measured])


def _block_reads(window: Window, snapshot: CatalogSnapshot, schema: Schema, table: str) -> dict[int, int]:
    """Per block id of the table, how many references of the window the router sends to it."""

    index = RoutingIndex.from_snapshot(snapshot)
    reads: Counter = Counter()
    for sql in window.sql:
        for ref in route_query(sql, index, schema, dips=False).refs:
            if ref.table == table and not ref.read_all:
                reads.update(ref.blocks)
    return dict(reads)


def _partition_shift(spark, catalog, schema: Schema, snapshot: CatalogSnapshot, layout: ActiveLayout,
                     window: Window, reads: dict[int, int],
                     settings: ShiftSettings) -> tuple[PartitionShift, PartitionModel]:
    started = time.monotonic()
    version = layout.version
    table = schema.table(version.table)
    tree = old_tree(layout)
    optimizer = version.optimizer if version.optimizer in TREE_OPTIMIZERS else DEFAULT_REOPTIMIZER
    params = version.params if version.optimizer in TREE_OPTIMIZERS else {
        "block_rows": version.params.get("block_rows")}
    keys, counts, rows, cuts, (frames, sources), summary, resolved = _records(
        spark, catalog, schema, snapshot, layout, table, window, optimizer, params, settings)
    workload, block_rows = summary.matrices(len(cuts)), resolved["block_rows"]
    sizes = {b.block_id: b.row_count for b in layout.blocks}
    n_blocks = sum(1 for s in sizes.values() if s > 0)
    a_root = sum(reads.get(b, 0) for b, s in sizes.items() if s > 0) / max(1, window.references)

    def result(chosen, reward, evaluated, total, reason, violations=0) -> PartitionShift:
        return PartitionShift(version.partition, version.version_id, version.optimizer, tree.whole_partition,
                              n_blocks, a_root, tuple(chosen), reward, evaluated, total, reason,
                              time.monotonic() - started, violations)

    def model(benefits) -> PartitionModel:
        return PartitionModel(layout, tree, optimizer, resolved, tuple(cuts), frames, sources, summary, benefits)

    if not keys or workload.m == 0:
        return result((), 0.0, 0, len(tree.node_ids),
                      "the partition has no rows" if not keys else "the window's queries give no cuts on this table"
                      ), model(None)
    plan, benefits, shape = partition_rewards(tree, reads, window.references, keys, counts, rows, workload,
                                              block_rows, sizes, settings)
    chosen = [ChosenSubtree(tree.node_ids[i], tuple(sorted(leaf.leaf_id for leaf in leaves(benefits.old.nodes[i]))),
                            shape.blocks[i], shape.reads[i],
                            (plan.rewards[i] + shape.blocks[i]) * settings.w / settings.q, plan.rewards[i])
              for i in plan.nodes]
    log.info("%s %s v%d: %d cuts from the window, %d of %d subtrees evaluated; %s",
             table.name, version.partition or "(unpartitioned)", version.version_id, len(cuts),
             plan.evaluated, plan.considered, plan.reason)
    reason = plan.reason + (" (no qd-tree: the whole partition or nothing)" if tree.whole_partition else "")
    return (result(chosen, plan.reward, plan.evaluated, plan.considered, reason, len(plan.bound_violations)),
            model(benefits))


def _records(spark, catalog, schema: Schema, snapshot: CatalogSnapshot, layout: ActiveLayout, table: TableSchema,
             window: Window, optimizer: str, params: dict[str, Any], settings: ShiftSettings):
    """The layout's rows (a sample) featurized against the cuts `optimizer` picks
    from the window, keyed "<block id>|<bits>": (keys, counts, rows, cuts,
    (dimension frames, their versions), the window's PlanWorkload, the
    optimizer's resolved settings)."""


    chosen = get_optimizer(optimizer)
    resolved = chosen.resolve({k: v for k, v in params.items() if v is not None
                               and k in {s.name for s in chosen.settings}})
    queries = TableQueries(table.name, window.analyses, schema.key_hops())
    cuts = chosen.choose_cuts(queries, resolved)
    induced = set().union(*map(path_tables, cuts)) if cuts else set()
    frames, sources = {}, {}
    if induced:
        sources = active_sources(catalog, induced)
        frames = source_frames(spark, schema, {t: sources[t]["paths"] for t in sources})
    dimensions = (frames, {t: sources[t]["versions"] for t in sources})
    cuts = usable_cuts(table.name, cuts, frames)
    summary = queries.summary(cuts, table)
    paths = [b.path for b in layout.blocks if b.row_count > 0]
    if not paths:
        return [], [], 0, cuts, dimensions, summary, resolved
    location = snapshot.tables[table.name].location
    rows = spark.read.option("basePath", location).parquet(*paths).select(*table.column_names, BLOCK_ID_COLUMN)
    flagged = with_vectors(rows, cuts, frames)
    # The block rides in the vector's key, so the sample's pairs are per (block, vector).
    keyed = flagged.withColumn(VECTOR_COLUMN, F.concat_ws("|", F.col(BLOCK_ID_COLUMN).cast("string"),
                                                          F.col(VECTOR_COLUMN)))
    sample = vector_sample(keyed, table.column_names, settings.sample_rows)
    return list(sample.keys), sample.counts.tolist(), sample.rows, cuts, dimensions, summary, resolved
