"""MTO through the nightly steps: dimension tables first, then the fact table's
join-induced cuts use their active layouts; answers stay identical in Spark."""

from __future__ import annotations

import logging

import pandas as pd
import pytest
from pyroaring import BitMap64

from layout_core.base.schema import load_schema
from layout_core.catalog import Catalog
from layout_core.flows.nightly import steps
from layout_core.flows.nightly.artifacts import Features
from layout_core.runs.artifacts import read_artifact
from layout_core.skipping.router import RoutingIndex, route_query
from tests.helpers.spark_answers import assert_same_answers_on_layouts

pytestmark = pytest.mark.slow
SCHEMA = load_schema("tpch")

BUILDING = ("SELECT l_orderkey, sum(l_extendedprice) AS revenue FROM customer, orders, lineitem "
            "WHERE c_mktsegment = '{segment}' AND c_custkey = o_custkey AND l_orderkey = o_orderkey "
            "AND l_shipdate >= DATE '1995-03-01' GROUP BY l_orderkey")
ASIA = ("SELECT count(*) AS n FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
        "JOIN customer ON o_custkey = c_custkey JOIN nation ON c_nationkey = n_nationkey "
        "JOIN region ON n_regionkey = r_regionkey WHERE r_name = '{region}'")
URGENT = ("SELECT count(*) AS n FROM lineitem, orders WHERE l_orderkey = o_orderkey "
          "AND o_orderpriority = '1-URGENT' AND l_quantity < {quantity}")
TRAIN = [BUILDING.format(segment="BUILDING")] * 3 + [ASIA.format(region="ASIA")] * 2 + \
    [URGENT.format(quantity=q) for q in (10, 20)]
# Not in the log: a segment disjoint with the BUILDING cut, and the same shapes again.
TEST = [BUILDING.format(segment="BUILDING"), BUILDING.format(segment="MACHINERY"),
        ASIA.format(region="ASIA"), ASIA.format(region="EUROPE"), URGENT.format(quantity=5),
        "SELECT count(*) AS n FROM lineitem LEFT JOIN orders ON l_orderkey = o_orderkey "
        "AND o_orderpriority = '1-URGENT'"]

DIMENSIONS = [("region", 10), ("nation", 10), ("customer", 300), ("orders", 2000)]


def _lay_out(spark, world, table, optimizer, run_id, block_rows, partition="", settings=None, **kwargs):
    paths = steps.RunPaths(world["warehouse"], table, partition, run_id)
    return paths, steps.run_in_process(
        spark, world["catalog"], SCHEMA, paths, str(world["tpch"] / f"{table}.parquet"), optimizer,
        {"block_rows": block_rows, **(settings or {})}, kwargs.pop("query_log", world["log"]), **kwargs)


def _lineitem_1995(spark, world, optimizer, run_id, **kwargs):
    return _lay_out(spark, world, "lineitem", optimizer, run_id, 600, partition="1995",
                    date_column="l_shipdate", start="1995-01-01", end="1996-01-01", **kwargs)


def _route(world, sql):
    index = RoutingIndex.from_snapshot(world["catalog"].snapshot())
    return route_query(sql, index, SCHEMA), index


def _lineitem_blocks(world, sql) -> int:
    route, _ = _route(world, sql)
    return len(next(r for r in route.refs if r.table == "lineitem").blocks)


@pytest.fixture(scope="module")
def world(spark, tpch_sf001, tmp_path_factory):
    home = tmp_path_factory.mktemp("mto")
    log = home / "train.sql"
    log.write_text(";\n".join(TRAIN) + ";\n")
    with Catalog(f"sqlite:///{home / 'catalog.db'}") as catalog:
        w = {"catalog": catalog, "warehouse": home / "wh", "tpch": tpch_sf001, "log": str(log), "home": home}
        for table, block_size in DIMENSIONS:
            _lay_out(spark, w, table, "mto", "nightly-1", block_size)
        _, w["qdtree_metrics"] = _lineitem_1995(spark, w, "qdtree", "nightly-q")
        w["qdtree_blocks"] = {sql: _lineitem_blocks(w, sql) for sql in TEST}
        w["mto_paths"], w["mto_metrics"] = _lineitem_1995(spark, w, "mto", "nightly-m")
        yield w


