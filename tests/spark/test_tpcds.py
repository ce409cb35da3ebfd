"""TPC-DS at SF 0.01, as users run it: `layout bench tpcds` (sortkey and mto, --spark: every
test query answers as on the raw tables), and `layout check` on a warehouse of TPC-DS
tables laid out by mto through the nightly steps: random queries, rewritten with the
router's block filters, give the raw answers (NULL foreign keys, date keys, two-column keys)."""

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

pytestmark = pytest.mark.slow

SCHEMA = load_schema("tpcds")
# parents before children; about 10-20 blocks each at SF 0.01
BLOCK_ROWS = {"date_dim": 5000, "item": 20, "promotion": 1, "household_demographics": 500,
              "customer_demographics": 10_000, "store_sales": 2000, "store_returns": 200, "catalog_sales": 1000}


@pytest.fixture(scope="module")
def tpcds_b2(tmp_path_factory):
    work = tmp_path_factory.mktemp("bench_tpcds")
    # its own process: the benchmark starts and stops a SparkSession of its own
    done = subprocess.run(
        [sys.executable, "-m", "layout_core.cli", "bench", "tpcds", "--sf", "0.01", "--block-rows", "1000",
         "--per-template", "2", "--layouts", "sortkey,mto", "--spark", "--work", str(work), "--json"],
        capture_output=True, text=True, timeout=1500, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), work


def test_the_report_has_b1s_shape_and_mto_reads_fewer_blocks(tpcds_b2):
    result, work = tpcds_b2
    assert result["dataset"] == "TPC-DS SF 0.01" and result["test_queries"] == 35
    assert {"store_sales", "catalog_sales", "web_sales", "inventory", "date_dim", "item"} <= set(
        result["tables_laid_out"])
    for layout in result["layouts"].values():
        assert layout["rows_read"] >= result["rows_needed"] > 0  # skipping never loses a row
        assert set(layout["blocks_per_template"]) == {str(t) for t in tpcds.TEMPLATE_NUMBERS}
    # dimension filters reach the facts only as join-induced cuts: sortkey's date order helps
    # the date filters, mto's cuts the item, demographic and household ones too
    assert result["layouts"]["mto"]["blocks_read"] < result["layouts"]["sortkey"]["blocks_read"]
    assert (work / "b1_per_template.png").stat().st_size > 0 and (work / "result.json").exists()


def test_rewritten_queries_give_the_raw_answers(tpcds_b2):
    spark = tpcds_b2[0]["spark"]
    assert spark["queries"] == 35 and spark["identical_answers"], spark["mismatches"]


@pytest.fixture(scope="module")
def tpcds_warehouse(spark, tmp_path_factory):
    from layout_core.workload.tpcds_data import generate_tpcds

    home = tmp_path_factory.mktemp("tpcds_wh")
    data = generate_tpcds(0.01, home / "data")
    log = write_sql_file(tpcds.generate(2, seed=1), home / "train.sql", "tpcds")
    url = f"sqlite:///{home / 'catalog.db'}"
    with Catalog(url) as catalog:
        for table, rows in BLOCK_ROWS.items():
            steps.run_in_process(spark, catalog, SCHEMA, steps.RunPaths(home / "wh", table, "", "night-1"),
                                 str(data[table]), "mto", {"block_rows": rows}, str(log))
    return url, home


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
