"""What the nightly steps hand each other besides the generic written/verified blocks
(`runs.artifacts`): the ingested batch's fingerprint, the featurized cuts, the vectors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Sequence

from layout_core.flows.names import TRAINING_LOG_QUERIES, TRAINING_QUERIES

# The noise floor needs enough queries for its folds; a log of a busy day would make every
# version's stored plan megabytes long.
MAX_TRAINING_QUERIES = 2000


def spread(items: tuple, limit: int = MAX_TRAINING_QUERIES) -> tuple:
    """At most `limit` (>= 2) of `items`, evenly spread from the first to the last."""
    if len(items) <= limit:
        return items
    step = (len(items) - 1) / (limit - 1)
    return tuple(items[round(i * step)] for i in range(limit))


def training_log_record(sql: Sequence[str], log_queries: int) -> dict:
    """What a version's stored plan keeps of the queries it was laid out for (those that
    read the table, `spread` to at most MAX_TRAINING_QUERIES) and how many queries the log
    held in all: the workload monitor's noise floor (`reorg.shift`). The nightly's
    featurize and a partial reorganization (its window) record it alike."""
    return {TRAINING_QUERIES: list(spread(tuple(sql))), TRAINING_LOG_QUERIES: log_queries}


@dataclass(frozen=True)
class IngestSummary:
    """The ingested batch's fingerprint, which verify compares the written blocks with."""

    FILE: ClassVar[str] = "input.json"
    STEP: ClassVar[str] = "ingest"
    rows: int
    checksum: str


@dataclass(frozen=True)
class CutEntry:
    """One featurized cut: bit `position` of every row's vector."""

    position: int
    kind: str  # simple | join_induced
    sql: str
    predicate: str  # predicates.dumps
    support: int
    path: tuple[str, ...] = ()  # induction path of a join-induced cut
    literal_keys: int = 0  # how many keys its Roaring bitmap (literal_keys/cut<position>.roaring) holds
    source_versions: tuple[tuple[str, int], ...] = ()  # (table, version) its bits were computed from


@dataclass(frozen=True)
class Features:
    FILE: ClassVar[str] = "features.json"
    STEP: ClassVar[str] = "featurize"
    optimizer: str
    settings: dict  # the optimizer's resolved settings
    table: str
    schema_fingerprint: str
    cuts: tuple[CutEntry, ...]
    workload: dict  # optimizers.base.WorkloadSummary.to_json()
    log: dict  # numbers of the query log (queries, parsed, failed, on this table)
    # The log's queries that read the table: the workload monitor's noise floor (`reorg.shift`).
    training_sql: tuple[str, ...] = ()


@dataclass(frozen=True)
class Vectors:
    """The (vector, count) pairs of the batch or of a row-hash sample of it."""

    FILE: ClassVar[str] = "vectors.json"
    STEP: ClassVar[str] = "reduce"
    keys: tuple[str, ...]
    counts: tuple[int, ...]
    rows: int  # rows of the batch (not of the sample)
