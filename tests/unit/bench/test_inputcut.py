"""INPUTCUT, the diPs paper's per-query metric: blocks read without diPs over blocks read with them."""

from __future__ import annotations

import math

import pytest

from layout_core.bench import inputcut
from layout_core.bench.tpch import inputcut_table


def test_each_query_gets_its_own_ratio_an_empty_proof_is_infinite_and_nothing_read_is_no_cut():
    cuts = inputcut.input_cuts([10, 9, 4, 0, 6], [5, 6, 0, 0, 6])
    assert list(cuts[:2]) == [2.0, 1.5]
    assert math.isinf(cuts[2])  # diPs proved the query reads nothing
    assert list(cuts[3:]) == [1.0, 1.0]


def test_the_summary_counts_shares_and_sums_blocks_per_template_before_dividing():
    # q3: (10 -> 5), (9 -> 6); q7: (4 -> 0), (0 -> 0); q9: (6 -> 6)
    s = inputcut.summary([10, 9, 4, 0, 6], [5, 6, 0, 0, 6], [3, 3, 7, 7, 9])
    assert s["queries"] == 5
    assert s["share_at_least_1_5"] == 0.6  # 2.0, 1.5 and inf
    assert s["share_at_least_2"] == 0.4  # 2.0 and inf
    assert s["median"] == 1.5
    assert s["max_finite"] == 2.0
    assert s["per_template"] == {"3": round(19 / 11, 3), "7": "inf", "9": 1.0}
    assert s["per_query"] == [2.0, 1.5, "inf", 1.0, 1.0]


def test_queries_must_pair_up():
    with pytest.raises(ValueError, match="3 queries without diPs but 2 with them"):
        inputcut.input_cuts([1, 2, 3], [1, 2])


def test_the_report_has_a_column_per_layout_routed_with_dips():
    result = {"layouts": {"sortkey": {}, "sortkey+dips": {"inputcut": {"per_template": {"3": 1.2}}},
                          "mto+dips": {"inputcut": {"per_template": {"3": "inf", "96": 2.5}}}},
              "lower_bound_per_template": {"3": 11, "96": 4}}
    assert inputcut_table(result) == [
        "",
        "INPUTCUT per template:    sortkey+dips  mto+dips",
        "                       q3           1.2       inf",
        "                      q96           1.0       2.5",
    ]
    assert inputcut_table({"layouts": {"sortkey": {}}, "lower_bound_per_template": {"3": 1}}) == []


def test_the_cdf_chart_is_a_png(tmp_path):
    path = tmp_path / "cdf.png"
    inputcut.cdf_chart(path, {"mto+dips": [1.0, 2.0, "inf"], "sortkey+dips": [1.0, 1.0, 1.2]}, "TPC-H")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
