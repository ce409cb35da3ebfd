"""The benchmarks' layout names, as a user writes them after --layouts."""

import pytest

from layout_core.bench.tpch import layout_optimizer


def test_layout_names_give_an_optimizer_and_its_settings():
    assert layout_optimizer("sortkey") == ("sortkey", {})
    assert layout_optimizer("pando-3") == ("pando", {"trees": "3"})
    assert layout_optimizer("pando-auto") == ("pando", {"trees": "auto"})
    assert layout_optimizer("pando-2(mto)") == ("pando", {"trees": "2", "first_tree": "mto"})
    assert layout_optimizer("mto(join_key)") == ("mto", {"leaf_order": "join_key"})


@pytest.mark.parametrize("name", ["mto(mto)", "pando-x", "zorder-2", "qdtree(diagonal)", "nope"])
def test_an_unknown_layout_name_is_refused(name):
    with pytest.raises(ValueError, match=r"unknown layout .*pando-K\(mto\)"):
        layout_optimizer(name)
