"""Garbage collection: delete the folders no layout serves any more.

Two kinds of folders pile up in the warehouse:

- the block folders of versions that were retired (a newer version serves
  their partition) or that failed, once they have been out of service longer
  than a grace period (queries that started before the switch may still be
  reading them);
- the staging folders of DAG runs (`<warehouse>/_runs/<table>/<partition or
  _all>/<run>/`), once their run can no longer resume.

A version's block folders are the paths the catalog recorded for it plus the
`block_id=<n>` folders of its reserved block ids: a version that failed in
`verify` wrote folders but never got block rows. Block ids are reserved per
table and never reused, so such a folder belongs to that version alone. The
exception: a partial reorganization or a change batch records the blocks it
keeps from its base under the base's ids and folders (`Catalog.set_blocks`
checks both), so a recorded folder `block_id=<n>` of the version's table and
partition is its folder too, whatever range n is in; it goes with the first
of the versions that share it to be purged once no version gc keeps uses it.

What is never deleted: anything outside the warehouse, a folder that any
version gc keeps references (checked by path: an active or building version,
or a retired one still within the grace period, whose folder a partial
reorganization may share with an older version), the folders of a version
newer than its partition's active one (a failed run that may still be
retried; not one that began from a version that no longer serves, which
`activate` would refuse), and the staging folder of a run whose version is
building, or failed and therefore resumable by a retry of that run.

A run killed before it activated leaves a building version, its staging
folder and maybe block folders. Once a newer version serves the partition,
that run can never go live: gc fails it ("stranded"), and a later gc purges
it like any failed version. While its base still serves, a retry may resume
it, so it is kept.

Routes race with gc only through the grace period: a route taken from a
snapshot just before an activation names blocks of the version that
activation retired, and those stay (with every folder they share) until
`retired_at` is older than the grace period. So the grace period must be
longer than a routed query may run.

Each run of the `layout_gc` DAG writes its report to `<warehouse>/_gc/<run>/report.json`
(`report_path`, `write_report`; the Airflow plugin's run page reads it). gc
deletes those report folders once they are older than the query history's
retention (`history_retention_days`), never in a dry run.

Deletions are recorded in the catalog (`layout_purges`) and the versions
marked purged. A retired version is marked after its folders are gone, so a
gc killed halfway leaves it retired and the next gc finishes the job. A failed
version is marked first, because that is what stops a retry of its run from
resuming it (begin_version refuses a purged version) while its folders are
being deleted.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import re
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from layout_core.base.config import load_settings
from layout_core.base.errors import UserError
from layout_core.base.names import RUNS_FOLDER, UNPARTITIONED, staging_name
from layout_core.catalog import Catalog, CatalogError, TableInfo, VersionInfo
from layout_core.flows.names import GC_FOLDER
from layout_core.flows.names import gc_report_path as report_path  # noqa: F401 - the DAG and tests use it

log = logging.getLogger("layout.gc")

UTC = dt.timezone.utc
UNVERSIONED_RUN_AGE = dt.timedelta(hours=6)  # longer than any nightly step takes
BLOCK_FOLDER = re.compile(r"block_id=(\d+)")  # spark.blocks.block_folder names them so
SHARED = "referenced by an active or building version"
SHARED_KEPT = "referenced by a version within the grace period"

_DURATION = re.compile(r"(\d+)([smhd])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days"}


class DurationError(UserError, ValueError):
    """A duration that is not a whole number and a unit."""


def parse_duration(text: str) -> dt.timedelta:
    """'30m', '24h', '7d', '0s' -> a timedelta."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise DurationError(f"bad duration {text!r}: use a whole number and a unit "
                            f"(s, m, h or d), like 30m, 24h or 7d")
    return dt.timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


# -------------------------------------------------------------------- report


@dataclass(frozen=True)
class DeletedFolder:
    """A folder deleted (or, in a dry run, that would be): a block folder of
    `version_id`, or a run staging folder (version_id None)."""

    path: str
    bytes: int
    version_id: int | None = None


@dataclass(frozen=True)
class KeptItem:
    """A version or folder that was a candidate for deletion but stays, and why."""

    what: str
    reason: str


