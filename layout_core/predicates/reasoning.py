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
from types import MappingProxyType
from typing import Any, Mapping

from layout_core.predicates.model import (
    FALSE, TRUE, And, Between, Column, ColumnCompare, Compare, Const, InList, IsNull, JoinInduced,
    Like, Opaque, Or, Predicate, PredicateVisitor, atoms, conj, negate,
)
from layout_core.predicates.valuesets import Interval, ValueSet

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


def value_fits(column: Column, v: Any) -> bool:
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


def as_kind(column: Column, v: Any) -> Any:
    """v as a value of the column's own type for value sets.

    `value_fits` lets int literals (and stats) through for decimal and float
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


class _AtomSets(PredicateVisitor["AtomSets | None"]):
    """Value sets of the single-column atoms; None for every other predicate."""

    def compare(self, a: Compare) -> AtomSets | None:
        if not value_fits(a.column, a.value):
            return None
        s = ValueSet.compare(a.op, as_kind(a.column, a.value))
        return AtomSets(a.column.name, s, s)

    def between(self, a: Between) -> AtomSets | None:
        if not (value_fits(a.column, a.low) and value_fits(a.column, a.high)):
            return None
        s = ValueSet.of([Interval(as_kind(a.column, a.low), as_kind(a.column, a.high))])
        if a.negated:
            s = s.complement_non_null()
        return AtomSets(a.column.name, s, s)

    def in_list(self, a: InList) -> AtomSets | None:
        if not all(value_fits(a.column, v) for v in a.values):
            return None
        members = ValueSet.points(as_kind(a.column, v) for v in a.values)
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

    def is_null(self, a: IsNull) -> AtomSets:
        s = ValueSet.non_null() if a.negated else ValueSet.only_null()
        return AtomSets(a.column.name, s, s)

    def like(self, a: Like) -> AtomSets | None:
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

    def default(self, a: Predicate) -> None:
        return None


_ATOM_SETS = _AtomSets()


@lru_cache(maxsize=65536)
def atom_sets(a: Predicate) -> AtomSets | None:
    """Value sets of a single-column atom, or None for atoms we do not read."""
    return _ATOM_SETS(a)


def _is_deterministic(a: Predicate) -> bool:
    return not isinstance(a, Opaque) or a.deterministic


# ---------------------------------------------------------------------------
# DNF / CNF with a size limit

Clause = frozenset  # of atoms


def to_dnf(p: Predicate, limit: int = EXPANSION_LIMIT) -> tuple[Clause, ...] | None:
    """p as an OR of conjunctions of atoms; None past the limit. () means FALSE."""
    return _expand(p, limit, Or)


def to_cnf(p: Predicate, limit: int = EXPANSION_LIMIT) -> tuple[Clause, ...] | None:
    """p as an AND of disjunctions of atoms; None past the limit. () means TRUE."""
    return _expand(p, limit, And)


@lru_cache(maxsize=32768)
def _expand(p: Predicate, limit: int, outer: type) -> tuple[Clause, ...] | None:
    """p as an `outer` (Or for DNF, And for CNF) of clauses, each a set of atoms
    joined by the other connective; None past the limit."""
    if isinstance(p, Const):
        # TRUE is no clause in CNF (an empty AND) and one empty clause in DNF; FALSE the reverse.
        return () if p.value == (outer is And) else (frozenset(),)
    if isinstance(p, outer):
        out: list[Clause] = []
        for c in p.children:
            sub = _expand(c, limit, outer)
            if sub is None:
                return None
            out.extend(sub)
            if len(out) > limit:
                return None
        return tuple(dict.fromkeys(out))
    if isinstance(p, (And, Or)):  # the inner connective: every choice of one clause per child
        acc: list[Clause] = [frozenset()]
        for c in p.children:
            sub = _expand(c, limit, outer)
            if sub is None or len(acc) * len(sub) > limit:
                return None
            acc = [a | b for a in acc for b in sub]
        return tuple(dict.fromkeys(acc))
    return (frozenset([p]),)


# ---------------------------------------------------------------------------
# Boxes: what a conjunction of atoms allows


@dataclass(frozen=True)
class Box:
    """What a satisfiable conjunction of atoms allows (read-only: `box_of` caches it)."""

    sets: Mapping[str, ValueSet]  # per column, the values its atoms allow
    atoms: frozenset
    # Join-induced atoms grouped by induction path: sources of the positive
    # ones, sources of the negated ones.
    induced: Mapping[tuple, tuple[Predicate, ...]]
    induced_not: Mapping[tuple, tuple[Predicate, ...]]
    column_compares: tuple[ColumnCompare, ...]
    # what Prepared asks of a box again and again (boxes are cached, so are these):
    # `negations`, per induction path `sources_of`, per atom `excludes`
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def get(self, column: str) -> ValueSet:
        return self.sets.get(column, _EVERYTHING)

    @property
    def negations(self) -> frozenset:
        """The negations of the atoms box_of checks for P AND NOT P (deterministic, not join-induced)."""
        if "negations" not in self._cache:
            self._cache["negations"] = frozenset(negate(a) for a in self.atoms
                                                 if _is_deterministic(a) and not isinstance(a, JoinInduced))
        return self._cache["negations"]

    def excludes(self, b: Predicate, sets: "AtomSets | None") -> bool:
        """Is box_of(self.atoms | {b}) None? b: a join-induced atom (`sets` None) or a
        deterministic single-column one (`sets`: its atom_sets). Remembered for up to
        _BOX_ANSWERS atoms b: boxes are cached by their conjunction, so a query routed
        again asks its boxes about the same cuts."""
        key = ("excludes", b)
        found = self._cache.get(key)
        if found is None:
            found = _excludes_induced(self, b) if sets is None else _excludes(self, b, sets)
            if len(self._cache) < _BOX_ANSWERS:
                self._cache[key] = found
        return found

    def sources_of(self, hops: tuple) -> "Prepared | None":
        """The conjunction of the positive join-induced sources on `hops`, prepared (None: none)."""
        if hops not in self._cache:
            sources = self.induced.get(hops)
            self._cache[hops] = prepared(conj(sources)) if sources else None
        return self._cache[hops]


_EVERYTHING = ValueSet.everything()
# answers a box remembers (the cuts of one layout that share a column with it, mostly
# far fewer): with box_of's 16,384 boxes, at most about 4 million small entries
_BOX_ANSWERS = 256


@lru_cache(maxsize=16384)
def box_of(conjunction: Clause) -> Box | None:
    """The box of a conjunction of atoms, or None when it is unsatisfiable."""
    sets: dict[str, ValueSet] = {}
    induced: dict[tuple, list[Predicate]] = {}
    induced_not: dict[tuple, list[Predicate]] = {}
    column_compares: list[ColumnCompare] = []
    for a in conjunction:
        if not _is_deterministic(a):
            continue
        if isinstance(a, JoinInduced):
            target = induced_not if a.negated else induced
            target.setdefault(a.hops, []).append(a.source)
            continue
        if isinstance(a, ColumnCompare):
            column_compares.append(a)
        if negate(a) in conjunction:
            return None  # P AND NOT P is never TRUE, even when P is NULL
        found = atom_sets(a)
        if found is not None:
            narrowed = sets.get(found.column, _EVERYTHING).intersect(found.over)
            if narrowed.is_empty():
                return None
            sets[found.column] = narrowed
    box = Box(MappingProxyType(sets), conjunction, _frozen(induced), _frozen(induced_not), tuple(column_compares))
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


def _frozen(groups: dict[tuple, list[Predicate]]) -> Mapping[tuple, tuple[Predicate, ...]]:
    return MappingProxyType({k: tuple(v) for k, v in groups.items()})


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
    if a == b and all(_is_deterministic(x) for x in atoms(a)):
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

    __slots__ = ("predicate", "dnf", "boxes", "_implied")

    def __init__(self, predicate: Predicate, remember: bool = False):
        self.predicate = predicate
        self.dnf = to_dnf(predicate)
        # Boxes of the satisfiable conjunctions (the others can never be TRUE).
        self.boxes = tuple(b for c in self.dnf or () if (b := box_of(c)) is not None)
        self._implied: dict[Predicate, bool] | None = {} if remember else None

    def implies(self, b: Predicate) -> bool:
        """As `implies(self.predicate, b)`; with `remember` (`prepared`) the answers are kept
        (up to _BOX_ANSWERS): a join-induced cut asks a query's dimension filter about its own
        source, and dimension filters recur across queries (the same year, the same region)."""
        if self._implied is None:
            return self._implies(b)
        found = self._implied.get(b)
        if found is None:
            found = self._implies(b)
            if len(self._implied) < _BOX_ANSWERS:
                self._implied[b] = found
        return found

    def _implies(self, b: Predicate) -> bool:
        a = self.predicate
        if not isinstance(b, (And, Or, Const)):  # an atom (most cuts): its CNF is the one clause {b}
            if a == b and _is_deterministic(b):
                return True
            if self.dnf is None:
                return False
            for box in self.boxes:
                if not _box_implies_atom(box, b):
                    return False
            return True
        if a == b and all(_is_deterministic(x) for x in atoms(a)):
            return True
        if b == TRUE or a == FALSE:
            return True
        cnf_b = to_cnf(b)
        if self.dnf is None or cnf_b is None:
            return False
        for box in self.boxes:  # (loops, not all() over a generator: asked for every cut of a layout)
            for clause in cnf_b:
                if not _box_implies_clause(box, clause):
                    return False
        return True

    def disjoint(self, b: Predicate) -> bool:
        if isinstance(b, (And, Or, Const)):
            return disjoint(self.predicate, b)
        # An atom b adds a factor of one to the DNF of conj(predicate, b): its
        # conjunctions are exactly c | {b} for the conjunctions c of ours, and
        # it exceeds the expansion limit exactly when ours does.
        if self.dnf is None:
            return False
        if isinstance(b, JoinInduced):
            return all(box.excludes(b, None) for box in self.boxes)
        if isinstance(b, Opaque):
            # box_of keeps no values for it: c | {b} is never TRUE exactly when b is the
            # negation of an atom of c (a non-deterministic b it ignores)
            if not b.deterministic:
                return not self.boxes
            return all(b in box.negations for box in self.boxes)
        sets = atom_sets(b) if _is_deterministic(b) and not isinstance(b, ColumnCompare) else None
        if sets is None:
            return all(box_of(c | {b}) is None for c in self.dnf)
        # A conjunction box_of finds never TRUE stays so with b (b only narrows), so only the
        # boxes are asked; each with b is box_of(c | {b}) without rebuilding the box of c.
        return all(box.excludes(b, sets) for box in self.boxes)


@lru_cache(maxsize=4096)
def prepared(p: Predicate) -> Prepared:
    """One Prepared per predicate (the sources of join-induced atoms), so that its remembered
    answers serve every query with the same filter."""
    return Prepared(p, remember=True)


def _excludes_induced(box: Box, b: JoinInduced) -> bool:
    """Is box_of(box.atoms | {b}) None, for a join-induced atom b? Only the checks of b's
    induction path can change: its positive sources must still be satisfiable together
    and imply none of its negated ones."""
    if b in box.atoms:
        return False
    sources = box.induced.get(b.hops, ())
    negated = box.induced_not.get(b.hops, ())
    if b.negated:  # the positive sources passed every check but this one
        prepared = box.sources_of(b.hops)
        return prepared is not None and prepared.implies(b.source)
    # disjoint(conj(S), s) is not satisfiable(conj(*S, s)): conj flattens
    never_true = box.sources_of(b.hops).disjoint(b.source) if sources else not satisfiable(b.source)
    if never_true:
        return True
    together = conj(*sources, b.source)
    return any(implies(together, n) for n in negated)


def _excludes(box: Box, b: Predicate, sets: AtomSets) -> bool:
    """Is box_of(box.atoms | {b}) None, for a deterministic single-column atom b (`sets`:
    its atom_sets)? The checks box_of makes that b can change: b against the negations of
    the box's atoms and theirs against b, b's column narrowed to nothing, and the column
    comparisons on b's column."""
    if b in box.atoms:
        return False
    if b in box.negations or negate(b) in box.atoms:
        return True
    column = sets.column
    narrowed = box.get(column).intersect(sets.over)
    if narrowed.is_empty():
        return True
    for cc in box.column_compares:
        if column in (cc.left.name, cc.right.name):
            left = narrowed if cc.left.name == column else box.get(cc.left.name)
            right = narrowed if cc.right.name == column else box.get(cc.right.name)
            if _compare_never_true(cc.op, left, right):
                return True
    return False


