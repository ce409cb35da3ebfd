"""Shared fixtures: one SparkSession per test session, a tiny TPC-H, catalog URLs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from layout_core.base.jvm import CONF_ENV, driver_java_options

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

TPCH_TABLES = ("region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem")

# The longest modules (minutes each, measured 2026-12-02 in make test; then those only make
# test-full runs), run first: `make test` spreads whole modules
# over its pytest-xdist workers in collection order, and a long module left for last keeps
# one worker busy alone. (The benchmarks at their larger sizes are in tests/bench, outside
# `make test`.)
LONGEST_FIRST = ("test_partial_reorg.py", "test_changes.py", "test_bench_tpch.py", "test_spark_cluster.py",
                 "test_airflow_deployment.py", "test_tpcds.py", "test_changes_property.py", "test_kill_steps.py",
                 "test_pipeline_mto.py", "test_changes_dag.py", "test_bench_shift.py", "test_check.py",
                 "test_bench_trips.py", "test_dips_golden.py", "test_determinism.py", "test_predicate_reasoning.py",
                 "test_workload_shift.py", "test_pipeline_steps.py", "test_one_plan.py", "test_dips_soundness.py",
                 "test_gc.py", "test_rewrite.py", "test_spark_sql.py", "test_bad_queries.py", "test_mto_golden.py",
                 "test_kill_reorg_changes.py", "test_example_star.py", "test_nightly_schedule.py")


BENCH = Path(__file__).resolve().parent / "bench"


def pytest_configure(config):
    # (here rather than in pyproject.toml's markers: --strict-markers needs it registered)
    config.addinivalue_line("markers", "bench: a benchmark at its larger size (tests/bench; run only by "
                                       "make test-bench, -m bench)")
    config.addinivalue_line("markers", "extended: a further case of a guarantee that make test checks once on "
                                       "another test (make test deselects it; make test-full runs it)")


@pytest.hookimpl(tryfirst=True)  # marks the bench items before -m selects
def pytest_collection_modifyitems(config, items):
    # tests/bench: the benchmarks at their larger sizes, marked `bench` and run only by
    # `make test-bench` (`-m bench`); the normal suite keeps a smaller run of each.
    bench, kept = [], []
    for item in items:
        if BENCH in item.path.parents:
            item.add_marker(pytest.mark.bench)
        (bench if BENCH in item.path.parents else kept).append(item)
    if bench and "bench" not in (config.getoption("markexpr") or ""):
        config.hook.pytest_deselected(items=bench)
        items[:] = kept
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest keep their order


# The tests' Spark evaluates expressions interpreted, not as generated Java: on tables of a few
# thousand rows compiling the code costs more than it saves (measured 2026-11-28: two Spark
# test modules 230-261 -> 193-203 s). Spark runs its own tests both ways. LAYOUT_SPARK_CONF
# passes that on to every Spark the tests start in other processes (benchmarks, the step
# runner, the DAGs' spark-submits), with the short-job JVM options that benchmarks would
# otherwise replace (B1 on trips, 20,000 rows: 56.5 -> 36.7 s).
TEST_SESSION_CONF = {"spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
os.environ.setdefault(CONF_ENV, json.dumps({**TEST_SESSION_CONF,
                                           "spark.driver.extraJavaOptions": driver_java_options()}))


@pytest.fixture(scope="session")
def spark():
    """A local SparkSession shared by every test (startup costs ~10 s). Its driver lives for the
    whole run, so it keeps the JIT's top tier, which short jobs leave out (measured in a whole
    make test on 2026-11-29, with local views listed without a Spark job: the in-process Spark
    modules took 0.6-0.9 of their time, those running jobs in other processes the same)."""
    from layout_core.spark.session import local_session

    for_jobs = os.environ[CONF_ENV]  # the other processes' setting, put back once the driver runs
    os.environ[CONF_ENV] = json.dumps({**json.loads(for_jobs),
                                       "spark.driver.extraJavaOptions": driver_java_options(short_job=False)})
    try:
        session = local_session("layout-tests", extra=TEST_SESSION_CONF)
    finally:
        os.environ[CONF_ENV] = for_jobs
    yield session
    session.stop()


def _tpchgen() -> str:
    exe = Path(sys.executable).with_name("tpchgen-cli")
    return str(exe) if exe.exists() else (shutil.which("tpchgen-cli") or "tpchgen-cli")


@pytest.fixture(scope="session")
def tpch_sf001(tmp_path_factory) -> Path:
    """TPC-H at scale factor 0.01 as one Parquet file per table (about 1 s to make)."""
    out = tmp_path_factory.mktemp("tpch_sf001")
    subprocess.run([_tpchgen(), "parquet", "-s", "0.01", f"--output-dir={out}", "-q"], check=True)
    return out


@pytest.fixture
def tpch_views(spark, tpch_sf001):
    """The 8 TPC-H tables registered as Spark temp views over the SF 0.01 Parquet files.
    Registered again for every test: other tests in the shared session replace or drop
    views of the same names (a layout's blocks, a change batch)."""
    for table in TPCH_TABLES:
        spark.read.parquet(str(tpch_sf001 / f"{table}.parquet")).createOrReplaceTempView(table)
    return TPCH_TABLES


def pg_url() -> str | None:
    return os.environ.get("LAYOUT_TEST_PG_URL") or None


@pytest.fixture(scope="module")
def pg_catalog_url():
    """A fresh PostgreSQL catalog for a module whose tests need PostgreSQL itself (row
    locks held across processes, sessions terminated): skipped without LAYOUT_TEST_PG_URL."""
    url = pg_url()
    if not url:
        pytest.skip("this test needs PostgreSQL: set LAYOUT_TEST_PG_URL")
    from tests.helpers.pg_scratch import scratch_pg_schema

    with scratch_pg_schema(url) as scoped_url:
        yield scoped_url


@pytest.fixture(params=["sqlite", "postgres"])
def catalog_url(request, tmp_path):
    """A fresh, empty catalog database: a SQLite file, and PostgreSQL when configured."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'catalog.db'}"
        return
    url = pg_url()
    if not url:
        pytest.skip("PostgreSQL tests need LAYOUT_TEST_PG_URL (e.g. postgresql+psycopg2://postgres@127.0.0.1:5432/test)")
    from tests.helpers.pg_scratch import scratch_pg_schema

    with scratch_pg_schema(url) as scoped_url:
        yield scoped_url


@pytest.fixture
def orders_catalog(tmp_path, monkeypatch):
    """LAYOUT_CATALOG_URL set to a SQLite catalog where orders has two blocks:
    o_totalprice 1..100 (10 rows) and 101..200 (30 rows). Returns (url, version, b1, b2)."""
    from layout_core.catalog import BlockRecord, Catalog
    from layout_core.predicates import value_to_json

    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    monkeypatch.setenv("LAYOUT_CATALOG_URL", url)
    with Catalog(url) as catalog:
        catalog.register_table("orders", str(tmp_path / "orders"))
        version, (b1, b2) = catalog.begin_version("orders", "", "handmade", {}, "r", 2)

        def stats(lo, hi):
            return {"o_totalprice": {"min": value_to_json(lo), "max": value_to_json(hi), "null_count": 0}}

        catalog.set_blocks(version, [BlockRecord(b1, 10, 100, "p1", stats(1, 100), 0, 0),
                                     BlockRecord(b2, 30, 300, "p2", stats(101, 200), 0, 0)])
        catalog.activate(version)
    return url, version, b1, b2
