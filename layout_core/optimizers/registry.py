"""The registered optimizers by name, and the checks and the plan that need them."""

from __future__ import annotations

import logging
from typing import Any, Mapping, Sequence

from layout_core.base.params import ParamError, column_of
from layout_core.base.schema import TableSchema
from layout_core.optimizers.base import (
    CandidateCut, Optimizer, PlanError, PlanInputs, PlanWorkload, VectorSample,
)
from layout_core.optimizers.fineblock import FineBlock
from layout_core.optimizers.hilbert import Hilbert
from layout_core.optimizers.mto import Mto
from layout_core.optimizers.pando import Pando
from layout_core.optimizers.plan import LayoutPlan
from layout_core.optimizers.qdtree import QdTree
from layout_core.optimizers.sortkey import SortKey
from layout_core.optimizers.tuned import Tuned
from layout_core.optimizers.zorder import ZOrder

log = logging.getLogger("layout.plan")


def build_registry(*classes: type[Optimizer]) -> dict[str, Optimizer]:
    registry: dict[str, Optimizer] = {}
    for cls in classes:
        if cls.name in registry:
            raise ImportError(f"two optimizers are registered as {cls.name!r}: "
                              f"{type(registry[cls.name]).__name__} and {cls.__name__}")
        registry[cls.name] = cls()
    return registry


REGISTRY = build_registry(FineBlock, SortKey, QdTree, Mto, Pando, ZOrder, Hilbert, Tuned)


def optimizer_names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def get_optimizer(name: str) -> Optimizer:
    try:
        return REGISTRY[name]
    except KeyError:
        raise PlanError(f"unknown optimizer {name!r}; registered: {', '.join(REGISTRY)}") from None


def optimizer_settings(table, optimizer: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The optimizer's settings resolved (unknown names, bad types and block_rows refused),
    with every setting that names columns (sort_column, curve_columns, ...) checked
    against the table."""
    try:
        chosen = get_optimizer(optimizer)
        resolved = chosen.resolve(settings)
    except PlanError as e:
        raise ParamError(str(e)) from None
    for name, value in resolved.items():
        if name.endswith("_column") and value:
            column_of(table, value, f"setting {name}")
        elif name.endswith("_columns"):
            for column in value:
                column_of(table, column, f"setting {name}")
    return resolved


def plan_layout(optimizer: str | Optimizer, table: TableSchema, vectors: VectorSample,
                cuts: Sequence[CandidateCut], workload: PlanWorkload | None = None,
                settings: Mapping[str, Any] | None = None) -> LayoutPlan:
    """The layout plan of one table: resolve the optimizer and its settings, check
    the inputs agree, fit."""
    chosen = get_optimizer(optimizer) if isinstance(optimizer, str) else optimizer
    resolved = chosen.resolve(settings)
    workload = workload or PlanWorkload()
    if workload.queries and any(len(row) != len(cuts) for row in workload.implies):
        raise PlanError(f"the workload summary has {len(workload.implies[0])} cuts, the plan {len(cuts)}")
    if any(len(k) != len(cuts) for k in vectors.keys):
        raise PlanError(f"the vectors have another number of bits than the {len(cuts)} cuts: featurize again")
    if vectors.sampled_rows < vectors.rows and not chosen.samples:
        raise PlanError(f"optimizer {chosen.name} cannot plan on a sample: reduce without sampling")
    plan = chosen.fit(PlanInputs(table, vectors, tuple(cuts), workload), resolved)
    log.info("plan %s (%s): %d rows, %d cuts, %d blocks (expected rows per block %s to %s)",
             table.name, chosen.name, plan.rows, plan.n_cuts, plan.n_blocks,
             round(min(plan.expected_block_rows, default=0)), round(max(plan.expected_block_rows, default=0)))
    return plan
