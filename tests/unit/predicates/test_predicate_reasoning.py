"""Property tests of `layout_core.predicates` reasoning against a brute-force
SQL three-valued-logic evaluator (tests/helpers/sql3vl.py).

Soundness is what matters: an answer of True from `implies`/`disjoint`, or of
False from `satisfiable`/`might_match`, is checked against rows — the rows
Hypothesis generates plus the grid of every combination of each used column's
small domain and NULL (all of it up to GRID_LIMIT rows, a fixed sample past
that). One row refuting such an answer fails the test.

Generated cases (`max_examples`, with `derandomize=True` so every run is the
same): implies 3,000 + disjoint 3,000 + might_match 2,000 + negate 1,500 +
satisfiable 500 + can_be_true_on_nulls 500 + completeness 500 + round trip
1,000 = 12,000 >= 10,000. `test_zz_generated_case_count` counts the cases
actually run and asserts that total when the whole module ran.
"""

from __future__ import annotations

import datetime as dt
import functools
import itertools
import random
from collections import Counter
from decimal import Decimal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from layout_core.predicates import (
    FALSE,
    TRUE,
    Between,
    Column,
    ColumnCompare,
    ColumnStats,
    Compare,
    Hop,
    InList,
    IsNull,
    JoinInduced,
    Like,
    Opaque,
    Predicate,
    atoms,
    can_be_true_on_nulls,
    conj,
    disj,
    disjoint,
    dumps,
    implies,
    in_list,
    loads,
    map_atoms,
    might_match,
    negate,
    satisfiable,
    to_sql,
)
from layout_core.predicates.model import COMPARISONS
from layout_core.predicates.reasoning import to_cnf, to_dnf
from tests.helpers.sql3vl import compile_predicate, evaluate, not3

# ---------------------------------------------------------------------------
# Columns, domains, literals

I = Column("i", "int")
J = Column("j", "int")  # a second int column, for column-to-column compares
D = Column("d", "decimal")
T = Column("t", "date")
S = Column("s", "string")
COLUMNS = {c.name: c for c in (I, J, D, T, S)}

_d = Decimal
_date = dt.date

ROW_DOMAINS: dict[str, list] = {
    "i": [-2, -1, 0, 1, 2, 3, 2**31 - 1, -(2**63)],
    "j": [-1, 0, 1, 2],
    "d": [_d("-1.00"), _d("0.00"), _d("0.99"), _d("1.00"), _d("1.01"), _d("1.50"), _d("2.00")],
    "t": [
        _date(2023, 2, 28), _date(2023, 3, 1), _date(2024, 1, 31), _date(2024, 2, 1),
        _date(2024, 2, 28), _date(2024, 2, 29), _date(2024, 3, 1), _date.max,
    ],
    "s": ["", "a", "ab", "abc", "ac", "b", "bb", "a%c", "a_c", "a\U0010ffff"],
}

# Literals: the row values plus values between and beyond them. The model
# accepts ints for decimal columns (`_PY_TYPES["decimal"]`), so those appear too.
LITERALS: dict[str, list] = {
    "i": ROW_DOMAINS["i"] + [4, 10, -3, 2**63 - 1],
    "j": ROW_DOMAINS["i"] + [4, 10, -3, 2**63 - 1],
    "d": ROW_DOMAINS["d"] + [_d("0.5"), _d("1.0"), _d("1.5"), _d("2.01"), 0, 1, 2],
    "t": ROW_DOMAINS["t"] + [_date(2024, 2, 15), _date(2024, 12, 31), _date.min],
    "s": ROW_DOMAINS["s"] + ["aa", "abz", "c", "A", "a%"],
}

# (pattern, escape): prefixes, 'a%c', '_b%', exact ones, escaped wildcards.
LIKE_PATTERNS = [
    ("a%", "\\"), ("ab%", "\\"), ("b%", "\\"), ("%", "\\"), ("%%", "\\"), ("", "\\"),
    ("a%c", "\\"), ("_b%", "\\"), ("%c", "\\"), ("a_", "\\"), ("_", "\\"), ("a_c", "\\"),
    ("ab", "\\"), ("a", "\\"), ("abc", "\\"),
    ("a\\%c", "\\"), ("a\\_c", "\\"), ("a\\%%", "\\"), ("a\\_%", "\\"), ("\\\\%", "\\"),
    ("a!%c", "!"), ("a!_%", "!"), ("a!%", "!"), ("a\U0010ffff%", "\\"), ("a\U0010ffff", "\\"),
]

COLUMN_PAIRS = [(I, J), (J, I), (I, I), (J, J), (D, D), (T, T), (S, S)]

# Opaque atoms: two deterministic ones (given several meanings below) and a
# nondeterministic one (a different value at each evaluation).
O1 = Opaque("o1(i)", frozenset({"i"}))
O2 = Opaque("o2(s, d)", frozenset({"s", "d"}))
RAND = Opaque("rand() < 0.5", frozenset(), deterministic=False)


def _o1_meaning_a(row):
    i = row["i"]
    return None if i is None else i > 0


def _o2_meaning_a(row):
    s, d = row["s"], row["d"]
    if s is None or d is None:
        return None
    return s < "b" or d > 1


