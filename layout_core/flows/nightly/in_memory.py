"""The nightly steps' work for one table without their files: featurize, reduce,
plan, assign blocks, all in one Spark session and in memory.

The benchmarks lay tables out through this, and it calls exactly the
functions the steps call (`optimizers.plan_layout`, `spark.featurize`,
`spark.cells`, `spark.assign`), so their figures describe what the nightly
DAG produces (tests/spark/test_one_plan.py checks the block of every row is the same).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping

from layout_core.base.schema import TableSchema
from layout_core.optimizers import CandidateCut, LayoutPlan, TableQueries, get_optimizer, plan_layout
from layout_core.spark.assign import with_plan_blocks
from layout_core.spark.cells import with_exact_cells
from layout_core.spark.featurize import usable_cuts, vector_sample, with_vectors


@dataclass
class TableLayout:
    plan: LayoutPlan
    cuts: list[CandidateCut]
    blocked: Any  # DataFrame: the table's columns, cut flags `_cut<j>`, `_vec` and the 0-based `_block`
    seconds: dict[str, float] = field(default_factory=dict)  # featurize, reduce, optimize, assign

    def release(self) -> None:
        self.blocked.unpersist()


class Featurized:
    """The flagged rows (cut flags and vectors, cached) and workload summary of one table,
    by its cuts, shared by the layouts of a benchmark that choose the same cuts (mto,
    pando-K and mto(join_key) do): flagging an SF 1 inventory's 11.7M rows with 60 cuts
    took about 290 s per layout. `release` once the table's layouts are done."""

    def __init__(self) -> None:
        self._by_cuts: dict[tuple, tuple[Any, Any]] = {}

    def get(self, table: TableSchema, rows, frames: Mapping[str, Any], cuts: list[CandidateCut],
            queries: TableQueries):
        key = tuple(c.predicate for c in cuts)
        if key not in self._by_cuts:
            self._by_cuts[key] = _featurize(table, rows, frames, cuts, queries)
        return self._by_cuts[key]

    def release(self) -> None:
        for flagged, _ in self._by_cuts.values():
            flagged.unpersist()
        self._by_cuts.clear()


def _featurize(table: TableSchema, rows, frames: Mapping[str, Any], cuts: list[CandidateCut], queries: TableQueries):
    flagged = with_vectors(rows.select(*table.column_names), cuts, frames).cache()
    flagged.count()
    return flagged, queries.summary(cuts, table)


def lay_out_in_memory(table: TableSchema, rows, frames: Mapping[str, Any], optimizer: str,
                      settings: Mapping[str, Any], queries: TableQueries,
                      featurized: Featurized | None = None) -> TableLayout:
    """`rows` (a DataFrame of the table) laid out by `optimizer`; `frames` holds the
    data of the tables join-induced cuts start from. The result is cached. With
    `featurized`, rows flagged for the same cuts before are used again (their
    featurize seconds are then only the choice of cuts)."""

    seconds = {}
    started = time.monotonic()
    chosen = get_optimizer(optimizer)
    resolved = chosen.resolve(settings)
    cuts = usable_cuts(table.name, chosen.choose_cuts(queries, resolved), frames)
    shared = featurized is not None
    featurized = featurized if shared else Featurized()
    flagged, workload = featurized.get(table, rows, frames, cuts, queries)
    seconds["featurize"] = time.monotonic() - started

    started = time.monotonic()
    sample = vector_sample(flagged, table.column_names, int(resolved.get("sample_rows", 0)))
    seconds["reduce"] = time.monotonic() - started

    started = time.monotonic()
    plan = plan_layout(chosen, table, sample, cuts, workload, resolved)
    plan = with_exact_cells(flagged, plan, table)  # Pando's cells merged again on every row
    seconds["optimize"] = time.monotonic() - started

    started = time.monotonic()
    blocked = with_plan_blocks(flagged, plan).cache()
    blocked.count()
    if not shared:
        featurized.release()
    seconds["assign"] = time.monotonic() - started
    return TableLayout(plan, cuts, blocked, {k: round(v, 3) for k, v in seconds.items()})
