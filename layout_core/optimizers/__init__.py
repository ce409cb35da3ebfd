"""The layout optimizers, by name. Adding one is a new file here and one line below.

    from layout_core.optimizers import get_optimizer, optimizer_names
    get_optimizer("mto").describe()
"""

from __future__ import annotations

from .base import CandidateCut, Optimizer, PlanError, Setting, TableQueries, VectorSample, PlanWorkload
from .fineblock import FineBlock
from .hilbert import Hilbert
from .mto import Mto
from .pando import Pando
from .plan import LayoutPlan, plan_layout
from .qdtree import QdTree
from .sortkey import SortKey
from .tuned import Tuned
from .zorder import ZOrder


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


__all__ = ["CandidateCut", "LayoutPlan", "Optimizer", "PlanError", "REGISTRY", "Setting", "TableQueries",
           "VectorSample", "PlanWorkload", "get_optimizer", "optimizer_names", "plan_layout"]
