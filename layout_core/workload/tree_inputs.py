"""What the qd-tree optimizers need from a query log, for one table.

- candidate cuts (MTO §4.1.1): the simple predicates the queries put on the
  table, and the join-induced predicates their joins push onto it (only from a
  primary key side to a foreign key side), most frequent first;
- the workload matrices: for every query reference to the table and every
  cut, whether the query's predicate implies the cut or is disjoint with it
  (proven by the same sound reasoning the router uses);
- the columns the queries filter most, for curve layouts, and the column a
  tree leaf's rows are sorted by before it is cut into blocks
  (`leaf_sort_column`).
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from ..optimize.qdtree import Workload
from ..predicates import Between, Compare, JoinInduced, Opaque, Predicate, atoms, disjoint, implies, to_sql
from ..sql.analysis import QueryAnalysis, candidate_cuts

DEFAULT_MAX_CUTS_PER_KIND = 48


def usable_cut(p: Predicate) -> bool:
    """A cut must give a row the same bit every time: no nondeterministic function."""
    return not any(isinstance(a, Opaque) and not a.deterministic for a in atoms(p))


def _most_frequent(counter: Counter, limit: int) -> list:
    return [p for p, _ in sorted(counter.items(), key=lambda kv: (-kv[1], to_sql(kv[0])))][:limit]


def candidate_cut_lists(analyses: Sequence[QueryAnalysis], table: str, key_hops,
                        max_per_kind: int = DEFAULT_MAX_CUTS_PER_KIND
                        ) -> tuple[list[Predicate], list[JoinInduced]]:
    """(simple cuts, join-induced cuts) of `table`, each the `max_per_kind` most
    frequent (a query counts once per distinct cut)."""
    simple, induced = Counter(), Counter()
    for a in analyses:
        for ref in a.refs_of_table(table):
            s, i = candidate_cuts(a, ref.key, key_hops)
            simple.update({c for c in s if usable_cut(c)})
            induced.update({c for c in i if usable_cut(c.source)})
    return _most_frequent(simple, max_per_kind), _most_frequent(induced, max_per_kind)


def workload_matrices(analyses: Sequence[QueryAnalysis], table: str, key_hops,
                      cuts: Sequence[Predicate]) -> Workload:
    """implies/disjoint of every reference to `table` (one row each) against `cuts`."""
    preds = [a.predicate(ref.key, key_hops) for a in analyses for ref in a.refs_of_table(table)]
    shape = (len(preds), len(cuts))
    imp = np.array([[implies(q, c) for c in cuts] for q in preds], dtype=bool).reshape(shape)
    dis = np.array([[disjoint(q, c) for c in cuts] for q in preds], dtype=bool).reshape(shape)
    return Workload(imp, dis)


def _column_counts(analyses: Sequence[QueryAnalysis], table: str, keep=lambda atom: True
                   ) -> list[tuple[str, int]]:
    """(column, references) of `table`'s columns in the kept filter atoms, most often
    first (ties: by name); a reference counts once per column."""
    counts = Counter()
    for a in analyses:
        for ref in a.refs_of_table(table):
            counts.update({c for atom in atoms(a.filter(ref.key)) if keep(atom) for c in atom.columns()})
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def filtered_columns(analyses: Sequence[QueryAnalysis], table: str, k: int) -> list[str]:
    """The k columns of `table` most often filtered (ties: by name)."""
    return [c for c, _ in _column_counts(analyses, table)][:k]


RANGE_OPS = ("<", "<=", ">", ">=")


def is_range_atom(p: Predicate) -> bool:
    """A comparison with <, <=, >, >= or a BETWEEN: what a zone map of a sorted column prunes best."""
    return (isinstance(p, Compare) and p.op in RANGE_OPS) or isinstance(p, Between)


def range_filtered_columns(analyses: Sequence[QueryAnalysis], table: str) -> list[tuple[str, int]]:
    """(column, references) of `table`'s columns that queries filter by a range
    (`is_range_atom`), most often first (ties: by name); a reference counts once per column."""
    return _column_counts(analyses, table, is_range_atom)


def leaf_sort_column(analyses: Sequence[QueryAnalysis], table: str, fallback: Sequence[str]) -> list[str]:
    """The columns a tree leaf's rows are sorted by before the leaf is cut into blocks.

    Inside a leaf, blocks are ranges of this order, so per-block zone maps
    prune on it. The cuts already separate rows by the workload's predicates;
    what they cannot express well are ranges whose bounds differ from query to
    query, which is what a sorted column with narrow zone maps handles. So:
    the column that the most training references filter by a range, else
    `fallback` (e.g. the primary key)."""
    ranked = range_filtered_columns(analyses, table)
    return [ranked[0][0]] if ranked else list(fallback)
