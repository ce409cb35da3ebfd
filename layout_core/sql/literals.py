"""Constant expressions of a query as Python values, the way Spark evaluates them.

`fold(expr)` evaluates literal arithmetic (`0.06 - 0.01`, `date '1995-01-01'
+ interval '3' month`) and returns `NOT_CONSTANT` for anything else.
`coerce(value, kind)` converts a constant to a column's type as Spark's
comparison would (a string compared with a date column is read as a date), or
returns `NOT_CONSTANT` when the comparison would not be on that column's
values (then the predicate stays opaque and is never used to skip). A
constant compared with a timestamp column becomes a `SessionTime`: Spark
reads it in the session's time zone, which the router does not know.
"""

from __future__ import annotations

import calendar
import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from sqlglot import exp


class _NotConstant:
    def __repr__(self) -> str:
        return "NOT_CONSTANT"


NOT_CONSTANT = _NotConstant()

# How far a wall-clock time read in an unknown time zone may be from the same wall
# time read in another (UTC-12:00 to UTC+14:00).
TIME_ZONE_SLACK = dt.timedelta(hours=26)


@dataclass(frozen=True)
class SessionTime:
    """A constant compared with a timestamp column: a wall-clock time that Spark reads
    in the session's time zone (`TIMESTAMP '2024-01-01 08:00'`, a string, a date). Block
    statistics are wall times of the time zone they were collected in, and cut flags of
    the session that laid the blocks out, so the constant stands for every wall time
    within TIME_ZONE_SLACK of `wall` (`sql.convert` widens the comparison by it)."""

    wall: dt.datetime


_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_INT = re.compile(r"^[+-]?\d+$")
_DECIMAL = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)$")


def add_months(d: dt.date, months: int) -> dt.date:
    """Spark's date + interval 'n' month: the day clamps to the month's last day."""
    index = d.year * 12 + (d.month - 1) + months
    year, month = divmod(index, 12)
    last = calendar.monthrange(year, month + 1)[1]
    return dt.date(year, month + 1, min(d.day, last))


def _number(text: str):
    if _INT.match(text):
        return int(text)
    if _DECIMAL.match(text):
        return Decimal(text)
    try:
        return float(text)  # exponent notation is a DOUBLE literal in Spark
    except ValueError:
        return NOT_CONSTANT


def _interval(node: exp.Interval):
    """(months, days) of a literal interval, or NOT_CONSTANT."""
    unit = node.args.get("unit")
    amount = fold(node.this)
    if unit is None or isinstance(amount, _NotConstant):
        return NOT_CONSTANT
    if isinstance(amount, str):
        amount = _number(amount.strip())
    if type(amount) is not int:
        return NOT_CONSTANT
    name = unit.name.upper().rstrip("S")
    if name == "YEAR":
        return (12 * amount, 0)
    if name == "MONTH":
        return (amount, 0)
    if name == "WEEK":
        return (0, 7 * amount)
    if name == "DAY":
        return (0, amount)
    return NOT_CONSTANT


def _cast(value, to: exp.DataType):
    if isinstance(value, _NotConstant) or value is None:
        return value if value is None else NOT_CONSTANT
    target = to.this
    T = exp.DataType.Type
    if target == T.DATE:
        if isinstance(value, str) and _ISO_DATE.match(value.strip()):
            try:
                return dt.date.fromisoformat(value.strip())
            except ValueError:
                return NOT_CONSTANT
        return value if type(value) is dt.date else NOT_CONSTANT
    if target in (T.TIMESTAMP, T.TIMESTAMPNTZ, T.TIMESTAMPTZ, T.TIMESTAMPLTZ):
        if isinstance(value, str):
            try:
                return dt.datetime.fromisoformat(value.strip())
            except ValueError:
                return NOT_CONSTANT
        if type(value) is dt.date:
            return dt.datetime(value.year, value.month, value.day)
        return value if isinstance(value, dt.datetime) else NOT_CONSTANT
    if target in (T.INT, T.BIGINT, T.SMALLINT, T.TINYINT):
        if isinstance(value, str) and _INT.match(value.strip()):
            return int(value)
        return value if type(value) is int else NOT_CONSTANT
    if target == T.DECIMAL:
        if isinstance(value, (int, Decimal)) and not isinstance(value, bool):
            return Decimal(value)
        if isinstance(value, str) and _DECIMAL.match(value.strip()):
            return Decimal(value.strip())
        return NOT_CONSTANT
    if target in (T.VARCHAR, T.TEXT, T.CHAR) and isinstance(value, str):
        return value
    return NOT_CONSTANT


