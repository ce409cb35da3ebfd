"""TPC-H templates and the seeded workload generator (layout_core.workload.tpch)."""

from __future__ import annotations

import datetime as dt
import json
import re
from collections import Counter

import numpy as np
import pytest
import sqlglot
from sqlglot import exp

from layout_core.workload import tpch

# Written out by hand from the TPC-H specification (clause 4.2.3), independent
# of the module under test.
NATION_REGION = {
    "ALGERIA": "AFRICA", "ARGENTINA": "AMERICA", "BRAZIL": "AMERICA", "CANADA": "AMERICA",
    "EGYPT": "MIDDLE EAST", "ETHIOPIA": "AFRICA", "FRANCE": "EUROPE", "GERMANY": "EUROPE",
    "INDIA": "ASIA", "INDONESIA": "ASIA", "IRAN": "MIDDLE EAST", "IRAQ": "MIDDLE EAST",
    "JAPAN": "ASIA", "JORDAN": "MIDDLE EAST", "KENYA": "AFRICA", "MOROCCO": "AFRICA",
    "MOZAMBIQUE": "AFRICA", "PERU": "AMERICA", "CHINA": "ASIA", "ROMANIA": "EUROPE",
    "SAUDI ARABIA": "MIDDLE EAST", "VIETNAM": "ASIA", "RUSSIA": "EUROPE",
    "UNITED KINGDOM": "EUROPE", "UNITED STATES": "AMERICA",
}
REGIONS = {"AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST"}
SEGMENTS = {"AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD"}
SHIP_MODES = {"REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB"}
SYL1 = {"STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO"}
SYL2 = {"ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED"}
SYL3 = {"TIN", "NICKEL", "BRASS", "STEEL", "COPPER"}
CONT1 = {"SM", "LG", "MED", "JUMBO", "WRAP"}
CONT2 = {"CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM"}
BRAND_RE = re.compile(r"^Brand#[1-5][1-5]$")

SEEDS = (0, 1, 42, 2024)


def d(text: str) -> dt.date:
    return dt.date.fromisoformat(text)


# ---------------------------------------------------------------- templates


def test_template_numbers_and_loading():
    assert tpch.TEMPLATE_NUMBERS == tuple(range(1, 23))
    for n in tpch.TEMPLATE_NUMBERS:
        text = tpch.load_template(n)
        assert text.strip() and not text.rstrip().endswith(";")
        assert text == text.strip()
    with pytest.raises(ValueError):
        tpch.load_template(0)
    with pytest.raises(ValueError):
        tpch.load_template(23)


def test_spec_limits_present():
    limits = {2: 100, 3: 10, 10: 20, 18: 100, 21: 100}
    for n in tpch.TEMPLATE_NUMBERS:
        text = tpch.load_template(n).lower()
        found = re.findall(r"\blimit\s+(\d+)", text)
        if n in limits:
            assert found == [str(limits[n])], n
        else:
            assert found == [], n


@pytest.mark.parametrize("seed", SEEDS)
def test_every_template_parses_as_query(seed):
    queries = tpch.generate(3, seed)
    assert [q.template for q in queries] == [n for n in range(1, 23) for _ in range(3)]
    assert [q.instance for q in queries] == [1, 2, 3] * 22
    for q in queries:
        assert "[" not in q.sql and "]" not in q.sql, (q.template, q.sql)
        tree = sqlglot.parse_one(q.sql, read="spark")
        assert not isinstance(tree, exp.Command), q.template
        assert isinstance(tree, exp.Query), (q.template, type(tree))
        assert tree.find(exp.Table) is not None


def test_q15_is_a_cte_and_q13_keeps_outer_join():
    q15 = sqlglot.parse_one(tpch.generate(1, 5, templates=[15])[0].sql, read="spark")
    assert [c.alias for c in q15.find_all(exp.CTE)] == ["revenue0"]
    q13 = sqlglot.parse_one(tpch.generate(1, 5, templates=[13])[0].sql, read="spark")
    assert any(j.side.upper() == "LEFT" for j in q13.find_all(exp.Join))


def test_substitute_errors():
    with pytest.raises(ValueError, match=r"\[B\]"):
        tpch.substitute("select [A], [B]", {"A": 1})
    with pytest.raises(ValueError, match="C"):
        tpch.substitute("select [A]", {"A": 1, "C": 2})
    assert tpch.substitute("x = '[A]' or y = '[A]' and z < [N]", {"A": "v", "N": 3}) == (
        "x = 'v' or y = 'v' and z < 3"
    )


