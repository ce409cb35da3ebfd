"""`layout check` on the realistic benchmarks' warehouses, laid out by mto through the
nightly steps: skewed, time-ordered TPC-H (the published skew generator's runs, z = 2)
and correlated taxi trips with 1% outliers. Random queries, as written and as rewritten
with the router's block filters, give the same answers on DuckDB and on a Spark sample.

make test runs the check on uniform TPC-H (test_check.py); these further warehouses run in
make test-full."""

from __future__ import annotations

import json

import pytest

from layout_core.base.schema import load_schema
from layout_core.catalog import Catalog
from layout_core.cli import main
from layout_core.flows.nightly import steps
from layout_core.workload import trips
from layout_core.workload.tpch import write_sql_file
from layout_core.workload.tpch_skew import TpchVariant, write_variant
from tests.conftest import TPCH_TABLES
from tests.helpers.tpch_layouts import BLOCK_ROWS, lay_out_tpch, use

pytestmark = [pytest.mark.slow, pytest.mark.extended]

QUERIES = 300


def _check(catalog_url: str, schema: str, report, capsys, seed: int) -> tuple[dict, dict]:
    status = main(["check", "--catalog", catalog_url, "--schema", schema, "--queries", str(QUERIES),
                   "--seed", str(seed), "--spark-sample", "6", "--json", "--report", str(report), "--no-progress"])
    printed = json.loads(capsys.readouterr().out)
    details = json.loads(report.read_text())
    assert printed["mismatches"] == 0, [m["original"] for m in details["mismatch_details"]][:3]
    assert status == 0 and printed["queries"] == QUERIES
    assert details["not_analyzed"] == 0 and details["not_comparable"] <= 10, details["not_comparable_details"][:3]
    assert details["runs"]["spark"] >= 5
    return printed, details


def test_random_queries_on_skewed_time_ordered_tpch(spark, tpch_sf001, tmp_path, capsys):
    skewed = tmp_path / "skewed"
    write_variant({t: tpch_sf001 / f"{t}.parquet" for t in TPCH_TABLES},
                  TpchVariant(2, "runs", time_ordered_keys=True), skewed)
    laid_out = lay_out_tpch(spark, skewed, tmp_path, "mto", BLOCK_ROWS)
    try:
        printed, _ = _check(f"sqlite:///{tmp_path / 'catalog.db'}", "tpch", tmp_path / "report.json", capsys, 5)
    finally:
        use({t: spark.read.parquet(str(tpch_sf001 / f"{t}.parquet")) for t in TPCH_TABLES})
    assert printed["queries_skipping"] >= 0.2 * QUERIES  # not vacuous
    assert {t for t, _ in laid_out["snapshot"].layouts} == set(TPCH_TABLES)


def test_random_queries_on_correlated_trips_with_outliers(spark, tmp_path, capsys):
    schema = load_schema("trips")
    data = trips.generate_trips(20_000, 0.01, seed=1, out=tmp_path / "trips")
    log = tmp_path / "train.sql"
    write_sql_file([q for q in trips.generate(2, seed=1) if q.instance % 2 == 1], log)
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    with Catalog(url) as catalog:
        for table, rows in (("zone", 20), ("payment", 5), ("trips", 1000)):  # dimensions first
            steps.run_in_process(spark, catalog, schema, steps.RunPaths(tmp_path / "wh", table, "", "night-1"),
                                 str(data[table]), "mto", {"block_rows": rows}, str(log))
        assert {t for t, _ in catalog.snapshot().layouts} == set(trips.TABLES)
    # seed 5's Spark sample joins trips to trips through payment (5 keys): 80 million joined rows,
    # 0.3 s on DuckDB and 340 s on the tests' interpreted Spark; seed 7's sample has no such join
    printed, _ = _check(url, "trips", tmp_path / "report.json", capsys, 7)
    assert printed["queries_skipping"] >= 0.1 * QUERIES  # not vacuous
