"""Balanced MaxSkip partitioning over (vector, count) pairs (Sun et al., Section 4).

Each distinct feature vector v_i (bit j: the rows satisfy feature j) comes with
the number of rows having it. A partitioning groups rows into blocks; a block's
union vector is the OR of its rows' vectors, and feature j lets every query it
subsumes (w_j of them) skip the block when the union bit j is 0. The objective

    C(P) = sum over blocks B of |B| * sum_j w_j * (1 - union(B)_j)

is the number of rows skipped when the whole workload runs once.

`bottom_up` is Sun's Ward-style greedy clustering with `min_size`:

1. a vector with count >= min_size is finished without merging: a count in
   [min_size, 2*min_size) is one block, a larger count is split into
   count // min_size pieces as equal as possible (all in [min_size, 2*min_size));
2. the other vectors (0 < count < min_size) start as one group each; the pair
   of unfinished groups whose merge loses the least objective,
   loss(a, b) = C(a) + C(b) - C(a | b) >= 0, is merged; a group reaching
   min_size rows is finished (so it has < 2*min_size rows);
3. at most one group is left unfinished (< min_size rows); it is merged into
   the finished block with the least loss (ties: smaller block, then lower
   block id), or kept alone when there is no finished block.

Guarantees (tested): every row of every vector is in exactly one block;
vectors with count 0 are in no block; if the total row count is below
min_size there is exactly one block (none when it is 0); otherwise every block
has >= min_size rows and < 2*min_size rows, except at most one block (the one
that absorbed the leftover of step 3) with at most 3*min_size - 2 rows.

Implementation: union vectors are bit-packed into bytes, and the weight of a
union is a sum of per-byte table lookups. Every unfinished group keeps its
best partner and loss (exact nearest neighbour under `loss`); after a merge,
only the merged group's row and the rows of groups whose partner was one of
the merged two are recomputed (vectorized over all groups). That is O(n) per
recomputed row, O(n^2) overall in typical inputs (worst case O(n^3)).
Ties are broken by the lowest group index, so the output is deterministic.
"""

from __future__ import annotations

import logging
from functools import lru_cache

import numpy as np

from layout_core.algorithms.types import BlockingMap, VectorCounts

__all__ = ["PackedUnions", "bottom_up", "objective"]

log = logging.getLogger(__name__)

_CHUNK = 256  # rows of the pairwise loss matrix computed at once


def objective(vc: VectorCounts, blocking_map: BlockingMap) -> float:
    """C(P): sum over blocks of rows * weight of the features with union bit 0.
    Union vectors are recomputed from `vc` and the pieces."""
    bm = blocking_map
    k = bm.n_blocks
    hits = np.zeros((k, vc.m), dtype=np.int64)
    np.add.at(hits, bm.block, vc.vectors[bm.vector_index].astype(np.int64))
    skippable = (hits == 0).astype(np.float64) @ vc.weights  # (k,)
    return float(bm.block_sizes().astype(np.float64) @ skippable)


@lru_cache(maxsize=1)
def _word_bits() -> np.ndarray:
    """(65536, 16) float: bit t of each 16-bit word (read-only, shared)."""
    bits = ((np.arange(1 << 16)[:, None] >> np.arange(16)[None, :]) & 1).astype(np.float64)
    bits.flags.writeable = False
    return bits


