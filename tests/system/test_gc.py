"""Garbage collection on a real catalog (SQLite and PostgreSQL) and real folders."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from pathlib import Path

import pytest

from layout_core.catalog import BlockRecord, Catalog, CatalogError
from layout_core.cli import main
from layout_core.flows.gc import (
    DurationError,
    GarbageReport,
    collect_garbage,
    parse_duration,
    report_path,
    staging_name,
    write_report,
)
from tests.helpers.paths import PROJECT

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 3, 1, tzinfo=UTC)
DAY = dt.timedelta(days=1)
ZERO = dt.timedelta(0)


class Clock:
    """The catalog's clock, set by the test."""

    def __init__(self, now: dt.datetime) -> None:
        self.now = now

    def __call__(self) -> dt.datetime:
        return self.now


class Warehouse:
    """A catalog and a warehouse folder with table orders, partitioned by dt."""

    def __init__(self, catalog_url: str, root: Path) -> None:
        self.root = root
        self.clock = Clock(T0)
        self.catalog = Catalog(catalog_url, clock=self.clock)
        self.catalog.register_table("orders", str(root / "orders"), "dt")

    def folder(self, block_id: int, partition: str = "1995") -> Path:
        return self.root / "orders" / f"dt={partition}" / f"block_id={block_id}"

    def staging(self, run_id: str, partition: str = "1995", when: dt.datetime | None = None) -> Path:
        """A run's staging folder with a file, last changed at `when` (default: the clock)."""
        folder = self.root / "_runs" / "orders" / (partition or "_all") / staging_name(run_id)
        (folder / "featurized").mkdir(parents=True, exist_ok=True)
        (folder / "featurized" / "part-0.parquet").write_bytes(b"x" * 300)
        set_mtime(folder, when or self.clock.now)
        return folder

    def begin(self, run_id: str, n_blocks: int = 2, partition: str = "1995",
              record_blocks: bool = True) -> int:
        """A building version whose block folders are on disk (each one 100 bytes)."""
        version_id, ids = self.catalog.begin_version("orders", partition, "qdtree", {}, run_id, n_blocks)
        blocks = []
        for block_id in ids:
            folder = self.folder(block_id, partition)
            folder.mkdir(parents=True)
            (folder / "part-0.parquet").write_bytes(b"p" * 100)
            blocks.append(BlockRecord(block_id, 10, 100, str(folder), {}, 1, 0))
        if record_blocks:
            self.catalog.set_blocks(version_id, blocks)
        self.staging(run_id, partition)
        return version_id

    def activate(self, run_id: str, at: dt.datetime, partition: str = "1995") -> int:
        self.clock.now = at
        version_id = self.begin(run_id, partition=partition)
        self.catalog.activate(version_id)
        return version_id

    def gc(self, older_than: dt.timedelta = ZERO, now: dt.datetime = T0 + 10 * DAY, **kwargs):
        return collect_garbage(self.catalog, self.root, older_than, now=now, **kwargs)

    def block_folders(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.glob("orders/*/block_id=*"))

    def states(self, *version_ids: int) -> list[str]:
        return [self.catalog.version(v).state for v in version_ids]


def set_mtime(folder: Path, when: dt.datetime) -> None:
    stamp = when.timestamp()
    for path in [folder, *folder.rglob("*")]:
        os.utime(path, (stamp, stamp))


@pytest.fixture
def wh(catalog_url, tmp_path):
    warehouse = Warehouse(catalog_url, tmp_path / "warehouse")
    yield warehouse
    warehouse.catalog.close()


@pytest.fixture
def three(wh):
    """Three versions of partition 1995 activated a day apart: v1, v2 retired, v3 active."""
    return [wh.activate(f"run-{i}", T0 + i * DAY) for i in (1, 2, 3)]


# -------------------------------------------------------------------- purging


