"""Read-only pages about the layout catalog inside the Airflow UI (an Airflow 3 plugin).

`plugins/layouts_plugin.py` mounts `app` under `/layouts` of the api-server
(`fastapi_apps`) and adds a "Layouts" nav entry and a "Layout run" tab on
every DAG run (`external_views`). The pages:

    /layouts/           tables: per table and partition the active layout, and
                        every version with its lineage (run, parent, state)
    /layouts/run        one DAG run (?dag_id=&run_id=): each step's numbers from
                        its staging folder's metrics.json, the nightly's steps or a
                        partial reorganization's (layout_reoptimize); for a
                        layout_workload_monitor run its shift report instead, for
                        a layout_gc run its garbage report (what it deleted and kept)
    /layouts/skipping   what the routed queries of the last ?days= (default 7) skipped,
                        from the catalog's query history: per table and template
                        blocks and rows read of those there, the daily share of
                        blocks skipped, the most recent queries
    /layouts/plot/...   the PNG plots of those pages (matplotlib, Agg)

The catalog is the one of LAYOUT_CATALOG_URL and the run staging folders are
under LAYOUT_WAREHOUSE (`layout_core.base.config.load_settings`, as for the jobs).

Every endpoint needs an authenticated Airflow user, checked the way the
api-server checks its own endpoints (`airflow.api_fastapi.core_api.security.get_user`:
a JWT in `Authorization: Bearer`, else the `_token` cookie the UI sets); a
run's page also needs read access to that DAG's runs. The pages show no
connection string; a catalog that cannot be reached gives a 503 page, and the
endpoints are plain `def`s (run in a worker thread) so a slow database never
blocks the api-server's event loop.

Reading and rendering are separate: `read_*` take a Catalog (or the
warehouse) and return plain records, `render_*` and `plot_*` are pure
functions of those records.
"""

from __future__ import annotations

import datetime as dt
import glob
import html
import io
import json
import logging
import math
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlencode

import sqlalchemy as sa
from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("layout.airflow_plugin")

URL_PREFIX = "/layouts"
STEPS = ("ingest", "featurize", "reduce", "optimize", "write_blocks", "verify", "update_catalog")
REORG_STEPS = ("plan_reorg", "write_reorg", "verify_reorg", "activate_reorg")  # reorg.partial, layout_reoptimize
REOPTIMIZE_DAG = "layout_reoptimize"
CHANGES_STEPS = ("stage_changes", "write_changes", "verify_changes", "activate_changes")  # changes.apply.STEPS
CHANGES_DAG = "layout_changes"
MONITOR_DAG = "layout_workload_monitor"
RUNS_FOLDER = "_runs"  # gc.RUNS_FOLDER (not imported: keeps this module light for every Airflow process)
REORG_PLANNED = "reorg_planned.json"  # reorg.partial.PLANNED, in a reorganization run's table-wide folder
# reorg.monitor.report_path and REPORT_VERSION (not imported: reorg.monitor pulls in the shift model)
MONITOR_FOLDER = "_monitor"
MONITOR_REPORT = "shift.json"
MONITOR_REPORT_VERSION = 1
# gc.REPORTS_FOLDER, gc.REPORT_FILE (gc.report_path; not imported, as RUNS_FOLDER)
GC_DAG = "layout_gc"
GC_FOLDER = "_gc"
GC_REPORT = "report.json"
GC_LISTED = 50  # kept items, purged versions and deleted folders listed on a gc run's page (the first)
PLOT_VERSIONS = 40  # versions per table in its plot (the newest)
LIST_VERSIONS = 200  # versions per table listed on the tables page (the newest)
DEFAULT_DAYS = 7  # the skipping page's window
MAX_DAYS = 3650  # the longest history kept (config.history_retention_days)
TOP_TEMPLATES = 5  # templates per table on the skipping page (those that read the most blocks)
RECENT_QUERIES = 20  # queries listed on the skipping page (the most recent)
PLOT_TABLES = 10  # tables in the skipping plot (those with the most blocks scanned)
SQL_SHOWN = 160  # characters of a query's SQL shown in a table cell
PG_CONNECT_TIMEOUT_S = 5


# --------------------------------------------------------------------------- records


@dataclass(frozen=True)
class PartitionSummary:
    """The active layout of one partition."""

    partition: str
    version: Any  # catalog.VersionInfo
    blocks: int
    rows: int
    bytes: int


@dataclass(frozen=True)
class TableOverview:
    name: str
    partition_column: str | None
    active: tuple[PartitionSummary, ...]
    versions: tuple[Any, ...]  # catalog.VersionInfo, oldest first


@dataclass(frozen=True)
class RunSection:
    """One staging folder of a DAG run: one table partition (a star run has several)."""

    table: str
    partition: str
    metrics: dict
    version: Any = None  # the catalog version this run built, if it got that far
    expected_block_rows: tuple[float, ...] | None = None  # the plan's, by block id - first id
    block_rows: dict[int, int] | None = None  # block id -> rows, while the version is active
    steps: tuple[str, ...] = STEPS  # the steps of its run (run_steps): the nightly's or a reorganization's


@dataclass(frozen=True)
class ReorgPlanned:
    """The table-wide record of a reorganization run's plan_reorg (reorg_planned.json)."""

    table: str
    numbers: dict


@dataclass(frozen=True)
class RunReport:
    dag_id: str
    run_id: str
    staged_run_id: str  # the run id the steps use: "<dag_id>__<run_id>" (dags/layout_nightly.py RUN_ID)
    sections: tuple[RunSection, ...] = field(default=())
    planned: tuple[ReorgPlanned, ...] = field(default=())


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
class SkippingReport:
    """The query history of a window: `tables` per table read (workload.history.TableSkipping,
    by name), `recent` the most recent queries (catalog.QueryRecord, newest first)."""

    days: int
    since: dt.datetime
    until: dt.datetime
    queries: int = 0  # queries in the window, routed or imported
    tables: tuple[Any, ...] = ()
    recent: tuple[Any, ...] = ()


class CatalogUnavailable(Exception):
    """The catalog database cannot be read; the message holds no connection string."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# --------------------------------------------------------------------------- the catalog


def _page_url(url: str) -> str:
    """The catalog URL, with a connect timeout for PostgreSQL (a dead host must not hang a page)."""
    parsed = sa.make_url(url)
    if parsed.get_backend_name() == "postgresql" and parsed.get_driver_name() == "psycopg2" \
            and "connect_timeout" not in parsed.query:
        parsed = parsed.update_query_dict({"connect_timeout": str(PG_CONNECT_TIMEOUT_S)})
    return parsed.render_as_string(hide_password=False)


def _sqlite_file_missing(url: str) -> bool:
    """A SQLite catalog file that does not exist yet: an empty catalog (not created by a page)."""
    parsed = sa.make_url(url)
    db = parsed.database
    if parsed.get_backend_name() != "sqlite" or not db or db == ":memory:" or db.startswith("file:"):
        return False
    return not Path(db).exists()


def _safe_reason(error: BaseException, url: str) -> str:
    """The driver's one-line reason, with the URL and its password taken out."""
    # CatalogUnreachable's `reason` is the driver's alone: its message names the (masked) URL
    reason = str(getattr(error, "reason", None) or getattr(error, "orig", None) or error).strip().splitlines()
    text = reason[0] if reason else type(error).__name__
    try:
        parsed = sa.make_url(url)
        secrets_ = [url, _page_url(url), parsed.password, parsed.username and parsed.password and
                    f"{parsed.username}:{parsed.password}"]
    except Exception:
        secrets_ = [url]
    for secret in secrets_:
        if secret:
            text = text.replace(str(secret), "***")
    return text[:300]


def _backend(url: str) -> str:
    try:
        return sa.make_url(url).get_backend_name()
    except Exception:
        return "unknown"


