"""A brute-force SQL three-valued-logic evaluator for `layout_core.predicates`.

Written from Spark SQL semantics, independently of the reasoning code (only the
model's dataclasses are imported): `evaluate(p, row)` returns True, False or
None (NULL / UNKNOWN) for one row, a dict from column name to a Python value
(None is SQL NULL).

Semantics implemented:

- comparisons with a NULL operand are NULL; values compare as Python values
  (Decimal against int exactly, dates by day, strings by code point, which is
  Spark's UTF-8 binary order);
- `x BETWEEN lo AND hi` is `x >= lo AND x <= hi` (not symmetric: lo > hi is
  never TRUE), NOT BETWEEN its 3VL negation;
- `x IN (v1, ..., [NULL])`: TRUE if x equals a listed value, else NULL if x
  or a listed item is NULL, else FALSE. Spark 4 reads an empty list as FALSE
  for every x (`legacy_empty_in=True` gives the older NULL for a NULL x).
  NOT IN is the 3VL negation, so NOT IN with a NULL in the list is never TRUE;
- `x LIKE pattern [ESCAPE e]`: `%` any run of characters, `_` exactly one,
  the escape character before `%`, `_` or itself makes it literal; any other
  use of the escape character is an error in Spark (ValueError here);
- IS [NOT] NULL is never NULL;
- AND: FALSE if any FALSE, else NULL if any NULL, else TRUE; OR dually.

`Opaque` atoms have no meaning of their own: pass `opaque`, a function
(atom, row) -> True/False/None giving the value of the expression `atom.sql`
(the evaluator applies `negated` itself); without it they raise.
`JoinInduced` needs other tables and always raises.

`compile_predicate(p, ...)` gives the same function of a row as a closure,
for checking one predicate against thousands of rows; `evaluate` is the
plain recursive definition it is tested against.
"""

from __future__ import annotations

import operator
import re
from functools import lru_cache
from typing import Any, Callable, Mapping, Optional

