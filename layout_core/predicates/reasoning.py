"""Sound reasoning over predicates under SQL three-valued logic.

The three questions a router asks:

- `implies(a, b)`: is every row that makes `a` TRUE also one that makes `b`
  TRUE? Then a block where no row satisfies cut `b` can be skipped for query `a`.
- `disjoint(a, b)`: can no row make both TRUE? Then a block where every row
  satisfies cut `b` can be skipped for query `a`.
- `might_match(a, stats)`: can any row of a block with these per-column
  min/max/null counts make `a` TRUE? (zone maps)

Every answer is a proof or "not proven" (False for implies/disjoint, True for
might_match). When in doubt, read the block.

Method: both sides go to DNF/CNF over atoms (with a size limit; past it the
answer is "not proven"). A conjunction of atoms becomes a box: per column the
set of values its atoms allow (an over-approximation); a clause (disjunction
of atoms) is implied by a box when, on one column, the box's set lies inside
what the clause's atoms surely accept (an under-approximation). Atoms the
model cannot interpret count only when syntactically identical.
"""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any, Mapping

from .model import (
    And,
    Between,
    Column,
    ColumnCompare,
    Compare,
    Const,
    FALSE,
    InList,
    IsNull,
    JoinInduced,
    Like,
    Opaque,
    Or,
    Predicate,
    TRUE,
    conj,
    negate,
)
from .valuesets import Interval, ValueSet

# Past this many conjunctions (DNF) or clauses (CNF) we stop and answer "not proven".
EXPANSION_LIMIT = 256

_PY_TYPES = {
    "int": (int,),
    "decimal": (int, Decimal),
    "float": (int, float, Decimal),
    "string": (str,),
    "date": (dt.date,),
    "timestamp": (dt.datetime,),
    "bool": (bool,),
}


def _value_fits(column: Column, v: Any) -> bool:
    """Is v a value we can order against this column's values?"""
    types = _PY_TYPES.get(column.kind)
    if types is None or v is None:
        return False
    if isinstance(v, bool) != (column.kind == "bool"):
        return False
    if column.kind == "date" and type(v) is not dt.date:
        return False
    if isinstance(v, float) and math.isnan(v):
        return False
    return isinstance(v, types)


def _as_kind(column: Column, v: Any) -> Any:
    """v as a value of the column's own type for value sets.

    `_value_fits` lets int literals (and stats) through for decimal and float
    columns, but value sets treat an int as a point of a discrete domain: on a
    decimal column `d > 1` would become `d >= 2` and `d IN (1, 2)` would merge
    into [1, 2], so 1.5 would be lost or gained (unsound implies/might_match).
    As a Decimal the value is not discrete. (The lru_cache of `atom_sets` also
    sees `Compare(d, '>', 1) == Compare(d, '>', Decimal(1))`, so both must give
    the same sets.)
    """
    if column.kind in ("decimal", "float") and type(v) is int:
        return Decimal(v)
    return v


# ---------------------------------------------------------------------------
# LIKE patterns


@dataclass(frozen=True, slots=True)
class LikeShape:
    prefix: str  # literal characters before the first wildcard
    exact: bool  # True when the pattern is exactly prefix (no wildcard)
    prefix_only: bool  # True when the pattern is prefix followed only by '%'


def like_shape(pattern: str, escape: str = "\\") -> LikeShape | None:
    """Split a LIKE pattern as Spark reads it; None when Spark would reject it."""
    prefix: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == escape:
            if i + 1 >= n or pattern[i + 1] not in ("%", "_", escape):
                return None
            prefix.append(pattern[i + 1])
            i += 2
            continue
        if ch in ("%", "_"):
            rest = pattern[i:]
            return LikeShape("".join(prefix), False, set(rest) == {"%"})
        prefix.append(ch)
        i += 1
    return LikeShape("".join(prefix), True, False)


