"""The 22 TPC-H query templates (Spark SQL) and a seeded workload generator.

Templates live in ``layout_core/workload/tpch_templates/q<N>.sql`` and carry
placeholders written ``[NAME]``.  :func:`parameters` draws the substitution
values following the TPC-H specification (clause 2.4, "substitution
parameters"); :func:`generate` produces reproducible query instances.

Skew: with ``skew=s`` every non-date categorical or numeric parameter is drawn
from a bounded Zipf distribution over its domain, ranked in the domain's
natural order (the specification's list order, or ascending for numbers):
rank ``k`` has probability proportional to ``1 / k**s``.  Date parameters stay
uniform.  This follows the skewed workloads of Sun et al. (SIGMOD 2014, §7.2).

Focus (a local workload shift): with ``focus=Focus(latest=0.2)`` every date
parameter is drawn from the latest fifth of its range (a year among 1993-1997
becomes 1997); with ``focus=Focus(region="ASIA")`` every region parameter is
that region and every nation one of its nations (q22's seven country codes stay
as they are: a region has five nations). Other parameters keep their draws.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Callable, Iterable, Sequence

import numpy as np

__all__ = [
    "TEMPLATE_NUMBERS",
    "GeneratedQuery",
    "Focus",
    "load_template",
    "placeholders",
    "parameters",
    "generate",
    "substitute",
    "write_sql_file",
    "REGIONS",
    "NATIONS",
    "NATION_REGION",
    "SEGMENTS",
    "PRIORITIES",
    "SHIP_MODES",
    "COLORS",
    "TYPE_SYLLABLE_1",
    "TYPE_SYLLABLE_2",
    "TYPE_SYLLABLE_3",
    "CONTAINER_SYLLABLE_1",
    "CONTAINER_SYLLABLE_2",
    "Q13_WORD1",
    "Q13_WORD2",
]

TEMPLATE_NUMBERS: tuple[int, ...] = tuple(range(1, 23))

# --------------------------------------------------------------------------
# Value domains of the TPC-H specification (clause 4.2.2.13 and 4.2.3),
# in the specification's order.
# --------------------------------------------------------------------------

REGIONS: tuple[str, ...] = ("AFRICA", "AMERICA", "ASIA", "EUROPE", "MIDDLE EAST")

# (N_NAME, N_REGIONKEY) in N_NATIONKEY order.
_NATION_TABLE: tuple[tuple[str, int], ...] = (
    ("ALGERIA", 0),
    ("ARGENTINA", 1),
    ("BRAZIL", 1),
    ("CANADA", 1),
    ("EGYPT", 4),
    ("ETHIOPIA", 0),
    ("FRANCE", 3),
    ("GERMANY", 3),
    ("INDIA", 2),
    ("INDONESIA", 2),
    ("IRAN", 4),
    ("IRAQ", 4),
    ("JAPAN", 2),
    ("JORDAN", 4),
    ("KENYA", 0),
    ("MOROCCO", 0),
    ("MOZAMBIQUE", 0),
    ("PERU", 1),
    ("CHINA", 2),
    ("ROMANIA", 3),
    ("SAUDI ARABIA", 4),
    ("VIETNAM", 2),
    ("RUSSIA", 3),
    ("UNITED KINGDOM", 3),
    ("UNITED STATES", 1),
)
NATIONS: tuple[str, ...] = tuple(name for name, _ in _NATION_TABLE)
NATION_REGION: dict[str, str] = {name: REGIONS[rk] for name, rk in _NATION_TABLE}

SEGMENTS: tuple[str, ...] = ("AUTOMOBILE", "BUILDING", "FURNITURE", "MACHINERY", "HOUSEHOLD")
PRIORITIES: tuple[str, ...] = ("1-URGENT", "2-HIGH", "3-MEDIUM", "4-NOT SPECIFIED", "5-LOW")
SHIP_MODES: tuple[str, ...] = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")

TYPE_SYLLABLE_1: tuple[str, ...] = ("STANDARD", "SMALL", "MEDIUM", "LARGE", "ECONOMY", "PROMO")
TYPE_SYLLABLE_2: tuple[str, ...] = ("ANODIZED", "BURNISHED", "PLATED", "POLISHED", "BRUSHED")
TYPE_SYLLABLE_3: tuple[str, ...] = ("TIN", "NICKEL", "BRASS", "STEEL", "COPPER")

CONTAINER_SYLLABLE_1: tuple[str, ...] = ("SM", "LG", "MED", "JUMBO", "WRAP")
CONTAINER_SYLLABLE_2: tuple[str, ...] = ("CASE", "BOX", "BAG", "JAR", "PKG", "PACK", "CAN", "DRUM")

COLORS: tuple[str, ...] = (
    "almond", "antique", "aquamarine", "azure", "beige", "bisque", "black", "blanched",
    "blue", "blush", "brown", "burlywood", "burnished", "chartreuse", "chiffon",
    "chocolate", "coral", "cornflower", "cornsilk", "cream", "cyan", "dark", "deep",
    "dim", "dodger", "drab", "firebrick", "floral", "forest", "frosted", "gainsboro",
    "ghost", "goldenrod", "green", "grey", "honeydew", "hot", "indian", "ivory", "khaki",
    "lace", "lavender", "lawn", "lemon", "light", "lime", "linen", "magenta", "maroon",
    "medium", "metallic", "midnight", "mint", "misty", "moccasin", "navajo", "navy",
    "olive", "orange", "orchid", "pale", "papaya", "peach", "peru", "pink", "plum",
    "powder", "puff", "purple", "red", "rose", "rosy", "royal", "saddle", "salmon",
    "sandy", "seashell", "sienna", "sky", "slate", "smoke", "snow", "spring", "steel",
    "tan", "thistle", "tomato", "turquoise", "violet", "wheat", "white", "yellow",
)

Q13_WORD1: tuple[str, ...] = ("special", "pending", "unusual", "express")
Q13_WORD2: tuple[str, ...] = ("packages", "requests", "accounts", "deposits")

# Composite domains, ranked in natural (lexicographic-by-spec-order) order.
_BRANDS: tuple[str, ...] = tuple(f"Brand#{m}{n}" for m in range(1, 6) for n in range(1, 6))
_TYPES_2: tuple[str, ...] = tuple(f"{a} {b}" for a in TYPE_SYLLABLE_1 for b in TYPE_SYLLABLE_2)
_TYPES_3: tuple[str, ...] = tuple(
    f"{a} {b} {c}" for a in TYPE_SYLLABLE_1 for b in TYPE_SYLLABLE_2 for c in TYPE_SYLLABLE_3
)
_CONTAINERS: tuple[str, ...] = tuple(
    f"{a} {b}" for a in CONTAINER_SYLLABLE_1 for b in CONTAINER_SYLLABLE_2
)

_PLACEHOLDER = re.compile(r"\[([A-Z][A-Z0-9_]*)\]")

# --------------------------------------------------------------------------
# Templates
# --------------------------------------------------------------------------


def _check_template_number(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or int(n) not in TEMPLATE_NUMBERS:
        raise ValueError(f"TPC-H template number must be an integer in 1..22, got {n!r}")
    return int(n)


@lru_cache(maxsize=None)
def load_template(n: int) -> str:
    """The text of TPC-H query template ``n`` (1..22) with ``[NAME]`` placeholders."""
    n = _check_template_number(n)
    ref = resources.files("layout_core.workload.tpch_templates").joinpath(f"q{n}.sql")
    text = ref.read_text(encoding="utf-8").strip()
    if text.endswith(";"):
        text = text[:-1].rstrip()
    return text


def placeholders(template_sql: str) -> set[str]:
    """The placeholder names (without brackets) occurring in ``template_sql``."""
    return set(_PLACEHOLDER.findall(template_sql))


def substitute(template_sql: str, params: dict[str, str | int]) -> str:
    """Replace every ``[NAME]`` in ``template_sql`` by ``str(params[NAME])``.

    Raises ValueError naming the placeholders without a value and the
    parameters that no placeholder uses.
    """
    names = placeholders(template_sql)
    missing = sorted(names - set(params))
    unused = sorted(set(params) - names)
    if missing or unused:
        parts = []
        if missing:
            parts.append("unfilled placeholder(s): " + ", ".join(f"[{m}]" for m in missing))
        if unused:
            parts.append("unused parameter(s): " + ", ".join(unused))
        raise ValueError("; ".join(parts))
    return _PLACEHOLDER.sub(lambda m: str(params[m.group(1)]), template_sql)


# --------------------------------------------------------------------------
# Random draws
# --------------------------------------------------------------------------


@lru_cache(maxsize=256)
def _zipf_probs(size: int, skew: float) -> np.ndarray:
    ranks = np.arange(1, size + 1, dtype=np.float64)
    weights = ranks ** (-float(skew))
    probs = weights / weights.sum()
    probs.setflags(write=False)
    return probs


@dataclass(frozen=True)
class Focus:
    """Where a local workload shift moves the parameters: dates to the `latest` share of
    their range, regions and nations to one `region` (see the module docstring)."""

    latest: float | None = None
    region: str | None = None

    def __post_init__(self):
        if self.latest is not None and not 0 < self.latest <= 1:
            raise ValueError(f"latest must be a share of a date range in (0, 1], not {self.latest!r}")
        if self.region is not None and self.region not in REGIONS:
            raise ValueError(f"unknown region {self.region!r}: one of {', '.join(REGIONS)}")


class _Drawer:
    """Draws from finite domains: uniformly, or Zipf-ranked when ``skew`` is set;
    dates, regions and nations where ``focus`` puts them."""

    def __init__(self, rng: np.random.Generator, skew: float | None, focus: Focus | None = None):
        if skew is not None:
            skew = float(skew)
            if not np.isfinite(skew) or skew < 0:
                raise ValueError(f"skew must be a finite non-negative Zipf exponent, got {skew!r}")
        self.rng = rng
        self.skew = skew
        self.focus = focus or Focus()

    def _p(self, size: int) -> np.ndarray | None:
        return None if self.skew is None else _zipf_probs(size, self.skew)

    def pick(self, domain: Sequence):
        """One element of ``domain`` (skewed when configured)."""
        idx = int(self.rng.choice(len(domain), p=self._p(len(domain))))
        return domain[idx]

    def pick_distinct(self, domain: Sequence, k: int) -> list:
        """``k`` distinct elements of ``domain`` in draw order (skewed when configured)."""
        idx = self.rng.choice(len(domain), size=k, replace=False, p=self._p(len(domain)))
        return [domain[int(i)] for i in idx]

    def integer(self, low: int, high: int) -> int:
        """An integer in the closed range [low, high] (skewed: low is rank 1)."""
        return int(self.pick(range(low, high + 1)))

    # Dates are uniform, over the latest share of their range under a focus: the same draw
    # scaled into that share, so that a focus leaves every other parameter's draw as it was.
    def uniform_index(self, size: int) -> int:
        index = int(self.rng.integers(0, size))
        if self.focus.latest is None:
            return index
        window = max(1, round(self.focus.latest * size))
        return size - window + index * window // size

    def region(self) -> str:
        return self.focus.region or self.pick(REGIONS)

    def nations(self, k: int) -> list[str]:
        """``k`` distinct nations (of the focus region, when there is one)."""
        domain = NATIONS if self.focus.region is None else [n for n in NATIONS
                                                              if NATION_REGION[n] == self.focus.region]
        return self.pick_distinct(domain, k)

    def nation(self) -> str:
        return self.pick(NATIONS) if self.focus.region is None else self.nations(1)[0]


def _month_start(year: int, month: int, offset: int) -> str:
    """First day of the month ``offset`` months after year-month, as ISO text."""
    total = year * 12 + (month - 1) + offset
    return _dt.date(total // 12, total % 12 + 1, 1).isoformat()


def _months_between(first: tuple[int, int], last: tuple[int, int]) -> int:
    return (last[0] * 12 + last[1]) - (first[0] * 12 + first[1]) + 1


def _random_month(d: _Drawer, first: tuple[int, int], last: tuple[int, int]) -> str:
    """First day of a uniformly chosen month in [first, last] (inclusive)."""
    return _month_start(first[0], first[1], d.uniform_index(_months_between(first, last)))


def _random_year_start(d: _Drawer, first: int, last: int) -> str:
    """January 1st of a uniformly chosen year in [first, last]."""
    return _dt.date(first + d.uniform_index(last - first + 1), 1, 1).isoformat()


def _format_fraction(value: float) -> str:
    return np.format_float_positional(value, trim="-", precision=12)


# --------------------------------------------------------------------------
# Per-template substitution rules (TPC-H clause 2.4.x.3)
# --------------------------------------------------------------------------


def _q1(d: _Drawer, sf: float) -> dict:
    return {"DELTA": d.integer(60, 120)}


def _q2(d: _Drawer, sf: float) -> dict:
    return {
        "SIZE": d.integer(1, 50),
        "TYPE": d.pick(TYPE_SYLLABLE_3),
        "REGION": d.region(),
    }


def _q3(d: _Drawer, sf: float) -> dict:
    segment = d.pick(SEGMENTS)
    day = 1 + d.uniform_index(31)
    return {"SEGMENT": segment, "DATE": _dt.date(1995, 3, day).isoformat()}


def _q4(d: _Drawer, sf: float) -> dict:
    return {"DATE": _random_month(d, (1993, 1), (1997, 10))}


def _q5(d: _Drawer, sf: float) -> dict:
    region = d.region()
    return {"REGION": region, "DATE": _random_year_start(d, 1993, 1997)}


def _q6(d: _Drawer, sf: float) -> dict:
    date = _random_year_start(d, 1993, 1997)
    discount = d.integer(2, 9)
    quantity = d.integer(24, 25)
    return {"DATE": date, "DISCOUNT": f"0.{discount:02d}", "QUANTITY": quantity}


def _q7(d: _Drawer, sf: float) -> dict:
    n1, n2 = d.nations(2)
    return {"NATION1": n1, "NATION2": n2}


def _q8(d: _Drawer, sf: float) -> dict:
    nation = d.nation()
    return {"NATION": nation, "REGION": NATION_REGION[nation], "TYPE": d.pick(_TYPES_3)}


def _q9(d: _Drawer, sf: float) -> dict:
    return {"COLOR": d.pick(COLORS)}


def _q10(d: _Drawer, sf: float) -> dict:
    return {"DATE": _random_month(d, (1993, 2), (1995, 1))}


def _q11(d: _Drawer, sf: float) -> dict:
    return {"NATION": d.nation(), "FRACTION": _format_fraction(0.0001 / sf)}


def _q12(d: _Drawer, sf: float) -> dict:
    m1, m2 = d.pick_distinct(SHIP_MODES, 2)
    return {"SHIPMODE1": m1, "SHIPMODE2": m2, "DATE": _random_year_start(d, 1993, 1997)}


def _q13(d: _Drawer, sf: float) -> dict:
    return {"WORD1": d.pick(Q13_WORD1), "WORD2": d.pick(Q13_WORD2)}


def _q14(d: _Drawer, sf: float) -> dict:
    return {"DATE": _random_month(d, (1993, 1), (1997, 12))}


def _q15(d: _Drawer, sf: float) -> dict:
    return {"DATE": _random_month(d, (1993, 1), (1997, 10))}


def _q16(d: _Drawer, sf: float) -> dict:
    params: dict[str, str | int] = {"BRAND": d.pick(_BRANDS), "TYPE": d.pick(_TYPES_2)}
    for i, size in enumerate(d.pick_distinct(range(1, 51), 8), start=1):
        params[f"SIZE{i}"] = int(size)
    return params


def _q17(d: _Drawer, sf: float) -> dict:
    return {"BRAND": d.pick(_BRANDS), "CONTAINER": d.pick(_CONTAINERS)}


def _q18(d: _Drawer, sf: float) -> dict:
    return {"QUANTITY": d.integer(312, 315)}


def _q19(d: _Drawer, sf: float) -> dict:
    return {
        "QUANTITY1": d.integer(1, 10),
        "QUANTITY2": d.integer(10, 20),
        "QUANTITY3": d.integer(20, 30),
        "BRAND1": d.pick(_BRANDS),
        "BRAND2": d.pick(_BRANDS),
        "BRAND3": d.pick(_BRANDS),
    }


def _q20(d: _Drawer, sf: float) -> dict:
    color = d.pick(COLORS)
    date = _random_year_start(d, 1993, 1997)
    return {"COLOR": color, "DATE": date, "NATION": d.nation()}


def _q21(d: _Drawer, sf: float) -> dict:
    return {"NATION": d.nation()}


def _q22(d: _Drawer, sf: float) -> dict:
    codes = d.pick_distinct(range(10, 35), 7)
    return {f"I{i}": int(code) for i, code in enumerate(codes, start=1)}


_RULES: dict[int, Callable[[_Drawer, float], dict]] = {
    1: _q1, 2: _q2, 3: _q3, 4: _q4, 5: _q5, 6: _q6, 7: _q7, 8: _q8, 9: _q9, 10: _q10,
    11: _q11, 12: _q12, 13: _q13, 14: _q14, 15: _q15, 16: _q16, 17: _q17, 18: _q18,
    19: _q19, 20: _q20, 21: _q21, 22: _q22,
}


def parameters(
    template: int,
    rng: np.random.Generator,
    skew: float | None = None,
    scale_factor: float = 1.0,
    focus: Focus | None = None,
) -> dict[str, str | int]:
    """Substitution parameters for one instance of TPC-H query ``template``.

    Values are ``int`` for integer parameters and ``str`` otherwise (dates as
    ``YYYY-MM-DD``, decimals as text); they are inserted verbatim into the
    template, whose quoting is part of the template text.
    ``scale_factor`` only matters for Q11's FRACTION (0.0001 / SF); ``focus``
    moves dates, regions and nations (a local shift).
    """
    template = _check_template_number(template)
    if not (scale_factor > 0 and np.isfinite(scale_factor)):
        raise ValueError(f"scale_factor must be positive, got {scale_factor!r}")
    return _RULES[template](_Drawer(rng, skew, focus), float(scale_factor))


# --------------------------------------------------------------------------
# Workload generation and output
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class GeneratedQuery:
    """One instance of a TPC-H template with its parameters and final SQL."""

    template: int
    instance: int
    params: dict[str, str | int]
    sql: str


def generate(
    per_template: int,
    seed: int,
    templates: Iterable[int] | None = None,
    skew: float | None = None,
    scale_factor: float = 1.0,
    focus: Focus | None = None,
) -> list[GeneratedQuery]:
    """``per_template`` instances of every template in ``templates`` (default 1..22).

    Templates are generated in the given order, instances numbered from 1.
    Each template draws from its own stream ``numpy.random.default_rng([seed,
    template])``, so the instances of one template do not depend on which other
    templates are generated; the same arguments always give the same output.
    """
    if isinstance(per_template, bool) or int(per_template) != per_template or per_template < 0:
        raise ValueError(f"per_template must be a non-negative integer, got {per_template!r}")
    chosen = TEMPLATE_NUMBERS if templates is None else tuple(templates)
    chosen = tuple(_check_template_number(t) for t in chosen)
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"duplicate template numbers in {chosen!r}")
    out: list[GeneratedQuery] = []
    for template in chosen:
        rng = np.random.default_rng([int(seed), template])
        text = load_template(template)
        for instance in range(1, int(per_template) + 1):
            params = parameters(template, rng, skew=skew, scale_factor=scale_factor, focus=focus)
            out.append(GeneratedQuery(template, instance, params, substitute(text, params)))
    return out


def write_sql_file(queries: Iterable[GeneratedQuery], path: str | Path, benchmark: str = "tpch") -> Path:
    """Write the queries to ``path``: per query a header comment line
    ``-- <benchmark> q<N> instance <i> params <json>``, the statement ending in ``;``
    and a blank line.  Returns the path."""
    path = Path(path)
    chunks = []
    for q in queries:
        header = f"-- {benchmark} q{q.template} instance {q.instance} params {json.dumps(q.params)}"
        chunks.append(f"{header}\n{q.sql.rstrip().rstrip(';').rstrip()};\n\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(chunks), encoding="utf-8")
    return path
