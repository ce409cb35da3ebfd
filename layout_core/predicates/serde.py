"""Predicates and typed values as JSON, exactly (dates, decimals and floats keep their type)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal
from typing import Any

from .model import (
    And,
    Between,
    Column,
    ColumnCompare,
    Compare,
    Const,
    Hop,
    InList,
    IsNull,
    JoinInduced,
    Like,
    Opaque,
    Or,
    Predicate,
    conj,
    disj,
)


from .render import _sorted_values  # equal predicates serialize to equal text


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
    return [c.name, c.kind]


def to_json(p: Predicate) -> Any:
    if isinstance(p, Const):
        return {"const": p.value}
    if isinstance(p, And):
        return {"and": [to_json(c) for c in p.children]}
    if isinstance(p, Or):
        return {"or": [to_json(c) for c in p.children]}
    if isinstance(p, Compare):
        return {"cmp": _col(p.column), "op": p.op, "value": value_to_json(p.value)}
    if isinstance(p, Between):
        return {"between": _col(p.column), "low": value_to_json(p.low),
                "high": value_to_json(p.high), "negated": p.negated}
    if isinstance(p, InList):
        return {"in": _col(p.column), "values": [value_to_json(v) for v in _sorted_values(p.values)],
                "negated": p.negated, "has_null": p.has_null}
    if isinstance(p, Like):
        return {"like": _col(p.column), "pattern": p.pattern, "negated": p.negated, "escape": p.escape}
    if isinstance(p, IsNull):
        return {"is_null": _col(p.column), "negated": p.negated}
    if isinstance(p, ColumnCompare):
        return {"colcmp": [_col(p.left), p.op, _col(p.right)]}
    if isinstance(p, Opaque):
        return {"opaque": p.sql, "columns": sorted(p.cols), "deterministic": p.deterministic,
                "negated": p.negated}
    if isinstance(p, JoinInduced):
        return {"induced": [[h.parent_table, h.parent_column, h.child_table, h.child_column]
                            for h in p.hops],
                "source": to_json(p.source), "negated": p.negated}
    raise TypeError(f"not a predicate: {p!r}")


def from_json(j: Any) -> Predicate:
    if "const" in j:
        return Const(bool(j["const"]))
    if "and" in j:
        return conj(from_json(c) for c in j["and"])
    if "or" in j:
        return disj(from_json(c) for c in j["or"])
    if "cmp" in j:
        return Compare(Column(*j["cmp"]), j["op"], value_from_json(j["value"]))
    if "between" in j:
        return Between(Column(*j["between"]), value_from_json(j["low"]),
                       value_from_json(j["high"]), j["negated"])
    if "in" in j:
        return InList(Column(*j["in"]), frozenset(value_from_json(v) for v in j["values"]),
                      j["negated"], j["has_null"])
    if "like" in j:
        return Like(Column(*j["like"]), j["pattern"], j["negated"], j["escape"])
    if "is_null" in j:
        return IsNull(Column(*j["is_null"]), j["negated"])
    if "colcmp" in j:
        left, op, right = j["colcmp"]
        return ColumnCompare(Column(*left), op, Column(*right))
    if "opaque" in j:
        return Opaque(j["opaque"], frozenset(j["columns"]), j["deterministic"], j["negated"])
    if "induced" in j:
        hops = tuple(Hop(*h) for h in j["induced"])
        return JoinInduced(hops, from_json(j["source"]), j["negated"])
    raise ValueError(f"not a predicate: {j!r}")


def dumps(p: Predicate) -> str:
    return json.dumps(to_json(p), sort_keys=True, separators=(",", ":"))


def loads(text: str) -> Predicate:
    return from_json(json.loads(text))