def test_zero_grace_leaves_only_the_active_versions_folders(wh, three):
    v1, v2, v3 = three
    report = wh.gc()

    assert report.versions_purged == (v1, v2)
    assert wh.states(v1, v2, v3) == ["purged", "purged", "active"]
    assert wh.block_folders() == ["orders/dt=1995/block_id=4", "orders/dt=1995/block_id=5"]
    assert [Path(f.path).name for f in report.folders_deleted] == [f"block_id={b}" for b in range(4)]
    assert [f.version_id for f in report.folders_deleted] == [v1, v1, v2, v2]
    # every run is over: all three staging folders go
    assert sorted(Path(f.path).name for f in report.staging_deleted) == ["run-1", "run-2", "run-3"]
    assert not any((wh.root / "_runs" / "orders" / "1995").iterdir())
    assert report.bytes_freed == 4 * 100 + 3 * 300
    assert report.numbers() == {"dry_run": False, "versions_purged": 2, "block_folders_deleted": 4,
                                "staging_folders_deleted": 3, "bytes_freed": 1300, "kept": 0,
                                "history_pruned": 0, "reports_deleted": 0}

    purges = wh.catalog.purges()
    assert [(p.version_id, p.bytes) for p in purges] == [(v1, 100)] * 2 + [(v2, 100)] * 2 + [(None, 300)] * 3
    assert {p.path for p in purges} == {f.path for f in (*report.folders_deleted, *report.staging_deleted)}
    assert {p.purged_at for p in purges} == {T0 + 10 * DAY}

    again = wh.gc()  # nothing left to do
    assert (again.versions_purged, again.folders_deleted, again.staging_deleted) == ((), (), ())


def test_gc_prunes_query_history_older_than_its_retention_but_not_in_a_dry_run(wh):
    from layout_core.catalog import QueryRecord

    now = T0 + 10 * DAY
    wh.catalog.record_queries([QueryRecord(now - dt.timedelta(days=age), f"SELECT {age}", "f", "route")
                               for age in (40, 31, 29, 1)])
    assert wh.gc(history_retention=dt.timedelta(days=30), dry_run=True).history_pruned == 0
    assert len(wh.catalog.query_history()) == 4
    report = wh.gc(history_retention=dt.timedelta(days=30))
    assert report.history_pruned == 2 and report.numbers()["history_pruned"] == 2
    assert [q.sql for q in wh.catalog.query_history()] == ["SELECT 29", "SELECT 1"]


def test_report_path_and_write_report(tmp_path):
    path = report_path(tmp_path, "layout_gc__manual__2026-01-02T03:04:05+00:00")
    assert path == tmp_path / "_gc" / "layout_gc__manual__2026-01-02T03_04_05_00_00" / "report.json"
    assert report_path(tmp_path, "../../x").parent.parent == tmp_path / "_gc"
    report = GarbageReport(True, T0, (1,), kept=())
    write_report(path, report)
    write_report(path, report)  # a retried task rewrites it
    assert json.loads(path.read_text()) == report.to_json()
    assert [p.name for p in path.parent.iterdir()] == ["report.json"]  # no temporary file left


def test_gc_deletes_report_folders_older_than_the_history_retention_but_not_in_a_dry_run(wh):
    now = T0 + 100 * DAY
    old, recent = (report_path(wh.root, f"layout_gc__run-{n}") for n in ("old", "recent"))
    for path, when in ((old, now - 31 * DAY), (recent, now - 29 * DAY)):
        write_report(path, GarbageReport(False, when))
        set_mtime(path.parent, when)
    (wh.root / "_gc" / "stray.json").write_text("{}")  # not a run's folder: left alone

    assert wh.gc(now=now, dry_run=True, history_retention=30 * DAY).reports_deleted == 0
    assert wh.gc(now=now).reports_deleted == 0  # no retention given: kept
    assert old.exists()
    report = wh.gc(now=now, history_retention=30 * DAY)
    assert report.reports_deleted == 1 and report.numbers()["reports_deleted"] == 1
    assert sorted(p.name for p in (wh.root / "_gc").iterdir()) == ["layout_gc__run-recent", "stray.json"]


