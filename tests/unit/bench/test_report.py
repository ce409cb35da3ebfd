"""B1's printed report ends with its per-template table: one row per template, one column per layout."""

from __future__ import annotations

from layout_core.bench.tpch import per_template_table


def test_the_per_template_table_lists_every_layout_and_the_lower_bound():
    result = {"layouts": {"sortkey": {"blocks_per_template": {"3": 366, "96": 303}},
                          "mto+dips": {"blocks_per_template": {"3": 40}}},
              "lower_bound_per_template": {"3": 11, "96": 4}}
    assert per_template_table(result) == [
        "blocks read per template: sortkey  mto+dips  lower bound",
        "                       q3      366        40           11",
        "                      q96      303         0            4",
    ]
