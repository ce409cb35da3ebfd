"""Benchmark B1 (`layout bench tpch`) runs end to end at a tiny scale, as a user runs it.

The smallest run that still has every part: SF 0.01, 2 instances of 8 templates that read
every table between them (one-table scans, the 8-way join, partsupp's two-column key, the
outer join, IN, EXISTS and NOT EXISTS subqueries), blocks of 2,000 rows, the two layouts the
Spark run needs (sortkey, mto) and --spark. All 22 templates, --dips (which adds the tuned
and mto(join_key) layouts and the semi-join lower bound), pando-3 and 1,000-row blocks:
tests/bench/test_bench_tpch_full.py (`make test-bench`), which runs these tests again on its
larger run and checks diPs there.

The figures themselves belong to docs/benchmarks.md; this checks that the command
works, that its JSON has the fields the issue names, that no layout reads
fewer rows than the test queries need (skipping never loses a row), and that
the rewritten queries give the raw tables' answers in Spark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from layout_core.workload.tpch import TEMPLATE_NUMBERS

pytestmark = pytest.mark.slow

SMALL_RUN_TEMPLATES = (2, 6, 8, 9, 13, 18, 21, 22)


def run_b1(tmp_path_factory, block_rows: int, layouts: tuple[str, ...], dips: bool,
           templates: tuple[int, ...] = TEMPLATE_NUMBERS):
    """(B1's JSON, its work folder, the layouts asked for) of `layout bench tpch --spark [--dips]`
    at SF 0.01 with 2 instances of each template (tests/bench runs it larger)."""
    work = tmp_path_factory.mktemp("b1")
    # its own process: B1 starts and stops a SparkSession of its own
    done = subprocess.run(
        [sys.executable, "-m", "layout_core.cli", "bench", "tpch", "--sf", "0.01", "--block-rows", str(block_rows),
         "--per-template", "2", "--templates", ",".join(map(str, templates)), "--layouts", ",".join(layouts),
         "--spark", *(["--dips"] if dips else []), "--work", str(work), "--json"],
        capture_output=True, text=True, timeout=900, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout), work, layouts, templates


@pytest.fixture(scope="module")
def b1(tmp_path_factory):
    return run_b1(tmp_path_factory, 2000, ("sortkey", "mto"), dips=False, templates=SMALL_RUN_TEMPLATES)


def with_dips(result: dict) -> bool:
    return any(name.endswith("+dips") for name in result["layouts"])


def test_b1_reports_what_the_issue_asks_for(b1):
    result, work, asked, templates = b1
    if with_dips(result):  # --dips adds these; qdtree: tests/unit/algorithms/test_qdtree.py
        laid_out = {*asked, "tuned", "mto(join_key)"}
        assert set(result["layouts"]) == laid_out | {f"{name}+dips" for name in laid_out}
    else:
        assert set(result["layouts"]) == set(asked)
    for layout in result["layouts"].values():
        assert isinstance(layout["index_bytes"], int)
        assert isinstance(layout["blocks_read"], int) and isinstance(layout["rows_read"], int)
        assert set(layout["stage_seconds"]) == {"featurize", "reduce", "optimize", "assign", "write"}
        assert all(isinstance(v, float) for v in layout["stage_seconds"].values())
        assert set(layout["tables"]) == {"region", "nation", "supplier", "customer", "part", "partsupp",
                                         "orders", "lineitem"}
    assert result["layouts"]["sortkey"]["blocks_vs_sortkey"] == 1.0
    # sortkey keeps no tree; the others trees, lineage (and literal keys, pando its cell map)
    sizes = {name: layout["index_bytes"] for name, layout in result["layouts"].items()}
    trees = [name for name in (*asked, "mto(join_key)") if name in sizes and name != "sortkey"]
    assert sizes["sortkey"] == 0 and trees and min(sizes[name] for name in trees) > 0
    assert isinstance(result["lower_bound_blocks"], int) and result["lower_bound_blocks"] > 0
    assert 0 < result["router_ms"]["p50"] <= result["router_ms"]["p99"]
    assert result["test_queries"] == len(templates)  # 2 instances of each template, the even ones test
    assert set(result["lower_bound_per_template"]) == {str(t) for t in templates}
    assert (work / "b1_per_template.png").stat().st_size > 0


def test_no_layout_reads_fewer_rows_than_the_queries_need(b1):
    result, _, _, _ = b1
    for name, layout in result["layouts"].items():
        if name.endswith("+dips"):  # diPs may skip rows the references' own predicates admit
            assert layout["rows_read"] >= result["semijoin_rows_needed"], name
        else:
            assert layout["rows_read"] >= result["rows_needed"], name
    assert result["rows_needed"] > 0
    if with_dips(result):
        assert result["semijoin_rows_needed"] <= result["rows_needed"]
        assert 0 < result["semijoin_lower_bound_blocks"] <= result["lower_bound_blocks"]


def test_rewritten_queries_give_the_raw_answers_on_every_layout(b1):
    result, _, asked, templates = b1
    spark = result["spark"]
    assert spark["queries"] == len(templates)  # every test query, one per template
    assert spark["identical_answers"], spark["mismatches"]
    # "needed": each reference reads a copy of just the rows its predicate admits; with --dips,
    # the best +dips row too (routed with diPs on its layout's blocks)
    best = [k for k in spark["seconds"] if k.endswith("+dips")]
    assert len(best) == (1 if with_dips(result) else 0)
    assert all(q[k]["equal"] for q in spark["per_query"] for k in (*asked, *best, "needed"))
    assert spark["seconds"]["needed"] > 0


@pytest.mark.extended  # the checkpoints themselves: tests/unit/bench/test_checkpoints.py (this is 100 s of make test)
def test_a_second_run_in_the_same_folder_reuses_every_layout_and_reads_the_same(b1):
    # As after a run stopped halfway: each (layout, table) measured before is read back
    # (same code, same inputs), and the report is block for block the first one's.
    result, work, asked, templates = b1
    again = subprocess.run(
        [sys.executable, "-m", "layout_core.cli", "bench", "tpch", "--sf", "0.01", "--block-rows", "2000",
         "--per-template", "2", "--templates", ",".join(map(str, templates)), "--layouts", ",".join(asked),
         "--spark", "--work", str(work), "--json"],
        capture_output=True, text=True, timeout=900, env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    assert again.returncode == 0, again.stderr[-3000:]
    reused = again.stderr.count("measured by an earlier run of this code")
    assert reused == len(asked) * 8  # every layout of the 8 tables
    second = json.loads(again.stdout)
    for name, layout in result["layouts"].items():
        assert second["layouts"][name]["blocks_read"] == layout["blocks_read"], name
        assert second["layouts"][name]["tables"] == layout["tables"], name
    assert second["spark"]["identical_answers"], second["spark"]["mismatches"]
