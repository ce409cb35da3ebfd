"""`layout explain`: the proof behind every skipped block (cut, statistics, diP)."""

from __future__ import annotations

from collections import namedtuple

from layout_core.base.schema import load_schema
from layout_core.predicates import Compare, value_to_json
from layout_core.predicates.model import Column
from layout_core.skipping.explain import explain_query
from layout_core.skipping.router import LayoutIndex, RoutingIndex, route_query

SCHEMA = load_schema("tpch")
Block = namedtuple("Block", "block_id row_count stats union_bits all_bits")
PRICE = Column("o_totalprice", "decimal")


def _stats(lo, hi):
    return {"o_totalprice": {"min": value_to_json(lo), "max": value_to_json(hi), "null_count": 0}}


def test_a_cut_and_the_statistics_each_explain_their_blocks():
    cut = Compare(Column("o_orderstatus", "string"), "=", "F")  # cut 0
    orders = LayoutIndex.from_blocks("orders", [
        Block(1, 5, _stats(1, 100), union_bits=0b1, all_bits=0b1),  # every row has status F
        Block(2, 5, _stats(1, 100), union_bits=0b0, all_bits=0b0),  # no row has status F
        Block(3, 5, _stats(500, 900), union_bits=0b1, all_bits=0b0),
    ], [cut], version_id=1)
    index = RoutingIndex({"orders": (orders,)}, {})
    sql = "SELECT * FROM orders o WHERE o.o_orderstatus = 'F' AND o.o_totalprice < 200"
    (ref,) = explain_query(sql, index, SCHEMA).to_json()["refs"]
    assert ref["skipped"] == [{"block_id": 2, "by": "cut 0: o_orderstatus = 'F'"},
                              {"block_id": 3, "by": "statistics: o_totalprice < 200"}]
    assert ref["blocks_read"] == 1
    # the explanation reads exactly what the route reads
    assert [r.blocks for r in route_query(sql, index, SCHEMA).refs] == [(1,)]
    sql = "SELECT * FROM orders o WHERE o.o_orderstatus <> 'F'"
    (ref,) = explain_query(sql, index, SCHEMA).to_json()["refs"]
    assert ref["skipped"] == [{"block_id": 1, "by": "cut 0: o_orderstatus = 'F'"}]
