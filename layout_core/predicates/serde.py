"""Predicates and typed values as JSON, exactly (dates, decimals and floats keep their type)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

from layout_core.predicates.model import (
    And, Between, Column, ColumnCompare, Compare, Const, Hop, InList, IsNull, JoinInduced, Like,
    Opaque, Or, Predicate, PredicateVisitor, conj, disj, sorted_values,
)


def value_to_json(v: Any) -> Any:
    if v is None or isinstance(v, (bool, str)):
        return v
    if isinstance(v, int):
        return {"int": str(v)}
    if isinstance(v, Decimal):
        return {"decimal": str(v)}
    if isinstance(v, float):
        return {"float": repr(v)}
    if isinstance(v, dt.datetime):
        return {"timestamp": v.isoformat()}
    if isinstance(v, dt.date):
        return {"date": v.isoformat()}
    raise TypeError(f"cannot encode {type(v).__name__}")


def value_from_json(j: Any) -> Any:
    if j is None or isinstance(j, (bool, str)):
        return j
    (kind, text), = j.items()
    if kind == "int":
        return int(text)
    if kind == "decimal":
        return Decimal(text)
    if kind == "float":
        return float(text)
    if kind == "timestamp":
        return dt.datetime.fromisoformat(text)
    if kind == "date":
        return dt.date.fromisoformat(text)
    raise ValueError(f"unknown value kind {kind!r}")


def _col(c: Column) -> list:
    return [c.name, c.kind, list(c.reads)] if c.virtual else [c.name, c.kind]


def _col_from_json(j: list) -> Column:
    return Column(j[0], j[1], tuple(j[2])) if len(j) > 2 else Column(*j)


def to_json(p: Predicate) -> Any:
    return _JSON(p)


class _Json(PredicateVisitor[Any]):
    def const(self, p: Const) -> Any:
        return {"const": p.value}

    def and_(self, p: And) -> Any:
        return {"and": [self(c) for c in p.children]}

    def or_(self, p: Or) -> Any:
        return {"or": [self(c) for c in p.children]}

    def compare(self, p: Compare) -> Any:
        return {"cmp": _col(p.column), "op": p.op, "value": value_to_json(p.value)}

    def between(self, p: Between) -> Any:
        return {"between": _col(p.column), "low": value_to_json(p.low),
                "high": value_to_json(p.high), "negated": p.negated}

    def in_list(self, p: InList) -> Any:
        return {"in": _col(p.column), "values": [value_to_json(v) for v in sorted_values(p.values)],
                "negated": p.negated, "has_null": p.has_null}

    def like(self, p: Like) -> Any:
        return {"like": _col(p.column), "pattern": p.pattern, "negated": p.negated, "escape": p.escape}

    def is_null(self, p: IsNull) -> Any:
        return {"is_null": _col(p.column), "negated": p.negated}

    def column_compare(self, p: ColumnCompare) -> Any:
        return {"colcmp": [_col(p.left), p.op, _col(p.right)]}

    def opaque(self, p: Opaque) -> Any:
        return {"opaque": p.sql, "columns": sorted(p.cols), "deterministic": p.deterministic,
                "negated": p.negated}

    def join_induced(self, p: JoinInduced) -> Any:
        return {"induced": [[h.parent_table, h.parent_column, h.child_table, h.child_column]
                            for h in p.hops],
                "source": self(p.source), "negated": p.negated}


_JSON = _Json()


def from_json(j: Any) -> Predicate:
    """The predicate `to_json` wrote: its one tag key names the type."""
    for tag, decode in _DECODERS.items():
        if tag in j:
            return decode(j)
    raise ValueError(f"not a predicate: {j!r}")


def _column_compare_from_json(j: Any) -> ColumnCompare:
    left, op, right = j["colcmp"]
    return ColumnCompare(_col_from_json(left), op, _col_from_json(right))


def _induced_from_json(j: Any) -> JoinInduced:
    return JoinInduced(tuple(Hop(*h) for h in j["induced"]), from_json(j["source"]), j["negated"])


# The JSON tag of every predicate type (the catalog's stored format), and how to decode it.
_DECODERS = {
    "const": lambda j: Const(bool(j["const"])),
    "and": lambda j: conj(from_json(c) for c in j["and"]),
    "or": lambda j: disj(from_json(c) for c in j["or"]),
    "cmp": lambda j: Compare(_col_from_json(j["cmp"]), j["op"], value_from_json(j["value"])),
    "between": lambda j: Between(_col_from_json(j["between"]), value_from_json(j["low"]),
                                 value_from_json(j["high"]), j["negated"]),
    "in": lambda j: InList(_col_from_json(j["in"]), frozenset(value_from_json(v) for v in j["values"]),
                           j["negated"], j["has_null"]),
    "like": lambda j: Like(_col_from_json(j["like"]), j["pattern"], j["negated"], j["escape"]),
    "is_null": lambda j: IsNull(_col_from_json(j["is_null"]), j["negated"]),
    "colcmp": _column_compare_from_json,
    "opaque": lambda j: Opaque(j["opaque"], frozenset(j["columns"]), j["deterministic"], j["negated"]),
    "induced": _induced_from_json,
}


def dumps(p: Predicate) -> str:
    return json.dumps(to_json(p), sort_keys=True, separators=(",", ":"))


def loads(text: str) -> Predicate:
    return from_json(json.loads(text))
