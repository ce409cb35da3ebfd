"""The nightly DAG on a real Spark standalone cluster (a master and a worker
started from pyspark's `spark-class` on 127.0.0.1), through the
`spark_default` connection: the same blocks as a local[2] run. And the
layout job on such a cluster when a worker dies mid-job: its executor JVM
killed (the worker starts another), or the whole worker killed and a new one
started; the job still finishes with exactly the partition's rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from layout_core.base.jvm import CONF_ENV, driver_java_options, spark_conf_from_env
from tests.helpers.paths import PROJECT
from tests.helpers.tpch_layouts import lineitem_1995_conf

pytestmark = pytest.mark.slow


def _blocks_of(catalog_url: str, table: str, partition: str) -> set[tuple]:
    """(l_orderkey, l_linenumber, block_id) of every row of the active layout."""
    import pyarrow.parquet as pq

    from layout_core.catalog import Catalog

    rows = set()
    with Catalog(catalog_url) as catalog:
        layout = catalog.active_layout(table, partition)
    first = min(b.block_id for b in layout.blocks)  # (each catalog numbers its own blocks)
    for block in layout.blocks:
        data = pq.read_table(block.path, columns=["l_orderkey", "l_linenumber"]).to_pydict()
        rows |= {(k, n, block.block_id - first) for k, n in zip(data["l_orderkey"], data["l_linenumber"])}
    return rows


def test_the_nightly_dag_on_a_standalone_cluster_writes_the_local_runs_blocks(spark, tmp_path, tpch_sf001):
    from layout_core.airflow.dag_run import airflow_env, run_dag_test
    from layout_core.base.schema import load_schema
    from layout_core.catalog import Catalog
    from layout_core.flows.nightly import steps
    from tests.helpers.spark_cluster import master_state, standalone_cluster

    conf = lineitem_1995_conf(tpch_sf001, tmp_path)
    urls = {}
    for name in ("local", "cluster"):
        (tmp_path / name).mkdir()
        urls[name] = f"sqlite:///{tmp_path / name / 'catalog.db'}"
    # the reference: the same steps in this process's local session
    with Catalog(urls["local"]) as catalog:
        steps.run_in_process(spark, catalog, load_schema("tpch"),
                             steps.RunPaths(tmp_path / "local" / "wh", "lineitem", "1995", "night-1"),
                             conf["source"], conf["optimizer"], {"block_rows": conf["block_rows"], **conf["settings"]},
                             conf["query_log"], date_column=conf["date_column"], start=conf["start"], end=conf["end"])
    with standalone_cluster(tmp_path / "spark-logs") as master:
        env = airflow_env(tmp_path / "cluster" / "airflow", urls["cluster"], tmp_path / "cluster" / "wh",
                          spark_master=master)
        # the executors start like the drivers (the JIT's quick tier, the class archive), as an
        # operator of a cluster of short jobs would set it
        env[CONF_ENV] = json.dumps({**spark_conf_from_env(), "spark.executor.extraJavaOptions": driver_java_options()})
        run_dag_test(env, "layout_nightly", conf, log_file=tmp_path / "cluster.log")
        state = master_state(8090)
    # every Spark step ran on the cluster as an application of its own (optimize needs no Spark)
    finished = sorted(app["name"] for app in state["completedapps"])
    assert len([name for name in finished if name.startswith("layout-")]) == 6, finished
    local, cluster = _blocks_of(urls["local"], "lineitem", "1995"), _blocks_of(urls["cluster"], "lineitem", "1995")
    assert len(local) > 5000 and local == cluster


# ---------------------------------------------------------------------------
# A worker dies mid-job: the layout job on the cluster survives the loss of its
# executor JVM, or of the whole worker (replaced by a new one), during write_blocks.

# The job's driver, run as a process of its own (the session of the other tests is
# local[2] and a process has one SparkContext): the nightly steps through
# `run_in_process`, each step's Spark jobs described by its name, so the test
# can wait for write_blocks on the driver's REST API.
DRIVER = '''
import json
import sys
from pathlib import Path

from layout_core.catalog import Catalog
from layout_core.flows.nightly import steps
from layout_core.base.schema import load_schema
from layout_core.spark.session import local_session

args = json.loads(sys.argv[1])
spark = local_session("layout-worker-loss", master=args["master"], extra=args["spark_conf"])
sc = spark.sparkContext


def described(name, step):
    def run(*a, **k):
        settings = args["step_conf"].get(name, {})
        saved = {key: spark.conf.get(key) for key in settings}
        for key, value in settings.items():
            spark.conf.set(key, value)
        sc.setJobDescription(name)
        try:
            return step(*a, **k)
        finally:
            sc.setJobDescription(None)
            for key, value in saved.items():
                spark.conf.set(key, value)
    return run


for name in ("ingest", "featurize", "reduce_vectors", "write_blocks", "verify", "update_catalog"):
    setattr(steps, name, described(name, getattr(steps, name)))
Path(args["status"]).write_text(json.dumps({"app_id": sc.applicationId, "ui": sc.uiWebUrl}))
job = args["job"]
with Catalog(args["catalog"]) as catalog:
    metrics = steps.run_in_process(
        spark, catalog, load_schema("tpch"),
        steps.RunPaths(Path(args["warehouse"]), job["table"], job["partition"], "night-1"),
        job["source"], job["optimizer"], {"block_rows": job["block_rows"], **job["settings"]}, job["query_log"],
        date_column=job["date_column"], start=job["start"], end=job["end"])
Path(args["result"]).write_text(json.dumps(metrics))
spark.stop()
'''

TARGET_STEP = "write_blocks"
# write_blocks as one Spark job (no adaptive execution) of 48 tasks per stage: its last
# stage (the block writers) runs for seconds, long enough to kill an executor inside it.
STEP_CONF = {TARGET_STEP: {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": "48"}}
KILL_AFTER_TASKS = 8  # of the block writers' stage finished, and as many still to run
JOB_TIMEOUT = 150.0  # s for the driver to finish after the kill (it waits forever without executors)

PARTITION = "l_shipdate >= DATE'1995-01-01' AND l_shipdate < DATE'1996-01-01'"
QUERIES = [  # on lineitem's 1995 partition (TPC-H Q1, Q6, Q12, Q14 shapes and plain aggregates)
    "SELECT count(*) AS n, sum(l_quantity) AS q, sum(l_extendedprice * (1 - l_discount)) AS revenue, "
    "count(DISTINCT l_orderkey) AS orders FROM lineitem",
    "SELECT l_returnflag, l_linestatus, sum(l_quantity) AS q, avg(l_discount) AS d, count(*) AS n FROM lineitem "
    "WHERE l_shipdate <= DATE '1995-09-02' GROUP BY l_returnflag, l_linestatus",
    "SELECT sum(l_extendedprice * l_discount) AS revenue FROM lineitem WHERE l_shipdate >= DATE '1995-03-01' "
    "AND l_shipdate < DATE '1995-09-01' AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24",
    "SELECT l_shipmode, sum(CASE WHEN o_orderpriority IN ('1-URGENT', '2-HIGH') THEN 1 ELSE 0 END) AS high, "
    "count(*) AS n FROM orders JOIN lineitem ON o_orderkey = l_orderkey WHERE l_shipmode IN ('MAIL', 'SHIP') "
    "AND l_commitdate < l_receiptdate AND l_shipdate < l_commitdate AND l_receiptdate >= DATE '1995-01-01' "
    "AND l_receiptdate < DATE '1995-07-01' GROUP BY l_shipmode",
    "SELECT 100.00 * sum(CASE WHEN p_type LIKE 'PROMO%' THEN l_extendedprice * (1 - l_discount) ELSE 0 END) "
    "/ sum(l_extendedprice * (1 - l_discount)) AS promo FROM lineitem JOIN part ON l_partkey = p_partkey "
    "WHERE l_shipdate >= DATE '1995-09-01' AND l_shipdate < DATE '1995-10-01'",
]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A master and a worker (1 core, 2g) on free ports, for the tests that kill its processes."""
    from tests.helpers.spark_cluster import free_ports, running_cluster

    port, web_port, worker_web_port = free_ports(3)
    with running_cluster(tmp_path_factory.mktemp("spark-cluster"), port=port, web_port=web_port,
                         worker_web_port=worker_web_port) as running:
        yield running


