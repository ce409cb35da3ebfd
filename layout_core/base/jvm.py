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
  starts as without it (its warning on stderr, as every JVM warning of a layout job).

`LAYOUT_SPARK_CLASS_ARCHIVE` names another archive file, or `off` for none.
`LAYOUT_SPARK_CONF`, a JSON object of Spark settings, overrides the settings of every
layout session and job (in-process sessions, benchmarks, the DAGs' spark-submits); the
DAGs' spark-submits also take the `spark_default` connection's extra "conf" object, which
LAYOUT_SPARK_CONF overrides.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

CODE_CACHE_OPTION = "-XX:ReservedCodeCacheSize=256m"
SHORT_JOB_OPTIONS = f"-XX:TieredStopAtLevel=1 {CODE_CACHE_OPTION}"
# The JVM logs warnings to stdout by default: an archive it cannot map ("Unable to use shared
# archive", after a venv is moved or Java updated) would land in front of a command's --json
# output. Warnings go to stderr instead.
WARNINGS_TO_STDERR = "-Xlog:disable -Xlog:all=warning:stderr:uptime,level,tags"
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
    options = f"{SHORT_JOB_OPTIONS if short_job else CODE_CACHE_OPTION} {WARNINGS_TO_STDERR}"
    archive = class_archive_path()
    if archive is not None and archive.is_file():
        return f"{options} -XX:SharedArchiveFile={archive}"
    return options


# Settings whose values Spark parses: a bad one fails the driver with an error that does not
# name the setting, so they are checked before Spark sees them.
_SIZE_SETTINGS = ("spark.driver.memory", "spark.executor.memory", "spark.driver.memoryOverhead",
                  "spark.executor.memoryOverhead", "spark.driver.maxResultSize")
_COUNT_SETTINGS = ("spark.sql.shuffle.partitions", "spark.default.parallelism", "spark.driver.cores",
                   "spark.executor.cores", "spark.executor.instances", "spark.cores.max")
_SIZE = re.compile(r"^[0-9]+([kmgtp]b?|b)?$", re.IGNORECASE)


def checked_spark_conf(conf, where: str) -> dict[str, str]:
    """Spark settings as strings. A name outside `spark.*`, or a size or count Spark would
    refuse, is a ValueError naming the setting and `where` it was given."""
    if not isinstance(conf, dict):
        raise ValueError(f"{where} must be a JSON object of Spark settings, got {str(conf)[:80]!r}")
    out = {}
    for key, value in conf.items():
        key, text = str(key), (str(value).lower() if isinstance(value, bool) else str(value).strip())
        if not key.startswith("spark."):
            raise ValueError(f"{where}: {key!r} is not a Spark setting (they start with 'spark.')")
        if key in _SIZE_SETTINGS and not _SIZE.match(text):
            raise ValueError(f"{where}: {key} must be a size such as 512m or 8g, not {text[:40]!r}")
        if key in _COUNT_SETTINGS and not (text.isascii() and text.isdigit() and int(text) > 0):
            raise ValueError(f"{where}: {key} must be a whole number above 0, not {text[:40]!r}")
        out[key] = text
    return out


def spark_conf_from_env() -> dict[str, str]:
    """The Spark settings in `LAYOUT_SPARK_CONF` (absent or empty: none)."""
    text = os.environ.get(CONF_ENV, "").strip()
    if not text:
        return {}
    try:
        conf = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{CONF_ENV} is not JSON ({err.msg}): {text[:80]!r}") from None
    return checked_spark_conf(conf, CONF_ENV)


def spark_conf_of_connection(extra: dict, conn_id: str = "spark_default") -> dict[str, str]:
    """The Spark settings of a spark connection's extra field, its "conf" object (none: {})."""
    conf = (extra or {}).get("conf")
    return {} if conf is None else checked_spark_conf(conf, f'the {conn_id} connection\'s extra "conf"')
