"""A table's layout plan: which block every row goes to, and what the router keeps.

`plan_layout` is the one function every path calls (the DAG's optimize step,
`layout bench tpch`, `layout bench sun`, `make demo`). The plan is plain data,
written as JSON with a format version and validated when read back; Spark
applies it (`spark.assign.with_plan_blocks`), the catalog stores it.

Block rules (`assignment`), numbered from block 0 of the version:

- `SortBlocks`: rows ranked by `columns` then a fixed tie order, cut every `block_rows`;
- `ClusterBlocks`: the same inside each cluster (a date column truncated to a
  day, month or year), clusters in order, no block holding two clusters;
- `CurveBlocks`: the same over a space-filling curve key of `columns`;
- `TreeBlocks`: every row routed through the qd-tree by its cut bits (bit 1 goes
  left), leaf l cut into `leaf_n_blocks[l]` ranges of `sort_columns`;
- `TupleBlocks`: Pando: every row routed through k trees; its k leaf ids (its
  cell) name its blocks, ranges of `sort_columns` when a cell has several;
- `PieceBlocks`: Sun's blocking map, (vector, block, first row, end row) pieces.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from layout_core.algorithms.qdtree import tree_from_json
from layout_core.base.schema import TableSchema
from layout_core.optimizers.base import (
    Optimizer, PlanError, PlanInputs, schema_fingerprint,
)

log = logging.getLogger("layout.plan")

PLAN_FORMAT = 1


@dataclass(frozen=True)
class SortBlocks:
    columns: tuple[str, ...]
    block_rows: int


CLUSTER_GRANULARITIES = ("day", "month", "year")


@dataclass(frozen=True)
class ClusterBlocks:
    """Rows grouped into clusters by `cluster_column` truncated to `granularity`
    (day, month or year; NULL is a cluster of its own, the first), clusters in
    ascending order. A cluster's rows, ranked by `columns` then the fixed tie
    order, are cut every `block_rows` rows, so no block holds rows of two
    clusters (a cluster's last block may be small); blocks are numbered densely,
    cluster after cluster, from 0.

    The plan does not know the clusters (its vector sample has no cut bits to
    tell them apart), so it reserves ceil(rows / block_rows) + max_clusters - 1
    block ids, enough for any max_clusters clusters; ids past the ones the
    clusters fill stay empty. Clusters after the first max_clusters - 1 share
    the last cluster's blocks (their blocks may span several of them), so the
    ids never exceed the reserved ones."""

    cluster_column: str
    granularity: str
    columns: tuple[str, ...]
    block_rows: int
    max_clusters: int

    def __post_init__(self) -> None:
        if self.granularity not in CLUSTER_GRANULARITIES:
            raise PlanError(f"cluster granularity is one of {', '.join(CLUSTER_GRANULARITIES)}, "
                            f"not {self.granularity!r}")
        if self.max_clusters < 1 or self.block_rows < 1:
            raise PlanError(f"a cluster rule needs max_clusters and block_rows >= 1, not "
                            f"{self.max_clusters} and {self.block_rows}")

    def n_blocks(self, rows: int) -> int:
        """The block ids to reserve for `rows` rows in at most max_clusters clusters:
        sum(ceil(c_i / b)) <= ceil(sum(c_i) / b) + (number of clusters - 1)."""
        return math.ceil(rows / self.block_rows) + self.max_clusters - 1 if rows else 0


@dataclass(frozen=True)
class CurveBlocks:
    curve: str  # zorder | hilbert
    columns: tuple[str, ...]
    block_rows: int


@dataclass(frozen=True)
class TreeBlocks:
    """`tree` is `optimize.qdtree.tree_to_json`'s nested lists; leaf l holds blocks
    leaf_first_block[l] .. leaf_first_block[l] + leaf_n_blocks[l] - 1."""

    tree: tuple
    leaf_first_block: tuple[int, ...]
    leaf_n_blocks: tuple[int, ...]
    sort_columns: tuple[str, ...]

    def root(self):
        return tree_from_json(as_lists(self.tree))

    def leaf_of_block(self, block: int) -> int:
        return int(np.searchsorted(np.array(self.leaf_first_block), block, side="right")) - 1


@dataclass(frozen=True)
class TupleBlocks:
    """Pando (§6): `trees` are the k untruncated trees (qdtree JSON, as
    `TreeBlocks.tree`); a row's leaf in each is its k-tuple. Cell c is the
    k-tuple `cells[c]`; its rows go to blocks cell_first_block[c] ..
    cell_first_block[c] + cell_n_blocks[c] - 1, ranges of `sort_columns`
    (several small cells share one block). A row whose k-tuple is no cell (the
    plan saw a sample) goes to the block `place_unseen_cells` picks by the
    merge cost, from `leaf_reads` (per tree, per leaf: the training queries
    the leaf is admitted by, hex of their packed bits) and `query_weights`;
    without them (plans of earlier versions), to fallback_block[its leaf of
    tree 0]. `routing_trees` are the truncated trees (§6.2) the catalog keeps
    for the router; the untruncated ones and the cell map are what inserts
    need (§6.4). `query_implies` / `query_disjoint` (per training query, hex
    of its packed bits over the cuts) let the Spark side merge the cells
    again on every row of the partition (`optimizers.pando.exact_plan`)."""

    trees: tuple
    cells: tuple[tuple[int, ...], ...]
    cell_first_block: tuple[int, ...]
    cell_n_blocks: tuple[int, ...]
    fallback_block: tuple[int, ...]
    sort_columns: tuple[str, ...]
    routing_trees: tuple
    leaf_reads: tuple[tuple[str, ...], ...] = ()
    query_weights: tuple[float, ...] = ()
    query_implies: tuple[str, ...] = ()
    query_disjoint: tuple[str, ...] = ()

    @property
    def k(self) -> int:
        return len(self.trees)

    def roots(self) -> tuple:
        return tuple(tree_from_json(as_lists(t)) for t in self.trees)

    def routing_roots(self) -> tuple:
        return tuple(tree_from_json(as_lists(t)) for t in self.routing_trees)

    def admissions(self) -> tuple[np.ndarray, ...]:
        """Per tree, (Q, leaves) bool: `leaf_reads` unpacked (`algorithms.pando.admitted`)."""
        q = len(self.query_weights)
        return tuple(np.stack([unpacked_bits(h, q) for h in tree], axis=1) for tree in self.leaf_reads)

    def query_cuts(self, n_cuts: int) -> tuple[np.ndarray, np.ndarray] | None:
        """(implies, disjoint), each (Q, n_cuts) bool, or None for a plan without them."""
        if not self.query_weights or len(self.query_implies) != len(self.query_weights):
            return None
        return tuple(np.stack([unpacked_bits(h, n_cuts) for h in rows]).reshape(-1, n_cuts)
                     for rows in (self.query_implies, self.query_disjoint))


def packed_bits(bits) -> str:
    """A bool vector as the hex of its packed bits (`unpacked_bits` reads it)."""
    return np.packbits(np.asarray(bits, dtype=bool)).tobytes().hex()


def unpacked_bits(text: str, n: int) -> np.ndarray:
    return np.unpackbits(np.frombuffer(bytes.fromhex(text), np.uint8), count=n).astype(bool)


@dataclass(frozen=True)
class PieceBlocks:
    pieces: tuple[tuple[str, int, int, int], ...]  # (vector key, block, first row, end row)


ASSIGNMENTS = {"sort": SortBlocks, "clusters": ClusterBlocks, "curve": CurveBlocks, "tree": TreeBlocks,
               "tuples": TupleBlocks, "pieces": PieceBlocks}


def as_lists(value):
    """Nested tuples as nested lists, inside mappings too: the JSON form of plans and settings."""
    if isinstance(value, dict):
        return {k: as_lists(v) for k, v in value.items()}
    return [as_lists(v) for v in value] if isinstance(value, (list, tuple)) else value


def as_tuples(value):
    """Nested lists (JSON) as nested tuples: plans are immutable."""
    return tuple(as_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


@dataclass(frozen=True)
class LayoutPlan:
    """One table's layout: the result of `plan_layout`.

    `cuts` are the featurized cuts (bit j of a row's vector = cut j), all of
    which the router keeps per block unless the optimizer keeps zone maps only
    (then there are none). `expected_block_rows[b]` is block b's estimated size.
    `choices` records what the optimizer decided on its own and the figures
    it decided by (e.g. Pando's k with trees=auto), for logs and reports."""

    optimizer: str
    settings: Mapping[str, Any]
    table: str
    schema_fingerprint: str
    columns: tuple[str, ...]  # data columns: the fixed tie order of every rule
    cuts: tuple[str, ...]  # SQL of each cut, for logs and reports
    assignment: SortBlocks | ClusterBlocks | CurveBlocks | TreeBlocks | TupleBlocks | PieceBlocks
    expected_block_rows: tuple[float, ...]
    rows: int
    sample_scale: float = 1.0
    choices: Mapping[str, Any] = field(default_factory=dict)
    format: int = field(default=PLAN_FORMAT)

    @property
    def n_blocks(self) -> int:
        return len(self.expected_block_rows)

    @property
    def n_cuts(self) -> int:
        return len(self.cuts)

    def routing_trees(self) -> tuple:
        """The trees the catalog keeps for the router (tree t = entry t of every
        block's lineage): the qd-tree, Pando's truncated trees, or none."""
        if isinstance(self.assignment, TreeBlocks):
            return (self.assignment.root(),)
        if isinstance(self.assignment, TupleBlocks):
            return self.assignment.routing_roots()
        return ()

    def check_table(self, table: TableSchema) -> None:
        """Refuse a plan made for another table or an older schema of this one."""
        if table.name != self.table or schema_fingerprint(table) != self.schema_fingerprint:
            raise PlanError(f"the plan was made for {self.table} with another schema "
                            f"({self.schema_fingerprint}); the table {table.name} has changed since: "
                            f"run featurize and optimize again")

    def to_json(self) -> dict:
        kind = next(k for k, cls in ASSIGNMENTS.items() if isinstance(self.assignment, cls))
        assignment = {"kind": kind, **{k: as_lists(v) for k, v in vars(self.assignment).items()}}
        return {"format": self.format, "optimizer": self.optimizer, "settings": as_lists(dict(self.settings)),
                "table": self.table, "schema_fingerprint": self.schema_fingerprint,
                "columns": list(self.columns), "cuts": list(self.cuts), "assignment": assignment,
                "expected_block_rows": [round(r, 1) for r in self.expected_block_rows],
                "rows": self.rows, "sample_scale": self.sample_scale, "choices": as_lists(dict(self.choices))}

    @classmethod
    def from_json(cls, data: Mapping, source: str = "plan") -> "LayoutPlan":
        """The plan `to_json` wrote; a missing field or another format is a clear error."""
        if data.get("format") != PLAN_FORMAT:
            raise PlanError(f"{source} has plan format {data.get('format')!r}, this version reads "
                            f"{PLAN_FORMAT}: run the optimize step again")
        try:
            raw = dict(data["assignment"])
            kind = raw.pop("kind")
            if kind not in ASSIGNMENTS:
                raise PlanError(f"{source}: unknown block rule {kind!r}")
            assignment = ASSIGNMENTS[kind](**{k: as_tuples(v) for k, v in raw.items()})
            settings = {k: as_tuples(v) for k, v in data["settings"].items()}
            return cls(data["optimizer"], settings, data["table"], data["schema_fingerprint"],
                       tuple(data["columns"]), tuple(data["cuts"]), assignment,
                       tuple(float(r) for r in data["expected_block_rows"]), int(data["rows"]),
                       float(data["sample_scale"]), dict(data.get("choices", {})))
        except (KeyError, TypeError) as e:
            raise PlanError(f"{source} is malformed ({type(e).__name__}: {e}): run the optimize step again") \
                from None


def even_sizes(rows: float, block_rows: int) -> tuple[float, ...]:
    """ceil(rows / block_rows) blocks of block_rows rows, the last one the remainder."""
    n = math.ceil(rows / block_rows) if rows else 0
    return tuple(float(min(block_rows, rows - b * block_rows)) for b in range(n))


def new_plan(optimizer: Optimizer, inputs: PlanInputs, settings: Mapping[str, Any], assignment,
             expected_block_rows: Sequence[float], choices: Mapping[str, Any] | None = None) -> LayoutPlan:
    """The fields every optimizer fills the same way."""
    return LayoutPlan(optimizer.name, dict(settings), inputs.table.name, schema_fingerprint(inputs.table),
                      inputs.table.column_names, tuple(c.sql for c in inputs.cuts), assignment,
                      tuple(float(r) for r in expected_block_rows), inputs.vectors.rows,
                      round(inputs.vectors.scale, 6), dict(choices or {}))