def test_mto_keeps_join_induced_cuts_with_exact_literal_keys_and_their_sources(world, tpch_sf001):
    c = world["catalog"]
    layout = c.active_layout("lineitem", "1995")
    assert layout.version.optimizer == "mto"
    induced = {cut.sql: cut for cut in layout.cuts if cut.kind == "join_induced"}
    assert world["mto_metrics"]["featurize"]["join_induced"] == len(induced) >= 2
    building = next(cut for sql, cut in induced.items() if "BUILDING" in sql)
    assert building.path == ("customer.c_custkey->orders.o_custkey", "orders.o_orderkey->lineitem.l_orderkey")
    # the literal keys: order keys of BUILDING customers, computed here with pandas from the raw files
    customer = pd.read_parquet(tpch_sf001 / "customer.parquet")
    orders = pd.read_parquet(tpch_sf001 / "orders.parquet")
    segment_custkeys = customer.loc[customer.c_mktsegment == "BUILDING", "c_custkey"]
    expected = orders.loc[orders.o_custkey.isin(segment_custkeys), "o_orderkey"]
    assert building.keys() == BitMap64(expected.astype("int64").tolist())
    versions = {t: c.active_layout(t, "").version.version_id for t in ("customer", "orders")}
    assert set(building.source_versions) == set(versions.items())
    # the region cut goes four hops: region -> nation -> customer -> orders -> lineitem
    asia = next(cut for sql, cut in induced.items() if "ASIA" in sql)
    assert [hop.split("->")[0] for hop in asia.path] == [
        "region.r_regionkey", "nation.n_nationkey", "customer.c_custkey", "orders.o_orderkey"]
    assert {t for t, _ in asia.source_versions} == {"region", "nation", "customer", "orders"}


def test_mto_leaves_are_cut_into_ranges_of_the_most_range_filtered_column(world):
    # l_shipdate is range-filtered by 3 training queries, l_quantity by 2
    plan = steps.read_plan(world["mto_paths"], "test")
    assert plan.assignment.sort_columns == ("l_shipdate",)
    assert world["mto_metrics"]["optimize"]["leaves"] >= 2


def test_mto_skips_more_lineitem_blocks_than_qdtree_and_answers_stay_identical(spark, world):
    total = sum(len(lay.blocks) for lay in world["catalog"].snapshot().layouts_of("lineitem"))
    mto = {sql: _lineitem_blocks(world, sql) for sql in TEST}
    building, machinery, asia, europe = TEST[:4]
    for sql in (building, asia):  # join-induced cuts the query implies
        assert mto[sql] < world["qdtree_blocks"][sql], sql
        assert mto[sql] < total / 2, sql
    assert mto[machinery] < total  # disjoint with the BUILDING cut: blocks of only BUILDING rows skipped
    assert mto[TEST[-1]] == total  # an outer join induces nothing on lineitem

    # only lineitem's 1995 partition is laid out: the expected answers read the same rows
    assert_same_answers_on_layouts(spark, world["catalog"].snapshot(), SCHEMA, world["tpch"], TEST,
                                   {"lineitem": "l_shipdate >= DATE'1995-01-01' AND l_shipdate < DATE'1996-01-01'"})


def test_sampling_estimates_block_sizes_within_ten_percent(spark, world):
    rows = 60_175  # lineitem at SF 0.01
    paths, metrics = _lay_out(spark, world, "lineitem", "mto", "sampled", 5000, partition="all",
                              settings={"sample_rows": 12_000})
    assert metrics["reduce"]["rows"] == metrics["ingest"]["rows"] == rows
    assert 0.15 * rows < metrics["reduce"]["sampled_rows"] < 0.25 * rows
    plan = steps.read_plan(paths, "test")
    layout = world["catalog"].active_layout("lineitem", "all")
    first_id = layout.version.block_ids.start
    assert len(layout.blocks) >= 8
    for block in layout.blocks:
        expected = plan.expected_block_rows[block.block_id - first_id]
        assert abs(block.row_count - expected) <= 0.10 * expected, block.block_id
    assert metrics["update_catalog"]["block_rows_error_max"] <= 0.10
    assert sum(b.row_count for b in layout.blocks) == metrics["ingest"]["rows"]


