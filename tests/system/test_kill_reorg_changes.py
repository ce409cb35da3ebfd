"""SIGKILL in every step of the reoptimize and changes DAGs, then the retry: nothing is lost.

Both tests start from one module-wide setup, made twice from the same inputs:
lineitem (TPC-H SF 0.01) laid out whole by the nightly steps (qdtree,
1,000-row blocks, trained on 8 instances of templates 1-11, as
tests/tpch_layouts.lineitem_trained_on_1_to_11 does), with a query history of
templates 12-22: once in the PostgreSQL catalog the jobs are killed on, once
in a SQLite reference catalog with a warehouse of its own, where each DAG
runs uninterrupted, in-process, to give the expected result.

The DAGs' jobs run exactly as their spark-submits do (tests/helpers/step_runner.py:
entries `reorg` and `changes`, the arguments of dags/layout_reoptimize.py and
dags/layout_changes.py), and are killed with SIGKILL (the process group) once
in each step; each retry resumes at the killed step and is killed in the next:

    plan_reorg      as the step starts
    write_reorg     while Spark writes the new blocks (<run staging>/block_staging/_temporary)
    verify_reorg    as the step starts
    activate_reorg  inside Catalog.activate's transaction: the test holds the
                    row of the base version in layout_versions (the row the
                    transaction retires) FOR UPDATE, waits until the job's
                    session is blocked by it (pg_blocking_pids), and kills it

    stage_changes    while Spark writes the staged new rows (changes_inserted/_temporary)
    write_changes    while Spark writes the changed blocks (block_staging/_temporary)
    verify_changes   as the step starts
    activate_changes inside the activation transaction, the same way

After every kill the version that served before the run still serves: the
catalog names it with the same blocks, and its folders hold the same files with
the same sizes and modification times (also checked while the killed
transaction's row lock is still held): no file of a killed attempt reaches the
router or Spark, which read the folders the catalog names. The routed queries
give the raw table's answers (tests/helpers/spark_answers.py) before the run and
after it. The last retry completes. The new version then equals the reference run's:

    the fingerprint is the row count and order-independent checksum of every
    row with its block's POSITION in the version's block list sorted by block
    id, plus per position the block's rows, tree leaves, statistics, cut bits
    and whether it is shared with the base, and the version's cuts and tree.

Block ids cannot be compared: the two catalogs reserve different ids (the
abandoned attempts below reserve some). Positions can: a partial
reorganization or a change batch keeps the base's blocks that it does not
rewrite (shared, with the base's ids) and gives its own blocks ids from its
new reserved range, in the same order in every run, so the sorted block list
puts the same blocks at the same positions in both runs, and a row that went
to another block (or a block shared in one run and rewritten in the other)
changes the fingerprint. The changes test also compares the answers with raw
tables to which the batch was applied with pandas, independently of the code.

Each test also abandons one attempt of its DAG (another run id) inside the
activation transaction, after the step recorded the version's blocks (shared
ones included): it runs the steps in-process and, once the activation waits
for the test's row lock, terminates its PostgreSQL session, which is what
SIGKILL of the job does to it. The attempt is never retried. After the final
retry, gc with a 1 h grace fails it (stranded), then gc with 0 s purges it:
its own block folders and its staging are deleted, and so is the run staging
of the killed attempts; the live version's folders stay, files unchanged.

The changes test applies its batch to whatever version serves when it starts
(the reorganized one, after the first test), in both catalogs; it first checks
that both catalogs serve the same layout.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import sqlalchemy as sa

from layout_core.base.schema import load_schema
from layout_core.catalog import Catalog
from layout_core.flows.gc import collect_garbage
from layout_core.flows.nightly import steps
from layout_core.workload.tpch import generate, write_sql_file
from tests.conftest import TPCH_TABLES
from tests.helpers.paths import PROJECT
from tests.helpers.spark_answers import assert_same_answers_on_layouts
from tests.helpers.tpch_layouts import query_history
from tests.system.test_kill_steps import STEP_TIMEOUT, StepRun, folder_files, spark_writing, started

# make test kills every nightly step (test_kill_steps.py) and a partial reorganization's run
# (test_partial_reorg.py); these two kill every step of two more flows: make test-full.
pytestmark = [pytest.mark.slow, pytest.mark.extended]

SCHEMA = load_schema("tpch")
TABLE, PARTITION = "lineitem", ""  # laid out whole
Q, WINDOW_HOURS, RANGE_SETS = 1000.0, 24.0, 16
QUERIES = [q.sql for q in generate(1, seed=11, templates=[6, 12, 19], scale_factor=0.01)]
REORG_STEPS = ("plan_reorg", "write_reorg", "verify_reorg", "activate_reorg")
CHANGES_STEPS = ("stage_changes", "write_changes", "verify_changes", "activate_changes")
HOUR, ZERO = dt.timedelta(hours=1), dt.timedelta(0)


# ------------------------------------------------------------------ setup


@dataclass
class Side:
    """A catalog and its warehouse."""

    url: str
    warehouse: Path
    catalog: Catalog

    def env(self) -> dict:
        """The environment of the DAG's spark-submits, for tests/helpers/step_runner.py."""
        return {**os.environ, "LAYOUT_CATALOG_URL": self.url, "LAYOUT_WAREHOUSE": str(self.warehouse),
                "LAYOUT_SCHEMA": "tpch", "LAYOUT_RANGE_SETS": str(RANGE_SETS), "SPARK_LOCAL_IP": "127.0.0.1",
                "PYTHONPATH": str(PROJECT),
                # several files per write task: the writes last long enough to be killed inside
                "PYSPARK_SUBMIT_ARGS": "--conf spark.sql.files.maxRecordsPerFile=300 pyspark-shell"}


