"""A flow is a tuple of steps with one signature: a step takes a `RunContext` and returns
its metrics. The same steps run as spark-submit jobs (`runs.job`) or in one process
(`run_steps`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from layout_core.base.schema import Schema, TableSchema
from layout_core.runs.paths import RunPaths, read_metrics
from layout_core.skipping.zonemaps import DEFAULT_RANGE_SETS


@dataclass(frozen=True)
class RunContext:
    """What a step works with: engines (Spark, the catalog), the schema, the run's folder and
    the run's inputs (the arguments its jobs are given: source, optimizer, batch files ...)."""

    spark: Any  # a SparkSession, or None for a step that needs none
    catalog: Any  # layout_core.catalog.Catalog
    schema: Schema
    paths: RunPaths
    inputs: Mapping[str, Any] = field(default_factory=dict)
    range_sets: int = DEFAULT_RANGE_SETS

    @property
    def table(self) -> TableSchema:
        return self.schema.table(self.paths.table)

    def input(self, name: str, default: Any = None) -> Any:
        value = self.inputs.get(name)
        return default if value is None else value


@dataclass(frozen=True)
class Step:
    name: str
    run: Callable[[RunContext], dict]
    needs_spark: bool = True


@dataclass(frozen=True)
class Flow:
    """A flow's steps in order. `declared` is its step list in `flows.names`, which the DAG
    files and the Airflow pages read: a flow that disagrees with it fails on import."""

    name: str
    steps: tuple[Step, ...]
    declared: tuple[str, ...]

    def __post_init__(self) -> None:
        if self.names != tuple(self.declared):
            raise ImportError(f"flow {self.name}: steps {self.names} differ from flows.names {self.declared}")

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(step.name for step in self.steps)

    def step(self, name: str) -> Step:
        for step in self.steps:
            if step.name == name:
                return step
        raise KeyError(f"flow {self.name} has no step {name!r}; its steps: {', '.join(self.names)}")


def run_steps(flow: Flow, context: RunContext, until: str | None = None) -> dict:
    """The flow's steps in order in this process (up to and including `until`); returns the
    run's metrics."""
    for step in flow.steps:
        step.run(context)
        if step.name == until:
            break
    return read_metrics(context.paths)