def test_generated_params_fill_templates_exactly():
    for n in tpch.TEMPLATE_NUMBERS:
        params = tpch.parameters(n, np.random.default_rng(3))
        assert set(params) == tpch.placeholders(tpch.load_template(n)), n
        assert all(isinstance(v, (str, int)) for v in params.values())


# ---------------------------------------------------------- reproducibility


def test_same_seed_same_workload_different_seed_differs():
    a = tpch.generate(4, 11)
    b = tpch.generate(4, 11)
    c = tpch.generate(4, 12)
    assert [q.sql for q in a] == [q.sql for q in b]
    assert a == b
    assert [q.sql for q in a] != [q.sql for q in c]


def test_template_streams_are_independent():
    everything = tpch.generate(5, 99)
    only6 = tpch.generate(5, 99, templates=[6])
    assert only6 == [q for q in everything if q.template == 6]
    some = tpch.generate(5, 99, templates=[22, 3])
    assert [q.template for q in some] == [22] * 5 + [3] * 5
    assert some == [q for q in everything if q.template == 22] + [
        q for q in everything if q.template == 3
    ]
    # fewer instances are a prefix of more instances
    assert tpch.generate(2, 99, templates=[6]) == only6[:2]


def test_skewed_workload_reproducible_and_differs_from_uniform():
    a = tpch.generate(3, 8, skew=3.0)
    assert a == tpch.generate(3, 8, skew=3.0)
    assert [q.sql for q in a] != [q.sql for q in tpch.generate(3, 8)]


def test_generate_rejects_bad_arguments():
    with pytest.raises(ValueError):
        tpch.generate(1, 0, templates=[23])
    with pytest.raises(ValueError):
        tpch.generate(-1, 0)
    with pytest.raises(ValueError):
        tpch.generate(1, 0, templates=[1, 1])
    with pytest.raises(ValueError):
        tpch.parameters(1, np.random.default_rng(0), skew=-1)


# ------------------------------------------------------------ domain checks


def _params(template: int, n: int = 200, seed: int = 5, **kw) -> list[dict]:
    return [q.params for q in tpch.generate(n, seed, templates=[template], **kw)]