@dataclass
class Tables:
    reference: Side  # SQLite: the uninterrupted runs
    live: Side  # PostgreSQL: the killed runs
    engine: sa.Engine  # the test's own sessions on the live catalog (row locks, pg_stat_activity)


@pytest.fixture(scope="module")
def tables(spark, tpch_sf001, tmp_path_factory, pg_catalog_url):
    home = tmp_path_factory.mktemp("kill_reorg_changes")
    log = home / "train.sql"
    write_sql_file(generate(8, seed=1, templates=range(1, 12), scale_factor=0.01), log)
    now = dt.datetime.now(dt.timezone.utc)
    sides = []
    for url, warehouse in ((f"sqlite:///{home / 'reference.db'}", home / "reference_wh"),
                           (pg_catalog_url, home / "wh")):
        catalog = Catalog(url)
        steps.run_in_process(spark, catalog, SCHEMA, steps.RunPaths(warehouse, TABLE, PARTITION, "night-1"),
                             str(tpch_sf001 / f"{TABLE}.parquet"), "qdtree", {"block_rows": 1000}, str(log))
        # the shifted window: 24 instances per template, as tests/system/test_partial_reorg.py has
        # them (with 8 the shift guard tells no set from noise and nothing is reorganized)
        catalog.record_queries(query_history(range(12, 23), now, per_template=24))
        sides.append(Side(url, warehouse, catalog))
    engine = sa.create_engine(pg_catalog_url)
    yield Tables(*sides, engine)
    engine.dispose()
    for side in sides:
        side.catalog.close()


# --------------------------------------------------------------- helpers


