"""`layout calibrate`: measure w, the cost of rewriting a block in block reads (MTO §5.1.2).

The workload-shift reward R(T) = (q / w) · B(T) - C(T) weighs the blocks a
reorganization saves every later query against the blocks it rewrites. MTO
sets w = 100 for its storage ("compressing and writing a block is ~100x
slower than reading a block"); this module measures it on the user's storage:

1. `blocks` blocks of `block_rows` rows of lineitem-like data (16 columns:
   keys, decimals, dates, short codes and a comment; Spark expressions only)
   are generated and cached in memory, so the timings exclude generating them;
2. write: `spark.blocks.write_block_folders` writes them as the pipeline
   writes blocks (shuffle by block id, Parquet encode and compress, one
   folder per block, moved into place);
3. read: one scan of the block folders as a query reads a layout's blocks
   (`spark.read.option("basePath", ...).parquet(*folders)`, see
   `spark.views`), hashing every column so that every value is decoded.

Each round writes fresh folders and reads them back; the seconds per block
are the medians over `rounds`, after one untimed warm-up round (the first
Parquet job of a session loads classes and JIT-compiles), and
w = write seconds per block / read seconds per block. The reads come from
whatever cache the storage keeps (for a local disk, the OS page cache), as
they would for a query that follows a rewrite.

The folder used is removed afterwards, also when a step fails; it must not
hold anything beforehand. Nothing here imports pyspark at module level, so
the CLI can add the subcommand without paying for it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import shutil
import statistics
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import functions as F

from layout_core.base.config import load_settings
from layout_core.base.errors import UserError
from layout_core.base.names import BLOCK_ID_COLUMN, MAX_BLOCK_ROWS
from layout_core.catalog import Catalog
from layout_core.spark.blocks import write_block_folders
from layout_core.spark.session import local_session

CALIBRATE_FOLDER = "_calibrate"  # under the warehouse: <warehouse>/_calibrate/<uuid>

MIN_BLOCK_ROWS = 1_000  # the largest is base.names.MAX_BLOCK_ROWS, as for any block; MAX_TOTAL_ROWS bounds the run
MAX_BLOCKS = 1_000
MAX_ROUNDS = 100
MAX_TOTAL_ROWS = 50_000_000  # block_rows * blocks: all of it is cached in memory (and disk)

# Value pools of the generated columns (TPC-H lineitem's domains).
_RETURN_FLAGS = ("R", "A", "N")
_LINE_STATUSES = ("O", "F")
_SHIP_INSTRUCT = ("DELIVER IN PERSON", "COLLECT COD", "NONE", "TAKE BACK RETURN")
_SHIP_MODES = ("REG AIR", "AIR", "RAIL", "SHIP", "TRUCK", "MAIL", "FOB")
_WORDS = ("furiously", "quickly", "carefully", "blithely", "slyly", "final", "regular", "express",
          "pending", "ironic", "special", "bold", "even", "silent", "unusual", "packages",
          "deposits", "accounts", "requests", "instructions", "theodolites", "pinto", "beans",
          "foxes", "ideas", "dependencies", "platelets", "asymptotes", "courts", "dolphins",
          "sleep", "wake", "are", "nag", "haggle", "integrate", "cajole", "boost", "detect", "use",
          "among", "across", "above", "along", "against", "after", "about", "according to")
_COMMENT_WORDS = 5
_FIRST_SHIP_DATE = "1992-01-02"
_SHIP_DAYS = 2526  # 1992-01-02 .. 1998-12-01


class CalibrationError(UserError, ValueError):
    """Calibration was asked for something absurd, or measured nonsense."""


@dataclass(frozen=True)
class Calibration:
    """What one calibration measured: w = write_seconds_per_block / read_seconds_per_block."""

    w: float
    write_seconds_per_block: float
    read_seconds_per_block: float
    block_rows: int
    blocks: int
    rounds: int
    location: str
    measured_at: dt.datetime

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["measured_at"] = self.measured_at.isoformat()
        return out


def check_arguments(block_rows: int, blocks: int, rounds: int) -> None:
    """Refuse block sizes and counts that measure nothing (or fill the disk)."""
    for name, value, low, high in (("block_rows", block_rows, MIN_BLOCK_ROWS, MAX_BLOCK_ROWS),
                                   ("blocks", blocks, 1, MAX_BLOCKS),
                                   ("rounds", rounds, 1, MAX_ROUNDS)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise CalibrationError(f"{name} must be a whole number, not {value!r}")
        if not low <= value <= high:
            why = (" (smaller blocks time Spark's per-job overhead, not the storage)"
                   if name == "block_rows" and value < low else "")
            raise CalibrationError(f"{name} must be from {low} to {high}, not {value}{why}")
    if block_rows * blocks > MAX_TOTAL_ROWS:
        raise CalibrationError(f"block_rows * blocks must be at most {MAX_TOTAL_ROWS} rows, "
                               f"not {block_rows} * {blocks} = {block_rows * blocks}")


def _check_location(location: Path) -> None:
    """The folder is deleted afterwards, so it must not hold anything now."""
    if location.exists() and (not location.is_dir() or any(location.iterdir())):
        raise CalibrationError(f"{location} already exists and is not an empty folder; calibration "
                               f"deletes its folder afterwards, so give it a new one")


# ---------------------------------------------------------------------------
# Data


def calibration_frame(spark, block_rows: int, blocks: int):
    """`blocks` * `block_rows` lineitem-like rows with a block id column: block b
    holds rows b * block_rows .. (b + 1) * block_rows - 1. Deterministic, no UDFs:
    each column is a hash of the row number and a seed, mapped onto its domain."""


    def draw(seed: int, n: int):
        """A pseudo-random whole number 0..n-1 per row."""
        return F.pmod(F.xxhash64(F.col("id"), F.lit(seed)), F.lit(n))

    def pick(seed: int, values: tuple[str, ...]):
        return F.element_at(F.array(*(F.lit(v) for v in values)), (draw(seed, len(values)) + 1).cast("int"))

    def money(value):
        return value.cast("decimal(15,2)")

    ship = F.date_add(F.lit(_FIRST_SHIP_DATE).cast("date"), draw(8, _SHIP_DAYS).cast("int"))
    quantity = draw(3, 50) + 1
    order = (F.col("id") / 4).cast("long")  # 4 lines per order, 8 of every 32 keys used
    df = spark.range(0, block_rows * blocks)
    return df.select(
        (order * 32 + F.pmod(F.xxhash64(order, F.lit(0)), F.lit(8)) + 1).alias("l_orderkey"),
        (draw(1, 200_000) + 1).alias("l_partkey"),
        (draw(2, 10_000) + 1).alias("l_suppkey"),
        (F.col("id") % 4 + 1).cast("int").alias("l_linenumber"),
        money(quantity).alias("l_quantity"),
        money(quantity * (draw(4, 100_000) + 90_000) / 100).alias("l_extendedprice"),
        money(draw(5, 11) / 100).alias("l_discount"),
        money(draw(6, 9) / 100).alias("l_tax"),
        pick(7, _RETURN_FLAGS).alias("l_returnflag"),
        pick(9, _LINE_STATUSES).alias("l_linestatus"),
        ship.alias("l_shipdate"),
        F.date_add(ship, (draw(10, 91) - 30).cast("int")).alias("l_commitdate"),
        F.date_add(ship, (draw(11, 30) + 1).cast("int")).alias("l_receiptdate"),
        pick(12, _SHIP_INSTRUCT).alias("l_shipinstruct"),
        pick(13, _SHIP_MODES).alias("l_shipmode"),
        F.concat_ws(" ", *(pick(20 + i, _WORDS) for i in range(_COMMENT_WORDS))).alias("l_comment"),
        (F.col("id") / block_rows).cast("int").alias(BLOCK_ID_COLUMN),
    )


# ---------------------------------------------------------------------------
# The two timed steps (module functions, so tests can make them fail)


def _write_blocks(df, data_columns: list[str], folder: Path) -> list[Path]:
    """Write the blocks as the pipeline does; returns the block folders."""

    written = write_block_folders(df, data_columns, folder / "blocks", folder / "staging")
    return [path for path, _ in written.values()]


def _read_blocks(spark, folders: list[Path], data_columns: list[str]) -> int:
    """Read the blocks fully, as a query scans a layout; returns the rows read."""

    base = folders[0].parent
    scan = spark.read.option("basePath", str(base)).parquet(*(str(f) for f in folders))
    # A hash of every column: each value is decoded, nothing is pushed into the scan.
    row = scan.agg(F.count(F.lit(1)).alias("rows"),
                   F.max(F.xxhash64(*(F.col(c) for c in data_columns))).alias("hash")).collect()[0]
    return int(row["rows"])


def _round(spark, df, data_columns: list[str], folder: Path, blocks: int, rows: int) -> tuple[float, float]:
    """One write and one read of all blocks into `folder`; (write, read) seconds."""
    start = time.perf_counter()
    folders = _write_blocks(df, data_columns, folder)
    wrote = time.perf_counter() - start
    if len(folders) != blocks:
        raise CalibrationError(f"writing {blocks} blocks made {len(folders)} block folders in {folder}")
    start = time.perf_counter()
    read = _read_blocks(spark, folders, data_columns)
    seconds = time.perf_counter() - start
    if read != rows:
        raise CalibrationError(f"read {read} rows back from {folder}, not the {rows} written")
    return wrote, seconds


# ---------------------------------------------------------------------------
# Calibration


def calibrate(spark, location: str | Path, block_rows: int = 50_000, blocks: int = 4,
              rounds: int = 3) -> Calibration:
    """Time writing and reading blocks in `location` (removed afterwards, even on
    failure; it must not exist, or be an empty folder) and return w.

    Every round writes `blocks` blocks of `block_rows` rows as the pipeline
    does and reads them back fully as a query does; one untimed warm-up
    round goes first. The seconds per block are the medians over the rounds.
    """
    check_arguments(block_rows, blocks, rounds)
    location = Path(location).resolve()
    _check_location(location)
    rows = block_rows * blocks
    df = None
    try:
        location.mkdir(parents=True, exist_ok=True)

        df = calibration_frame(spark, block_rows, blocks).cache()
        if df.count() != rows:  # materialize the cache: generating rows is not writing them
            raise CalibrationError(f"generated {df.count()} rows, not {rows}")
        data_columns = [c for c in df.columns if c != BLOCK_ID_COLUMN]
        writes, reads = [], []
        for r in range(rounds + 1):
            folder = location / f"round-{r}"
            wrote, read = _round(spark, df, data_columns, folder, blocks, rows)
            shutil.rmtree(folder, ignore_errors=True)
            if r > 0:  # round 0 warms up
                writes.append(wrote / blocks)
                reads.append(read / blocks)
    finally:
        if df is not None:
            df.unpersist()
        shutil.rmtree(location, ignore_errors=True)
    write_s, read_s = statistics.median(writes), statistics.median(reads)
    w = write_s / read_s if read_s > 0 else math.inf
    if not (math.isfinite(w) and w > 0):
        raise CalibrationError(f"measured nonsense: writing a block took {write_s} s and reading it "
                               f"{read_s} s; try larger blocks (--block-rows)")
    return Calibration(w, write_s, read_s, block_rows, blocks, rounds, str(location),
                       dt.datetime.now(dt.timezone.utc))


def calibrated_w(catalog) -> float | None:
    """The w of the latest calibration stored in the catalog, or None if there is none."""
    latest = catalog.latest_calibration()
    return None if latest is None else float(latest.w)


# ---------------------------------------------------------------------------
# Command line


def _seconds(value: float) -> str:
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}" if value >= 10 else f"{value:.2g}"


def _number(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def cmd_calibrate(args) -> int:

    check_arguments(args.block_rows, args.blocks, args.rounds)
    settings = load_settings(catalog_url=args.catalog, warehouse=args.warehouse)
    parent = Path(settings.warehouse).resolve() / CALIBRATE_FOLDER
    location = parent / uuid.uuid4().hex
    with Catalog(settings.catalog_url) as catalog:  # a bad catalog URL fails before Spark starts
        spark = local_session("layout-calibrate")
        try:
            c = calibrate(spark, location, args.block_rows, args.blocks, args.rounds)
        finally:
            spark.stop()
            try:
                parent.rmdir()  # only when no other calibration is using it
            except OSError:
                pass
        calibration_id = catalog.record_calibration(c)
    if args.json:
        print(json.dumps({"calibration_id": calibration_id, **c.to_json()}, indent=2))
        return 0
    print(f"writing a block of {c.block_rows} rows takes {_seconds(c.write_seconds_per_block)} s, "
          f"reading it {_seconds(c.read_seconds_per_block)} s: w = {_number(c.w)}")
    print(f"(medians of {c.rounds} rounds of {c.blocks} blocks, in {parent})")
    if c.w < 1:
        print("note: reading a block took longer than writing it; with blocks this small the timings "
              "are mostly Spark's overhead, so try a larger --block-rows")
    print(f"stored as calibration {calibration_id}: `layout workload shift` and the monitor DAG use "
          f"w = {_number(c.w)} when --w is not given (MTO 5.1.2: with q <= w queries expected before the "
          f"next shift, no re-layout pays off)")
    return 0


def add_calibrate_parser(subparsers) -> argparse.ArgumentParser:
    """Add `layout calibrate` to the `layout` command's subparsers."""
    p = subparsers.add_parser(
        "calibrate",
        help="measure w, the cost of rewriting a block in block reads, on the warehouse's storage",
        description="Write blocks of lineitem-like rows into <warehouse>/_calibrate/ as the layout "
                    "pipeline writes them, read them back as a query does, and store "
                    "w = write seconds per block / read seconds per block in the catalog. "
                    "The workload-shift reward R = (q/w)*B - C (MTO 5.1.2) uses the latest w "
                    "when --w is not given. The folder is removed afterwards.")
    p.add_argument("--block-rows", type=int, default=50_000,
                   help="rows per block (default 50000; at least 1000)")
    p.add_argument("--blocks", type=int, default=4, help="blocks written and read per round (default 4)")
    p.add_argument("--rounds", type=int, default=3,
                   help="timed rounds; the medians are kept (default 3, after one warm-up round)")
    p.add_argument("--catalog", help="catalog URL (default: LAYOUT_CATALOG_URL or .layout/catalog.db)")
    p.add_argument("--warehouse", help="warehouse root whose storage is measured (default LAYOUT_WAREHOUSE)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_calibrate)
    return p
