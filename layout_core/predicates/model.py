"""Immutable predicates over the columns of one table.

A predicate is a tree of small frozen dataclasses. Atoms name a `Column` (its
name and a type kind) and literal values already coerced to that type.
`conj`, `disj` and `negate` build simplified, canonically ordered trees, so two
predicates that differ only in the order of AND/OR operands compare equal.
`negate` pushes NOT down to the atoms (negation normal form), which is valid
in SQL's three-valued logic: NOT(x < 5) is TRUE exactly when x >= 5 is.

`Opaque` holds anything the model does not understand (functions, UDFs,
scalar subqueries). Reasoning treats it as unknown; only a syntactically
identical, deterministic expression is known to match it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Generic, Iterable, Mapping, TypeVar, Union

from layout_core.base.schema import Column, Hop  # noqa: F401 - predicates name columns and join hops

Value = Union[int, Decimal, float, str, bool, dt.date, dt.datetime]

# Type kinds a column can have; literals are coerced to the column's kind.
KINDS = ("int", "decimal", "float", "string", "date", "timestamp", "bool", "other")

COMPARISONS = ("=", "<>", "<", "<=", ">", ">=")
_NEGATED_OP = {"=": "<>", "<>": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_FLIPPED_OP = {"=": "=", "<>": "<>", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


class Predicate:
    """Base class of every predicate node.

    Predicates are immutable, and routing one query hashes them (caches,
    deduplication) and orders them by repr (canonical AND/OR order) thousands
    of times: each node keeps both once computed (see `_hash_once`, `sort_key`).
    """

    __slots__ = ("_hash", "_sort_key")

    def columns(self) -> frozenset[str]:
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class Const(Predicate):
    value: bool

    def columns(self) -> frozenset[str]:
        return frozenset()


TRUE = Const(True)
FALSE = Const(False)


class ColumnAtom(Predicate):
    """An atom on one column, named by its `column` field."""

    __slots__ = ()

    def columns(self) -> frozenset[str]:
        # the stored columns the atom reads: a virtual column's inputs
        return frozenset(self.column.reads or (self.column.name,))


@dataclass(frozen=True, slots=True)
class Compare(ColumnAtom):
    """column <op> literal."""

    column: Column
    op: str
    value: Value


@dataclass(frozen=True, slots=True)
class Between(ColumnAtom):
    """column [NOT] BETWEEN low AND high (inclusive, as in SQL)."""

    column: Column
    low: Value
    high: Value
    negated: bool = False


@dataclass(frozen=True, slots=True)
class InList(ColumnAtom):
    """column [NOT] IN (values). A NULL in the list is kept as `has_null`:
    `x NOT IN (1, NULL)` is never TRUE."""

    column: Column
    values: frozenset
    negated: bool = False
    has_null: bool = False

    def __repr__(self) -> str:
        # A frozenset's order follows string hashing, which changes from process to
        # process; the repr orders AND/OR operands (`sort_key`), so it must not.
        values = ", ".join(map(repr, sorted_values(self.values)))
        return (f"InList(column={self.column!r}, values=frozenset({{{values}}}), "
                f"negated={self.negated!r}, has_null={self.has_null!r})")


def sorted_values(values: Iterable[Any]) -> list:
    """The values in an order that does not change from process to process (by
    repr when they do not compare): equal IN lists print, render and serialize
    to equal text."""
    try:
        return sorted(values)
    except TypeError:
        return sorted(values, key=repr)


@dataclass(frozen=True, slots=True)
class Like(ColumnAtom):
    """column [NOT] LIKE pattern, with Spark's escape character (default backslash)."""

    column: Column
    pattern: str
    negated: bool = False
    escape: str = "\\"


@dataclass(frozen=True, slots=True)
class IsNull(ColumnAtom):
    column: Column
    negated: bool = False