def _get_json(url: str):
    import json
    import urllib.request

    with urllib.request.urlopen(url, timeout=5) as response:
        return json.load(response)


class LayoutApp:
    """The layout job's driver process on `cluster`; stopped by its pid whatever happens."""

    def __init__(self, cluster, folder, tpch):
        import json
        import subprocess
        import sys

        self.folder, self.cluster = folder, cluster
        (folder / "events").mkdir(parents=True)
        (folder / "driver.py").write_text(DRIVER)
        self.catalog_url = f"sqlite:///{folder / 'catalog.db'}"
        args = {
            "master": cluster.url, "job": lineitem_1995_conf(tpch, folder), "step_conf": STEP_CONF,
            "catalog": self.catalog_url, "warehouse": str(folder / "wh"),
            "status": str(folder / "status.json"), "result": str(folder / "result.json"),
            "spark_conf": {
                "spark.ui.enabled": "true", "spark.ui.port": "0",  # the REST API, on 127.0.0.1
                "spark.eventLog.enabled": "true", "spark.eventLog.dir": (folder / "events").as_uri(),
                "spark.eventLog.compress": "false", "spark.eventLog.rolling.enabled": "false",
                "spark.executor.memory": "1g",
                "spark.executor.extraJavaOptions": driver_java_options(),  # executors start like drivers
            },
        }
        self.log = folder / "driver.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen([sys.executable, str(folder / "driver.py"), json.dumps(args)],
                                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                            cwd=str(PROJECT))
        self.app_id = self.ui = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        from layout_core.airflow.processes import stop_processes
        from tests.helpers.spark_cluster import session_members

        stop_processes([self.process.pid, *session_members(self.process.pid)], timeout=20,
                       processes=[self.process])

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def wait_for_target_stage(self, timeout: float = 150.0) -> dict:
        """Wait until the last stage of a TARGET_STEP job (its block writers) has finished
        KILL_AFTER_TASKS tasks and has as many to go; that stage's REST record."""
        import json
        import time

        deadline = time.monotonic() + timeout
        status = self.folder / "status.json"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"the driver ended (rc {self.process.returncode}) before {TARGET_STEP} ran:\n"
                            f"{self.tail()}")
            if self.app_id is None and status.exists():
                info = json.loads(status.read_text())
                self.app_id, self.ui = info["app_id"], info["ui"]
            if self.app_id:
                try:
                    api = f"{self.ui}/api/v1/applications/{self.app_id}"
                    for job in _get_json(f"{api}/jobs?status=running"):
                        if job.get("description") != TARGET_STEP or len(job["stageIds"]) < 2:
                            continue
                        for stage in _get_json(f"{api}/stages/{max(job['stageIds'])}"):
                            done, tasks = stage["numCompleteTasks"], stage["numTasks"]
                            if (stage["status"] == "ACTIVE" and stage["numActiveTasks"] > 0
                                    and KILL_AFTER_TASKS <= done <= tasks - KILL_AFTER_TASKS):
                                return stage
                except OSError:
                    pass  # the UI is not up yet
            time.sleep(0.1)
        pytest.fail(f"no {TARGET_STEP} stage to kill within {timeout:.0f} s:\n{self.tail()}")

    def wait(self, timeout: float = JOB_TIMEOUT) -> None:
        """Wait for the driver; a driver still running after `timeout` (e.g. waiting for
        executors that never come) is stopped and the test fails."""
        import subprocess

        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.__exit__()
            pytest.fail(f"the layout job did not finish within {timeout:.0f} s after the kill "
                        f"(the driver was stopped):\n{self.tail()}\nmaster: {self.cluster.state()}")
        assert self.process.returncode == 0, f"the layout job failed:\n{self.tail()}"

    def events(self) -> list[dict]:
        import json

        path = self.folder / "events" / self.app_id
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def recovery(events: list[dict]) -> dict:
    """What Spark did after the kill, from the application's event log."""
    descriptions, stage_job = {}, {}
    for e in events:
        if e["Event"] == "SparkListenerJobStart":
            descriptions[e["Job ID"]] = (e.get("Properties") or {}).get("spark.job.description")
            for stage in e["Stage IDs"]:
                stage_job[stage] = e["Job ID"]
    failed = [e for e in events if e["Event"] == "SparkListenerTaskEnd" and e["Task End Reason"]["Reason"] != "Success"]
    removed = [e for e in events if e["Event"] == "SparkListenerExecutorRemoved"]
    added = [e for e in events if e["Event"] == "SparkListenerExecutorAdded"]
    resubmitted = [e["Stage Info"] for e in events
                   if e["Event"] == "SparkListenerStageSubmitted" and e["Stage Info"]["Stage Attempt ID"] > 0]
    jobs = [e for e in events if e["Event"] == "SparkListenerJobEnd"]
    lost_at = removed[0]["Timestamp"] if removed else None
    replacement = next((e for e in added if lost_at and e["Timestamp"] >= lost_at), None)
    last_job_of_step = max(e["Completion Time"] for e in jobs
                           if descriptions.get(e["Job ID"]) == TARGET_STEP)
    return {
        "executors_added": [e["Executor ID"] for e in added],
        "removed": [(e["Executor ID"], e["Removed Reason"]) for e in removed],
        "failed_tasks": sorted({(e["Task End Reason"]["Reason"], descriptions.get(stage_job.get(e["Stage ID"])))
                                for e in failed}),
        "n_failed_tasks": len(failed),
        "resubmitted_stages": [(s["Stage ID"], s["Stage Attempt ID"], s["Number of Tasks"]) for s in resubmitted],
        "jobs_failed": [e["Job ID"] for e in jobs if e["Job Result"]["Result"] != "JobSucceeded"],
        "replacement_registered_s": round((replacement["Timestamp"] - lost_at) / 1000, 1) if replacement else None,
        "step_done_after_loss_s": round((last_job_of_step - lost_at) / 1000, 1) if lost_at else None,
    }