@dataclass(frozen=True)
class GarbageReport:
    dry_run: bool
    cutoff: dt.datetime
    versions_purged: tuple[int, ...] = ()
    folders_deleted: tuple[DeletedFolder, ...] = ()
    staging_deleted: tuple[DeletedFolder, ...] = ()
    kept: tuple[KeptItem, ...] = ()
    history_pruned: int = 0  # queries older than the history retention, deleted from the catalog
    reports_deleted: int = 0  # report folders of earlier gc runs older than the history retention

    @property
    def bytes_freed(self) -> int:
        return sum(f.bytes for f in (*self.folders_deleted, *self.staging_deleted))

    def numbers(self) -> dict[str, Any]:
        """The counts alone (small enough for an Airflow XCom)."""
        return {"dry_run": self.dry_run, "versions_purged": len(self.versions_purged),
                "block_folders_deleted": len(self.folders_deleted),
                "staging_folders_deleted": len(self.staging_deleted),
                "bytes_freed": self.bytes_freed, "kept": len(self.kept), "history_pruned": self.history_pruned,
                "reports_deleted": self.reports_deleted}

    def summary(self) -> str:
        """One line, in numbers."""
        verb = "would delete" if self.dry_run else "deleted"
        return (f"{'dry run: ' if self.dry_run else ''}{len(self.versions_purged)} versions purged; "
                f"{verb} {len(self.folders_deleted)} block folders and {len(self.staging_deleted)} "
                f"staging folders, {self.bytes_freed} bytes; {len(self.kept)} kept "
                f"(cutoff {self.cutoff.isoformat()}); {self.history_pruned} old queries pruned from the history, "
                f"{self.reports_deleted} old gc reports deleted")

    def to_json(self) -> dict[str, Any]:
        return {
            **self.numbers(),
            "cutoff": self.cutoff.isoformat(),
            "purged_version_ids": list(self.versions_purged),
            "folders": [vars(f) for f in self.folders_deleted],
            "staging": [vars(f) for f in self.staging_deleted],
            "kept_items": [vars(k) for k in self.kept],
        }


def write_report(path: str | os.PathLike, report: GarbageReport) -> None:
    """report.to_json() to `path`, atomically: readers never see half a report."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(report.to_json(), indent=1))
    tmp.replace(path)


# ---------------------------------------------------------------- file system


def _norm(path: str | os.PathLike) -> Path:
    """Absolute, with symlinks resolved: paths are compared, and a block folder
    that is a link to somewhere else then counts as outside the warehouse."""
    return Path(os.path.realpath(path))


def _walk_stats(folder: Path) -> Iterable[os.stat_result]:
    """lstat of the folder and everything under it (links are not followed)."""
    yield folder.lstat()
    for root, dirs, files in os.walk(folder):
        for name in (*dirs, *files):
            yield os.lstat(os.path.join(root, name))


def _size(folder: Path) -> int:
    """Bytes of the regular files under a folder."""
    try:
        return sum(st.st_size for st in _walk_stats(folder) if stat.S_ISREG(st.st_mode))
    except FileNotFoundError:  # it went away while we counted
        return 0


def _newest_change(folder: Path, now: dt.datetime) -> dt.datetime:
    """The newest mtime in a folder's tree: a run that writes any file in it is alive."""
    try:
        newest = max(st.st_mtime for st in _walk_stats(folder))
    except FileNotFoundError:  # a file vanished while we looked: someone is at work there
        return now
    return dt.datetime.fromtimestamp(newest, UTC)


class _Protected:
    """Paths that versions gc keeps reference: neither they, nor a folder inside
    one, nor a folder that contains one may be deleted. Each comes with the reason
    (SHARED, or SHARED_KEPT for a version out of service within the grace period)."""

    def __init__(self, paths: Iterable[tuple[str, str]]) -> None:
        self.paths: dict[Path, set[str]] = {}
        self.ancestors: dict[Path, set[str]] = {}
        for path, reason in paths:
            path = _norm(path)
            self.paths.setdefault(path, set()).add(reason)
            for parent in path.parents:
                self.ancestors.setdefault(parent, set()).add(reason)

    def reason(self, path: Path) -> str | None:
        """Why the folder must stay (SHARED before SHARED_KEPT), or None."""
        found = self.paths.get(path, set()) | self.ancestors.get(path, set())
        for parent in path.parents:
            found |= self.paths.get(parent, set())
        if not found:
            return None
        return SHARED if SHARED in found else SHARED_KEPT