def layout_fingerprint(spark, catalog: Catalog):
    """(the active layout, (rows, checksum of every row with its block's position),
    what else must match: per position the block's catalog record, the cuts, the tree).
    See the module docstring for why positions."""
    from pyspark.sql import functions as F

    layout = catalog.active_layout(TABLE, PARTITION)
    position = {b: i for i, b in enumerate(sorted(b.block_id for b in layout.blocks))}
    positions = spark.createDataFrame(sorted(position.items()), "block_id int, block_position int")
    frame = (spark.read.option("basePath", catalog.table(TABLE).location)
             .parquet(*[b.path for b in layout.blocks if b.row_count > 0])
             .join(F.broadcast(positions), "block_id"))
    rows = steps.rows_fingerprint(frame, [*SCHEMA.table(TABLE).column_names, "block_position"])
    blocks = sorted((position[b.block_id], b.row_count, b.leaves, b.block_id not in layout.version.block_ids,
                     json.dumps(b.stats, sort_keys=True), b.union_bits, b.all_bits) for b in layout.blocks)
    cuts = [(c.position, c.kind, c.predicate) for c in layout.cuts]
    return layout, rows, {"blocks": blocks, "cuts": cuts, "trees": layout.trees}


def served_files(layout) -> dict[str, list[tuple[str, int, int]]]:
    return folder_files([b.path for b in layout.blocks if b.row_count > 0])


class Serving:
    """The version that serves when a run starts; `check` asserts it still serves, unchanged."""

    def __init__(self, spark, catalog: Catalog, raw_dir: Path) -> None:
        self.spark, self.catalog, self.raw_dir = spark, catalog, raw_dir
        layout = catalog.active_layout(TABLE, PARTITION)
        self.version, self.files = layout.version.version_id, served_files(layout)
        self.paths = {b.path for b in layout.blocks}

    def check(self, when: str, answers: bool = False) -> None:
        """The catalog serves the same version, its folders hold the same files (names, sizes,
        modification times): what the router and Spark read is unchanged, so its answers are
        too; `answers` runs the queries as well (before the run and after it)."""
        layout = self.catalog.active_layout(TABLE, PARTITION)
        assert layout is not None and layout.version.version_id == self.version, (
            f"{when}: version {self.version} no longer serves")
        assert served_files(layout) == self.files, f"{when}: a served folder changed"
        if answers:
            assert_same_answers_on_layouts(self.spark, self.catalog.snapshot(), SCHEMA, self.raw_dir, QUERIES)


def lock_base_row(holder: sa.Connection, version_id: int) -> int:
    """Hold the base version's row FOR UPDATE in `holder`'s transaction; its backend pid."""
    holder.execute(sa.text("SELECT version_id FROM layout_versions WHERE version_id = :v FOR UPDATE"),
                   {"v": version_id})
    return holder.execute(sa.text("SELECT pg_backend_pid()")).scalar()


def sessions_blocked_by(engine: sa.Engine, holder_pid: int) -> list[int]:
    with engine.connect() as conn:
        return list(conn.execute(sa.text("SELECT pid FROM pg_stat_activity WHERE :me = ANY(pg_blocking_pids(pid))"),
                                 {"me": holder_pid}).scalars())


def kill_in_every_step(tables: Tables, jobs_from, kill_points, serving: Serving, log: Path) -> None:
    """Start the run at the first step; kill each attempt at its kill point (None: inside
    the activation transaction) and check the previous version; resume at the killed step."""
    resume = kill_points[0][0]
    for step, ready in kill_points:
        attempt = StepRun(jobs_from(resume), tables.live.env(), log)
        if ready is None:
            with tables.engine.connect() as holder:
                pid = lock_base_row(holder, serving.version)
                attempt.kill_in(step, lambda: bool(sessions_blocked_by(tables.engine, pid)))
                serving.check(f"killed in {step}'s transaction, lock still held")
                holder.rollback()
        else:
            attempt.kill_in(step, ready)
        serving.check(f"after the kill in {step}")
        resume = step
    StepRun(jobs_from(resume), tables.live.env(), log).finish()