def check_the_layout(spark, app, tpch) -> None:
    """verify passed, the active layout's blocks hold exactly the partition's rows (no
    row lost or written twice, no leftover files), routed answers equal the raw table's."""
    import json
    from collections import Counter
    from datetime import date

    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    from layout_core.base.schema import load_schema
    from layout_core.catalog import Catalog
    from tests.helpers.spark_answers import assert_same_answers_on_layouts

    metrics = json.loads((app.folder / "result.json").read_text())
    raw = pq.read_table(tpch / "lineitem.parquet", columns=["l_orderkey", "l_linenumber", "l_shipdate"])
    shipdate = raw["l_shipdate"].cast(pa.date32())
    expected = raw.filter(pc.and_(pc.greater_equal(shipdate, pa.scalar(date(1995, 1, 1))),
                                  pc.less(shipdate, pa.scalar(date(1996, 1, 1)))))
    assert metrics["ingest"]["rows"] == metrics["verify"]["rows"] == expected.num_rows > 5000
    with Catalog(app.catalog_url) as catalog:
        layout = catalog.active_layout("lineitem", "1995")
        snapshot = catalog.snapshot()
        assert layout.version.version_id == metrics["update_catalog"]["version"]
        assert layout.version.params["input_fingerprint"].startswith(f"{expected.num_rows}:")
    rows = Counter()
    for block in layout.blocks:
        folder = Path(block.path)
        data = pq.read_table(folder, columns=["l_orderkey", "l_linenumber"])
        assert data.num_rows == block.row_count, block
        rows.update(zip(data["l_orderkey"].to_pylist(), data["l_linenumber"].to_pylist()))
    assert rows == Counter(zip(expected["l_orderkey"].to_pylist(), expected["l_linenumber"].to_pylist()))
    partition = app.folder / "wh" / "lineitem" / "dt=1995"
    assert sorted(p.name for p in partition.iterdir()) == sorted(Path(b.path).name for b in layout.blocks)
    leftovers = [p for p in partition.rglob("*") if p.is_file() and not p.name.endswith(".parquet")
                 and not p.name.startswith(".")]
    assert not leftovers and not list(partition.rglob("_temporary")), leftovers
    assert ds.dataset(str(partition), format="parquet", partitioning="hive").count_rows() == expected.num_rows
    assert_same_answers_on_layouts(spark, snapshot, load_schema("tpch"), tpch, QUERIES, {"lineitem": PARTITION})


