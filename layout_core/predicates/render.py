"""Predicates as Spark SQL text (the form stored in the catalog and run by featurize)."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

from .model import (
    And,
    Between,
    ColumnCompare,
    Compare,
    Const,
    InList,
    IsNull,
    JoinInduced,
    Like,
    Opaque,
    Or,
    Predicate,
)

_PLAIN_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Words Spark's ANSI parser will not take as bare identifiers.
_RESERVED = frozenset(
    """all and any as asc between both by case cast check collate column constraint create
    cross current_date current_time current_timestamp current_user default desc distinct
    else end escape except false fetch filter for foreign from full grant group having in
    inner intersect interval into is join leading left like limit natural not null of on
    only or order outer overlaps primary references right select session_user some table
    then time to trailing true union unique unknown user using when where with""".split()
)


def identifier(name: str) -> str:
    if _PLAIN_IDENTIFIER.match(name) and name.lower() not in _RESERVED:
        return name
    return "`" + name.replace("`", "``") + "`"


def literal(v) -> str:
    """A Spark SQL literal of the same type as v."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, float):
        return repr(v) + "D"
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v.isoformat(sep=' ')}'"
    if isinstance(v, dt.date):
        return f"DATE '{v.isoformat()}'"
    if isinstance(v, str):
        return "'" + v.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise TypeError(f"no SQL literal for {type(v).__name__}")


def _sorted_values(values) -> list:
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=repr)


def to_sql(p: Predicate) -> str:
    if isinstance(p, Const):
        return "TRUE" if p.value else "FALSE"
    if isinstance(p, And):
        return " AND ".join(_wrap(c, Or) for c in p.children)
    if isinstance(p, Or):
        return " OR ".join(_wrap(c, And) for c in p.children)
    if isinstance(p, Compare):
        return f"{identifier(p.column.name)} {p.op} {literal(p.value)}"
    if isinstance(p, Between):
        kw = "NOT BETWEEN" if p.negated else "BETWEEN"
        return f"{identifier(p.column.name)} {kw} {literal(p.low)} AND {literal(p.high)}"
    if isinstance(p, InList):
        items = [literal(v) for v in _sorted_values(p.values)] + (["NULL"] if p.has_null else [])
        kw = "NOT IN" if p.negated else "IN"
        return f"{identifier(p.column.name)} {kw} ({', '.join(items)})"
    if isinstance(p, Like):
        kw = "NOT LIKE" if p.negated else "LIKE"
        tail = "" if p.escape == "\\" else f" ESCAPE {literal(p.escape)}"
        return f"{identifier(p.column.name)} {kw} {literal(p.pattern)}{tail}"
    if isinstance(p, IsNull):
        return f"{identifier(p.column.name)} IS {'NOT ' if p.negated else ''}NULL"
    if isinstance(p, ColumnCompare):
        return f"{identifier(p.left.name)} {p.op} {identifier(p.right.name)}"
    if isinstance(p, Opaque):
        # parenthesized: the text may itself contain AND/OR
        return f"NOT ({p.sql})" if p.negated else f"({p.sql})"
    if isinstance(p, JoinInduced):
        return join_induced_sql(p)
    raise TypeError(f"not a predicate: {p!r}")


def _wrap(child: Predicate, needs_parens_type) -> str:
    text = to_sql(child)
    return f"({text})" if isinstance(child, needs_parens_type) else text


def join_induced_sql(p: JoinInduced) -> str:
    """Nested semi-join subqueries, innermost at the source table (MTO's logical cut)."""
    condition = to_sql(p.source)
    for hop in p.hops:
        select = (
            f"SELECT {identifier(hop.parent_column)} FROM {identifier(hop.parent_table)}"
            f" WHERE {condition}"
        )
        condition = f"{identifier(hop.child_column)} IN ({select})"
    return f"NOT ({condition})" if p.negated else condition