def abandon_in_activation(tables: Tables, base_version: int, activate) -> None:
    """Run `activate(catalog)` (an attempt's activation step, in-process) while the test holds
    the base version's row; once it waits for the row, inside the activation transaction,
    terminate its PostgreSQL session (what SIGKILL of the job does to it)."""
    outcome: list = []
    catalog = Catalog(tables.live.url)

    def run() -> None:
        try:
            activate(catalog)
            outcome.append("activated")
        except Exception as e:  # noqa: BLE001 - the terminated session's error, checked below
            outcome.append(e)

    try:
        with tables.engine.connect() as holder:
            pid = lock_base_row(holder, base_version)
            thread = threading.Thread(target=run, daemon=True)
            thread.start()
            deadline = time.monotonic() + STEP_TIMEOUT
            while not (blocked := sessions_blocked_by(tables.engine, pid)):
                assert thread.is_alive() and time.monotonic() < deadline, f"the activation never waited: {outcome}"
                time.sleep(0.05)
            holder.execute(sa.text("SELECT pg_terminate_backend(p) FROM unnest(CAST(:pids AS int[])) AS p"),
                           {"pids": blocked})
            thread.join(STEP_TIMEOUT)
            holder.rollback()
    finally:
        catalog.close()
    assert len(outcome) == 1 and isinstance(outcome[0], sa.exc.DBAPIError), outcome


def version_of_run(catalog: Catalog, run_id: str):
    (version,) = [v for v in catalog.versions(TABLE) if v.run_id == run_id]
    return version


def own_folders(catalog: Catalog, version_id: int) -> list[Path]:
    """The block folders of a version's reserved ids that exist."""
    from layout_core.spark.blocks import block_folder

    location = catalog.table(TABLE).location
    return [p for b in catalog.version(version_id).block_ids
            if (p := Path(block_folder(location, b, None, PARTITION))).is_dir()]


def collect_and_check(catalog: Catalog, warehouse: Path, previous: Serving, stranded: int,
                      runs: list[steps.RunPaths]) -> None:
    """gc after the final retry: the abandoned attempt is failed, then purged with its own
    folders and staging; the killed run's staging and the previous version go; the live
    version's folders stay as they are."""
    live = catalog.active_layout(TABLE, PARTITION)
    live_files = served_files(live)
    stranded_folders = own_folders(catalog, stranded)
    assert stranded_folders and all(r.staging.is_dir() for r in runs)

    collect_garbage(catalog, warehouse, older_than=HOUR)
    assert catalog.version(stranded).state == "failed"
    assert all(p.is_dir() for p in stranded_folders)
    assert served_files(catalog.active_layout(TABLE, PARTITION)) == live_files

    report = collect_garbage(catalog, warehouse, older_than=ZERO)
    kept = "\n".join(f"{k.what}: {k.reason}" for k in report.kept)
    assert stranded in report.versions_purged and previous.version in report.versions_purged, kept
    assert [str(p) for p in stranded_folders if p.exists()] == [], kept
    assert [str(r.staging) for r in runs if r.staging.exists()] == [], kept
    live_paths = {b.path for b in live.blocks}
    assert [p for p in previous.paths - live_paths if Path(p).exists()] == [], kept
    assert catalog.active_layout(TABLE, PARTITION).version.version_id == live.version.version_id
    assert served_files(live) == live_files


# ------------------------------------------------------------- reoptimize


