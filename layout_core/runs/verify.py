"""Check the block folders a step wrote before a version may serve: every folder is there,
and together they hold exactly the expected rows (count and checksum)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Sequence

from pyspark.sql import functions as F

from layout_core.base.names import BLOCK_ID_COLUMN
from layout_core.base.schema import TableSchema
from layout_core.runs.artifacts import VerifiedBlocks, WrittenBlocks, read_step_artifact, write_artifact
from layout_core.runs.paths import RunPaths, StepError, record_metrics


def rows_fingerprint(df, columns: Sequence[str]) -> tuple[int, int]:
    """(rows, order-independent checksum): the sum of a 64-bit hash of every row."""
    # xxhash64 skips NULL arguments: (1, 'A', NULL) and (1, NULL, 'A') would hash alike
    # without a null flag per column.
    row_hash = F.xxhash64(*[x for c in columns for x in (F.col(c), F.col(c).isNull())]).cast("decimal(38,0)")
    row = df.agg(F.count(F.lit(1)).alias("n"), F.coalesce(F.sum(row_hash), F.lit(0)).alias("h")).collect()[0]
    return int(row["n"]), int(row["h"])


def written_frame(spark, table: TableSchema, written: WrittenBlocks):
    """The rows of the written blocks, with their block id column (None when there are none)."""
    block_paths = [b["path"] for b in written.blocks.values()]
    if not block_paths:
        return None
    base = str(Path(block_paths[0]).parent)
    frame = spark.read.option("basePath", base).parquet(*block_paths)
    return frame.select(*table.column_names, BLOCK_ID_COLUMN)


def verify_blocks(spark, paths: RunPaths, catalog, table: TableSchema, written_cls: type[WrittenBlocks],
                  verified_cls: type[VerifiedBlocks]) -> dict:
    """The step `verified_cls.STEP`: the blocks in `written_cls`'s artifact hold exactly its
    expected rows; else the version is marked failed (it can never serve) and the step fails."""
    step = verified_cls.STEP
    t0 = time.monotonic()
    paths.file(verified_cls.FILE).unlink(missing_ok=True)  # only this attempt's verdict counts
    written = read_step_artifact(paths, written_cls, step)
    missing = [b["path"] for b in written.blocks.values() if not Path(b["path"]).is_dir()]
    frame = None if missing else written_frame(spark, table, written)
    actual = rows_fingerprint(frame, table.column_names) if frame is not None else (0, 0)
    expected = (written.expected_rows, int(written.expected_checksum))
    if missing or actual != expected:
        reason = (f"{step} failed: {len(missing)} written block folders are missing, e.g. {missing[0]}"
                  if missing else f"{step} failed: expected {expected[0]} rows (checksum {expected[1]}) "
                  f"in the written blocks, found {actual[0]} rows (checksum {actual[1]})")
        catalog.fail(written.version, reason)
        raise StepError(reason)
    write_artifact(paths.staging, verified_cls(written.version, actual[0], str(actual[1])))
    return record_metrics(paths, step, {"rows": actual[0], "seconds": round(time.monotonic() - t0, 2)})


def verified_version(paths: RunPaths, written_cls: type[WrittenBlocks], verified_cls: type[VerifiedBlocks],
                     step: str) -> tuple[WrittenBlocks, VerifiedBlocks]:
    """The written and verified artifacts a publishing step needs, checked to be of one version."""
    written = read_step_artifact(paths, written_cls, step)
    verified = read_step_artifact(paths, verified_cls, step)
    if verified.version != written.version:
        raise StepError(f"{verified_cls.FILE} belongs to another version: run {verified_cls.STEP} again")
    return written, verified