class CatalogPool:
    """One open Catalog per URL, shared by the requests; dropped when its database fails."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, Any] = {}

    def read(self, url: str, reader: Callable[[Any], Any], empty: Callable[[], Any]):
        """reader(catalog), or empty() when the catalog does not exist yet; CatalogUnavailable
        when its database cannot be reached or read."""
        from layout_core.catalog import CatalogUnreachable

        try:
            catalog = self._catalog(url)
            return empty() if catalog is None else reader(catalog)
        except (sa.exc.SQLAlchemyError, ImportError, CatalogUnreachable) as e:
            self.drop(url)
            log.warning("layout catalog (%s) unavailable: %s", _backend(url), _safe_reason(e, url))
            raise CatalogUnavailable(f"{type(e).__name__}: {_safe_reason(e, url)}") from None

    def _catalog(self, url: str):
        from layout_core.catalog import Catalog

        try:
            if _sqlite_file_missing(url):
                return None
            with self._lock:
                catalog = self._open.get(url)
                if catalog is None:
                    catalog = self._open[url] = Catalog(_page_url(url))
            return catalog
        except ValueError:  # a URL SQLAlchemy parses but cannot use, e.g. a port that is no number
            raise sa.exc.ArgumentError("the catalog URL is malformed") from None

    def drop(self, url: str) -> None:
        with self._lock:
            catalog = self._open.pop(url, None)
        if catalog is not None:
            try:
                catalog.close()
            except Exception:  # already broken: nothing to release
                pass


def _rows_of(version) -> int | None:
    """Rows of a version from its input fingerprint ("rows:checksum", set on activation)."""
    fingerprint = str(version.params.get("input_fingerprint") or "")
    head = fingerprint.split(":", 1)[0]
    return int(head) if head.isdigit() else None


def _overview(catalog, snapshot, name: str) -> TableOverview:
    active = tuple(
        PartitionSummary(layout.version.partition, layout.version, len(layout.blocks),
                         sum(b.row_count for b in layout.blocks), sum(b.bytes for b in layout.blocks))
        for layout in snapshot.layouts_of(name))
    return TableOverview(name, snapshot.tables[name].partition_column, active, tuple(catalog.versions(name)))


def read_overview(catalog) -> list[TableOverview]:
    """Every table of the catalog with its active layouts and all its versions."""
    snapshot = catalog.snapshot()
    return [_overview(catalog, snapshot, name) for name in snapshot.tables]


def read_table(catalog, name: str) -> TableOverview | None:
    """One table (None if the catalog has no such table)."""
    if name not in {t.name for t in catalog.tables()}:
        return None
    return _overview(catalog, catalog.snapshot([name]), name)


def read_skipping(catalog, days: int, now: dt.datetime) -> SkippingReport:
    """What the queries of the last `days` days before `now` read (catalog None: a catalog
    that does not exist yet, no history)."""
    since = now - dt.timedelta(days=days)
    if catalog is None:
        return SkippingReport(days, since, now)
    from layout_core.workload.history import summarize_history

    history = catalog.query_history(since=since, until=now)
    return SkippingReport(days, since, now, len(history), tuple(summarize_history(history)),
                          tuple(reversed(history[-RECENT_QUERIES:])))


def parse_days(text: str | None) -> int:
    """The `days` parameter of the skipping page: a whole number of days, 1 to MAX_DAYS."""
    if text is None or text == "":
        return DEFAULT_DAYS
    value = text.strip()
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= MAX_DAYS:
        raise ValueError(f"days must be a whole number of days from 1 to {MAX_DAYS}, not {text[:40]!r}")
    return int(value)


def staged_run_id(dag_id: str, run_id: str) -> str:
    """The run id the DAG's steps get (RUN_ID in dags/layout_nightly.py)."""
    return f"{dag_id}__{run_id}"


def _staging_name(run_id: str) -> str:
    from layout_core.flows.nightly.steps import staging_name

    return staging_name(run_id)


def _staged_files(warehouse: Path, staged: str, partitions: str, file_name: str) -> list[tuple[str, str, Path]]:
    """(table, partition, folder) of the run's staging folders (of the partition folders matching
    the glob `partitions`) that hold `file_name`, sorted."""
    name = _staging_name(staged)
    if name in ("", ".", ".."):
        return []
    root = (Path(warehouse) / RUNS_FOLDER).resolve()
    found = []
    for path in glob.glob(f"{glob.escape(str(root))}/*/{partitions}/{glob.escape(name)}/{file_name}"):
        folder = Path(path).parent
        if folder.resolve().parent.parent.parent != root:  # a symlink out of the warehouse
            continue
        partition = folder.parent.name
        found.append((folder.parent.parent.name, "" if partition == "_all" else partition, folder))
    return sorted(found)


def latest_staged_run_id(warehouse: Path, staged: str) -> str:
    """The key a DAG run's steps built under last: `staged`, or `staged__rerun<n>` with the
    largest n (layout_nightly's key once the run was cleared and wait_for_input ran again)."""
    name = _staging_name(staged)
    if name in ("", ".", ".."):
        return staged
    root = (Path(warehouse) / RUNS_FOLDER).resolve()
    reruns = [Path(path).name[len(name) + len("__rerun"):]
              for path in glob.glob(f"{glob.escape(str(root))}/*/*/{glob.escape(name)}__rerun*")]
    latest = max((int(n) for n in reruns if n.isascii() and n.isdigit()), default=0)
    return f"{staged}__rerun{latest}" if latest else staged


def run_folders(warehouse: Path, staged: str) -> list[tuple[str, str, Path]]:
    """(table, partition, folder) of every staging folder of a run id, sorted.

    The folder name is `steps.staging_name` of the run id (only letters, digits,
    '_', '.', '-'), so the glob never leaves `<warehouse>/_runs/*/*/`."""
    return _staged_files(warehouse, staged, "*", "metrics.json")


def run_steps(metrics: dict, dag_id: str = "") -> tuple[str, ...]:
    """The steps of the run a metrics.json belongs to, from the steps it recorded: the nightly's
    (STEPS), a partial reorganization's (REORG_STEPS) or a change batch's (CHANGES_STEPS); none
    recorded yet: by the DAG."""
    if any(step in metrics for step in STEPS):
        return STEPS
    if any(step in metrics for step in REORG_STEPS) or dag_id == REOPTIMIZE_DAG:
        return REORG_STEPS
    if any(step in metrics for step in CHANGES_STEPS) or dag_id == CHANGES_DAG:
        return CHANGES_STEPS
    return STEPS


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_run(catalog, warehouse: Path, dag_id: str, run_id: str) -> RunReport:
    """The staging folders of one DAG run with their metrics, the versions the run built, the
    plan's expected block sizes and (for an active version) the real ones (catalog None: a
    catalog that does not exist yet, the metrics only)."""
    staged = latest_staged_run_id(warehouse, staged_run_id(dag_id, run_id))
    folders = run_folders(warehouse, staged)
    tables = {t.name for t in catalog.tables()} if catalog is not None else set()
    sections = []
    for table, partition, folder in folders:
        metrics = _read_json(folder / "metrics.json")
        metrics = metrics if isinstance(metrics, dict) else {}
        version = expected = rows = None
        if table in tables:
            version = next((v for v in catalog.versions(table, partition) if v.run_id == staged), None)
        if version is not None:
            plan = catalog.plan(version.version_id) or _read_json(folder / "plan.json")
            if isinstance(plan, dict) and isinstance(plan.get("expected_block_rows"), list):
                expected = tuple(float(r) for r in plan["expected_block_rows"])
            if version.state == "active":
                layout = catalog.active_layout(table, partition)
                if layout is not None and layout.version.version_id == version.version_id:
                    rows = {b.block_id: b.row_count for b in layout.blocks}
        sections.append(RunSection(table, partition, metrics, version, expected, rows, run_steps(metrics, dag_id)))
    planned = []
    for table, _, folder in _staged_files(warehouse, staged, "_all", REORG_PLANNED):
        numbers = _read_json(folder / REORG_PLANNED)
        planned.append(ReorgPlanned(table, numbers if isinstance(numbers, dict) else {}))
    return RunReport(dag_id, run_id, staged, tuple(sections), tuple(planned))


def _report_path(warehouse: Path, folder: str, staged: str, file_name: str) -> Path | None:
    """<warehouse>/<folder>/<staged, sanitized>/<file_name>: only letters, digits, '.', '_', '-'
    in the run's folder name (steps.staging_name); None for a name that would not be a folder
    of `<warehouse>/<folder>`."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", staged)
    if safe in ("", ".", ".."):
        return None
    return Path(warehouse) / folder / safe / file_name


def monitor_report_path(warehouse: Path, staged: str) -> Path | None:
    """Where a monitor run keeps its report: reorg.monitor.report_path(warehouse, staged), the
    same sanitizing; None for a name that would not be a folder of `<warehouse>/_monitor`."""
    return _report_path(warehouse, MONITOR_FOLDER, staged, MONITOR_REPORT)


def gc_report_path(warehouse: Path, staged: str) -> Path | None:
    """Where a gc run keeps its report: gc.report_path(warehouse, staged), the same sanitizing;
    None for a name that would not be a folder of `<warehouse>/_gc`."""
    return _report_path(warehouse, GC_FOLDER, staged, GC_REPORT)


def _read_report_file(warehouse: Path, folder: str, path: Path | None) -> tuple[bool, Any, str | None]:
    """(written, data, problem) of a run's report file under <warehouse>/<folder>; never raises."""
    if path is None or not path.is_file():
        return False, None, None
    root = (Path(warehouse) / folder).resolve()
    if path.resolve().parent.parent != root:  # a symlink out of the warehouse
        return True, None, "the report is not a file of its folder in the warehouse"
    try:
        return True, json.loads(path.read_text()), None
    except (OSError, UnicodeDecodeError):
        return True, None, "the report file cannot be read"
    except ValueError as e:
        return True, None, f"the report is not JSON ({e})"
    except RecursionError:
        return True, None, "the report is not JSON (nested too deep)"


