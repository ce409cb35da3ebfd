"""What the pages show of what was read: the monitor and gc reports checked field by field
(a report is a file anyone with the warehouse could have written), and a run's metrics
turned into numbers (a metrics file holds whatever its steps recorded)."""

from __future__ import annotations

import datetime as dt
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from layout_core.airflow.pages.data import RunSection, read_gc_report, read_monitor_report, staged_run_id
from layout_core.flows.names import MONITOR_REPORT_VERSION

PLOT_TABLES = 10  # tables in the skipping page's plot (those with the most blocks scanned)

# The counts of a gc report the gc page shows, each a whole number of 0 or more.
GC_COUNTS = ("versions_purged", "block_folders_deleted", "staging_folders_deleted", "bytes_freed", "kept",
             "history_pruned")


@dataclass(frozen=True)
class MonitorRun:
    """A layout_workload_monitor run's shift report (reorg.monitor.write_report), checked:
    `tables` are its per-table reports (shift.ShiftReport.to_json) when it could be read,
    `problem` says why it could not (None with no tables and not `written`: not written yet)."""

    dag_id: str
    run_id: str
    staged_run_id: str
    written: bool = False
    problem: str | None = None
    settings: dict = field(default_factory=dict)  # q, w, window_hours of the run
    tables: tuple[dict, ...] = ()


@dataclass(frozen=True)
class GcRun:
    """A layout_gc run's report (gc.write_report, GarbageReport.to_json), checked: `report` is
    check_gc_report's record when it could be read, `problem` says why it could not (None with
    no report and not `written`: not written yet)."""

    dag_id: str
    run_id: str
    staged_run_id: str
    written: bool = False
    problem: str | None = None
    report: dict | None = None


@dataclass(frozen=True)
class ReorgSummary:
    """A partial reorganization run's numbers from its plan_reorg and activate_reorg steps
    (None: not recorded, or not a finite number)."""

    planned: bool  # plan_reorg recorded its numbers
    activated: bool  # activate_reorg recorded the blocks it rewrote
    already_active: bool  # not activated by this attempt: an earlier attempt of the task did
    rewritten: int | float | None
    total: int | float | None
    new: int | float | None
    shared: int | float | None
    base: int | float | None  # the version it replaces
    reward: int | float | None
    subtrees: int | float | None
    evaluated: int | float | None
    considered: int | float | None


# --------------------------------------------------------------------------- numbers for people


def format_number(value: Any) -> str:
    """A value of a metrics file or report as a page shows it: 1,000; 0.029; true; JSON."""
    if value is None or value == "":
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".") if not value.is_integer() else f"{int(value):,}"
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return str(value)


def finite_number(value: Any) -> int | float | None:
    """A finite number of a metrics file, else None (a bool is no number)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return value if ok else None


# --------------------------------------------------------------------------- versions and runs


def version_rows(version) -> int | None:
    """Rows of a version from its input fingerprint ("rows:checksum", set on activation)."""
    fingerprint = str(version.params.get("input_fingerprint") or "")
    head = fingerprint.split(":", 1)[0]
    return int(head) if head.isdigit() else None


def reorganized_text(version) -> str:
    """"reorganized subtrees 3, 7 of version 1" for a partial reorganization's version (its params
    "reorganized_from" and "reorganized_nodes"), else "" (plain text: escape it)."""
    params = version.params if isinstance(version.params, dict) else {}
    base = params.get("reorganized_from")
    if base is None:
        return ""
    nodes = params.get("reorganized_nodes")
    if isinstance(nodes, list) and nodes:
        return f"reorganized subtrees {', '.join(str(n) for n in nodes)} of version {base}"
    return f"reorganized from version {base}"


def step_numbers(metrics: dict, step: str) -> dict:
    """The numbers one step recorded ({} when none, or not an object)."""
    numbers = metrics.get(step)
    return numbers if isinstance(numbers, dict) else {}


def metric_keys(metrics: dict, steps: tuple[str, ...]) -> list[str]:
    """The keys of a metrics file: its run's steps in order, then anything else it holds, sorted."""
    return [s for s in steps if s in metrics] + sorted(k for k in metrics if k not in steps)


def step_seconds(metrics: dict, steps: tuple[str, ...]) -> list[tuple[str, float]]:
    """(step, seconds) of the steps that recorded a number of seconds, in pipeline order."""
    out = []
    for step in steps:
        seconds = finite_number(step_numbers(metrics, step).get("seconds"))
        if seconds is not None:
            out.append((step, float(seconds)))
    return out


def block_sizes(section: RunSection) -> tuple[list[float], list[int]] | None:
    """(expected, real) rows of every block of the run's version, by block id, when both are known."""
    if section.version is None or section.expected_block_rows is None or section.block_rows is None:
        return None
    first = section.version.block_ids.start
    pairs = [(section.expected_block_rows[b - first], rows) for b, rows in sorted(section.block_rows.items())
             if 0 <= b - first < len(section.expected_block_rows)]
    return ([e for e, _ in pairs], [r for _, r in pairs]) if pairs else None


