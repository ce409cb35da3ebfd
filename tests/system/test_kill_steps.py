"""SIGKILL in every step of the nightly layout, then the retry: nothing is lost.

A layout_nightly run of lineitem's 1995 rows (qdtree, 1,000-row blocks) runs
its jobs exactly as the DAG's spark-submits do (tests/helpers/step_runner.py: the
same entry points, one process so that a kill lands in a known step). The run
is killed with SIGKILL (the process group: Python driver, Spark JVM, workers)
once in each step, and each retry (the step again, then the next steps) is
killed in the next one:

    ingest        while Spark writes the staged input (its _temporary exists)
    featurize     while Spark writes the featurized rows
    reduce        as the step starts
    optimize      as the step starts (no Spark: it is quick)
    write_blocks  while Spark writes the block files
    verify        as the step starts
    update_catalog  inside the activation transaction on PostgreSQL: the test
                  holds a row lock the transaction needs (the row of the version
                  it retires), waits until the job blocks on it, and kills it

After every kill the previous version still serves: the catalog names it with
the same blocks, and its folders hold the same files (names, sizes, modification
times); routed queries give the raw table's answers before the run and after it.
The last retry completes; its blocks hold the same rows in the same places as
an uninterrupted run's (count and checksum of (row, block index)). A run killed
and abandoned after write_blocks is failed by gc once the retried run is live,
and a second gc deletes its block folders and staging.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from layout_core.airflow.processes import process_tree
from layout_core.base.schema import load_schema
from layout_core.catalog import Catalog
from layout_core.flows.gc import collect_garbage
from layout_core.flows.nightly import steps
from layout_core.workload.tpch import generate
from tests.helpers.paths import PROJECT
from tests.helpers.spark_answers import assert_same_answers_on_layouts
from tests.helpers.tpch_layouts import lineitem_1995_conf

pytestmark = pytest.mark.slow

SCHEMA = load_schema("tpch")
TABLE, PARTITION = "lineitem", "1995"
STEP_TIMEOUT = 240.0  # s for a step (with its Spark start) to reach the kill point
IN_1995 = "l_shipdate >= DATE '1995-01-01' AND l_shipdate < DATE '1996-01-01'"


class StepRun:
    """tests/helpers/step_runner.py in a session of its own, its stdout read as it comes."""

    def __init__(self, jobs: list, env: dict, log: Path) -> None:
        self.log = log
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.step_runner", json.dumps(jobs)], cwd=PROJECT, env=env,
            stdout=subprocess.PIPE, stderr=log.open("ab"), text=True, start_new_session=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        with self.log.open("a") as out:
            for line in self.process.stdout:
                self.lines.append(line.rstrip("\n"))
                out.write(line)
                out.flush()

    def saw(self, marker: str) -> bool:
        return marker in self.lines

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-40:])

    def kill_in(self, step: str, ready) -> None:
        """SIGKILL the whole process tree once `step` started and `ready()` holds,
        before the step finished; fail if it finishes or dies first."""
        deadline = time.monotonic() + STEP_TIMEOUT
        while time.monotonic() < deadline:
            if self.saw(f"STEP-DONE {step}") or self.process.poll() is not None:
                pytest.fail(f"{step} ended before the kill point:\n{self.tail()}")
            if self.saw(f"STEP-START {step}") and ready():
                break
            time.sleep(0.002)
        else:
            pytest.fail(f"{step} did not reach the kill point in {STEP_TIMEOUT:.0f} s:\n{self.tail()}")
        victims = process_tree([self.process.pid])
        os.killpg(self.process.pid, signal.SIGKILL)
        for pid in victims:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        assert self.process.wait(30) == -signal.SIGKILL
        assert not self.saw(f"STEP-DONE {step}")

    def finish(self) -> None:
        code = self.process.wait(STEP_TIMEOUT * 2)
        self.reader.join(10)
        assert code == 0, f"the retry failed ({code}):\n{self.tail()}"


def spark_writing(folder: Path):
    """True while a Spark write into `folder` is in progress (its tasks write
    under _temporary, which the job's commit removes)."""
    return lambda: (folder / "_temporary").is_dir()


def started():
    return True


def nightly_jobs(conf: dict, run_id: str, first: str) -> list:
    """The DAG's jobs and arguments (dags/layout_nightly.py), from step `first` on."""
    run = ["--table", TABLE, "--partition", PARTITION, "--run-id", run_id]
    extra = {
        "ingest": ["--source", conf["source"], "--date-column", conf["date_column"],
                   "--start", conf["start"], "--end", conf["end"]],
        "featurize": ["--query-log", conf["query_log"], "--optimizer", conf["optimizer"],
                      "--block-rows", str(conf["block_rows"]), "--settings", json.dumps(conf["settings"])],
    }
    order = list(steps_in_order())
    return [[f"pipeline:{s}", [*run, *extra.get(s, [])]] for s in order[order.index(first):]]


def steps_in_order():
    from layout_core.flows.names import NIGHTLY_STEPS

    return NIGHTLY_STEPS


def blocks_fingerprint(spark, catalog: Catalog, version_id: int) -> tuple[int, int]:
    """(rows, checksum) of every row with its block's index in the version (block ids
    differ between runs; the block a row is in must not)."""
    from pyspark.sql import functions as F

    version = catalog.version(version_id)
    paths = catalog.block_paths(version_id)
    frame = (spark.read.option("basePath", catalog.table(TABLE).location).parquet(*paths)
             .withColumn("block_index", F.col("block_id") - F.lit(version.block_ids.start)))
    return steps.rows_fingerprint(frame, [*SCHEMA.table(TABLE).column_names, "block_index"])


def folder_files(paths: list[str]) -> dict[str, list[tuple[str, int, int]]]:
    """Each folder's files with their sizes and modification times: a file rewritten in
    place changes too."""
    return {p: sorted((f.name, (stat := f.stat()).st_size, stat.st_mtime_ns) for f in Path(p).iterdir())
            for p in paths}


def waiting_on_a_lock(engine: sa.Engine, holder_pid: int):
    """True once a session waits for the lock the test holds (the job's activation;
    other tests' sessions may wait for other locks meanwhile)."""
    def ready() -> bool:
        with engine.connect() as conn:
            return bool(conn.execute(sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE :me = ANY(pg_blocking_pids(pid))"),
                {"me": holder_pid}).scalar())
    return ready


def test_sigkill_in_every_nightly_step_loses_nothing_and_the_retry_matches_an_unkilled_run(
        spark, tpch_sf001, tmp_path, pg_catalog_url):
    conf = lineitem_1995_conf(tpch_sf001, tmp_path)
    warehouse = tmp_path / "wh"
    queries = [q.sql for q in generate(1, seed=11, templates=[1, 6, 12, 14, 19], scale_factor=0.01)]
    date_range = dict(date_column=conf["date_column"], start=conf["start"], end=conf["end"])

    # what an uninterrupted run makes, in a warehouse and catalog of its own
    with Catalog(f"sqlite:///{tmp_path / 'reference.db'}") as reference:
        steps.run_in_process(spark, reference, SCHEMA, steps.RunPaths(tmp_path / "ref", TABLE, PARTITION, "ref"),
                             conf["source"], conf["optimizer"], {"block_rows": conf["block_rows"]},
                             conf["query_log"], **date_range)
        (ref_version,) = [v.version_id for v in reference.versions(TABLE) if v.state == "active"]
        expected = blocks_fingerprint(spark, reference, ref_version)

    catalog = Catalog(pg_catalog_url)
    # the layout that serves before the run: sortkey, 2,000-row blocks
    steps.run_in_process(spark, catalog, SCHEMA, steps.RunPaths(warehouse, TABLE, PARTITION, "night-0"),
                         conf["source"], "sortkey", {"block_rows": 2000}, conf["query_log"], **date_range)
    (previous,) = [v.version_id for v in catalog.versions(TABLE) if v.state == "active"]
    previous_files = folder_files(catalog.block_paths(previous))
    # a run that is abandoned after write_blocks, as a kill in verify leaves it
    abandoned = steps.RunPaths(warehouse, TABLE, PARTITION, "night-abandoned")
    table = SCHEMA.table(TABLE)
    steps.ingest(spark, abandoned, table, conf["source"], catalog, partition_column="dt", **date_range)
    steps.featurize(spark, abandoned, SCHEMA, conf["query_log"], "qdtree", {"block_rows": 3000}, catalog)
    steps.reduce_vectors(spark, abandoned, table)
    steps.optimize(abandoned, table)
    steps.write_blocks(spark, abandoned, table, catalog)
    (stranded,) = [v.version_id for v in catalog.versions(TABLE) if v.state == "building"]
    stranded_folders = catalog.block_paths(stranded) or [
        str(p) for p in (warehouse / TABLE / f"dt={PARTITION}").glob("block_id=*")
        if int(p.name.split("=")[1]) in catalog.version(stranded).block_ids]
    assert stranded_folders and abandoned.staging.is_dir()

    def previous_still_serves(when: str, answers: bool = False) -> None:
        """The catalog serves the same version from the same files (names, sizes, times): what
        the router and Spark read is unchanged; `answers` runs the queries too (before, after)."""
        layout = catalog.active_layout(TABLE, PARTITION)
        assert layout is not None and layout.version.version_id == previous, (
            f"{when}: version {previous} no longer serves")
        assert folder_files([b.path for b in layout.blocks]) == previous_files, f"{when}: a served folder changed"
        if answers:
            assert_same_answers_on_layouts(spark, catalog.snapshot(), SCHEMA, tpch_sf001, queries,
                                           raw_filters={TABLE: IN_1995})

    previous_still_serves("before the run", answers=True)
    run = steps.RunPaths(warehouse, TABLE, PARTITION, "layout_nightly__manual_1")
    env = {**os.environ, "LAYOUT_CATALOG_URL": pg_catalog_url, "LAYOUT_WAREHOUSE": str(warehouse),
           "LAYOUT_SCHEMA": "tpch", "SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": str(PROJECT),
           # several files per write task: the writes last long enough to be killed inside
           "PYSPARK_SUBMIT_ARGS": "--conf spark.sql.files.maxRecordsPerFile=300 pyspark-shell"}
    kill_points = [
        ("ingest", spark_writing(run.file("input"))),
        ("featurize", spark_writing(run.file("featurized"))),
        ("reduce", started),
        ("optimize", started),
        ("write_blocks", spark_writing(run.file("block_staging"))),
        ("verify", started),
        ("update_catalog", None),  # inside the activation transaction, below
    ]
    engine = sa.create_engine(pg_catalog_url)
    log = tmp_path / "runs.log"
    resume = "ingest"
    try:
        for step, ready in kill_points:
            attempt = StepRun(nightly_jobs(conf, run.run_id, resume), env, log)
            if ready is None:
                with engine.connect() as holder:
                    # the row of the version the activation retires: it waits here, mid-transaction
                    holder.execute(sa.text("SELECT version_id FROM layout_versions WHERE version_id = :v "
                                           "FOR UPDATE"), {"v": previous})
                    holder_pid = holder.execute(sa.text("SELECT pg_backend_pid()")).scalar()
                    attempt.kill_in(step, waiting_on_a_lock(engine, holder_pid))
                    previous_still_serves(f"killed in {step}'s transaction, lock still held")
                    holder.rollback()
            else:
                attempt.kill_in(step, ready)
            previous_still_serves(f"after the kill in {step}")
            resume = step
        StepRun(nightly_jobs(conf, run.run_id, resume), env, log).finish()
    finally:
        engine.dispose()

    layout = catalog.active_layout(TABLE, PARTITION)
    assert layout.version.version_id not in (previous, stranded)
    assert catalog.version(previous).state == "retired"
    assert blocks_fingerprint(spark, catalog, layout.version.version_id) == expected
    assert_same_answers_on_layouts(spark, catalog.snapshot(), SCHEMA, tpch_sf001, queries,
                                   raw_filters={TABLE: IN_1995})

    # gc: the abandoned run can never go live now; it is failed, then purged with its files
    collect_garbage(catalog, warehouse, older_than=dt.timedelta(hours=1))
    assert catalog.version(stranded).state == "failed"
    assert all(Path(p).is_dir() for p in stranded_folders)
    report = collect_garbage(catalog, warehouse, older_than=dt.timedelta(0))
    assert stranded in report.versions_purged and previous in report.versions_purged
    assert not any(Path(p).exists() for p in stranded_folders)
    assert not abandoned.staging.exists() and not run.staging.exists()
    assert all(Path(p).is_dir() for p in catalog.block_paths(layout.version.version_id))
    catalog.close()
    shutil.rmtree(warehouse, ignore_errors=True)