# make test runs the nightly DAG on the cluster (above) and kills every nightly step
# (test_kill_steps.py); the loss of an executor or a worker mid-write: make test-full.
@pytest.mark.extended
@pytest.mark.timeout(300)
def test_the_layout_job_survives_the_loss_of_its_executor_mid_write(spark, cluster, tpch_sf001, tmp_path):
    import os
    import signal
    import time

    assert len([w for w in cluster.state()["workers"] if w["state"] == "ALIVE"]) == 1
    with LayoutApp(cluster, tmp_path, tpch_sf001) as app:
        stage = app.wait_for_target_stage()
        executors = cluster.executor_pids(app.app_id)
        assert len(executors) == 1, executors  # one worker of 1 core: one executor
        os.kill(executors[0], signal.SIGKILL)
        killed_at = time.monotonic()
        relaunched = None
        while app.process.poll() is None and time.monotonic() < killed_at + JOB_TIMEOUT:
            if relaunched is None and (new := set(cluster.executor_pids(app.app_id)) - set(executors)):
                relaunched = (sorted(new), round(time.monotonic() - killed_at, 1))
            time.sleep(0.2)
        app.wait(max(1.0, killed_at + JOB_TIMEOUT - time.monotonic()))
        finished_after = round(time.monotonic() - killed_at, 1)
        report = recovery(app.events())
    print(f"\nkilled executor pid {executors[0]} in stage {stage['stageId']} at task "
          f"{stage['numCompleteTasks']}/{stage['numTasks']}; new executor process {relaunched}; "
          f"driver done {finished_after} s after the kill; {report}")
    assert relaunched, "the worker did not launch a new executor"
    assert report["jobs_failed"] == [] and report["removed"] and report["removed"][0][0] == "0"
    assert report["executors_added"][:2] == ["0", "1"]
    # the kill hit write_blocks' running tasks; Spark ran them (and the lost shuffle output) again
    assert ("ExecutorLostFailure", TARGET_STEP) in report["failed_tasks"], report
    assert report["resubmitted_stages"], report
    check_the_layout(spark, app, tpch_sf001)


