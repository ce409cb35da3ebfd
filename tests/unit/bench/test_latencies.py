"""Router latency is reported against a sqlglot parse measured in the same rounds."""

from __future__ import annotations

from types import SimpleNamespace

from layout_core.bench import tpch
from layout_core.bench.tpch import median_ms


def test_the_calls_take_turns_within_each_round_and_each_gets_its_own_medians():
    queries = [SimpleNamespace(sql="SELECT 1"), SimpleNamespace(sql="SELECT 2")]
    order = []
    first, second = median_ms(queries, lambda sql: order.append(("route", sql)),
                              lambda sql: order.append(("parse", sql)))
    rounds = tpch.ROUTER_ROUNDS
    assert order == [("route", "SELECT 1"), ("parse", "SELECT 1")] * rounds + \
        [("route", "SELECT 2"), ("parse", "SELECT 2")] * rounds
    assert len(first) == len(second) == 2
    assert all(ms >= 0 for ms in first + second)


def test_a_slower_call_has_the_larger_median():
    import time

    slow, fast = median_ms([SimpleNamespace(sql="x")], lambda sql: time.sleep(0.004), lambda sql: None)
    assert slow[0] >= 4 > fast[0]
