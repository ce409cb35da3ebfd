"""layout_nightly unattended: its schedule and settings, the sensor that waits for the day's
batch, sources templated from the logical date, and runs of several days (one version per
partition; re-running a day replaces that partition's version and nothing else)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest

from layout_core.airflow.landing import LandingError, missing_input
from tests.helpers.paths import PROJECT
from tests.helpers.tpch_layouts import write_landing_day

NIGHTLY_VARS = ("LAYOUT_NIGHTLY_SCHEDULE", "LAYOUT_NIGHTLY_CATCHUP", "LAYOUT_NIGHTLY_START_DATE",
                "LAYOUT_NIGHTLY_SOURCE", "LAYOUT_NIGHTLY_PARAMS", "LAYOUT_NIGHTLY_WAIT_TIMEOUT",
                "LAYOUT_NIGHTLY_POKE_INTERVAL", "LAYOUT_STAR_SCHEDULE", "LAYOUT_STAR_PARAMS")


# --- has the batch landed (pure Python) ----------------------------------------------------

def test_missing_input_says_what_is_missing(tmp_path):
    day = tmp_path / "landing" / "dt=2024-03-01"
    assert missing_input(str(day)) == f"{day} does not exist"
    day.mkdir(parents=True)
    (day / "_SUCCESS").write_text("")
    (day / ".part-0.parquet.crc").write_text("")
    assert missing_input(str(day)) == f"{day} holds no data files"
    (day / "_SUCCESS").unlink()
    (day / "part-0.parquet").write_bytes(b"x")
    assert missing_input(str(day)) is None
    assert missing_input(f"file://{day}") is None
    assert missing_input(str(day), ready_file="_SUCCESS") == f"{day} has no _SUCCESS yet"
    (day / "_SUCCESS").write_text("")
    assert missing_input(str(day), ready_file="_SUCCESS") is None
    assert missing_input(str(day / "part-0.parquet")) is None  # a single file
    assert missing_input(str(tmp_path / "landing" / "dt=2024-03-*" / "*.parquet")) is None
    assert missing_input(str(tmp_path / "landing" / "dt=2024-04-*" / "*.parquet")).startswith("nothing matches")


@pytest.mark.parametrize("source, ready_file, message", [
    ("", "", "no source"),
    ("  ", "", "no source"),
    ("/landing/dt=2024-03-01", "../_SUCCESS", "ready_file must be a file name"),
    ("/landing/dt=*/x.parquet", "_SUCCESS", "needs a folder"),
])
def test_missing_input_refuses_what_it_cannot_check(source, ready_file, message):
    with pytest.raises(LandingError, match=message):
        missing_input(source, ready_file)


# --- the DAG's settings (DagBag) -----------------------------------------------------------

def nightly_bag(tmp_path, monkeypatch, **env):
    """layout_nightly.py parsed as the DAG processor does, with these LAYOUT_NIGHTLY_* settings."""
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    monkeypatch.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    for name in NIGHTLY_VARS:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    from airflow.dag_processing.dagbag import BundleDagBag

    return BundleDagBag(dag_folder=str(PROJECT / "dags" / "layout_nightly.py"), bundle_path=PROJECT / "dags")


@pytest.mark.slow
def test_nightly_runs_daily_one_at_a_time_without_catchup_by_default(tmp_path, monkeypatch):
    bag = nightly_bag(tmp_path, monkeypatch)
    assert bag.import_errors == {}
    dag = bag.dags["layout_nightly"]
    # data intervals: the run for day D starts once D is over, with ds = D
    assert type(dag.timetable).__name__ == "CronDataIntervalTimetable"
    assert dag.timetable.expression in ("@daily", "0 0 * * *")
    assert dag.catchup is False and dag.max_active_runs == 1
    sensor = dag.get_task("wait_for_input")
    assert (sensor.timeout, sensor.poke_interval, sensor.mode) == (6 * 3600, 300, "reschedule")
    assert dag.params["source"] == "" and dag.params["ready_file"] == ""
    assert dag.is_paused_upon_creation is True  # no source: paused until one is configured
    # every step reads the partition and the run key from the sensor, ingest also the source
    for step in ("ingest", "featurize", "write_blocks", "update_catalog"):
        args = dag.get_task(step).application_args
        assert "wait_for_input" in args[args.index("--run-id") + 1]
        assert "wait_for_input" in args[args.index("--partition") + 1]
    args = dag.get_task("ingest").application_args
    assert "wait_for_input" in args[args.index("--source") + 1]
    # the star DAG keeps its own arguments
    star_ingest = bag.dags["layout_star_nightly"].get_task("lineitem.ingest").application_args
    assert "{{ params.partition or ds }}" in star_ingest


@pytest.mark.slow
def test_nightly_settings_come_from_the_environment(tmp_path, monkeypatch):
    bag = nightly_bag(tmp_path, monkeypatch, LAYOUT_NIGHTLY_SCHEDULE="30 2 * * *", LAYOUT_NIGHTLY_CATCHUP="true",
                      LAYOUT_NIGHTLY_START_DATE="2026-01-15", LAYOUT_NIGHTLY_WAIT_TIMEOUT="90",
                      LAYOUT_NIGHTLY_POKE_INTERVAL="5",
                      LAYOUT_NIGHTLY_SOURCE="/landing/orders/dt={{ ds }}",
                      LAYOUT_NIGHTLY_PARAMS='{"table": "orders", "optimizer": "qdtree", "block_rows": 700}')
    assert bag.import_errors == {}
    dag = bag.dags["layout_nightly"]
    assert dag.timetable.expression == "30 2 * * *" and dag.catchup is True
    assert dag.start_date.isoformat().startswith("2026-01-15")
    sensor = dag.get_task("wait_for_input")
    assert (sensor.timeout, sensor.poke_interval, sensor.mode) == (90, 5, "poke")
    assert dag.params["source"] == "/landing/orders/dt={{ ds }}" and dag.is_paused_upon_creation is False
    assert (dag.params["table"], dag.params["optimizer"], dag.params["block_rows"]) == ("orders", "qdtree", 700)

    for off in ("", "none"):
        dag = nightly_bag(tmp_path, monkeypatch, LAYOUT_NIGHTLY_SCHEDULE=off).dags["layout_nightly"]
        assert type(dag.timetable).__name__ == "NullTimetable"  # manual runs only


@pytest.mark.slow
def test_the_star_dag_takes_its_defaults_from_the_environment_and_waits_paused_for_a_source(tmp_path, monkeypatch):
    star = nightly_bag(tmp_path, monkeypatch, LAYOUT_STAR_SCHEDULE="@daily").dags["layout_star_nightly"]
    assert star.params["source_dir"] == "" and star.is_paused_upon_creation is True
    bag = nightly_bag(tmp_path, monkeypatch, LAYOUT_STAR_SCHEDULE="@daily",
                      LAYOUT_STAR_PARAMS='{"source_dir": "/landing/shop", "date_column": "sa_day", "block_rows": 2000}')
    star = bag.dags["layout_star_nightly"]
    assert (star.params["source_dir"], star.params["date_column"], star.params["block_rows"]) == (
        "/landing/shop", "sa_day", 2000)
    assert star.is_paused_upon_creation is False and star.params["optimizer"] == "mto"  # the others keep theirs
    bad = nightly_bag(tmp_path, monkeypatch, LAYOUT_STAR_PARAMS='{"source": "/x"}')
    (error,) = bad.import_errors.values()
    assert "LAYOUT_STAR_PARAMS names unknown params ['source']" in error


@pytest.mark.slow
@pytest.mark.parametrize("name, value, message", [
    ("LAYOUT_NIGHTLY_SCHEDULE", "every night", "LAYOUT_NIGHTLY_SCHEDULE must be a cron expression"),
    ("LAYOUT_NIGHTLY_WAIT_TIMEOUT", "-5", "LAYOUT_NIGHTLY_WAIT_TIMEOUT must be a whole number"),
    ("LAYOUT_NIGHTLY_POKE_INTERVAL", "1m", "LAYOUT_NIGHTLY_POKE_INTERVAL must be a whole number"),
    ("LAYOUT_NIGHTLY_CATCHUP", "maybe", "LAYOUT_NIGHTLY_CATCHUP must be true or false"),
    ("LAYOUT_NIGHTLY_START_DATE", "yesterday", "LAYOUT_NIGHTLY_START_DATE must be a date"),
    ("LAYOUT_NIGHTLY_PARAMS", '{"sourse": "/x"}', "unknown params \\['sourse'\\]"),
    ("LAYOUT_NIGHTLY_PARAMS", '["x"]', "must be a JSON object"),
    ("LAYOUT_NIGHTLY_PARAMS", '{"block_rows": 0}', "LAYOUT_NIGHTLY_PARAMS: block_rows"),
])
def test_a_bad_setting_is_an_import_error_naming_it(tmp_path, monkeypatch, name, value, message):
    import re

    bag = nightly_bag(tmp_path, monkeypatch, **{name: value})
    (error,) = bag.import_errors.values()
    assert re.search(message, error), error
    assert "layout_nightly" not in bag.dags


# --- the sensor, asked directly with a run's context ---------------------------------------

def run_context(dag, ds: str | None, clear_number: int = 0, **params) -> dict:
    values = {name: dag.params[name] for name in dag.params}
    values.update(params)
    context = {"params": values, "dag": dag,
               "dag_run": SimpleNamespace(run_id=f"scheduled__{ds}T00:00:00+00:00", clear_number=clear_number)}
    if ds is not None:
        context.update(ds=ds, ds_nodash=ds.replace("-", ""))
    return context


@pytest.mark.slow
def test_the_sensor_resolves_the_source_from_the_logical_date_and_waits_for_it(tmp_path, monkeypatch):
    from airflow.sdk.exceptions import AirflowFailException

    landing = tmp_path / "landing" / "lineitem"
    dag = nightly_bag(tmp_path, monkeypatch, LAYOUT_NIGHTLY_SOURCE=f"{landing}/dt={{{{ ds }}}}").dags["layout_nightly"]
    sensor = dag.get_task("wait_for_input")

    context = run_context(dag, "2024-03-01")
    assert sensor.poke(context).is_done is False
    assert sensor._waiting_for == f"{landing}/dt=2024-03-01 does not exist"
    (landing / "dt=2024-03-01").mkdir(parents=True)
    (landing / "dt=2024-03-01" / "part-0.parquet").write_bytes(b"x")
    assert sensor.poke(run_context(dag, "2024-03-02")).is_done is False  # another day: still missing
    done = sensor.poke(context)
    assert done.is_done is True
    assert done.xcom_value == {"source": f"{landing}/dt=2024-03-01", "partition": "2024-03-01", "start": "",
                               "end": "", "run_key": "layout_nightly__scheduled__2024-03-01T00:00:00+00:00"}

    # a cleared run (a re-run of the day) builds under a key of its own
    again = sensor.poke(run_context(dag, "2024-03-01", clear_number=2))
    assert again.xcom_value["run_key"] == "layout_nightly__scheduled__2024-03-01T00:00:00+00:00__rerun2"
    # partition, start and end render too; a ready file must be there as well
    custom = sensor.poke(run_context(dag, "2024-03-01", partition="{{ ds_nodash }}", start="{{ ds }}",
                                     date_column="l_shipdate", ready_file="_SUCCESS"))
    assert custom.is_done is False and sensor._waiting_for.endswith("dt=2024-03-01 has no _SUCCESS yet")
    (landing / "dt=2024-03-01" / "_SUCCESS").write_text("")
    custom = sensor.poke(run_context(dag, "2024-03-01", partition="{{ ds_nodash }}", start="{{ ds }}",
                                     date_column="l_shipdate", ready_file="_SUCCESS"))
    assert (custom.xcom_value["partition"], custom.xcom_value["start"]) == ("20240301", "2024-03-01")

    # no source at all, or a date template in a run without a logical date: fail at once
    with pytest.raises(AirflowFailException, match="no source"):
        sensor.poke(run_context(dag, "2024-03-01", source=""))
    with pytest.raises(AirflowFailException, match="cannot render source"):
        sensor.poke(run_context(dag, None))


# --- real runs: airflow dags test per day --------------------------------------------------

def block_folders(warehouse: Path, day: str) -> dict[str, float]:
    return {p.name: p.stat().st_mtime for p in sorted((warehouse / "lineitem" / f"dt={day}").iterdir())}


# make test runs days from their landing folders in the deployment (test_airflow_deployment.py)
# and replaces a partition's layout with a new run (tests/spark/test_pipeline_steps.py); the
# re-run of one day under `airflow dags test`: make test-full.
@pytest.mark.slow
@pytest.mark.extended
def test_a_day_runs_from_its_landing_folder_and_a_rerun_replaces_only_its_day(tmp_path, tpch_sf001, spark):
    """`airflow dags test` of one day (fineblock with settings), the next day laid out by
    the same steps in process, then the first day's batch corrected and its day run again, in process."""
    from layout_core.airflow.dag_run import _airflow, airflow_env, run_dag_test
    from layout_core.base.errors import ToolError
    from layout_core.base.schema import load_schema
    from layout_core.catalog import Catalog
    from layout_core.flows.nightly import steps
    from layout_core.workload.tpch import generate, write_sql_file

    landing, warehouse = tmp_path / "landing" / "lineitem", tmp_path / "warehouse"
    catalog_url = f"sqlite:///{tmp_path / 'catalog.db'}"
    env = airflow_env(tmp_path / "airflow", catalog_url, warehouse)
    env["LAYOUT_NIGHTLY_SOURCE"] = f"{landing}/dt={{{{ ds }}}}"
    env.update(LAYOUT_NIGHTLY_WAIT_TIMEOUT="4", LAYOUT_NIGHTLY_POKE_INTERVAL="1")
    log = tmp_path / "queries.sql"
    write_sql_file(generate(6, seed=2, templates=[1, 6, 12, 14, 19]), log)
    # table, source and partition from the defaults and the sensor
    conf = {"optimizer": "fineblock", "block_rows": 1000, "query_log": str(log),
            "settings": {"num_feat": 8, "min_support": 2, "exclude_columns": ["l_shipdate"]}}
    rows = {"2024-03-01": write_landing_day(tpch_sf001, landing, "2024-03-01", "1995"),
            "2024-03-02": write_landing_day(tpch_sf001, landing, "2024-03-02", "1996")}
    assert rows["2024-03-01"] > 3000 and rows["2024-03-02"] > 3000 and rows["2024-03-01"] != rows["2024-03-02"]
    run_dag_test(env, "layout_nightly", conf, logical_date="2024-03-01", log_file=tmp_path / "2024-03-01.log")
    with Catalog(catalog_url) as catalog:
        steps.run_in_process(spark, catalog, load_schema("tpch"),
                             steps.RunPaths(warehouse, "lineitem", "2024-03-02", "night-2"),
                             str(landing / "dt=2024-03-02"), "sortkey", {"block_rows": 3000})

    with Catalog(catalog_url) as catalog:
        first = {day: catalog.versions("lineitem", day) for day in rows}
        for day, versions in first.items():
            (version,) = versions
            assert version.state == "active"
            layout = catalog.active_layout("lineitem", day)
            assert sum(b.row_count for b in layout.blocks) == rows[day]
            assert len(layout.blocks) > 1
        (version,) = first["2024-03-01"]
        assert version.run_id.startswith("layout_nightly__manual__") and version.optimizer == "fineblock"
        layout = catalog.active_layout("lineitem", "2024-03-01")
        assert all(1000 <= b.row_count for b in layout.blocks)
        assert len(layout.cuts) >= 1 and not any("l_shipdate" in c.sql for c in layout.cuts)  # excluded
        day1_folders = sorted(f"block_id={b.block_id}" for b in layout.blocks)
        day2_blocks = [(b.block_id, b.row_count, b.path) for b in catalog.active_layout("lineitem", "2024-03-02").blocks]
    assert sorted(block_folders(warehouse, "2024-03-01")) == day1_folders
    (metrics,) = (warehouse / "_runs" / "lineitem" / "2024-03-01").glob("*/metrics.json")
    metrics = json.loads(metrics.read_text())
    assert set(metrics) == {"ingest", "featurize", "reduce", "optimize", "write_blocks", "verify", "update_catalog"}
    assert metrics["verify"]["rows"] == rows["2024-03-01"]
    day2_folders = block_folders(warehouse, "2024-03-02")

    # the day's batch is corrected and the day run again (the DAG's steps, in process, as a
    # re-run of its day gets them): a new version of that partition only
    rows["2024-03-01"] = write_landing_day(tpch_sf001, landing, "2024-03-01", "1995", drop_every=7)
    with Catalog(catalog_url) as catalog:
        steps.run_in_process(spark, catalog, load_schema("tpch"),
                             steps.RunPaths(warehouse, "lineitem", "2024-03-01", "layout_nightly__rerun"),
                             str(landing / "dt=2024-03-01"), conf["optimizer"],
                             {"block_rows": conf["block_rows"], **conf["settings"]}, conf["query_log"])
    with Catalog(catalog_url) as catalog:
        old, new = sorted(catalog.versions("lineitem", "2024-03-01"), key=lambda v: v.version_id)
        assert old.version_id == first["2024-03-01"][0].version_id
        assert (old.state, new.state) == ("retired", "active") and new.replaces == old.version_id
        layout = catalog.active_layout("lineitem", "2024-03-01")
        assert sum(b.row_count for b in layout.blocks) == rows["2024-03-01"]
        assert not set(new.block_ids) & set(old.block_ids)
        # the other day: the same single version, blocks and folders, untouched
        assert catalog.versions("lineitem", "2024-03-02") == first["2024-03-02"]
        assert [(b.block_id, b.row_count, b.path)
                for b in catalog.active_layout("lineitem", "2024-03-02").blocks] == day2_blocks
    assert block_folders(warehouse, "2024-03-02") == day2_folders

    # a day whose batch never lands: the sensor fails after its timeout, naming the folder
    with pytest.raises(ToolError):
        run_dag_test(env, "layout_nightly", conf, logical_date="2024-03-03", log_file=tmp_path / "missing.log")
    log = (tmp_path / "missing.log").read_text()
    assert "the input never arrived within 4 s" in log
    assert f"{landing}/dt=2024-03-03 does not exist" in log
    with Catalog(catalog_url) as catalog:
        assert catalog.versions("lineitem", "2024-03-03") == []
    assert not (warehouse / "_runs" / "lineitem" / "2024-03-03").exists()  # ingest never ran

    # backfill over the range: Airflow plans one run per day, skipping days that have a run
    # unless told to reprocess them (2024-03-02 has a version but no Airflow run; the runs
    # themselves need a scheduler: tests/system/test_airflow_deployment.py runs one)
    def dry_run(*extra: str) -> str:
        done = subprocess.run([_airflow(), "backfill", "create", "--dag-id", "layout_nightly", "--from-date",
                               "2024-03-01", "--to-date", "2024-03-04", "--max-active-runs", "1", "--dry-run",
                               *extra], env=env, capture_output=True, text=True, check=True)
        return done.stdout

    def days(planned: str) -> list[str]:
        table = planned.split("Runs to be attempted", 1)[1]  # (the params above name the range's ends)
        return [d for d in ("2024-03-01", "2024-03-02", "2024-03-03", "2024-03-04") if f"{d} 00:00:00" in table]

    assert days(dry_run()) == ["2024-03-02", "2024-03-04"]
    assert days(dry_run("--reprocess-behavior", "failed")) == ["2024-03-02", "2024-03-03", "2024-03-04"]
    assert days(dry_run("--reprocess-behavior", "completed")) == ["2024-03-01", "2024-03-02", "2024-03-03",
                                                                  "2024-03-04"]
