"""Make the class archive that layout jobs' drivers start from (see layout_core.base.jvm).

    python -m layout_core.spark.class_archive [--force]

spark-submits a warm-up job that does what layout jobs do (Parquet in and out by
block_id folders, filters, aggregates, joins, a window, checksums, Arrow both ways)
with `-XX:ArchiveClassesAtExit`: the JVM writes the classes it loaded to the archive
when it exits. A record beside the archive names the Java, Spark and jars it was made
with; the archive is made again only when one of them changed (or with --force). If
the JVM cannot make it, jobs start without one: this prints why and exits 0.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pyspark
from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from layout_core.base.jvm import ARCHIVE_ENV, SHORT_JOB_OPTIONS, class_archive_path
from layout_core.spark.session import spark_home

NOT_MADE = "class archive not made (jobs start without one)"
# the warm-up takes about 40 s here (80 s with the test suite beside it)
WARM_UP_TIMEOUT = 600


def java_command() -> str:
    java_home = os.environ.get("JAVA_HOME")
    return str(Path(java_home) / "bin" / "java") if java_home else (shutil.which("java") or "java")


def made_with() -> dict:
    """What an archive is only valid for: the JVM's build, Spark's version and its jars."""
    java = subprocess.run([java_command(), "-version"], capture_output=True, text=True, timeout=60)
    jars = sorted(p.name for p in (spark_home() / "jars").glob("*.jar"))
    return {"java": java.stderr.strip(), "spark": pyspark.__version__,
            "jars": hashlib.sha1("\n".join(jars).encode()).hexdigest()}


def record_path(archive: Path) -> Path:
    return archive.with_suffix(".json")


def up_to_date(archive: Path, wanted: dict) -> bool:
    """The archive exists and its record names `wanted` (what `made_with` gives now)."""
    try:
        return archive.is_file() and json.loads(record_path(archive).read_text()) == wanted
    except (OSError, ValueError):
        return False


def build(force: bool = False) -> str:
    """Make the archive unless an up-to-date one exists; one line on what happened. Jobs
    start without an archive too, so a JVM that cannot make one is reported, not raised."""
    archive = class_archive_path()
    if archive is None:
        return f"class archive switched off ({ARCHIVE_ENV}=off)"
    try:
        wanted = made_with()
        if not force and up_to_date(archive, wanted):
            return f"class archive up to date: {archive}"
        return make(archive, wanted)
    except (OSError, subprocess.SubprocessError) as e:  # no java, no spark-submit, a hung warm-up
        return f"{NOT_MADE}: {e}"


def make(archive: Path, made: dict) -> str:
    """Make the archive by the warm-up job; `made` (what made_with gives) goes in its record."""
    archive.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="layout-class-archive-", dir=archive.parent) as work:
        dumped = Path(work) / archive.name
        env = {**os.environ, "SPARK_LOCAL_IP": os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"),
               "PYSPARK_PYTHON": sys.executable, ARCHIVE_ENV: "off"}
        done = subprocess.run(
            [str(spark_home() / "bin" / "spark-submit"), "--master", "local[2]",
             "--conf", "spark.ui.enabled=false", "--conf", "spark.ui.showConsoleProgress=false",
             "--conf", f"spark.driver.extraJavaOptions={SHORT_JOB_OPTIONS} -XX:ArchiveClassesAtExit={dumped}",
             __file__, "--warm-up", work],
            env=env, capture_output=True, text=True, timeout=WARM_UP_TIMEOUT)
        if done.returncode != 0 or not dumped.is_file() or dumped.stat().st_size == 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            return f"{NOT_MADE}: exit {done.returncode}: {' | '.join(tail)}"
        os.replace(dumped, archive)  # atomic: a job never maps half a file
    record_path(archive).write_text(json.dumps(made, indent=1))
    size_mb = archive.stat().st_size / 2**20
    return f"class archive made in {time.monotonic() - started:.0f} s: {archive} ({size_mb:.0f} MB)"


def warm_up(work: Path) -> None:
    """What layout jobs do, on a few thousand rows, so that their classes are loaded."""
    spark = SparkSession.builder.appName("layout-class-archive").getOrCreate()
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", "true")
    rows = (spark.range(5000)
            .select(F.col("id").alias("key"), (F.col("id") % 7).cast("int").alias("small"),
                    F.date_add(F.lit("1995-01-01").cast("date"), (F.col("id") % 365).cast("int")).alias("day"),
                    (F.col("id") / 3).cast("decimal(15,2)").alias("price"),
                    F.concat(F.lit("name#"), (F.col("id") % 50).cast("string")).alias("name")))
    source = str(work / "source")
    rows.write.mode("overwrite").parquet(source)
    table = spark.read.parquet(source)
    bits = F.concat(*[F.when(cond, F.lit("1")).otherwise(F.lit("0")) for cond in (
        F.col("small") < 3, F.col("day") >= F.lit("1995-06-01").cast("date"), F.col("name").like("name#1%"),
        F.col("price").between(10, 500), F.col("key").isin(1, 2, 3))])
    featurized = table.withColumn("_vec", bits)
    counts = featurized.groupBy("_vec").count().toPandas()
    blocks = spark.createDataFrame(pd.DataFrame({"_vec": counts["_vec"], "block_id": range(len(counts))}))
    laid_out = featurized.join(F.broadcast(blocks), "_vec").drop("_vec")
    blocks_dir = str(work / "blocks")
    (laid_out.repartition("block_id").sortWithinPartitions("key")
     .write.mode("overwrite").partitionBy("block_id").parquet(blocks_dir))
    back = spark.read.option("basePath", blocks_dir).parquet(blocks_dir).where(F.col("block_id").isin(0, 1, 2))
    checksum = F.xxhash64(*[x for c in table.columns for x in (F.col(c), F.col(c).isNull())]).cast("decimal(38,0)")
    back.agg(F.count(F.lit(1)), F.coalesce(F.sum(checksum), F.lit(0))).collect()
    ranked = back.withColumn("rank", F.row_number().over(Window.partitionBy("block_id").orderBy(F.col("key").desc())))
    ranked.where("rank <= 3").groupBy("block_id").agg(F.min("day"), F.max("price"), F.approx_count_distinct("name"))\
        .orderBy("block_id").collect()
    table.createOrReplaceTempView("t")
    spark.sql("SELECT small, count(*), sum(price) FROM t WHERE day BETWEEN DATE '1995-02-01' AND DATE '1995-03-01' "
              "AND name LIKE 'name#2%' GROUP BY small ORDER BY small").collect()
    spark.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m layout_core.spark.class_archive", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--force", action="store_true", help="make it again even if it is up to date")
    parser.add_argument("--warm-up", metavar="FOLDER", help=argparse.SUPPRESS)  # the job spark-submit runs
    args = parser.parse_args(argv)
    if args.warm_up:
        warm_up(Path(args.warm_up))
        return 0
    print(build(force=args.force))
    return 0


if __name__ == "__main__":
    sys.exit(main())
