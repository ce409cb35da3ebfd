"""Space-filling-curve keys over integer grid coordinates (pure numpy, vectorized over rows).

These are the keys behind the usual "cluster by several columns" baselines
(Delta `OPTIMIZE ZORDER BY`, Iceberg `rewrite_data_files` with a z-order sort,
Hudi z-order / Hilbert clustering): each row's values of k columns become k
integer coordinates in [0, 2^bits), the coordinates become one curve index, the
rows are sorted by it and cut into equal-size blocks.

* `zorder_keys`: Morton order, i.e. bit interleaving. The most significant key
  bit is the top coordinate bit of dimension 0, then the top bit of dimension 1,
  ..., then the next bit of dimension 0, and so on.
* `hilbert_keys`: the k-dimensional Hilbert index, by Skilling's transpose
  method (J. Skilling, "Programming the Hilbert curve", AIP Conf. Proc. 707,
  2004): the coordinates are turned in place into the "transposed" index, whose
  bits interleaved exactly as in `zorder_keys` give the index. Consecutive
  indices are always cells at Manhattan distance 1, cell (0, ..., 0) has index
  0, and the curve of order `bits` coarsened by one bit is the curve of order
  `bits - 1` (`hilbert_keys(c, b) >> k == hilbert_keys(c >> 1, b - 1)`).
* `rank_coordinates`: the reference normalization of one column to [0, 2^bits)
  (rank based, so skewed columns spread over the whole range; NULLs to 0).

Every function loops in Python only over bits and dimensions, never over rows.
"""

from __future__ import annotations

import numpy as np

__all__ = ["hilbert_keys", "rank_coordinates", "zorder_keys"]

_U64 = np.uint64
_ONE = np.uint64(1)
_ZERO = np.uint64(0)


def _check_bits(bits: int, k: int) -> int:
    if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)):
        raise TypeError(f"bits must be an int, got {type(bits).__name__}")
    bits = int(bits)
    if bits < 1:
        raise ValueError(f"bits must be >= 1, got {bits}")
    if k * bits > 64:
        raise ValueError(f"k * bits must be <= 64 to fit a uint64 key, got k={k}, bits={bits}")
    return bits


def _as_coordinates(coords, bits: int) -> tuple[np.ndarray, int]:
    """(n, k) unsigned coordinates in [0, 2^bits) as a C-contiguous uint64 array, and bits."""
    a = np.asarray(coords)
    if a.ndim != 2:
        raise ValueError(f"coords must be a 2-D (n, k) array, got shape {a.shape}")
    n, k = a.shape
    if k < 1:
        raise ValueError("coords must have at least one column (dimension)")
    if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
        if n == 0 and a.dtype == np.float64:  # np.empty((0, k)) and friends
            a = a.astype(_U64)
        else:
            raise TypeError(f"coords must have an integer dtype, got {a.dtype}")
    bits = _check_bits(bits, k)
    if n and np.issubdtype(a.dtype, np.signedinteger) and a.min() < 0:
        raise ValueError("coords must be non-negative")
    a = np.ascontiguousarray(a, dtype=_U64)
    if n and bits < 64 and a.max() >= (1 << bits):
        raise ValueError(f"coords must be < 2^bits = {1 << bits}, got {int(a.max())}")
    return a, bits


def _interleave(columns: list[np.ndarray], bits: int) -> np.ndarray:
    """Interleave the low `bits` bits of k uint64 columns, dimension 0 most significant."""
    key = np.zeros(columns[0].shape[0], dtype=_U64)
    for b in range(bits - 1, -1, -1):
        shift = _U64(b)
        for col in columns:
            key <<= _ONE
            key |= (col >> shift) & _ONE
    return key


def zorder_keys(coords: np.ndarray, bits: int) -> np.ndarray:
    """Z-order (Morton) keys of (n, k) coordinates in [0, 2^bits), as uint64 of shape (n,).

    Bits are taken from the most significant coordinate bit down; within one bit
    position, dimension 0 first. With bits=1 in 2-D: (0,0)->0, (0,1)->1,
    (1,0)->2, (1,1)->3. Raises ValueError when k * bits > 64 or a coordinate is
    out of range.
    """
    a, bits = _as_coordinates(coords, bits)
    return _interleave([a[:, i] for i in range(a.shape[1])], bits)


