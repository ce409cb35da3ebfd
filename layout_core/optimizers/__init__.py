"""The layout optimizers, by name. Adding one is a new file here and one line below.

    from layout_core.optimizers import get_optimizer, optimizer_names
    get_optimizer("mto").describe()
"""

from __future__ import annotations

from layout_core.optimizers.base import (
    CandidateCut, Optimizer, PlanError, PlanWorkload, Setting, TableQueries, VectorSample,
)
from layout_core.optimizers.plan import LayoutPlan
from layout_core.optimizers.registry import (
    REGISTRY, build_registry, get_optimizer, optimizer_names, optimizer_settings, plan_layout,
)

__all__ = ["CandidateCut", "LayoutPlan", "Optimizer", "PlanError", "PlanWorkload", "REGISTRY", "Setting",
           "TableQueries", "VectorSample", "build_registry", "get_optimizer", "optimizer_names",
           "optimizer_settings", "plan_layout"]
