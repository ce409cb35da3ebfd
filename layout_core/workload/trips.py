"""Taxi trips with correlated columns and outliers (Pando's example), and their query templates.

`generate_trips(rows, outliers, seed)` makes three tables (schema `trips`,
layout_core/schemas/trips.yaml):

- `zone` (50 pickup and dropoff zones in five boroughs, two of them airports) and
  `payment` (card, cash, no charge, dispute): the dimensions;
- `trips`, numbered in pickup order (2026-01-01 to 2026-07-01), whose columns are
  correlated as a city's taxis make them: distance (lognormal; airport trips long),
  duration = distance / speed (slower in rush hours) with noise, fare = 3.00 +
  2.50 x miles + 0.35 x minutes + noise, tip a share of the fare when paid by card,
  total = fare + tip + 2.50.

A share `outliers` of the trips breaks the correlation, half each: flat airport
fares (dropoff at JFK, fare 70.00 whatever the distance) and zero-distance trips
with high fares (50 to 250). Everything is drawn by numpy from `seed`.

With `coordinates`, trips also has the pickup and dropoff points (`tr_pickup_x`,
`_y`, `tr_dropoff_x`, `_y`, in miles on the city's plane): the straight line
between them is the road distance over ROAD_FACTOR, with noise (zero for the
zero-distance outliers). Drawn from a stream of their own, so every other
column is the same as without them. The distance templates (1, 6, 8, 10) then
filter the straight-line distance `STRAIGHT_LINE`, an expression no column
stores (Pando's DISTANCE(start_point, end_point) < ?).

`generate(per_template, seed)` draws instances of ten templates: a range on each
correlated column, a pickup window, the correlated pair distance x fare, joins to
both dimensions, and a search for short trips with high fares (the outliers).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from layout_core.base.schema import Schema, load_schema
from layout_core.workload.arrow_columns import decimal_from_cents
from layout_core.workload.tpch import GeneratedQuery, substitute

TABLES = ("zone", "payment", "trips")
BOROUGHS = {"Manhattan": 20, "Brooklyn": 10, "Queens": 10, "Bronx": 6, "Staten Island": 4}
POPULARITY = {"Manhattan": 5.0, "Brooklyn": 2.0, "Queens": 1.5, "Bronx": 1.0, "Staten Island": 0.3}
AIRPORTS = ("JFK Airport", "LaGuardia Airport")  # the last two zones of Queens
PAYMENTS = {"card": 0.65, "cash": 0.30, "no charge": 0.03, "dispute": 0.02}
START, END = dt.datetime(2026, 1, 1), dt.datetime(2026, 7, 1)
FLAT_AIRPORT_FARE = 7000  # cents
SURCHARGE = 250  # cents
ROAD_FACTOR = 1.3  # road miles per straight-line mile
COORDINATES = ("tr_pickup_x", "tr_pickup_y", "tr_dropoff_x", "tr_dropoff_y")
STRAIGHT_LINE = "sqrt(power(tr_dropoff_x - tr_pickup_x, 2) + power(tr_dropoff_y - tr_pickup_y, 2))"


def zones() -> pa.Table:
    ids, boroughs, names = [], [], []
    for borough, count in BOROUGHS.items():
        for i in range(1, count + 1):
            ids.append(len(ids) + 1)
            boroughs.append(borough)
            last = count - i  # Queens' last two zones are the airports
            names.append(AIRPORTS[1 - last] if borough == "Queens" and last < 2 else f"{borough} {i:02d}")
    airport = [name in AIRPORTS for name in names]
    return pa.table({"zn_id": pa.array(ids, pa.int64()), "zn_borough": boroughs, "zn_name": names,
                     "zn_airport": airport})


def payments() -> pa.Table:
    return pa.table({"pm_id": pa.array(range(1, len(PAYMENTS) + 1), pa.int64()), "pm_name": list(PAYMENTS)})


def schema(coordinates: bool = False) -> Schema:
    """The trips schema; with `coordinates`, trips has the four coordinate columns too."""
    shipped = load_schema("trips")
    if not coordinates:
        return shipped
    table = shipped.tables["trips"]
    extra = tuple((name, "double") for name in COORDINATES)
    return dataclasses.replace(shipped, tables={**shipped.tables,
                                                "trips": dataclasses.replace(table, columns=table.columns + extra)})


def coordinates(miles: np.ndarray, seed: int) -> dict[str, np.ndarray]:
    """Pickup and dropoff points whose straight-line distance is `miles` / ROAD_FACTOR
    with 8% noise, from a stream of their own: pickups anywhere in a 20 x 20 mile
    city, dropoffs in a uniform direction."""
    rng = np.random.default_rng([int(seed), 2])
    rows = miles.size
    straight = miles / ROAD_FACTOR * rng.lognormal(0.0, 0.08, rows)
    angle = rng.uniform(0.0, 2 * np.pi, rows)
    x0, y0 = rng.uniform(0.0, 20.0, rows), rng.uniform(0.0, 20.0, rows)
    return {"tr_pickup_x": x0, "tr_pickup_y": y0,
            "tr_dropoff_x": x0 + straight * np.cos(angle), "tr_dropoff_y": y0 + straight * np.sin(angle)}


def trips(rows: int, outliers: float, seed: int, zone: pa.Table, with_coordinates: bool = False) -> pa.Table:
    """`rows` trips in pickup order (see the module docstring)."""
    rng = np.random.default_rng(seed)
    seconds = np.sort(rng.integers(0, int((END - START).total_seconds()), rows))
    pickup = np.datetime64(START, "s") + seconds.astype("timedelta64[s]")
    zone_ids = np.asarray(zone["zn_id"])
    borough = np.asarray(zone["zn_borough"].to_pylist(), dtype=object)
    airport = np.asarray(zone["zn_airport"])
    weight = np.array([3.0 if a else POPULARITY[b] for a, b in zip(airport, borough)])
    weight /= weight.sum()
    picked_up = rng.choice(len(zone_ids), rows, p=weight)
    dropped_off = rng.choice(len(zone_ids), rows, p=weight)
    # most trips stay in their borough
    same = rng.random(rows) < 0.6
    stay = np.array([rng.choice(np.flatnonzero(borough == borough[z])) for z in range(len(zone_ids))])  # per zone
    dropped_off = np.where(same, stay[picked_up], dropped_off)
    to_airport = airport[picked_up] | airport[dropped_off]

    miles = np.where(to_airport, rng.normal(16.0, 3.0, rows).clip(8, 30),
                     rng.lognormal(np.log(2.0), 0.7, rows).clip(0.1, 40))
    hour = (seconds // 3600) % 24
    mph = np.where((hour >= 7) & (hour < 10) | (hour >= 16) & (hour < 19), 7.0,
                   np.where(hour < 6, 20.0, 12.0))
    duration = np.round(miles / mph * 3600 * rng.lognormal(0.0, 0.15, rows) + 60).astype(np.int32)
    fare = np.maximum(300, np.round(300 + 250 * miles + 35 * duration / 60 + rng.normal(0, 50, rows)))

    odd = rng.random(rows) < outliers
    flat = odd & (rng.random(rows) < 0.5)
    zero = odd & ~flat
    jfk = int(np.flatnonzero(np.asarray(zone["zn_name"].to_pylist()) == "JFK Airport")[0])
    dropped_off = np.where(flat, jfk, dropped_off)
    fare = np.where(flat, FLAT_AIRPORT_FARE, fare)
    miles = np.where(zero, 0.0, miles)
    duration = np.where(zero, rng.integers(60, 600, rows), duration).astype(np.int32)
    fare = np.where(zero, rng.integers(5000, 25000, rows), fare).astype(np.int64)

    payment = rng.choice(len(PAYMENTS), rows, p=list(PAYMENTS.values())) + 1
    tip = np.where(payment == 1, np.round(fare * rng.uniform(0.10, 0.25, rows)), 0).astype(np.int64)
    passengers = rng.choice(np.arange(1, 7), rows, p=[0.70, 0.14, 0.06, 0.04, 0.04, 0.02]).astype(np.int32)
    points = coordinates(miles, seed) if with_coordinates else {}
    return pa.table({
        "tr_id": pa.array(np.arange(1, rows + 1), pa.int64()),
        "tr_pickup": pa.array(pickup, pa.timestamp("us")),
        "tr_pickup_zone": pa.array(zone_ids[picked_up], pa.int64()),
        "tr_dropoff_zone": pa.array(zone_ids[dropped_off], pa.int64()),
        "tr_payment": pa.array(payment, pa.int64()),
        "tr_passengers": pa.array(passengers, pa.int32()),
        "tr_distance": decimal_from_cents(np.round(miles * 100).astype(np.int64), pa.decimal128(8, 2)),
        "tr_duration": pa.array(duration, pa.int32()),
        "tr_fare": decimal_from_cents(fare, pa.decimal128(10, 2)),
        "tr_tip": decimal_from_cents(tip, pa.decimal128(10, 2)),
        "tr_total": decimal_from_cents(fare + tip + SURCHARGE, pa.decimal128(10, 2)),
        **{name: pa.array(values, pa.float64()) for name, values in points.items()},
    })


def check_settings(rows: int, outliers: float) -> None:
    """ValueError naming a setting the generator cannot make."""
    if rows < 1:
        raise ValueError(f"rows must be at least 1, not {rows}")
    if not 0 <= outliers < 1:
        raise ValueError(f"the outlier share must be in [0, 1), not {outliers:g}")


def generate_trips(rows: int, outliers: float, seed: int, out: str | Path,
                   with_coordinates: bool = False) -> dict[str, Path]:
    """The three tables as `<out>/<table>.parquet`, written to a temporary folder renamed
    into place (a killed run leaves no half-made tables)."""
    check_settings(rows, outliers)
    out = Path(out)
    zone = zones()
    tables = {"zone": zone, "payment": payments(), "trips": trips(rows, outliers, seed, zone, with_coordinates)}
    staging = out.with_name(f".{out.name}.writing")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name, table in tables.items():
        pq.write_table(table, staging / f"{name}.parquet")
    shutil.rmtree(out, ignore_errors=True)
    staging.rename(out)
    return {name: out / f"{name}.parquet" for name in TABLES}


# --------------------------------------------------------------------------- queries

TEMPLATES = {
    1: "SELECT count(*), avg(tr_fare) FROM trips WHERE tr_distance BETWEEN [LO] AND [HI]",
    2: "SELECT count(*), avg(tr_distance) FROM trips WHERE tr_fare BETWEEN [LO] AND [HI]",
    3: "SELECT avg(tr_fare) FROM trips WHERE tr_duration BETWEEN [LO] AND [HI]",
    4: "SELECT count(*), avg(tr_fare) FROM trips WHERE tr_tip >= [TIP]",
    5: ("SELECT tr_pickup_zone, count(*) FROM trips WHERE tr_pickup >= TIMESTAMP '[START]' "
        "AND tr_pickup < TIMESTAMP '[END]' GROUP BY tr_pickup_zone"),
    6: ("SELECT count(*), avg(tr_tip) FROM trips WHERE tr_distance BETWEEN [DLO] AND [DHI] "
        "AND tr_fare BETWEEN [FLO] AND [FHI]"),
    7: ("SELECT sum(t.tr_total) FROM trips t JOIN zone z ON t.tr_pickup_zone = z.zn_id "
        "WHERE z.zn_borough = '[BOROUGH]' AND t.tr_fare > [FARE]"),
    8: ("SELECT avg(t.tr_tip) FROM trips t JOIN payment p ON t.tr_payment = p.pm_id "
        "WHERE p.pm_name = '[PAYMENT]' AND t.tr_distance BETWEEN [LO] AND [HI]"),
    9: ("SELECT count(*), avg(t.tr_fare) FROM trips t JOIN zone z ON t.tr_dropoff_zone = z.zn_id "
        "WHERE z.zn_airport AND t.tr_pickup >= TIMESTAMP '[START]' AND t.tr_pickup < TIMESTAMP '[END]'"),
    10: "SELECT count(*) FROM trips WHERE tr_fare >= [FARE] AND tr_distance <= [MILES]",
}


def _money(value: float) -> str:
    return f"{value:.2f}"


def _window(rng: np.random.Generator, days: int) -> tuple[str, str]:
    start = START + dt.timedelta(days=int(rng.integers(0, (END - START).days - days + 1)))
    return start.isoformat(sep=" "), (start + dt.timedelta(days=days)).isoformat(sep=" ")


def parameters(template: int, rng: np.random.Generator) -> dict[str, str]:
    """One instance's literals, drawn where the data is (ranges of the model's values)."""
    if template in (1, 8):
        lo = rng.uniform(0, 12)
        out = {"LO": _money(lo), "HI": _money(lo + rng.choice([0.5, 1.0, 2.0, 5.0]))}
        return {**out, "PAYMENT": str(rng.choice(list(PAYMENTS)))} if template == 8 else out
    if template == 2:
        lo = rng.uniform(5, 80)
        return {"LO": _money(lo), "HI": _money(lo + rng.choice([2.0, 5.0, 10.0]))}
    if template == 3:
        lo = int(rng.integers(120, 3600))
        return {"LO": str(lo), "HI": str(lo + int(rng.choice([60, 300, 600])))}
    if template == 4:
        return {"TIP": _money(rng.uniform(5, 20))}
    if template in (5, 9):
        start, end = _window(rng, int(rng.choice([1, 7])) if template == 5 else 30)
        return {"START": start, "END": end}
    if template == 6:  # a distance range and the fares such trips have (the correlated pair)
        lo = rng.uniform(0.5, 10)
        hi = lo + rng.choice([1.0, 2.0])
        return {"DLO": _money(lo), "DHI": _money(hi), "FLO": _money(3 + 3.0 * lo), "FHI": _money(6 + 4.5 * hi)}
    if template == 7:
        return {"BOROUGH": str(rng.choice(list(BOROUGHS))), "FARE": _money(rng.uniform(10, 60))}
    if template == 10:
        return {"FARE": _money(rng.uniform(40, 100)), "MILES": _money(rng.uniform(0.5, 3))}
    raise ValueError(f"trips template number must be in 1..{len(TEMPLATES)}, got {template!r}")


def straight_line_template(template: int) -> str:
    """A template with its road-distance filter on the straight-line distance instead
    (the literals scaled by ROAD_FACTOR below); the others as they are."""
    text = TEMPLATES[template]
    where = text.index("WHERE")
    return text[:where] + text[where:].replace("t.tr_distance", STRAIGHT_LINE).replace("tr_distance", STRAIGHT_LINE)


_DISTANCE_PARAMETERS = {1: ("LO", "HI"), 6: ("DLO", "DHI"), 8: ("LO", "HI"), 10: ("MILES",)}


def generate(per_template: int, seed: int, templates=None, straight_line: bool = False) -> list[GeneratedQuery]:
    """`per_template` instances of every template (default all ten), numbered from 1; each
    template draws from its own stream, as workload.tpch.generate does. With
    `straight_line`, the distance templates filter the straight-line distance of
    the coordinates, their miles divided by ROAD_FACTOR (the same draws)."""
    out = []
    for template in tuple(templates or TEMPLATES):
        rng = np.random.default_rng([int(seed), 1000 + template])
        text = straight_line_template(template) if straight_line else TEMPLATES[template]
        for instance in range(1, per_template + 1):
            params = parameters(template, rng)
            if straight_line:
                params.update({k: _money(float(params[k]) / ROAD_FACTOR)
                               for k in _DISTANCE_PARAMETERS.get(template, ())})
            out.append(GeneratedQuery(template, instance, params, substitute(text, params)))
    return out