def test_sigkill_in_every_reoptimize_step_loses_nothing_and_the_retry_matches_an_unkilled_run(
        spark, tpch_sf001, tables, tmp_path):
    from layout_core.flows.reorg import partial
    from layout_core.flows.reorg.shift import ShiftSettings

    settings = ShiftSettings(q=Q, window_hours=WINDOW_HOURS)  # w: 100, as the job's (nothing calibrated)
    reference, live = tables.reference, tables.live
    done = partial.reorganize_in_process(spark, reference.catalog, SCHEMA, reference.warehouse, TABLE,
                                         "reference-reorg", settings, RANGE_SETS)["partitions"][PARTITION]
    assert done["activate_reorg"]["blocks_rewritten"] > 0 and done["activate_reorg"]["blocks_shared"] > 0
    _, expected_rows, expected = layout_fingerprint(spark, reference.catalog)

    catalog = live.catalog
    serving = Serving(spark, catalog, tpch_sf001)
    serving.check("before the run", answers=True)

    # an attempt killed inside its activation transaction and never retried
    abandoned = steps.RunPaths(live.warehouse, TABLE, PARTITION, "layout_reoptimize__abandoned")
    partial.plan_reorg(spark, live.warehouse, abandoned.run_id, catalog, SCHEMA, TABLE, settings)
    partial.write_reorg(spark, abandoned, catalog, SCHEMA)
    partial.verify_reorg(spark, abandoned, catalog, SCHEMA)
    abandon_in_activation(tables, serving.version,
                          lambda c: partial.activate_reorg(spark, abandoned, c, SCHEMA, RANGE_SETS))
    stranded = version_of_run(catalog, abandoned.run_id)
    assert stranded.state == "building" and set(catalog.block_paths(stranded.version_id)) & serving.paths
    serving.check("after the abandoned attempt")

    run = steps.RunPaths(live.warehouse, TABLE, PARTITION, "layout_reoptimize__manual__1")

    def jobs_from(first: str) -> list:  # dags/layout_reoptimize.py's application_args
        args = ["--table", TABLE, "--run-id", run.run_id, "--q", str(Q), "--window-hours", str(WINDOW_HOURS)]
        return [["reorg", [s, *args]] for s in REORG_STEPS[REORG_STEPS.index(first):]]

    kill_in_every_step(tables, jobs_from, [
        ("plan_reorg", started),
        ("write_reorg", spark_writing(run.file("block_staging"))),
        ("verify_reorg", started),
        ("activate_reorg", None),
    ], serving, tmp_path / "runs.log")

    layout, rows, found = layout_fingerprint(spark, catalog)
    assert layout.version.run_id == run.run_id and layout.version.params["reorganized_from"] == serving.version
    assert catalog.version(serving.version).state == "retired"
    assert rows == expected_rows
    assert found == expected
    assert_same_answers_on_layouts(spark, catalog.snapshot(), SCHEMA, tpch_sf001, QUERIES)
    collect_and_check(catalog, live.warehouse, serving, stranded.version_id, [abandoned, run])


# ---------------------------------------------------------------- changes


@dataclass(frozen=True)
class Batch:
    inserted: Path
    deleted: Path
    raw_dir: Path  # the TPC-H tables with the batch applied to lineitem
    rows: int  # lineitem's rows after the batch


def change_batch(tpch: Path, folder: Path) -> Batch:
    """12 deleted keys, 4 updates (delete and insert of a key, shipped 200 days later), 20 new
    rows (copies of existing lines as line number + 10, shipped 30 days earlier); and the
    raw tables with the batch applied by pandas."""
    raw = pq.read_table(tpch / f"{TABLE}.parquet")
    schema = pa.schema([f.with_type(pa.string()) if pa.types.is_string_view(f.type) else f for f in raw.schema])
    lines = raw.cast(schema).to_pandas(date_as_object=False)
    key = ["l_orderkey", "l_linenumber"]
    picks = np.random.default_rng(19).choice(len(lines), 36, replace=False)
    updated = lines.iloc[picks[12:16]].copy()
    updated["l_shipdate"] += pd.Timedelta(days=200)
    updated["l_comment"] = "updated"
    new = lines.iloc[picks[16:]].copy()
    new["l_linenumber"] += 10
    new["l_shipdate"] -= pd.Timedelta(days=30)
    new["l_comment"] = "inserted"
    inserted = pd.concat([updated, new], ignore_index=True)
    deleted = lines.iloc[picks[:16]][key]

    folder.mkdir(parents=True)
    inserted_path, deleted_path, raw_dir = folder / "inserted.parquet", folder / "deleted.parquet", folder / "tpch"
    pq.write_table(pa.Table.from_pandas(inserted, schema=schema, preserve_index=False), inserted_path)
    pq.write_table(pa.Table.from_pandas(deleted, preserve_index=False), deleted_path)
    gone = pd.MultiIndex.from_frame(lines[key]).isin(pd.MultiIndex.from_frame(deleted))
    after = pd.concat([lines[~gone], inserted], ignore_index=True)
    assert gone.sum() == 16 and len(after) == len(lines) + 8
    raw_dir.mkdir()
    pq.write_table(pa.Table.from_pandas(after, schema=schema, preserve_index=False), raw_dir / f"{TABLE}.parquet")
    for t in TPCH_TABLES:
        if t != TABLE:
            (raw_dir / f"{t}.parquet").symlink_to(tpch / f"{t}.parquet")
    return Batch(inserted_path, deleted_path, raw_dir, len(after))


