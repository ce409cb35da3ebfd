"""Workload shift: is re-laying out part of a table worth it for the recent queries? (MTO §5.1)

For a window Q of the query history and every active layout (partition) of
a table, each subtree T of the layout's tree gets the reward
R(T) = (q / w) · B(T, Q) - C(T) and `reorg.optimal_set` picks the best set of
non-overlapping subtrees. Nothing is written: the data is only read.

* C(T): the catalog's non-empty blocks under T (what rewriting T costs);
* B(T, Q): blocks a query of the window reads less after T's records are
  re-laid out by T', a qd-tree grown for the window (the paper's unit: per
  query of the window, a query that does not read the table counting 0).
  T and T' are both judged by the router's rules (`reorg.simulated_reads`):
  T by the router's own verdicts on its real blocks, T' on blocks simulated
  from a row sample of the layout with the statistics the writer would give
  them; and out of sample: the window's queries are split in `folds` folds,
  and T' grown on the queries outside a fold is judged on the fold's, so a
  tree that only fits the window's literals gains nothing;
* the noise floor: the same B measured on the layout's own training log
  (recorded in its plan), which no shift separates from the layout. B is
  the window's B less the floor, and the best set is kept only when sets
  chosen the same way on the queries outside a fold still pay on the fold's,
  at the bootstrap's 5% quantile (the best of many noisy
  subtrees, chosen and judged on the same queries, looks better than it is);
* A(T): the blocks of T the router reads now per query of the window, the
  bound of B that prunes the search; the report also gives A of the root
  judged on simulated blocks (`reads_simulated`), to show how far the
  simulation is from the router.

The new subtree the reorganization writes is grown on the whole window
(`reorg.subtrees.NewSubtrees.new_subtree`). A layout without a
qd-tree (sortkey, zorder, fineblock, Pando's k trees) is one subtree: the
whole partition is re-laid out, or nothing.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import Counter, deque
from dataclasses import dataclass, field, replace
from typing import Any, Sequence

import numpy as np

from layout_core.algorithms.qdtree import Node, leaves
from layout_core.algorithms.types import VectorCounts
from layout_core.base.names import BLOCK_ID_COLUMN
from layout_core.base.schema import Schema, TableSchema
from layout_core.catalog import ActiveLayout, CatalogSnapshot, QueryRecord, TreeNodeRecord
from layout_core.catalog.records import tree_roots
from layout_core.flows.names import (
    DEFAULT_SHIFT_FLOOR,
    REFERENCE_FLOORS,
    SHIFT_FLOORS,
    TRAINING_LOG_QUERIES,
    TRAINING_QUERIES,
)
from layout_core.flows.reorg.calibrate import calibrated_w
from layout_core.flows.reorg.optimal_set import SubtreeShape, optimal_set
from layout_core.flows.reorg.simulated_reads import (
    ColumnValues,
    HeldOut,
    OutOfSampleGain,
    References,
    SampledRows,
    held_out_lower_bound,
    query_folds,
    reads,
    simulated_blocks,
    tree_blocks,
    writer_rank,
)
from layout_core.flows.reorg.subtrees import NewSubtrees, OldSubtrees, min_leaf_rows
from layout_core.optimizers import TableQueries, get_optimizer
from layout_core.optimizers.base import sort_columns
from layout_core.predicates import atoms
from layout_core.predicates.reasoning import satisfiable
from layout_core.runs.sources import active_sources, source_frames
from layout_core.skipping.router import Route, RoutingIndex, route_analysis
from layout_core.spark.blocks import word_flags
from layout_core.spark.featurize import (
    encoded_column,
    frames_for_rows,
    path_tables,
    sampled_rows,
    usable_cuts,
    with_cut_words,
)
from layout_core.spark.induced import cut_columns
from layout_core.sql.analysis import QueryAnalysis, QueryError, analyze
from layout_core.workload.tree_inputs import workload_matrices

log = logging.getLogger(__name__)

TREE_OPTIMIZERS = ("qdtree", "mto")
DEFAULT_REOPTIMIZER = "mto"  # re-lays out a partition whose optimizer grows no qd-tree


@dataclass(frozen=True)
class ShiftSettings:
    """q: queries expected before the next shift; w: writing a block costs w block reads
    (`layout calibrate` measures it); window_hours: how far back Q reaches; min_references:
    fewer references to the table than this is too small a window to act on; folds: how many
    parts the window's queries are split in to judge B out of sample (each T' is grown on all
    parts but one: more folds, trees grown on more of the window, and more trees to grow);
    floor: how B and its floor are measured (SHIFT_FLOORS). "noise": B out of sample on the
    window's folds, less the same on the training log when positive (a gain any tree shows
    without a shift); "bias": the training log's B subtracted whatever its sign (measured to
    fire on an unchanged window, since the layout was grown on the training log's own queries:
    docs/benchmarks.md); "reference": B out of sample on the window's folds, less the same B on
    the reference window's folds whatever its sign. The reference window is the first
    `window_hours` of queries after the layout went live: new queries the layout was not fitted
    to, before any shift, so what trees grown on part of a log lose or gain there is the
    estimator's own bias, not shift. "reference-in-sample": B in sample (T' grown on the whole
    window, as the reorganization writes it, judged on the window), less the same on the
    reference window; its guard chooses and judges on trees grown on each fold alone. A layout
    younger than two windows has no reference: "noise" is used for it (docs/benchmarks.md, "A
    reference window")."""

    q: float = 200.0
    w: float = 100.0
    window_hours: float = 24.0
    min_references: int = 10
    sample_rows: int = 150_000
    prune: bool = True
    folds: int = 2
    floor: str = DEFAULT_SHIFT_FLOOR

    def __post_init__(self) -> None:
        for name in ("q", "w", "window_hours"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be > 0, not {getattr(self, name)!r}")
        if self.min_references < 1 or self.sample_rows < 0:
            raise ValueError("min_references must be >= 1 and sample_rows >= 0")
        if self.folds < 2:
            raise ValueError(f"folds must be >= 2 (B is judged on queries its tree was not grown on), "
                             f"not {self.folds!r}")
        if self.floor not in SHIFT_FLOORS:
            raise ValueError(f"floor is one of {', '.join(SHIFT_FLOORS)}, not {self.floor!r}")


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
    def analyzed(self) -> int:
        """Queries of the window that analyzed, whichever tables they read: the unit of B."""
        return len(self.analyses) + self.other_tables

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
    breadth-first order (left child first: `subtrees`' numbering)."""

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
    reads: float  # A: blocks a query of the window reads in the subtree now (simulated)
    benefit: float  # B: out of sample, less the noise floor
    reward: float  # R
    noise: float = 0.0  # the noise floor subtracted from B


@dataclass(frozen=True)
class PartitionShift:
    partition: str
    version_id: int
    optimizer: str
    whole_partition: bool
    blocks: int
    reads: float  # A(root): blocks a query of the window reads now, by the router on the real blocks
    chosen: tuple[ChosenSubtree, ...]
    reward: float
    subtrees_evaluated: int
    subtrees_total: int
    reason: str
    seconds: float = 0.0
    bound_violations: int = 0  # subtrees whose greedy B broke MTO's property 2 (pruning may miss a set)
    reads_simulated: float = 0.0  # A(root) judged on blocks simulated from the sample (what B uses)
    noise_queries: int = 0  # training queries the noise floor was measured on (0: none recorded)
    lower_bound: float | None = None  # the chosen set's reward at the bootstrap's 5% quantile
    root_gain: float = 0.0  # B of the root (before the noise floor): what a full re-layout would save
    root_noise: float = 0.0  # the noise floor of the root
    # B of the root grown and judged on the whole window: what a full re-layout for the window
    # saves on the window's own queries (the benchmark's check of the simulation)
    root_gain_in_sample: float = 0.0
    floor_log: str = ""  # what the floor was measured on ("training log", "reference window ...", "")

    @property
    def blocks_chosen(self) -> int:
        return sum(c.blocks for c in self.chosen)

    @property
    def predicted_gain(self) -> float:
        """Blocks a query of the window should read less once the chosen subtrees are rewritten
        (their B before the noise floor)."""
        return sum(c.benefit + c.noise for c in self.chosen)

    def to_json(self) -> dict:
        return {"partition": self.partition, "version": self.version_id, "optimizer": self.optimizer,
                "whole_partition": self.whole_partition, "blocks": self.blocks, "reads": round(self.reads, 3),
                "reads_simulated": round(self.reads_simulated, 3), "reward": round(self.reward, 3),
                "blocks_chosen": self.blocks_chosen, "subtrees_evaluated": self.subtrees_evaluated,
                "subtrees_total": self.subtrees_total, "reason": self.reason, "seconds": round(self.seconds, 3),
                "bound_violations": self.bound_violations, "noise_queries": self.noise_queries,
                "floor_log": self.floor_log,
                "lower_bound": None if self.lower_bound is None else round(self.lower_bound, 3),
                "root_gain": round(self.root_gain, 4), "root_noise": round(self.root_noise, 4),
                "root_gain_in_sample": round(self.root_gain_in_sample, 4),
                "predicted_gain": round(self.predicted_gain, 4),
                "chosen": [{"node": c.node_id, "leaves": list(c.leaves), "blocks": c.blocks,
                            "reads": round(c.reads, 3), "benefit": round(c.benefit, 3), "noise": round(c.noise, 3),
                            "reward": round(c.reward, 3)} for c in self.chosen]}


def subtree_leaf_ids(subtrees: OldSubtrees) -> list[tuple[int, ...]]:
    """Per node of `subtrees`, the old leaf ids under it."""
    return [tuple(sorted(leaf.leaf_id for leaf in leaves(node))) for node in subtrees.nodes]


@dataclass(frozen=True)
class InSample:
    """A log's gains judged in sample: `cuts`, the cuts its trees use (chosen from all of it);
    `own[f]`, those chosen from its fold f alone (the guard's fold-wise trees)."""

    gain: OutOfSampleGain
    cuts: np.ndarray
    own: tuple[np.ndarray, ...]

    def per_query(self, members: np.ndarray, leaf_ids) -> np.ndarray:
        return self.gain.in_sample_per_query(members, leaf_ids, self.cuts)

    def fold_wise(self, members: np.ndarray, leaf_ids) -> np.ndarray:
        return self.gain.fold_in_sample_per_query(members, leaf_ids, self.own)


class SubtreeBenefits:
    """B per subtree of one partition, each computed once, however many searches ask.

    per_query(i) -> the gain of subtree i per query of the log it is judged on;
    floor_per_query(i) -> the same on the layout's own training log (None: no noise floor);
    noise_of(i), the floor, is the mean of that, at least 0 (`clip_floor`; else whatever its
    sign, ShiftSettings.floor "bias"). B(i) = max(0, mean gain - noise); a clipped floor is
    only computed for a subtree whose mean gain is above 0 (else B = 0 whatever it is).
    `choose` runs the search on it; the shift benchmark runs it again for other
    q/w and with and without pruning, on the same measurements."""

    def __init__(self, subtrees: OldSubtrees, blocks: Sequence[int], reads_now: Sequence[float], queries: int,
                 per_query, floor_per_query=None, folds: np.ndarray | None = None, clip_floor: bool = True,
                 fold_guard=None) -> None:
        self.shape = SubtreeShape(subtrees.children, tuple(int(b) for b in blocks), tuple(reads_now))
        self.leaf_ids = subtree_leaf_ids(subtrees)
        self.queries = queries
        self.folds = None if folds is None else np.asarray(folds)  # per query, its fold (the guard's)
        if self.folds is not None and self.folds.shape != (queries,):
            raise ValueError(f"folds needs one entry per query ({queries}), not shape {self.folds.shape}")
        self._per_query, self._floor_per_query = per_query, floor_per_query
        self.clip_floor = clip_floor
        # B in sample: (per node -> (window gains, floor gains) of trees grown on each query's own
        # fold, judged on it; the floor log's folds): the guard chooses and judges on those
        self._fold_guard = fold_guard
        self.fold_gains: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.gains: dict[int, np.ndarray] = {}
        self.floor_gains: dict[int, np.ndarray] = {}  # per node, per query of the training log
        self.noise: dict[int, float] = {}

    def gain(self, i: int) -> np.ndarray:
        """Subtree i's gain per query of the window, computed once."""
        if i not in self.gains:
            self.gains[i] = self._per_query(i)
        return self.gains[i]

    def noise_of(self, i: int) -> float:
        """Subtree i's noise floor, computed once (on the floor log: as costly as its gain)."""
        if i not in self.noise:
            if self._floor_per_query is not None:
                self.floor_gains[i] = self._floor_per_query(i)
            floor = self.floor_gains.get(i)
            mean = float(floor.mean()) if floor is not None and floor.size else 0.0
            self.noise[i] = max(0.0, mean) if self.clip_floor else mean
        return self.noise[i]

    def _less_noise(self, i: int, mean: float) -> float:
        # a clipped floor is >= 0: a mean gain <= 0 stays B = 0 whatever it is, so it is not computed
        if self.clip_floor and mean <= 0:
            return 0.0
        return max(0.0, mean - self.noise_of(i))

    def benefit(self, i: int) -> float:
        return self._less_noise(i, float(self.gain(i).sum()) / self.queries)

    def benefit_on(self, queries: np.ndarray):
        """B judged on the queries of the mask `queries` only: benefit(i) -> float."""
        def benefit(i: int) -> float:
            return self._less_noise(i, float(self.gain(i)[queries].mean())) if queries.any() else 0.0
        return benefit

    def held_out_reward(self, settings: ShiftSettings) -> float:
        """The reward of the set chosen on the window's queries outside each fold and judged on
        the fold's, at the bootstrap's 5% quantile. The best of many subtrees, chosen and
        judged on the same queries, would be the luckiest one (the winner's curse): an
        unchanged window would fire on it."""
        if self.folds is None:
            raise ValueError("the guard needs each query's fold (SubtreeBenefits(folds=...))")
        held_out = []
        for fold in np.unique(self.folds):
            judged = self.folds == fold
            chosen_on, judged_on = self._fold_views(fold, judged)
            plan = optimal_set(self.shape, chosen_on, settings.q, settings.w, prune=settings.prune)
            parts = [judged_on(i) for i in plan.nodes]
            gains = sum((g for g, _ in parts), np.zeros(int(judged.sum())))
            floors = [f for _, f in parts if f is not None]
            held_out.append(HeldOut(gains, np.array(floors) if floors else None,
                                    float(sum(self.shape.blocks[i] for i in plan.nodes))))
        return held_out_lower_bound(held_out, settings.q / settings.w, clip_floor=self.clip_floor)

    def _floor_gains_of(self, i: int) -> np.ndarray | None:
        self.noise_of(i)
        return self.floor_gains.get(i)

    def _fold_views(self, fold: int, judged: np.ndarray):
        """For the guard's fold: (B of a node as the queries outside the fold choose it, a node
        -> (its gains on the fold's queries, its floor gains or None)). Out of sample, the
        window's gains and the whole floor log. In sample (`fold_guard`), a tree grown on all
        of the window saw every fold: the trees grown on each fold alone are used instead, the
        floor log split in the same folds, so the fold is judged by trees that never saw the
        queries that chose the set."""
        if self._fold_guard is None:
            return self.benefit_on(~judged), lambda i: (self.gain(i)[judged], self._floor_gains_of(i))
        per_node, floor_folds = self._fold_guard
        judged_floor = floor_folds == fold

        def gains_of(i: int) -> tuple[np.ndarray, np.ndarray]:
            if i not in self.fold_gains:
                self.fold_gains[i] = per_node(i)
            return self.fold_gains[i]

        def chosen_on(i: int) -> float:
            gains, floor = gains_of(i)
            outside, floor_outside = gains[~judged], floor[~judged_floor]
            if not outside.size:
                return 0.0
            return max(0.0, float(outside.mean()) - (float(floor_outside.mean()) if floor_outside.size else 0.0))

        return chosen_on, lambda i: (gains_of(i)[0][judged], gains_of(i)[1][judged_floor])

    @classmethod
    def out_of_sample(cls, subtrees: OldSubtrees, blocks: Sequence[int], window: OutOfSampleGain,
                      training: OutOfSampleGain | None, clip_floor: bool = True) -> "SubtreeBenefits":
        """B judged out of sample on the window, less the same B on the layout's own training
        log (None: not recorded; `clip_floor`: only when positive); A(T), the bound B cannot
        pass, is what the window's queries read of T now."""
        queries = window.refs.queries
        leaf_ids = subtree_leaf_ids(subtrees)
        # per query: a query reading the table twice (a self-join) reads a subtree twice
        reads_now = [float(window.reads_now(ids).sum()) / queries for ids in leaf_ids]

        def per_query(i: int) -> np.ndarray:
            return window.per_query(subtrees.vector_indices(i), leaf_ids[i])

        def floor_per_query(i: int) -> np.ndarray:
            return training.per_query(subtrees.vector_indices(i), leaf_ids[i])

        return cls(subtrees, blocks, reads_now, queries, per_query, None if training is None else floor_per_query,
                   window.fold, clip_floor)

    @classmethod
    def in_sample(cls, subtrees: OldSubtrees, blocks: Sequence[int], window: InSample,
                  reference: InSample) -> "SubtreeBenefits":
        """B in sample on the window (T' grown on all of it with its cuts, as the reorganization
        writes it), less the same B on the reference window (its T' grown on it with its own
        cuts) whatever its sign: both are the same estimator, so the floor takes out the fit to
        a log's own literals, not only noise. The guard chooses and judges on fold-wise trees
        (`_fold_views`)."""
        queries = window.gain.refs.queries
        leaf_ids = subtree_leaf_ids(subtrees)
        reads_now = [float(window.gain.reads_now(ids).sum()) / queries for ids in leaf_ids]

        def per_query(i: int) -> np.ndarray:
            return window.per_query(subtrees.vector_indices(i), leaf_ids[i])

        def floor_per_query(i: int) -> np.ndarray:
            return reference.per_query(subtrees.vector_indices(i), leaf_ids[i])

        def fold_wise(i: int) -> tuple[np.ndarray, np.ndarray]:
            members = subtrees.vector_indices(i)
            return window.fold_wise(members, leaf_ids[i]), reference.fold_wise(members, leaf_ids[i])

        return cls(subtrees, blocks, reads_now, queries, per_query, floor_per_query, window.gain.fold,
                   clip_floor=False, fold_guard=(fold_wise, reference.gain.fold))


def choose(benefits: SubtreeBenefits, settings: ShiftSettings, guard: bool = True) -> "PartitionRewards":
    """The best set of non-overlapping subtrees for q and w (`reorg.optimal_set`).

    With `guard`, the set is kept only when sets chosen the same way on the window's queries
    outside a fold still pay on the fold's, at the bootstrap's 5% quantile
    (`SubtreeBenefits.held_out_reward`): a reward that resampling can take to 0, or that
    the queries which chose the set do not confirm, is noise, not shift."""
    shape = benefits.shape
    plan = optimal_set(shape, benefits.benefit, settings.q, settings.w, prune=settings.prune)
    benefits.benefit(0)  # the root's B and floor are reported whatever the search visited
    benefits.noise_of(0)
    lower = None
    if plan.nodes:
        lower = benefits.held_out_reward(settings) if guard else plan.reward
    return PartitionRewards(plan, shape, benefits.leaf_ids, dict(benefits.noise), lower,
                            float(benefits.gains[0].sum()) / benefits.queries)


@dataclass(frozen=True)
class PartitionRewards:
    plan: Any  # optimal_set.Reorganization
    shape: SubtreeShape
    leaf_ids: list  # per node, the old leaf ids under it
    noise: dict  # per evaluated node, its noise floor
    lower_bound: float | None  # sets chosen outside a fold, judged on it: the bootstrap's 5% quantile
    root_gain: float = 0.0  # the window's B of the root before the noise floor: a full re-layout's gain

    @property
    def significant(self) -> bool:
        return self.lower_bound is not None and self.lower_bound > 0


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
    new_subtrees: NewSubtrees | None  # None when the partition had no rows or no cuts
    window_sql: tuple[str, ...] = ()  # the window's queries on the table: the new version's training log
    window_queries: int = 0  # every analyzed query of the window
    benefits: SubtreeBenefits | None = None  # B per subtree, for `rechoose` (None: nothing measured)
    sample: SampledRows | None = None  # the partition's sampled rows (`judged_on`)


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
                  now: dt.datetime | None = None, history: Sequence[QueryRecord] | None = None,
                  snapshot: CatalogSnapshot | None = None) -> ShiftReport:
    """The reward of re-laying out `table`'s subtrees for the window ending `now`
    (default: the catalog's history of the last `window_hours`), on the catalog's layouts
    (`snapshot`: read once for many tables; default: read now)."""
    started = time.monotonic()
    now = now or dt.datetime.now(dt.timezone.utc)
    start = now - dt.timedelta(hours=settings.window_hours)
    if history is None:
        history = catalog.query_history(since=start, until=now)
    window = window_queries(history, schema, table, start, now)
    snapshot = catalog.snapshot() if snapshot is None else snapshot

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

    index = RoutingIndex.from_snapshot(snapshot)
    routes = [route_analysis(a, index, schema, dips=False) for a in window.analyses]
    # The partitions' versions were mostly laid out for one training log: parse and route each text once.
    routed = RoutedTexts(schema, index)
    measured = [_partition_shift(spark, catalog, schema, snapshot, routed, layout, window, routes, settings)
                for layout in layouts]
    partitions = [p for p, _ in measured]
    return report(_reason_of(partitions), partitions, skipped, [m for _, m in measured])


def router_reads(routes: Sequence[Route], analyses: Sequence[QueryAnalysis], table: str,
                 layout: ActiveLayout) -> np.ndarray:
    """(R, k): per reference of the analyses to `table` (in their order), which of the layout's
    blocks the router reads (`routes`: the analyses routed, diPs off: they depend on the other
    tables' layouts). A reference the router could not route reads every block."""
    position = {b.block_id: i for i, b in enumerate(layout.blocks)}
    rows = []
    for analysis, route in zip(analyses, routes):
        by_key = {r.ref: r for r in route.refs}
        for ref in analysis.refs_of_table(table):
            row = np.zeros(len(layout.blocks), dtype=bool)
            routed = by_key.get(ref.key)
            parts = [] if routed is None or routed.read_all else [
                p for p in routed.partitions if p.version_id == layout.version.version_id]
            if not parts:
                row[:] = True
            for p in parts:
                row[[position[b] for b in p.blocks]] = True
            rows.append(row)
    return np.array(rows, dtype=bool).reshape(len(rows), len(layout.blocks))


def _partition_shift(spark, catalog, schema: Schema, snapshot: CatalogSnapshot, routed: "RoutedTexts",
                     layout: ActiveLayout, window: Window, routes: Sequence[Route],
                     settings: ShiftSettings) -> tuple[PartitionShift, PartitionModel]:
    started = time.monotonic()
    version = layout.version
    table = schema.table(version.table)
    tree = old_tree(layout)
    optimizer = version.optimizer if version.optimizer in TREE_OPTIMIZERS else DEFAULT_REOPTIMIZER
    params = version.params if version.optimizer in TREE_OPTIMIZERS else {
        "block_rows": version.params.get("block_rows")}
    reference, floor_log = None, ""
    if settings.floor in REFERENCE_FLOORS:
        reference, floor_log = reference_window(catalog, layout, routed, window, settings)
    window_reads = router_reads(routes, window.analyses, table.name, layout)

    def reads_of(log_: QueryLog | None) -> np.ndarray | None:
        return None if log_ is None else router_reads(
            [routed.route(text) for text in log_.sql], log_.analyses, table.name, layout)

    # with a reference window the training log is not used (the floor is measured on the reference)
    training = training_log(catalog, layout, routed) if reference is None else None
    inputs = _partition_inputs(spark, catalog, schema, snapshot, layout, table, tree, window, training, optimizer,
                               params, settings, {"window": window_reads, "training": reads_of(training),
                                                  "reference": reads_of(reference)}, reference,
                               in_sample=reference is not None and settings.floor == "reference-in-sample")
    sizes = {b.block_id: b.row_count for b in layout.blocks}
    n_blocks = sum(1 for s in sizes.values() if s > 0)
    a_root = float(window_reads.sum()) / max(1, window.analyzed)
    noise_queries = inputs.training_gain.refs.queries if inputs.training_gain is not None else 0
    if reference is not None:
        noise_queries = reference.queries
    elif noise_queries:
        floor_log = "; ".join(filter(None, (floor_log, "training log, out of sample")))

    def result(chosen, reward, evaluated, total, reason, root_gain_in_sample=0.0) -> PartitionShift:
        return PartitionShift(version.partition, version.version_id, version.optimizer, tree.whole_partition,
                              n_blocks, a_root, tuple(chosen), reward, evaluated, total, reason,
                              time.monotonic() - started, 0, inputs.reads_simulated, noise_queries,
                              root_gain_in_sample=root_gain_in_sample, floor_log=floor_log)

    def model(new_subtrees, benefits=None) -> PartitionModel:
        return PartitionModel(layout, tree, optimizer, inputs.resolved, inputs.cuts[:inputs.window_cuts],
                              inputs.frames, inputs.sources, inputs.summary, new_subtrees, window.sql,
                              window.analyzed, benefits, inputs.sample)

    if inputs.sample is None or inputs.window_cuts == 0:
        return result((), 0.0, 0, len(tree.node_ids),
                      "the window's queries give no cuts on this table" if inputs.window_cuts == 0
                      else "the partition has no rows"), model(None)
    block_rows, m = inputs.resolved["block_rows"], inputs.window_cuts
    window_vc = VectorCounts(inputs.vc.vectors[:, :m], inputs.vc.counts, np.ones(m))
    new_subtrees = NewSubtrees.of(window_vc, tree.root, inputs.summary.matrices(m), block_rows, inputs.scale,
                                  inputs.leaf_of_vector)
    if not inputs.window_gain.judgeable:
        return result((), 0.0, 0, len(tree.node_ids),
                      "the window's references to the table all fall in one fold of its queries: a new layout "
                      "cannot be judged out of sample; no reorganization"), model(new_subtrees)
    blocks = _subtree_blocks(new_subtrees.old, tree, sizes)
    if inputs.in_sample is not None:
        benefits = SubtreeBenefits.in_sample(new_subtrees.old, blocks, *inputs.in_sample)
    elif inputs.reference_gain is not None:  # both out of sample: the bias of half-trees cancels, any sign
        benefits = SubtreeBenefits.out_of_sample(new_subtrees.old, blocks, inputs.window_gain, inputs.reference_gain,
                                                 clip_floor=False)
    else:
        benefits = SubtreeBenefits.out_of_sample(new_subtrees.old, blocks, inputs.window_gain, inputs.training_gain,
                                                 settings.floor != "bias")
    root_in_sample = inputs.window_gain.in_sample(np.arange(inputs.vc.n), benefits.leaf_ids[0], np.arange(m))
    measured = result((), 0.0, 0, len(tree.node_ids), "", root_gain_in_sample=root_in_sample)
    shift = _decided(measured, choose(benefits, settings), tree, settings)
    log.info("%s %s v%d: %d cuts from the window (%d featurized), %d of %d subtrees evaluated; %s",
             table.name, version.partition or "(unpartitioned)", version.version_id, m, len(inputs.cuts),
             shift.subtrees_evaluated, shift.subtrees_total, shift.reason)
    return shift, model(new_subtrees, benefits)


def _decided(measured: PartitionShift, rewards: PartitionRewards, tree: OldTree,
             settings: ShiftSettings) -> PartitionShift:
    """The partition's shift with the set `rewards` chose (none when the bootstrap cannot tell its
    reward from noise)."""
    plan, shape = rewards.plan, rewards.shape
    whole = " (no qd-tree: the whole partition or nothing)" if tree.whole_partition else ""
    found = dict(subtrees_evaluated=plan.evaluated, subtrees_total=plan.considered,
                 bound_violations=len(plan.bound_violations), lower_bound=rewards.lower_bound,
                 root_gain=rewards.root_gain, root_noise=rewards.noise.get(0, 0.0))
    if plan.nodes and not rewards.significant:
        return replace(measured, chosen=(), reward=0.0, **found, reason=(
            f"the best set's reward is {plan.reward:.1f}, but sets chosen on the window's queries outside a fold "
            f"reward {rewards.lower_bound:.1f} on the fold's at the bootstrap's 5% quantile: not told apart from "
            f"noise; no reorganization{whole}"))
    chosen = tuple(ChosenSubtree(tree.node_ids[i], rewards.leaf_ids[i], shape.blocks[i], shape.reads[i],
                                 (plan.rewards[i] + shape.blocks[i]) * settings.w / settings.q, plan.rewards[i],
                                 rewards.noise.get(i, 0.0))
                   for i in plan.nodes)
    return replace(measured, chosen=chosen, reward=plan.reward, **found, reason=plan.reason + whole)


def rechoose(report: ShiftReport, settings: ShiftSettings, benefits_of=None, guard: bool = True) -> ShiftReport:
    """The report's partitions decided again for other settings (q, w, pruning) on the B
    already measured: each subtree's B is computed once, whichever searches ask for it.
    `benefits_of(model)` gives other benefits to choose by (default: the measured ones;
    None for a partition leaves it undecided, as measured); `guard`: the bootstrap's noise guard."""
    partitions = []
    for shift, model in zip(report.partitions, report.models):
        benefits = model.benefits if benefits_of is None else benefits_of(model)
        partitions.append(shift if benefits is None else
                          _decided(shift, choose(benefits, settings, guard), model.tree, settings))
    return replace(report, q=settings.q, w=settings.w, partitions=tuple(partitions),
                   reason=_reason_of(partitions))


def _reason_of(partitions: Sequence[PartitionShift]) -> str:
    total = sum(p.reward for p in partitions)
    if total <= 0:
        return "no subtree has a positive reward: no reorganization"
    return (f"reward {total:.1f}: reorganize {sum(len(p.chosen) for p in partitions)} subtrees "
            f"({sum(p.blocks_chosen for p in partitions)} of {sum(p.blocks for p in partitions)} blocks)")


def judged_on(model: PartitionModel, analyses: Sequence[QueryAnalysis], routes: Sequence[Route],
              schema: Schema) -> SubtreeBenefits | None:
    """B of each subtree realized on other queries than the window's (the shift benchmark's
    oracle judges on its test queries): T' as the reorganization writes it (grown on the whole
    window, `NewSubtrees.new_subtree`) on blocks simulated from the sample, against the router's
    verdicts on the real blocks (`routes`: the analyses routed, diPs off). None when the
    partition was not measured."""
    if model.benefits is None or model.sample is None:
        return None
    new, table = model.new_subtrees, model.layout.version.table
    queries = QueryLog((), tuple(analyses), len(analyses))
    refs = _references(queries, table, schema.key_hops(), [c.predicate for c in model.cuts])
    old = router_reads(routes, analyses, table, model.layout)
    block_leaf = np.array([model.tree.leaf_of_block[b.block_id] for b in model.layout.blocks], dtype=np.int64)
    # per node, the old blocks under it each reference reads now
    before = [old[:, np.isin(block_leaf, ids)].sum(axis=1).astype(np.float64) for ids in model.benefits.leaf_ids]

    def per_query(i: int) -> np.ndarray:
        rows = model.sample.rows_of(new.old.vector_indices(i))
        block, n_blocks = tree_blocks(new.new_subtree(i), model.sample, rows, int(model.settings["block_rows"]),
                                      new.scale)
        after = reads(refs, simulated_blocks(model.sample, new.vc.vectors, rows, block, n_blocks)).sum(axis=1)
        return refs.per_query(before[i] - after)

    a = [float(b.sum()) / max(1, len(analyses)) for b in before]
    return SubtreeBenefits(new.old, model.benefits.shape.blocks, a, max(1, len(analyses)), per_query)


def _subtree_blocks(old: OldSubtrees, tree: OldTree, sizes: dict[int, int]) -> list[int]:
    """C per node of `old`: the catalog's blocks with rows under it."""
    leaf_blocks_ = Counter(tree.leaf_of_block[b] for b, rows in sizes.items() if rows > 0)
    blocks = [0] * len(old)
    for i in reversed(range(len(old))):
        if old.children[i] is None:
            blocks[i] = leaf_blocks_.get(old.nodes[i].leaf_id, 0)
        else:
            left, right = old.children[i]
            blocks[i] = blocks[left] + blocks[right]
    return blocks


# ---------------------------------------------------------------------------
# The training log and the sampled rows


@dataclass(frozen=True)
class QueryLog:
    """Queries of a log that read one table, analyzed; `queries`: every analyzed query of the log."""

    sql: tuple[str, ...]
    analyses: tuple[QueryAnalysis, ...]
    queries: int


class RoutedTexts:
    """Query texts analyzed and routed (diPs off) once, however many partitions ask."""

    def __init__(self, schema: Schema, index: RoutingIndex) -> None:
        self.schema, self.index = schema, index
        self._analyses: dict[str, QueryAnalysis | None] = {}
        self._routes: dict[str, Route] = {}

    def analysis(self, text: str) -> QueryAnalysis | None:
        """None when the text no longer analyzes under the current schema."""
        if text not in self._analyses:
            try:
                self._analyses[text] = analyze(text, self.schema)
            except QueryError:
                self._analyses[text] = None
        return self._analyses[text]

    def route(self, text: str) -> Route:
        if text not in self._routes:
            self._routes[text] = route_analysis(self.analysis(text), self.index, self.schema, dips=False)
        return self._routes[text]


def training_log(catalog, layout: ActiveLayout, routed: RoutedTexts) -> QueryLog | None:
    """The queries the layout was made for, from its stored plan (None when the plan has none:
    a version laid out before they were recorded, or without a log). Queries that no longer
    analyze under the current schema are left out."""
    plan = catalog.plan(layout.version.version_id) or {}
    sql = plan.get(TRAINING_QUERIES) or ()
    kept = []
    for text in sql:
        analysis = routed.analysis(text)
        if analysis is not None and analysis.refs_of_table(layout.version.table):
            kept.append((text, analysis))
    if not kept:
        return None
    total = max(len(kept), int(plan.get(TRAINING_LOG_QUERIES) or 0))
    return QueryLog(tuple(t for t, _ in kept), tuple(a for _, a in kept), total)


def reference_window(catalog, layout: ActiveLayout, routed: RoutedTexts, window: Window,
                     settings: ShiftSettings) -> tuple[QueryLog | None, str]:
    """The reference window of ShiftSettings.floor "reference": the queries of the first
    `window_hours` after the layout went live, and what they are (for the report). None, with
    why, when that window is not over before the one judged starts, reads the table too little,
    or all its queries on the table fall in one fold (nothing could be judged out of sample)."""
    since = layout.version.activated_at or layout.version.created_at
    since = since if since.tzinfo else since.replace(tzinfo=dt.timezone.utc)
    until = since + dt.timedelta(hours=settings.window_hours)
    if until > window.start:
        return None, f"no reference window: the layout went live at {since:%Y-%m-%d %H:%M}, less than two windows ago"
    sql, analyses, analyzed = [], [], 0
    for query in catalog.query_history(since=since, until=until):
        analysis = routed.analysis(query.sql)
        if analysis is None:
            continue
        analyzed += 1
        if analysis.refs_of_table(layout.version.table):
            sql.append(query.sql)
            analyses.append(analysis)
    references = sum(len(a.refs_of_table(layout.version.table)) for a in analyses)
    if references < settings.min_references:
        return None, (f"no reference window: the first window after the layout went live holds {references} "
                      f"references to the table, fewer than {settings.min_references}")
    if np.unique(query_folds(sql, settings.folds)).size < 2:  # as OutOfSampleGain.judgeable would find
        return None, "no reference window: its queries on the table all fall in one fold"
    return QueryLog(tuple(sql), tuple(analyses), analyzed), (
        f"reference window from {since:%Y-%m-%d %H:%M} ({analyzed} queries)")


@dataclass(frozen=True, eq=False)
class PartitionInputs:
    """What one partition's rewards are computed from (`_partition_inputs`)."""

    cuts: tuple  # every featurized CandidateCut: the window's first
    window_cuts: int  # how many of `cuts` the window's queries chose (what a new subtree may use)
    frames: dict
    sources: dict
    summary: Any  # PlanWorkload of the window against its cuts
    resolved: dict
    scale: float = 1.0  # the partition's rows / sampled rows
    sample: SampledRows | None = None  # None: the partition has no rows
    vc: VectorCounts | None = None  # the sample's (block, bits) pairs, bits of every cut
    leaf_of_vector: np.ndarray | None = None
    window_gain: OutOfSampleGain | None = None
    training_gain: OutOfSampleGain | None = None  # None: no training log, or its references in one fold
    reference_gain: OutOfSampleGain | None = None  # the reference window; None: none
    in_sample: tuple[InSample, InSample] | None = None  # the window's and the reference's, floor "reference-in-sample"

    @property
    def reads_simulated(self) -> float:
        if self.window_gain is None:
            return 0.0
        leaves_ = np.unique(self.window_gain.block_leaf)
        return float(self.window_gain.reads_now(leaves_, simulated=True).sum()) / self.window_gain.refs.queries


def _partition_inputs(spark, catalog, schema: Schema, snapshot: CatalogSnapshot, layout: ActiveLayout,
                      table: TableSchema, tree: OldTree, window: Window, training: QueryLog | None,
                      optimizer: str, params: dict[str, Any], settings: ShiftSettings,
                      routed: dict[str, np.ndarray | None], reference: QueryLog | None = None,
                      in_sample: bool = False) -> PartitionInputs:
    """Cuts chosen from the window (and, for the held-out folds, from the queries outside each
    fold of the window and of the training log or the `reference` window; `in_sample`: from the
    window and the reference whole), and a row sample of the layout featurized against all of them."""
    chosen = get_optimizer(optimizer)
    resolved = chosen.resolve({k: v for k, v in params.items() if v is not None
                               and k in {s.name for s in chosen.settings}})
    key_hops = schema.key_hops()

    def cuts_of(analyses) -> list:
        return chosen.choose_cuts(TableQueries(table.name, tuple(analyses), key_hops), resolved)

    logs = {"window": QueryLog(window.sql, window.analyses, window.analyzed)}
    if training is not None:
        logs["training"] = training
    if reference is not None:
        logs["reference"] = reference
    folds = {name: np.resize(query_folds(q.sql, settings.folds), q.queries) if q.sql
             else np.zeros(q.queries, np.int64) for name, q in logs.items()}
    window_cuts = cuts_of(window.analyses)

    def cuts_per_fold(inside: bool) -> dict:
        """Per (log, fold f), the cuts chosen from the queries inside f, or outside it."""
        return {(name, f): cuts_of(a for a, fold in zip(q.analyses, folds[name]) if (fold == f) == inside)
                for name, q in logs.items() for f in range(settings.folds)}

    # the cuts a tree judged on fold f may use: chosen from the queries outside f (judged in
    # sample, the window's trees use all of its cuts, the reference's all of its own, and the
    # guard's trees, grown on each fold alone, that fold's own)
    fold_cuts = {} if in_sample else cuts_per_fold(inside=False)
    own_cuts = cuts_per_fold(inside=True) if in_sample else {}
    reference_cuts = cuts_of(reference.analyses) if reference is not None and in_sample else []
    extra = ((cuts_of(training.analyses) if training else []) + reference_cuts
             + [c for cs in (*fold_cuts.values(), *own_cuts.values()) for c in cs])
    induced = set().union(*map(path_tables, window_cuts + extra)) if window_cuts or extra else set()
    frames, sources = {}, {}
    if induced:
        found = active_sources(catalog, induced)
        frames = source_frames(spark, schema, {t: found[t]["paths"] for t in found})
        sources = {t: found[t]["versions"] for t in found}
    usable = set(usable_cuts(table.name, window_cuts + extra, frames))  # one key check for all of them
    window_cuts = [c for c in window_cuts if c in usable]
    seen = {c.predicate for c in window_cuts}
    cuts = list(window_cuts)
    for c in extra:
        if c in usable and c.predicate not in seen:
            seen.add(c.predicate)
            cuts.append(c)
    queries = TableQueries(table.name, window.analyses, key_hops)
    summary = queries.summary(window_cuts, table)
    base = PartitionInputs(tuple(cuts), len(window_cuts), frames, sources, summary, resolved)
    paths = [b.path for b in layout.blocks if b.row_count > 0]
    if not paths or not window_cuts:
        return base

    order = sort_columns(table, summary, resolved.get("sort_column", ""), resolved.get("leaf_order", "range"))
    filtered = {c for q in logs.values() for a in q.analyses for ref in a.refs_of_table(table.name)
                for atom in atoms(a.filter(ref.key)) for c in atom.columns()}
    columns = sorted((filtered | set(order)) & set(table.column_names))
    location = snapshot.tables[table.name].location
    rows = spark.read.option("basePath", location).parquet(*paths).select(*table.column_names, BLOCK_ID_COLUMN)
    total_rows = sum(b.row_count for b in layout.blocks)
    # the sample first: only its rows are joined for the join-induced cuts' bits
    sampled = sampled_rows(rows, table.column_names, settings.sample_rows, total_rows)
    # the sample kept (it is read twice: for its parents' keys, then for its bits)
    narrow = cut_columns(sampled, [c.predicate for c in cuts], [BLOCK_ID_COLUMN, *columns]).localCheckpoint()
    picked, words = with_cut_words(narrow, cuts, frames_for_rows(narrow, cuts, frames))
    records = picked.select(BLOCK_ID_COLUMN, *words, *columns).toArrow()
    if not records.num_rows:
        return base

    block_index = {b.block_id: i for i, b in enumerate(layout.blocks)}
    m = len(cuts)
    keyed = np.column_stack([records.column(c).to_numpy() for c in (BLOCK_ID_COLUMN, *words)]).astype(np.int64)
    key_block, vectors, vector_of_row = distinct_vectors(keyed, m)
    vc = VectorCounts(vectors, np.bincount(vector_of_row, minlength=len(key_block)).astype(np.int64), np.ones(m))
    values = {c: ColumnValues.of_encoded(*encoded_column(records.column(c))) for c in columns}
    pair_block = np.array([block_index[b] for b in key_block], dtype=np.int64)  # a row's block is its pair's
    sample = SampledRows(vector_of_row, pair_block[vector_of_row],
                         writer_rank([values[c] for c in order], records.num_rows), values)
    scale = total_rows / records.num_rows
    block_leaf = np.array([tree.leaf_of_block[b.block_id] for b in layout.blocks], dtype=np.int64)
    predicates = [c.predicate for c in cuts]
    position = {c.predicate: j for j, c in enumerate(cuts)}
    leaf_rows = min_leaf_rows(resolved["block_rows"], scale)

    def positions(chosen_cuts) -> np.ndarray:
        return np.array(sorted({position[c.predicate] for c in chosen_cuts if c.predicate in position}),
                        dtype=np.int64)

    def gain(q: QueryLog, fold: np.ndarray, allowed: tuple, reads_of: np.ndarray | None) -> OutOfSampleGain:
        return OutOfSampleGain(sample, vc, _references(q, table.name, key_hops, predicates), fold, allowed,
                               block_leaf, resolved["block_rows"], scale, leaf_rows, reads_of)

    def fold_allowed(name: str) -> tuple:
        if in_sample:  # every fold's trees use all of the window's cuts
            return (np.arange(len(window_cuts), dtype=np.int64),) * settings.folds
        return tuple(positions(fold_cuts[(name, f)]) for f in range(settings.folds))

    window_gain = gain(logs["window"], folds["window"], fold_allowed("window"), routed["window"])
    training_gain = None
    if training is not None:
        training_gain = gain(training, folds["training"], fold_allowed("training"), routed["training"])
        training_gain = training_gain if training_gain.judgeable else None
    reference_gain, logs_in_sample = None, None
    if reference is not None and in_sample:
        reference_gain = gain(reference, folds["reference"], (positions(reference_cuts),) * settings.folds,
                              routed["reference"])
        own = {name: tuple(positions(own_cuts[(name, f)]) for f in range(settings.folds)) for name in logs}
        logs_in_sample = (InSample(window_gain, np.arange(len(window_cuts), dtype=np.int64), own["window"]),
                          InSample(reference_gain, positions(reference_cuts), own["reference"]))
    elif reference is not None:  # judgeable: `reference_window` keeps only windows with two folds or more
        reference_gain = gain(reference, folds["reference"], fold_allowed("reference"), routed["reference"])
    return PartitionInputs(tuple(cuts), len(window_cuts), frames, sources, summary, resolved, scale, sample, vc,
                           np.array([tree.leaf_of_block[b] for b in key_block], dtype=np.int64), window_gain,
                           training_gain, reference_gain, logs_in_sample)


def distinct_vectors(keyed: np.ndarray, m: int) -> tuple[list[int], np.ndarray, np.ndarray]:
    """The distinct (block, cut bits) pairs of sampled rows given as (block id, cut words...)
    (`featurize.with_cut_words`): their blocks, their (pairs, m) bits, and each row's pair.
    The pairs are ordered as the strings "<block>|<bits>" sort, the order they had when the
    bits were collected as strings, so that ties between vectors break as they did."""
    pairs, row_pair = np.unique(keyed, axis=0, return_inverse=True)
    bits = word_flags(pairs[:, 1:], m)
    blocks = pairs[:, 0].tolist()
    by_text = {b: i for i, b in enumerate(sorted(set(blocks), key=lambda b: f"{b}|"))}
    rank = np.array([by_text[b] for b in blocks], dtype=np.int64)
    order = np.lexsort(np.vstack([bits[:, ::-1].T, rank[None, :]]))  # the last key sorts first
    position = np.empty(len(order), dtype=np.int64)
    position[order] = np.arange(len(order))
    return [blocks[i] for i in order], bits[order], position[np.asarray(row_pair).reshape(-1)]


def _references(queries: QueryLog, table: str, key_hops, cuts: Sequence) -> References:
    """The log's references to `table` as the router sees them, against `cuts`."""
    matrices = workload_matrices(queries.analyses, table, key_hops, cuts)
    query, filters, sat = [], [], []
    for index, a in enumerate(queries.analyses):
        for ref in a.refs_of_table(table):
            query.append(index)
            filters.append(a.filter(ref.key))
            sat.append(satisfiable(a.predicate(ref.key, key_hops)))
    return References(np.array(query, dtype=np.int64), matrices.implies, matrices.disjoint, tuple(filters),
                      np.array(sat, dtype=bool), queries.queries)