def test_dry_run_deletes_and_records_nothing(wh, three):
    v1, v2, v3 = three
    before = wh.block_folders()
    dry = wh.gc(dry_run=True)

    assert wh.block_folders() == before
    assert wh.states(v1, v2, v3) == ["retired", "retired", "active"]
    assert wh.catalog.purges() == []
    assert len(list((wh.root / "_runs" / "orders" / "1995").iterdir())) == 3
    assert dry.dry_run and dry.summary().startswith("dry run: 2 versions purged; would delete 4 block folders")

    real = wh.gc()
    assert (real.versions_purged, real.folders_deleted, real.staging_deleted) == (
        dry.versions_purged, dry.folders_deleted, dry.staging_deleted)


def test_a_grace_period_keeps_recently_retired_versions(wh, three):
    v1, v2, v3 = three  # v1 retired at T0+2d, v2 at T0+3d
    # cutoff: T0+2d6h
    report = wh.gc(older_than=dt.timedelta(hours=30), now=T0 + 3 * DAY + dt.timedelta(hours=12))

    assert report.versions_purged == (v1,)
    assert wh.states(v1, v2, v3) == ["purged", "retired", "active"]
    assert wh.block_folders() == [f"orders/dt=1995/block_id={b}" for b in (2, 3, 4, 5)]
    assert [(k.what, k.reason.split(" at ")[0]) for k in report.kept if k.what.startswith("version")] == [
        (f"version {v2} (orders/1995)", "retired")]
    # the runs' staging folders last changed at T0+1d, T0+2d, T0+3d
    assert [Path(f.path).name for f in report.staging_deleted] == ["run-1", "run-2"]


def test_a_building_version_keeps_its_staging_and_blocks(wh, three):
    v1, v2, v3 = three
    wh.clock.now = T0 + 4 * DAY
    building = wh.begin("run-4", record_blocks=False)  # write_blocks done, update_catalog not yet
    wh.staging("run-4", when=T0)  # even if nothing was written there for long
    report = wh.gc()

    assert wh.states(building) == ["building"]
    assert "orders/dt=1995/block_id=6" in wh.block_folders()
    assert (wh.root / "_runs" / "orders" / "1995" / "run-4").is_dir()
    assert any(k.what.endswith("run-4") and "building" in k.reason for k in report.kept)
    assert report.versions_purged == (v1, v2)


def test_a_folder_referenced_by_a_building_or_active_version_is_kept(wh, three):
    """Checked by path: a folder recorded for a retired version stays while a live one uses it."""
    v1, v2, v3 = three
    shared_with_building = str(wh.folder(0))  # v1's first block folder
    shared_with_active = str(wh.folder(2))  # v2's first block folder
    wh.clock.now = T0 + 4 * DAY
    building, ids = wh.catalog.begin_version("orders", "1995", "qdtree", {}, "run-4", 1)
    wh.catalog.set_blocks(building, [BlockRecord(ids[0], 1, 1, shared_with_building, {}, 0, 0)])
    other, ids = wh.catalog.begin_version("orders", "1996", "qdtree", {}, "run-5", 1)
    wh.catalog.set_blocks(other, [BlockRecord(ids[0], 1, 1, shared_with_active, {}, 0, 0)])
    wh.catalog.activate(other)

    report = wh.gc()
    assert report.versions_purged == (v1, v2)
    assert Path(shared_with_building).is_dir() and Path(shared_with_active).is_dir()
    assert not wh.folder(1).exists() and not wh.folder(3).exists()
    reasons = {k.what: k.reason for k in report.kept}
    assert reasons[shared_with_building] == reasons[shared_with_active] == (
        "referenced by an active or building version")


