"""Golden test of the router on Spark: all 22 TPC-H templates, as written and as
rewritten with block filters, return the same rows over real block folders.

Four tables are laid out by hand-chosen keys with a few cuts each, so routing
uses cut bits and zone maps; the other four have no layout and are read whole.
"""

import datetime as dt
from decimal import Decimal

import pytest

from layout_core.base.schema import load_schema
from layout_core.catalog import Catalog
from layout_core.predicates import Compare, InList, Like
from layout_core.skipping.rewrite import rewrite_sql
from layout_core.skipping.router import RoutingIndex, route_query
from layout_core.workload.tpch import generate
from tests.conftest import TPCH_TABLES

pytestmark = pytest.mark.slow
SCHEMA = load_schema("tpch")


def _c(table, name):
    return SCHEMA.table(table).column(name)


@pytest.fixture(scope="module")
def layout(spark, tpch_sf001, tmp_path_factory):
    from pyspark.sql import functions as F

    from layout_core.spark.views import register_layout_views
    from tests.helpers.handmade_layout import lay_out

    warehouse = tmp_path_factory.mktemp("warehouse")
    catalog = Catalog(f"sqlite:///{warehouse / 'catalog.db'}")
    raw = {t: spark.read.parquet(str(tpch_sf001 / f"{t}.parquet")) for t in TPCH_TABLES}
    plans = {
        "lineitem": (F.year("l_shipdate") * 10 + F.pmod(F.col("l_orderkey"), 2), [
            Compare(_c("lineitem", "l_shipdate"), "<", dt.date(1995, 1, 1)),
            InList(_c("lineitem", "l_shipmode"), frozenset({"AIR", "MAIL"})),
            Compare(_c("lineitem", "l_quantity"), "<", Decimal(25)),
            Compare(_c("lineitem", "l_returnflag"), "=", "R"),
        ]),
        "orders": (F.year("o_orderdate"), [
            Compare(_c("orders", "o_orderstatus"), "=", "F"),
            Compare(_c("orders", "o_orderdate"), ">=", dt.date(1996, 1, 1)),
        ]),
        "customer": (F.col("c_mktsegment"), [Compare(_c("customer", "c_mktsegment"), "=", "BUILDING")]),
        "part": (F.substring("p_brand", 7, 1), [
            Compare(_c("part", "p_size"), "<", 10),
            Like(_c("part", "p_type"), "PROMO%"),
        ]),
    }
    for table, (key, cuts) in plans.items():
        lay_out(spark, catalog, SCHEMA.table(table), raw[table], key, cuts,
                warehouse / table, run_id="golden", optimizer="handmade")
    for t, frame in raw.items():
        frame.createOrReplaceTempView(t)
    snapshot = catalog.snapshot()
    registered = register_layout_views(spark, snapshot, [SCHEMA.table(t) for t in TPCH_TABLES])
    yield {"index": RoutingIndex.from_snapshot(snapshot), "raw": raw, "registered": registered}
    # later tests get plain views again
    for t, frame in raw.items():
        frame.createOrReplaceTempView(t)
    catalog.close()


def test_layout_views_hold_exactly_the_input_rows(spark, layout):
    assert sorted(layout["registered"]) == ["customer", "lineitem", "orders", "part"]
    for table in layout["registered"]:
        columns = SCHEMA.table(table).column_names
        blocked = spark.table(table).select(*columns)
        assert blocked.count() == layout["raw"][table].count()
        assert blocked.exceptAll(layout["raw"][table].select(*columns)).count() == 0


def test_a_view_of_many_block_folders_is_listed_without_a_spark_job(spark, tpch_sf001, tmp_path):
    """Past 32 paths Spark lists folders in a job of its own; a local session lists them in the
    driver (spark.session.local_session), which is faster and reads the same rows."""
    from pyspark.sql import functions as F

    from layout_core.spark.views import layout_frame
    from tests.helpers.handmade_layout import lay_out

    orders = spark.read.parquet(str(tpch_sf001 / "orders.parquet"))
    with Catalog(f"sqlite:///{tmp_path / 'catalog.db'}") as catalog:
        lay_out(spark, catalog, SCHEMA.table("orders"), orders, F.pmod(F.col("o_orderkey"), 40), [],
                tmp_path / "orders", run_id="many")
        snapshot = catalog.snapshot()
    assert len(snapshot.layouts[("orders", "")].blocks) == 40

    def jobs_to_make_the_frame(group: str) -> int:
        spark.sparkContext.setJobGroup(group, "making a layout's frame")
        try:
            frame = layout_frame(spark, snapshot, SCHEMA.table("orders"))
        finally:
            spark.sparkContext.setJobGroup("", "")
        assert frame.count() == 15_000 and frame.select("block_id").distinct().count() == 40
        return len(spark.sparkContext.statusTracker().getJobIdsForGroup(group))

    key = "spark.sql.sources.parallelPartitionDiscovery.threshold"
    ours = spark.conf.get(key)
    spark.conf.set(key, "32")  # Spark's default
    try:
        with_spark_default = jobs_to_make_the_frame("list-40-blocks-default")
    finally:
        spark.conf.set(key, ours)
    # the job that remains reads one file's schema
    assert (with_spark_default, jobs_to_make_the_frame("list-40-blocks")) == (2, 1)


@pytest.mark.parametrize("template", range(1, 23))
def test_rewritten_query_returns_the_same_rows(spark, layout, template):
    from layout_core.spark.compare import same_rows

    (query,) = generate(1, seed=5, templates=[template])
    route = route_query(query.sql, layout["index"], SCHEMA)
    assert route.analyzed, route.warnings
    rewritten = rewrite_sql(route, layout["index"])
    assert rewritten != query.sql
    expected = spark.sql(query.sql).collect()
    actual = spark.sql(rewritten).collect()
    equal, why = same_rows(expected, actual)
    assert equal, f"{why}\n{rewritten}"


def test_skipping_happens(layout):
    q6 = ("SELECT sum(l_extendedprice * l_discount) FROM lineitem WHERE l_shipdate >= DATE '1994-01-01' "
          "AND l_shipdate < DATE '1995-01-01' AND l_discount BETWEEN 0.05 AND 0.07 AND l_quantity < 24")
    (ref,) = route_query(q6, layout["index"], SCHEMA).refs
    # one year of seven, two of the fourteen blocks (year x orderkey parity)
    assert len(ref.blocks) == 2 and ref.blocks_total == 14
