"""Predicate model and sound reasoning; see model.py, reasoning.py and simplify.py."""

from layout_core.predicates.model import (
    ATOMS, FALSE, TRUE, And, Between, Column, ColumnCompare, Compare, Const, Hop, InList, IsNull,
    JoinInduced, Like, Opaque, Or, Predicate, PredicateVisitor, atoms, conj, conjuncts, disj,
    in_list, map_atoms, negate,
)
from layout_core.predicates.reasoning import (
    ColumnStats, Prepared, can_be_true_on_nulls, disjoint, implies, might_match, satisfiable,
)
from layout_core.predicates.render import identifier, literal, to_sql
from layout_core.predicates.serde import dumps, loads, value_from_json, value_to_json
from layout_core.predicates.simplify import simplify

__all__ = [name for name in dir() if not name.startswith("_")]