def test_sigkill_in_every_changes_step_loses_nothing_and_the_retry_matches_an_unkilled_run(
        spark, tpch_sf001, tables, tmp_path):
    from layout_core.flows.changes import apply

    reference, live = tables.reference, tables.live
    ref_before, live_before = layout_fingerprint(spark, reference.catalog), layout_fingerprint(spark, live.catalog)
    assert ref_before[1:] == live_before[1:], (
        "the reference and live catalogs serve different layouts (did the reoptimize test fail halfway?)")
    batch = change_batch(tpch_sf001, tmp_path / "batch")
    apply.apply_changes_in_process(spark, reference.catalog, SCHEMA,
                                   steps.RunPaths(reference.warehouse, TABLE, PARTITION, "reference-changes"),
                                   str(batch.inserted), str(batch.deleted), RANGE_SETS)
    ref_layout, expected_rows, expected = layout_fingerprint(spark, reference.catalog)
    assert ref_layout.version.version_id != ref_before[0].version.version_id
    assert expected_rows[0] == batch.rows

    catalog = live.catalog
    serving = Serving(spark, catalog, tpch_sf001)
    serving.check("before the batch", answers=True)

    # an attempt killed inside its activation transaction and never retried
    abandoned = steps.RunPaths(live.warehouse, TABLE, PARTITION, "layout_changes__abandoned")
    apply.stage_changes(spark, abandoned, catalog, SCHEMA, str(batch.inserted), str(batch.deleted))
    apply.write_changes(spark, abandoned, catalog, SCHEMA)
    apply.verify_changes(spark, abandoned, catalog, SCHEMA)
    abandon_in_activation(tables, serving.version,
                          lambda c: apply.activate_changes(spark, abandoned, c, SCHEMA, RANGE_SETS))
    stranded = version_of_run(catalog, abandoned.run_id)
    assert stranded.state == "building" and set(catalog.block_paths(stranded.version_id)) & serving.paths
    serving.check("after the abandoned attempt")

    run = steps.RunPaths(live.warehouse, TABLE, PARTITION, "layout_changes__manual__1")

    def jobs_from(first: str) -> list:  # dags/layout_changes.py's application_args
        args = ["--table", TABLE, "--partition", PARTITION, "--inserted", str(batch.inserted),
                "--deleted", str(batch.deleted), "--run-id", run.run_id]
        return [["changes", [s, *args]] for s in CHANGES_STEPS[CHANGES_STEPS.index(first):]]

    kill_in_every_step(tables, jobs_from, [
        ("stage_changes", spark_writing(run.file("changes_inserted"))),
        ("write_changes", spark_writing(run.file("block_staging"))),
        ("verify_changes", started),
        ("activate_changes", None),
    ], serving, tmp_path / "runs.log")

    layout, rows, found = layout_fingerprint(spark, catalog)
    assert layout.version.run_id == run.run_id and layout.version.params["changes_from"] == serving.version
    assert catalog.version(serving.version).state == "retired"
    assert rows == expected_rows
    assert found == expected
    assert_same_answers_on_layouts(spark, catalog.snapshot(), SCHEMA, batch.raw_dir, QUERIES)
    collect_and_check(catalog, live.warehouse, serving, stranded.version_id, [abandoned, run])
