"""`layout check` on TPC-H SF 0.01 laid out by mto and by fineblock: 300 random
queries on DuckDB and a sample on Spark, each as written and as rewritten with
the router's block filters, give the same answers; and the check does notice
when a rewrite drops a block."""

from __future__ import annotations

import dataclasses
import json

import pytest

from layout_core.catalog import Catalog
from layout_core.cli import main
from tests.helpers.tpch_layouts import BLOCK_ROWS, SCHEMA, shared_tpch_layout, use

pytestmark = pytest.mark.slow

QUERIES = 300  # about a hundred of them skip blocks
SPARK_SAMPLE = 6  # Spark runs each as written and rewritten; DuckDB checks all 300


# mto's layouts have join-induced cuts and the router's every skipping path; fineblock's
# (cut bits and zone maps only): make test-full.
@pytest.fixture(scope="module", params=["mto", pytest.param("fineblock", marks=pytest.mark.extended)])
def catalog_url(request, spark, tpch_sf001, tmp_path_factory):
    # the check only reads the layouts: mto's is the one test_mto_golden_spark reads too
    laid_out, home = shared_tpch_layout(spark, tpch_sf001, tmp_path_factory, request.param, BLOCK_ROWS)
    yield f"sqlite:///{home / 'catalog.db'}"
    use(laid_out["raw"])  # the check's Spark views read the block folders: give other tests the raw tables back


def test_random_queries_give_the_same_answers_rewritten(catalog_url, tmp_path, capsys):
    report = tmp_path / "report.json"
    status = main(["check", "--catalog", catalog_url, "--queries", str(QUERIES), "--seed", "3",
                   "--spark-sample", str(SPARK_SAMPLE), "--json", "--report", str(report), "--no-progress"])
    printed = json.loads(capsys.readouterr().out)
    assert set(printed) == {"queries", "mismatches", "queries_skipping", "seconds"}
    details = json.loads(report.read_text())
    assert printed["mismatches"] == 0, [m["original"] for m in details["mismatch_details"]][:3]
    assert status == 0
    assert printed["queries"] == QUERIES
    assert details["runs"]["duckdb"] + details["not_comparable"] >= QUERIES
    assert details["runs"]["spark"] >= SPARK_SAMPLE - 1  # a query Spark refuses is not comparable, not lost
    assert details["not_comparable"] <= 5, details["not_comparable_details"][:3]
    assert details["not_analyzed"] == 0
    # not vacuous: a good share of the queries did skip blocks (about 35-40% when written)
    assert printed["queries_skipping"] >= 0.2 * QUERIES


def test_the_check_reports_a_rewrite_that_drops_a_block(catalog_url, monkeypatch):
    from layout_core.check import run
    from layout_core.check.engines import DuckDBEngine
    from layout_core.check.profile import profile_of

    real_rewrite = run.rewrite_sql

    def dropping_first_block(route, index):
        # a skipping bug: every reference reading two or more blocks loses its first one
        refs = tuple(dataclasses.replace(ref, partitions=tuple(
            dataclasses.replace(p, blocks=p.blocks[1:]) if len(p.blocks) > 1 else p for p in ref.partitions))
            for ref in route.refs)
        return real_rewrite(dataclasses.replace(route, refs=refs), index)

    monkeypatch.setattr(run, "rewrite_sql", dropping_first_block)
    with Catalog(catalog_url) as catalog:
        snapshot = catalog.snapshot()
    engine = DuckDBEngine(SCHEMA, snapshot)
    result = run.run_check(SCHEMA, snapshot, profile_of(SCHEMA, snapshot), engine, 100, seed=3)
    assert result.mismatching_queries >= 20
    mismatch = result.mismatches[0]
    assert "block_id IN" in mismatch.rewritten and "block_id" not in mismatch.original
    assert mismatch.missing or mismatch.extra or "failed" in mismatch.difference