def prefix_interval(prefix: str) -> Interval:
    """All strings that start with prefix, as [prefix, next) in code point order
    (which is Spark's UTF-8 binary order)."""
    if not prefix:
        return Interval(None, None, False, False)
    chars = list(prefix)
    while chars and ord(chars[-1]) == 0x10FFFF:
        chars.pop()
    if not chars:
        return Interval(prefix, None, True, False)
    chars[-1] = chr(ord(chars[-1]) + 1)
    return Interval(prefix, "".join(chars), True, False)


# ---------------------------------------------------------------------------
# Atoms as value sets


@dataclass(frozen=True, slots=True)
class AtomSets:
    column: str
    over: ValueSet  # every value that can make the atom TRUE is in here
    under: ValueSet  # every value in here makes the atom TRUE


@lru_cache(maxsize=65536)
def atom_sets(a: Predicate) -> AtomSets | None:
    """Value sets of a single-column atom, or None for atoms we do not read."""
    if isinstance(a, Compare):
        if not _value_fits(a.column, a.value):
            return None
        s = ValueSet.compare(a.op, _as_kind(a.column, a.value))
        return AtomSets(a.column.name, s, s)
    if isinstance(a, Between):
        if not (_value_fits(a.column, a.low) and _value_fits(a.column, a.high)):
            return None
        s = ValueSet.of([Interval(_as_kind(a.column, a.low), _as_kind(a.column, a.high))])
        if a.negated:
            s = s.complement_non_null()
        return AtomSets(a.column.name, s, s)
    if isinstance(a, InList):
        if not all(_value_fits(a.column, v) for v in a.values):
            return None
        members = ValueSet.points(_as_kind(a.column, v) for v in a.values)
        if not a.negated:
            return AtomSets(a.column.name, members, members)
        if a.has_null:
            # x NOT IN (..., NULL) is FALSE or NULL for every x.
            return AtomSets(a.column.name, ValueSet.empty(), ValueSet.empty())
        if not a.values:
            # Spark 4: `NULL NOT IN ()` is TRUE; older settings say NULL. Stay safe both ways.
            return AtomSets(a.column.name, ValueSet.everything(), ValueSet.non_null())
        s = members.complement_non_null()
        return AtomSets(a.column.name, s, s)
    if isinstance(a, IsNull):
        s = ValueSet.non_null() if a.negated else ValueSet.only_null()
        return AtomSets(a.column.name, s, s)
    if isinstance(a, Like):
        if a.column.kind != "string":
            return None
        shape = like_shape(a.pattern, a.escape)
        if shape is None:
            return None
        if shape.exact:
            exact = ValueSet.points([shape.prefix])
            over = under = exact
        else:
            over = ValueSet.of([prefix_interval(shape.prefix)])
            under = over if shape.prefix_only else ValueSet.empty()
        if a.negated:
            over, under = under.complement_non_null(), over.complement_non_null()
        return AtomSets(a.column.name, over, under)
    return None


def _is_deterministic(a: Predicate) -> bool:
    return not isinstance(a, Opaque) or a.deterministic


# ---------------------------------------------------------------------------
# DNF / CNF with a size limit

Clause = frozenset  # of atoms


@lru_cache(maxsize=16384)
def to_dnf(p: Predicate, limit: int = EXPANSION_LIMIT) -> tuple[Clause, ...] | None:
    """p as an OR of conjunctions of atoms; None past the limit. () means FALSE."""
    if isinstance(p, Const):
        return (frozenset(),) if p.value else ()
    if isinstance(p, Or):
        out: list[Clause] = []
        for c in p.children:
            sub = to_dnf(c, limit)
            if sub is None:
                return None
            out.extend(sub)
            if len(out) > limit:
                return None
        return tuple(dict.fromkeys(out))
    if isinstance(p, And):
        acc: list[Clause] = [frozenset()]
        for c in p.children:
            sub = to_dnf(c, limit)
            if sub is None or len(acc) * len(sub) > limit:
                return None
            acc = [a | b for a in acc for b in sub]
        return tuple(dict.fromkeys(acc))
    return (frozenset([p]),)


