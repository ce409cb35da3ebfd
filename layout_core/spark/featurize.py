"""Featurize and reduce one table in Spark: the cut bits of every row, and its (vector, count) pairs.

Shared by the nightly featurize/reduce steps and the benchmarks, so both
drop the same join-induced cuts, build the same bit strings and sample the
same rows.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from layout_core.optimizers.base import CandidateCut, VectorSample
from layout_core.predicates import JoinInduced
from layout_core.base.names import VECTOR_COLUMN
from layout_core.spark.blocks import cut_words, with_bit_vector
from layout_core.spark.induced import hops_with_duplicate_keys, with_layout_cut_flags

log = logging.getLogger("layout.featurize")

SAMPLE_MODULUS = 1_000_000
MIN_SAMPLE_ROWS = 1000  # a smaller sample estimates block sizes too poorly: use all rows


def path_tables(cut: CandidateCut) -> set[str]:
    """The tables whose data decide a join-induced cut's bits."""
    return {hop.parent_table for hop in cut.predicate.hops} if isinstance(cut.predicate, JoinInduced) else set()


def usable_cuts(table: str, cuts: Sequence[CandidateCut], frames: Mapping[str, DataFrame]) -> list[CandidateCut]:
    """The cuts whose bits can be computed exactly: a join-induced cut needs data
    of every table on its path, and unique parent keys on it (a key held by
    two rows breaks "at most one source row", which the router's
    disjointness proofs rely on)."""
    induced = [c for c in cuts if c.kind == "join_induced"]
    reachable = [c for c in induced if path_tables(c) <= set(frames)]
    if len(reachable) < len(induced):
        log.warning("featurize %s: %d of %d join-induced cuts dropped: a table on their path has no data "
                    "(lay out dimension tables first)", table, len(induced) - len(reachable), len(induced))
    duplicated = hops_with_duplicate_keys(frames, {hop for c in reachable for hop in c.predicate.hops})
    if duplicated:
        log.warning("featurize %s: join-induced cuts through %s dropped: the parent key is not unique",
                    table, ", ".join(sorted(map(str, duplicated))))
    kept = {c for c in reachable if not set(c.predicate.hops) & duplicated}
    return [c for c in cuts if c.kind != "join_induced" or c in kept]


def with_vectors(df: DataFrame, cuts: Sequence[CandidateCut], frames: Mapping[str, DataFrame]) -> DataFrame:
    """`df` plus the cut flags `_cut0..` and the bit string `_vec` (character j = cut j)."""
    flagged = with_layout_cut_flags(df, [c.predicate for c in cuts], frames)
    return with_bit_vector(flagged, len(cuts))


def frames_for_rows(rows: DataFrame, cuts: Sequence[CandidateCut], frames: Mapping[str, DataFrame]
                    ) -> dict[str, DataFrame]:
    """`frames` with each table that the join-induced cuts reach only as the parent of their
    last hop (orders, for lineitem) narrowed to the keys `rows` hold: the bits of a row sample
    need its parents' rows, not all of them (a sample of 150,000 lineitem rows names about
    140,000 of 1.5M orders at SF 1). A table some path goes through keeps every row. `rows` is
    read once more for its keys: materialize it first."""
    paths = [c.predicate.hops for c in cuts if isinstance(c.predicate, JoinInduced)]
    through = {hop.parent_table for hops in paths for hop in hops[:-1]}
    last = {}
    for hops in paths:
        last.setdefault(hops[-1].parent_table, set()).add(hops[-1])
    narrowed = dict(frames)
    for table, hops in last.items():
        if table in through or len(hops) != 1 or table not in frames:
            continue
        (hop,) = hops
        keys = rows.select(F.col(hop.child_column).alias("_key")).where(F.col("_key").isNotNull()).distinct()
        parent = frames[table]
        narrowed[table] = parent.join(F.broadcast(keys), parent[hop.parent_column] == keys["_key"], "left_semi")
    return narrowed


def with_cut_words(df: DataFrame, cuts: Sequence[CandidateCut], frames: Mapping[str, DataFrame]
                   ) -> tuple[DataFrame, list[str]]:
    """`df` plus the cut flags packed into longs `_word0..` (`cut_words`; `word_flags` reads
    them back), and their names: what a collect of many rows carries instead of `_vec`, one
    character per cut (150,000 sampled rows with 600 cuts: 90 MB of strings)."""
    flagged = with_layout_cut_flags(df, [c.predicate for c in cuts], frames)
    packed = cut_words(len(cuts))
    names = [f"_word{w}" for w in range(len(packed))]
    return flagged.select(*df.columns, *[word.alias(name) for word, name in zip(packed, names)]), names


def encoded_column(column: pa.ChunkedArray) -> tuple[np.ndarray, list]:
    """A column of `DataFrame.toArrow()` as each row's index into its distinct non-NULL values
    (-1: NULL) and those values as `collect()` gives them (a timestamp with a zone as a naive
    local datetime, pyspark's `TimestampType.fromInternal`): 150,000 sampled rows cost a Python
    object per distinct value, not per row (the rows as `collect()` Rows: 11 s at SF 1)."""
    encoded = column.combine_chunks().dictionary_encode()
    indices = encoded.indices.fill_null(-1).to_numpy(zero_copy_only=False).astype(np.int64)
    dictionary = encoded.dictionary
    if pa.types.is_timestamp(dictionary.type) and dictionary.type.tz is not None:
        micros = pc.cast(dictionary, pa.int64()).to_pylist()
        return indices, [dt.datetime.fromtimestamp(us // 1_000_000).replace(microsecond=us % 1_000_000)
                         for us in micros]
    return indices, dictionary.to_pylist()


def vector_sample(df: DataFrame, columns: Sequence[str], sample_rows: int) -> VectorSample:
    """(vector, count) pairs of about `sample_rows` rows (0: all rows), sorted by vector.

    The sample is a row-hash sample (deterministic: the same rows every run),
    of the target rows only: join-induced bits were computed on the full
    dimension data, so sampled counts times the scale estimate the full
    counts without MTO §4.2's cardinality adjustment."""
    rows = df.count()
    rate = min(1.0, sample_rows / rows) if sample_rows and rows else 1.0
    pairs = _pairs(sampled_rows(df, columns, sample_rows, rows))
    if rate < 1.0 and sum(c for _, c in pairs) < MIN_SAMPLE_ROWS:
        log.warning("reduce: a sample of %d rows is too small to estimate block sizes; using all %d rows",
                    sum(c for _, c in pairs), rows)
        pairs = _pairs(df)
    return VectorSample(tuple(k for k, _ in pairs), [c for _, c in pairs], rows)


def sampled_rows(df: DataFrame, columns: Sequence[str], sample_rows: int, rows: int) -> DataFrame:
    """The rows of `df` (of `rows` rows) in a row-hash sample of about `sample_rows` (0: all):
    the hash of `columns` picks them, so a run picks the same rows as the last."""
    rate = min(1.0, sample_rows / rows) if sample_rows and rows else 1.0
    if rate >= 1.0:
        return df
    return df.where(F.pmod(F.xxhash64(*columns), F.lit(SAMPLE_MODULUS)) < int(rate * SAMPLE_MODULUS))


def _pairs(df: DataFrame) -> list[tuple[str, int]]:
    return sorted((r[0], int(r[1])) for r in df.groupBy(VECTOR_COLUMN).count().collect())