def test_a_log_without_usable_queries_falls_back_to_sort_key_order(spark, world, caplog):
    garbage = world["home"] / "garbage.sql"
    garbage.write_text("this is not sql;\nSELECT * FROM nowhere;\nSELECT FROM WHERE;\n")
    with caplog.at_level(logging.WARNING, logger="layout.pipeline"):
        _, metrics = _lay_out(spark, world, "lineitem", "mto", "fallback", 1000, partition="fallback",
                              query_log=str(garbage), settings={"sort_column": "l_shipdate"},
                              date_column="l_shipdate", start="1996-01-01", end="1997-01-01")
    assert "no usable queries in the log; mto lays the table out without them" in caplog.text
    assert metrics["featurize"]["failed"] == 3 and metrics["featurize"]["cuts"] == 0
    blocks = world["catalog"].active_layout("lineitem", "fallback").blocks
    ranges = sorted((b.stats["l_shipdate"]["min"]["date"], b.stats["l_shipdate"]["max"]["date"]) for b in blocks)
    assert len(ranges) >= 5 and all(hi <= lo for (_, hi), (lo, _) in zip(ranges, ranges[1:]))


# make test: zorder; hilbert (another curve over the same quantiles and steps): make test-full
@pytest.mark.parametrize("curve", ["zorder", pytest.param("hilbert", marks=pytest.mark.extended)])
def test_curve_layouts_run_through_the_same_steps(spark, world, curve, tmp_path):
    with Catalog(f"sqlite:///{tmp_path / 'curve.db'}") as catalog:  # orders stays as the other tests left it
        own = {**world, "catalog": catalog, "warehouse": tmp_path / "wh"}
        paths, metrics = _lay_out(spark, own, "orders", curve, f"curve-{curve}", 1500)
        features = read_artifact(paths.staging, Features, "test")
        assert features.cuts == () and "o_orderpriority" in features.workload["filtered_columns"]
        assert steps.read_plan(paths, "test").assignment.columns[0] == features.workload["filtered_columns"][0]
        layout = catalog.active_layout("orders", "")
    assert len(layout.blocks) == 10 and sum(b.row_count for b in layout.blocks) == 15000
    assert metrics["verify"]["rows"] == 15000


def test_dimension_relayouts_keep_induced_cuts_until_the_rows_change(spark, world):
    """Runs last: it replaces the customer layout the lineitem cuts were computed from."""
    before = _lineitem_blocks(world, TEST[0])
    _lay_out(spark, world, "customer", "mto", "nightly-2", 300)  # the same rows, laid out again
    route, index = _route(world, TEST[0])
    assert index.stale_cuts == 0
    assert len(next(r for r in route.refs if r.table == "lineitem").blocks) == before

    changed = world["home"] / "customer_changed.parquet"  # one customer fewer
    spark.read.parquet(str(world["tpch"] / "customer.parquet")).where("c_custkey <> 7") \
        .write.mode("overwrite").parquet(str(changed))
    paths = steps.RunPaths(world["warehouse"], "customer", "", "nightly-3")
    steps.run_in_process(spark, world["catalog"], SCHEMA, paths, str(changed), "mto", {"block_rows": 300},
                         world["log"])
    route, index = _route(world, TEST[0])
    assert index.stale_cuts >= 1
    assert len(next(r for r in route.refs if r.table == "lineitem").blocks) > before


# ---------------------------------------------------------------------------
# bad data and retries (each with a catalog of its own)


def _region_source(spark, path, rows):
    spark.createDataFrame(rows, "r_regionkey bigint, r_name string, r_comment string") \
        .write.mode("overwrite").parquet(str(path))
    return str(path)


def _fingerprint_of(catalog, table):
    return catalog.active_layout(table, "").version.params["input_fingerprint"]