@dataclass(frozen=True, slots=True)
class ColumnCompare(Predicate):
    """left <op> right, both columns of the same table, or of two table
    references when it is a join condition.

    Stored with the columns in name order (`b > a` becomes `a < b`), so that
    one comparison written both ways is one atom: a cut from q4's
    `l_commitdate < l_receiptdate` is then the very atom of q21's
    `l_receiptdate > l_commitdate`, and reasoning by identity sees it.
    """

    left: Column
    op: str
    right: Column

    def __post_init__(self):
        if self.right < self.left:
            left, right = self.left, self.right
            object.__setattr__(self, "left", right)
            object.__setattr__(self, "right", left)
            object.__setattr__(self, "op", _FLIPPED_OP[self.op])

    def columns(self) -> frozenset[str]:
        return frozenset([self.left.name, self.right.name])


@dataclass(frozen=True, slots=True)
class JoinInduced(Predicate):
    """target.fk IN (SELECT key FROM parent WHERE ... source predicate ...).

    `hops` leads from the source table to the target table, each hop from a
    primary key to a foreign key that references it, so every target row has
    at most one source row: that makes implication and disjointness follow
    from those of the source predicates.
    """

    hops: tuple[Hop, ...]
    source: Predicate
    negated: bool = False

    @property
    def column(self) -> Column:
        return Column(self.hops[-1].child_column, "other")

    @property
    def source_table(self) -> str:
        return self.hops[0].parent_table

    @property
    def target_table(self) -> str:
        return self.hops[-1].child_table

    def columns(self) -> frozenset[str]:
        return frozenset([self.hops[-1].child_column])


# Functions whose value can differ between two evaluations of the same text.
NONDETERMINISTIC_FUNCTIONS = frozenset(
    """rand randn random uuid shuffle current_date current_timestamp curdate now
    localtimestamp current_timezone unix_timestamp monotonically_increasing_id
    spark_partition_id input_file_name input_file_block_start input_file_block_length
    try_reflect reflect java_method""".split()
)


@dataclass(frozen=True, slots=True)
class Opaque(Predicate):
    """A boolean expression the model does not understand, kept as canonical SQL."""

    sql: str
    cols: frozenset = field(default_factory=frozenset)
    deterministic: bool = True
    negated: bool = False

    def columns(self) -> frozenset[str]:
        return self.cols


@dataclass(frozen=True, slots=True)
class And(Predicate):
    children: tuple[Predicate, ...]

    def columns(self) -> frozenset[str]:
        return frozenset().union(*(c.columns() for c in self.children))


@dataclass(frozen=True, slots=True)
class Or(Predicate):
    children: tuple[Predicate, ...]

    def columns(self) -> frozenset[str]:
        return frozenset().union(*(c.columns() for c in self.children))


# ---------------------------------------------------------------------------
# Dispatch on a predicate's type

# Every predicate type and the `PredicateVisitor` method that answers for it. This is
# the one table of the predicate types: rendering, JSON, negation, the reasoning and
# zone maps all dispatch through it.
VISIT_METHODS: Mapping[type, str] = MappingProxyType({
    Const: "const",
    And: "and_",
    Or: "or_",
    Compare: "compare",
    Between: "between",
    InList: "in_list",
    Like: "like",
    IsNull: "is_null",
    ColumnCompare: "column_compare",
    JoinInduced: "join_induced",
    Opaque: "opaque",
})

ATOMS = tuple(t for t in VISIT_METHODS if t not in (Const, And, Or))

R = TypeVar("R")


class PredicateVisitor(Generic[R]):
    """One answer per predicate type: `visitor(p)` calls the method that
    `VISIT_METHODS` names for type(p) (`const`, `and_`, `compare`, ...).

    A type whose method the subclass does not define, and anything that is not
    a predicate, goes to `default`, which raises TypeError unless overridden;
    a question that may say "unknown" overrides `default` with that answer.
    """

    def __call__(self, p: Predicate) -> R:
        return getattr(self, VISIT_METHODS.get(type(p), "default"), self.default)(p)

    def default(self, p: Predicate) -> R:
        raise TypeError(f"not a predicate: {p!r}")


def _hash_once(cls: type) -> type:
    """Make a frozen dataclass keep its hash: the dataclass hashes the fields on
    every call, which for a tree means hashing the whole tree each time."""
    fields_hash = cls.__hash__

    def __hash__(self) -> int:
        try:
            return self._hash
        except AttributeError:
            h = fields_hash(self)
            object.__setattr__(self, "_hash", h)
            return h

    cls.__hash__ = __hash__
    return cls


