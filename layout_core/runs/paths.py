"""Where a run keeps its files, and its metrics (stdlib only)."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from layout_core.base.errors import UserError
from layout_core.base.names import METRICS_FILE, RUNS_FOLDER, UNPARTITIONED, staging_name

log = logging.getLogger("layout.runs")


class StepError(UserError, RuntimeError):
    """A step cannot run or its result is wrong; nothing is activated."""


@dataclass(frozen=True)
class RunPaths:
    """A run of one table partition: `<warehouse>/_runs/<table>/<partition>/<run>/` holds its
    artifacts; `location` is the table's folder, where block folders go."""

    warehouse: Path
    table: str
    partition: str
    run_id: str

    @property
    def location(self) -> Path:
        return self.warehouse / self.table

    @property
    def staging(self) -> Path:
        return self.warehouse / RUNS_FOLDER / self.table / (self.partition or UNPARTITIONED) / staging_name(self.run_id)

    def file(self, name: str) -> Path:
        return self.staging / name


def write_json(path: Path, data) -> Path:
    """Write atomically: a killed step never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    tmp.replace(path)
    return path


def record_metrics(paths: RunPaths, step: str, numbers: dict) -> dict:
    """Keep a step's numbers in the run's metrics file (reports, pages, benchmarks) and log them."""
    metrics_path = paths.file(METRICS_FILE)
    metrics = json.loads(metrics_path.read_text()) if metrics_path.exists() else {}
    metrics[step] = numbers
    write_json(metrics_path, metrics)
    log.info("%s %s/%s: %s", step, paths.table, paths.partition or "-",
             ", ".join(f"{k}={v}" for k, v in numbers.items()))
    return numbers


def read_metrics(paths: RunPaths) -> dict:
    path = paths.file(METRICS_FILE)
    return json.loads(path.read_text()) if path.exists() else {}