from layout_core.predicates.model import (
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

TV = Optional[bool]  # a three-valued truth value


class Unevaluable(Exception):
    """The evaluator cannot give this atom a value."""


def not3(v: TV) -> TV:
    return None if v is None else not v


def and3(values) -> TV:
    saw_null = False
    for v in values:
        if v is False:
            return False
        if v is None:
            saw_null = True
    return None if saw_null else True


def or3(values) -> TV:
    saw_null = False
    for v in values:
        if v is True:
            return True
        if v is None:
            saw_null = True
    return None if saw_null else False


def compare3(op: str, left: Any, right: Any) -> TV:
    if left is None or right is None:
        return None
    if op == "=":
        return left == right
    if op == "<>":
        return left != right
    if op == "<":
        return left < right
    if op == "<=":
        return left <= right
    if op == ">":
        return left > right
    if op == ">=":
        return left >= right
    raise ValueError(f"unknown comparison {op!r}")


@lru_cache(maxsize=4096)
def like_regex(pattern: str, escape: str) -> re.Pattern:
    """The regular expression Spark builds for a LIKE pattern."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == escape:
            if i + 1 >= n:
                raise ValueError(f"LIKE pattern {pattern!r} ends with the escape character")
            nxt = pattern[i + 1]
            if nxt not in ("%", "_", escape):
                raise ValueError(f"LIKE pattern {pattern!r}: escape before {nxt!r}")
            out.append(re.escape(nxt))
            i += 2
            continue
        if ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
        i += 1
    return re.compile("".join(out), re.DOTALL)


def like3(value: Any, pattern: Any, escape: str) -> TV:
    if value is None or pattern is None:
        return None
    return like_regex(pattern, escape).fullmatch(value) is not None


def in3(value: Any, values, has_null: bool, legacy_empty_in: bool = False) -> TV:
    if not values and not has_null and not legacy_empty_in:
        return False  # Spark 4: `x IN ()` is FALSE, even for a NULL x
    if value is None:
        return None
    if any(value == v for v in values):
        return True
    return None if has_null else False


OpaqueFn = Callable[[Opaque, Mapping[str, Any]], TV]


def evaluate(
    p: Predicate,
    row: Mapping[str, Any],
    opaque: OpaqueFn | None = None,
    legacy_empty_in: bool = False,
) -> TV:
    """p's three-valued truth value on one row."""
    if isinstance(p, Const):
        return bool(p.value)
    if isinstance(p, And):
        return and3([evaluate(c, row, opaque, legacy_empty_in) for c in p.children])
    if isinstance(p, Or):
        return or3([evaluate(c, row, opaque, legacy_empty_in) for c in p.children])
    if isinstance(p, Compare):
        return compare3(p.op, row[p.column.name], p.value)
    if isinstance(p, Between):
        x = row[p.column.name]
        v = and3([compare3(">=", x, p.low), compare3("<=", x, p.high)])
        return not3(v) if p.negated else v
    if isinstance(p, InList):
        v = in3(row[p.column.name], p.values, p.has_null, legacy_empty_in)
        return not3(v) if p.negated else v
    if isinstance(p, Like):
        v = like3(row[p.column.name], p.pattern, p.escape)
        return not3(v) if p.negated else v
    if isinstance(p, IsNull):
        is_null = row[p.column.name] is None
        return (not is_null) if p.negated else is_null
    if isinstance(p, ColumnCompare):
        return compare3(p.op, row[p.left.name], row[p.right.name])
    if isinstance(p, Opaque):
        if opaque is None:
            raise Unevaluable(f"no meaning given to {p.sql!r}")
        v = opaque(p, row)  # the value of the expression itself, before NOT
        return not3(v) if p.negated else v
    if isinstance(p, JoinInduced):
        raise Unevaluable("join-induced predicates need the other tables")
    raise TypeError(f"not a predicate: {p!r}")


_OPS = {
    "=": operator.eq, "<>": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


def compile_predicate(
    p: Predicate, opaque: OpaqueFn | None = None, legacy_empty_in: bool = False
) -> Callable[[Mapping[str, Any]], TV]:
    """`lambda row: evaluate(p, row, opaque, legacy_empty_in)`, but faster."""

    def neg(fn, negated):
        if not negated:
            return fn
        return lambda row: (lambda v: None if v is None else not v)(fn(row))

    if isinstance(p, Const):
        value = bool(p.value)
        return lambda row: value
    if isinstance(p, (And, Or)):
        fns = [compile_predicate(c, opaque, legacy_empty_in) for c in p.children]
        stop = isinstance(p, Or)  # the value that decides: TRUE for OR, FALSE for AND

        def junction(row):
            saw_null = False
            for fn in fns:
                v = fn(row)
                if v is stop:
                    return stop
                if v is None:
                    saw_null = True
            return None if saw_null else not stop

        return junction
    if isinstance(p, Compare):
        name, op, value = p.column.name, _OPS[p.op], p.value
        if value is None:
            return lambda row: None
        return lambda row: None if (x := row[name]) is None else op(x, value)
    if isinstance(p, Between):
        name, low, high = p.column.name, p.low, p.high
        return neg(lambda row: and3([compare3(">=", row[name], low), compare3("<=", row[name], high)]),
                   p.negated)
    if isinstance(p, InList):
        name, values, has_null = p.column.name, p.values, p.has_null
        return neg(lambda row: in3(row[name], values, has_null, legacy_empty_in), p.negated)
    if isinstance(p, Like):
        name, regex = p.column.name, like_regex(p.pattern, p.escape)
        return neg(lambda row: None if (x := row[name]) is None else regex.fullmatch(x) is not None,
                   p.negated)
    if isinstance(p, IsNull):
        name, negated = p.column.name, p.negated
        return lambda row: (row[name] is None) != negated
    if isinstance(p, ColumnCompare):
        left, op, right = p.left.name, _OPS[p.op], p.right.name
        return lambda row: (
            None if (x := row[left]) is None or (y := row[right]) is None else op(x, y)
        )
    if isinstance(p, (Opaque, JoinInduced)):
        return lambda row: evaluate(p, row, opaque, legacy_empty_in)
    raise TypeError(f"not a predicate: {p!r}")