def _box_implies_clause(box: Box, clause: Clause) -> bool:
    if not clause:
        return False  # the empty clause is FALSE
    if len(clause) == 1:  # most cuts are one atom: the loop below without its union
        (atom,) = clause
        return _box_implies_atom(box, atom)
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


def _box_implies_atom(box: Box, atom: Predicate) -> bool:
    """`_box_implies_clause(box, {atom})`."""
    if atom in box.atoms and _is_deterministic(atom):
        return True
    sets = atom_sets(atom)
    if sets is not None:
        return box.get(sets.column).issubset(sets.under)
    if isinstance(atom, JoinInduced):
        return _box_implies_induced(box, atom)
    return isinstance(atom, ColumnCompare) and _compare_always(
        atom.op, box.get(atom.left.name), box.get(atom.right.name))


def _box_implies_induced(box: Box, atom: JoinInduced) -> bool:
    sources = box.sources_of(atom.hops)  # Prepared: the same answers as implies and disjoint
    if not atom.negated:
        return sources is not None and sources.implies(atom.source)
    if sources is not None and sources.disjoint(atom.source):
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
    # Disjoint (lo, hi) ranges in order covering every non-NULL value (a range
    # set, diPs §4); () when only min and max are known, the one-range case.
    ranges: tuple = ()

    def value_set(self, column: Column) -> ValueSet:
        has_values = self.row_count > self.null_count
        ranges = self.ranges or ((self.min, self.max),)
        if has_values and not all(value_fits(column, v) for r in ranges for v in r):
            return ValueSet.everything()  # unknown or unusable bounds (None, NaN, other types)
        intervals = [Interval(as_kind(column, lo), as_kind(column, hi)) for lo, hi in ranges] if has_values else []
        return ValueSet.of(intervals, self.null_count > 0)