# -------------------------------------------------------------- block folders


def _block_folder(table: TableInfo, partition: str, block_id: int) -> Path:
    """Where write_blocks puts a block (spark.blocks.block_folder)."""
    base = Path(table.location)
    if table.partition_column and partition:
        base = base / f"{table.partition_column}={partition}"
    return base / f"block_id={block_id}"


def _name(version: VersionInfo) -> str:
    return f"version {version.version_id} ({version.table}/{version.partition or '-'})"


def _left_service_at(version: VersionInfo) -> dt.datetime:
    if version.state == "retired":
        return version.retired_at
    # Versions failed before failed_at was recorded: their creation is the best we know.
    return version.failed_at or version.created_at


def _due_versions(versions: list[VersionInfo], cutoff: dt.datetime,
                  kept: list[KeptItem]) -> list[VersionInfo]:
    """Retired and failed versions out of service since before the cutoff and
    older than the active version of their partition, or failed ones that began
    from a version that no longer serves (activate would refuse them)."""
    active = {(v.table, v.partition): v.version_id for v in versions if v.state == "active"}
    due = []
    for version in versions:
        if version.state not in ("retired", "failed"):
            continue
        name = _name(version)
        current = active.get((version.table, version.partition))
        left = _left_service_at(version)
        if current is None:
            kept.append(KeptItem(name, f"{version.state}, and its partition has no active version"))
        elif version.version_id > current and (version.state == "retired" or version.replaces == current):
            kept.append(KeptItem(name, f"{version.state}, but newer than the active version {current}"))
        elif left >= cutoff:
            kept.append(KeptItem(name, f"{version.state} at {left.isoformat()}, within the grace period"))
        else:
            due.append(version)
    return due


def _fail_stranded(catalog: Catalog, versions: list[VersionInfo], dry_run: bool, kept: list[KeptItem]) -> int:
    """Fail the building versions that can never go live, because a newer version
    serves their partition (`activate` only retires the version a run began from,
    which is older than the run). They are runs killed or abandoned before they
    activated: failing them hands their block folders and staging to the rules for
    failed versions, which purge them after the grace period. A killed run whose
    base still serves stays building (a retry may resume it) until the next run of
    its partition goes live. Returns how many were failed (in a dry run: none)."""
    active = {(v.table, v.partition): v.version_id for v in versions if v.state == "active"}
    failed = 0
    for version in versions:
        current = active.get((version.table, version.partition))
        if version.state != "building" or current is None or current < version.version_id:
            continue
        reason = (f"stranded: version {current} went live after this run began, so it can never "
                  f"activate (a killed or abandoned run)")
        if dry_run:
            kept.append(KeptItem(_name(version), f"would be failed: {reason}"))
            continue
        try:
            catalog.fail(version.version_id, reason)
        except CatalogError as e:  # it changed state since we listed the versions
            kept.append(KeptItem(_name(version), f"changed state during gc: {e}"))
            continue
        log.info("gc: failed %s: %s", _name(version), reason)
        failed += 1
    return failed


def _unsafe(path: Path, version: VersionInfo, warehouse: Path, protected: _Protected,
            shared: set[Path]) -> str | None:
    """Why a folder of a due version must not be deleted, or None. `shared`: the block
    folders it recorded under ids outside its reserved range (kept from its base)."""
    if warehouse not in path.parents:
        return f"outside the warehouse {warehouse}"
    match = BLOCK_FOLDER.fullmatch(path.name)
    if match is None or (int(match.group(1)) not in version.block_ids and path not in shared):
        ids = version.block_ids
        return (f"not a block folder of version {version.version_id} "
                f"(block_id={ids.start}..{ids.stop - 1})")
    return protected.reason(path)


def _version_folders(version: VersionInfo, table: TableInfo, recorded: list[str], warehouse: Path,
                     protected: _Protected) -> tuple[list[Path], list[KeptItem]]:
    """The existing block folders of a due version: those safe to delete, and
    the others with the reason."""
    candidates = {_norm(p) for p in recorded}
    shared = {p for p in candidates if (m := BLOCK_FOLDER.fullmatch(p.name))
              and p == _norm(_block_folder(table, version.partition, int(m.group(1))))}
    candidates |= {_norm(_block_folder(table, version.partition, b)) for b in version.block_ids}
    folders, refused = [], []
    for path in sorted(candidates):
        if not path.is_dir():
            continue  # never written, or deleted already
        reason = _unsafe(path, version, warehouse, protected, shared)
        if reason is None:
            folders.append(path)
        else:
            refused.append(KeptItem(str(path), reason))
    return folders, refused


