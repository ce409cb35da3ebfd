"""Taxi trips (`layout trips generate`): correlated columns, the outliers asked for, keys
that hold, and ten templates that run and find rows."""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from layout_core.base.schema import load_schema
from layout_core.cli import main
from layout_core.sql.analysis import analyze
from layout_core.workload.trips import generate, generate_trips

ROWS = 20_000


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    home = tmp_path_factory.mktemp("trips")
    out = {}
    for share in (0.0, 0.10):
        paths = generate_trips(ROWS, share, 7, home / f"outliers_{share}")
        out[share] = (paths, {t: pq.read_table(p).to_pandas() for t, p in paths.items()})
    return out


def test_the_columns_are_correlated_and_keys_hold(made):
    _, t = made[0.0]
    trips, zone, payment = t["trips"], t["zone"], t["payment"]
    assert len(trips) == ROWS and trips.tr_id.is_unique and trips.tr_pickup.is_monotonic_increasing
    assert trips.tr_pickup_zone.isin(zone.zn_id).all() and trips.tr_dropoff_zone.isin(zone.zn_id).all()
    assert trips.tr_payment.isin(payment.pm_id).all()
    assert sorted(zone.zn_name[zone.zn_airport]) == ["JFK Airport", "LaGuardia Airport"]
    miles, fare = trips.tr_distance.astype(float), trips.tr_fare.astype(float)
    assert np.corrcoef(miles, fare)[0, 1] > 0.9 and np.corrcoef(miles, trips.tr_duration)[0, 1] > 0.5
    assert (miles > 0).all() and (fare >= 3).all()
    card = trips.tr_payment == payment.pm_id[payment.pm_name == "card"].item()
    assert (trips.tr_tip[~card] == 0).all() and (trips.tr_tip[card] > 0).mean() > 0.99
    assert (trips.tr_total == trips.tr_fare + trips.tr_tip + Decimal("2.50")).all()


def test_outliers_break_the_correlation_in_the_share_asked_for(made):
    _, clean = made[0.0]
    _, t = made[0.10]
    trips = t["trips"]
    jfk = t["zone"].zn_id[t["zone"].zn_name == "JFK Airport"].item()
    zero = trips.tr_distance == 0
    flat = (trips.tr_fare == 70) & (trips.tr_dropoff_zone == jfk)
    assert 0.04 < zero.mean() < 0.06 and 0.04 < flat.mean() < 0.06  # half of 10% each
    assert trips.tr_fare[zero].min() >= 50 and not (clean["trips"].tr_distance == 0).any()
    miles, fare = trips.tr_distance.astype(float), trips.tr_fare.astype(float)
    assert np.corrcoef(miles, fare)[0, 1] < 0.9 * np.corrcoef(clean["trips"].tr_distance.astype(float),
                                                              clean["trips"].tr_fare.astype(float))[0, 1]


def test_every_template_analyzes_and_runs_and_most_find_rows(made):
    import duckdb

    from layout_core.check.engines import to_duckdb

    paths, _ = made[0.10]
    schema = load_schema("trips")
    db = duckdb.connect()
    for table, path in paths.items():
        db.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{path}')")
    found = {}
    for q in generate(4, seed=3):
        assert analyze(q.sql, schema).refs, q.sql
        rows = db.execute(to_duckdb(q.sql)).fetchall()
        found.setdefault(q.template, []).append(bool(rows) and rows[0][0] not in (None, 0))
    assert sorted(found) == list(range(1, 11))
    assert sum(sum(hits) for hits in found.values()) >= 30  # of 40 instances
    assert all(found[6])  # the correlated pair is drawn where such trips are


def test_coordinates_add_four_columns_whose_straight_line_follows_the_road_distance(made, tmp_path):
    import duckdb

    from layout_core.check.engines import to_duckdb
    from layout_core.workload.trips import COORDINATES, schema

    _, plain = made[0.10]
    paths = generate_trips(ROWS, 0.10, 7, tmp_path / "with_points", with_coordinates=True)
    trips = pq.read_table(paths["trips"]).to_pandas()
    # every other column as without the points
    pd.testing.assert_frame_equal(trips.drop(columns=list(COORDINATES)), plain["trips"])
    assert list(schema(True).table("trips").column_names[-4:]) == list(COORDINATES)
    straight = np.hypot(trips.tr_dropoff_x - trips.tr_pickup_x, trips.tr_dropoff_y - trips.tr_pickup_y)
    miles = trips.tr_distance.astype(float)
    moved = miles > 0
    ratio = straight[moved] / miles[moved]
    assert 0.70 < ratio.median() < 0.84 and (ratio < 1.2).all()  # 1 / 1.3, 8% noise
    assert (straight[~moved] == 0).all()  # the zero-distance outliers stay put
    # the distance templates filter the expression, their miles divided by 1.3; the others as before
    lines, roads = generate(4, seed=3, straight_line=True), generate(4, seed=3)
    for line, road in zip(lines, roads):
        if line.template in (1, 6, 8, 10):
            assert "tr_distance" not in line.sql.split("WHERE")[1] and "sqrt(power(" in line.sql
        else:
            assert line.sql == road.sql
    assert [(q.params["LO"], q.params["HI"]) for q in lines if q.template == 1][0] == \
        tuple(f"{float(v) / 1.3:.2f}" for v in (roads[0].params["LO"], roads[0].params["HI"]))
    db = duckdb.connect()
    db.execute(f"CREATE VIEW trips AS SELECT * FROM read_parquet('{paths['trips']}')")
    for view in ("zone", "payment"):
        db.execute(f"CREATE VIEW {view} AS SELECT * FROM read_parquet('{paths[view]}')")
    hits = [db.execute(to_duckdb(q.sql)).fetchall()[0][0] for q in lines if q.template in (1, 6)]
    assert sum(1 for h in hits if h) >= 6  # of 8: the scaled ranges are where the points are


def test_bad_settings_are_one_line_and_write_nothing(tmp_path, caplog):
    out = tmp_path / "trips"
    for bad, said in ((["--outliers", "1"], "the outlier share must be in [0, 1), not 1"),
                      (["--outliers", "-0.1"], "the outlier share must be in [0, 1), not -0.1"),
                      (["--rows", "0"], "rows must be at least 1, not 0")):
        caplog.clear()
        assert main(["trips", "generate", "--out", str(out), *bad]) != 0
        assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == [said]
    assert list(tmp_path.iterdir()) == []
    assert main(["trips", "generate", "--rows", "500", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["payment.parquet", "trips.parquet", "zone.parquet"]
    assert len(pd.read_parquet(out / "trips.parquet")) == 500
