"""`layout bench trips --outliers 0,0.01,...`: one B1 run per outlier share, the
curve in a table and a chart. The runs are stood in for by fixed results; the
table, the sums over the fare and distance templates and the chart are real."""

from __future__ import annotations

import json

import pytest

import layout_core.bench.trips as trips
from layout_core.cli import main


def fake_run(rows, outliers, block_rows, per_template, seed, work, layouts, spark_e2e, dips, coordinates=False):
    # mto reads 100 blocks on q1, 10 on every other template; pando-2 reads 10 more on q2 per 1% outliers
    extra = round(1000 * outliers)
    per_template = {"mto": {str(t): 100 if t == 1 else 10 for t in range(1, 11)}}
    per_template["pando-2"] = {**per_template["mto"], "2": 10 + extra}
    return {"layouts": {name: {"blocks_read": sum(t.values()), "blocks_per_template": t}
                        for name, t in per_template.items()},
            "lower_bound_blocks": 50, "work": str(work)}


def test_a_sweep_runs_each_share_and_draws_the_curve(tmp_path, monkeypatch):
    seen = []
    monkeypatch.setattr(trips, "run", lambda *a: seen.append(a[1]) or fake_run(*a))
    result = trips.sweep([0, 0.01, 0.03], rows=1000, work=tmp_path, layouts=("mto", "pando-2"))
    assert seen == [0, 0.01, 0.03]
    # all templates: mto 100 + 9 x 10 = 190; fare and distance (q1, q2, q6, q8, q10): 100 + 4 x 10 = 140
    assert [p["blocks_read"] for p in result["points"]] == [
        {"mto": 190, "pando-2": 190}, {"mto": 190, "pando-2": 200}, {"mto": 190, "pando-2": 220}]
    assert [p["fare_distance_blocks"]["pando-2"] for p in result["points"]] == [140, 150, 170]
    assert (tmp_path / "outlier_sweep.png").stat().st_size > 1000
    # each share's whole report beside its checkpoints
    kept = json.loads((tmp_path / "outliers0.03" / "result.json").read_text())
    assert kept["layouts"]["pando-2"]["blocks_read"] == 220
    table = trips.format_sweep(result)
    assert "3%" in table and "220 / 170 (1.16x)" in table and "190 / 140" in table


def test_the_cli_takes_several_shares_and_refuses_a_bad_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(trips, "run", fake_run)
    assert main(["bench", "trips", "--rows", "1000", "--outliers", "0,0.1", "--layouts", "mto,pando-2",
                 "--work", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "10%" in out and "290 / 240 (1.53x)" in out
    with pytest.raises(SystemExit) as refused:
        main(["bench", "trips", "--outliers", "0,1.5", "--work", str(tmp_path)])
    assert refused.value.code == 2
    assert "the outlier share must be in [0, 1), not 1.5" in capsys.readouterr().err


def test_coordinates_reach_the_benchmark_from_the_cli(tmp_path, monkeypatch, capsys):
    asked = []
    monkeypatch.setattr(trips, "run", lambda *a, **kw: asked.append(kw) or fake_run(*a, **kw))
    assert main(["bench", "trips", "--rows", "1000", "--outliers", "0.01", "--coordinates", "--layouts", "mto",
                 "--work", str(tmp_path), "--json"]) == 0
    assert asked[0]["coordinates"] is True and asked[0]["outliers"] == 0.01
    assert main(["bench", "trips", "--rows", "1000", "--layouts", "mto", "--work", str(tmp_path), "--json"]) == 0
    assert asked[1]["coordinates"] is False
