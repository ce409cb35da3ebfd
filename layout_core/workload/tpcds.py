"""36 of the 99 TPC-DS query templates (Spark SQL) and a seeded workload generator.

The templates are the ones that filter dimensions (dates, items, demographics,
addresses, households) and join them to the fact tables; they live in
``layout_core/workload/tpcds_templates/q<N>.sql`` with ``[NAME]`` placeholders,
made from the query text of the dsdgen extension (its qualification
parameters replaced by placeholders, quoted aliases backquoted for Spark).

:func:`parameters` draws the values by the substitution rules of the TPC-DS
specification's templates (their ``define`` lines): years uniform in 1998-2002
(1998-2000 where a query reads three years from YEAR), months, quarters, month
sequences, manager and manufacturer ids, price bands, dates inside the sales
period with the template's window (30, 60 or 90 days), and the value lists of
dsdgen's distributions (categories, genders, marital and education statuses,
buy potentials, states, cities). Store attributes keep their qualification
values (store city, county, state, name): dsdgen puts every store of a small
scale factor in one county, and a random county would leave those queries
empty.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache
from importlib import resources
from typing import Callable, Iterable

import numpy as np

from layout_core.sql.analysis import QueryError, parse_query
from layout_core.workload.tpch import GeneratedQuery, substitute

__all__ = ["TEMPLATE_NUMBERS", "load_template", "parameters", "generate", "CATEGORIES", "STATES"]

TEMPLATE_NUMBERS: tuple[int, ...] = (3, 7, 12, 13, 15, 19, 20, 21, 25, 26, 27, 29, 32, 34, 37, 40, 42, 43,
                                     45, 46, 48, 50, 52, 55, 62, 68, 71, 73, 79, 82, 84, 91, 92, 96, 98, 99)

# Value lists of dsdgen's distributions (the ones the templates draw from).
GENDERS = ("M", "F")
MARITAL_STATUSES = ("M", "S", "D", "W", "U")
EDUCATION_STATUSES = ("Primary", "Secondary", "College", "2 yr Degree", "4 yr Degree", "Advanced Degree",
                      "Unknown")
BUY_POTENTIALS = (">10000", "5001-10000", "1001-5000", "501-1000", "0-500", "Unknown")
CATEGORIES = ("Books", "Children", "Electronics", "Home", "Jewelry", "Men", "Music", "Shoes", "Sports", "Women")
STATES = ("AK", "AL", "AR", "AZ", "CA", "CO", "CT", "DC", "DE", "FL", "GA", "HI", "IA", "ID", "IL", "IN", "KS",
          "KY", "LA", "MA", "MD", "ME", "MI", "MN", "MO", "MS", "MT", "NC", "ND", "NE", "NH", "NJ", "NM", "NV",
          "NY", "OH", "OK", "OR", "PA", "RI", "SC", "SD", "TN", "TX", "UT", "VA", "VT", "WA", "WI", "WV", "WY")
CITIES = ("Marion", "Shiloh", "Plainview", "Edgewood", "Bunker Hill", "Enterprise", "Harmony", "Greenfield",
          "Jamestown", "Brownsville", "Cedar Grove", "Kingston", "Hopewell", "Liberty", "New Hope", "Lakeside",
          "Greenwood", "Oakwood", "Fairview", "Summit")
GMT_OFFSETS = (-5, -6, -7)
YEARS = (1998, 2002)  # the sales period's whole years
FIRST_SALE, LAST_SALE = dt.date(1998, 1, 1), dt.date(2002, 12, 31)


@lru_cache(maxsize=None)
def load_template(n: int) -> str:
    """The text of TPC-DS query template ``n`` with ``[NAME]`` placeholders."""
    if isinstance(n, bool) or n not in TEMPLATE_NUMBERS:
        raise ValueError(f"TPC-DS template {n!r} is not one of ours: {', '.join(map(str, TEMPLATE_NUMBERS))}")
    text = resources.files("layout_core.workload.tpcds_templates").joinpath(f"q{n}.sql").read_text("utf-8")
    return text.strip().rstrip(";").rstrip()


# --------------------------------------------------------------------------- draws

class _Draw:
    def __init__(self, rng: np.random.Generator):
        self.rng = rng

    def integer(self, low: int, high: int) -> int:
        """Uniform in [low, high]."""
        return int(self.rng.integers(low, high + 1))

    def pick(self, domain):
        return domain[int(self.rng.integers(0, len(domain)))]

    def distinct(self, domain, k: int) -> list:
        return [domain[int(i)] for i in self.rng.choice(len(domain), size=k, replace=False)]

    def year(self, span: int = 1) -> int:
        """A year such that `span` years from it stay in the sales period."""
        return self.integer(YEARS[0], YEARS[1] - span + 1)

    def date(self, first: dt.date, last: dt.date) -> dt.date:
        return first + dt.timedelta(days=self.integer(0, (last - first).days))


def _window(start: dt.date, days: int, first: str = "SDATE") -> dict:
    return {first: start.isoformat(), "EDATE": (start + dt.timedelta(days=days)).isoformat()}


def _demographics(d: _Draw) -> dict:
    return {"GEN": d.pick(GENDERS), "MS": d.pick(MARITAL_STATUSES), "ES": d.pick(EDUCATION_STATUSES),
            "YEAR": d.year()}


def _three_bands(d: _Draw) -> dict:
    """q13 and q48: three (marital, education) pairs and nine states, one year."""
    out = {"YEAR": d.year()}
    for i, (ms, es) in enumerate(zip(d.distinct(MARITAL_STATUSES, 3), d.distinct(EDUCATION_STATUSES, 3)), 1):
        out[f"MS{i}"], out[f"ES{i}"] = ms, es
    out.update({f"STATE{i}": s for i, s in enumerate(d.distinct(STATES, 9), 1)})
    return out


def _categories(d: _Draw) -> dict:
    """q12, q20, q98: three categories and 30 days from a day in January-July 24 of a year."""
    year = d.year()
    out = {f"CATEGORY{i}": c for i, c in enumerate(d.distinct(CATEGORIES, 3), 1)}
    return {**out, **_window(d.date(dt.date(year, 1, 1), dt.date(year, 7, 24)), 30)}


def _around_sales_date(d: _Draw) -> dict:
    """q21, q40: 30 days either side of a day between January 31 and July 1 of a year."""
    year = d.year()
    day = d.date(dt.date(year, 1, 31), dt.date(year, 7, 1))
    return {"SALES_DATE": day.isoformat(), "DATE_BEFORE": (day - dt.timedelta(days=30)).isoformat(),
            "DATE_AFTER": (day + dt.timedelta(days=30)).isoformat()}


def _excess_discount(d: _Draw) -> dict:
    """q32, q92: a manufacturer and 90 days from a day in 1998-01-01..2002-04-01."""
    return {"IMID": d.integer(1, 1000), **_window(d.date(FIRST_SALE, dt.date(2002, 4, 1)), 90, "CSDATE")}


def _inventory(d: _Draw) -> dict:
    """q37, q82: a 30-dollar price band, four manufacturers, 60 days of inventory."""
    out = {"PRICE": d.integer(10, 70), **_window(d.date(FIRST_SALE, dt.date(2002, 7, 24)), 60, "INVDATE")}
    return {**out, **{f"MANUFACT{i}": m for i, m in enumerate(d.distinct(range(667, 1001), 4), 1)}}


def _buy_potentials(d: _Draw) -> dict:
    one, two = d.distinct(BUY_POTENTIALS, 2)
    return {"BPONE": one, "BPTWO": two, "YEAR": d.year(3)}


def _households(d: _Draw) -> dict:
    return {"DEPCNT": d.integer(0, 9), "VEHCNT": d.integer(-1, 4), "YEAR": d.year(3)}


def _brand_month(d: _Draw) -> dict:
    return {"MONTH": d.integer(11, 12), "YEAR": d.year()}


_RULES: dict[int, Callable[[_Draw], dict]] = {
    3: lambda d: {"MANUFACT": d.integer(1, 1000), "MONTH": d.integer(11, 12)},
    7: _demographics, 26: _demographics, 27: _demographics,
    12: _categories, 20: _categories, 98: _categories,
    13: _three_bands, 48: _three_bands,
    15: lambda d: {"QOY": d.integer(1, 2), "YEAR": d.year()},
    45: lambda d: {"QOY": d.integer(1, 2), "YEAR": d.year()},
    19: lambda d: {"MANAGER": d.integer(1, 100), **_brand_month(d)},
    55: lambda d: {"MANAGER": d.integer(1, 100), **_brand_month(d)},
    42: _brand_month, 52: _brand_month,
    71: _brand_month,  # (its manager id stays the specification's 1)
    21: _around_sales_date, 40: _around_sales_date,
    25: lambda d: {"YEAR": d.year()},
    43: lambda d: {"YEAR": d.year()},
    29: lambda d: {"MONTH": d.integer(1, 9), "YEAR": d.year(3)},
    32: _excess_discount, 92: _excess_discount,
    34: _buy_potentials, 73: _buy_potentials,
    37: _inventory, 82: _inventory,
    46: _households, 68: _households, 79: _households,
    50: lambda d: {"MONTH": d.integer(1, 12), "YEAR": d.year()},
    62: lambda d: {"DMS": d.integer(1176, 1224)},
    99: lambda d: {"DMS": d.integer(1176, 1224)},
    84: lambda d: {"CITY": d.pick(CITIES), "INCOME": d.integer(0, 70000)},
    91: lambda d: {"MONTH": d.integer(11, 12), "YEAR": d.year(), "BUY_POTENTIAL": d.pick(BUY_POTENTIALS),
                   "GMT": d.pick(GMT_OFFSETS)},
    96: lambda d: {"HOUR": d.integer(8, 20), "DEPCNT": d.integer(0, 9)},
}


def parameters(template: int, rng: np.random.Generator) -> dict[str, str | int]:
    """Substitution values for one instance of TPC-DS template ``template``."""
    load_template(template)  # a clear error for a template we do not have
    return _RULES[template](_Draw(rng))


# --------------------------------------------------------------------------- instances

def checked_instance(template: int, instance: int, sql: str) -> str:
    """`sql` if Spark SQL parses it as one query; else a ValueError naming the instance."""
    where = f"TPC-DS q{template} instance {instance}"
    try:
        parse_query(sql)  # the analyzer's parser: one query, no Command, not too deep
    except QueryError as e:
        if e.kind in ("empty", "not a query"):
            raise ValueError(f"{where} is {e.kind}") from None
        raise ValueError(f"{where} does not parse: {e}") from None
    return sql


def generate(per_template: int, seed: int, templates: Iterable[int] | None = None) -> list[GeneratedQuery]:
    """``per_template`` instances of every template (default all 36), numbered from 1.

    Each template draws from its own stream ``default_rng([seed, 2000 + template])``:
    the instances of one template do not depend on which others are generated.
    """
    if isinstance(per_template, bool) or int(per_template) != per_template or per_template < 0:
        raise ValueError(f"per_template must be a non-negative integer, got {per_template!r}")
    chosen = TEMPLATE_NUMBERS if templates is None else tuple(templates)
    if len(set(chosen)) != len(chosen):
        raise ValueError(f"duplicate template numbers in {chosen!r}")
    out = []
    for template in chosen:
        text = load_template(template)
        rng = np.random.default_rng([int(seed), 2000 + template])
        for instance in range(1, int(per_template) + 1):
            params = parameters(template, rng)
            sql = checked_instance(template, instance, substitute(text, params))
            out.append(GeneratedQuery(template, instance, params, sql))
    return out