def _purge_version(catalog: Catalog, version: VersionInfo, folders: list[Path], dry_run: bool,
                   now: dt.datetime, kept: list[KeptItem]) -> tuple[bool, list[DeletedFolder]]:
    """Delete a due version's folders and mark it purged; (purged?, deleted folders)."""
    vid = version.version_id
    sized = [(path, _size(path)) for path in folders]
    if dry_run:
        return True, [DeletedFolder(str(path), size, vid) for path, size in sized]
    if version.state == "failed":
        try:  # claim it first (see the module docstring)
            catalog.mark_purged(vid)
        except CatalogError as e:  # a retry resumed it since we listed the versions
            kept.append(KeptItem(f"version {vid}", f"changed state during gc: {e}"))
            return False, []
    deleted, complete = [], True
    for path, size in sized:
        try:
            shutil.rmtree(path)
        except FileNotFoundError:
            continue
        except OSError as e:
            kept.append(KeptItem(str(path), f"could not delete: {e}"))
            complete = False
            continue
        catalog.record_purge(vid, str(path), size, purged_at=now)
        deleted.append(DeletedFolder(str(path), size, vid))
        log.info("gc: deleted %s (%d bytes) of version %d", path, size, vid)
    if version.state == "retired":
        if not complete:  # left retired: the next gc tries the rest again
            return False, deleted
        catalog.mark_purged(vid)
    return True, deleted


# ------------------------------------------------------------ staging folders


def _run_folders(runs: Path) -> Iterable[tuple[tuple[str, str, str], Path]]:
    """(table, partition folder, run folder) and path of every run staging folder."""
    if not runs.is_dir():
        return
    for table in sorted(p for p in runs.iterdir() if p.is_dir() and not p.is_symlink()):
        for partition in sorted(p for p in table.iterdir() if p.is_dir() and not p.is_symlink()):
            for run in sorted(p for p in partition.iterdir() if p.is_dir() and not p.is_symlink()):
                yield (table.name, partition.name, run.name), run


def _resumable_runs(versions: list[VersionInfo], purged: set[int]) -> set[tuple[str, str, str]]:
    """Runs whose staging is still needed: their version is building, or failed
    and not purged (begin_version lets a retry of the run resume it)."""
    return {(v.table, v.partition or UNPARTITIONED, staging_name(v.run_id))
            for v in versions
            if v.state == "building" or (v.state == "failed" and v.version_id not in purged)}


def _collect_staging(catalog: Catalog, warehouse: Path, versions: list[VersionInfo], purged: set[int],
                     cutoff: dt.datetime, dry_run: bool, now: dt.datetime,
                     kept: list[KeptItem]) -> list[DeletedFolder]:
    resumable = _resumable_runs(versions, purged)
    versioned = {(v.table, v.partition or UNPARTITIONED, staging_name(v.run_id)) for v in versions}
    deleted = []
    for key, folder in _run_folders(warehouse / RUNS_FOLDER):
        if key in resumable:
            kept.append(KeptItem(str(folder), "its run's version is building or may be retried"))
            continue
        # a run before write_blocks has no version yet: whatever the grace period, its
        # staging stays until it has not changed for UNVERSIONED_RUN_AGE
        oldest_allowed = cutoff if key in versioned else min(cutoff, now - UNVERSIONED_RUN_AGE)
        changed = _newest_change(folder, now)
        if changed >= oldest_allowed:
            kept.append(KeptItem(str(folder), f"changed at {changed.isoformat()}, within the grace period"))
            continue
        size = _size(folder)
        if not dry_run:
            try:
                shutil.rmtree(folder)
            except OSError as e:
                kept.append(KeptItem(str(folder), f"could not delete: {e}"))
                continue
            catalog.record_purge(None, str(folder), size, purged_at=now)
            log.info("gc: deleted staging folder %s (%d bytes)", folder, size)
        deleted.append(DeletedFolder(str(folder), size))
    return deleted