class PackedUnions:
    """Bit-packed union vectors (16-bit words) and their weights via one
    65,536-entry lookup table per word."""

    def __init__(self, weights: np.ndarray) -> None:
        m = weights.shape[0]
        self.m = m
        self.nwords = max(1, (m + 15) // 16)
        padded = np.zeros(self.nwords * 16)
        padded[:m] = weights
        bits = _word_bits()
        # A word's table only needs 2**(bits used in that word) entries.
        used = [min(16, max(0, m - 16 * w)) for w in range(self.nwords)]
        self.tables = [
            bits[: 1 << u, :u] @ padded[16 * w : 16 * w + u] for w, u in enumerate(used)
        ]

    def pack(self, vectors: np.ndarray) -> np.ndarray:
        out = np.zeros((vectors.shape[0], 2 * self.nwords), dtype=np.uint8)
        if self.m:
            packed = np.packbits(vectors, axis=1, bitorder="little")
            out[:, : packed.shape[1]] = packed
        return out.view("<u2").astype(np.uint16)

    def weight(self, packed: np.ndarray) -> np.ndarray:
        """Weight of the set bits, for packed arrays of shape (..., nwords)."""
        total = self.tables[0][packed[..., 0]]
        for w in range(1, self.nwords):
            total = total + self.tables[w][packed[..., w]]
        return total


def _loss_rows(
    rows: np.ndarray,
    cols: np.ndarray,
    packed: np.ndarray,
    size: np.ndarray,
    cw: np.ndarray,
    pk: PackedUnions,
) -> np.ndarray:
    """loss(r, g) for r in rows, g in cols (arrays of group ids):
    (|r|+|g|) * w(u_r | u_g) - (|r| w(u_r) + |g| w(u_g)), with cw = |g| w(u_g).
    Written symmetrically so loss(a, b) == loss(b, a) bit for bit."""
    union_w = pk.weight(packed[rows][:, None, :] | packed[cols][None, :, :])  # (r, c)
    return (size[rows][:, None] + size[cols][None, :]) * union_w - (
        cw[rows][:, None] + cw[cols][None, :]
    )


def bottom_up(vc: VectorCounts, min_size: int, progress: bool = False) -> BlockingMap:
    """Sun's bottom-up clustering maximizing `objective`; see the module
    docstring for the algorithm and the block size guarantees."""
    if min_size < 1:
        raise ValueError("min_size must be >= 1")
    counts = vc.counts
    # Finished blocks: list of (pieces [(vector, start, end)], size, packed union)
    pk = PackedUnions(vc.weights)
    all_packed = pk.pack(vc.vectors)
    blocks_pieces: list[list[tuple[int, int, int]]] = []
    blocks_size: list[int] = []
    blocks_union: list[np.ndarray] = []

    big = np.flatnonzero(counts >= min_size)
    for v in big.tolist():
        c = int(counts[v])
        k = c // min_size  # pieces of floor(c/k) or ceil(c/k) rows, in [min, 2*min)
        base, extra = divmod(c, k)
        start = 0
        for p in range(k):
            size = base + (1 if p < extra else 0)
            blocks_pieces.append([(v, start, start + size)])
            blocks_size.append(size)
            blocks_union.append(all_packed[v])
            start += size

    pool = np.flatnonzero((counts > 0) & (counts < min_size))
    leftover = _merge_pool(pool, counts, all_packed, pk, min_size, progress,
                           blocks_pieces, blocks_size, blocks_union)
    if leftover is not None:
        members, size, union = leftover
        pieces = [(v, 0, int(counts[v])) for v in members]
        if not blocks_pieces:
            blocks_pieces.append(pieces)
            blocks_size.append(size)
            blocks_union.append(union)
        else:
            bsize = np.asarray(blocks_size, dtype=np.float64)
            bunion = np.stack(blocks_union)
            bw = pk.weight(bunion)
            lw = float(pk.weight(union[None, :])[0])
            loss = (bsize + size) * pk.weight(bunion | union[None, :]) - (bsize * bw + size * lw)
            best = np.lexsort((np.arange(len(bsize)), bsize, loss))[0]
            blocks_pieces[best].extend(pieces)
            blocks_size[best] += size
            blocks_union[best] = blocks_union[best] | union

    return BlockingMap.from_pieces(vc, blocks_pieces)


def _merge_pool(pool, counts, all_packed, pk, min_size, progress,
                blocks_pieces, blocks_size, blocks_union):
    """Greedy merging of the small vectors; appends finished blocks and returns
    the unfinished leftover (members, size, packed union) or None."""
    n = pool.shape[0]
    if n == 0:
        return None
    packed = all_packed[pool].copy()
    size = counts[pool].astype(np.float64)
    cw = size * pk.weight(packed)
    members: list[list[int]] = [[int(v)] for v in pool]
    active = np.ones(n, dtype=bool)
    nn = np.zeros(n, dtype=np.int64)
    best = np.full(n, np.inf)

    def refresh(rows: np.ndarray, act: np.ndarray) -> None:
        """Exact best partner among the active groups `act` for each of `rows`."""
        for s in range(0, rows.shape[0], _CHUNK):
            r = rows[s : s + _CHUNK]
            loss = _loss_rows(r, act, packed, size, cw, pk)
            loss[np.arange(r.shape[0]), np.searchsorted(act, r)] = np.inf
            j = np.argmin(loss, axis=1)  # lowest group id among ties
            nn[r] = act[j]
            best[r] = loss[np.arange(r.shape[0]), j]

    refresh(np.arange(n), np.arange(n))
    n_active = n
    bar = None
    if progress:
        # tqdm only when a bar is asked for: the optimizers import this module
        from tqdm import tqdm

        bar = tqdm(total=n - 1, desc="bottom-up merges", unit="merge")
    merges = 0
    while n_active > 1:
        i = int(np.argmin(best))
        j = int(nn[i])
        a, b = (i, j) if i < j else (j, i)
        packed[a] |= packed[b]
        size[a] += size[b]
        cw[a] = size[a] * pk.weight(packed[a][None, :])[0]
        members[a].extend(members[b])
        members[b] = []
        active[b] = False
        best[b] = np.inf
        n_active -= 1
        if size[a] >= min_size:
            blocks_pieces.append([(v, 0, int(counts[v])) for v in members[a]])
            blocks_size.append(int(size[a]))
            blocks_union.append(packed[a].copy())
            active[a] = False
            best[a] = np.inf
            n_active -= 1
        act = np.flatnonzero(active)
        stale_act = (nn[act] == a) | (nn[act] == b)
        if active[a]:
            pos_a = int(np.searchsorted(act, a))
            stale_act[pos_a] = False
            loss = _loss_rows(np.array([a]), act, packed, size, cw, pk)[0]
            loss[pos_a] = np.inf
            k = int(np.argmin(loss))
            nn[a] = act[k]
            best[a] = loss[k]
            better = ~stale_act & (loss < best[act])
            better[pos_a] = False
            nn[act[better]] = a
            best[act[better]] = loss[better]
        if stale_act.any():
            refresh(act[stale_act], act)
        merges += 1
        if bar is not None:
            bar.update(1)
        elif merges % 1000 == 0:  # a task log has no bar: a line now and then
            log.info("bottom_up: %d merges, %d groups left", merges, n_active)
    if bar is not None:
        bar.close()
    log.info("bottom_up: %d merges, %d groups left", merges, n_active)
    if n_active == 1:
        g = int(np.flatnonzero(active)[0])
        return members[g], int(size[g]), packed[g].copy()
    return None
