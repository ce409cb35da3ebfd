"""A benchmark's checkpoints: read back only by the same code and inputs, never half written."""

from __future__ import annotations

import logging
from types import MappingProxyType

from layout_core.bench.checkpoints import Checkpoints


def test_a_saved_value_comes_back_for_the_same_inputs_only(tmp_path):
    saved = Checkpoints(tmp_path, ("sf0.01", 2000, ["SELECT 1"]))
    value = {"records": [1, 2, 3], "stats": MappingProxyType({"l_quantity": (1, 50)})}
    saved.save("mto(join_key)", "lineitem", value, extra=({"block_rows": 2000}, True))
    same = Checkpoints(tmp_path, ("sf0.01", 2000, ["SELECT 1"]))
    back = same.load("mto(join_key)", "lineitem", extra=({"block_rows": 2000}, True))
    assert back == {"records": [1, 2, 3], "stats": {"l_quantity": (1, 50)}}
    assert isinstance(back["stats"], MappingProxyType)  # still read only
    assert same.load("mto(join_key)", "lineitem", extra=({"block_rows": 2000}, False)) is None
    assert same.load("mto", "lineitem", extra=({"block_rows": 2000}, True)) is None
    assert same.load("mto(join_key)", "orders", extra=({"block_rows": 2000}, True)) is None
    other_queries = Checkpoints(tmp_path, ("sf0.01", 2000, ["SELECT 2"]))
    assert other_queries.load("mto(join_key)", "lineitem", extra=({"block_rows": 2000}, True)) is None
    assert [p.suffix for p in tmp_path.iterdir()] == [".pickle"]  # no temporary file left


def test_an_unreadable_checkpoint_is_measured_again(tmp_path, caplog):
    saved = Checkpoints(tmp_path, "inputs")
    saved.save("sortkey", "orders", [1])
    (path,) = tmp_path.iterdir()
    path.write_bytes(path.read_bytes()[:5])  # torn
    with caplog.at_level(logging.WARNING, "layout.bench.checkpoints"):
        assert saved.load("sortkey", "orders") is None
    assert "unreadable" in caplog.text
