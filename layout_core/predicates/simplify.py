"""Small equivalence-preserving rewrites of predicates, applied in order.

Each rule takes a predicate and returns an equivalent one (same truth value,
TRUE/FALSE/UNKNOWN, on every row), so the rules can never make routing
unsound; they make predicates shorter and easier to prove things about.
"""

from __future__ import annotations

from typing import Callable

from layout_core.predicates.model import And, Compare, InList, Or, Predicate, conj, conjuncts, disj


def _rewrite_ors(p: Predicate, rewrite: Callable[[list[Predicate]], Predicate]) -> Predicate:
    """p with every OR replaced by rewrite(its rewritten children), bottom up
    (through ANDs and ORs; other nodes are kept)."""
    if isinstance(p, And):
        return conj(_rewrite_ors(c, rewrite) for c in p.children)
    if not isinstance(p, Or):
        return p
    return rewrite([_rewrite_ors(c, rewrite) for c in p.children])


def _equality_values(p: Predicate):
    """(column, values) when p is `c = v` or `c IN (...)` without NULL, else None."""
    if isinstance(p, Compare) and p.op == "=":
        return p.column, {p.value}
    if isinstance(p, InList) and not p.negated and not p.has_null:
        return p.column, set(p.values)
    return None


def _equalities_to_in(children: list[Predicate]) -> Predicate:
    parts = [_equality_values(c) for c in children]
    if all(parts) and len({col for col, _ in parts}) == 1:
        values = set().union(*(vals for _, vals in parts))
        return InList(parts[0][0], frozenset(values), False, False)
    return disj(children)


def _factor_out_common(children: list[Predicate]) -> Predicate:
    sets = [set(conjuncts(c)) for c in children]
    common = set.intersection(*sets)
    if not common:
        return disj(children)
    rest = disj(conj(s - common) for s in sets)
    return conj(*sorted(common, key=repr), rest)


def or_of_equalities_to_in(p: Predicate) -> Predicate:
    """c = 1 OR c = 2 OR c IN (3)  ->  c IN (1, 2, 3)."""
    return _rewrite_ors(p, _equalities_to_in)


def factor_common_conjuncts(p: Predicate) -> Predicate:
    """(a AND b) OR (a AND c)  ->  a AND (b OR c)."""
    return _rewrite_ors(p, _factor_out_common)


RULES = (factor_common_conjuncts, or_of_equalities_to_in)


def simplify(p: Predicate) -> Predicate:
    for rule in RULES:
        p = rule(p)
    return p
