"""Settings: flags, then LAYOUT_* variables, then layout.yaml, then defaults; bad values are one clear error."""

import pytest

from layout_core.base.config import ConfigError, load_settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in ("LAYOUT_CATALOG_URL", "LAYOUT_WAREHOUSE", "LAYOUT_SCHEMA", "LAYOUT_RANGE_SETS",
                 "LAYOUT_HISTORY_RETENTION_DAYS", "LAYOUT_CONFIG"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def test_defaults_then_file_then_environment_then_flags(monkeypatch, tmp_path):
    assert (load_settings().range_sets, load_settings().history_retention_days) == (20, 30)
    (tmp_path / "layout.yaml").write_text("history_retention_days: 7\nrange_sets: 4\nschema: star.yaml\n")
    assert (load_settings().range_sets, load_settings().history_retention_days) == (4, 7)
    monkeypatch.setenv("LAYOUT_HISTORY_RETENTION_DAYS", "90")
    assert load_settings().history_retention_days == 90
    assert load_settings(schema="tpch").schema == "tpch" and load_settings().schema == "star.yaml"


@pytest.mark.parametrize("name, value", [("LAYOUT_HISTORY_RETENTION_DAYS", "0"),
                                         ("LAYOUT_HISTORY_RETENTION_DAYS", "a month"),
                                         ("LAYOUT_HISTORY_RETENTION_DAYS", "3651"),
                                         ("LAYOUT_RANGE_SETS", "0"), ("LAYOUT_RANGE_SETS", "257")])
def test_out_of_range_settings_are_refused_by_name(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError, match=name.removeprefix("LAYOUT_").lower()):
        load_settings()


def test_an_unknown_setting_in_the_file_is_refused(tmp_path):
    (tmp_path / "layout.yaml").write_text("history_days: 7\n")
    with pytest.raises(ConfigError, match="unknown settings"):
        load_settings()
