"""Pando through the nightly steps: k trees in the catalog, lineage taken from
the written rows, the intersecting router, identical answers in Spark, and
one tree giving mto's layout."""

from __future__ import annotations

import pytest

from layout_core.base.schema import load_schema
from layout_core.catalog import Catalog, leaf_of
from layout_core.flows.nightly import steps
from layout_core.skipping.router import RoutingIndex, route_query
from tests.helpers.spark_answers import assert_same_answers_on_layouts

pytestmark = pytest.mark.slow
SCHEMA = load_schema("tpch")

TRAIN = [
    "SELECT count(*) FROM lineitem WHERE l_shipdate < DATE '1995-04-01'",
    "SELECT count(*) FROM lineitem WHERE l_shipdate >= DATE '1995-10-01'",
    "SELECT count(*) FROM lineitem WHERE l_receiptdate < DATE '1995-04-15'",
    "SELECT count(*) FROM lineitem WHERE l_receiptdate >= DATE '1995-10-15'",
    "SELECT count(*) FROM lineitem WHERE l_quantity < 10",
    "SELECT count(*) FROM lineitem WHERE l_quantity >= 40",
    "SELECT count(*) FROM lineitem JOIN orders ON l_orderkey = o_orderkey WHERE o_orderpriority = '1-URGENT'",
]
TEST = [
    "SELECT count(*) AS n, sum(l_extendedprice) AS s FROM lineitem WHERE l_shipdate < DATE '1995-03-01'",
    "SELECT count(*) AS n FROM lineitem WHERE l_receiptdate >= DATE '1995-11-01' AND l_quantity < 5",
    "SELECT l_returnflag, count(*) AS n FROM lineitem WHERE l_quantity >= 45 GROUP BY l_returnflag",
    "SELECT count(*) AS n FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
    "WHERE o_orderpriority = '1-URGENT' AND l_shipdate >= DATE '1995-06-01'",
    "SELECT count(*) AS n FROM lineitem WHERE l_shipdate IS NULL OR l_quantity > 100",
]
BLOCK_ROWS = 500


@pytest.fixture(scope="module")
def world(spark, tpch_sf001, tmp_path_factory):
    home = tmp_path_factory.mktemp("pando")
    log = home / "train.sql"
    log.write_text(";\n".join(TRAIN) + ";\n")
    with Catalog(f"sqlite:///{home / 'catalog.db'}") as catalog:
        def lay_out(table, optimizer, run_id, settings, partition=""):
            paths = steps.RunPaths(home / "wh", table, partition, run_id)
            window = {"date_column": "l_shipdate", "start": "1995-01-01", "end": "1996-01-01"} if partition else {}
            metrics = steps.run_in_process(spark, catalog, SCHEMA, paths, str(tpch_sf001 / f"{table}.parquet"),
                                           optimizer, settings, str(log), **window)
            return paths, metrics

        lay_out("orders", "mto", "dim", {"block_rows": 2000})
        plans = {}
        for name, optimizer, settings in [("mto", "mto", {}), ("pando-1", "pando", {"trees": 1}),
                                          ("pando-3", "pando", {"trees": 3})]:
            paths, metrics = lay_out("lineitem", optimizer, name, {"block_rows": BLOCK_ROWS, "sample_rows": 0,
                                                                   **settings}, partition="1995")
            plans[name] = steps.read_plan(paths, "test")
        yield {"catalog": catalog, "plans": plans, "paths": paths, "metrics": metrics, "tpch": tpch_sf001}


def test_one_tree_lays_lineitem_out_as_mto_does(world):
    mto, pando = world["plans"]["mto"], world["plans"]["pando-1"]
    assert pando.optimizer == "pando" and mto.optimizer == "mto"
    assert pando.assignment == mto.assignment
    assert pando.expected_block_rows == mto.expected_block_rows and pando.n_blocks >= 3


def test_three_trees_are_kept_in_the_catalog_with_the_lineage_of_every_row(spark, world):
    catalog = world["catalog"]
    layout = catalog.active_layout("lineitem", "1995")
    assert layout.version.optimizer == "pando"
    assert world["metrics"]["optimize"]["choices"]["trees"] == 3
    nodes = catalog.trees(layout.version.version_id)
    assert {n.tree for n in nodes} == {0, 1, 2}
    plan = catalog.plan(layout.version.version_id)
    assert plan["assignment"]["kind"] == "tuples" and len(plan["assignment"]["trees"]) == 3  # for inserts
    # every row's leaf in each tree (routed through the catalog's trees by its bits) is in its block's lineage
    keys = ["l_orderkey", "l_linenumber"]
    blocks = _blocks_frame(spark, layout)
    vectors = spark.read.parquet(str(world["paths"].file("featurized"))).select(*keys, "_vec")
    rows = blocks.join(vectors, keys).collect()
    lineage = {b.block_id: b.leaves for b in layout.blocks}
    assert len(rows) == sum(b.row_count for b in layout.blocks) > 1000
    for row in rows:
        for tree in range(3):
            assert leaf_of(nodes, tree, row["_vec"]) in lineage[row["block_id"]][tree]


def test_the_cells_are_merged_again_on_every_row_before_the_blocks_are_written(world):
    # write_blocks replaced the sample's plan: every k-tuple counted, every block's rows known
    plan = world["plans"]["pando-3"]
    assert plan.choices["cells_counted"] == "every row"
    assert plan.choices["k_tuples"] == len(plan.assignment.cells)
    blocks = world["catalog"].active_layout("lineitem", "1995").blocks
    written = [b.row_count for b in sorted(blocks, key=lambda b: b.block_id)]
    assert len(written) == plan.n_blocks and sum(written) == sum(plan.expected_block_rows) == plan.rows
    assert min(written) >= BLOCK_ROWS
    # a cell cut into n blocks spreads its remainder rows in another order than the plan counts them
    assert max(abs(w - e) for w, e in zip(written, plan.expected_block_rows)) <= 1
    assert world["metrics"]["write_blocks"]["blocks"] == plan.n_blocks


def _blocks_frame(spark, layout):
    from pathlib import Path

    paths = [b.path for b in layout.blocks]
    return spark.read.option("basePath", str(Path(paths[0]).parent)).parquet(*paths) \
        .select("l_orderkey", "l_linenumber", "block_id")


def test_the_intersecting_router_skips_blocks_and_answers_stay_identical(spark, world):
    snapshot = world["catalog"].snapshot()
    index = RoutingIndex.from_snapshot(snapshot)
    total = len(snapshot.layouts[("lineitem", "1995")].blocks)
    read = {sql: len(next(r for r in route_query(sql, index, SCHEMA).refs if r.table == "lineitem").blocks)
            for sql in TEST}
    assert read[TEST[0]] < total / 2 and read[TEST[2]] < total / 2
    assert_same_answers_on_layouts(spark, snapshot, SCHEMA, world["tpch"], TEST,
                                   {"lineitem": "l_shipdate >= DATE'1995-01-01' AND l_shipdate < DATE'1996-01-01'"})