# Each meaning: sql -> function(row) -> True/False/None for the deterministic atoms.
OPAQUE_MEANINGS = [
    {"o1(i)": _o1_meaning_a, "o2(s, d)": _o2_meaning_a},
    {"o1(i)": lambda row: None, "o2(s, d)": lambda row: True},
    {"o1(i)": lambda row: row["i"] is None, "o2(s, d)": lambda row: False},
]


def _interpretations(*preds: Predicate):
    """Opaque meanings to try: one (unused) when no Opaque occurs."""
    has_opaque = any(isinstance(x, Opaque) for p in preds for x in atoms(p))
    for k, meaning in enumerate(OPAQUE_MEANINGS if has_opaque else OPAQUE_MEANINGS[:1]):
        cycle = itertools.cycle([True, None, False, True, False][k:] + [True, None, False][:k])

        def fn(atom, row, meaning=meaning, cycle=cycle):
            if not atom.deterministic:
                return next(cycle)
            return meaning[atom.sql](row)

        yield fn


# ---------------------------------------------------------------------------
# Rows and grids


@functools.lru_cache(maxsize=None)
def _ints(lo: int, hi: int):
    return st.integers(lo, hi)


_ROW_NAMES = sorted(ROW_DOMAINS)
_ROW_CHOICES = [[None] + ROW_DOMAINS[n] for n in _ROW_NAMES]
_ROW_COUNT = 1
for _choices in _ROW_CHOICES:
    _ROW_COUNT *= len(_choices)


def _row_of(index: int) -> dict:
    """Row number `index` of the product of all domains (0 is the all-NULL row)."""
    row = {}
    for name, choices in zip(_ROW_NAMES, _ROW_CHOICES):
        index, k = divmod(index, len(choices))
        row[name] = choices[k]
    return row


@functools.lru_cache(maxsize=None)
def row_strategy():
    # One draw per row (not one per column) keeps generation cheap.
    return st.integers(0, _ROW_COUNT - 1).map(_row_of)


@functools.lru_cache(maxsize=None)
def _row_lists(min_size, max_size):
    return st.lists(row_strategy(), min_size=min_size, max_size=max_size)


@st.composite
def row_sets(draw, min_size=1, max_size=8):
    rows = draw(_row_lists(min_size, max_size))
    # Duplicates: repeat some rows.
    dup = draw(_ints(0, min(2, len(rows))))
    return rows + rows[:dup]


GRID_LIMIT = 3000
_grid_cache: dict[frozenset, list[dict]] = {}


def grid(columns) -> list[dict]:
    """Every combination of the columns' domains and NULL (a fixed sample past GRID_LIMIT)."""
    key = frozenset(columns)
    if key not in _grid_cache:
        names = sorted(key)
        doms = [[None] + ROW_DOMAINS[n] for n in names]
        size = 1
        for dom in doms:
            size *= len(dom)
        combos = itertools.product(*doms)
        if size > GRID_LIMIT:
            rng = random.Random(" ".join(names))
            wanted = set(rng.sample(range(size), GRID_LIMIT))
            combos = (c for k, c in enumerate(combos) if k in wanted)
        _grid_cache[key] = [dict(zip(names, c)) for c in combos]
    return _grid_cache[key]


def _legacy_modes(*preds: Predicate):
    """Empty-IN semantics to try: Spark 4's, and the legacy one where it matters."""
    has_empty_in = any(
        isinstance(x, InList) and not x.values and not x.has_null for p in preds for x in atoms(p)
    )
    return (False, True) if has_empty_in else (False,)


def check_rows(rows, *preds) -> list[dict]:
    cols = frozenset().union(*(p.columns() for p in preds))
    return list(rows) + grid(cols)


# ---------------------------------------------------------------------------
# Predicate strategies


_LIT = {name: st.sampled_from(vals) for name, vals in LITERALS.items()}
_OPS = st.sampled_from(COMPARISONS)
_RARE = st.integers(0, 30)


def lit(col: Column):
    return _LIT[col.name]


@st.composite
def compare_atom(draw, col):
    value = None if draw(_RARE) == 0 else draw(lit(col))  # x = NULL: never TRUE
    return Compare(col, draw(_OPS), value)


@st.composite
def between_atom(draw, col):
    # Independent bounds: lo > hi happens often.
    return Between(col, draw(lit(col)), draw(lit(col)), draw(st.booleans()))


_SIZES = st.one_of(st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.just(0))
_HAS_NULL = st.integers(0, 3).map(lambda k: k == 0)


@st.composite
def in_atom(draw, col):
    size = draw(_SIZES)
    values = [draw(lit(col)) for _ in range(size)]
    has_null = draw(_HAS_NULL)
    return in_list(col, values + ([None] if has_null else []), negated=draw(st.booleans()))


_PATTERNS = st.sampled_from(LIKE_PATTERNS)


@st.composite
def like_atom(draw, col=S):
    pattern, escape = draw(_PATTERNS)
    return Like(col, pattern, draw(st.booleans()), escape)


@st.composite
def is_null_atom(draw, col):
    return IsNull(col, draw(st.booleans()))


_PAIRS = st.sampled_from(COLUMN_PAIRS)