@lru_cache(maxsize=16384)
def to_cnf(p: Predicate, limit: int = EXPANSION_LIMIT) -> tuple[Clause, ...] | None:
    """p as an AND of disjunctions of atoms; None past the limit. () means TRUE."""
    if isinstance(p, Const):
        return () if p.value else (frozenset(),)
    if isinstance(p, And):
        out: list[Clause] = []
        for c in p.children:
            sub = to_cnf(c, limit)
            if sub is None:
                return None
            out.extend(sub)
            if len(out) > limit:
                return None
        return tuple(dict.fromkeys(out))
    if isinstance(p, Or):
        acc: list[Clause] = [frozenset()]
        for c in p.children:
            sub = to_cnf(c, limit)
            if sub is None or len(acc) * len(sub) > limit:
                return None
            acc = [a | b for a in acc for b in sub]
        return tuple(dict.fromkeys(acc))
    return (frozenset([p]),)


# ---------------------------------------------------------------------------
# Boxes: what a conjunction of atoms allows


@dataclass
class Box:
    sets: dict[str, ValueSet] = field(default_factory=dict)
    atoms: frozenset = frozenset()
    # Join-induced atoms grouped by induction path: sources of the positive
    # ones, sources of the negated ones.
    induced: dict[tuple, list[Predicate]] = field(default_factory=dict)
    induced_not: dict[tuple, list[Predicate]] = field(default_factory=dict)
    column_compares: list[ColumnCompare] = field(default_factory=list)

    def get(self, column: str) -> ValueSet:
        return self.sets.get(column, _EVERYTHING)


_EVERYTHING = ValueSet.everything()


@lru_cache(maxsize=16384)
def box_of(conjunction: Clause) -> Box | None:
    """The box of a conjunction of atoms, or None when it is unsatisfiable."""
    box = Box(atoms=conjunction)
    for a in conjunction:
        if not _is_deterministic(a):
            continue
        if isinstance(a, JoinInduced):
            target = box.induced_not if a.negated else box.induced
            target.setdefault(a.hops, []).append(a.source)
            continue
        if isinstance(a, ColumnCompare):
            box.column_compares.append(a)
        if negate(a) in conjunction:
            return None  # P AND NOT P is never TRUE, even when P is NULL
        sets = atom_sets(a)
        if sets is not None:
            narrowed = box.get(sets.column).intersect(sets.over)
            if narrowed.is_empty():
                return None
            box.sets[sets.column] = narrowed
    for cc in box.column_compares:
        if _compare_never_true(cc.op, box.get(cc.left.name), box.get(cc.right.name)):
            return None
    for hops, sources in box.induced.items():
        if not satisfiable(conj(sources)):
            return None
        for negated_source in box.induced_not.get(hops, ()):
            # The (unique) source row must satisfy the sources but not negated_source.
            if implies(conj(sources), negated_source):
                return None
    return box


def _bounds(s: ValueSet):
    """(lo, lo_closed, hi, hi_closed) of the non-null part, None if unbounded/empty."""
    if not s.intervals:
        return None
    first, last = s.intervals[0], s.intervals[-1]
    return first.lo, first.lo_closed, last.hi, last.hi_closed


def _compare_never_true(op: str, left: ValueSet, right: ValueSet) -> bool:
    """Can no pair (l, r) from the sets satisfy `l op r`?"""
    if not left.intervals or not right.intervals:
        return True  # only NULLs on one side: the comparison is never TRUE
    return _compare_always(_NEG[op], left, right, allow_null=True)


_NEG = {"=": "<>", "<>": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}


