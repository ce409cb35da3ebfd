"""`layout calibrate`: measuring w on the storage, storing it in the catalog, the CLI."""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math

import pytest

from layout_core.base.errors import UserError
from layout_core.catalog import CalibrationRecord, Catalog, CatalogError
from layout_core.flows.reorg import calibrate as calibrate_mod
from layout_core.flows.reorg.calibrate import (
    Calibration,
    CalibrationError,
    add_calibrate_parser,
    calibrate,
    calibrated_w,
    check_arguments,
)

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)
FAST = {"block_rows": 2000, "blocks": 2, "rounds": 1}


def calibration(w: float = 50.0, at: dt.datetime = T0, read: float = 0.01) -> Calibration:
    return Calibration(w, w * read, read, 50_000, 4, 3, "/warehouse/_calibrate/abc", at)


# ------------------------------------------------------------------ measuring


@pytest.mark.slow
def test_calibration_measures_positive_finite_times_and_their_ratio(spark, tmp_path):
    location = tmp_path / "warehouse" / "_calibrate" / "run1"
    c = calibrate(spark, location, **FAST)
    for value in (c.w, c.write_seconds_per_block, c.read_seconds_per_block):
        assert math.isfinite(value) and value > 0
    assert c.w == pytest.approx(c.write_seconds_per_block / c.read_seconds_per_block)
    assert (c.block_rows, c.blocks, c.rounds) == (2000, 2, 1)
    assert c.location == str(location.resolve())
    assert c.measured_at.tzinfo is not None
    assert not location.exists()
    assert json.loads(json.dumps(c.to_json()))["w"] == c.w


@pytest.mark.slow
def test_the_generated_blocks_are_lineitem_like(spark):
    df = calibrate_mod.calibration_frame(spark, 1000, 3)
    assert len(df.columns) == 17  # lineitem's 16 columns and the block id
    kinds = dict(df.dtypes)
    assert kinds["l_extendedprice"] == "decimal(15,2)" and kinds["l_shipdate"] == "date"
    counts = {row["block_id"]: row["count"] for row in df.groupBy("block_id").count().collect()}
    assert counts == {0: 1000, 1: 1000, 2: 1000}
    assert df.where("l_comment = '' OR l_receiptdate <= l_shipdate").count() == 0


@pytest.mark.slow
def test_the_folder_is_removed_when_reading_fails(spark, tmp_path, monkeypatch):
    location = tmp_path / "_calibrate" / "run2"
    seen = []

    def broken_read(spark, folders, columns):
        seen.extend(folders)
        assert all(folder.is_dir() for folder in folders)  # the blocks were written ...
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(calibrate_mod, "_read_blocks", broken_read)
    with pytest.raises(RuntimeError, match="disk on fire"):
        calibrate(spark, location, **FAST)
    assert len(seen) == 2
    assert not location.exists()  # ... and are gone


def test_a_folder_that_holds_something_is_refused_and_kept(tmp_path):
    location = tmp_path / "mine"
    location.mkdir()
    (location / "data.parquet").write_text("precious")
    with pytest.raises(CalibrationError, match="not an empty folder"):
        calibrate(None, location, **FAST)  # refused before Spark is touched
    assert (location / "data.parquet").read_text() == "precious"


@pytest.mark.parametrize("kwargs, message", [
    ({"block_rows": 999}, "block_rows must be from 1000"),
    ({"block_rows": 0}, "block_rows must be from 1000"),
    ({"blocks": 0}, "blocks must be from 1"),
    ({"rounds": 0}, "rounds must be from 1"),
    ({"rounds": -3}, "rounds must be from 1"),
    ({"block_rows": 2000.5}, "block_rows must be a whole number"),
    ({"blocks": True}, "blocks must be a whole number"),
    ({"block_rows": 10_000_000, "blocks": 100}, "at most"),
])
def test_absurd_arguments_are_refused_clearly(tmp_path, kwargs, message):
    args = {**FAST, **kwargs}
    with pytest.raises(CalibrationError, match=message) as info:
        calibrate(None, tmp_path / "c", **args)
    assert isinstance(info.value, UserError) and isinstance(info.value, ValueError)
    assert not (tmp_path / "c").exists()
    check_arguments(1000, 1, 1)  # the smallest sensible run is fine


# ------------------------------------------------------------------- catalog


def test_a_stored_calibration_round_trips(catalog_url):
    with Catalog(catalog_url) as catalog:
        assert catalog.latest_calibration() is None
        assert calibrated_w(catalog) is None
        c = calibration(w=76.25)
        calibration_id = catalog.record_calibration(c)
        latest = catalog.latest_calibration()
    assert isinstance(latest, CalibrationRecord)
    assert latest == CalibrationRecord(calibration_id, T0, 76.25, c.write_seconds_per_block,
                                       c.read_seconds_per_block, 50_000, 4, 3, c.location)
    assert latest.measured_at.tzinfo is not None
    with Catalog(catalog_url) as catalog:  # a second open finds the table as it is
        assert calibrated_w(catalog) == 76.25
        assert catalog.record_calibration(latest) > calibration_id  # a record can be stored again


