"""Skewed and time-ordered TPC-H (`layout tpch generate --skew Z --skew-mode runs|iid
--time-ordered-keys`): Zipf frequencies, runs tied to keys, and tables that stay TPC-H."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from layout_core.cli import main
from layout_core.workload.tpch_skew import TpchVariant, write_variant, zipf_run_lengths
from tests.conftest import TPCH_TABLES


def test_run_lengths_follow_zipf_and_add_up_to_the_rows():
    # z = 1 over 4 values: 1 : 1/2 : 1/3 : 1/4 of 100 rows (their sum is 25/12)
    assert zipf_run_lengths(100, 4, 1.0).tolist() == [48, 24, 16, 12]
    # z = 2 over 3 values: 7.35, 1.84, 0.82 rows; the 2 rows the floors leave go to the first values
    assert zipf_run_lengths(10, 3, 2.0).tolist() == [8, 2, 0]


def test_a_variant_is_named_and_bad_settings_are_refused():
    assert TpchVariant().name == "uniform" and TpchVariant().uniform
    assert TpchVariant(2, "runs").name == "skew2-runs"
    assert TpchVariant(0.5, "iid", time_ordered_keys=True).name == "skew0.5-iid+time-ordered-keys"
    with pytest.raises(ValueError, match="unknown skew mode 'zipf'"):
        TpchVariant(2, "zipf")
    with pytest.raises(ValueError, match="Zipf factor > 0"):
        TpchVariant(-1)


def _read(paths) -> dict[str, pd.DataFrame]:
    return {t: pq.read_table(paths[t]).to_pandas() for t in TPCH_TABLES}


@pytest.fixture(scope="module")
def uniform(tpch_sf001):
    return {t: tpch_sf001 / f"{t}.parquet" for t in TPCH_TABLES}


@pytest.fixture(scope="module")
def variants(uniform, tmp_path_factory):
    home = tmp_path_factory.mktemp("tpch_skew")
    made = {name: _read(write_variant(uniform, variant, home / name)) for name, variant in {
        "runs": TpchVariant(2, "runs"), "iid": TpchVariant(2, "iid"),
        "ordered": TpchVariant(2, "runs", time_ordered_keys=True)}.items()}
    made["uniform"] = _read(uniform)
    return made


def _days(series: pd.Series) -> np.ndarray:
    return pd.to_datetime(series).to_numpy().astype("datetime64[D]").astype(np.int64)


@pytest.mark.parametrize("name", ["runs", "iid", "ordered"])
def test_every_key_and_rule_of_tpch_holds(variants, name):
    t, uniform = variants[name], variants["uniform"]
    assert {k: len(v) for k, v in t.items()} == {k: len(v) for k, v in uniform.items()}
    o, li, c, s, p = t["orders"], t["lineitem"], t["customer"], t["supplier"], t["part"]
    # primary keys unique, every foreign key found
    assert o.o_orderkey.is_unique and not li.duplicated(["l_orderkey", "l_linenumber"]).any()
    assert set(o.o_orderkey) == set(uniform["orders"].o_orderkey)
    assert o.o_custkey.isin(c.c_custkey).all() and li.l_orderkey.isin(o.o_orderkey).all()
    bridge = set(zip(t["partsupp"].ps_partkey, t["partsupp"].ps_suppkey))
    assert all(pair in bridge for pair in zip(li.l_partkey, li.l_suppkey))
    assert c.c_nationkey.between(0, 24).all() and s.s_nationkey.between(0, 24).all()
    # a third of the customers place no order (q13, q22 count them); lines per order stay 1..7
    assert not o.o_custkey.isin(c.c_custkey[c.c_custkey % 3 == 0]).any()
    assert li.groupby("l_orderkey").size().between(1, 7).all()
    # dates: ship 1-121 and commit 30-90 days after the order, receipt 1-30 days after shipping
    lines = li.merge(o[["o_orderkey", "o_orderdate", "o_orderstatus", "o_totalprice"]],
                     left_on="l_orderkey", right_on="o_orderkey")
    ordered, ship = _days(lines.o_orderdate), _days(lines.l_shipdate)
    assert (ship - ordered).min() >= 1 and (ship - ordered).max() <= 121
    assert ((_days(lines.l_commitdate) - ordered) >= 30).all() and ((_days(lines.l_commitdate) - ordered) <= 90).all()
    received = _days(lines.l_receiptdate) - ship
    assert received.min() >= 1 and received.max() <= 30
    assert o.o_orderdate.min() >= dt.date(1992, 1, 1) and o.o_orderdate.max() <= dt.date(1998, 8, 2)
    # statuses and flags from the dates (CURRENTDATE 1995-06-17)
    today = (dt.date(1995, 6, 17) - dt.date(1970, 1, 1)).days
    assert (lines.l_linestatus == np.where(ship > today, "O", "F")).all()
    came_back = _days(lines.l_receiptdate) <= today
    assert lines.l_returnflag[came_back].isin(["R", "A"]).all() and (lines.l_returnflag[~came_back] == "N").all()
    status = lines.groupby("o_orderkey").l_linestatus.agg(lambda x: x.iloc[0] if x.nunique() == 1 else "P")
    assert (o.set_index("o_orderkey").o_orderstatus.loc[status.index] == status).all()
    # prices: quantity x the part's retail price; the order's total from its lines
    price = lines.merge(p[["p_partkey", "p_retailprice"]], left_on="l_partkey", right_on="p_partkey")
    assert (price.l_extendedprice == price.l_quantity * price.p_retailprice).all()
    charge = (lines.l_extendedprice * (1 + lines.l_tax) * (1 - lines.l_discount)).astype(float)
    total = charge.groupby(lines.o_orderkey).sum()
    assert np.allclose(o.set_index("o_orderkey").o_totalprice.astype(float).loc[total.index], total, atol=0.01 * 7)
    # phones start with the nation's country code; a brand names its manufacturer
    assert (c.c_phone.str[:2].astype(int) == c.c_nationkey + 10).all()
    assert (s.s_phone.str[:2].astype(int) == s.s_nationkey + 10).all()
    assert (p.p_mfgr.str[-1] == p.p_brand.str[6]).all() and p.p_size.between(1, 50).all()


def _runs(values: pd.Series) -> int:
    """How many runs of equal values the column has in its row order."""
    return int((values != values.shift()).sum())


def test_runs_tie_keys_to_values_and_iid_has_the_same_frequencies_without(variants):
    runs = variants["runs"]["orders"].sort_values("o_orderkey")
    iid = variants["iid"]["orders"].sort_values("o_orderkey")
    uniform = variants["uniform"]["orders"]
    # Zipf 2: the most frequent date holds 1 / sum(1/k^2) of the orders, about 61% here
    top = runs.o_orderdate.value_counts().iloc[0] / len(runs)
    assert 0.58 < top < 0.63 and iid.o_orderdate.value_counts().iloc[0] / len(iid) == pytest.approx(top, abs=0.01)
    assert uniform.o_orderdate.value_counts().iloc[0] / len(uniform) < 0.01
    # runs: each date fills one stretch of consecutive keys; iid scatters them
    assert _runs(runs.o_orderdate) == runs.o_orderdate.nunique()
    assert _runs(iid.o_orderdate) > 5 * iid.o_orderdate.nunique()
    lines = variants["runs"]["lineitem"]
    assert _runs(lines.l_partkey) == lines.l_partkey.nunique()


def test_time_ordered_keys_number_orders_by_date_and_lines_follow(variants):
    ordered, runs = variants["ordered"], variants["runs"]
    orders = ordered["orders"].sort_values("o_orderkey")
    assert orders.o_orderdate.is_monotonic_increasing
    assert ordered["lineitem"].l_orderkey.is_monotonic_increasing  # the file is in key order

    def orders_by_content(t):  # each order's date, customer, total and lines, without its key
        lines = t["lineitem"].groupby("l_orderkey").agg(n=("l_linenumber", "size"), parts=("l_partkey", "sum"))
        both = t["orders"].merge(lines, left_on="o_orderkey", right_index=True)
        return sorted(both[["o_orderdate", "o_custkey", "o_totalprice", "n", "parts"]].itertuples(index=False))

    assert orders_by_content(ordered) == orders_by_content(runs)


def test_the_command_writes_a_variant_and_refuses_bad_settings_in_one_line(tmp_path, caplog, tpch_sf001):
    out = tmp_path / "skewed"
    assert main(["tpch", "generate", "--sf", "0.01", "--out", str(out), "--skew", "0"]) != 0
    assert main(["tpch", "generate", "--sf", "0.01", "--out", str(out), "--skew", "2", "--skew-mode", "zipf"]) != 0
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert errors == ["--skew must be a Zipf factor > 0, not 0", "unknown skew mode 'zipf': use one of runs, iid"]
    assert not out.exists()  # nothing written for a refused setting
    # a variant made over an earlier one replaces it whole; no staging folder is left behind
    uniform = {t: tpch_sf001 / f"{t}.parquet" for t in TPCH_TABLES}
    write_variant(uniform, TpchVariant(1, "iid"), out)
    (out / "stray.parquet").write_text("from an earlier run")
    paths = write_variant(uniform, TpchVariant(2, "runs"), out)
    assert sorted(p.name for p in out.iterdir()) == sorted([*(f"{t}.parquet" for t in TPCH_TABLES),
                                                            "_tpch_variant.json"])
    assert [p.name for p in tmp_path.iterdir()] == ["skewed"]
    assert pq.read_table(paths["orders"]).num_rows == 15_000