def test_a_version_newer_than_the_active_one_is_kept(wh, three):
    v1, v2, v3 = three
    wh.clock.now = T0 + 4 * DAY
    newer = wh.begin("run-4", record_blocks=False)
    wh.catalog.fail(newer, "verify failed")  # failed at T0+4d, a retry may come
    report = wh.gc()

    assert wh.states(newer) == ["failed"]
    assert "orders/dt=1995/block_id=6" in wh.block_folders()
    assert (wh.root / "_runs" / "orders" / "1995" / "run-4").is_dir()  # the retry needs it
    assert f"version {newer} (orders/1995)" in {k.what for k in report.kept}
    # and the retry can still resume it
    assert wh.catalog.begin_version("orders", "1995", "qdtree", {}, "run-4", 2)[0] == newer


def test_a_killed_run_that_can_never_go_live_is_failed_then_purged(wh):
    """A run killed after write_blocks (building, folders and staging on disk) while
    another run of the partition went live: gc fails it, and the next gc after the
    grace period deletes its folders and staging; a retry of it is refused."""
    v1 = wh.activate("run-1", T0 + DAY)
    wh.clock.now = T0 + 2 * DAY
    killed = wh.begin("run-2", record_blocks=False)  # block ids 2, 3
    v3 = wh.activate("run-3", T0 + 3 * DAY)

    wh.clock.now = T0 + 10 * DAY
    dry = wh.gc(dry_run=True)
    assert wh.states(killed) == ["building"]
    assert any("would be failed: stranded" in k.reason for k in dry.kept)

    first = wh.gc(older_than=DAY)
    assert wh.states(v1, killed, v3) == ["purged", "failed", "active"]
    assert "stranded: version 3 went live" in wh.catalog.version(killed).reason
    assert "orders/dt=1995/block_id=2" in wh.block_folders()  # failed just now: within the grace period
    assert killed not in first.versions_purged

    wh.clock.now = T0 + 12 * DAY
    second = wh.gc(older_than=DAY, now=T0 + 12 * DAY)
    assert second.versions_purged == (killed,)
    assert wh.block_folders() == ["orders/dt=1995/block_id=4", "orders/dt=1995/block_id=5"]
    assert not (wh.root / "_runs" / "orders" / "1995" / "run-2").exists()
    with pytest.raises(CatalogError, match="is purged; start a new run"):
        wh.catalog.begin_version("orders", "1995", "qdtree", {}, "run-2", 2)


def test_a_killed_run_whose_base_still_serves_is_kept_for_its_retry(wh):
    v1 = wh.activate("run-1", T0 + DAY)
    wh.clock.now = T0 + 2 * DAY
    killed = wh.begin("run-2", record_blocks=False)
    wh.gc()
    assert wh.states(v1, killed) == ["active", "building"]
    assert wh.catalog.begin_version("orders", "1995", "qdtree", {}, "run-2", 2)[0] == killed


def _partial_reorganization(wh, base: int, run_id: str, kept_ids: list[int], at: dt.datetime):
    """A version begun at `at` that keeps the blocks `kept_ids` of `base` (their ids and folders,
    as a partial reorganization or a change batch does) and writes one block of its own."""
    wh.clock.now = at
    version, (own,) = wh.catalog.begin_version("orders", "1995", "qdtree", {}, run_id, 1)
    wh.folder(own).mkdir(parents=True)
    (wh.folder(own) / "part-0.parquet").write_bytes(b"p" * 100)
    wh.staging(run_id)
    wh.catalog.set_blocks(version, [*(BlockRecord(b, 10, 100, str(wh.folder(b)), {}, 1, 0) for b in kept_ids),
                                    BlockRecord(own, 10, 100, str(wh.folder(own)), {}, 1, 0)], replaces=base)
    return version


