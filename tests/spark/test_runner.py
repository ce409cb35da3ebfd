"""The Spark runner: identical answers, and Spark reads exactly the blocks the router chose."""


import pytest

from layout_core.base.schema import load_schema
from layout_core.catalog import Catalog
from layout_core.predicates import Column, Compare
from layout_core.skipping.router import RoutingIndex
from layout_core.workload.tpch import generate
from tests.conftest import TPCH_TABLES

pytestmark = pytest.mark.slow
SCHEMA = load_schema("tpch")


@pytest.fixture(scope="module")
def lineitem_by_year(spark, tpch_sf001, tmp_path_factory):
    from pyspark.sql import functions as F

    from layout_core.spark.runner import register_raw_tables
    from layout_core.spark.views import register_layout_views
    from tests.helpers.handmade_layout import lay_out

    warehouse = tmp_path_factory.mktemp("runner")
    catalog = Catalog(f"sqlite:///{warehouse / 'catalog.db'}")
    raw = spark.read.parquet(str(tpch_sf001 / "lineitem.parquet"))
    cut = Compare(Column("l_returnflag", "string"), "=", "R")
    lay_out(spark, catalog, SCHEMA.table("lineitem"), raw, F.year("l_shipdate"), [cut],
            warehouse / "lineitem", run_id="r1")
    register_raw_tables(spark, tpch_sf001, TPCH_TABLES)
    snapshot = catalog.snapshot()
    register_layout_views(spark, snapshot, [SCHEMA.table("lineitem")])
    yield {"index": RoutingIndex.from_snapshot(snapshot), "snapshot": snapshot,
           "locations": {"lineitem": str(warehouse / "lineitem")}}
    register_raw_tables(spark, tpch_sf001, TPCH_TABLES)
    catalog.close()


def test_spark_reads_exactly_the_routed_blocks(spark, lineitem_by_year):
    from pathlib import Path

    from layout_core.spark.runner import run_workload

    sql = ("SELECT l_returnflag, count(*) FROM lineitem WHERE l_shipdate >= DATE '1994-03-01' "
           "AND l_shipdate < DATE '1995-06-01' GROUP BY l_returnflag")
    (run,) = run_workload(spark, [sql], lineitem_by_year["index"], SCHEMA, lineitem_by_year["locations"])
    assert run.equal, run.difference
    layout = lineitem_by_year["snapshot"].layouts_of("lineitem")[0]
    by_year = {b.stats["l_shipdate"]["min"]["date"][:4]: b for b in layout.blocks}
    chosen = {by_year["1994"].block_id, by_year["1995"].block_id}
    assert run.routed_blocks == {"lineitem": 2}
    files = sum(len(list(Path(by_year[y].path).glob("*.parquet"))) for y in ("1994", "1995"))
    assert run.scan_rewritten.by_table["lineitem"]["partitions"] == len(chosen)
    assert run.scan_rewritten.by_table["lineitem"]["files"] == files
    assert run.scan_original.by_table["lineitem"]["partitions"] == len(layout.blocks)
    assert f"block_id IN ({', '.join(str(b) for b in sorted(chosen))})" in run.rewritten


def test_workload_answers_match(spark, lineitem_by_year):
    from layout_core.spark.runner import run_workload

    queries = [q.sql for q in generate(1, seed=3, templates=[1, 3, 6, 12, 14])]
    runs = run_workload(spark, queries, lineitem_by_year["index"], SCHEMA, lineitem_by_year["locations"])
    assert [r.equal for r in runs] == [True] * len(queries), [r.difference for r in runs]
    q6 = runs[2]
    assert q6.scan_rewritten.files < q6.scan_original.files and q6.scan_rewritten.bytes < q6.scan_original.bytes