def hilbert_keys(coords: np.ndarray, bits: int) -> np.ndarray:
    """Hilbert indexes of (n, k) coordinates in [0, 2^bits), as uint64 of shape (n,).

    Skilling's "axes to transpose" transform, run on whole columns at once, then
    the transposed index is bit-interleaved like `zorder_keys`. With bits=1 the
    curve is the reflected Gray code over the k bits (dimension 0 most
    significant). Raises ValueError when k * bits > 64 or a coordinate is out
    of range.
    """
    a, bits = _as_coordinates(coords, bits)
    k = a.shape[1]
    x = [a[:, i].copy() for i in range(k)]
    top = 1 << (bits - 1)

    # Undo the excess work: walk the bit planes from the top; where x[i] has the
    # current bit set, invert the lower bits of x[0], otherwise swap the lower
    # bits of x[0] and x[i].
    q = top
    while q > 1:
        q_mask = _U64(q)
        low = _U64(q - 1)
        for i in range(k):
            hit = (x[i] & q_mask) != _ZERO
            if i == 0:
                x[0] ^= np.where(hit, low, _ZERO)
                continue
            swap = np.where(hit, _ZERO, (x[0] ^ x[i]) & low)
            x[0] ^= np.where(hit, low, _ZERO) ^ swap
            x[i] ^= swap
        q >>= 1

    # Gray encode.
    for i in range(1, k):
        x[i] ^= x[i - 1]
    t = np.zeros(a.shape[0], dtype=_U64)
    q = top
    while q > 1:
        t ^= np.where((x[k - 1] & _U64(q)) != _ZERO, _U64(q - 1), _ZERO)
        q >>= 1
    for i in range(k):
        x[i] ^= t

    return _interleave(x, bits)


def _null_mask(values: np.ndarray) -> np.ndarray:
    if values.dtype.kind == "f" or values.dtype.kind == "c":
        return np.isnan(values)
    if values.dtype.kind in "mM":
        return np.isnat(values)
    if values.dtype.kind == "O":
        # Elementwise comparisons run in numpy's object loops: None, and
        # anything unequal to itself (float NaN, Decimal('NaN'), NaT).
        is_none = np.equal(values, None)
        is_nan = np.not_equal(values, values)
        return np.asarray(is_none | is_nan, dtype=bool)
    return np.zeros(values.shape, dtype=bool)


def rank_coordinates(values, bits: int) -> np.ndarray:
    """Rank-based coordinates in [0, 2^bits) of one column (uint64 of shape (n,)).

    With m non-NULL values and R(v) = the number of non-NULL values <= v (the
    1-based rank of v's last copy), the coordinate is
    min(floor(R(v) * 2^bits / m), 2^bits - 1): the number of j in
    [1, 2^bits) whose exact quantile at probability j / 2^bits is <= v, taking
    the quantile at p to be the value of 1-based rank ceil(p * m), which is what
    Spark's `approxQuantile` returns with relativeError 0. Equal values share a
    coordinate, the map is monotone, and a uniform-rank column fills the range.
    NULLs (None, NaN, NaT) map to 0. Values only need to be mutually comparable
    (numbers, strings, dates, Decimals...).
    """
    bits = _check_bits(bits, 1)
    if bits > 63:
        raise ValueError("rank_coordinates supports bits <= 63")
    v = np.asarray(values)
    if v.ndim != 1:
        raise ValueError(f"values must be 1-D, got shape {v.shape}")
    out = np.zeros(v.shape[0], dtype=_U64)
    null = _null_mask(v)
    present = v[~null]
    m = present.shape[0]
    if m == 0:
        return out
    ordered = np.sort(present, kind="stable")
    r = np.searchsorted(ordered, present, side="right").astype(np.uint64)  # 1..m
    top = (1 << bits) - 1
    if bits + int(m).bit_length() <= 64:
        coord = (r << _U64(bits)) // _U64(m)
    else:  # r * 2^bits would overflow: binary long division, one bit per step
        mm = _U64(m)
        full = r == mm
        rem = np.where(full, _ZERO, r)  # < m < 2^63, so rem << 1 cannot overflow
        coord = np.zeros_like(r)
        for _ in range(bits):
            rem <<= _ONE
            bit = rem >= mm
            rem -= np.where(bit, mm, _ZERO)
            coord = (coord << _ONE) | bit.astype(_U64)
        coord[full] = _U64(top)
    out[~null] = np.minimum(coord, _U64(top))
    return out