def test_a_retired_partial_reorganization_is_purged_with_the_base_folder_it_kept(wh):
    """base (blocks 0, 1) -> reorganization keeping block 0 and writing 2 -> a new layout (3, 4).
    The base is purged while the reorganization serves, so its folder 0 stays; once the
    reorganization is out of service too, gc purges it with its folder 2 and folder 0."""
    base = wh.activate("night-1", T0 + DAY)
    reorg = _partial_reorganization(wh, base, "reorg-1", [0], T0 + 2 * DAY)
    wh.catalog.activate(reorg, replaces=base)
    assert wh.gc(now=T0 + 3 * DAY).versions_purged == (base,)
    assert wh.block_folders() == ["orders/dt=1995/block_id=0", "orders/dt=1995/block_id=2"]

    newer = wh.activate("night-2", T0 + 4 * DAY)
    report = wh.gc(now=T0 + 5 * DAY)
    assert report.versions_purged == (reorg,), report.kept
    assert wh.states(base, reorg, newer) == ["purged", "purged", "active"]
    assert wh.block_folders() == ["orders/dt=1995/block_id=3", "orders/dt=1995/block_id=4"]
    assert sorted((Path(f.path).name, f.version_id) for f in report.folders_deleted) == [
        ("block_id=0", reorg), ("block_id=2", reorg)]


def test_a_reorganization_killed_after_recording_its_blocks_is_purged_but_its_kept_folders_stay(wh):
    """A partial reorganization killed inside its activation (blocks recorded, still building)
    while another one from the same base went live, keeping the same base block: gc fails and
    purges the killed one with its own folder and staging; the shared folder serves on."""
    base = wh.activate("night-1", T0 + DAY)
    killed = _partial_reorganization(wh, base, "reorg-killed", [0], T0 + 2 * DAY)
    live = _partial_reorganization(wh, base, "reorg-2", [0], T0 + 3 * DAY)
    wh.catalog.activate(live, replaces=base)

    report = wh.gc()
    assert report.versions_purged == (base, killed), report.kept
    assert wh.states(base, killed, live) == ["purged", "purged", "active"]
    assert wh.block_folders() == ["orders/dt=1995/block_id=0", "orders/dt=1995/block_id=3"]
    assert not (wh.root / "_runs" / "orders" / "1995" / "reorg-killed").exists()
    assert {k.reason for k in report.kept if k.what == str(wh.folder(0))} == {
        "referenced by an active or building version"}


def test_a_failed_version_older_than_the_active_one_is_purged_with_its_unrecorded_folders(wh):
    v1 = wh.activate("run-1", T0 + DAY)
    wh.clock.now = T0 + 2 * DAY
    failed = wh.begin("run-2", record_blocks=False)  # verify failed: folders but no block rows
    wh.catalog.fail(failed, "verify failed")
    v3 = wh.activate("run-3", T0 + 3 * DAY)

    report = wh.gc()
    assert report.versions_purged == (v1, failed)
    assert wh.states(v1, failed, v3) == ["purged", "purged", "active"]
    assert wh.block_folders() == ["orders/dt=1995/block_id=4", "orders/dt=1995/block_id=5"]
    assert sorted(f.version_id for f in report.folders_deleted) == [v1, v1, failed, failed]
    with pytest.raises(CatalogError, match="is purged; start a new run"):
        wh.catalog.begin_version("orders", "1995", "qdtree", {}, "run-2", 2)