def test_latest_is_the_most_recently_measured(catalog_url):
    with Catalog(catalog_url) as catalog:
        first = catalog.record_calibration(calibration(w=10.0, at=T0))
        catalog.record_calibration(calibration(w=30.0, at=T0 + dt.timedelta(days=2)))
        catalog.record_calibration(calibration(w=20.0, at=T0 + dt.timedelta(days=1)))  # recorded late
        assert catalog.latest_calibration().w == 30.0
        later = catalog.record_calibration(calibration(w=40.0, at=T0 + dt.timedelta(days=2)))
        latest = catalog.latest_calibration()
        assert (latest.calibration_id, latest.w) == (later, 40.0)  # same moment: the last recorded
        assert later > first
        assert calibrated_w(catalog) == 40.0


def test_a_naive_or_missing_measurement_time(catalog_url):
    moment = dt.datetime(2030, 1, 1, 8, 30)
    with Catalog(catalog_url, clock=lambda: moment.replace(tzinfo=UTC) + dt.timedelta(days=1)) as catalog:
        catalog.record_calibration(calibration(at=moment))
        assert catalog.latest_calibration().measured_at == moment.replace(tzinfo=UTC)
        catalog.record_calibration(dataclasses.replace(calibration(w=7.0), measured_at=None))
        assert catalog.latest_calibration().measured_at == dt.datetime(2030, 1, 2, 8, 30, tzinfo=UTC)


@pytest.mark.parametrize("bad", [
    {"w": 0.0}, {"w": -1.0}, {"w": math.inf}, {"w": math.nan},
    {"read_seconds_per_block": 0.0}, {"write_seconds_per_block": math.nan}, {"blocks": 0},
])
def test_the_catalog_refuses_a_nonsense_calibration(tmp_path, bad):
    with Catalog(f"sqlite:///{tmp_path / 'catalog.db'}") as catalog:
        with pytest.raises(CatalogError, match="calibration"):
            catalog.record_calibration(dataclasses.replace(calibration(), **bad))
        assert catalog.latest_calibration() is None


# ----------------------------------------------------------------------- CLI


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="layout")
    add_calibrate_parser(root.add_subparsers(dest="command", required=True))
    return root


class KeepOpen:
    """The test session, handed to the command, which must not stop it."""

    def __init__(self, spark) -> None:
        self._spark = spark

    def stop(self) -> None:
        pass

    def __getattr__(self, name):
        return getattr(self._spark, name)


def test_the_subcommand_has_its_flags_and_help(capsys):
    with pytest.raises(SystemExit):
        parser().parse_args(["calibrate", "--help"])
    text = capsys.readouterr().out
    for flag in ("--block-rows", "--blocks", "--rounds", "--catalog", "--warehouse", "--json"):
        assert flag in text
    args = parser().parse_args(["calibrate"])
    assert (args.block_rows, args.blocks, args.rounds, args.json) == (50_000, 4, 3, False)
    assert args.func is calibrate_mod.cmd_calibrate


@pytest.mark.slow
def test_calibrate_command_measures_and_stores_w(spark, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(calibrate_mod, "local_session", lambda name: KeepOpen(spark))
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    warehouse = tmp_path / "warehouse"
    flags = ["calibrate", "--block-rows", "2000", "--blocks", "2", "--rounds", "1",
             "--catalog", url, "--warehouse", str(warehouse)]

    args = parser().parse_args(flags + ["--json"])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["w"] > 0 and out["block_rows"] == 2000 and out["calibration_id"] >= 1
    with Catalog(url) as catalog:
        assert calibrated_w(catalog) == pytest.approx(out["w"])
    assert not (warehouse / "_calibrate").exists()

    args = parser().parse_args(flags)
    assert args.func(args) == 0
    text = capsys.readouterr().out
    assert "writing a block of 2000 rows takes" in text and ": w = " in text
    assert "layout workload shift" in text and "--w" in text
    with Catalog(url) as catalog:
        assert catalog.latest_calibration().calibration_id == out["calibration_id"] + 1
    assert spark.range(3).count() == 3  # the shared session still works


def test_calibrate_command_refuses_bad_flags_before_starting_spark(tmp_path, monkeypatch):
    def no_spark(name):
        raise AssertionError("Spark started")

    monkeypatch.setattr(calibrate_mod, "local_session", no_spark)
    args = parser().parse_args(["calibrate", "--block-rows", "10", "--catalog",
                                f"sqlite:///{tmp_path / 'c.db'}", "--warehouse", str(tmp_path)])
    with pytest.raises(UserError, match="block_rows must be from 1000"):
        args.func(args)
