"""The Spark driver's JVM options, for in-process sessions and spark-submit jobs alike
(stdlib only: the DAG files import this).

Layout jobs are short: a nightly step runs for seconds, and starting the driver's JVM
(about 10,000 classes loaded and verified) used to cost as much CPU as the step itself.
Two options make short jobs cheaper:

- `-XX:TieredStopAtLevel=1`: only the JIT's quick tier (its top tier costs more than it
  saves in a short job), with a code cache larger than the default 48 MB so that a long
  job never fills it (the JIT would then switch off);
- a class archive (AppCDS, `-XX:SharedArchiveFile`): the classes a layout job loads,
  parsed and verified once by `layout_core.spark.class_archive` (run by `make install`),
  then mapped by every driver; measured here it halves a spark-submit's start (CPU 14.4
  -> 8.4 s). An archive made by another JDK or Spark is ignored by the JVM, which then
  starts as without it.

`LAYOUT_SPARK_CLASS_ARCHIVE` names another archive file, or `off` for none.
`LAYOUT_SPARK_CONF`, a JSON object of Spark settings, overrides the settings of every
layout session and job (in-process sessions, benchmarks, the DAGs' spark-submits).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

CODE_CACHE_OPTION = "-XX:ReservedCodeCacheSize=256m"
SHORT_JOB_OPTIONS = f"-XX:TieredStopAtLevel=1 {CODE_CACHE_OPTION}"
ARCHIVE_ENV = "LAYOUT_SPARK_CLASS_ARCHIVE"
CONF_ENV = "LAYOUT_SPARK_CONF"


def class_archive_path() -> Path | None:
    """Where the class archive of this Python environment is (None: switched off)."""
    chosen = os.environ.get(ARCHIVE_ENV, "").strip()
    if chosen.lower() == "off":
        return None
    return Path(chosen) if chosen else Path(sys.prefix) / "share" / "layout" / "spark-classes.jsa"


def driver_java_options(short_job: bool = True) -> str:
    """`spark.driver.extraJavaOptions` for a layout job: the short-job options (or, for a
    driver that lives for many minutes, only the larger code cache: the JIT's top tier then
    pays back), and the class archive when one has been made."""
    options = SHORT_JOB_OPTIONS if short_job else CODE_CACHE_OPTION
    archive = class_archive_path()
    if archive is not None and archive.is_file():
        return f"{options} -XX:SharedArchiveFile={archive}"
    return options


def spark_conf_from_env() -> dict[str, str]:
    """The Spark settings in `LAYOUT_SPARK_CONF` (absent or empty: none)."""
    text = os.environ.get(CONF_ENV, "").strip()
    if not text:
        return {}
    try:
        conf = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{CONF_ENV} is not JSON ({err.msg}): {text[:80]!r}") from None
    if not isinstance(conf, dict):
        raise ValueError(f"{CONF_ENV} must be a JSON object of Spark settings, got {text[:80]!r}")
    return {str(key): str(value) for key, value in conf.items()}
