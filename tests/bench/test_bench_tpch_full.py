"""Benchmark B1 (`layout bench tpch`) end to end at SF 0.01 with every layout docs/benchmarks.md
compares (sortkey, mto, pando-3, and with --dips tuned and mto(join_key)), --spark and --dips,
as a user runs it (`make test-bench`; tests/spark/test_bench_tpch.py runs a smaller B1 in `make test`).

The figures themselves belong to docs/benchmarks.md; this checks that the command
works, that its JSON has the fields the issue names, that no layout reads
fewer rows than the test queries need (skipping never loses a row), and that
the rewritten queries give the raw tables' answers in Spark.
"""

from __future__ import annotations

import pytest

from layout_core.skipping.zonemaps import DEFAULT_RANGE_SETS
# B1's tests, collected here again with this module's larger b1
from tests.spark.test_bench_tpch import (  # noqa: F401
    run_b1, test_b1_reports_what_the_issue_asks_for, test_no_layout_reads_fewer_rows_than_the_queries_need,
    test_rewritten_queries_give_the_raw_answers_on_every_layout,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def b1(tmp_path_factory):
    return run_b1(tmp_path_factory, 1000, ("sortkey", "mto", "pando-3"), dips=True)


def test_pando_3_lays_lineitem_out_with_three_trees(b1):
    assert b1[0]["layouts"]["pando-3"]["plans"]["lineitem"]["choices"]["trees"] == 3


def test_diPs_only_ever_skip_more(b1):
    result, _, _, _ = b1
    for name in ("sortkey", "mto", "tuned", "mto(join_key)"):
        plain, dips = result["layouts"][name], result["layouts"][f"{name}+dips"]
        assert dips["blocks_read"] <= plain["blocks_read"], name
        assert dips["queries_skipping_third"] >= plain["queries_skipping_third"], name
    assert result["best_dips"].endswith("+dips")
    assert result["router_ms_dips"]["p50"] > 0 and result["sqlglot_ms"]["p50"] > 0
    assert result["router_vs_sqlglot"] == round(result["router_ms_dips"]["p50"] / result["sqlglot_ms"]["p50"], 2)


def test_every_layout_routed_with_dips_reports_its_inputcut(b1):
    result, work, _, _ = b1
    for name in ("sortkey", "mto", "tuned", "mto(join_key)"):
        cut = result["layouts"][f"{name}+dips"]["inputcut"]
        assert cut["queries"] == result["test_queries"] == len(cut["per_query"])
        # diPs only remove blocks: no query's cut is below 1
        assert all(c == "inf" or c >= 1.0 for c in cut["per_query"]), name
        assert 0 <= cut["share_at_least_2"] <= cut["share_at_least_1_5"] <= 1
        assert set(cut["per_template"]) == {str(t) for t in range(1, 23)}
        assert "inputcut" not in result["layouts"][name]
    assert (work / "inputcut_cdf.png").stat().st_size > 0


def test_the_range_set_sweep_trades_blocks_read_for_statistics_bytes(b1):
    result = b1[0]
    assert set(result["range_sets"]) == {name for name in result["layouts"] if name.endswith("+dips")}
    for name, sweep in result["range_sets"].items():
        counts = [int(n) for n in sweep]
        assert counts == sorted(counts) and counts[0] == 1 and 20 in counts
        blocks = [sweep[str(n)]["blocks_read"] for n in counts]
        stats_bytes = [sweep[str(n)]["stats_bytes"] for n in counts]
        # more ranges cover a subset of what fewer cover: never more blocks, never fewer bytes
        assert blocks == sorted(blocks, reverse=True) and stats_bytes == sorted(stats_bytes)
        assert sweep[str(DEFAULT_RANGE_SETS)]["blocks_read"] == result["layouts"][name]["blocks_read"]