@st.composite
def column_compare_atom(draw):
    left, right = draw(_PAIRS)
    return ColumnCompare(left, draw(_OPS), right)


_OPAQUE = {
    True: st.tuples(st.sampled_from([O1, O2, RAND]), st.booleans()),
    False: st.tuples(st.sampled_from([O1, O2]), st.booleans()),
}


def opaque_atom(nondeterministic=True):
    return _OPAQUE[nondeterministic].map(lambda ob: negate(ob[0]) if ob[1] else ob[0])


def _column_atom_strategy(col):
    makers = [compare_atom, compare_atom, between_atom, in_atom, is_null_atom]
    if col.kind == "string":
        makers += [like_atom, like_atom]
    return st.one_of(*[m(col) for m in makers])


_COLUMN_ATOM = {c.name: _column_atom_strategy(c) for c in COLUMNS.values()}


def column_atom(col):
    """An atom on one column."""
    return _COLUMN_ATOM[col.name]


_ATOM_KIND = st.integers(0, 39)
_ATOM_COLUMN = st.sampled_from([I, I, D, D, T, T, S, S, S, J])
_CONSTS = st.sampled_from([TRUE, FALSE])


@st.composite
def _atom(draw, nondeterministic=True):
    k = draw(_ATOM_KIND)
    if k < 32:
        return draw(column_atom(draw(_ATOM_COLUMN)))
    if k < 36:
        return draw(column_compare_atom())
    if k < 37:
        return draw(_CONSTS)
    return draw(opaque_atom(nondeterministic))


_ATOMS = {True: _atom(True), False: _atom(False)}


def atom(nondeterministic=True):
    return _ATOMS[nondeterministic]


@functools.lru_cache(maxsize=None)
def predicates(depth: int = 3, nondeterministic: bool = True):
    """Trees of AND/OR/NOT over atoms, depth <= `depth`, built with conj/disj/negate."""
    leaf = atom(nondeterministic)
    if depth == 0:
        return leaf
    sub = predicates(depth - 1, nondeterministic)
    return st.one_of(
        leaf,
        st.lists(sub, min_size=2, max_size=3).map(conj),
        st.lists(sub, min_size=2, max_size=3).map(disj),
        sub.map(negate),
    )


@st.composite
def mutated(draw, p: Predicate, rate: int = 3):
    """p with some atoms changed a little: a neighbouring literal, another
    operator, a toggled NOT, or a fresh atom on the same column."""

    def change(a: Predicate) -> Predicate:
        if draw(_ints(0, rate)) != 0:
            return a
        if isinstance(a, Compare):
            how = draw(_ints(0, 2))
            if how == 0:
                return Compare(a.column, a.op, draw(lit(a.column)))
            if how == 1:
                return Compare(a.column, draw(_OPS), a.value)
            return draw(column_atom(a.column))
        if isinstance(a, Between):
            how = draw(_ints(0, 3))
            if how == 0:
                return Between(a.column, draw(lit(a.column)), a.high, a.negated)
            if how == 1:
                return Between(a.column, a.low, draw(lit(a.column)), a.negated)
            if how == 2:
                return negate(a)
            return draw(column_atom(a.column))
        if isinstance(a, InList):
            how = draw(_ints(0, 3))
            if how == 0:
                return InList(a.column, a.values | {draw(lit(a.column))}, a.negated, a.has_null)
            if how == 1:
                return InList(a.column, a.values, a.negated, not a.has_null)
            if how == 2 and a.values:
                drop = draw(st.sampled_from(sorted(a.values, key=repr)))
                return InList(a.column, a.values - {drop}, a.negated, a.has_null)
            return draw(column_atom(a.column))
        if isinstance(a, (Like, IsNull)):
            return negate(a) if draw(st.booleans()) else draw(column_atom(a.column))
        if isinstance(a, ColumnCompare):
            return ColumnCompare(a.left, draw(_OPS), a.right)
        return a

    return map_atoms(p, change)


_FOCUS_COLUMN = st.sampled_from([I, D, T, S, S])


def _focused_tree(col):
    leaf = column_atom(col)
    return st.one_of(
        leaf,
        st.lists(leaf, min_size=2, max_size=3).map(conj),
        st.lists(leaf, min_size=2, max_size=3).map(disj),
    )


_FOCUSED = {c.name: _focused_tree(c) for c in COLUMNS.values()}


@st.composite
def focused(draw, depth: int = 1):
    """A small tree over the atoms of one column: where value-set reasoning lives."""
    col = draw(_FOCUS_COLUMN)
    return draw(column_atom(col) if depth == 0 else _FOCUSED[col.name])


_PAIR_MODES = st.sampled_from(["indep", "mutate", "weaken", "strengthen", "focused", "focused", "negated"])


@st.composite
def pairs(draw, nondeterministic=True):
    """(a, b) pairs, many of them related so that implies/disjoint answer True."""
    mode = draw(_PAIR_MODES)
    if mode == "focused":
        a = draw(focused())
        col_atoms = list(atoms(a))
        if col_atoms and draw(st.booleans()):
            b = draw(mutated(a, rate=1))
        else:
            b = draw(focused())
        return a, b
    a = draw(predicates(3, nondeterministic))
    if mode == "indep":
        return a, draw(predicates(3, nondeterministic))
    if mode == "mutate":
        return a, draw(mutated(a))
    if mode == "weaken":
        return a, disj(draw(mutated(a)), draw(predicates(1, nondeterministic)))
    if mode == "strengthen":
        return conj(a, draw(predicates(1, nondeterministic))), draw(mutated(a))
    return a, negate(draw(mutated(a)))


