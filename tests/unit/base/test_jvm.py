"""The driver's JVM options: the short-job options always, the class archive once made;
Spark settings from LAYOUT_SPARK_CONF."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from layout_core.base.jvm import (class_archive_path, driver_java_options, spark_conf_from_env,
                                  spark_conf_of_connection)


def test_the_archive_lives_in_the_python_environment_unless_named(monkeypatch, tmp_path):
    monkeypatch.delenv("LAYOUT_SPARK_CLASS_ARCHIVE", raising=False)
    assert class_archive_path() == Path(sys.prefix) / "share" / "layout" / "spark-classes.jsa"
    monkeypatch.setenv("LAYOUT_SPARK_CLASS_ARCHIVE", str(tmp_path / "mine.jsa"))
    assert class_archive_path() == tmp_path / "mine.jsa"
    monkeypatch.setenv("LAYOUT_SPARK_CLASS_ARCHIVE", "OFF")
    assert class_archive_path() is None


LOGS = "-Xlog:disable -Xlog:all=warning:stderr:uptime,level,tags"


def test_drivers_start_from_the_archive_only_once_it_exists(monkeypatch, tmp_path):
    archive = tmp_path / "spark-classes.jsa"
    monkeypatch.setenv("LAYOUT_SPARK_CLASS_ARCHIVE", str(archive))
    assert driver_java_options() == f"-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m {LOGS}"
    archive.write_bytes(b"\0" * 16)
    assert driver_java_options() == (f"-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m {LOGS} "
                                     f"-XX:SharedArchiveFile={archive}")
    # a driver that lives for many minutes keeps the JIT's top tier, and the archive
    assert driver_java_options(short_job=False) == (f"-XX:ReservedCodeCacheSize=256m {LOGS} "
                                                    f"-XX:SharedArchiveFile={archive}")
    monkeypatch.setenv("LAYOUT_SPARK_CLASS_ARCHIVE", "off")
    assert "SharedArchiveFile" not in driver_java_options()


def test_an_archive_the_jvm_cannot_map_warns_on_stderr_and_leaves_stdout_to_the_command(monkeypatch):
    # the archive `make install` made, for Spark's class path: a JVM started on another one (as
    # after a venv is moved, or its jars replaced) cannot map it and says so
    monkeypatch.delenv("LAYOUT_SPARK_CLASS_ARCHIVE", raising=False)
    if shutil.which("java") is None or not class_archive_path().is_file():
        pytest.skip("needs the machine's java and the class archive `make install` makes")
    started = subprocess.run(["java", *driver_java_options().split(), "-version"],
                             capture_output=True, text=True, timeout=120)
    assert started.returncode == 0 and started.stdout == ""
    assert "Unable to use shared archive" in started.stderr


def test_an_archive_is_made_again_when_java_spark_or_the_jars_change(monkeypatch, tmp_path):
    import json

    from layout_core.spark import class_archive

    archive = tmp_path / "spark-classes.jsa"
    monkeypatch.setenv("LAYOUT_SPARK_CLASS_ARCHIVE", str(archive))
    now = {"java": 'openjdk version "17.0.15"', "spark": "4.3.0", "jars": "cc48"}
    monkeypatch.setattr(class_archive, "made_with", lambda: now)
    assert not class_archive.up_to_date(archive, now)  # none yet
    archive.write_bytes(b"\0" * 16)
    assert not class_archive.up_to_date(archive, now)  # no record of what made it
    for changed in ({"spark": "4.2.0"}, {"java": 'openjdk version "21.0.1"'}, {"jars": "0a1b"}):
        (tmp_path / "spark-classes.json").write_text(json.dumps({**now, **changed}))
        assert not class_archive.up_to_date(archive, now), changed
    (tmp_path / "spark-classes.json").write_text(json.dumps(now))
    assert class_archive.up_to_date(archive, now)
    assert class_archive.build() == f"class archive up to date: {archive}"
    monkeypatch.setenv("LAYOUT_SPARK_CLASS_ARCHIVE", "off")
    assert "switched off" in class_archive.build()


def test_a_jvm_that_cannot_make_the_archive_is_reported_not_raised(monkeypatch, tmp_path):
    from layout_core.spark import class_archive

    monkeypatch.setenv("LAYOUT_SPARK_CLASS_ARCHIVE", str(tmp_path / "spark-classes.jsa"))
    monkeypatch.setattr(class_archive, "made_with", lambda: {"java": "17", "spark": "4.3.0", "jars": "cc48"})
    monkeypatch.setattr(class_archive, "spark_home", lambda: tmp_path / "no-spark")  # no bin/spark-submit
    said = class_archive.build()
    assert said.startswith("class archive not made (jobs start without one): ") and "spark-submit" in said
    assert not (tmp_path / "spark-classes.jsa").exists()


def test_spark_settings_come_from_a_json_object_in_the_environment(monkeypatch):
    monkeypatch.setenv("LAYOUT_SPARK_CONF", "")
    assert spark_conf_from_env() == {}
    monkeypatch.setenv("LAYOUT_SPARK_CONF", '{"spark.sql.shuffle.partitions": 4, "spark.driver.memory": "8g"}')
    assert spark_conf_from_env() == {"spark.sql.shuffle.partitions": "4", "spark.driver.memory": "8g"}


@pytest.mark.parametrize("value, message", [("spark.driver.memory=8g", "LAYOUT_SPARK_CONF is not JSON"),
                                            ('["spark.driver.memory"]', "must be a JSON object")])
def test_spark_settings_that_are_not_a_json_object_are_refused_naming_the_variable(monkeypatch, value, message):
    monkeypatch.setenv("LAYOUT_SPARK_CONF", value)
    with pytest.raises(ValueError, match=message):
        spark_conf_from_env()


@pytest.mark.parametrize("conf, message", [
    ({"shuffle.partitions": "8"}, "'shuffle.partitions' is not a Spark setting"),
    ({"spark.driver.memory": "lots"}, "spark.driver.memory must be a size such as 512m or 8g, not 'lots'"),
    ({"spark.executor.memory": "1.5g"}, "spark.executor.memory must be a size"),
    ({"spark.sql.shuffle.partitions": "0"}, "spark.sql.shuffle.partitions must be a whole number above 0"),
    ({"spark.executor.cores": "two"}, "spark.executor.cores must be a whole number above 0, not 'two'"),
])
def test_a_setting_spark_would_refuse_is_named_with_where_it_was_given(monkeypatch, conf, message):
    monkeypatch.setenv("LAYOUT_SPARK_CONF", json.dumps(conf))
    with pytest.raises(ValueError, match=f"^LAYOUT_SPARK_CONF: {re.escape(message)}"):
        spark_conf_from_env()
    with pytest.raises(ValueError, match=f"^the spark_default connection's extra \"conf\": {re.escape(message)}"):
        spark_conf_of_connection({"conf": conf})


def test_a_spark_connections_extra_may_carry_spark_settings():
    assert spark_conf_of_connection({"deploy-mode": "client"}) == {}
    assert spark_conf_of_connection({"conf": {"spark.sql.shuffle.partitions": 64, "spark.driver.memory": "8G",
                                              "spark.eventLog.enabled": True}}) == {
        "spark.sql.shuffle.partitions": "64", "spark.driver.memory": "8G", "spark.eventLog.enabled": "true"}
