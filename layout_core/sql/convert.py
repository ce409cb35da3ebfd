"""sqlglot boolean expressions -> predicates over qualified columns.

Columns are named `<ref>.<column>` where ref identifies one table reference
of the query, so a predicate may span several tables; `project(p, ref)` then
keeps what it says about one reference. Whatever the model does not
understand becomes `Opaque` (never used to skip), with its SQL written
without table qualifiers so that, if it touches one table only, it is still
a valid cut on that table.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

from sqlglot import exp

from layout_core.predicates import (
    FALSE, TRUE, Between, Column, ColumnCompare, Compare, Const, InList, IsNull, Like, Opaque,
    Predicate, conj, disj, map_atoms, negate,
)
from layout_core.predicates.model import NONDETERMINISTIC_FUNCTIONS, flip
from layout_core.sql.literals import NOT_CONSTANT, TIME_ZONE_SLACK, SessionTime, coerce, fold

# Resolves a qualified sqlglot column to (ref key, Column) or None when it is
# not a column of a base table reference (a derived table's output, say).
Resolver = Callable[[exp.Column], "tuple[str, Column] | None"]

_COMPARISONS = {exp.EQ: "=", exp.NEQ: "<>", exp.LT: "<", exp.LTE: "<=", exp.GT: ">", exp.GTE: ">="}

# A column name for "depends on a subquery": projection never keeps such atoms.
SUBQUERY_MARK = "<subquery>"


def qualified(ref: str, column: Column) -> Column:
    return Column(f"{ref}.{column.name}", column.kind)


def split_qualified(name: str) -> tuple[str, str]:
    ref, _, column = name.partition(".")
    return ref, column


def to_predicate(node: exp.Expression, resolve: Resolver, positive: bool = True) -> Predicate:
    """The predicate for a boolean SQL expression (NOT pushed to the atoms).

    It admits every row the expression does. That is exact except for timestamp
    constants (`SessionTime`), whose comparisons are widened: which way depends on
    whether the atom ends up under an odd number of NOTs (`positive` False)."""
    if isinstance(node, exp.Paren):
        return to_predicate(node.this, resolve, positive)
    if isinstance(node, (exp.And, exp.Or)):
        # a chain of one connective (a OR b OR c ...) in one call, not one level of recursion per link
        combine = conj if isinstance(node, exp.And) else disj
        return combine(*(to_predicate(part, resolve, positive) for part in _chain(node, type(node))))
    if isinstance(node, exp.Not):
        return negate(to_predicate(node.this, resolve, not positive))
    if isinstance(node, exp.Boolean):
        return TRUE if node.this else FALSE
    atom = _atom(node, resolve, positive)
    return atom if atom is not None else _opaque(node, resolve)


def _chain(node: exp.Expression, connective: type) -> list[exp.Expression]:
    """The operands of a chain of `connective` (parentheses seen through), left to right."""
    parts, stack = [], [node]
    while stack:
        item = stack.pop()
        while isinstance(item, exp.Paren):
            item = item.this
        if isinstance(item, connective):
            stack += [item.expression, item.this]
        else:
            parts.append(item)
    return parts


def _column(node: exp.Expression, resolve: Resolver) -> Column | None:
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column):
        found = resolve(node)
        if found is not None:
            ref, col = found
            return qualified(ref, col)
    return None


# Arithmetic a virtual column may hold (`Column.reads`), and the kind Spark gives
# each result: (+, -, *) keep their operands' widest kind, `/` of integers is a double.
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div)
_KIND_ORDER = {"int": 0, "decimal": 1, "float": 2}


def _expression_column(node: exp.Expression, resolve: Resolver) -> Column | None:
    """A virtual column for an arithmetic expression over numeric columns of one
    table reference (`sqrt(power(x1 - x0, 2) + power(y1 - y0, 2))`), or None.

    Only expressions Spark evaluates without wrapping around: every operation is
    on decimals or doubles (an integer `+`, `-`, `*` may overflow, which legacy
    mode wraps), and `/` is written `try_divide` (NULL for a zero divisor, as
    in legacy mode, where ANSI mode would fail the whole query; a NULL never
    satisfies a comparison, so both ways the cut bits stay sound)."""
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, (exp.Column, exp.Literal)) or node.find(exp.Column) is None:
        return None
    refs, reads = set(), set()
    canonical = exp.Paren(this=node.copy())  # a parent, so that a `/` at the top can be replaced too

    def kind(e: exp.Expression) -> str | None:
        if isinstance(e, exp.Paren):
            return kind(e.this)
        if isinstance(e, exp.Column):
            found = resolve(e)
            if found is None or found[1].kind not in _KIND_ORDER:
                return None
            ref, col = found
            refs.add(ref)
            reads.add(f"{ref}.{col.name}")
            _drop_qualifiers(e)
            e.set("this", exp.to_identifier(col.name))  # one text however the query spells the name
            return col.kind
        if isinstance(e, exp.Literal):
            if e.is_string:
                return None
            text = e.this.lower()
            return "float" if "e" in text else "decimal" if "." in text else "int"
        if isinstance(e, (exp.Neg, exp.Abs)):
            inner = kind(e.this)
            return None if inner is None or (inner == "int" and not isinstance(e.this, exp.Literal)) else inner
        if isinstance(e, (exp.Sqrt, exp.Pow)):
            parts = [e.this] + ([e.expression] if isinstance(e, exp.Pow) else [])
            return "float" if all(kind(p) is not None for p in parts) else None
        if isinstance(e, _ARITHMETIC):
            kinds = [kind(e.this), kind(e.expression)]
            if None in kinds:
                return None
            widest = max(kinds, key=_KIND_ORDER.get)
            if isinstance(e, exp.Div):
                e.replace(exp.Anonymous(this="try_divide", expressions=[e.this, e.expression]))
                return "float" if widest == "int" else widest
            return None if widest == "int" else widest
        return None

    result = kind(canonical)
    if result is None or len(refs) != 1:
        return None
    ref = refs.pop()
    sql = canonical.this.sql(dialect="spark", identify=True, copy=False)
    return Column(f"{ref}.{sql}", result, tuple(sorted(reads)))


def _operand(node: exp.Expression, resolve: Resolver) -> Column | None:
    """A stored column, or a virtual column for an arithmetic expression."""
    return _column(node, resolve) or _expression_column(node, resolve)


def _constant(node: exp.Expression, column: Column):
    return coerce(fold(node), column.kind)


def _atom(node: exp.Expression, resolve: Resolver, positive: bool) -> Predicate | None:
    op = _COMPARISONS.get(type(node))
    if op is not None:
        return _comparison(node.this, op, node.expression, resolve, positive)
    if isinstance(node, exp.Between):
        col = _operand(node.this, resolve)
        if col is None:
            return None
        low, high = _constant(node.args["low"], col), _constant(node.args["high"], col)
        if low is NOT_CONSTANT or high is NOT_CONSTANT:
            return None
        if isinstance(low, SessionTime):  # (then high is one too: both were coerced to the column's kind)
            slack = TIME_ZONE_SLACK if positive else -TIME_ZONE_SLACK
            return Between(col, low.wall - slack, high.wall + slack)
        return Between(col, low, high)
    if isinstance(node, exp.In):
        return _in(node, resolve, positive)
    if isinstance(node, exp.Escape) and isinstance(node.this, exp.Like):
        escape = fold(node.expression)
        if not (isinstance(escape, str) and len(escape) == 1):
            return None
        return _like(node.this, resolve, escape)
    if isinstance(node, exp.Like):
        return _like(node, resolve, "\\")
    if isinstance(node, exp.Is) and isinstance(node.expression, exp.Null):
        col = _column(node.this, resolve)
        return IsNull(col) if col is not None else None
    if isinstance(node, exp.Column):
        col = _column(node, resolve)
        if col is not None and col.kind == "bool":
            return Compare(col, "=", True)
    return None


def _comparison(left, op: str, right, resolve: Resolver, positive: bool) -> Predicate | None:
    lcol, rcol = _column(left, resolve), _column(right, resolve)
    if lcol is not None and rcol is not None:
        return ColumnCompare(lcol, op, rcol)
    if lcol is None and rcol is None:  # an expression on one side, a constant on the other?
        lcol = _expression_column(left, resolve)
        rcol = None if lcol is not None else _expression_column(right, resolve)
    if lcol is None and rcol is not None:
        left, right, lcol, op = right, left, rcol, flip(op)
    if lcol is None:
        return None
    value = fold(right)
    if value is None:
        return None  # `x = NULL` is never TRUE, nor is its negation: leave it opaque
    value = coerce(value, lcol.kind)
    if isinstance(value, SessionTime):
        return _session_time_compare(lcol, op, value.wall, positive)
    return None if value is NOT_CONSTANT else Compare(lcol, op, value)


def _session_time_compare(col: Column, op: str, wall, positive: bool) -> Predicate:
    """`col op wall`, wall read in an unknown time zone: widened by TIME_ZONE_SLACK so that
    it admits every row the comparison may (`positive`), or so that its negation does."""
    lo, hi = wall - TIME_ZONE_SLACK, wall + TIME_ZONE_SLACK
    if op in (">", ">="):
        return Compare(col, op, lo if positive else hi)
    if op in ("<", "<="):
        return Compare(col, op, hi if positive else lo)
    within = Between(col, lo, hi)
    if op == "=":
        return within if positive else FALSE  # (NOT of FALSE: every row)
    return TRUE if positive else negate(within)  # <>


def _in(node: exp.In, resolve: Resolver, positive: bool) -> Predicate | None:
    if node.args.get("query") is not None or node.args.get("unnest") is not None:
        return None
    col = _operand(node.this, resolve)
    if col is None:
        return None
    values = []
    has_null = False
    for item in node.expressions:
        raw = fold(item)
        if raw is None:
            has_null = True
            continue
        value = coerce(raw, col.kind)
        if value is NOT_CONSTANT:
            return None
        values.append(value)
    if any(isinstance(v, SessionTime) for v in values):
        if not positive:
            return FALSE  # (NOT of FALSE: every row)
        return disj(*(_session_time_compare(col, "=", v.wall, True) for v in values))
    return InList(col, frozenset(values), False, has_null)


def _like(node: exp.Like, resolve: Resolver, escape: str) -> Predicate | None:
    col = _column(node.this, resolve)
    pattern = fold(node.expression)
    if col is None or col.kind != "string" or not isinstance(pattern, str):
        return None
    like = Like(col, pattern, False, escape)
    return negate(like) if node.args.get("negate") else like


def _opaque(node: exp.Expression, resolve: Resolver) -> Predicate:
    cols: set[str] = set()
    if node.find(exp.Subquery, exp.Exists, exp.Select) is not None:
        cols.add(SUBQUERY_MARK)
    unqualified = node.copy()
    for c in unqualified.find_all(exp.Column):
        found = resolve(c)
        if found is None:
            cols.add(SUBQUERY_MARK)  # a derived table's column or an outer reference we cannot place
        else:
            ref, col = found
            cols.add(f"{ref}.{col.name}")
        _drop_qualifiers(c)
    return Opaque(
        # every identifier quoted, as sqlglot's qualify leaves them: the text names the atom,
        # the same whichever resolved its columns (sql.columns, or qualify)
        unqualified.sql(dialect="spark", identify=True, copy=False),  # already a private copy
        frozenset(cols),
        deterministic=_is_deterministic(node),
    )


def _drop_qualifiers(column: exp.Column) -> None:
    """`t.x` as `x`: an atom's text names it whichever reference it was written on."""
    for part in ("table", "db", "catalog"):
        column.set(part, None)