def _utf8(text: str) -> bool:
    """A text the page can be sent with (JSON may hold lone surrogates, which UTF-8 cannot)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_KINDS: dict[str, Callable[[Any], bool]] = {
    "a number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v),
    "a whole number": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "a text": lambda v: isinstance(v, str) and _utf8(v),
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


def check_monitor_report(data: Any) -> tuple[dict, list[dict]]:
    """(settings, tables) of a monitor report (reorg.monitor.write_report), every field this page
    shows checked for its type: ValueError saying which is wrong. The tables are new dicts of
    the checked fields only."""
    if not isinstance(data, dict):
        raise ValueError("the report is not a JSON object")
    if data.get("version") != MONITOR_REPORT_VERSION:
        raise ValueError(f"a report of version {_num(data.get('version'))[:20] or '(none)'}, this page reads "
                         f"version {MONITOR_REPORT_VERSION}")
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
                   "references": _field(table, "references", "a whole number", where),
                   "partitions": []}
        for key in ("queries", "skipped_unparsable", "skipped_unknown"):
            checked[key] = _field(table, key, "a whole number", where, required=False)
        for key in ("q", "w"):
            checked[key] = _field(table, key, "a number", where, required=False)
        for p, partition in enumerate(_objects(table, "partitions", where)):
            at = f"{where}, partition {p + 1}"
            part = {"partition": _field(partition, "partition", "a text", at), "chosen": [],
                    "version": _field(partition, "version", "a whole number", at, required=False),
                    "optimizer": _field(partition, "optimizer", "a text", at, required=False),
                    "reason": _field(partition, "reason", "a text", at, required=False),
                    "reward": _field(partition, "reward", "a number", at),
                    "reads": _field(partition, "reads", "a number", at, required=False)}
            for key in ("blocks", "blocks_chosen", "subtrees_evaluated", "subtrees_total"):
                part[key] = _field(partition, key, "a whole number", at)
            part["bound_violations"] = _field(partition, "bound_violations", "a whole number", at, required=False)
            for c, chosen in enumerate(_objects(partition, "chosen", at)):
                there = f"{at}, chosen subtree {c + 1}"
                leaves = _field(chosen, "leaves", "a list", there, required=False)
                part["chosen"].append({
                    "node": _field(chosen, "node", "a whole number", there),
                    "blocks": _field(chosen, "blocks", "a whole number", there),
                    "leaves": None if leaves is None else len(leaves),
                    "reads": _field(chosen, "reads", "a number", there, required=False),
                    "benefit": _field(chosen, "benefit", "a number", there),
                    "reward": _field(chosen, "reward", "a number", there)})
            checked["partitions"].append(part)
        tables.append(checked)
    return settings, tables


def read_monitor_run(warehouse: Path, dag_id: str, run_id: str) -> MonitorRun:
    """The shift report of a layout_workload_monitor run, checked (never raises: a report that
    is missing or cannot be read is said so in the record)."""
    staged = staged_run_id(dag_id, run_id)
    written, data, problem = _read_report_file(warehouse, MONITOR_FOLDER, monitor_report_path(warehouse, staged))
    if not written or problem is not None:
        return MonitorRun(dag_id, run_id, staged, written, problem)
    try:
        settings, tables = check_monitor_report(data)
    except ValueError as e:
        return MonitorRun(dag_id, run_id, staged, True, str(e))
    return MonitorRun(dag_id, run_id, staged, True, None, settings, tuple(tables))


GC_COUNTS = ("versions_purged", "block_folders_deleted", "staging_folders_deleted", "bytes_freed", "kept",
             "history_pruned")


def _time(text: str, where: str) -> dt.datetime:
    """An ISO time, in UTC (naive: UTC)."""
    try:
        value = dt.datetime.fromisoformat(text)
        return value.replace(tzinfo=dt.timezone.utc) if value.tzinfo is None else value.astimezone(dt.timezone.utc)
    except (ValueError, OverflowError):
        raise ValueError(f"{where}: {text[:40]!r} is not a time") from None


def _folders(data: dict, key: str) -> list[dict]:
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
                               "cutoff": _time(_field(data, "cutoff", "a text", "the report"), "the report's cutoff")}
    for key in GC_COUNTS:
        checked[key] = _field(data, key, "a count", "the report")
    # written by newer gc runs only
    checked["reports_deleted"] = _field(data, "reports_deleted", "a count", "the report", required=False)
    ids = _field(data, "purged_version_ids", "a list", "the report")
    if not all(_KINDS["a count"](v) for v in ids):
        raise ValueError("the report: 'purged_version_ids' are not version ids")
    checked["purged_version_ids"] = ids
    checked["folders"] = _folders(data, "folders")
    checked["staging"] = _folders(data, "staging")
    checked["kept_items"] = [{"what": _field(item, "what", "a text", f"kept_items[{i}]"),
                              "reason": _field(item, "reason", "a text", f"kept_items[{i}]")}
                             for i, item in enumerate(_objects(data, "kept_items", "the report"))]
    return checked


def read_gc_run(warehouse: Path, dag_id: str, run_id: str) -> GcRun:
    """The garbage report of a layout_gc run, checked (never raises: a report that is missing or
    cannot be read is said so in the record)."""
    staged = staged_run_id(dag_id, run_id)
    written, data, problem = _read_report_file(warehouse, GC_FOLDER, gc_report_path(warehouse, staged))
    if not written or problem is not None:
        return GcRun(dag_id, run_id, staged, written, problem)
    try:
        return GcRun(dag_id, run_id, staged, True, None, check_gc_report(data))
    except ValueError as e:
        return GcRun(dag_id, run_id, staged, True, str(e))


# --------------------------------------------------------------------------- HTML


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _when(value: dt.datetime | None) -> str:
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if value else ""


def _num(value: Any) -> str:
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


def _href(base: str, path: str, **params: Any) -> str:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return _e(f"{base}{path}" + (f"?{query}" if query else ""))


STYLE = """
body { font-family: system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif; margin: 16px 24px;
       color: #1f2933; background: #fff; }
h1 { font-size: 1.4em; margin: 0 0 8px; } h2 { font-size: 1.15em; margin: 24px 0 6px; }
h3 { font-size: 1em; margin: 16px 0 4px; }
nav a { margin-right: 14px; } nav { margin-bottom: 12px; padding-bottom: 6px; border-bottom: 1px solid #d9e2ec; }
table { border-collapse: collapse; margin: 6px 0 12px; font-size: 0.9em; }
th, td { border: 1px solid #d9e2ec; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f4f8; } td.n { text-align: right; font-variant-numeric: tabular-nums; }
.state-active { color: #0b7a35; font-weight: 600; } .state-failed { color: #b42318; font-weight: 600; }
.state-building { color: #8a6100; } .state-retired, .state-purged { color: #6b7785; }
.note { color: #52606d; font-size: 0.9em; } .error { color: #b42318; }
.box { border: 1px solid #d9e2ec; background: #f8fafc; padding: 10px 14px; margin: 10px 0; max-width: 60em; }
img.plot { border: 1px solid #d9e2ec; margin: 4px 0 10px; max-width: 100%; }
code { background: #f0f4f8; padding: 0 3px; }
"""

# No scripts, nothing from another origin; framed by the Airflow UI (same origin) only.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; img-src 'self'; style-src 'unsafe-inline'; "
                               "frame-ancestors 'self'; base-uri 'none'; form-action 'none'",
    "X-Content-Type-Options": "nosniff",
    "Cache-Control": "no-store",
    "Referrer-Policy": "same-origin",
}


def _page(title: str, body: str, base: str) -> str:
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{_e(title)}</title><style>{STYLE}</style></head><body>"
        f"<nav><a href=\"{_href(base, '/')}\">Tables</a>"
        f"<a href=\"{_href(base, '/skipping')}\">Skipping</a></nav>"
        f"<h1>{_e(title)}</h1>{body}</body></html>\n")


def _state(state: str) -> str:
    return f"<span class=\"state-{_e(state)}\">{_e(state)}</span>"


def _run_link(base: str, run_id: str) -> str:
    """A version's run id, linked to its run page when it came from a DAG run ("<dag>__<run>")."""
    dag_id, sep, airflow_run = run_id.partition("__")
    if not (sep and dag_id and airflow_run):
        return f"<code>{_e(run_id)}</code>"
    return f"<a href=\"{_href(base, '/run', dag_id=dag_id, run_id=airflow_run)}\"><code>{_e(run_id)}</code></a>"


def _reorganized(version) -> str:
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


def render_tables(tables: list[TableOverview], base: str = "") -> str:
    """The tables page."""
    if not tables:
        return _page("Layouts", "<div class=\"box\"><p><strong>The layout catalog is empty</strong>: no table has "
                     "been laid out yet.</p><p class=\"note\">Run the <code>layout_nightly</code> DAG (or "
                     "<code>layout run</code>) to lay out a table partition; it appears here once its first "
                     "version is built.</p></div>", base)
    parts = [f"<p class=\"note\">{len(tables)} table{'s' if len(tables) != 1 else ''} in the layout catalog. "
             "Rows of a version are those verified in its blocks when it was activated (its input "
             "fingerprint, <code>rows:checksum</code>).</p>"]
    for table in tables:
        parts.append(f"<h2 id=\"{_e('t-' + table.name)}\">Table <code>{_e(table.name)}</code></h2>")
        if table.partition_column:
            parts.append(f"<p class=\"note\">partitioned by <code>{_e(table.partition_column)}</code></p>")
        if table.active:
            parts.append("<table><tr><th>partition</th><th>active version</th><th>optimizer</th><th>blocks</th>"
                         "<th>rows</th><th>bytes</th><th>laid out</th><th>input fingerprint</th></tr>")
            for p in table.active:
                parts.append(
                    f"<tr><td>{_e(p.partition or '(unpartitioned)')}</td><td class=\"n\">{p.version.version_id}</td>"
                    f"<td>{_e(p.version.optimizer)}</td><td class=\"n\">{_num(p.blocks)}</td>"
                    f"<td class=\"n\">{_num(p.rows)}</td><td class=\"n\">{_num(p.bytes)}</td>"
                    f"<td>{_when(p.version.activated_at)}</td>"
                    f"<td><code>{_e(p.version.params.get('input_fingerprint', ''))}</code></td></tr>")
            parts.append("</table>")
        else:
            parts.append("<p class=\"note\">No active layout: no version of this table has been activated.</p>")
        if table.versions:
            parts.append(f"<img class=\"plot\" alt=\"{_e('blocks and rows per version of ' + table.name)}\" "
                         f"src=\"{_href(base, '/plot/table.png', name=table.name)}\" width=\"900\" height=\"300\">")
            shown = sorted(table.versions, key=lambda v: v.version_id, reverse=True)[:LIST_VERSIONS]
            if len(table.versions) > len(shown):
                parts.append(f"<p class=\"note\">The newest {len(shown)} of {len(table.versions)} versions.</p>")
            parts.append("<h3>Versions</h3><table><tr><th>version</th><th>partition</th><th>state</th>"
                         "<th>optimizer</th><th>run</th><th>parent version</th><th>blocks</th><th>rows</th>"
                         "<th>created</th><th>activated</th><th>retired / failed</th><th>reason</th></tr>")
            for v in shown:
                ended = v.failed_at if v.state == "failed" else v.retired_at
                parts.append(
                    f"<tr><td class=\"n\">{v.version_id}</td><td>{_e(v.partition)}</td><td>{_state(v.state)}</td>"
                    f"<td>{_e(v.optimizer)}</td><td>{_run_link(base, v.run_id)}</td>"
                    f"<td class=\"n\">{'' if v.parent_version is None else v.parent_version}</td>"
                    f"<td class=\"n\">{_num(v.n_blocks)}</td><td class=\"n\">{_num(_rows_of(v))}</td>"
                    f"<td>{_when(v.created_at)}</td><td>{_when(v.activated_at)}</td><td>{_when(ended)}</td>"
                    f"<td>{_e(' — '.join(r for r in (_reorganized(v), v.reason) if r))}</td></tr>")
            parts.append("</table>")
        else:
            parts.append("<p class=\"note\">No versions yet.</p>")
    return _page("Layouts", "".join(parts), base)


def _metric_keys(metrics: dict, steps: tuple[str, ...] = STEPS) -> list[str]:
    return [s for s in steps if s in metrics] + sorted(k for k in metrics if k not in steps)


def _block_sizes(section: RunSection) -> tuple[list[float], list[int]] | None:
    """(expected, real) rows of every block of the run's version, by block id, when both are known."""
    if section.version is None or section.expected_block_rows is None or section.block_rows is None:
        return None
    first = section.version.block_ids.start
    pairs = [(section.expected_block_rows[b - first], rows) for b, rows in sorted(section.block_rows.items())
             if 0 <= b - first < len(section.expected_block_rows)]
    return ([e for e, _ in pairs], [r for _, r in pairs]) if pairs else None


def _step_seconds(metrics: dict, steps: tuple[str, ...] = STEPS) -> list[tuple[str, float]]:
    """(step, seconds) of the steps that recorded a number of seconds, in pipeline order."""
    out = []
    for step in steps:
        seconds = metrics.get(step, {}).get("seconds") if isinstance(metrics.get(step), dict) else None
        if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and math.isfinite(seconds):
            out.append((step, float(seconds)))
    return out


def _verification(metrics: dict) -> str:
    verify, ingest = metrics.get("verify"), metrics.get("ingest")
    if not isinstance(verify, dict):
        return ("<span class=\"error\">not verified</span>: the verify step has not run, or it failed (a failed "
                "verification marks the version failed; see the task log)")
    rows = verify.get("rows")
    ingested = ingest.get("rows") if isinstance(ingest, dict) else None
    same = "" if ingested is None else (f", the {_e(_num(ingested))} rows ingested" if ingested == rows else
                                        f" <span class=\"error\">but ingest counted {_e(_num(ingested))}</span>")
    return (f"<span class=\"state-active\">passed</span>: the written blocks hold {_e(_num(rows))} rows{same}, "
            "with the same checksum")


def _number(value: Any) -> int | float | None:
    """A finite number of a metrics.json, else None (a bool is no number)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return value if ok else None


def _step(metrics: dict, step: str) -> dict:
    numbers = metrics.get(step)
    return numbers if isinstance(numbers, dict) else {}


def _reorg_summary(metrics: dict) -> str:
    """A reorganization run in words, from the numbers its steps recorded (escaped HTML):
    "rewrote 32 of 50 blocks into 25 new ones; 18 shared with version 1; reward 29.1"."""
    plan, activate = _step(metrics, "plan_reorg"), _step(metrics, "activate_reorg")
    done = _number(activate.get("blocks_rewritten")) is not None
    retried = not done and activate.get("already_active") is True  # activated by an earlier attempt
    rewritten = _number((activate if done else plan).get("blocks_rewritten"))
    total = _number(plan.get("blocks_total"))
    new = _number(activate.get("blocks_new") if done else plan.get("new_blocks"))
    shared = _number(activate.get("blocks_shared")) if done else None
    base = _number(activate.get("base_version")) if done else None
    base = _number(plan.get("base_version")) if base is None else base
    reward = _number(plan.get("reward"))
    clauses = []
    if rewritten is not None:
        blocks = f"{_num(rewritten)} of {_num(total)} blocks" if total is not None else f"{_num(rewritten)} blocks"
        into = "" if new is None else f" into {_num(new)} new ones"
        clauses.append(f"rewrote {blocks}{into}" if done or retried else f"plans to rewrite {blocks}{into}")
    if shared is not None:
        clauses.append(f"{_num(shared)} shared with "
                       + ("the base version" if base is None else f"version {base}"))
    elif base is not None:
        clauses.append(f"base version {base}")
    if reward is not None:
        clauses.append(f"reward {_num(reward)}")
    parts = []
    if clauses:
        parts.append(f"<p>Reorganization: {_e('; '.join(clauses))}.</p>")
    if retried:
        parts.append("<p class=\"note\">activate_reorg found the new version already active (a retried task).</p>")
    elif not done and plan:
        parts.append("<p class=\"note\">Not activated yet: until activate_reorg switches to the new version, "
                     "queries are routed to the base version.</p>")
    chosen, evaluated, considered = (_number(plan.get(k)) for k in ("subtrees", "subtrees_evaluated", "subtrees_total"))
    if chosen is not None:
        of = "" if evaluated is None else (f", {_num(evaluated)} evaluated" + (
            "" if considered is None else f" of {_num(considered)}"))
        parts.append(f"<p class=\"note\">Subtrees rewritten: {_e(_num(chosen))}{_e(of)}.</p>")
    return "".join(parts)


def _reorg_verification(metrics: dict) -> str:
    verify, written = _step(metrics, "verify_reorg"), _step(metrics, "write_reorg")
    if not isinstance(metrics.get("verify_reorg"), dict):
        return ("<span class=\"error\">not verified</span>: verify_reorg has not run, or it failed (a failed "
                "verification marks the new version failed; see the task log)")
    rows, moved = verify.get("rows"), written.get("rows")
    same = "" if moved is None else (
        f", the {_e(_num(moved))} rows of the blocks they replace" if moved == rows else
        f" <span class=\"error\">but write_reorg read {_e(_num(moved))} from the blocks they replace</span>")
    return (f"<span class=\"state-active\">passed</span>: the new blocks hold {_e(_num(rows))} rows{same}, "
            "with the same checksum")


def _planned(planned: ReorgPlanned) -> str:
    """What plan_reorg decided for a table (its reorg_planned.json)."""
    numbers = planned.numbers
    partitions = numbers.get("partitions")
    partitions = [p for p in partitions if isinstance(p, str)] if isinstance(partitions, list) else None
    reward, reason = _number(numbers.get("reward")), numbers.get("reason")
    head = f"<h2>Reorganization plan of table <code>{_e(planned.table)}</code></h2>"
    if partitions is None:
        return head + "<p class=\"note\">plan_reorg's record of this table cannot be read.</p>"
    which = (", ".join(p or "(unpartitioned)" for p in partitions) if partitions
             else "none: nothing is rewritten")
    return (head + f"<p>Partitions with subtrees to rewrite: {_e(which)}"
            f"{'' if reward is None else f'; reward {_e(_num(reward))}'}.</p>"
            + (f"<p class=\"note\">{_e(reason)}</p>" if isinstance(reason, str) and reason else ""))


def render_run(report: RunReport, base: str = "") -> str:
    """The page of one DAG run: every step's numbers from its metrics.json (the nightly's steps or
    a partial reorganization's)."""
    title = f"Layout run {report.dag_id} / {report.run_id}"
    head = (f"<p class=\"note\">DAG <code>{_e(report.dag_id)}</code>, run <code>{_e(report.run_id)}</code>; "
            f"the steps ran as <code>{_e(report.staged_run_id)}</code>.</p>")
    if not report.sections and not report.planned:
        return _page(title, head + "<div class=\"box\"><p><strong>No layout staging folder for this run.</strong> "
                     "Either the run is not a layout run, its first step (ingest) has not written anything yet, "
                     "or garbage collection has removed its staging folder.</p></div>", base)
    parts = [head] + [_planned(p) for p in report.planned]
    for index, section in enumerate(report.sections):
        m, steps = section.metrics, section.steps
        reorg = steps == REORG_STEPS
        parts.append(f"<h2>Table <code>{_e(section.table)}</code>, partition "
                     f"<code>{_e(section.partition or '(unpartitioned)')}</code></h2>")
        v = section.version
        if v is not None:
            reorganized = _reorganized(v)
            parts.append(f"<p>Catalog version {v.version_id}: {_state(v.state)}, optimizer {_e(v.optimizer)}"
                         f"{'' if v.parent_version is None else f', replaced version {v.parent_version}'}"
                         f"{'' if not reorganized else ', ' + _e(reorganized)}"
                         f"{'' if not v.reason else ' — ' + _e(v.reason)}.</p>")
        else:
            parts.append(f"<p class=\"note\">No catalog version for this run yet "
                         f"({'write_reorg' if reorg else 'write_blocks'} creates it).</p>")
        if reorg:
            parts.append(_reorg_summary(m))
        parts.append("<table><tr><th>step</th><th>rows</th><th>seconds</th><th>blocks</th><th>other numbers</th></tr>")
        for step in _metric_keys(m, steps):
            numbers = m[step] if isinstance(m[step], dict) else {"value": m[step]}
            other = ", ".join(f"{_e(k)}={_e(_num(val))}" for k, val in numbers.items()
                              if k not in ("rows", "seconds", "blocks"))
            parts.append(f"<tr><td>{_e(step)}</td><td class=\"n\">{_e(_num(numbers.get('rows')))}</td>"
                         f"<td class=\"n\">{_e(_num(numbers.get('seconds')))}</td>"
                         f"<td class=\"n\">{_e(_num(numbers.get('blocks')))}</td><td>{other}</td></tr>")
        missing = [s for s in steps if s not in m]
        parts.append("</table>")
        if missing:
            parts.append(f"<p class=\"note\">Steps without numbers yet: {_e(', '.join(missing))}.</p>")
        if reorg:
            parts.append(f"<h3>Verification</h3><p>{_reorg_verification(m)}</p>")
        else:
            parts.append(_nightly_summary(m))
        sizes = _block_sizes(section)
        if sizes:
            expected, real = sizes
            parts.append(f"<p class=\"note\">Per {'new ' if reorg else ''}block (the version is active): expected rows "
                         f"{_num(round(min(expected)))}–{_num(round(max(expected)))}, real rows "
                         f"{_num(min(real))}–{_num(max(real))} over {len(real)} blocks.</p>"
                         f"<img class=\"plot\" alt=\"expected and real rows per block\" width=\"900\" height=\"300\" "
                         f"src=\"{_href(base, '/plot/run-blocks.png', dag_id=report.dag_id, run_id=report.run_id, section=index)}\">")
        elif v is not None and v.state != "active":
            parts.append("<p class=\"note\">Per-block sizes are shown while the version is active.</p>")
        if _step_seconds(m, steps):
            parts.append(f"<h3>Seconds per step</h3><img class=\"plot\" alt=\"seconds per step\" width=\"900\" "
                         f"height=\"300\" src=\"{_href(base, '/plot/run-seconds.png', dag_id=report.dag_id, run_id=report.run_id, section=index)}\">")
    return _page(title, "".join(parts), base)


def _nightly_summary(m: dict) -> str:
    """Rows in and out, the verification and the planned and written blocks of a nightly run."""
    parts = []
    ingest, done = m.get("ingest") or {}, m.get("update_catalog") or {}
    rows_in = ingest.get("rows") if isinstance(ingest, dict) else None
    rows_out = done.get("rows") if isinstance(done, dict) else None
    parts.append("<h3>Rows in and out</h3><p>")
    parts.append(f"in (ingest): {_e(_num(rows_in)) or 'not recorded'}; out (blocks in the catalog, "
                 f"update_catalog): {_e(_num(rows_out)) or 'not recorded'}</p>")
    parts.append(f"<h3>Verification</h3><p>{_verification(m)}</p>")
    optimize = m.get("optimize") if isinstance(m.get("optimize"), dict) else {}
    written = m.get("write_blocks") if isinstance(m.get("write_blocks"), dict) else {}
    parts.append("<h3>Expected and real block sizes</h3><table><tr><th>blocks planned (optimize)</th>"
                 "<th>blocks written (write_blocks)</th><th>blocks in the catalog</th>"
                 "<th>largest relative error of a block's rows against the plan</th></tr>"
                 f"<tr><td class=\"n\">{_e(_num(optimize.get('blocks')))}</td>"
                 f"<td class=\"n\">{_e(_num(written.get('blocks')))}</td>"
                 f"<td class=\"n\">{_e(_num(done.get('blocks') if isinstance(done, dict) else None))}</td>"
                 f"<td class=\"n\">{_e(_num(done.get('block_rows_error_max') if isinstance(done, dict) else None))}"
                 "</td></tr></table>")
    return "".join(parts)


def _yes_no(value: bool) -> str:
    return "<strong>yes</strong>" if value else "no"


def _unread_report(run, kind: str, when: str) -> str:
    """The box saying a monitor or gc run's report is not there yet (`when` says when it will
    be) or cannot be read (why); "" when it was read."""
    if not run.written:
        return (f"<div class=\"box\"><p><strong>The {kind} run has not written its report yet.</strong></p>"
                f"<p class=\"note\">{_e(when)}</p></div>")
    if run.problem is not None:
        return (f"<div class=\"box\"><p><strong>The {kind} run has not written a report this page can read."
                f"</strong></p><p class=\"note\">{_e(run.problem)}.</p></div>")
    return ""


def render_monitor(run: MonitorRun, base: str = "") -> str:
    """The page of one layout_workload_monitor run: per table its shift reward and decision, per
    partition the subtrees chosen (from the run's report)."""
    title = f"Layout run {run.dag_id} / {run.run_id}"
    head = (f"<p class=\"note\">DAG <code>{_e(run.dag_id)}</code>, run <code>{_e(run.run_id)}</code>: the workload "
            "monitor's report (measure_shift), per laid-out table the reward (q/w)·B(T) − C(T) of re-laying out "
            "qd-tree subtrees T for the recent queries.</p>")
    missing = _unread_report(run, "monitor", "measure_shift writes it when it is done; emit_shift_events then reads it.")
    if missing:
        return _page(title, head + missing, base)
    s = run.settings
    said = [f"{label} {_num(s[key])}" for key, label in (("q", "q ="), ("w", "w ="), ("window_hours", "window (hours):"))
            if s.get(key) is not None]
    parts = [head]
    if said:
        parts.append(f"<p class=\"note\">{_e(', '.join(said))} (q: queries expected before the next shift; w: the "
                     "cost of writing a block, in block reads).</p>")
    if not run.tables:
        parts.append("<div class=\"box\"><p>The report lists no table: no table had an active layout (or the "
                     "tables asked for are not in the schema).</p></div>")
    for t in run.tables:
        parts.append(f"<h2>Table <code>{_e(t['table'])}</code></h2>")
        window = ([f"The window: {t['window'][0]} to {t['window'][1]}"] if t["window"] else []) + (
            [] if t["queries"] is None else [f"{_num(t['queries'])} queries in it" if t["window"]
                                             else f"{_num(t['queries'])} queries in the window"])
        parts.append("<table><tr><th>references in the window</th><th>reward</th><th>reorganize</th></tr>"
                     f"<tr><td class=\"n\">{_e(_num(t['references']))}</td><td class=\"n\">{_e(_num(t['reward']))}"
                     f"</td><td>{_yes_no(t['reorganize'])}</td></tr></table>"
                     + (f"<p class=\"note\">{_e('; '.join(window))}.</p>" if window else "")
                     + f"<p>{_e(t['reason'])}</p>")
        if t["notes"]:
            parts.append("<ul>" + "".join(f"<li class=\"note\">{_e(n)}</li>" for n in t["notes"]) + "</ul>")
        if not t["partitions"]:
            continue
        parts.append("<table><tr><th>partition</th><th>version</th><th>blocks</th><th>reward</th>"
                     "<th>blocks chosen</th><th>subtrees evaluated</th><th>reason</th></tr>")
        for p in t["partitions"]:
            parts.append(f"<tr><td>{_e(p['partition'] or '(unpartitioned)')}</td>"
                         f"<td class=\"n\">{_e(p['version'])}</td><td class=\"n\">{_e(_num(p['blocks']))}</td>"
                         f"<td class=\"n\">{_e(_num(p['reward']))}</td><td class=\"n\">{_e(_num(p['blocks_chosen']))}</td>"
                         f"<td class=\"n\">{_e(_num(p['subtrees_evaluated']))} of {_e(_num(p['subtrees_total']))}</td>"
                         f"<td>{_e(p['reason'])}</td></tr>")
        parts.append("</table>")
        for p in t["partitions"]:
            if not p["chosen"]:
                continue
            version = "" if p["version"] is None else f" (version {p['version']})"
            parts.append(f"<h3>Subtrees chosen in partition <code>{_e(p['partition'] or '(unpartitioned)')}</code>"
                         f"{_e(version)}: {len(p['chosen'])}, {_e(_num(p['subtrees_evaluated']))} evaluated of "
                         f"{_e(_num(p['subtrees_total']))}</h3><table><tr><th>node</th><th>blocks</th><th>leaves</th>"
                         "<th>benefit</th><th>reward</th></tr>")
            for c in p["chosen"]:
                parts.append(f"<tr><td class=\"n\">{_e(c['node'])}</td><td class=\"n\">{_e(_num(c['blocks']))}</td>"
                             f"<td class=\"n\">{_e(_num(c['leaves']))}</td><td class=\"n\">{_e(_num(c['benefit']))}</td>"
                             f"<td class=\"n\">{_e(_num(c['reward']))}</td></tr>")
            parts.append("</table>")
    return _page(title, "".join(parts), base)


def _bytes(n: int) -> str:
    """A number of bytes for people: "1,300 bytes", "12.5 MiB (13,107,200 bytes)"."""
    if abs(n) < 1024:
        return f"{_num(n)} byte{'' if n == 1 else 's'}"
    value, unit = float(n), "bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB", "PiB"):
        value /= 1024
        if abs(value) < 1024:
            break
    return f"{value:,.1f} {unit} ({_num(n)} bytes)"


def _cut(text: str, limit: int = 1000) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _more(shown: int, total: int, what: str) -> str:
    return "" if total <= shown else f"<p class=\"note\">… and {_num(total - shown)} more {_e(what)}.</p>"


def _folder_rows(folders: list[dict], with_version: bool) -> str:
    rows = []
    for f in folders[:GC_LISTED]:
        version = f"<td class=\"n\">{_e(f['version_id'])}</td>" if with_version else ""
        rows.append(f"<tr><td><code>{_e(_cut(f['path']))}</code></td>{version}<td class=\"n\">{_e(_bytes(f['bytes']))}</td></tr>")
    return "".join(rows)


def render_gc(run: GcRun, base: str = "") -> str:
    """The page of one layout_gc run: what it deleted (or, in a dry run, would have), what it
    kept and why (from the run's report)."""
    title = f"Layout run {run.dag_id} / {run.run_id}"
    head = (f"<p class=\"note\">DAG <code>{_e(run.dag_id)}</code>, run <code>{_e(run.run_id)}</code>: the garbage "
            "collection's report (block folders of retired and failed versions, staging folders of runs that "
            "can no longer resume).</p>")
    missing = _unread_report(run, "gc", "collect_garbage writes it when it is done (runs of the gc from before "
                                        "the reports were written have none).")
    if missing:  # read_gc_run gives a report whenever it was written and had no problem
        return _page(title, head + missing, base)
    r = run.report
    dry = r["dry_run"]
    verb = "would be deleted" if dry else "deleted"
    ids = r["purged_version_ids"]
    listed = ", ".join(str(v) for v in ids[:GC_LISTED]) + (f", … and {_num(len(ids) - GC_LISTED)} more"
                                                          if len(ids) > GC_LISTED else "")
    block_bytes, staging_bytes = (sum(f["bytes"] for f in r[key]) for key in ("folders", "staging"))
    parts = [head]
    if dry:
        parts.append("<div class=\"box\"><p><strong>A dry run</strong>: nothing was deleted or recorded; the "
                     "numbers are what the gc would have deleted.</p></div>")
    rows = [("dry run", _yes_no(dry)),
            ("cutoff (out of service before it: due)", _e(_when(r["cutoff"]))),
            (f"versions {'that would be ' if dry else ''}purged", _e(_num(r["versions_purged"]))
             + (f" (version{'s' if len(ids) != 1 else ''} {_e(listed)})" if ids else "")),
            (f"block folders {verb}", f"{_e(_num(r['block_folders_deleted']))}, {_e(_bytes(block_bytes))}"),
            (f"staging folders {verb}", f"{_e(_num(r['staging_folders_deleted']))}, {_e(_bytes(staging_bytes))}"),
            (f"bytes freed{' (would be)' if dry else ''}", _e(_bytes(r["bytes_freed"]))),
            ("queries pruned from the history", _e(_num(r["history_pruned"])) + (" (none in a dry run)" if dry else "")),
            ]
    if r["reports_deleted"] is not None:
        rows.append(("old gc reports deleted", _e(_num(r["reports_deleted"]))))
    rows.append(("kept (candidates not deleted)", _e(_num(r["kept"]))))
    parts.append("<table>" + "".join(f"<tr><th>{_e(k)}</th><td>{v}</td></tr>" for k, v in rows) + "</table>")
    kept = r["kept_items"]
    parts.append(f"<h2>Kept ({_num(len(kept))})</h2>")
    if kept:
        parts.append("<table><tr><th>version or folder</th><th>why it stays</th></tr>" + "".join(
            f"<tr><td><code>{_e(_cut(k['what']))}</code></td><td>{_e(_cut(k['reason']))}</td></tr>"
            for k in kept[:GC_LISTED])
            + "</table>" + _more(GC_LISTED, len(kept), "kept"))
    else:
        parts.append("<p class=\"note\">Nothing kept.</p>")
    for key, what, with_version in (("folders", "Block folders", True), ("staging", "Staging folders", False)):
        folders = r[key]
        if not folders:
            continue
        parts.append(f"<h2>{what} {verb} ({_num(len(folders))})</h2><table><tr><th>folder</th>"
                     + ("<th>version</th>" if with_version else "") + "<th>size</th></tr>"
                     + _folder_rows(folders, with_version) + "</table>"
                     + _more(GC_LISTED, len(folders), what.lower()))
    return _page(title, "".join(parts), base)


def _share(read: int, total: int) -> str:
    """The share of `total` not read, as a percentage ("" when there is nothing to share)."""
    return f"{1 - read / total:.1%}" if total else ""


def _of(read: int, total: int, what: str) -> str:
    return f"{_num(read)} of {_num(total)} {what}"


def _short_sql(sql: str) -> str:
    """The SQL on one line, shortened, escaped; the whole of it (up to a limit) as the title."""
    one_line = " ".join(str(sql).split())
    shown = one_line if len(one_line) <= SQL_SHOWN else one_line[:SQL_SHOWN - 1] + "…"
    return f"<code title=\"{_e(one_line[:4000])}\">{_e(shown)}</code>"


def _days_links(base: str, days: int) -> str:
    def label(n: int) -> str:
        return f"{n} day{'s' if n != 1 else ''}"

    links = [f"<strong>{label(n)}</strong>" if n == days
             else f"<a href=\"{_href(base, '/skipping', days=n)}\">{label(n)}</a>" for n in sorted({1, 7, 30, days})]
    return f"<p class=\"note\">Window: {' · '.join(links)} (or <code>?days=N</code>).</p>"


def _reads(query) -> str:
    """Per table reference of a query: blocks read of those there, or why it read them all."""
    if not query.reads:
        return "<span class=\"note\">not routed here (imported)</span>" if query.source == "import" \
            else "<span class=\"note\">no table read</span>"
    cells = []
    for r in query.reads:
        if r.read_all or not query.analyzed:
            cells.append(f"<code>{_e(r.table)}</code> read in full")
        else:
            cells.append(f"<code>{_e(r.table)}</code> {_num(r.blocks_read)}/{_num(r.blocks_total)}")
    return "<br>".join(cells)


def render_skipping(report: SkippingReport, base: str = "") -> str:
    """The skipping page: per table what the routed queries of the window read, its top
    templates, the daily share skipped (a plot) and the most recent queries."""
    window = (f"the last {report.days} day{'s' if report.days != 1 else ''} "
              f"({_when(report.since)} to {_when(report.until)})")
    head = _days_links(base, report.days)
    if not report.tables:
        imported = (f"<p class=\"note\">{_num(report.queries)} quer{'ies' if report.queries != 1 else 'y'} of "
                    "the window were imported (<code>layout workload import</code>) rather than routed here: "
                    "they have no blocks read to count.</p>") if report.queries else ""
        body = (f"{head}<div class=\"box\"><p><strong>No queries were routed in {_e(window)}</strong>; "
                "<code>layout route</code>, <code>layout rewrite</code> and <code>layout run-workload</code> "
                f"record them.</p>{imported}<p class=\"note\">Nothing is estimated in their place.</p></div>")
        return _page("Skipping", body + _recent(report, base), base)
    parts = [head, f"<p class=\"note\">{_num(report.queries)} quer{'ies' if report.queries != 1 else 'y'} in "
             f"{_e(window)}, from the catalog's query history. A scan is one table reference of a query; "
             "blocks and rows are those of the table's active layouts when the query was routed, and "
             "<em>skipped</em> is the share of those blocks the scans did not read. Scans read in full "
             "(no active layout, or a query that could not be analyzed) are counted apart.</p>"]
    parts.append("<table><tr><th>table</th><th>queries</th><th>scans</th><th>blocks read</th><th>skipped</th>"
                 "<th>rows read</th><th>scans read in full</th></tr>")
    for t in report.tables:
        parts.append(f"<tr><td><a href=\"#{_e('s-' + t.table)}\"><code>{_e(t.table)}</code></a></td>"
                     f"<td class=\"n\">{_num(t.queries)}</td><td class=\"n\">{_num(t.scans)}</td>"
                     f"<td class=\"n\">{_of(t.blocks_read, t.blocks_total, 'blocks')}</td>"
                     f"<td class=\"n\">{_share(t.blocks_read, t.blocks_total)}</td>"
                     f"<td class=\"n\">{_of(t.rows_read, t.rows_total, 'rows')}</td>"
                     f"<td class=\"n\">{_num(t.read_in_full)}</td></tr>")
    parts.append("</table>")
    if any(t.daily for t in report.tables):
        parts.append(f"<img class=\"plot\" alt=\"daily share of blocks skipped per table\" width=\"900\" "
                     f"height=\"300\" src=\"{_href(base, '/plot/skipping.png', days=report.days)}\">")
        plotted = sum(1 for t in report.tables if t.daily)
        if plotted > PLOT_TABLES:
            parts.append(f"<p class=\"note\">The plot shows the {PLOT_TABLES} tables with the most blocks "
                         f"scanned, of {plotted}; each table's own plot is linked below.</p>")
    for t in report.tables:
        parts.append(f"<h2 id=\"{_e('s-' + t.table)}\">Table <code>{_e(t.table)}</code></h2>")
        if not t.templates:
            parts.append("<p class=\"note\">Every scan of this table read it in full: no layout was routed.</p>")
            continue
        if t.daily:
            parts.append(f"<p class=\"note\"><a href=\"{_href(base, '/plot/skipping.png', days=report.days, table=t.table)}\">"
                         "Daily share of blocks skipped (plot)</a></p>")
        shown = t.templates[:TOP_TEMPLATES]
        parts.append(f"<h3>{'The template' if len(shown) == 1 else f'The {len(shown)} templates'} that read the "
                     f"most blocks{'' if len(t.templates) == len(shown) else f', of {len(t.templates)}'}</h3>"
                     "<table><tr><th>template</th><th>queries</th><th>blocks read</th><th>skipped</th>"
                     "<th>example (the most recent)</th></tr>")
        for tpl in shown:
            parts.append(f"<tr><td><code>{_e(tpl.fingerprint)}</code></td><td class=\"n\">{_num(tpl.queries)}</td>"
                         f"<td class=\"n\">{_of(tpl.blocks_read, tpl.blocks_total, 'blocks')}</td>"
                         f"<td class=\"n\">{_share(tpl.blocks_read, tpl.blocks_total)}</td>"
                         f"<td>{_short_sql(tpl.example)}</td></tr>")
        parts.append("</table>")
    return _page("Skipping", "".join(parts) + _recent(report, base), base)


def _recent(report: SkippingReport, base: str) -> str:
    if not report.recent:
        return ""
    parts = [f"<h2>The most recent {'query' if len(report.recent) == 1 else f'{len(report.recent)} queries'}</h2>"
             "<table><tr><th>time</th><th>source</th><th>template</th><th>blocks read per table</th>"
             "<th>SQL</th></tr>"]
    for q in report.recent:
        parts.append(f"<tr><td>{_when(q.ts)}</td><td>{_e(q.source)}</td><td><code>{_e(q.fingerprint)}</code></td>"
                     f"<td>{_reads(q)}</td><td>{_short_sql(q.sql)}</td></tr>")
    parts.append("</table>")
    return "".join(parts)


def render_error(title: str, message: str, base: str = "") -> str:
    return _page(title, f"<div class=\"box\"><p class=\"error\"><strong>{_e(message)}</strong></p></div>", base)


def render_unavailable(reason: str, base: str = "") -> str:
    return _page("Layout catalog unavailable", (
        "<div class=\"box\"><p class=\"error\"><strong>The layout catalog database cannot be read right now."
        "</strong></p><p>The rest of Airflow is not affected; these pages work again once the database is "
        f"back.</p><p class=\"note\">Reason: {_e(reason)}</p></div>"), base)


# --------------------------------------------------------------------------- plots


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    return buf.getvalue()


def _figure(width: float = 9.0, height: float = 3.0):
    # a bare Figure (Agg canvas), no pyplot: no global backend state in the api-server
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")

STATE_COLORS = {"active": "#2f9e44", "retired": "#9aa5b1", "failed": "#e03131", "building": "#f08c00",
                "purged": "#ced4da"}


def plot_table(table: TableOverview) -> bytes:
    """Blocks (bars, by state) and rows (line) of the newest versions of one table."""
    from matplotlib.patches import Patch
    from matplotlib.ticker import MaxNLocator

    versions = sorted(table.versions, key=lambda v: v.version_id)[-PLOT_VERSIONS:]
    active_blocks = {p.version.version_id: p.blocks for p in table.active}
    fig = _figure()
    ax = fig.subplots()
    x = list(range(len(versions)))
    blocks = [active_blocks.get(v.version_id, v.n_blocks) for v in versions]
    ax.bar(x, blocks, color=[STATE_COLORS.get(v.state, "#748ffc") for v in versions])
    ax.set_ylabel("blocks")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    labels = [f"v{v.version_id}\n{v.partition[:10]}" if v.partition else f"v{v.version_id}" for v in versions]
    ax.set_xticks(x, labels, fontsize=7)
    ax.set_xlim(-0.6, max(len(x), 8) - 0.4)  # a lone version is not one wall-to-wall bar
    ax.set_title(f"{table.name}: blocks (bars) and rows (line) per version", fontsize=9, loc="left")
    rows = [_rows_of(v) for v in versions]
    if any(r is not None for r in rows):
        ax2 = ax.twinx()
        ax2.plot(x, [math.nan if r is None else r for r in rows], "o-", color="#1c7ed6")
        ax2.set_ylabel("rows", color="#1c7ed6")
        ax2.set_ylim(bottom=0)
    present = sorted({v.state for v in versions})
    ax.legend([Patch(color=STATE_COLORS.get(s, "#748ffc")) for s in present], present, fontsize=7,
              loc="lower right", bbox_to_anchor=(1, 1), ncols=len(present), frameon=False)
    return _png(fig)


def _skipping_series(report: SkippingReport, table) -> tuple[list[dt.datetime], list[float]]:
    """Every UTC day of the window (its midnight, naive) with the table's share of blocks skipped
    that day (NaN: no scan of a layout, a gap in the line)."""
    first, last = (dt.datetime.combine(t.astimezone(dt.timezone.utc).date(), dt.time())
                   for t in (report.since, report.until))
    days = [first + dt.timedelta(days=n) for n in range((last - first).days + 1)]
    by_day = {d: (r, n) for d, r, n in table.daily}
    shares = []
    for day in days:
        read, total = by_day.get(day.date().isoformat(), (0, 0))
        shares.append(1 - read / total if total else math.nan)
    return days, shares


def plot_skipping(report: SkippingReport, table: str | None = None) -> bytes | None:
    """The daily share of blocks skipped per table (one table, or the PLOT_TABLES with the most
    blocks scanned); None when no table of the window has any day to plot."""
    from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
    from matplotlib.ticker import PercentFormatter

    tables = [t for t in report.tables if t.daily and (table is None or t.table == table)]
    if not tables:
        return None
    shown = sorted(tables, key=lambda t: (-t.blocks_total, t.table))[:PLOT_TABLES]
    fig = _figure()
    ax = fig.subplots()
    for t in sorted(shown, key=lambda t: t.table):
        days, shares = _skipping_series(report, t)
        ax.plot(days, shares, "o-", markersize=4, label=t.table[:40])
    ax.set_ylim(-0.02, 1.02)
    ax.yaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_ylabel("blocks skipped")
    ax.set_xlim(days[0] - dt.timedelta(hours=12), days[-1] + dt.timedelta(hours=12))
    locator = AutoDateLocator(maxticks=12)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator))
    what = table[:60] if table is not None else (
        "per table" if len(shown) == len(tables) else f"the {len(shown)} tables with the most blocks scanned")
    ax.set_title(f"Daily share of blocks skipped by the routed queries, {what}, last {report.days} days (UTC)",
                 fontsize=9, loc="left")
    ax.legend(fontsize=7, loc="lower right", bbox_to_anchor=(1, 1), ncols=min(len(shown), 5), frameon=False)
    return _png(fig)


def plot_run_seconds(section: RunSection) -> bytes:
    timed = _step_seconds(section.metrics, section.steps)
    steps, seconds = [s for s, _ in timed], [t for _, t in timed]
    fig = _figure()
    ax = fig.subplots()
    ax.barh(steps[::-1], seconds[::-1], color="#1c7ed6")
    ax.set_xlabel("seconds")
    ax.set_title(f"{section.table} {section.partition}: seconds per step (inside the Spark job)", fontsize=9)
    return _png(fig)


def plot_run_blocks(section: RunSection) -> bytes:
    from matplotlib.ticker import MaxNLocator

    sizes = _block_sizes(section)
    expected, real = sizes if sizes else ([], [])
    fig = _figure()
    ax = fig.subplots()
    x = list(range(len(real)))
    ax.bar(x, real, color="#9aa5b1", label="real rows")
    ax.plot(x, expected, "_", color="#e03131", markersize=10, markeredgewidth=2, label="expected rows (plan)")
    ax.set_xlabel("block (by block id)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("rows")
    ax.legend(fontsize=7)
    ax.set_title(f"{section.table} {section.partition}: expected and real rows per block", fontsize=9)
    return _png(fig)


# --------------------------------------------------------------------------- auth


async def require_user(request: Request) -> Any:
    """The Airflow user of the request, authenticated exactly as the api-server's own endpoints
    do it (`airflow.api_fastapi.core_api.security.get_user`): the JWT of an `Authorization:
    Bearer` header, else the `_token` cookie of the UI. 401 without either, 401/403 for an
    expired or invalid token. Imported here, not at module level: every Airflow process
    imports the plugin, only the api-server serves it."""
    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    credentials = await bearer_scheme(request)
    try:
        return await get_user(request, None, credentials)
    except HTTPException:
        raise
    except RuntimeError as e:  # no auth manager in this process: fail closed
        log.warning("cannot authenticate a layouts page request: %s", e)
        raise HTTPException(status_code=401, detail="Not authenticated") from None


def require_run_reader(request: Request, user: Any = Depends(require_user)) -> Any:
    """The user, who must also be allowed to read the runs of the page's DAG."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    dag_id = request.query_params.get("dag_id") or ""
    if not get_auth_manager().is_authorized_dag(method="GET", access_entity=DagAccessEntity.RUN,
                                                details=DagDetails(id=dag_id), user=user):
        raise HTTPException(status_code=403, detail="Forbidden")
    return user


# --------------------------------------------------------------------------- the app


def _settings() -> tuple[str, Path]:
    from layout_core.base.config import load_settings

    settings = load_settings()
    return settings.catalog_url, Path(settings.warehouse)


def create_app(catalog_url: str | None = None, warehouse: str | Path | None = None) -> FastAPI:
    """The plugin's FastAPI app. Without arguments the catalog and warehouse are read from the
    settings (LAYOUT_CATALOG_URL, LAYOUT_WAREHOUSE) at each request."""
    app = FastAPI(title="Layouts", docs_url=None, redoc_url=None, openapi_url=None)
    pool = CatalogPool()
    app.state.catalogs = pool

    def where() -> tuple[str, Path]:
        if catalog_url is not None and warehouse is not None:
            return catalog_url, Path(warehouse)
        url, folder = _settings()
        return catalog_url or url, Path(warehouse) if warehouse is not None else folder

    def base(request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/")

    def html_response(content: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(content, status_code=status, headers=SECURITY_HEADERS)

    def png_response(content: bytes) -> Response:
        return Response(content, media_type="image/png", headers=SECURITY_HEADERS)

    def read(reader: Callable[[Any], Any], empty: Callable[[], Any]):
        return pool.read(where()[0], reader, empty)

    @app.exception_handler(CatalogUnavailable)
    def unavailable(request: Request, exc: CatalogUnavailable):
        return html_response(render_unavailable(exc.reason, base(request)), 503)

    @app.exception_handler(StarletteHTTPException)
    def http_error(request: Request, exc: StarletteHTTPException):
        # raised by the auth dependencies (401/403) and for unknown names (404): a small page
        headers = dict(SECURITY_HEADERS, **(exc.headers or {}))
        return HTMLResponse(render_error(f"{exc.status_code}", str(exc.detail), base(request)),
                            status_code=exc.status_code, headers=headers)

    @app.get("/", response_class=HTMLResponse)
    def tables_page(request: Request, user: Any = Depends(require_user)):
        return html_response(render_tables(read(read_overview, list), base(request)))

    def _skipping(days: str | None) -> SkippingReport:
        try:
            window = parse_days(days)
        except ValueError as e:
            raise HTTPException(status_code=400, detail=str(e)) from None
        now = dt.datetime.now(dt.timezone.utc)
        return read(lambda c: read_skipping(c, window, now), lambda: read_skipping(None, window, now))

    @app.get("/skipping", response_class=HTMLResponse)
    def skipping_page(request: Request, days: str | None = None, user: Any = Depends(require_user)):
        return html_response(render_skipping(_skipping(days), base(request)))

    @app.get("/plot/skipping.png")
    def skipping_plot(request: Request, days: str | None = None, table: str | None = None,
                      user: Any = Depends(require_user)):
        image = plot_skipping(_skipping(days), table)
        if image is None:
            raise HTTPException(status_code=404, detail="No routed query of this window read a layout of "
                                "this table" if table is not None else "No queries were routed in this window")
        return png_response(image)

    def _run(request: Request, dag_id: str, run_id: str) -> RunReport:
        _, folder = where()
        return read(lambda c: read_run(c, folder, dag_id, run_id), lambda: read_run(None, folder, dag_id, run_id))

    @app.get("/run", response_class=HTMLResponse)
    def run_page(request: Request, dag_id: str, run_id: str, user: Any = Depends(require_run_reader)):
        if dag_id == MONITOR_DAG:  # no staging folders, no catalog: its report
            return html_response(render_monitor(read_monitor_run(where()[1], dag_id, run_id), base(request)))
        if dag_id == GC_DAG:  # the same: its report
            return html_response(render_gc(read_gc_run(where()[1], dag_id, run_id), base(request)))
        report = _run(request, dag_id, run_id)
        return html_response(render_run(report, base(request)), 200 if report.sections or report.planned else 404)

    def _section(request: Request, dag_id: str, run_id: str, section: int) -> RunSection:
        report = _run(request, dag_id, run_id)
        if not 0 <= section < len(report.sections):
            raise HTTPException(status_code=404, detail="No such staging folder for this run")
        return report.sections[section]

    @app.get("/plot/run-seconds.png")
    def run_seconds_plot(request: Request, dag_id: str, run_id: str, section: int = 0,
                         user: Any = Depends(require_run_reader)):
        found = _section(request, dag_id, run_id, section)
        if not _step_seconds(found.metrics, found.steps):
            raise HTTPException(status_code=404, detail="No step of this run recorded its seconds yet")
        return png_response(plot_run_seconds(found))

    @app.get("/plot/run-blocks.png")
    def run_blocks_plot(request: Request, dag_id: str, run_id: str, section: int = 0,
                        user: Any = Depends(require_run_reader)):
        found = _section(request, dag_id, run_id, section)
        if _block_sizes(found) is None:
            raise HTTPException(status_code=404, detail="No per-block sizes for this run")
        return png_response(plot_run_blocks(found))

    @app.get("/plot/table.png")
    def table_plot(request: Request, name: str, user: Any = Depends(require_user)):
        table = read(lambda c: read_table(c, name), lambda: None)
        if table is None:
            raise HTTPException(status_code=404, detail="No such table in the layout catalog")
        return png_response(plot_table(table))

    return app


app = create_app()
