"""Keeping a block's range sets sound when its rows change (diPs §4.1).

Two ways, per block and column, both on the statistics as the catalog stores
them (`{"min", "max", "null_count"[, "ranges"][, "tainted"]}`, values in
`value_to_json` encoding):

- `grow_column_stats` (the default): deletes are ignored and every new value
  is covered, greedily (Table 4): a value inside a range changes nothing;
  otherwise, with fewer than n_r ranges it becomes a range of its own, else
  the cheaper of growing its nearest range to it and merging the two closest
  neighbouring ranges to make room for it, by the width added. The ranges
  only grow, so every row, old or new, stays covered.
- `taint_column_stats`: the column's statistics of that block are marked
  unknown. The router then never skips the block by them, a table with such
  a block among those it keeps originates no diP on that column, and the
  block still receives diPs from other tables (equations 4-6).

Widths are measured as Spark measures them when it chooses the ranges
(the difference of `spark.blocks.order_code`s): numbers, days, seconds, and strings through
their first 7 UTF-8 bytes read as a number.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any, Iterable

from layout_core.predicates import value_from_json, value_to_json


def ranges_to_json(ranges: Iterable[tuple]) -> list[list]:
    """A range set as the catalog stores it (`ranges` of a column's block stats)."""
    return [[value_to_json(lo), value_to_json(hi)] for lo, hi in ranges]


def ranges_from_json(raw: Iterable) -> tuple[tuple, ...]:
    """The stored `ranges` back as (lo, hi) values."""
    return tuple((value_from_json(lo), value_from_json(hi)) for lo, hi in raw)


def width(lo: Any, hi: Any) -> float:
    """How far apart two values of one column are (hi >= lo)."""
    if isinstance(lo, dt.datetime):
        return (hi - lo).total_seconds()
    if isinstance(lo, dt.date):
        return float((hi - lo).days)
    if isinstance(lo, str):
        return float(_string_code(hi) - _string_code(lo))
    if isinstance(lo, Decimal) or isinstance(hi, Decimal):
        return float(Decimal(hi) - Decimal(lo))
    return float(hi - lo)


def _string_code(s: str) -> int:
    return int.from_bytes(s.encode("utf-8")[:7].ljust(7, b"\0"), "big")


def grow_ranges(ranges: Iterable[tuple], values: Iterable[Any], n_r: int) -> tuple[tuple, ...]:
    """The range set (sorted disjoint (lo, hi) pairs) grown to cover `values`
    (NULLs ignored), keeping at most max(n_r, len(ranges)) ranges."""
    out = sorted(tuple(r) for r in ranges)
    limit = max(n_r, len(out), 1)
    for v in sorted({v for v in values if v is not None}):
        if any(lo <= v <= hi for lo, hi in out):
            continue
        if len(out) < limit:
            out.append((v, v))
            out.sort()
            continue
        below = [i for i, (_, hi) in enumerate(out) if hi < v]
        above = [i for i, (lo, _) in enumerate(out) if lo > v]
        options = []  # (added width, rank, new ranges)
        if below:
            i = below[-1]
            options.append((width(out[i][1], v), 0, out[:i] + [(out[i][0], v)] + out[i + 1:]))
        if above:
            i = above[0]
            options.append((width(v, out[i][0]), 1, out[:i] + [(v, out[i][1])] + out[i + 1:]))
        if len(out) >= 2:
            gaps = [(width(out[i][1], out[i + 1][0]), i) for i in range(len(out) - 1)]
            gap, i = min(gaps)
            merged = out[:i] + [(out[i][0], out[i + 1][1])] + out[i + 2:]
            inside = out[i][0] <= v <= out[i + 1][1]  # (then growing a neighbour was cheaper anyway)
            options.append((gap, 2, merged if inside else sorted(merged + [(v, v)])))
        out = min(options, key=lambda o: (o[0], o[1]))[2]
    return tuple(out)


def grow_column_stats(stats: dict | None, values: Iterable[Any], n_r: int) -> dict:
    """One block's statistics of one column after rows with `values` were added
    (stored encoding in and out; None: the block had no statistics, i.e. no rows)."""
    values = list(values)
    stats = dict(stats or {"min": None, "max": None, "null_count": 0})
    if stats.get("tainted"):
        return stats  # unknown stays unknown
    lo, hi = value_from_json(stats.get("min")), value_from_json(stats.get("max"))
    if "ranges" in stats:
        ranges = list(ranges_from_json(stats["ranges"]))
    else:
        ranges = [(lo, hi)] if lo is not None and hi is not None else []
    grown = grow_ranges(ranges, values, n_r)
    stats["null_count"] = int(stats.get("null_count", 0)) + sum(v is None for v in values)
    if grown:
        stats["min"], stats["max"] = value_to_json(grown[0][0]), value_to_json(grown[-1][1])
    stats.pop("ranges", None)
    if len(grown) > 1:
        stats["ranges"] = ranges_to_json(grown)
    return stats


def taint_column_stats(stats: dict | None) -> dict:
    """The statistics marked unknown: never used to skip the block or to originate a diP."""
    return {**(stats or {}), "tainted": True}


def merge_column_stats(old: dict | None, new: dict | None, n_r: int) -> dict:
    """One block's statistics of one column after rows summarized as `new` joined rows
    summarized as `old` (stored encoding in and out): the union of both range sets, the
    narrowest gaps closed until at most n_r ranges remain. Only grows: every value that
    either covered stays covered. A tainted side makes the result tainted."""
    if not new:
        return dict(old or {})
    if not old:
        return dict(new)
    if old.get("tainted") or new.get("tainted"):
        return taint_column_stats(old)
    ranges = sorted(r for stats in (old, new) for r in _stored_ranges(stats))
    merged: list[tuple] = []
    for lo, hi in ranges:
        if merged and lo <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], hi))
        else:
            merged.append((lo, hi))
    merged = _close_narrowest_gaps(merged, n_r)
    out = {"min": None, "max": None,
           "null_count": int(old.get("null_count", 0)) + int(new.get("null_count", 0))}
    if merged:
        out["min"], out["max"] = value_to_json(merged[0][0]), value_to_json(merged[-1][1])
    if len(merged) > 1:
        out["ranges"] = ranges_to_json(merged)
    return out


def coarsen_column_stats(stats: dict, n_r: int) -> dict:
    """The statistics with at most n_r ranges, the narrowest gaps closed: the range set
    Spark would have chosen with n_r (its n_r - 1 widest gaps are among the finer set's)."""
    if "ranges" not in stats or stats.get("tainted"):
        return dict(stats)
    ranges = _close_narrowest_gaps(list(ranges_from_json(stats["ranges"])), n_r)
    out = {k: v for k, v in stats.items() if k != "ranges"}
    if len(ranges) > 1:
        out["ranges"] = ranges_to_json(ranges)
    return out


def _close_narrowest_gaps(ranges: list[tuple], n_r: int) -> list[tuple]:
    """Sorted disjoint ranges, neighbours across the narrowest gap merged until at most n_r remain."""
    while len(ranges) > max(n_r, 1):
        i = min(range(len(ranges) - 1), key=lambda k: (width(ranges[k][1], ranges[k + 1][0]), k))
        ranges[i:i + 2] = [(ranges[i][0], ranges[i + 1][1])]
    return ranges


def _stored_ranges(stats: dict) -> tuple[tuple, ...]:
    if "ranges" in stats:
        return ranges_from_json(stats["ranges"])
    lo, hi = value_from_json(stats.get("min")), value_from_json(stats.get("max"))
    return ((lo, hi),) if lo is not None and hi is not None else ()
