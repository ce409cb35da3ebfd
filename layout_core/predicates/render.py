"""Predicates as Spark SQL text (the form stored in the catalog and run by featurize)."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal

from layout_core.base.schema import Column
from layout_core.predicates.model import (
    And, Between, ColumnCompare, Compare, Const, InList, IsNull, JoinInduced, Like, Opaque, Or,
    Predicate, PredicateVisitor, sorted_values,
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


def column_sql(c: Column) -> str:
    """A column in SQL: its identifier, or a virtual column's expression in parentheses."""
    return f"({c.name})" if c.virtual else identifier(c.name)


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


def to_sql(p: Predicate) -> str:
    return _SQL(p)


class _Sql(PredicateVisitor[str]):
    def const(self, p: Const) -> str:
        return "TRUE" if p.value else "FALSE"

    def and_(self, p: And) -> str:
        return " AND ".join(self.operand(c, Or) for c in p.children)

    def or_(self, p: Or) -> str:
        return " OR ".join(self.operand(c, And) for c in p.children)

    def operand(self, child: Predicate, needs_parens_type: type) -> str:
        text = self(child)
        return f"({text})" if isinstance(child, needs_parens_type) else text

    def compare(self, p: Compare) -> str:
        return f"{column_sql(p.column)} {p.op} {literal(p.value)}"

    def between(self, p: Between) -> str:
        kw = "NOT BETWEEN" if p.negated else "BETWEEN"
        return f"{column_sql(p.column)} {kw} {literal(p.low)} AND {literal(p.high)}"

    def in_list(self, p: InList) -> str:
        items = [literal(v) for v in sorted_values(p.values)] + (["NULL"] if p.has_null else [])
        kw = "NOT IN" if p.negated else "IN"
        return f"{column_sql(p.column)} {kw} ({', '.join(items)})"

    def like(self, p: Like) -> str:
        kw = "NOT LIKE" if p.negated else "LIKE"
        tail = "" if p.escape == "\\" else f" ESCAPE {literal(p.escape)}"
        return f"{column_sql(p.column)} {kw} {literal(p.pattern)}{tail}"

    def is_null(self, p: IsNull) -> str:
        return f"{column_sql(p.column)} IS {'NOT ' if p.negated else ''}NULL"

    def column_compare(self, p: ColumnCompare) -> str:
        return f"{identifier(p.left.name)} {p.op} {identifier(p.right.name)}"

    def opaque(self, p: Opaque) -> str:
        # parenthesized: the text may itself contain AND/OR
        return f"NOT ({p.sql})" if p.negated else f"({p.sql})"

    def join_induced(self, p: JoinInduced) -> str:
        return join_induced_sql(p)


_SQL = _Sql()


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
