"""The types the algorithms share: rows as (vector, count) pairs, a training workload
against the candidate cuts, and a blocking map (which rows go to which block)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["BlockingMap", "VectorCounts", "Workload", "nonnegative_weights", "reference_halves", "unpack_bit_strings"]


@dataclass(frozen=True, eq=False)
class VectorCounts:
    vectors: np.ndarray  # (n, m) bool, one row per (distinct) feature vector
    counts: np.ndarray  # (n,) int64, rows having that vector
    weights: np.ndarray  # (m,) float, number of queries each feature subsumes

    def __post_init__(self) -> None:
        vectors = np.asarray(self.vectors, dtype=bool)
        counts = np.asarray(self.counts, dtype=np.int64)
        if vectors.ndim != 2:
            raise ValueError("vectors must be a 2-D (n, m) array")
        n, m = vectors.shape
        if counts.shape != (n,):
            raise ValueError(f"counts must have shape ({n},)")
        if (counts < 0).any():
            raise ValueError("counts must be >= 0")
        weights = nonnegative_weights(self.weights, m)
        object.__setattr__(self, "vectors", vectors)
        object.__setattr__(self, "counts", counts)
        object.__setattr__(self, "weights", weights)

    @classmethod
    def from_rows(cls, row_vectors: np.ndarray, weights: np.ndarray) -> "VectorCounts":
        """Group per-row feature vectors into distinct (vector, count) pairs,
        vectors in lexicographic order."""
        rows = np.asarray(row_vectors, dtype=bool)
        if rows.ndim != 2:
            raise ValueError("row_vectors must be a 2-D array")
        if rows.shape[0] == 0:
            return cls(rows, np.zeros(0, np.int64), weights)
        uniq, inverse = distinct_rows(rows)
        return cls(uniq, np.bincount(inverse, minlength=len(uniq)).astype(np.int64), weights)

    @property
    def n(self) -> int:
        return self.vectors.shape[0]

    @property
    def m(self) -> int:
        return self.vectors.shape[1]


def distinct_rows(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct rows of a 2-D bool array in lexicographic order (False before True) and,
    per row, the index of its distinct row: `np.unique(rows, axis=0, return_inverse=True)`,
    sorted on the rows packed into 64-bit words (np.unique compares wide rows byte by byte,
    many times slower)."""
    rows = np.asarray(rows, dtype=bool)
    if rows.ndim != 2:
        raise ValueError("rows must be a 2-D array")
    n, m = rows.shape
    if n == 0 or m == 0:
        return rows[:min(n, 1)].copy(), np.zeros(n, dtype=np.int64)
    packed = np.packbits(rows, axis=1)  # column 0 is the most significant bit of byte 0
    packed = np.pad(packed, ((0, 0), (0, -packed.shape[1] % 8)))
    words = np.ascontiguousarray(packed).view(">u8").astype(np.uint64)  # big-endian: word order is byte order
    order = np.lexsort(words.T[::-1])  # lexsort's last key is the primary one: word 0
    ordered = words[order]
    first = np.ones(n, dtype=bool)
    first[1:] = (ordered[1:] != ordered[:-1]).any(axis=1)
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.cumsum(first) - 1
    return rows[order[first]], inverse


def nonnegative_weights(weights, length: int) -> np.ndarray:
    """weights as a float64 array of shape (length,), each finite and >= 0 (else ValueError)."""
    out = np.asarray(weights, dtype=np.float64)
    if out.shape != (length,):
        raise ValueError(f"weights must have shape ({length},)")
    if not np.isfinite(out).all() or (out < 0).any():
        raise ValueError("weights must be finite and >= 0")
    return out


@dataclass(frozen=True, eq=False)
class Workload:
    """Training queries against m candidate cuts.

    implies:  (Q, m) bool, query q's predicate implies cut j.
    disjoint: (Q, m) bool, query q's predicate is disjoint with cut j.
    weights:  (Q,) float >= 0, how often each query runs (default 1 each).
    """

    implies: np.ndarray
    disjoint: np.ndarray
    weights: np.ndarray | None = None

    def __post_init__(self) -> None:
        implies = np.asarray(self.implies, dtype=bool)
        disjoint = np.asarray(self.disjoint, dtype=bool)
        if implies.ndim != 2:
            raise ValueError("implies must be a 2-D (queries, cuts) array")
        if disjoint.shape != implies.shape:
            raise ValueError(
                f"disjoint has shape {disjoint.shape}, implies has {implies.shape}"
            )
        q = implies.shape[0]
        weights = np.ones(q, dtype=np.float64) if self.weights is None else nonnegative_weights(self.weights, q)
        object.__setattr__(self, "implies", implies)
        object.__setattr__(self, "disjoint", disjoint)
        object.__setattr__(self, "weights", weights)

    @property
    def n_queries(self) -> int:
        return int(self.implies.shape[0])

    @property
    def m(self) -> int:
        return int(self.implies.shape[1])