def _is_deterministic(node: exp.Expression) -> bool:
    for f in node.find_all(exp.Func):
        name = (f.name if isinstance(f, exp.Anonymous) else f.sql_name()).lower()
        if name in NONDETERMINISTIC_FUNCTIONS or isinstance(f, (exp.Rand, exp.Randn)):
            return False
    return True


def project(p: Predicate, ref: str) -> Predicate:
    """What p says about reference `ref` alone, over its plain column names.

    Atoms that touch other references (or subqueries) become TRUE. Since p is
    in negation normal form every atom occurs positively, so this only
    weakens p: every row combination making p TRUE makes the projection TRUE.
    """
    prefix = ref + "."

    def keep(atom: Predicate) -> Predicate:
        cols = atom.columns()
        if not cols or not all(c.startswith(prefix) for c in cols):
            return TRUE
        return _unqualify(atom, prefix)

    return map_atoms(p, keep)


def _unqualify(atom: Predicate, prefix: str) -> Predicate:
    def strip(c: Column) -> Column:
        return Column(c.name[len(prefix):], c.kind, tuple(r[len(prefix):] for r in c.reads))

    if isinstance(atom, ColumnCompare):
        return ColumnCompare(strip(atom.left), atom.op, strip(atom.right))
    if isinstance(atom, Opaque):
        return dataclasses.replace(atom, cols=frozenset(c[len(prefix):] for c in atom.cols))
    return dataclasses.replace(atom, column=strip(atom.column))


def refs_of(p: Predicate) -> frozenset[str]:
    """The references a predicate touches (SUBQUERY_MARK included when present)."""
    out = set()
    for c in p.columns():
        out.add(SUBQUERY_MARK if c == SUBQUERY_MARK else split_qualified(c)[0])
    return frozenset(out)


__all__ = ["to_predicate", "project", "qualified", "split_qualified", "refs_of", "SUBQUERY_MARK", "Const"]
