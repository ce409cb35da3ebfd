"""TPC-DS at SF 0.01, as users run it: every template runs in Spark SQL; `layout bench
tpcds` on template 25, which reads store sales, store returns and catalog sales (sortkey and
mto, --spark: every test query answers as on the raw tables; three templates that read every
fact table: tests/bench/test_bench_tpcds_full.py, `make test-bench`); and `layout check` on a
warehouse of TPC-DS tables laid out by mto through the nightly steps: random queries,
rewritten with the router's block filters, give the raw answers (NULL foreign keys,
date keys, two-column keys)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from layout_core.base.schema import load_schema
from layout_core.catalog import Catalog
from layout_core.cli import main
from layout_core.flows.nightly import steps
from layout_core.workload import tpcds
from layout_core.workload.tpch import write_sql_file
from tests.conftest import TPCH_TABLES

pytestmark = pytest.mark.slow

SCHEMA = load_schema("tpcds")
# the tables each benchmarked template reads: store sales, returns and catalog sales (25);
# inventory (21) and web sales (62) too, in make test-bench
TABLES_READ = {21: {"inventory", "warehouse", "item", "date_dim"},
               25: {"store_sales", "store_returns", "catalog_sales", "date_dim", "store", "item"},
               62: {"web_sales", "warehouse", "ship_mode", "web_site", "date_dim"}}
# parents before children (returns reference sales by two columns); about 10-20 blocks each at SF 0.01
BLOCK_ROWS = {"date_dim": 5000, "item": 20, "store_sales": 2000, "store_returns": 200}


@pytest.fixture(scope="module")
def bench_work(tmp_path_factory):
    return tmp_path_factory.mktemp("bench_tpcds")


@pytest.fixture(scope="module")
def tpcds_data(bench_work):
    """SF 0.01 where `layout bench tpcds --work` keeps it, so that the benchmark finds it made."""
    from layout_core.workload.tpcds_data import generate_tpcds

    return generate_tpcds(0.01, bench_work / "tpcds_sf0.01")


def run_tpcds_bench(work, templates: tuple[int, ...]) -> tuple[dict, object, tuple[int, ...]]:
    """(the JSON, the work folder, the templates) of `layout bench tpcds --spark` at SF 0.01,
    sortkey and mto, 2 instances of each template, in `work` (where `tpcds_data` made the data)."""
    # its own process: the benchmark starts and stops a SparkSession of its own
    done = subprocess.run(
        [sys.executable, "-m", "layout_core.cli", "bench", "tpcds", "--sf", "0.01", "--block-rows", "1000",
         "--per-template", "2", "--templates", ",".join(map(str, templates)), "--layouts", "sortkey,mto",
         "--spark", "--work", str(work), "--json"],
        capture_output=True, text=True, timeout=1500, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), work, templates


@pytest.fixture(scope="module")
def tpcds_b2(bench_work, tpcds_data):
    return run_tpcds_bench(bench_work, (25,))


def test_the_report_has_b1s_shape_and_mto_reads_fewer_fact_blocks(tpcds_b2):
    result, work, templates = tpcds_b2
    assert result["dataset"] == "TPC-DS SF 0.01" and result["test_queries"] == len(templates)
    assert set(result["tables_laid_out"]) == set().union(*(TABLES_READ[t] for t in templates))
    assert "web_page" not in result["tables_laid_out"]  # no template of these reads it
    for layout in result["layouts"].values():
        assert layout["rows_read"] >= result["rows_needed"] > 0  # skipping never loses a row
        assert set(layout["blocks_per_template"]) == {str(t) for t in templates}
    # dimension filters reach the facts only as join-induced cuts: mto skips fact blocks that
    # sortkey's date order cannot (with one training query per template, its date_dim is no better)
    facts = ("store_sales", "catalog_sales", "web_sales", "inventory", "store_returns")
    fact_blocks = {name: sum(layout["tables"][t]["blocks_read"] for t in facts if t in layout["tables"])
                   for name, layout in result["layouts"].items()}
    assert fact_blocks["mto"] < 0.7 * fact_blocks["sortkey"], fact_blocks
    assert (work / "b1_per_template.png").stat().st_size > 0 and (work / "result.json").exists()


def test_rewritten_queries_give_the_raw_answers(tpcds_b2):
    spark, templates = tpcds_b2[0]["spark"], tpcds_b2[2]
    assert spark["queries"] == len(templates) and spark["identical_answers"], spark["mismatches"]


# make test runs a template through the benchmark with --spark (above); every one of the
# 36 as generated, on the raw tables: make test-full.
@pytest.mark.extended
def test_every_template_runs_in_spark_sql(spark, tpcds_data, tpch_sf001):
    answered = 0
    try:
        for table, path in tpcds_data.items():
            spark.read.parquet(str(path)).createOrReplaceTempView(table)
        for q in tpcds.generate(1, seed=2):
            rows = spark.sql(q.sql).collect()
            answered += bool(rows and any(v not in (None, 0) for v in rows[0]))
    finally:  # the shared session's other tests find TPC-H's customer under that name
        for table in tpcds_data:
            spark.catalog.dropTempView(table)
        for table in TPCH_TABLES:
            spark.read.parquet(str(tpch_sf001 / f"{table}.parquet")).createOrReplaceTempView(table)
    assert answered >= 20  # of 36: at SF 0.01 some instances select nothing


@pytest.fixture(scope="module")
def tpcds_warehouse(spark, tmp_path_factory, tpcds_data):
    home = tmp_path_factory.mktemp("tpcds_wh")
    data = tpcds_data
    log = write_sql_file(tpcds.generate(2, seed=1), home / "train.sql", "tpcds")
    url = f"sqlite:///{home / 'catalog.db'}"
    with Catalog(url) as catalog:
        for table, rows in BLOCK_ROWS.items():
            steps.run_in_process(spark, catalog, SCHEMA, steps.RunPaths(home / "wh", table, "", "night-1"),
                                 str(data[table]), "mto", {"block_rows": rows}, str(log))
    return url, home


# make test runs `layout check` on TPC-H's eight tables (test_check.py) and every TPC-DS template
# on Spark: the check on TPC-DS's keys (NULL foreign keys, two-column keys): make test-full.
@pytest.mark.extended
def test_random_queries_on_the_tpcds_warehouse_give_the_same_answers(tpcds_warehouse, tmp_path, capsys):
    url, home = tpcds_warehouse
    report = tmp_path / "report.json"
    status = main(["check", "--catalog", url, "--schema", "tpcds", "--queries", "300", "--seed", "4",
                   "--spark-sample", "10", "--json", "--report", str(report), "--no-progress"])
    printed = json.loads(capsys.readouterr().out)
    details = json.loads(report.read_text())
    assert printed["mismatches"] == 0, [m["original"] for m in details["mismatch_details"]][:3]
    assert status == 0 and printed["queries"] == 300
    assert details["not_analyzed"] == 0 and details["not_comparable"] <= 10, details["not_comparable_details"][:3]
    assert details["runs"]["spark"] >= 8
    assert printed["queries_skipping"] >= 0.2 * 300  # not vacuous: many queries skip blocks
    with Catalog(url) as catalog:
        assert {table for table, _ in catalog.snapshot().layouts} == set(BLOCK_ROWS)