@pytest.mark.extended
@pytest.mark.timeout(300)
def test_the_layout_job_survives_the_loss_of_its_worker_and_finishes_on_a_new_one(spark, cluster, tpch_sf001,
                                                                                 tmp_path):
    import os
    import signal
    import time

    from layout_core.airflow.processes import alive
    from tests.helpers.spark_cluster import free_ports

    workers = [w for w in cluster.workers if w.poll() is None]
    assert len(workers) == 1
    with LayoutApp(cluster, tmp_path, tpch_sf001) as app:
        stage = app.wait_for_target_stage()
        executors = cluster.executor_pids(app.app_id)
        assert len(executors) == 1, executors
        os.kill(workers[0].pid, signal.SIGKILL)  # the worker JVM only: its executor is orphaned
        killed_at = time.monotonic()
        workers[0].wait(timeout=10)
        # the orphaned executor notices that its worker is gone and exits
        while alive(executors[0]) and time.monotonic() < killed_at + 30:
            time.sleep(0.2)
        executor_gone_after = round(time.monotonic() - killed_at, 1)
        assert not alive(executors[0]), "the executor of the killed worker is still running after 30 s"
        assert app.process.poll() is None, f"the driver gave up without a worker:\n{app.tail()}"
        cluster.start_worker(free_ports(1)[0])  # same cores and memory, a new web UI port
        registered_after = round(time.monotonic() - killed_at, 1)
        app.wait(max(1.0, killed_at + JOB_TIMEOUT - time.monotonic()))
        finished_after = round(time.monotonic() - killed_at, 1)
        report = recovery(app.events())
    dead = [w for w in cluster.state()["workers"] if w["state"] == "DEAD"]
    print(f"\nkilled worker pid {workers[0].pid} in stage {stage['stageId']} at task "
          f"{stage['numCompleteTasks']}/{stage['numTasks']}; its executor exited {executor_gone_after} s later; "
          f"new worker ALIVE {registered_after} s after the kill; driver done {finished_after} s after; {report}")
    assert len(dead) == 1 and report["jobs_failed"] == []
    assert report["removed"] and report["removed"][0][0] == "0" and "1" in report["executors_added"]
    assert ("ExecutorLostFailure", TARGET_STEP) in report["failed_tasks"], report
    assert report["resubmitted_stages"], report
    check_the_layout(spark, app, tpch_sf001)