def replaced_version(numbers: dict) -> int | float | None:
    """The version a step's run replaces: "replaces", or "base_version" in the metrics of older runs."""
    replaces = finite_number(numbers.get("replaces"))
    return replaces if replaces is not None else finite_number(numbers.get("base_version"))


def reorg_summary(metrics: dict) -> ReorgSummary:
    """What a reorganization run did (activate_reorg's numbers) or plans (plan_reorg's)."""
    plan, activate = step_numbers(metrics, "plan_reorg"), step_numbers(metrics, "activate_reorg")
    activated = finite_number(activate.get("blocks_rewritten")) is not None
    base = replaced_version(activate) if activated else None
    return ReorgSummary(
        planned=bool(plan), activated=activated,
        already_active=not activated and activate.get("already_active") is True,
        rewritten=finite_number((activate if activated else plan).get("blocks_rewritten")),
        total=finite_number(plan.get("blocks_total")),
        new=finite_number(activate.get("blocks_new") if activated else plan.get("new_blocks")),
        shared=finite_number(activate.get("blocks_shared")) if activated else None,
        base=replaced_version(plan) if base is None else base,
        reward=finite_number(plan.get("reward")),
        subtrees=finite_number(plan.get("subtrees")),
        evaluated=finite_number(plan.get("subtrees_evaluated")),
        considered=finite_number(plan.get("subtrees_total")))


# --------------------------------------------------------------------------- checking a report's fields


def _sendable(text: str) -> bool:
    """A text the page can be sent with (JSON may hold lone surrogates, which UTF-8 cannot)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_KINDS: dict[str, Callable[[Any], bool]] = {
    "a number": lambda v: finite_number(v) is not None,
    "a whole number": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "a text": lambda v: isinstance(v, str) and _sendable(v),
    "a count": lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < 2 ** 63,
    "true or false": lambda v: isinstance(v, bool),
    "a list": lambda v: isinstance(v, list),
    "an object": lambda v: isinstance(v, dict),
}


def _field(record: dict, key: str, kind: str, where: str, required: bool = True) -> Any:
    """record[key], which must be of `kind` (_KINDS); ValueError saying where it is not. An
    optional field that is missing (or null) is None."""
    value = record.get(key)
    if value is None and not required:
        return None
    if not _KINDS[kind](value):
        raise ValueError(f"{where}: {key!r} is {'missing' if value is None else 'not ' + kind}")
    return value


def _objects(record: dict, key: str, where: str) -> list[dict]:
    items = _field(record, key, "a list", where)
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise ValueError(f"{where}: {key}[{i}] is not an object")
    return items


def _checked_partition(partition: dict, at: str) -> dict:
    """One partition of a monitor report's table: its reward and the subtrees it chose."""
    checked = {"partition": _field(partition, "partition", "a text", at), "chosen": [],
               "version": _field(partition, "version", "a whole number", at, required=False),
               "optimizer": _field(partition, "optimizer", "a text", at, required=False),
               "reason": _field(partition, "reason", "a text", at, required=False),
               "reward": _field(partition, "reward", "a number", at),
               "reads": _field(partition, "reads", "a number", at, required=False)}
    for key in ("blocks", "blocks_chosen", "subtrees_evaluated", "subtrees_total"):
        checked[key] = _field(partition, key, "a whole number", at)
    checked["bound_violations"] = _field(partition, "bound_violations", "a whole number", at, required=False)
    for key in ("root_gain", "root_noise", "lower_bound"):  # reports from before the noise floor lack them
        checked[key] = _field(partition, key, "a number", at, required=False)
    for c, chosen in enumerate(_objects(partition, "chosen", at)):
        there = f"{at}, chosen subtree {c + 1}"
        leaves = _field(chosen, "leaves", "a list", there, required=False)
        checked["chosen"].append({
            "node": _field(chosen, "node", "a whole number", there),
            "blocks": _field(chosen, "blocks", "a whole number", there),
            "leaves": None if leaves is None else len(leaves),
            "reads": _field(chosen, "reads", "a number", there, required=False),
            "benefit": _field(chosen, "benefit", "a number", there),
            "reward": _field(chosen, "reward", "a number", there)})
    return checked