def test_a_version_with_folders_outside_the_warehouse_is_left_alone(wh, tmp_path):
    elsewhere = tmp_path / "elsewhere" / "block_id=0"
    elsewhere.mkdir(parents=True)
    stray = wh.root / "orders" / "dt=1995" / "notes"
    stray.mkdir(parents=True)
    wh.clock.now = T0 + DAY
    old, ids = wh.catalog.begin_version("orders", "1995", "qdtree", {}, "run-1", 2)
    wh.catalog.set_blocks(old, [BlockRecord(ids[0], 1, 1, str(elsewhere), {}, 0, 0),
                                BlockRecord(ids[1], 1, 1, str(stray), {}, 0, 0)])
    wh.catalog.activate(old)
    wh.activate("run-2", T0 + 2 * DAY)

    report = wh.gc()
    assert report.versions_purged == () and report.folders_deleted == ()
    assert wh.states(old) == ["retired"]  # so the next report shows it again
    assert elsewhere.is_dir() and stray.is_dir()
    reasons = {k.what: k.reason for k in report.kept}
    assert reasons[str(elsewhere)].startswith("outside the warehouse")
    assert reasons[str(stray)] == f"not a block folder of version {old} (block_id=0..1)"
    assert reasons[f"version {old} (orders/1995)"] == "not purged: some of its folders are not safe to delete"


def test_a_wrong_warehouse_purges_nothing(wh, three, tmp_path):
    report = collect_garbage(wh.catalog, tmp_path / "not-the-warehouse", ZERO, now=T0 + 10 * DAY)
    assert report.versions_purged == () and report.folders_deleted == ()
    assert wh.states(*three) == ["retired", "retired", "active"]
    assert len(wh.block_folders()) == 6


def test_orphaned_staging_goes_after_the_grace_period_recent_staging_stays(wh):
    wh.activate("run-1", T0 + DAY)
    old_orphan = wh.staging("manual__never-got-a-version", when=T0)  # died before write_blocks
    fresh = wh.staging("scheduled__2024-03-10T00:00:00+00:00", when=T0 + 10 * DAY - dt.timedelta(hours=1))
    unpartitioned = wh.staging("run-x", partition="", when=T0)

    report = wh.gc(older_than=dt.timedelta(hours=2))
    deleted = {f.path for f in report.staging_deleted}
    assert deleted == {str(old_orphan), str(unpartitioned), str(wh.root / "_runs/orders/1995/run-1")}
    assert fresh.is_dir() and fresh.name == "scheduled__2024-03-10T00_00_00_00_00"
    assert any(k.what == str(fresh) and "within the grace period" in k.reason for k in report.kept)


def test_zero_grace_keeps_a_run_that_has_no_version_yet(wh):
    """gc while a DAG run is in its first steps (ingest .. optimize): no version row
    exists yet, so only the age of its files can tell it is alive."""
    wh.activate("run-1", T0 + DAY)
    now = T0 + 10 * DAY
    running = wh.staging("manual__featurizing", when=now - dt.timedelta(minutes=20))
    report = wh.gc(older_than=dt.timedelta(0))
    assert running.is_dir()
    assert str(running) not in {f.path for f in report.staging_deleted}


def test_a_file_written_deep_inside_a_run_folder_keeps_it(wh):
    folder = wh.staging("run-9", when=T0)
    set_mtime(folder / "featurized", T0 + 10 * DAY)  # a step rewrote its output just now
    os.utime(folder, (T0.timestamp(), T0.timestamp()))
    report = wh.gc(older_than=dt.timedelta(hours=1))
    assert folder.is_dir() and report.staging_deleted == ()


# ------------------------------------------------------------------ durations


def test_parse_duration():
    assert parse_duration("30m") == dt.timedelta(minutes=30)
    assert parse_duration("24h") == dt.timedelta(hours=24)
    assert parse_duration(" 7d ") == dt.timedelta(days=7)
    assert parse_duration("0s") == ZERO
    for bad in ("", "24", "h", "1.5h", "-1h", "3x", "1h30m"):
        with pytest.raises(DurationError, match="bad duration .*like 30m, 24h or 7d"):
            parse_duration(bad)
    with pytest.raises(ValueError, match="must not be negative"):
        collect_garbage(None, Path("/nowhere"), -DAY)


# ------------------------------------------------------------------------ CLI


