"""Exact money columns for the data generators: decimal(p, 2) as int64 cents and back."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc


def cents(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """A decimal(p, 2) column as int64 cents (exact)."""
    return np.asarray(pc.cast(pc.multiply(column, pa.scalar(100)), pa.int64()))


def decimal_from_cents(values: np.ndarray, type_: pa.DataType) -> pa.Array:
    """int64 cents as a decimal(p, 2) column: the cents are its unscaled 128-bit values."""
    values = np.asarray(values, dtype=np.int64)
    unscaled = np.stack([values, values >> 63], axis=1)  # little-endian low and sign-extended high words
    return pa.Array.from_buffers(type_, len(values), [None, pa.py_buffer(np.ascontiguousarray(unscaled))])