for _cls in VISIT_METHODS:
    _hash_once(_cls)
del _cls


def sort_key(p: Predicate) -> str:
    """The canonical order of AND/OR operands: the repr, computed once per node."""
    try:
        return p._sort_key
    except AttributeError:
        key = repr(p)
        object.__setattr__(p, "_sort_key", key)
        return key


def conj(*parts: Predicate | Iterable[Predicate]) -> Predicate:
    """AND of the parts, flattened, deduplicated, canonically ordered."""
    return _connect(And, parts, absorbing=FALSE, neutral=TRUE)


def disj(*parts: Predicate | Iterable[Predicate]) -> Predicate:
    """OR of the parts, flattened, deduplicated, canonically ordered."""
    return _connect(Or, parts, absorbing=TRUE, neutral=FALSE)


def _connect(connective: type, parts, absorbing: Const, neutral: Const) -> Predicate:
    """`connective` (And or Or) of the parts: nested ones of the same kind are
    flattened, `absorbing` decides the whole, `neutral` is dropped."""
    flat: list[Predicate] = []
    for part in _flatten_args(parts):
        if isinstance(part, connective):
            flat.extend(part.children)
        else:
            flat.append(part)
    kept: dict[Predicate, None] = {}
    for p in flat:
        if isinstance(p, Const):  # (only a Const can equal TRUE or FALSE)
            if p == absorbing:
                return absorbing
            if p == neutral:
                continue
        kept[p] = None
    if not kept:
        return neutral
    if len(kept) == 1:
        return next(iter(kept))
    return connective(tuple(sorted(kept, key=sort_key)))


def _flatten_args(parts) -> list[Predicate]:
    out: list[Predicate] = []
    for part in parts:
        if isinstance(part, Predicate):
            out.append(part)
        else:
            out.extend(part)
    return out


class _Negation(PredicateVisitor[Predicate]):
    def const(self, p: Const) -> Predicate:
        return Const(not p.value)

    def and_(self, p: And) -> Predicate:
        return disj(self(c) for c in p.children)

    def or_(self, p: Or) -> Predicate:
        return conj(self(c) for c in p.children)

    def compare(self, p: Compare) -> Predicate:
        return Compare(p.column, _NEGATED_OP[p.op], p.value)

    def column_compare(self, p: ColumnCompare) -> Predicate:
        return ColumnCompare(p.left, _NEGATED_OP[p.op], p.right)

    def with_not_flipped(self, p: Predicate) -> Predicate:
        return dataclasses.replace(p, negated=not p.negated)

    # the atoms that carry their own NOT
    between = in_list = like = is_null = join_induced = opaque = with_not_flipped


_NEGATION = _Negation()


def negate(p: Predicate) -> Predicate:
    """NOT p, pushed down to the atoms (valid under three-valued logic)."""
    return _NEGATION(p)


def flip(op: str) -> str:
    """The operator with its operands swapped: a < b  <=>  b > a."""
    return _FLIPPED_OP[op]


def conjuncts(p: Predicate) -> tuple[Predicate, ...]:
    if isinstance(p, And):
        return p.children
    if p == TRUE:
        return ()
    return (p,)


def in_list(column: Column, values: Iterable[Any], negated: bool = False) -> Predicate:
    """IN list from raw values; NULLs in the list become `has_null`."""
    vals = list(values)
    has_null = any(v is None for v in vals)
    return InList(column, frozenset(v for v in vals if v is not None), negated, has_null)


def map_atoms(p: Predicate, fn) -> Predicate:
    """Rebuild p with every atom replaced by fn(atom) (fn may return TRUE/FALSE)."""
    if isinstance(p, And):
        return conj(map_atoms(c, fn) for c in p.children)
    if isinstance(p, Or):
        return disj(map_atoms(c, fn) for c in p.children)
    if isinstance(p, Const):
        return p
    return fn(p)


def atoms(p: Predicate) -> Iterable[Predicate]:
    if isinstance(p, (And, Or)):
        for c in p.children:
            yield from atoms(c)
    elif not isinstance(p, Const):
        yield p