@pytest.mark.parametrize("skew", [None, 3.0])
def test_domains_follow_spec(skew):
    for p in _params(1, skew=skew):
        assert 60 <= p["DELTA"] <= 120
    for p in _params(2, skew=skew):
        assert 1 <= p["SIZE"] <= 50 and p["TYPE"] in SYL3 and p["REGION"] in REGIONS
    for p in _params(3, skew=skew):
        assert p["SEGMENT"] in SEGMENTS
        assert d("1995-03-01") <= d(p["DATE"]) <= d("1995-03-31")
    for p in _params(4, skew=skew) + _params(15, skew=skew):
        day = d(p["DATE"])
        assert day.day == 1 and d("1993-01-01") <= day <= d("1997-10-01")
    for p in _params(5, skew=skew):
        assert p["REGION"] in REGIONS
        assert p["DATE"] in {f"{y}-01-01" for y in range(1993, 1998)}
    for p in _params(6, skew=skew):
        assert p["DATE"] in {f"{y}-01-01" for y in range(1993, 1998)}
        assert re.fullmatch(r"0\.0[2-9]", p["DISCOUNT"])
        assert 0.02 <= float(p["DISCOUNT"]) <= 0.09
        assert p["QUANTITY"] in (24, 25)
    for p in _params(7, skew=skew):
        assert p["NATION1"] in NATION_REGION and p["NATION2"] in NATION_REGION
        assert p["NATION1"] != p["NATION2"]
    for p in _params(8, skew=skew):
        assert NATION_REGION[p["NATION"]] == p["REGION"]
        a, b, c = p["TYPE"].split(" ")
        assert a in SYL1 and b in SYL2 and c in SYL3
    for p in _params(10, skew=skew):
        day = d(p["DATE"])
        assert day.day == 1 and d("1993-02-01") <= day <= d("1995-01-01")
    for p in _params(11, skew=skew):
        assert p["NATION"] in NATION_REGION and float(p["FRACTION"]) == pytest.approx(0.0001)
    for p in _params(12, skew=skew):
        assert p["SHIPMODE1"] in SHIP_MODES and p["SHIPMODE2"] in SHIP_MODES
        assert p["SHIPMODE1"] != p["SHIPMODE2"]
        assert p["DATE"] in {f"{y}-01-01" for y in range(1993, 1998)}
    for p in _params(13, skew=skew):
        assert p["WORD1"] in {"special", "pending", "unusual", "express"}
        assert p["WORD2"] in {"packages", "requests", "accounts", "deposits"}
    for p in _params(14, skew=skew):
        day = d(p["DATE"])
        assert day.day == 1 and d("1993-01-01") <= day <= d("1997-12-01")
    for p in _params(16, skew=skew):
        assert BRAND_RE.match(p["BRAND"])
        a, b = p["TYPE"].split(" ")
        assert a in SYL1 and b in SYL2
        sizes = [p[f"SIZE{i}"] for i in range(1, 9)]
        assert len(set(sizes)) == 8 and all(1 <= s <= 50 for s in sizes)
    for p in _params(17, skew=skew):
        assert BRAND_RE.match(p["BRAND"])
        a, b = p["CONTAINER"].split(" ")
        assert a in CONT1 and b in CONT2
    for p in _params(18, skew=skew):
        assert 312 <= p["QUANTITY"] <= 315
    for p in _params(19, skew=skew):
        assert 1 <= p["QUANTITY1"] <= 10
        assert 10 <= p["QUANTITY2"] <= 20
        assert 20 <= p["QUANTITY3"] <= 30
        assert all(BRAND_RE.match(p[f"BRAND{i}"]) for i in (1, 2, 3))
    for p in _params(20, skew=skew):
        assert p["COLOR"].isalpha() and p["COLOR"].islower()
        assert p["DATE"] in {f"{y}-01-01" for y in range(1993, 1998)}
        assert p["NATION"] in NATION_REGION
    for p in _params(21, skew=skew):
        assert p["NATION"] in NATION_REGION
    for p in _params(22, skew=skew):
        codes = [p[f"I{i}"] for i in range(1, 8)]
        assert len(set(codes)) == 7 and all(10 <= c <= 34 for c in codes)


def test_uniform_draws_cover_domains():
    assert {p["DELTA"] for p in _params(1, 2000)} == set(range(60, 121))
    assert {p["SEGMENT"] for p in _params(3, 500)} == SEGMENTS
    assert {p["DATE"] for p in _params(3, 2000)} == {f"1995-03-{k:02d}" for k in range(1, 32)}
    assert {p["DISCOUNT"] for p in _params(6, 500)} == {f"0.0{k}" for k in range(2, 10)}
    assert {p["NATION"] for p in _params(8, 1000)} == set(NATION_REGION)
    assert len({p["COLOR"] for p in _params(9, 5000)}) == 92
    assert len({p["DATE"] for p in _params(4, 2000)}) == 58  # Jan 1993 .. Oct 1997
    assert len({p["DATE"] for p in _params(10, 2000)}) == 24  # Feb 1993 .. Jan 1995


def test_fraction_scales_with_scale_factor():
    p = tpch.generate(1, 0, templates=[11], scale_factor=0.01)[0].params
    assert p["FRACTION"] == "0.01"
    p = tpch.generate(1, 0, templates=[11], scale_factor=10)[0].params
    assert p["FRACTION"] == "0.00001"


# --------------------------------------------------------------------- skew


def test_skew_concentrates_categorical_parameters():
    skewed = Counter(p["SEGMENT"] for p in _params(3, 500, skew=3))
    uniform = Counter(p["SEGMENT"] for p in _params(3, 500))
    assert skewed.most_common(1)[0][1] / 500 > 0.60
    assert uniform.most_common(1)[0][1] / 500 < 0.35
    # rank 1 in the natural (spec) order is the most frequent value
    assert skewed.most_common(1)[0][0] == "AUTOMOBILE"
    numeric = Counter(p["DELTA"] for p in _params(1, 500, skew=3))
    assert numeric.most_common(1)[0][0] == 60 and numeric[60] / 500 > 0.6


def test_skew_leaves_dates_uniform():
    dates = Counter(p["DATE"] for p in _params(3, 2000, skew=3))
    assert len(dates) == 31
    assert max(dates.values()) / 2000 < 0.1
    years = Counter(p["DATE"] for p in _params(6, 1000, skew=3))
    assert len(years) == 5 and max(years.values()) / 1000 < 0.3