def might_match(p: Predicate, stats: Mapping[str, ColumnStats], row_count: int | None = None) -> bool:
    """False only when no row of a block with these stats can make p TRUE."""
    if row_count == 0:
        return False
    return _MightMatch(stats)(p)


class _CanBeTrue(PredicateVisitor[bool]):
    """Could a row make the predicate TRUE? A subclass answers for the atoms
    (unknown: True); AND and OR combine its answers."""

    def const(self, p: Const) -> bool:
        return p.value

    def and_(self, p: And) -> bool:
        return all(self(c) for c in p.children)

    def or_(self, p: Or) -> bool:
        return any(self(c) for c in p.children)


class _MightMatch(_CanBeTrue):
    """Can a row of a block with these stats make the predicate TRUE?"""

    def __init__(self, stats: Mapping[str, ColumnStats]):
        self.stats = stats

    def column_compare(self, p: ColumnCompare) -> bool:
        ls, rs = self.stats.get(p.left.name), self.stats.get(p.right.name)
        if ls is None or rs is None:
            return True
        return not _compare_never_true(p.op, ls.value_set(p.left), rs.value_set(p.right))

    def default(self, p: Predicate) -> bool:
        sets = atom_sets(p)
        if sets is None:
            return True  # not understood: might match
        s = self.stats.get(sets.column)
        if s is None:
            return True
        return not sets.over.isdisjoint(s.value_set(p.column))  # (an atom with sets has one column)


# ---------------------------------------------------------------------------
# NULL rejection


def can_be_true_on_nulls(p: Predicate) -> bool:
    """Could p be TRUE on a row whose columns are all NULL? (unknown -> True)

    A WHERE conjunct on the NULL-supplying side of an outer join filters that
    side's rows only when this is False.
    """
    return _TRUE_ON_NULLS(p)


class _TrueOnNulls(_CanBeTrue):
    """Can a row whose columns are all NULL make the predicate TRUE?"""

    def join_induced(self, p: JoinInduced) -> bool:
        return p.negated

    def column_compare(self, p: ColumnCompare) -> bool:
        return False

    def default(self, p: Predicate) -> bool:
        sets = atom_sets(p)
        return True if sets is None else sets.over.null


_TRUE_ON_NULLS = _TrueOnNulls()