def test_cli_gc_prints_json_and_a_bad_duration_is_one_line(wh, three, capsys, caplog):
    v1, v2, _ = three
    url, root = wh.catalog.url, str(wh.root)

    assert main(["gc", "--older-than", "0s", "--dry-run", "--json", "--catalog", url,
                 "--warehouse", root]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert (dry["dry_run"], dry["versions_purged"], dry["purged_version_ids"]) == (True, 2, [v1, v2])
    assert wh.states(v1, v2) == ["retired", "retired"]

    assert main(["gc", "--catalog", url, "--warehouse", root]) == 0  # 24 h after 2024: all due
    out = capsys.readouterr().out
    assert out.splitlines()[-1].startswith("2 versions purged; deleted 4 block folders and 3 staging")
    assert wh.states(v1, v2) == ["purged", "purged"]

    caplog.clear()
    with caplog.at_level(logging.ERROR):
        assert main(["gc", "--older-than", "3x", "--catalog", url, "--warehouse", root]) == 1
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == [
        "bad duration '3x': use a whole number and a unit (s, m, h or d), like 30m, 24h or 7d"]


# ------------------------------------------------------------------------ DAG


@pytest.fixture
def gc_dag(tmp_path, monkeypatch):
    """The gc DAG as the DAG processor parses it (no examples, a private home)."""
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(PROJECT / "dags" / "layout_gc.py"))
    assert bag.import_errors == {}
    return bag.dags["layout_gc"]


@pytest.mark.slow
def test_gc_dag_imports_with_a_daily_schedule_and_params(gc_dag):
    assert [t.task_id for t in gc_dag.tasks] == ["collect_garbage"]
    assert gc_dag.params.dump() == {"older_than": "24h", "dry_run": False}
    assert "0 0 * * *" in str(gc_dag.timetable)  # @daily
    assert gc_dag.max_active_runs == 1


@pytest.mark.slow
def test_gc_dag_task_collects_garbage_and_returns_numbers(gc_dag, wh, three, monkeypatch):
    monkeypatch.setenv("LAYOUT_CATALOG_URL", wh.catalog.url)
    monkeypatch.setenv("LAYOUT_WAREHOUSE", str(wh.root))
    collect = gc_dag.get_task("collect_garbage").python_callable
    v1, v2, _ = three

    dry = collect(params={"older_than": "0s", "dry_run": True}, dag=gc_dag, run_id="manual__dry:1")
    assert dry["versions_purged"] == 2
    assert wh.states(*three) == ["retired", "retired", "active"]
    # the whole report, a dry run's too, under the staged run id (as the plugin's run page reads it)
    written = json.loads(report_path(wh.root, "layout_gc__manual__dry:1").read_text())
    assert {k: written[k] for k in dry} == dry and written["purged_version_ids"] == [v1, v2]
    assert written["dry_run"] is True and len(written["folders"]) == 4

    run_id = "scheduled__2024-03-11T00:00:00+00:00"
    numbers = collect(params={"older_than": "0s", "dry_run": False}, dag=gc_dag, run_id=run_id)
    assert numbers == {"dry_run": False, "versions_purged": 2, "block_folders_deleted": 4,
                       "staging_folders_deleted": 3, "bytes_freed": 1300, "kept": 0, "history_pruned": 0,
                       "reports_deleted": 0}
    json.dumps(numbers)  # an XCom
    assert wh.states(*three) == ["purged", "purged", "active"]
    path = report_path(wh.root, f"layout_gc__{run_id}")
    assert path.parent.name == "layout_gc__scheduled__2024-03-11T00_00_00_00_00"
    written = json.loads(path.read_text())
    assert {k: written[k] for k in numbers} == numbers
    assert written["purged_version_ids"] == [v1, v2] and written["kept_items"] == []
    assert sorted(Path(f["path"]).name for f in written["staging"]) == ["run-1", "run-2", "run-3"]
    # the plugin shows it
    from layout_core.airflow.pages.reports import read_gc_run

    shown = read_gc_run(wh.root, "layout_gc", run_id)
    assert shown.problem is None and shown.report["versions_purged"] == 2 and shown.report["bytes_freed"] == 1300