# ---------------------------------------------------------------------------
# Counting generated cases

CASES: Counter = Counter()
PROPERTY_TESTS = (
    "implies", "disjoint", "might_match", "negate", "satisfiable",
    "can_be_true_on_nulls", "completeness", "round_trip",
)

COMMON = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


def _show(p: Predicate) -> str:
    try:
        return to_sql(p)
    except Exception:  # pragma: no cover - only for messages
        return repr(p)


# ---------------------------------------------------------------------------
# Soundness properties


def assert_implies_sound(a, b, rows):
    if not implies(a, b):
        return
    if a == b and not any(isinstance(x, Opaque) for x in atoms(a)):
        return  # sound by definition
    all_rows = check_rows(rows, a, b)
    for fn in _interpretations(a, b):
        for legacy in _legacy_modes(a, b):
            ev_a = compile_predicate(a, fn, legacy)
            ev_b = compile_predicate(b, fn, legacy)
            for row in all_rows:
                if ev_a(row) is True:
                    vb = ev_b(row)
                    assert vb is True, (
                        f"implies({_show(a)!r}, {_show(b)!r}) is True but row {row} "
                        f"makes a TRUE and b {vb}"
                    )


def assert_disjoint_sound(a, b, rows):
    if not disjoint(a, b):
        return
    all_rows = check_rows(rows, a, b)
    for fn in _interpretations(a, b):
        for legacy in _legacy_modes(a, b):
            ev_a = compile_predicate(a, fn, legacy)
            ev_b = compile_predicate(b, fn, legacy)
            for row in all_rows:
                if ev_a(row) is True:
                    assert ev_b(row) is not True, (
                        f"disjoint({_show(a)!r}, {_show(b)!r}) is True but row {row} makes both TRUE"
                    )


@settings(max_examples=3000, **COMMON)
@given(pairs(), row_sets())
# Regression: an int literal on a decimal column was read as a discrete
# value (d > 1 became d >= 2), which "proved" d > 1 => d >= 2 (refuted by 1.50).
@example((Compare(D, ">", 1), Compare(D, ">=", 2)), [])
@example((in_list(D, [1, 2]), Between(D, 1, 2)), [])
@example((Between(D, _d("1.00"), _d("2.00")), in_list(D, [1, 2])), [])
def test_implies_is_sound(ab, rows):
    CASES["implies"] += 1
    a, b = ab
    assert_implies_sound(a, b, rows)


@settings(max_examples=3000, **COMMON)
@given(pairs(), row_sets())
@example((Compare(D, "<", 2), Compare(D, ">", 1)), [])
def test_disjoint_is_sound(ab, rows):
    CASES["disjoint"] += 1
    a, b = ab
    assert_disjoint_sound(a, b, rows)
    assert disjoint(a, b) == disjoint(b, a)


def _assert_prepared_agrees(a, b):
    from layout_core.predicates import Prepared

    prepared = Prepared(a)
    assert prepared.implies(b) == implies(a, b), (_show(a), _show(b))
    assert prepared.disjoint(b) == disjoint(a, b), (_show(a), _show(b))


@settings(max_examples=1500, **COMMON)
@given(pairs())
def test_prepared_answers_exactly_as_implies_and_disjoint(ab):
    """The router's Prepared(query) must not change a single routing decision."""
    a, b = ab
    _assert_prepared_agrees(a, b)
    for atom in list(atoms(a))[:3]:  # atoms of a itself: the conj dedupes them
        _assert_prepared_agrees(a, atom)
        _assert_prepared_agrees(a, negate(atom))


_HOPS = st.sampled_from([(Hop("p", "k", "c", "fk"),), (Hop("q", "k2", "c", "fk2"),),
                         (Hop("q", "k2", "p", "fk3"), Hop("p", "k", "c", "fk"))])


@st.composite
def induced_atom(draw):
    """A join-induced atom on one of three paths into table c, its source a small predicate."""
    return JoinInduced(draw(_HOPS), draw(st.one_of(focused(), predicates(1, False))), draw(st.booleans()))


@settings(max_examples=1500, **COMMON)
@given(st.lists(st.one_of(induced_atom(), predicates(1, False)), min_size=1, max_size=4),
       st.sampled_from([conj, disj]), st.one_of(induced_atom(), st.data()))
def test_prepared_answers_exactly_as_disjoint_for_join_induced_atoms(parts, connect, b):
    """Boxes with join-induced atoms on the same path as b (positive and negated, sources
    related or not), against Prepared's shortcut for a join-induced b."""
    a = connect(*parts)
    if not isinstance(b, JoinInduced):  # b: a join-induced atom of a (and below, its negation)
        found = [x for x in atoms(a) if isinstance(x, JoinInduced)]
        if not found:
            return
        b = b.draw(st.sampled_from(found))
    _assert_prepared_agrees(a, b)
    _assert_prepared_agrees(a, negate(b))