def check_monitor_report(data: Any) -> tuple[dict, list[dict]]:
    """(settings, tables) of a monitor report (reorg.monitor.write_report), every field this page
    shows checked for its type: ValueError saying which is wrong. The tables are new dicts of
    the checked fields only."""
    if not isinstance(data, dict):
        raise ValueError("the report is not a JSON object")
    if data.get("version") != MONITOR_REPORT_VERSION:
        raise ValueError(f"a report of version {format_number(data.get('version'))[:20] or '(none)'}, this page "
                         f"reads version {MONITOR_REPORT_VERSION}")
    settings = {key: _field(data, key, "a number", "the report", required=False) for key in ("q", "w", "window_hours")}
    tables = []
    for t, table in enumerate(_objects(data, "tables", "the report")):
        where = f"table {t + 1}"
        name = _field(table, "table", "a text", where)
        where = f"table {name[:80]!r}"
        window = _field(table, "window", "a list", where, required=False)
        if window is not None and (len(window) != 2 or not all(isinstance(w, str) for w in window)):
            raise ValueError(f"{where}: 'window' is not a start and an end")
        notes = _field(table, "notes", "a list", where, required=False) or []
        if not all(isinstance(n, str) for n in notes):
            raise ValueError(f"{where}: 'notes' are not texts")
        checked = {"table": name, "window": window, "notes": notes,
                   "reward": _field(table, "reward", "a number", where),
                   "reorganize": _field(table, "reorganize", "true or false", where),
                   "reason": _field(table, "reason", "a text", where),
                   "references": _field(table, "references", "a whole number", where)}
        for key in ("queries", "skipped_unparsable", "skipped_unknown"):
            checked[key] = _field(table, key, "a whole number", where, required=False)
        for key in ("q", "w"):
            checked[key] = _field(table, key, "a number", where, required=False)
        checked["partitions"] = [_checked_partition(partition, f"{where}, partition {p + 1}")
                                 for p, partition in enumerate(_objects(table, "partitions", where))]
        tables.append(checked)
    return settings, tables


def read_monitor_run(warehouse: Path, dag_id: str, run_id: str) -> MonitorRun:
    """The shift report of a layout_workload_monitor run, checked (never raises: a report that
    is missing or cannot be read is said so in the record)."""
    staged = staged_run_id(dag_id, run_id)
    written, data, problem = read_monitor_report(warehouse, staged)
    if not written or problem is not None:
        return MonitorRun(dag_id, run_id, staged, written, problem)
    try:
        settings, tables = check_monitor_report(data)
    except ValueError as e:
        return MonitorRun(dag_id, run_id, staged, True, str(e))
    return MonitorRun(dag_id, run_id, staged, True, None, settings, tuple(tables))


def _utc_time(text: str, where: str) -> dt.datetime:
    """An ISO time, in UTC (naive: UTC)."""
    try:
        value = dt.datetime.fromisoformat(text)
        return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)
    except (ValueError, OverflowError):
        raise ValueError(f"{where}: {text[:40]!r} is not a time") from None


def _checked_folders(data: dict, key: str) -> list[dict]:
    folders = []
    for i, item in enumerate(_objects(data, key, "the report")):
        at = f"{key}[{i}]"
        folders.append({"path": _field(item, "path", "a text", at), "bytes": _field(item, "bytes", "a count", at),
                        "version_id": _field(item, "version_id", "a count", at, required=False)})
    return folders


def check_gc_report(data: Any) -> dict:
    """The fields this page shows of a gc report (GarbageReport.to_json), each checked for its
    type (numbers: counts, 0 to 2**63 - 1): ValueError saying which is wrong. A new dict of the
    checked fields only."""
    if not isinstance(data, dict):
        raise ValueError("the report is not a JSON object")
    checked: dict[str, Any] = {"dry_run": _field(data, "dry_run", "true or false", "the report"),
                               "cutoff": _utc_time(_field(data, "cutoff", "a text", "the report"),
                                                   "the report's cutoff")}
    for key in GC_COUNTS:
        checked[key] = _field(data, key, "a count", "the report")
    # written by newer gc runs only
    checked["reports_deleted"] = _field(data, "reports_deleted", "a count", "the report", required=False)
    ids = _field(data, "purged_version_ids", "a list", "the report")
    if not all(_KINDS["a count"](v) for v in ids):
        raise ValueError("the report: 'purged_version_ids' are not version ids")
    checked["purged_version_ids"] = ids
    checked["folders"] = _checked_folders(data, "folders")
    checked["staging"] = _checked_folders(data, "staging")
    checked["kept_items"] = [{"what": _field(item, "what", "a text", f"kept_items[{i}]"),
                              "reason": _field(item, "reason", "a text", f"kept_items[{i}]")}
                             for i, item in enumerate(_objects(data, "kept_items", "the report"))]
    return checked


def read_gc_run(warehouse: Path, dag_id: str, run_id: str) -> GcRun:
    """The garbage report of a layout_gc run, checked (never raises: a report that is missing or
    cannot be read is said so in the record)."""
    staged = staged_run_id(dag_id, run_id)
    written, data, problem = read_gc_report(warehouse, staged)
    if not written or problem is not None:
        return GcRun(dag_id, run_id, staged, written, problem)
    try:
        return GcRun(dag_id, run_id, staged, True, None, check_gc_report(data))
    except ValueError as e:
        return GcRun(dag_id, run_id, staged, True, str(e))
