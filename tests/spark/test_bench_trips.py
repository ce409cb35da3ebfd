"""`layout bench trips` end to end at a small scale, as a user runs it: B1's report on taxi
trips (20,000 rows, 1% outliers, blocks of 1,000 rows, sortkey, mto and pando-3, --spark),
with pickup and drop-off points: the distance templates filter the straight-line distance,
an expression no column stores. (One run for both: each costs two minutes in the suite.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def trips_b1(tmp_path_factory):
    work = tmp_path_factory.mktemp("bench_trips")
    # its own process: the benchmark starts and stops a SparkSession of its own
    done = subprocess.run(
        [sys.executable, "-m", "layout_core.cli", "bench", "trips", "--rows", "20000", "--block-rows", "1000",
         "--per-template", "2", "--layouts", "sortkey,mto,pando-3", "--coordinates", "--spark", "--work", str(work),
         "--json"],
        capture_output=True, text=True, timeout=900, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), work


def test_the_report_has_b1s_shape_and_mto_skips_where_sortkey_cannot(trips_b1):
    result, work = trips_b1
    assert result["dataset"] == "taxi trips, 20,000 rows, 1% outliers, straight-line distances"
    assert (result["rows"], result["outliers"], result["test_queries"]) == (20000, 0.01, 10)
    assert set(result["layouts"]) == {"sortkey", "mto", "pando-3"}
    for layout in result["layouts"].values():
        assert set(layout["tables"]) == {"zone", "payment", "trips"}
        assert layout["rows_read"] >= result["rows_needed"] > 0  # skipping never loses a row
        assert set(layout["blocks_per_template"]) == {str(t) for t in range(1, 11)}
    # sortkey orders trips by pickup time: ranges on distance, fare, duration and tips read every block
    assert result["layouts"]["mto"]["blocks_read"] < result["layouts"]["sortkey"]["blocks_read"]
    assert (work / "b1_per_template.png").stat().st_size > 0 and (work / "result.json").exists()


def test_rewritten_queries_give_the_raw_answers(trips_b1):
    spark = trips_b1[0]["spark"]
    assert spark["queries"] == 10 and spark["identical_answers"], spark["mismatches"]


def test_straight_line_distances_are_cut_on_and_skip(trips_b1):
    result, _ = trips_b1
    # template 1 filters only the straight-line distance: sortkey (pickup order) reads every
    # block; mto and pando cut on the expression and skip some (its ranges hold most trips)
    read = {name: layout["blocks_per_template"]["1"] for name, layout in result["layouts"].items()}
    blocks = {name: layout["plans"]["trips"]["blocks"] for name, layout in result["layouts"].items()}
    assert read["sortkey"] == blocks["sortkey"] == 20
    assert read["mto"] < blocks["mto"] and read["pando-3"] < blocks["pando-3"], (read, blocks)


def test_tree_layouts_are_also_routed_on_their_tree_paths_alone(trips_b1):
    result, _ = trips_b1
    # routed on their tree paths alone (the papers' routers), the tree layouts read more:
    # the tip ranges (template 4) are on no path of mto's tree; sortkey has no tree
    assert "tree_paths_only" not in result["layouts"]["sortkey"]
    for name in ("mto", "pando-3"):
        paths = result["layouts"][name]["tree_paths_only"]
        assert paths["blocks_read"] > result["layouts"][name]["blocks_read"], (name, paths)
        assert paths["blocks_per_template"]["4"] >= result["layouts"][name]["blocks_per_template"]["4"]
