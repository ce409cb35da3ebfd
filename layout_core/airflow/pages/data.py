"""What the pages read: the catalog (through one shared connection per URL) and the runs'
files in the warehouse, as plain records. Nothing here renders or checks a report's fields."""

from __future__ import annotations

import datetime as dt
import glob
import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import sqlalchemy as sa

from layout_core.base.urls import without_secrets
from layout_core.catalog import Catalog, CatalogUnreachable
from layout_core.flows import names
from layout_core.flows.names import (
    CHANGES_DAG,
    CHANGES_STEPS,
    GC_FOLDER,
    METRICS_FILE,
    MONITOR_FOLDER,
    NIGHTLY_STEPS,
    PLAN_FILE,
    REOPTIMIZE_DAG,
    REORG_PLANNED,
    REORG_STEPS,
    RUNS_FOLDER,
    UNPARTITIONED,
    staging_name,
)

log = logging.getLogger("layout.airflow_plugin")

RECENT_QUERIES = 20  # queries listed on the skipping page (the most recent)
PG_CONNECT_TIMEOUT_S = 5


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
    steps: tuple[str, ...] = NIGHTLY_STEPS  # the steps of its run (run_steps)


@dataclass(frozen=True)
class ReorgPlanned:
    """The table-wide record of a reorganization run's plan_reorg (REORG_PLANNED)."""

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


def _url_with_connect_timeout(url: str) -> str:
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


def _reason_without_secrets(error: BaseException, url: str) -> str:
    """The driver's one-line reason, with the URL and its password taken out."""
    # CatalogUnreachable's `reason` is the driver's alone: its message names the (masked) URL
    reason = str(getattr(error, "reason", None) or getattr(error, "orig", None) or error).strip().splitlines()
    text = reason[0] if reason else type(error).__name__
    try:  # the URL the driver was given, the connect timeout added, first: it is the longer one
        text = without_secrets(text, _url_with_connect_timeout(url))
    except Exception:  # noqa: BLE001 - a URL that cannot be parsed: only the URL as given to take out
        pass
    return without_secrets(text, url)[:300]


def _backend_name(url: str) -> str:
    try:
        return sa.make_url(url).get_backend_name()
    except Exception:  # noqa: BLE001 - only for a log line: an unparseable URL is "unknown"
        return "unknown"


class CatalogPool:
    """One open Catalog per URL, shared by the requests; dropped when its database fails."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._open: dict[str, Catalog] = {}

    def read(self, url: str, reader: Callable[[Any], Any], empty: Callable[[], Any]):
        """reader(catalog), or empty() when the catalog does not exist yet; CatalogUnavailable
        when its database cannot be reached or read."""
        try:
            catalog = self._catalog(url)
            return empty() if catalog is None else reader(catalog)
        except (sa.exc.SQLAlchemyError, ImportError, CatalogUnreachable) as e:
            self.drop(url)
            reason = _reason_without_secrets(e, url)
            log.warning("layout catalog (%s) unavailable: %s", _backend_name(url), reason)
            raise CatalogUnavailable(f"{type(e).__name__}: {reason}") from None

    def _catalog(self, url: str) -> Catalog | None:
        try:
            if _sqlite_file_missing(url):
                return None
            with self._lock:
                catalog = self._open.get(url)
                if catalog is None:
                    catalog = self._open[url] = Catalog(_url_with_connect_timeout(url))
            return catalog
        except ValueError:  # a URL SQLAlchemy parses but cannot use, e.g. a port that is no number
            raise sa.exc.ArgumentError("the catalog URL is malformed") from None

    def drop(self, url: str) -> None:
        with self._lock:
            catalog = self._open.pop(url, None)
        if catalog is not None:
            try:
                catalog.close()
            except Exception:  # noqa: BLE001 - already broken: nothing to release
                pass


def _overview(catalog: Catalog, snapshot, name: str) -> TableOverview:
    active = tuple(
        PartitionSummary(layout.version.partition, layout.version, len(layout.blocks),
                         sum(b.row_count for b in layout.blocks), sum(b.bytes for b in layout.blocks))
        for layout in snapshot.layouts_of(name))
    return TableOverview(name, snapshot.tables[name].partition_column, active, tuple(catalog.versions(name)))


def read_overview(catalog: Catalog) -> list[TableOverview]:
    """Every table of the catalog with its active layouts and all its versions."""
    snapshot = catalog.snapshot()
    return [_overview(catalog, snapshot, name) for name in snapshot.tables]


def read_table(catalog: Catalog, name: str) -> TableOverview | None:
    """One table (None if the catalog has no such table)."""
    if name not in {t.name for t in catalog.tables()}:
        return None
    return _overview(catalog, catalog.snapshot([name]), name)


def read_skipping(catalog: Catalog | None, days: int, now: dt.datetime) -> SkippingReport:
    """What the queries of the last `days` days before `now` read (catalog None: a catalog
    that does not exist yet, no history)."""
    since = now - dt.timedelta(days=days)
    if catalog is None:
        return SkippingReport(days, since, now)
    # inside: workload.history pulls in sqlglot, and every Airflow task process imports the plugin
    from layout_core.workload.history import summarize_history

    history = catalog.query_history(since=since, until=now)
    return SkippingReport(days, since, now, len(history), tuple(summarize_history(history)),
                          tuple(reversed(history[-RECENT_QUERIES:])))


# --------------------------------------------------------------------------- runs in the warehouse


def staged_run_id(dag_id: str, run_id: str) -> str:
    """The run id the DAG's steps get (RUN_ID in dags/layout_nightly.py)."""
    return f"{dag_id}__{run_id}"