def test_the_fingerprint_tells_rows_apart_even_when_a_value_moves_next_to_a_null(spark, tmp_path):
    with Catalog(f"sqlite:///{tmp_path / 'c.db'}") as catalog:
        fingerprints = []
        for run, rows in enumerate([[(1, "A", None), (2, "B", "x")], [(1, None, "A"), (2, "B", "x")],
                                    [(2, "B", "x"), (1, "A", None)]]):
            source = _region_source(spark, tmp_path / f"region{run}", rows)
            steps.run_in_process(spark, catalog, SCHEMA, steps.RunPaths(tmp_path / "wh", "region", "", f"r{run}"),
                                 source, "mto", {"block_rows": 10})
            fingerprints.append(_fingerprint_of(catalog, "region"))
    assert fingerprints[0] != fingerprints[1]  # ('A', NULL) and (NULL, 'A') are different rows
    assert fingerprints[0] == fingerprints[2]  # the same rows in another order
    assert all(fp.startswith("2:") for fp in fingerprints)


def test_a_retry_on_corrected_data_records_the_corrected_fingerprint(spark, tmp_path):
    """The first attempt wrote blocks of other rows and failed; the activated version
    must describe the rows it holds, or stale join-induced cuts would look current."""
    first = _region_source(spark, tmp_path / "first", [(1, "A", "x"), (2, "B", "y")])
    corrected = _region_source(spark, tmp_path / "corrected", [(1, "A", "x"), (2, "C", "y")])
    with Catalog(f"sqlite:///{tmp_path / 'c.db'}") as catalog:
        paths = steps.RunPaths(tmp_path / "wh", "region", "", "night-1")
        table = SCHEMA.table("region")
        steps.ingest(spark, paths, table, first, catalog)
        steps.featurize(spark, paths, SCHEMA, None, "mto", {"block_rows": 10}, catalog)
        steps.reduce_vectors(spark, paths, table)
        steps.optimize(paths, table)
        written = steps.write_blocks(spark, paths, table, catalog)
        catalog.fail(written["version"], "killed halfway")
        steps.run_in_process(spark, catalog, SCHEMA, paths, corrected, "mto", {"block_rows": 10})  # the retry
        retried = _fingerprint_of(catalog, "region")
        steps.run_in_process(spark, catalog, SCHEMA, steps.RunPaths(tmp_path / "wh", "region", "", "night-2"),
                             corrected, "mto", {"block_rows": 10})
        assert retried == _fingerprint_of(catalog, "region")


def test_a_sample_too_small_to_estimate_uses_all_rows(spark, tmp_path, tpch_sf001, caplog):
    with Catalog(f"sqlite:///{tmp_path / 'c.db'}") as catalog, \
            caplog.at_level(logging.WARNING, logger="layout.featurize"):
        metrics = steps.run_in_process(spark, catalog, SCHEMA, steps.RunPaths(tmp_path / "wh", "nation", "", "n"),
                                       str(tpch_sf001 / "nation.parquet"), "qdtree",
                                       {"block_rows": 10, "sample_rows": 1})
        assert sum(b.row_count for b in catalog.active_layout("nation", "").blocks) == 25
    assert metrics["reduce"]["sampled_rows"] == 25 and metrics["reduce"]["rows"] == 25
    assert "too small to estimate block sizes; using all 25 rows" in caplog.text


def test_a_dimension_key_held_twice_gives_no_join_induced_cut_through_it(spark, tmp_path, tpch_sf001, caplog):
    orders = spark.read.parquet(str(tpch_sf001 / "orders.parquet"))
    duplicated = tmp_path / "orders_dup"
    orders.unionByName(orders.where("o_orderkey = 7")).write.parquet(str(duplicated))
    log = tmp_path / "log.sql"
    log.write_text(URGENT.format(quantity=10) + ";\n")
    with Catalog(f"sqlite:///{tmp_path / 'c.db'}") as catalog:
        wh = tmp_path / "wh"
        steps.run_in_process(spark, catalog, SCHEMA, steps.RunPaths(wh, "orders", "", "o"), str(duplicated),
                             "mto", {"block_rows": 2000}, str(log))
        with caplog.at_level(logging.WARNING, logger="layout.featurize"):
            metrics = steps.run_in_process(
                spark, catalog, SCHEMA, steps.RunPaths(wh, "lineitem", "1995", "l"), str(tpch_sf001 / "lineitem.parquet"),
                "mto", {"block_rows": 600}, str(log), date_column="l_shipdate", start="1995-01-01", end="1996-01-01")
    assert "the parent key is not unique" in caplog.text
    assert metrics["featurize"]["join_induced"] == 0
    assert metrics["verify"]["rows"] == metrics["ingest"]["rows"]
