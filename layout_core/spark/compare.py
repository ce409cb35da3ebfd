"""Compare two query results as multisets of rows.

Exact for integers, decimals, strings and dates; floating-point values (from
AVG and friends) compare with a relative tolerance, because a different
block order changes the order of additions.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

REL_TOL = 1e-9
ABS_TOL = 1e-9


def _sort_key(row: Sequence[Any]) -> tuple:
    key = []
    for v in row:
        if isinstance(v, float):
            # rounded so that values within tolerance sort together
            key.append((1, 0.0 if math.isnan(v) else float(f"{v:.6g}"), ""))
        elif v is None:
            key.append((0, 0.0, ""))
        else:
            key.append((2, 0.0, repr(v)))
    return tuple(key)


def _values_equal(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        if a is None or b is None:
            return a is b
        if math.isnan(float(a)) and math.isnan(float(b)):
            return True
        return math.isclose(float(a), float(b), rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return a == b


def same_rows(expected: list[Sequence[Any]], actual: list[Sequence[Any]]) -> tuple[bool, str]:
    """(equal, explanation of the first difference)."""
    if len(expected) != len(actual):
        return False, f"{len(expected)} rows expected, {len(actual)} returned"
    for i, (a, b) in enumerate(zip(sorted(expected, key=_sort_key), sorted(actual, key=_sort_key))):
        if len(a) != len(b) or not all(_values_equal(x, y) for x, y in zip(a, b)):
            return False, f"row {i} (sorted) differs: expected {tuple(a)!r}, got {tuple(b)!r}"
    return True, ""
