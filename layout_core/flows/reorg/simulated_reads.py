"""B(T, Q) judged fairly: blocks read by the router's rules, on T's real blocks and on T' simulated.

MTO §5.1.2's benefit B(T, Q) compares the blocks an average query of the
window Q reads on the subtree T as it is written with those it would read
on T', a qd-tree grown for Q over T's records. Both sides are judged by the
router's rules on the statistics their blocks have, so B measures layouts
and not estimators:

* T: the router's own verdicts on the real blocks (`router_reads`: cut
  bits, range sets and tree paths of the catalog), when the caller has
  them; else T is simulated like T';
* T': blocks formed from a sample of the partition's rows as the writer
  forms them (each leaf's rows in the writer's order, the optimizer's sort
  columns, cut into max(1, rows x scale // block_rows) equal ranges,
  `leaf_blocks`), each with the statistics the writer would give it from
  its sampled rows: union and all bits of the window's cuts, and per
  filtered column its minimum, maximum and NULL count. A reference reads a
  block unless the router's rules skip it: its predicate is never TRUE, the
  zone maps prove no row matches its table filter
  (`zonemaps.might_match_blocks`), or it implies a cut no row of the block
  has or is disjoint with a cut every row has (`router.cut_verdict`).

The simulation leaves out range sets (the sample cannot give the writer's)
and tree paths (the cut bits of T''s own cuts say as much). Simulating T the
same way and comparing with the router's verdicts on its real blocks shows
how far the simulation is from the router (`reads_now(simulated=True)`).

Out of sample (`OutOfSampleGain`): the window's queries are split in k
folds (`query_folds`); for each fold, T' is grown on the other folds'
references, with the cuts chosen from their queries only, and judged on the
fold's. A tree grown and judged on the same queries fits their literals, and
an unchanged workload would look shifted. Two folds (halves) judge trees
grown on half the window; more grow them on more of it, at the cost of more
trees. On TPC-H's local-dates shift, lineitem's B out of sample swung from 9
to 27 blocks per query with the split alone (25 realized; docs/benchmarks.md).
The unit is the paper's: blocks per query of the window (a query that does
not read the table reads 0 of it).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping, Sequence

import numpy as np

from layout_core.algorithms.qdtree import Node, greedy_tree, leaf_blocks, leaves
from layout_core.algorithms.types import VectorCounts, Workload
from layout_core.flows.reorg.subtrees import reindexed_tree
from layout_core.predicates import Predicate
from layout_core.skipping.zonemaps import ColumnArrays, ZoneMaps, might_match_blocks

__all__ = ["ColumnValues", "SampledRows", "References", "SimulatedBlocks", "simulated_blocks", "reads",
           "tree_blocks", "query_folds", "OutOfSampleGain", "HeldOut",
           "held_out_lower_bound"]


# ---------------------------------------------------------------------------
# Inputs


@dataclass(frozen=True, eq=False)
class ColumnValues:
    """One column of the sampled rows: `codes[r]` indexes `values` (ascending distinct
    non-NULL values, Python objects as the catalog's statistics hold them), -1 is NULL."""

    codes: np.ndarray
    values: np.ndarray

    @staticmethod
    def of(raw: Sequence) -> "ColumnValues":
        raw = list(raw)
        present = np.array([v is not None for v in raw], dtype=bool)
        codes = np.full(len(raw), -1, dtype=np.int64)
        values = np.empty(0, dtype=object)
        if present.any():
            kept = np.empty(int(present.sum()), dtype=object)
            kept[:] = [v for v in raw if v is not None]
            values, inverse = np.unique(kept, return_inverse=True)
            codes[present] = inverse
        return ColumnValues(codes, values)

    @staticmethod
    def of_encoded(indices: np.ndarray, distinct: Sequence) -> "ColumnValues":
        """`of` for rows given as indices into `distinct` values (-1: NULL), a dictionary
        encoding: the rows' values are never made Python objects one by one."""
        within = ColumnValues.of(distinct)
        indices = np.asarray(indices, dtype=np.int64)
        codes = np.full(len(indices), -1, dtype=np.int64)
        present = indices >= 0
        codes[present] = within.codes[indices[present]]
        return ColumnValues(codes, within.values)


@dataclass(frozen=True, eq=False)
class SampledRows:
    """A row sample of one partition.

    vector[r]: row r's index into the VectorCounts built from the sample (its
    cut bits); block[r]: the index of its block in the active layout; rank[r]:
    its place in the writer's order inside a leaf; columns: the filtered columns."""

    vector: np.ndarray
    block: np.ndarray
    rank: np.ndarray
    columns: Mapping[str, ColumnValues]

    def __post_init__(self) -> None:
        n = self.vector.size
        if self.block.size != n or self.rank.size != n or any(c.codes.size != n for c in self.columns.values()):
            raise ValueError("every array of SampledRows needs one entry per sampled row")

    @property
    def n(self) -> int:
        return int(self.vector.size)

    def rows_of(self, members: np.ndarray) -> np.ndarray:
        """The sampled rows whose vector is one of `members`, ascending."""
        members = np.asarray(members, dtype=np.int64)
        wanted = np.zeros(max(int(self.vector.max(initial=-1)), int(members.max(initial=-1))) + 1, dtype=bool)
        wanted[members] = True  # a mask, not np.isin's sort: asked for every subtree and fold
        return np.flatnonzero(wanted[self.vector])


def writer_rank(columns: Sequence[ColumnValues], n: int) -> np.ndarray:
    """Each of n rows' place when sorted by `columns` (first column first, NULLs first, ties by row)."""
    if not columns:
        return np.arange(n, dtype=np.int64)
    order = np.lexsort([np.arange(n)] + [c.codes for c in reversed(columns)])
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    return rank


@dataclass(frozen=True, eq=False)
class References:
    """References to the table, as the router sees them (one row each).

    query[r]: the index of reference r's query (0..queries-1); implies/disjoint:
    (R, m) against the cuts; filters[r]: its table filter (what zone maps test);
    satisfiable[r]: False when its predicate is never TRUE (it reads nothing)."""

    query: np.ndarray
    implies: np.ndarray
    disjoint: np.ndarray
    filters: tuple[Predicate, ...]
    satisfiable: np.ndarray
    queries: int

    def __post_init__(self) -> None:
        r = self.query.size
        if self.implies.shape != self.disjoint.shape or self.implies.shape[0] != r or len(self.filters) != r \
                or self.satisfiable.size != r:
            raise ValueError("every array of References needs one row per reference")
        if r and not 0 <= self.query.min() <= self.query.max() < self.queries:
            raise ValueError(f"query indices must be in 0..{self.queries - 1}")

    @property
    def n(self) -> int:
        return int(self.query.size)

    def subset(self, keep: np.ndarray) -> "References":
        picks = np.flatnonzero(keep)
        return References(self.query[picks], self.implies[picks], self.disjoint[picks],
                          tuple(self.filters[i] for i in picks), self.satisfiable[picks], self.queries)

    def with_cuts(self, cuts: np.ndarray) -> "References":
        """The same references knowing only the cuts `cuts` (indices): a block's bits of any
        other cut prove nothing for them."""
        known = np.zeros(self.implies.shape[1], dtype=bool)
        known[np.asarray(cuts, dtype=np.int64)] = True
        return References(self.query, self.implies & known, self.disjoint & known, self.filters,
                          self.satisfiable, self.queries)

    def per_query(self, per_reference: np.ndarray) -> np.ndarray:
        """Sum a value of each reference into its query's (length `queries`)."""
        return np.bincount(self.query, weights=per_reference, minlength=self.queries)


# ---------------------------------------------------------------------------
# Simulated blocks and the router's rules on them


@dataclass(frozen=True, eq=False)
class SimulatedBlocks:
    """Blocks formed from sampled rows: sampled rows, cut bits and zone maps per block."""

    rows: np.ndarray  # (k,) sampled rows
    union: np.ndarray  # (k, m) bool: some row has bit j
    every: np.ndarray  # (k, m) bool: every row has bit j
    zone_maps: ZoneMaps

    @property
    def n(self) -> int:
        return int(self.rows.size)


def simulated_blocks(sample: SampledRows, bits: np.ndarray, rows: np.ndarray, block: np.ndarray,
                     n_blocks: int) -> SimulatedBlocks:
    """The blocks 0..n_blocks-1 holding sampled rows `rows` (indices into `sample`), row
    rows[i] in block block[i]; `bits` (n_vectors, m) are the sample's vectors' cut bits.
    A block without rows has none of anything (the router never reads it)."""
    m = bits.shape[1]
    order = np.argsort(block, kind="stable")
    rows, block = rows[order], block[order]
    counts = np.bincount(block, minlength=n_blocks).astype(np.int64)
    present = np.flatnonzero(counts)
    starts = np.searchsorted(block, present)
    union = np.zeros((n_blocks, m), dtype=bool)
    every = np.zeros((n_blocks, m), dtype=bool)
    if present.size and m:
        # a block's bits are its distinct vectors': reduce over (block, vector) pairs, far fewer than rows
        n_vectors = bits.shape[0]
        pairs = np.unique(block * n_vectors + sample.vector[rows])
        pair_bits = bits[pairs % n_vectors]
        pair_starts = np.searchsorted(pairs // n_vectors, present)
        union[present] = np.logical_or.reduceat(pair_bits, pair_starts, axis=0)
        every[present] = np.logical_and.reduceat(pair_bits, pair_starts, axis=0)
    columns = {name: _column_arrays(col.codes[rows], col.values, block, present, starts, n_blocks)
               for name, col in sample.columns.items()}
    zone_maps = ZoneMaps(_frozen(counts), MappingProxyType(columns))
    return SimulatedBlocks(counts, union, every, zone_maps)


def _column_arrays(codes: np.ndarray, values: np.ndarray, block: np.ndarray, present: np.ndarray,
                   starts: np.ndarray, n_blocks: int) -> ColumnArrays:
    """min/max and NULL count per block of one column (rows sorted by block)."""
    has_values = np.zeros(n_blocks, dtype=bool)
    lo = hi = np.empty(0, dtype=object)
    owner = np.empty(0, dtype=np.int64)
    nulls = np.bincount(block[codes < 0], minlength=n_blocks).astype(np.int64)
    if present.size:
        big = np.iinfo(np.int64).max
        low = np.minimum.reduceat(np.where(codes >= 0, codes, big), starts)
        high = np.maximum.reduceat(codes, starts)  # -1 only when every row is NULL
        with_values = high >= 0
        owner = present[with_values]
        has_values[owner] = True
        lo, hi = values[low[with_values]], values[high[with_values]]
    return ColumnArrays(_frozen(np.asarray(lo, dtype=object)), _frozen(np.asarray(hi, dtype=object)),
                        _frozen(owner), _frozen(nulls), _frozen(has_values), _frozen(np.ones(n_blocks, dtype=bool)))


def _frozen(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


def reads(refs: References, blocks: SimulatedBlocks) -> np.ndarray:
    """(R, k) bool: does reference r read block b (the router's rules, see the module docstring)?"""
    if not refs.n or not blocks.n:
        return np.zeros((refs.n, blocks.n), dtype=bool)
    # A cut proves a skip when the query implies it and no row has it, or is disjoint and every row has it.
    skipped = (refs.implies.astype(np.float64) @ (~blocks.union).T.astype(np.float64)
               + refs.disjoint.astype(np.float64) @ blocks.every.T.astype(np.float64)) > 0
    out = np.zeros((refs.n, blocks.n), dtype=bool)
    verdicts: dict = {}  # one zone-map pass per distinct filter
    for r in np.flatnonzero(refs.satisfiable):
        f = refs.filters[r]
        if f not in verdicts:
            verdicts[f] = might_match_blocks(f, blocks.zone_maps)
        out[r] = verdicts[f] & ~skipped[r]
    return out


def tree_blocks(tree: Node, sample: SampledRows, rows: np.ndarray, block_rows: int,
                scale: float) -> tuple[np.ndarray, int]:
    """(block of each of `rows`, blocks) when a tree whose leaves hold vector indices of
    the sample is written: each leaf's rows in the writer's order, cut into
    `leaf_blocks` equal ranges."""
    by_id = sorted(leaves(tree), key=lambda leaf: leaf.leaf_id)
    leaf_of_vector = np.full(int(sample.vector.max(initial=-1)) + 1, -1, dtype=np.int64)
    for leaf in by_id:
        leaf_of_vector[leaf.vector_indices] = leaf.leaf_id
    leaf = leaf_of_vector[sample.vector[rows]]
    if (leaf < 0).any():
        raise ValueError("a sampled row's vector is in no leaf of the tree")
    plan = leaf_blocks(tree, block_rows, scale)
    order = np.lexsort((sample.rank[rows], leaf))
    leaf_sorted = leaf[order]
    leaf_rows = np.bincount(leaf, minlength=len(by_id))
    leaf_start = np.concatenate(([0], np.cumsum(leaf_rows)[:-1]))
    position = np.arange(rows.size) - leaf_start[leaf_sorted]
    piece = position * plan.n_blocks[leaf_sorted] // np.maximum(1, leaf_rows[leaf_sorted])
    block = np.empty(rows.size, dtype=np.int64)
    block[order] = plan.first_block[leaf_sorted] + piece
    return block, plan.total


# ---------------------------------------------------------------------------
# Out-of-sample B per subtree


def query_folds(sql: Sequence[str], folds: int = 2) -> np.ndarray:
    """Per query, its fold (0..folds-1) by a hash of its text: repeats of one query stay
    together, so no query is judged by a tree grown on its own copy. A cryptographic hash, not
    a CRC: a CRC's bits are affine in the text's, so queries of one template differing in a
    literal would be split by a parity of the literal's bits, not at random."""
    if folds < 2:
        raise ValueError(f"out of sample needs at least 2 folds, not {folds}")
    return np.array([int.from_bytes(hashlib.blake2b(s.strip().encode(), digest_size=8).digest(), "big") % folds
                     for s in sql], dtype=np.int64)


@dataclass(frozen=True, eq=False)
class OutOfSampleGain:
    """Per subtree of the old tree, blocks each query of a log reads less on T' than on T.

    T' for the queries of fold f is grown on the other folds' references with
    the cuts `allowed[f]` (chosen from their queries), over the sampled
    records of the subtree; T is the real blocks (the sample's `block`: per
    sampled row its block index 0..k-1; `block_leaf`: per block its old leaf)."""

    sample: SampledRows
    vc: VectorCounts
    refs: References
    fold: np.ndarray  # per query of the log, its fold 0..len(allowed)-1
    allowed: tuple[np.ndarray, ...]  # per fold, the cut indices the trees judged on it may use
    block_leaf: np.ndarray  # per old block index, its leaf id in the old tree
    block_rows: int
    scale: float
    min_leaf_rows: int
    # (R, k): the old blocks each reference reads, the router's verdicts on the real blocks;
    # None: judged on blocks simulated from the sample, as T' is
    router_reads: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.fold.size != self.refs.queries:
            raise ValueError("fold must give every query of the log a fold")
        if self.fold.size and not 0 <= self.fold.min() <= self.fold.max() < len(self.allowed):
            raise ValueError(f"folds must be in 0..{len(self.allowed) - 1}: one cut list per fold")
        if self.router_reads is not None and self.router_reads.shape != (self.refs.n, self.block_leaf.size):
            raise ValueError("router_reads needs one row per reference and one column per old block")
        object.__setattr__(self, "_simulated", None)

    @property
    def folds(self) -> int:
        return len(self.allowed)

    @property
    def ref_fold(self) -> np.ndarray:
        return self.fold[self.refs.query]

    @property
    def judgeable(self) -> bool:
        """Two folds or more hold references to the table (else nothing can be judged out of sample)."""
        return np.unique(self.ref_fold).size >= 2

    def old_reads(self, simulated: bool = False) -> np.ndarray:
        """(R, k): which of the old blocks each reference reads: the router's verdicts, or
        (`simulated`, or without them) the router's rules on the blocks simulated from the sample."""
        if self.router_reads is not None and not simulated:
            return self.router_reads
        if self._simulated is None:
            n_blocks = self.block_leaf.size
            blocks = simulated_blocks(self.sample, self.vc.vectors, np.arange(self.sample.n), self.sample.block,
                                      n_blocks)
            object.__setattr__(self, "_simulated", reads(self.refs, blocks))
        return self._simulated

    def reads_now(self, leaf_ids: Sequence[int], simulated: bool = False) -> np.ndarray:
        """Per query, the old blocks of these leaves it reads (A(T) per query)."""
        under = np.isin(self.block_leaf, np.asarray(leaf_ids, dtype=np.int64))
        return self.refs.per_query(self.old_reads(simulated)[:, under].sum(axis=1).astype(np.float64))

    def per_query(self, members: np.ndarray, leaf_ids: Sequence[int]) -> np.ndarray:
        """Per query of the log, reads on T minus reads on T' (T: the old leaves
        `leaf_ids`, holding the vc vectors `members`)."""
        if not self.judgeable:
            raise ValueError("the log needs references to the table in two folds or more")
        after = np.zeros(self.refs.n, dtype=np.float64)
        for f in np.unique(self.ref_fold):
            judged = self.ref_fold == f
            after[judged] = self.new_reads(members, ~judged, self.allowed[f], judged)
        return self.reads_now(leaf_ids) - self.refs.per_query(after)

    def in_sample(self, members: np.ndarray, leaf_ids: Sequence[int], allowed: np.ndarray) -> float:
        """Blocks per query of the log read less on a T' grown on every reference of the log
        (cuts `allowed`) and judged on the same references: what re-laying out for the log saves
        on the log itself (in sample, as a full re-layout trained on it measures its own gain)."""
        return float(self.in_sample_per_query(members, leaf_ids, allowed).sum()) / self.refs.queries

    def in_sample_per_query(self, members: np.ndarray, leaf_ids: Sequence[int], allowed: np.ndarray) -> np.ndarray:
        """Per query of the log, reads on T minus reads on a T' grown on every reference of the
        log with the cuts `allowed` (the tree a reorganization for this log writes)."""
        every = np.ones(self.refs.n, dtype=bool)
        after = self.new_reads(members, every, allowed, every)
        return self.reads_now(leaf_ids) - self.refs.per_query(after)

    def fold_in_sample_per_query(self, members: np.ndarray, leaf_ids: Sequence[int],
                                 own: Sequence[np.ndarray]) -> np.ndarray:
        """Per query of the log, reads on T minus reads on a T' grown on the query's own fold
        alone with that fold's cuts `own[f]` and judged on it: in sample on each fold apart,
        so a set chosen on some folds is judged on others by trees that never saw them."""
        after = np.zeros(self.refs.n, dtype=np.float64)
        for f in np.unique(self.ref_fold):
            judged = self.ref_fold == f
            after[judged] = self.new_reads(members, judged, own[f], judged)
        return self.reads_now(leaf_ids) - self.refs.per_query(after)

    def new_reads(self, members: np.ndarray, grown_on: np.ndarray, allowed: np.ndarray,
                  judged: np.ndarray) -> np.ndarray:
        """Per reference `judged`, the blocks it reads of a T' over the vc vectors `members`,
        grown on the references `grown_on` with the cuts `allowed`, written as the writer would."""
        rows = self.sample.rows_of(members)
        subset = VectorCounts(self.vc.vectors[members], self.vc.counts[members], self.vc.weights)
        workload = Workload(self.refs.implies, self.refs.disjoint, grown_on.astype(np.float64))
        # grown knowing only T''s own cuts, as it is judged and as the reorganization grows it
        tree = greedy_tree(subset, workload, self.min_leaf_rows, allowed_cuts=allowed, known_cuts=allowed,
                           objective="router")
        block, n_blocks = tree_blocks(reindexed_tree(tree, members), self.sample, rows, self.block_rows, self.scale)
        new = simulated_blocks(self.sample, self.vc.vectors, rows, block, n_blocks)
        # judged by T''s own cuts only: the simulated blocks carry bits of every cut of the window,
        # and bits of the judged queries' own cuts, which T''s writer never records, would skip blocks
        return reads(self.refs.subset(judged).with_cuts(allowed), new).sum(axis=1)


@dataclass(frozen=True, eq=False)
class HeldOut:
    """A set of subtrees chosen on the window's queries outside one fold, as the fold judges it.

    gains: per query of the fold, the blocks the set saves it; floor: (k, n) the gains of
    the set's k subtrees on the n queries of the layout's training log (None: no noise floor);
    cost: the set's blocks, C."""

    gains: np.ndarray
    floor: np.ndarray | None
    cost: float


def held_out_lower_bound(folds: Sequence[HeldOut], ratio: float, resamples: int = 1000, level: float = 0.05,
                         seed: int = 0, clip_floor: bool = True) -> float:
    """The `level` quantile, over resamples, of the mean over `folds` of ratio x net - cost.

    net is the resample's mean gain of the fold's queries (with replacement, each fold apart;
    seeded: the same logs give the same bound) less, per subtree of the set, max(0, mean) of
    its floor on an independent resample of the training log's queries (the mean whatever its
    sign without `clip_floor`): the floor is measured on a sample too, and a bound that took it
    as exact would fire on noise."""
    rng = np.random.default_rng(seed)
    total = np.zeros(resamples)
    for fold in folds:
        gains = np.asarray(fold.gains, dtype=np.float64)
        net = np.zeros(resamples)
        if gains.size:
            net = gains[rng.integers(0, gains.size, size=(resamples, gains.size))].mean(axis=1)
        if fold.floor is not None and np.asarray(fold.floor).size:
            floor = np.atleast_2d(np.asarray(fold.floor, dtype=np.float64))
            picks = rng.integers(0, floor.shape[1], size=(resamples, floor.shape[1]))
            means = floor[:, picks].mean(axis=2)
            net = net - (np.maximum(0.0, means) if clip_floor else means).sum(axis=0)
        total += ratio * net - fold.cost
    return float(np.quantile(total / max(1, len(folds)), level))