@pytest.mark.slow
def test_airflow_runs_the_gc_dag(wh, three, tmp_path):
    """`airflow dags test layout_gc` (about 10 s): params reach the task, its counts reach XCom;
    the catalog is the Airflow connection layout_catalog's, not LAYOUT_CATALOG_URL's."""
    from layout_core.airflow.dag_run import airflow_env, run_dag_test

    decoy = tmp_path / "decoy" / "catalog.db"
    env = airflow_env(tmp_path / "airflow", f"sqlite:///{decoy}", wh.root)
    env["AIRFLOW_CONN_LAYOUT_CATALOG"] = json.dumps({"conn_type": "generic", "extra": {"url": wh.catalog.url}})
    run_dag_test(env, "layout_gc", {"older_than": "0s", "dry_run": False}, log_file=tmp_path / "dag.log")
    assert not decoy.exists()
    assert wh.states(*three) == ["purged", "purged", "active"]
    assert len(wh.catalog.purges()) == 4 + 3
    [path] = (wh.root / "_gc").glob("layout_gc__*/report.json")  # the task wrote its report
    assert json.loads(path.read_text())["versions_purged"] == 2


@pytest.mark.slow
def test_three_nightly_layouts_then_gc_leaves_only_the_active_blocks_and_the_router_answers(
        spark, tpch_sf001, tmp_path):
    from layout_core.base.schema import load_schema
    from layout_core.flows.nightly import steps
    from layout_core.skipping.rewrite import rewrite_sql
    from layout_core.skipping.router import RoutingIndex, route_query
    from layout_core.spark.compare import same_rows
    from layout_core.spark.views import register_layout_views

    schema = load_schema("tpch")
    warehouse = tmp_path / "wh"
    with Catalog(f"sqlite:///{tmp_path / 'c.db'}") as catalog:
        for run, block_rows in enumerate((2000, 3000, 5000)):
            steps.run_in_process(spark, catalog, schema, steps.RunPaths(warehouse, "orders", "", f"night-{run}"),
                                 str(tpch_sf001 / "orders.parquet"), "sortkey",
                                 {"block_rows": block_rows, "sort_column": "o_orderdate"})
        report = collect_garbage(catalog, warehouse, dt.timedelta(0))
        active = catalog.active_layout("orders", "")
        assert len(report.versions_purged) == 2
        assert {v.state for v in catalog.versions("orders", "")} == {"active", "purged"}
        on_disk = sorted(p.name for p in (warehouse / "orders").glob("block_id=*"))
        assert on_disk == sorted(f"block_id={b.block_id}" for b in active.blocks)
        assert len(report.folders_deleted) == 8 + 5  # the blocks of the 2,000- and 3,000-row layouts
        assert len(catalog.purges()) == len(report.folders_deleted) + len(report.staging_deleted)
        snapshot = catalog.snapshot()
    sql = "SELECT count(*), sum(o_totalprice) FROM orders WHERE o_orderdate < DATE '1993-06-01'"
    expected = spark.read.parquet(str(tpch_sf001 / "orders.parquet")).where(
        "o_orderdate < DATE '1993-06-01'").selectExpr("count(*)", "sum(o_totalprice)").collect()
    register_layout_views(spark, snapshot, [schema.table("orders")])
    try:
        index = RoutingIndex.from_snapshot(snapshot)
        route = route_query(sql, index, schema)
        assert len(route.refs[0].blocks) < route.refs[0].blocks_total
        same, why = same_rows(expected, spark.sql(rewrite_sql(route, index)).collect())
        assert same, why
    finally:
        spark.read.parquet(str(tpch_sf001 / "orders.parquet")).createOrReplaceTempView("orders")