def _compare_always(op: str, left: ValueSet, right: ValueSet, allow_null: bool = False) -> bool:
    """Does every pair of non-null values satisfy `l op r`? (and, unless
    allow_null, are both sides free of NULL so the comparison is TRUE, not NULL)"""
    if not allow_null and (left.null or right.null):
        return False
    lb, rb = _bounds(left), _bounds(right)
    if lb is None or rb is None:
        return allow_null
    llo, llc, lhi, lhc = lb
    rlo, rlc, rhi, rhc = rb
    try:
        if op in ("<", "<="):
            if lhi is None or rlo is None:
                return False
            return lhi < rlo or (lhi == rlo and (op == "<=" or not (lhc and rlc)))
        if op in (">", ">="):
            if llo is None or rhi is None:
                return False
            return llo > rhi or (llo == rhi and (op == ">=" or not (llc and rhc)))
        if op == "=":
            return (
                llo is not None and llo == lhi == rlo == rhi and llc and lhc and rlc and rhc
            )
        if op == "<>":
            return left.intersect(right).intervals == ()
    except TypeError:
        return False
    return False


# ---------------------------------------------------------------------------
# The three questions


def satisfiable(p: Predicate) -> bool:
    """False only when p is provably never TRUE."""
    dnf = to_dnf(p)
    if dnf is None:
        return True
    return any(box_of(c) is not None for c in dnf)


def disjoint(a: Predicate, b: Predicate) -> bool:
    """True only when no row can make both a and b TRUE."""
    return not satisfiable(conj(a, b))


def implies(a: Predicate, b: Predicate) -> bool:
    """True only when every row that makes a TRUE also makes b TRUE."""
    if a == b and all(_is_deterministic(x) for x in _atoms_of(a)):
        return True
    if b == TRUE or a == FALSE:
        return True
    dnf_a = to_dnf(a)
    cnf_b = to_cnf(b)
    if dnf_a is None or cnf_b is None:
        return False
    for conjunction in dnf_a:
        box = box_of(conjunction)
        if box is None:
            continue  # this branch of a is never TRUE
        for clause in cnf_b:
            if not _box_implies_clause(box, clause):
                return False
    return True


class Prepared:
    """One predicate expanded once, to relate to many others: the router asks
    whether a query implies, or is disjoint with, each cut of a layout.

    `implies(b)` and `disjoint(b)` give exactly the answers of the functions of
    the same name; they only skip re-deriving this predicate's DNF and boxes
    for every b (and, for an atom b, building conj(predicate, b) at all).
    """

    __slots__ = ("predicate", "dnf", "boxes")

    def __init__(self, predicate: Predicate):
        self.predicate = predicate
        self.dnf = to_dnf(predicate)
        # Boxes of the satisfiable conjunctions (the others can never be TRUE).
        self.boxes = tuple(b for c in self.dnf or () if (b := box_of(c)) is not None)

    def implies(self, b: Predicate) -> bool:
        a = self.predicate
        if a == b and all(_is_deterministic(x) for x in _atoms_of(a)):
            return True
        if b == TRUE or a == FALSE:
            return True
        cnf_b = to_cnf(b)
        if self.dnf is None or cnf_b is None:
            return False
        return all(_box_implies_clause(box, clause) for box in self.boxes for clause in cnf_b)

    def disjoint(self, b: Predicate) -> bool:
        if isinstance(b, (And, Or, Const)):
            return disjoint(self.predicate, b)
        # An atom b adds a factor of one to the DNF of conj(predicate, b): its
        # conjunctions are exactly c | {b} for the conjunctions c of ours, and
        # it exceeds the expansion limit exactly when ours does.
        if self.dnf is None:
            return False
        return all(box_of(c | {b}) is None for c in self.dnf)


def _atoms_of(p: Predicate):
    if isinstance(p, (And, Or)):
        for c in p.children:
            yield from _atoms_of(c)
    elif not isinstance(p, Const):
        yield p