def test_a_focus_on_the_latest_dates_moves_only_the_dates():
    latest = tpch.Focus(latest=0.2)
    years = Counter(p["DATE"] for p in _params(6, 300, focus=latest))
    assert set(years) == {"1997-01-01"}  # the latest fifth of 1993-1997
    months = Counter(p["DATE"] for p in _params(4, 300, focus=latest))  # 1993-01 .. 1997-10: 58 months
    assert min(months) == "1996-11-01" and max(months) == "1997-10-01" and len(months) == 12
    days = Counter(p["DATE"] for p in _params(3, 300, focus=latest))  # a day of March 1995
    assert set(days) == {f"1995-03-{day}" for day in range(26, 32)}  # round(0.2 x 31) = 6 days
    # other parameters keep their draws: q6's discount and quantity, q3's segment
    assert [(p["DISCOUNT"], p["QUANTITY"]) for p in _params(6, 50, focus=latest)] == [
        (p["DISCOUNT"], p["QUANTITY"]) for p in _params(6, 50)]
    assert [p["SEGMENT"] for p in _params(3, 50, focus=latest)] == [p["SEGMENT"] for p in _params(3, 50)]


def test_a_focus_on_a_region_moves_regions_and_nations_there():
    asia = tpch.Focus(region="ASIA")
    assert {p["REGION"] for t in (2, 5) for p in _params(t, 100, focus=asia)} == {"ASIA"}
    nations = {p[name] for t, names in ((7, ("NATION1", "NATION2")), (8, ("NATION",)), (11, ("NATION",)),
                                        (20, ("NATION",)), (21, ("NATION",)))
               for p in _params(t, 100, focus=asia) for name in names}
    assert nations == {"INDIA", "INDONESIA", "JAPAN", "CHINA", "VIETNAM"}
    assert all(p["NATION1"] != p["NATION2"] for p in _params(7, 100, focus=asia))
    assert all(p["REGION"] == "ASIA" for p in _params(8, 100, focus=asia))
    # an empty focus moves nothing
    assert tpch.generate(2, 5, focus=tpch.Focus()) == tpch.generate(2, 5)
    with pytest.raises(ValueError, match="unknown region 'ATLANTIS'"):
        tpch.Focus(region="ATLANTIS")
    with pytest.raises(ValueError, match=r"share of a date range in \(0, 1\]"):
        tpch.Focus(latest=0)


# ------------------------------------------------------------------ output


def test_write_sql_file(tmp_path):
    queries = tpch.generate(2, 3, templates=[1, 22])
    path = tpch.write_sql_file(queries, tmp_path / "sub" / "workload.sql")
    text = path.read_text()
    blocks = text.split(";\n\n")
    assert blocks[-1] == "" and len(blocks) == len(queries) + 1
    for block, q in zip(blocks, queries):
        header, body = block.split("\n", 1)
        m = re.fullmatch(r"-- tpch q(\d+) instance (\d+) params (.*)", header)
        assert m and int(m.group(1)) == q.template and int(m.group(2)) == q.instance
        assert json.loads(m.group(3)) == q.params
        assert body == q.sql
    statements = [s for s in sqlglot.parse(text, read="spark") if s is not None]
    assert len(statements) == len(queries)


# -------------------------------------------------------------------- spark


@pytest.mark.slow
def test_every_template_runs_on_spark(spark, tpch_views):
    for q in tpch.generate(1, 2024, scale_factor=0.01):
        try:
            spark.sql(q.sql).collect()
        except Exception as err:  # pragma: no cover - message aid
            pytest.fail(f"q{q.template} failed on Spark: {err}\n{q.sql}")


@pytest.mark.slow
def test_templates_return_rows_on_spark(spark, tpch_views):
    # Q1 over SF 0.01 has the classic four (returnflag, linestatus) groups.
    q1 = tpch.generate(1, 0, templates=[1])[0]
    assert len(spark.sql(q1.sql).collect()) == 4
    # Q3 with the skewed workload still yields rows (limit 10).
    q3 = tpch.generate(1, 0, templates=[3], skew=3)[0]
    assert 0 < len(spark.sql(q3.sql).collect()) <= 10