def _prune_reports(warehouse: Path, before: dt.datetime, now: dt.datetime, kept: list[KeptItem]) -> int:
    """Delete the report folders of gc runs (`<warehouse>/_gc/<run>/`) unchanged since `before`."""
    root = warehouse / GC_FOLDER
    if root.is_symlink() or not root.is_dir():
        return 0
    deleted = 0
    for folder in sorted(p for p in root.iterdir() if p.is_dir() and not p.is_symlink()):
        if _newest_change(folder, now) >= before:
            continue
        try:
            shutil.rmtree(folder)
        except OSError as e:
            kept.append(KeptItem(str(folder), f"could not delete: {e}"))
            continue
        deleted += 1
        log.info("gc: deleted the old gc report folder %s", folder)
    return deleted


# ------------------------------------------------------------------- entry


def collect_garbage(catalog: Catalog, warehouse: Path, older_than: dt.timedelta, dry_run: bool = False,
                    now: dt.datetime | None = None, history_retention: dt.timedelta | None = None) -> GarbageReport:
    """Delete what has been out of service longer than `older_than` (see the module docstring),
    and the query history and gc report folders older than `history_retention` (when given).

    `now` (default: the current time; naive means UTC) is there for tests.
    With `dry_run` nothing is deleted or recorded: the report says what would be.
    """
    if older_than < dt.timedelta(0):
        raise ValueError(f"older_than must not be negative, not {older_than}")
    now = (now or dt.datetime.now(UTC))
    now = now.replace(tzinfo=UTC) if now.tzinfo is None else now.astimezone(UTC)
    cutoff = now - older_than
    warehouse = _norm(warehouse)
    tables = {t.name: t for t in catalog.tables()}
    versions = [v for name in tables for v in catalog.versions(name)]
    kept: list[KeptItem] = []
    if _fail_stranded(catalog, versions, dry_run, kept):
        versions = [v for name in tables for v in catalog.versions(name)]
    due = _due_versions(versions, cutoff, kept)
    # Read after the versions: a version activated, retired or begun since then is not
    # due, so its folders are protected too.
    recorded = catalog.block_paths_in_states(("active", "building", "retired", "failed"))
    due_ids = {v.version_id for v in due}
    out_of_service = {v.version_id for v in versions if v.state in ("retired", "failed")}
    protected = _Protected((path, SHARED_KEPT if vid in out_of_service else SHARED)
                           for vid, paths in recorded.items() if vid not in due_ids for path in paths)

    purged: list[int] = []
    folders: list[DeletedFolder] = []
    for version in due:
        found, refused = _version_folders(version, tables[version.table],
                                          recorded.get(version.version_id, []), warehouse, protected)
        kept += refused
        if any(item.reason not in (SHARED, SHARED_KEPT) for item in refused):
            # A wrong warehouse, or a path not named like the version's blocks: leave the
            # version as it is, so that every report shows it until someone looks.
            kept.append(KeptItem(_name(version), "not purged: some of its folders are not safe to delete"))
            continue
        done, deleted = _purge_version(catalog, version, found, dry_run, now, kept)
        folders += deleted
        if done:
            purged.append(version.version_id)
    staging = _collect_staging(catalog, warehouse, versions, set(purged), cutoff, dry_run, now, kept)
    pruned = reports = 0
    if history_retention is not None and not dry_run:
        pruned = catalog.prune_history(now - history_retention)
        reports = _prune_reports(warehouse, now - history_retention, now, kept)

    report = GarbageReport(dry_run, cutoff, tuple(purged), tuple(folders), tuple(staging), tuple(kept), pruned,
                           reports)
    _log_report(report)
    return report


def _log_report(report: GarbageReport) -> None:
    for item in report.kept:
        log.info("gc: kept %s: %s", item.what, item.reason)
    log.info("gc: %s", report.summary())


def run_gc(older_than: str, dry_run: bool = False, catalog_url: str | None = None,
           warehouse: str | None = None) -> GarbageReport:
    """Garbage collection with the usual settings (flags, LAYOUT_* variables, layout.yaml)."""

    grace = parse_duration(older_than)
    settings = load_settings(catalog_url=catalog_url, warehouse=warehouse)
    with Catalog(settings.catalog_url) as catalog:
        return collect_garbage(catalog, Path(settings.warehouse), grace, dry_run=dry_run,
                               history_retention=dt.timedelta(days=settings.history_retention_days))