def _folder_name(run_id: str) -> str | None:
    """The run's folder name (staging_name: only letters, digits, '_', '.', '-'), None for one that
    would name no folder of its own ("", ".", "..")."""
    name = staging_name(run_id)
    return None if name in ("", ".", "..") else name


def _staged_files(warehouse: Path, staged: str, partitions: str, file_name: str) -> list[tuple[str, str, Path]]:
    """(table, partition, folder) of the run's staging folders (of the partition folders matching
    the glob `partitions`) that hold `file_name`, sorted."""
    name = _folder_name(staged)
    if name is None:
        return []
    root = (Path(warehouse) / RUNS_FOLDER).resolve()
    found = []
    for path in glob.glob(f"{glob.escape(str(root))}/*/{partitions}/{glob.escape(name)}/{file_name}"):
        folder = Path(path).parent
        if folder.resolve().parent.parent.parent != root:  # a symlink out of the warehouse
            continue
        partition = folder.parent.name
        found.append((folder.parent.parent.name, "" if partition == UNPARTITIONED else partition, folder))
    return sorted(found)


def latest_staged_run_id(warehouse: Path, staged: str) -> str:
    """The key a DAG run's steps built under last: `staged`, or `staged__rerun<n>` with the
    largest n (layout_nightly's key once the run was cleared and wait_for_input ran again)."""
    name = _folder_name(staged)
    if name is None:
        return staged
    root = (Path(warehouse) / RUNS_FOLDER).resolve()
    reruns = [Path(path).name[len(name) + len("__rerun"):]
              for path in glob.glob(f"{glob.escape(str(root))}/*/*/{glob.escape(name)}__rerun*")]
    latest = max((int(n) for n in reruns if n.isascii() and n.isdigit()), default=0)
    return f"{staged}__rerun{latest}" if latest else staged


def run_folders(warehouse: Path, staged: str) -> list[tuple[str, str, Path]]:
    """(table, partition, folder) of every staging folder of a run id, sorted. The folder name
    has no '/' and is no "..", so the glob never leaves `<warehouse>/_runs/*/*/`."""
    return _staged_files(warehouse, staged, "*", METRICS_FILE)


def run_steps(metrics: dict, dag_id: str = "") -> tuple[str, ...]:
    """The steps of the run a metrics file belongs to, from the steps it recorded: the nightly's,
    a partial reorganization's or a change batch's; none recorded yet: by the DAG."""
    if any(step in metrics for step in NIGHTLY_STEPS):
        return NIGHTLY_STEPS
    if any(step in metrics for step in REORG_STEPS) or dag_id == REOPTIMIZE_DAG:
        return REORG_STEPS
    if any(step in metrics for step in CHANGES_STEPS) or dag_id == CHANGES_DAG:
        return CHANGES_STEPS
    return NIGHTLY_STEPS


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_run(catalog: Catalog | None, warehouse: Path, dag_id: str, run_id: str) -> RunReport:
    """The staging folders of one DAG run with their metrics, the versions the run built, the
    plan's expected block sizes and (for an active version) the real ones (catalog None: a
    catalog that does not exist yet, the metrics only)."""
    staged = latest_staged_run_id(warehouse, staged_run_id(dag_id, run_id))
    tables = {t.name for t in catalog.tables()} if catalog is not None else set()
    sections = []
    for table, partition, folder in run_folders(warehouse, staged):
        metrics = _read_json(folder / METRICS_FILE)
        metrics = metrics if isinstance(metrics, dict) else {}
        version = expected = rows = None
        if table in tables:
            version = next((v for v in catalog.versions(table, partition) if v.run_id == staged), None)
        if version is not None:
            plan = catalog.plan(version.version_id) or _read_json(folder / PLAN_FILE)
            if isinstance(plan, dict) and isinstance(plan.get("expected_block_rows"), list):
                expected = tuple(float(r) for r in plan["expected_block_rows"])
            if version.state == "active":
                layout = catalog.active_layout(table, partition)
                if layout is not None and layout.version.version_id == version.version_id:
                    rows = {b.block_id: b.row_count for b in layout.blocks}
        sections.append(RunSection(table, partition, metrics, version, expected, rows, run_steps(metrics, dag_id)))
    planned = []
    for table, _, folder in _staged_files(warehouse, staged, UNPARTITIONED, REORG_PLANNED):
        numbers = _read_json(folder / REORG_PLANNED)
        planned.append(ReorgPlanned(table, numbers if isinstance(numbers, dict) else {}))
    return RunReport(dag_id, run_id, staged, tuple(sections), tuple(planned))


# --------------------------------------------------------------------------- monitor and gc reports


def monitor_report_path(warehouse: Path, staged: str) -> Path | None:
    """flows.names.monitor_report_path, or None for a run id that names no folder of its own
    (".."): the page must not read a file outside `<warehouse>/_monitor/<run>/`."""
    return None if _folder_name(staged) is None else names.monitor_report_path(warehouse, staged)


def gc_report_path(warehouse: Path, staged: str) -> Path | None:
    """flows.names.gc_report_path, or None for a run id that names no folder of its own."""
    return None if _folder_name(staged) is None else names.gc_report_path(warehouse, staged)


def read_report_file(warehouse: Path, folder: str, path: Path | None) -> tuple[bool, Any, str | None]:
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


def read_monitor_report(warehouse: Path, staged: str) -> tuple[bool, Any, str | None]:
    """(written, data, problem) of a layout_workload_monitor run's report."""
    return read_report_file(warehouse, MONITOR_FOLDER, monitor_report_path(warehouse, staged))


def read_gc_report(warehouse: Path, staged: str) -> tuple[bool, Any, str | None]:
    """(written, data, problem) of a layout_gc run's report."""
    return read_report_file(warehouse, GC_FOLDER, gc_report_path(warehouse, staged))