@dataclass(frozen=True, eq=False)
class BlockingMap:
    """Rows [row_start, row_end) (in a fixed order of the rows having vector
    `vector_index`) go to block `block`. Pieces are sorted by (vector_index,
    row_start); blocks are numbered 0..k-1 in order of their first piece."""

    vector_index: np.ndarray  # (p,) int64
    block: np.ndarray  # (p,) int64
    row_start: np.ndarray  # (p,) int64
    row_end: np.ndarray  # (p,) int64
    unions: np.ndarray  # (k, m) bool, union vector of each block

    @classmethod
    def from_pieces(cls, vc: VectorCounts, blocks_pieces: Sequence[Sequence[tuple[int, int, int]]]) -> BlockingMap:
        """The map of blocks given as lists of pieces (vector, row_start, row_end),
        blocks renumbered by their first piece in (vector, row_start) order."""
        rows = [(v, s, e, bi) for bi, pieces in enumerate(blocks_pieces) for (v, s, e) in pieces]
        m = vc.m
        if not rows:
            empty = np.zeros(0, dtype=np.int64)
            return cls(empty, empty.copy(), empty.copy(), empty.copy(), np.zeros((0, m), bool))
        arr = np.asarray(rows, dtype=np.int64)
        order = np.lexsort((arr[:, 1], arr[:, 0]))
        arr = arr[order]
        # Renumber blocks by first appearance in (vector, row_start) order.
        _, first = np.unique(arr[:, 3], return_index=True)
        old_ids = arr[first, 3]
        rank = np.empty(len(blocks_pieces), dtype=np.int64)
        rank[old_ids[np.argsort(first, kind="stable")]] = np.arange(old_ids.shape[0])
        block = rank[arr[:, 3]]
        k = old_ids.shape[0]
        hits = np.zeros((k, m), dtype=np.int64)
        np.add.at(hits, block, vc.vectors[arr[:, 0]].astype(np.int64))
        return cls(arr[:, 0].copy(), block, arr[:, 1].copy(), arr[:, 2].copy(), hits > 0)

    @property
    def n_blocks(self) -> int:
        return int(self.unions.shape[0])

    def block_sizes(self) -> np.ndarray:
        return np.bincount(
            self.block, weights=self.row_end - self.row_start, minlength=self.n_blocks
        ).astype(np.int64)

    def union_vectors(self) -> np.ndarray:
        return self.unions.copy()

    def block_of_vector(self, vector_index: int) -> np.ndarray:
        """Blocks holding rows of one vector, in row order."""
        return self.block[self.vector_index == vector_index]

    def skipped_rows(self, query_feature_sets: np.ndarray) -> np.ndarray:
        """Rows each query skips. `query_feature_sets` is (q, m) bool: entry
        (i, j) is True when feature j subsumes query i. A query skips a block
        when some feature subsuming it has union bit 0 there."""
        qf = np.asarray(query_feature_sets, dtype=bool)
        can_skip = (qf.astype(np.int64) @ (~self.unions).astype(np.int64).T) > 0  # (q, k)
        return can_skip.astype(np.int64) @ self.block_sizes()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, BlockingMap):
            return NotImplemented
        return all(
            np.array_equal(getattr(self, f), getattr(other, f))
            for f in ("vector_index", "block", "row_start", "row_end", "unions")
        )

    __hash__ = None  # type: ignore[assignment]


def unpack_bit_strings(keys: Sequence[str], m: int) -> np.ndarray:
    """(n, m) bool from n strings of m '0'/'1' characters (character j = feature j),
    the vectors' form on the Spark side (`spark.blocks.with_bit_vector`)."""
    chars = np.frombuffer("".join(keys).encode("ascii"), dtype=np.uint8)
    if chars.size != len(keys) * m or not np.isin(chars, (ord("0"), ord("1"))).all():
        raise ValueError(f"expected {len(keys)} strings of {m} '0'/'1' characters")
    return chars.reshape(len(keys), m) == ord("1")


def mask_bits(mask: int, n: int) -> np.ndarray:
    """(n,) bool: bit i of the non-negative int `mask` (a block's cut bits as the catalog keeps them)."""
    raw = np.frombuffer(mask.to_bytes(max(1, (n + 7) // 8), "little"), dtype=np.uint8)
    return np.unpackbits(raw, bitorder="little")[:n].astype(bool)


def masks_bits(masks: Sequence[int], n: int) -> np.ndarray:
    """(len(masks), n) bool: `mask_bits` of each mask at once; bits past n are left out."""
    n_bytes = max(1, -(-max(n, *(m.bit_length() for m in masks), 0) // 8))
    raw = np.frombuffer(b"".join(m.to_bytes(n_bytes, "little") for m in masks), dtype=np.uint8)
    return np.unpackbits(raw.reshape(len(masks), n_bytes), axis=1, bitorder="little")[:, :n].astype(bool)


def reference_halves(workload: Workload) -> np.ndarray | None:
    """(Q,) 0 or 1 per training reference: two halves to fit a layout on one and
    measure it on the other (pando's trees=auto), or None with fewer than two
    distinct references or a half whose queries all weigh 0.

    Distinct (implies, disjoint) rows, in the order they first appear, go
    alternately to the halves; identical rows (two references of one query
    with the same predicate, a query run twice) stay in one half, so the
    other half measures queries the layout was not fitted to."""
    rows = np.concatenate([workload.implies, workload.disjoint], axis=1)
    _, first, group = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    if first.size < 2:
        return None
    half_of_group = np.empty(first.size, dtype=np.int64)
    half_of_group[np.argsort(first)] = np.arange(first.size) % 2  # by first appearance
    half = half_of_group[group.reshape(-1)]
    if any(workload.weights[half == h].sum() == 0 for h in (0, 1)):
        return None
    return half