def test_prepared_agrees_at_the_expansion_limit_and_with_join_induced_atoms():
    from layout_core.predicates import Hop, JoinInduced

    wide = conj(*[disj(Compare(I, "=", k), Compare(J, "=", k)) for k in range(9)])  # 2^9 > limit
    assert to_dnf(wide) is None
    hop = Hop("p", "k", "c", "fk")
    urgent = JoinInduced((hop,), Compare(S, "=", "u"))
    cases = [
        (wide, Compare(I, "=", 1)), (wide, Compare(I, "=", 100)),
        (conj(wide, Compare(I, "=", 1)), Compare(I, "=", 1)),
        (FALSE, Compare(I, "=", 1)), (Compare(I, "=", 1), Compare(I, "=", 1)),
        (Compare(I, "=", 1), Compare(I, "<>", 1)), (O1, O1), (O1, negate(O1)),
        # an opaque b: disjoint only where every branch holds its negation
        (conj(O1, Compare(I, ">", 3)), negate(O1)), (disj(negate(O1), Compare(I, "=", 1)), O1),
        (disj(conj(negate(O1), Compare(I, "=", 1)), conj(negate(O1), O2)), O1),
        (conj(RAND, Compare(I, ">", 3)), RAND), (conj(RAND, Compare(I, ">", 3)), negate(RAND)),
        (conj(urgent, Compare(I, ">", 3)), urgent),
        (conj(urgent, Compare(I, ">", 3)), JoinInduced((hop,), Compare(S, "=", "v"))),
        (conj(urgent, Compare(I, ">", 3)), JoinInduced((hop,), Compare(S, "=", "u"), negated=True)),
        (disj(urgent, Compare(I, ">", 3)), conj(Compare(I, "<", 0), negate(urgent))),
    ]
    for a, b in cases:
        _assert_prepared_agrees(a, b)


def block_stats(draw, rows):
    """Per-column stats of a block, sometimes loosened or left out."""
    stats = {}
    for name in ROW_DOMAINS:
        values = [r[name] for r in rows if r[name] is not None]
        lo = min(values) if values else None
        hi = max(values) if values else None
        how = draw(_ints(0, 7))
        if how == 0:
            continue  # no stats for this column
        if how == 2 and values:
            lo, hi = (None, hi) if draw(st.booleans()) else (lo, None)  # a bound unknown
        if how == 1 and values:
            # Looser (but still true) bounds.
            lo = draw(st.sampled_from([v for v in ROW_DOMAINS[name] if v <= lo]))
            hi = draw(st.sampled_from([v for v in ROW_DOMAINS[name] if v >= hi]))
        stats[name] = ColumnStats(lo, hi, len(rows) - len(values), len(rows))
    return stats


@settings(max_examples=2000, **COMMON)
@given(st.one_of(predicates(3), focused(1)), row_sets(min_size=1, max_size=8), st.data())
def test_might_match_is_sound(p, rows, data):
    CASES["might_match"] += 1
    stats = block_stats(data.draw, rows)
    if might_match(p, stats, len(rows)):
        return
    for fn in _interpretations(p):
        for row in rows:
            assert evaluate(p, row, fn) is not True, (
                f"might_match({_show(p)!r}, {stats}) is False but block row {row} makes it TRUE"
            )


