"""Predicate model and sound reasoning; see model.py, reasoning.py and simplify.py."""

from .model import (
    ATOMS,
    FALSE,
    TRUE,
    And,
    Between,
    Column,
    ColumnCompare,
    Compare,
    Const,
    Hop,
    InList,
    IsNull,
    JoinInduced,
    Like,
    Opaque,
    Or,
    Predicate,
    PredicateVisitor,
    atoms,
    conj,
    conjuncts,
    disj,
    in_list,
    map_atoms,
    negate,
)
from .reasoning import (
    ColumnStats,
    Prepared,
    can_be_true_on_nulls,
    disjoint,
    implies,
    might_match,
    satisfiable,
)
from .render import identifier, literal, to_sql
from .serde import dumps, loads, value_from_json, value_to_json
from .simplify import simplify

__all__ = [name for name in dir() if not name.startswith("_")]