def _box_implies_clause(box: Box, clause: Clause) -> bool:
    if not clause:
        return False  # the empty clause is FALSE
    accepted: dict[str, ValueSet] = {}
    for atom in clause:
        if atom in box.atoms and _is_deterministic(atom):
            return True
        sets = atom_sets(atom)
        if sets is not None:
            seen = accepted.get(sets.column)
            # (most clauses have one atom per column: no union to build)
            accepted[sets.column] = sets.under if seen is None else seen.union(sets.under)
        elif isinstance(atom, JoinInduced) and _box_implies_induced(box, atom):
            return True
        elif isinstance(atom, ColumnCompare) and _compare_always(
            atom.op, box.get(atom.left.name), box.get(atom.right.name)
        ):
            return True
    return any(box.get(col).issubset(ok) for col, ok in accepted.items())


def _box_implies_induced(box: Box, atom: JoinInduced) -> bool:
    sources = box.induced.get(atom.hops)
    if not atom.negated:
        return bool(sources) and implies(conj(sources), atom.source)
    if sources and disjoint(conj(sources), atom.source):
        return True
    # NOT JI(s_c) implies NOT JI(s) when JI(s) implies JI(s_c).
    return any(implies(atom.source, s_c) for s_c in box.induced_not.get(atom.hops, ()))


# ---------------------------------------------------------------------------
# Zone maps


@dataclass(frozen=True, slots=True)
class ColumnStats:
    """What a block's metadata says of one column."""

    min: Any
    max: Any
    null_count: int
    row_count: int

    def value_set(self, column: Column) -> ValueSet:
        has_values = self.row_count > self.null_count
        if has_values and (
            self.min is None
            or self.max is None
            or not _value_fits(column, self.min)
            or not _value_fits(column, self.max)
        ):
            return ValueSet.everything()  # unknown or unusable bounds (NaN, other types)
        lo, hi = _as_kind(column, self.min), _as_kind(column, self.max)
        intervals = [Interval(lo, hi)] if has_values else []
        return ValueSet.of(intervals, self.null_count > 0)


def might_match(p: Predicate, stats: Mapping[str, ColumnStats], row_count: int | None = None) -> bool:
    """False only when no row of a block with these stats can make p TRUE."""
    if row_count == 0:
        return False
    return _might(p, stats)


def _might(p: Predicate, stats: Mapping[str, ColumnStats]) -> bool:
    if isinstance(p, Const):
        return p.value
    if isinstance(p, And):
        return all(_might(c, stats) for c in p.children)
    if isinstance(p, Or):
        return any(_might(c, stats) for c in p.children)
    sets = atom_sets(p)
    if sets is not None:
        s = stats.get(sets.column)
        if s is None:
            return True
        return not sets.over.isdisjoint(s.value_set(_column_of(p)))
    if isinstance(p, ColumnCompare):
        ls, rs = stats.get(p.left.name), stats.get(p.right.name)
        if ls is None or rs is None:
            return True
        return not _compare_never_true(p.op, ls.value_set(p.left), rs.value_set(p.right))
    return True


def _column_of(a: Predicate) -> Column:
    return a.column  # every single-column atom has one


# ---------------------------------------------------------------------------
# NULL rejection


def can_be_true_on_nulls(p: Predicate) -> bool:
    """Could p be TRUE on a row whose columns are all NULL? (unknown -> True)

    A WHERE conjunct on the NULL-supplying side of an outer join filters that
    side's rows only when this is False.
    """
    if isinstance(p, Const):
        return p.value
    if isinstance(p, And):
        return all(can_be_true_on_nulls(c) for c in p.children)
    if isinstance(p, Or):
        return any(can_be_true_on_nulls(c) for c in p.children)
    if isinstance(p, JoinInduced):
        return p.negated
    sets = atom_sets(p)
    if sets is not None:
        return sets.over.null
    if isinstance(p, ColumnCompare):
        return False
    return True