@settings(max_examples=1500, **COMMON)
@given(predicates(3, nondeterministic=False), row_sets())
def test_negate_is_3vl_not(p, rows):
    CASES["negate"] += 1
    n = negate(p)
    assert negate(n) == p
    cols = p.columns()
    sample = grid(cols)[:: max(1, len(grid(cols)) // 400)]
    for fn in _interpretations(p):
        ev_p, ev_n = compile_predicate(p, fn), compile_predicate(n, fn)
        for row in rows:  # the plain recursive evaluator on the generated rows
            assert evaluate(n, row, fn) == not3(evaluate(p, row, fn)), (
                f"negate({_show(p)!r}) = {_show(n)!r} disagrees with NOT on {row}"
            )
            assert ev_p(row) == evaluate(p, row, fn)  # the compiled one agrees
        for row in sample:
            assert ev_n(row) == not3(ev_p(row)), (
                f"negate({_show(p)!r}) = {_show(n)!r} disagrees with NOT on {row}"
            )


@st.composite
def maybe_unsatisfiable(draw):
    mode = draw(_ints(0, 3))
    if mode == 0:
        return draw(predicates(3))
    if mode == 1:
        a = draw(focused())
        return conj(a, negate(draw(mutated(a, rate=1))))
    if mode == 2:
        return conj(draw(focused()), draw(focused()))
    a = draw(predicates(2))
    return conj(a, draw(mutated(negate(a))))


@settings(max_examples=500, **COMMON)
@given(maybe_unsatisfiable(), row_sets())
def test_satisfiable_is_sound(p, rows):
    CASES["satisfiable"] += 1
    if satisfiable(p):
        return
    for fn in _interpretations(p):
        ev = compile_predicate(p, fn)
        for row in check_rows(rows, p):
            assert ev(row) is not True, (
                f"satisfiable({_show(p)!r}) is False but {row} makes it TRUE"
            )


@settings(max_examples=500, **COMMON)
@given(st.one_of(predicates(3), focused(1)))
def test_can_be_true_on_nulls_is_sound(p):
    """can_be_true_on_nulls(p) is False only when p is not TRUE on a row whose
    columns are all NULL (its docstring: "unknown -> True")."""
    CASES["can_be_true_on_nulls"] += 1
    if can_be_true_on_nulls(p):
        return
    all_null = {name: None for name in ROW_DOMAINS}
    for fn in _interpretations(p):
        for legacy in (False, True):
            assert evaluate(p, all_null, fn, legacy) is not True, _show(p)


# ---------------------------------------------------------------------------
# Completeness (what the router needs proven)


def _expandable(*preds):
    return all(to_dnf(p) is not None and to_cnf(p) is not None for p in preds)


@settings(max_examples=500, **COMMON)
@given(predicates(3, nondeterministic=False), predicates(2, nondeterministic=False))
def test_reflexive_and_structural_implications(p, q):
    CASES["completeness"] += 1
    assert implies(p, p)
    assert implies(loads(dumps(p)), p)
    if _expandable(conj(p, q), p):
        assert implies(conj(p, q), p), _show(p)
    if _expandable(p, disj(p, q)):
        assert implies(p, disj(p, q)), _show(p)


x = I
DATE_CASES = [
    (Between(T, _date(2024, 2, 1), _date(2024, 2, 29)), Compare(T, "<", _date(2024, 3, 1))),
    (conj(Compare(T, ">", _date(2024, 2, 28)), Compare(T, "<", _date(2024, 3, 1))),
     Compare(T, "=", _date(2024, 2, 29))),
    (Compare(T, ">=", _date(2024, 3, 1)), Compare(T, ">", _date(2024, 2, 29))),
    (Between(T, _date(2023, 2, 1), _date(2023, 2, 28)), Compare(T, "<", _date(2023, 3, 1))),
]


@pytest.mark.parametrize(
    "a, b",
    [
        (Between(x, 1, 5), Compare(x, "<", 10)),
        (in_list(x, [1, 2]), Compare(x, "<=", 2)),
        (Like(S, "ab%"), Compare(S, ">=", "ab")),
        (Like(S, "ab%"), Compare(S, "<", "ac")),
        (Like(S, "ab"), Compare(S, "=", "ab")),
        (conj(Compare(x, ">", 1), Compare(x, "<", 3)), Compare(x, "=", 2)),
        (Compare(D, ">", _d("1.00")), Compare(D, ">=", _d("1.00"))),
        (in_list(x, [1, 2, None]), Compare(x, "<=", 2)),
        (ColumnCompare(I, "<", J), ColumnCompare(I, "<", J)),
        (ColumnCompare(J, ">", I), ColumnCompare(I, "<", J)),  # one comparison, written both ways
        (ColumnCompare(J, "<=", I), ColumnCompare(I, ">=", J)),
        (conj(Compare(I, "<", 0), Compare(J, ">", 0)), ColumnCompare(I, "<", J)),
        (Opaque("o1(i)", frozenset({"i"})), Opaque("o1(i)", frozenset({"i"}))),
        *DATE_CASES,
    ],
)
def test_known_implications(a, b):
    assert implies(a, b)
    assert_implies_sound(a, b, [])


@pytest.mark.parametrize(
    "a, b",
    [
        (Compare(x, "=", 3), Compare(x, ">", 5)),
        (IsNull(x), Compare(x, "=", 1)),
        (in_list(x, [1, 2, None], negated=True), TRUE),
        (in_list(x, [1, 2, None], negated=True), IsNull(S, negated=True)),
        (in_list(x, [None], negated=True), Compare(x, ">", 0)),
        (Like(S, "ab%"), Like(S, "b%")),
        (Like(S, "ab%"), Compare(S, "<", "ab")),
        (Between(T, _date(2024, 2, 1), _date(2024, 2, 29)), Compare(T, ">=", _date(2024, 3, 1))),
        (Between(x, 5, 1), TRUE),  # inverted bounds: never TRUE
        (Compare(x, "<", 5), Compare(x, ">=", 5)),
        (ColumnCompare(I, "<", J), ColumnCompare(I, ">=", J)),
        (ColumnCompare(J, ">", I), ColumnCompare(I, ">=", J)),
        (ColumnCompare(J, ">", I), negate(ColumnCompare(I, "<", J))),
    ],
)
def test_known_disjoint(a, b):
    assert disjoint(a, b)
    assert disjoint(b, a)
    assert_disjoint_sound(a, b, [])


def test_a_column_comparison_is_stored_with_its_columns_in_name_order():
    assert ColumnCompare(J, ">", I) == ColumnCompare(I, "<", J)
    assert ColumnCompare(J, "=", I) == ColumnCompare(I, "=", J)
    flipped = ColumnCompare(J, ">=", I)
    assert (flipped.left, flipped.op, flipped.right) == (I, "<=", J)
    assert ColumnCompare(J, "<>", I) != ColumnCompare(I, "=", J)


def test_known_non_implications():
    # Things that look alike but are not implied: each must answer "not proven".
    assert not implies(Compare(D, ">", _d("1")), Compare(D, ">=", _d("2")))
    assert not implies(Compare(D, ">", 1), Compare(D, ">=", 2))
    assert not implies(Between(D, _d("1.00"), _d("2.00")), in_list(D, [1, 2]))
    assert not implies(Between(D, 1, 2), in_list(D, [1, 2]))
    assert not implies(Like(S, "a\\%c"), Like(S, "abc"))
    assert not implies(Like(S, "a_c"), Like(S, "abc"))
    assert not implies(IsNull(x, negated=True), Compare(x, ">", -(2**63)))
    assert not implies(Compare(x, "<>", 1), in_list(x, [1, None], negated=True))
    assert not implies(in_list(x, [], negated=True), IsNull(x, negated=True))


def test_int_literal_on_decimal_column_is_not_discrete():
    """Regression: value sets treated an int literal on a decimal column as a
    point of a discrete domain (`d > 1` became `d >= 2`). Because
    Compare(D, '>', 1) == Compare(D, '>', Decimal(1)), atom_sets' cache then
    handed the same wrong sets to Decimal literals too."""
    assert not implies(Compare(D, ">", 1), Compare(D, ">=", 2))
    assert not implies(Compare(D, ">", _d("1")), Compare(D, ">=", _d("2")))
    assert not implies(Compare(D, "<", 2), Compare(D, "<", _d("1.01")))
    assert not implies(Compare(D, "<", _d("2.00")), Compare(D, "<", _d("1.01")))
    assert not implies(Between(D, _d("1.00"), _d("2.00")), in_list(D, [1, 2]))
    assert not disjoint(Compare(D, "<", 2), Compare(D, ">", 1))
    assert not disjoint(Compare(D, "<>", 1), Between(D, _d("0.99"), _d("1.01")))
    block = {"d": ColumnStats(_d("1.10"), _d("1.90"), 0, 3)}
    assert might_match(Compare(D, ">", 1), block, 3)
    assert might_match(Compare(D, "<>", 1), block, 3)
    assert might_match(Compare(D, ">", _d("1.5")), {"d": ColumnStats(1, 2, 0, 3)}, 3)
    # Still complete where it should be.
    assert implies(Compare(D, ">", 1), Compare(D, ">=", 1))
    assert implies(in_list(D, [1, 2]), Between(D, 1, 2))
    assert disjoint(Compare(D, "<", 1), Compare(D, ">", _d("1.00")))


def test_might_match_known_blocks():
    # A decimal block strictly between two ints can hold values > 1.
    stats = {"d": ColumnStats(_d("1.10"), _d("1.90"), 0, 3)}
    assert might_match(Compare(D, ">", 1), stats, 3)
    assert might_match(Compare(D, "<", 2), stats, 3)
    assert not might_match(Compare(D, ">", 2), stats, 3)
    # All-NULL block: only IS NULL can match.
    nulls = {"i": ColumnStats(None, None, 4, 4)}
    assert might_match(IsNull(I), nulls, 4)
    assert not might_match(Compare(I, "=", 1), nulls, 4)
    assert not might_match(in_list(I, [1, None]), nulls, 4)
    assert not might_match(TRUE, nulls, 0)
    # Unknown bounds say nothing, NULLs included.
    unknown = {"i": ColumnStats(None, 3, 1, 4)}
    assert might_match(IsNull(I), unknown, 4)
    assert might_match(Compare(I, ">", 100), unknown, 4)


# ---------------------------------------------------------------------------
# Opaque atoms


def test_opaque_only_proves_identical_deterministic():
    det = Opaque("f(i) > 0", frozenset({"i"}))
    other = Opaque("g(i) > 0", frozenset({"i"}))
    rnd = Opaque("rand() < 0.5", frozenset(), deterministic=False)
    assert implies(det, det)
    assert implies(conj(det, Compare(I, "=", 1)), det)
    assert implies(det, disj(det, Compare(I, "=", 1)))
    assert not implies(det, other)
    assert not implies(det, negate(det))
    assert disjoint(det, negate(det))  # P AND NOT P is never TRUE
    assert not disjoint(det, other)
    assert satisfiable(det)
    assert might_match(det, {"i": ColumnStats(1, 1, 0, 1)}, 1)
    assert can_be_true_on_nulls(det)
    # Nondeterministic: two evaluations may differ, so nothing is proven.
    assert not implies(rnd, rnd)
    assert not implies(conj(rnd, Compare(I, "=", 1)), rnd)
    assert not implies(rnd, disj(rnd, Compare(I, "=", 1)))
    assert not disjoint(rnd, negate(rnd))
    assert satisfiable(conj(rnd, negate(rnd)))
    assert implies(rnd, TRUE)
    assert implies(FALSE, rnd)


# ---------------------------------------------------------------------------
# Serialization and rendering


def _typed(v):
    return (type(v).__name__, str(v))


def _typed_shape(p: Predicate):
    """p with every literal tagged by its type (== alone says 1 == Decimal(1))."""
    out = []
    for a in atoms(p):
        for name in ("value", "low", "high"):
            if hasattr(a, name):
                out.append(_typed(getattr(a, name)))
        if isinstance(a, InList):
            out.append(sorted(_typed(v) for v in a.values))
    return out


@settings(max_examples=1000, **COMMON)
@given(predicates(3))
def test_round_trip(p):
    CASES["round_trip"] += 1
    back = loads(dumps(p))
    assert back == p
    assert _typed_shape(back) == _typed_shape(p)
    assert to_sql(back) == to_sql(p)
    assert isinstance(to_sql(p), str)


def test_render_examples():
    assert to_sql(Like(S, "a\\%c")) == "s LIKE 'a\\\\%c'"
    assert to_sql(Like(S, "a!%c", escape="!")) == "s LIKE 'a!%c' ESCAPE '!'"
    assert to_sql(in_list(I, [2, 1, None], negated=True)) == "i NOT IN (1, 2, NULL)"
    assert to_sql(Between(T, _date(2024, 2, 1), _date(2024, 2, 29), True)) == (
        "t NOT BETWEEN DATE '2024-02-01' AND DATE '2024-02-29'"
    )
    assert to_sql(disj(conj(Compare(I, "=", 1), Compare(J, "=", 2)), IsNull(S))) == (
        "(i = 1 AND j = 2) OR s IS NULL"
    )


# ---------------------------------------------------------------------------
# The evaluator itself (a wrong oracle would make every check above vacuous)


def test_evaluator_basics():
    row = {"i": None, "j": 1, "d": _d("1.50"), "t": _date(2024, 2, 29), "s": "a%c"}
    assert evaluate(Compare(I, "=", 1), row) is None
    assert evaluate(negate(Compare(I, "=", 1)), row) is None
    assert evaluate(in_list(J, [2, None]), row) is None
    assert evaluate(in_list(J, [1, None]), row) is True
    assert evaluate(in_list(J, [2, None], negated=True), row) is None
    assert evaluate(in_list(J, [2], negated=True), row) is True
    assert evaluate(in_list(I, [], negated=True), row) is True
    assert evaluate(in_list(I, [], negated=True), row, legacy_empty_in=True) is None
    assert evaluate(Between(J, 2, 0), row) is False
    assert evaluate(Between(J, 2, 0, negated=True), row) is True
    assert evaluate(Between(I, 0, 2, negated=True), row) is None
    assert evaluate(Like(S, "a\\%c"), row) is True
    assert evaluate(Like(S, "a\\%c"), {**row, "s": "abc"}) is False
    assert evaluate(Like(S, "a%c"), {**row, "s": "abc"}) is True
    assert evaluate(Like(S, "_b%"), {**row, "s": "ab"}) is True
    assert evaluate(Like(S, "_b%"), {**row, "s": "b"}) is False
    assert evaluate(Like(S, "a!%c", escape="!"), row) is True
    assert evaluate(IsNull(I), row) is True
    assert evaluate(ColumnCompare(I, "<", J), row) is None
    assert evaluate(conj(Compare(I, "=", 1), FALSE), row) is False
    assert evaluate(disj(Compare(I, "=", 1), TRUE), row) is True
    assert evaluate(conj(Compare(I, "=", 1), TRUE), row) is None
    assert evaluate(Compare(D, ">", 1), row) is True
    with pytest.raises(ValueError):
        evaluate(Like(S, "a\\b"), row)
    with pytest.raises(Exception):
        evaluate(O1, row)



def test_kept_hash_and_sort_key_equal_the_computed_ones():
    """Nodes keep their hash and canonical sort key; both must be what the fields give."""
    import dataclasses
    import pickle

    from layout_core.predicates import Hop, JoinInduced
    from layout_core.predicates.model import sort_key

    hop = Hop("p", "k", "c", "fk")
    p = conj(Compare(I, "<", 3), disj(InList(S, frozenset({"a", "b"})), Like(S, "x%")),
             JoinInduced((hop,), conj(Compare(J, ">", 1), IsNull(T))), O1)
    for node in [p, *atoms(p)]:
        fields = tuple(getattr(node, f.name) for f in dataclasses.fields(node))
        assert hash(node) == hash(fields) == hash(node)  # first and kept value
        assert sort_key(node) == repr(node) == sort_key(node)
    copy = pickle.loads(pickle.dumps(p))  # the kept values are not pickled
    assert copy == p and hash(copy) == hash(p) and sort_key(copy) == sort_key(p)
    c = Compare(I, "<", 3)
    hash(c)
    changed = dataclasses.replace(c, value=4)
    assert changed != c and hash(changed) == hash(tuple(getattr(changed, f.name) for f in dataclasses.fields(c)))
    assert {conj(c, Compare(J, "=", 1)), conj(Compare(J, "=", 1), Compare(I, "<", 3))} == {conj(c, Compare(J, "=", 1))}


# ---------------------------------------------------------------------------


def test_zz_generated_case_count():
    """The property tests above ran at least 10,000 generated cases in all."""
    if not all(CASES[name] for name in PROPERTY_TESTS):
        pytest.skip(f"only part of the module ran: {dict(CASES)}")
    total = sum(CASES[name] for name in PROPERTY_TESTS)
    print(f"generated cases: {dict(CASES)} total={total}")
    assert total >= 10_000, dict(CASES)