def fold(node: exp.Expression):
    """The constant value of node, or NOT_CONSTANT."""
    if isinstance(node, exp.Paren):
        return fold(node.this)
    if isinstance(node, exp.Null):
        return None
    if isinstance(node, exp.Boolean):
        return bool(node.this)
    if isinstance(node, exp.Literal):
        return str(node.this) if node.is_string else _number(str(node.this))
    if isinstance(node, exp.Neg):
        v = fold(node.this)
        if isinstance(v, (int, Decimal, float)) and not isinstance(v, bool):
            return -v
        return NOT_CONSTANT
    if isinstance(node, exp.Cast) and not isinstance(node, exp.TryCast):
        return _cast(fold(node.this), node.to)
    if isinstance(node, (exp.Add, exp.Sub)):
        return _add_or_sub(node)
    if isinstance(node, exp.Mul):
        a, b = fold(node.this), fold(node.expression)
        if _is_number(a) and _is_number(b) and not (isinstance(a, float) or isinstance(b, float)):
            return a * b
        return NOT_CONSTANT
    return NOT_CONSTANT


def _is_number(v) -> bool:
    return isinstance(v, (int, Decimal, float)) and not isinstance(v, bool)


def _add_or_sub(node: exp.Expression):
    sign = 1 if isinstance(node, exp.Add) else -1
    left, right = node.this, node.expression
    if isinstance(right, exp.Interval) or isinstance(left, exp.Interval):
        if isinstance(left, exp.Interval):  # interval + date
            if sign < 0:
                return NOT_CONSTANT
            left, right = right, left
        base, shift = fold(left), _interval(right)
        if type(base) is not dt.date or isinstance(shift, _NotConstant):
            return NOT_CONSTANT
        months, days = shift
        try:
            return add_months(base, sign * months) + dt.timedelta(days=sign * days)
        except (ValueError, OverflowError):
            return NOT_CONSTANT
    a, b = fold(left), fold(right)
    if _is_number(a) and _is_number(b) and not (isinstance(a, float) or isinstance(b, float)):
        return a + sign * b
    return NOT_CONSTANT


def coerce(value, kind: str):
    """value as the column kind's Python type for a Spark comparison, or NOT_CONSTANT."""
    if value is None or isinstance(value, _NotConstant):
        return NOT_CONSTANT
    if kind == "int":
        if type(value) is int:
            return value
        if isinstance(value, Decimal) and value == value.to_integral_value():
            return int(value)
        return _parse_text(value, int, _INT)
    if kind == "decimal":
        if type(value) is int:
            return Decimal(value)
        if isinstance(value, Decimal):
            return value
        return _parse_text(value, Decimal, _DECIMAL)
    if kind == "float":
        if _is_number(value):
            return float(value)
        return NOT_CONSTANT
    if kind == "string":
        return value if isinstance(value, str) else NOT_CONSTANT
    if kind == "date":
        if type(value) is dt.date:
            return value
        return _parse_text(value, dt.date.fromisoformat, _ISO_DATE)
    if kind == "timestamp":
        if type(value) is dt.date:
            value = dt.datetime(value.year, value.month, value.day)
        elif not isinstance(value, dt.datetime):
            value = _parse_text(value, dt.datetime.fromisoformat)
        if isinstance(value, _NotConstant):
            return value
        if value.tzinfo is not None:  # an instant: its UTC wall time is within the slack too
            value = value.astimezone(dt.timezone.utc).replace(tzinfo=None)
        return SessionTime(value)
    if kind == "bool":
        return value if isinstance(value, bool) else NOT_CONSTANT
    return NOT_CONSTANT


def _parse_text(value, parse, pattern: re.Pattern | None = None):
    """parse(the stripped text) of a string value that matches `pattern` (when
    given); NOT_CONSTANT for anything else and for text `parse` refuses."""
    if not isinstance(value, str) or (pattern is not None and not pattern.match(value.strip())):
        return NOT_CONSTANT
    try:
        return parse(value.strip())
    except (ValueError, InvalidOperation):
        return NOT_CONSTANT
