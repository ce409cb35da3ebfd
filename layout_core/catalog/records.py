"""Plain, immutable records that the layout catalog stores and hands back.

They hold only JSON-ready data (predicates as `predicates.dumps` text, stats
values in `predicates.value_to_json` encoding) so that a record read back from
the database compares equal to the one that was written, on every backend.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from pyroaring import BitMap64

CUT_KINDS = ("simple", "join_induced", "opaque")
STATES = ("building", "active", "retired", "failed", "purged")
UNPARTITIONED = ""  # the partition name of a table that has no partitions


@dataclass(frozen=True, slots=True)
class CutRecord:
    """One cut (a predicate used as a layout feature) at a fixed bit position.

    `literal_keys`, for a join-induced cut, is `BitMap64(...).serialize()` of
    the key values that satisfy it; `source_versions` names the dimension
    layouts (table, version_id) that the keys were computed from, so a reader
    can tell when they went stale.
    """

    position: int
    predicate: str
    sql: str
    kind: str
    path: tuple[str, ...] = ()
    literal_keys: bytes | None = None
    source_versions: tuple[tuple[str, int], ...] = ()

    def __post_init__(self) -> None:
        if self.kind not in CUT_KINDS:
            raise ValueError(f"cut kind must be one of {CUT_KINDS}, not {self.kind!r}")
        if self.position < 0:
            raise ValueError(f"cut position must be >= 0, not {self.position}")

    def keys(self) -> BitMap64 | None:
        """The key values of a join-induced cut, or None when there are none."""
        if self.literal_keys is None:
            return None
        return BitMap64.deserialize(self.literal_keys)


@dataclass(frozen=True, slots=True)
class BlockRecord:
    """One block of a layout: its files, column stats and cut bit vectors.

    Bit i of `union_bits` is set when some row satisfies cut i, bit i of
    `all_bits` when every row does; both may exceed 64 bits.
    """

    block_id: int
    row_count: int
    bytes: int
    path: str
    stats: dict[str, dict[str, Any]]
    union_bits: int
    all_bits: int

    def __post_init__(self) -> None:
        if self.union_bits < 0 or self.all_bits < 0:
            raise ValueError("bit vectors must be non-negative integers")


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """One layout version of a (table, partition) and where it is in its life.

    `n_blocks` is the number of block ids reserved by `begin_version`;
    `block_ids` is that reserved range.
    """

    version_id: int
    table: str
    partition: str
    state: str
    optimizer: str
    params: dict[str, Any]
    run_id: str
    created_at: dt.datetime
    activated_at: dt.datetime | None
    n_blocks: int
    routing_index: dict[str, Any] | None
    retired_at: dt.datetime | None = None
    reason: str | None = None
    block_ids: range = field(default=range(0))


@dataclass(frozen=True, slots=True)
class ActiveLayout:
    """A version together with its cuts (by position) and blocks (by block id)."""

    version: VersionInfo
    cuts: tuple[CutRecord, ...]
    blocks: tuple[BlockRecord, ...]


@dataclass(frozen=True, slots=True)
class TableInfo:
    name: str
    location: str
    partition_column: str | None
    schema_json: dict[str, Any]


@dataclass(frozen=True, slots=True)
class CatalogSnapshot:
    """Every active layout of some tables, as of one moment.

    `data_fingerprints` maps a version id to the fingerprint of the rows it
    was built from (`params["input_fingerprint"]`), for the active versions and
    every version an active join-induced cut was computed from: a cut stays
    valid while its sources hold the same data, even under a new layout.
    """

    tables: dict[str, TableInfo]
    layouts: dict[tuple[str, str], ActiveLayout]
    data_fingerprints: dict[int, str] = field(default_factory=dict)

    def layouts_of(self, table: str) -> list[ActiveLayout]:
        """The active layouts of one table, sorted by partition."""
        found = [layout for (name, _), layout in self.layouts.items() if name == table]
        return sorted(found, key=lambda layout: layout.version.partition)
