"""What the qd-tree optimizers need from a query log, for one table.

- candidate cuts (MTO §4.1.1): the simple predicates the queries put on the
  table, and the join-induced predicates their joins push onto it (only from a
  primary key side to a foreign key side), most frequent first; plus range
  cuts between the literals the queries compare one column with
  (`literal_range_cuts`), which also split the values no training query used,
  and the per-column hulls of OR predicates (`or_hull_cuts`);
- the workload matrices: for every query reference to the table and every
  cut, whether the query's predicate implies the cut or is disjoint with it
  (proven by the same sound reasoning the router uses);
- the columns the queries filter most (for curve layouts) and those they
  filter by a range (a tree leaf's rows are sorted by the first before it is
  cut into blocks: `optimizers.base.sort_columns`).
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

import numpy as np

from layout_core.algorithms.types import Workload
from layout_core.predicates import (
    Between, Compare, InList, JoinInduced, Opaque, Or, Predicate, Prepared, atoms, conjuncts, to_sql,
)
from layout_core.sql.analysis import QueryAnalysis, candidate_cuts

DEFAULT_MAX_CUTS_PER_KIND = 96


def cuts_per_kind(max_cuts: int | str, references: int) -> int:
    """How many cuts of each kind a tree may choose from: `max_cuts`, or with
    "auto" two per training reference to the table, at least 96. A fixed 96
    starves larger logs: with 24 queries per TPC-H template (264 training
    queries) lineitem is offered 274 join-induced cuts and part 199 simple
    ones (about two per reference), and B1 at SF 0.1 read 5.2% more blocks
    with 96 than uncapped (docs/benchmarks.md). The cap still bounds the
    featurize and optimize work by the log's size."""
    if max_cuts == "auto":
        return max(DEFAULT_MAX_CUTS_PER_KIND, 2 * references)
    return int(max_cuts)


def usable_cut(p: Predicate) -> bool:
    """A cut must give a row the same bit every time: no nondeterministic function."""
    return not any(isinstance(a, Opaque) and not a.deterministic for a in atoms(p))


def _most_frequent(counter: Counter, limit: int) -> list:
    return [p for p, _ in sorted(counter.items(), key=lambda kv: (-kv[1], to_sql(kv[0])))][:limit]


def _equality_literals(p: Predicate) -> tuple | None:
    """(column, literals) of `col = v` or `col IN (...)`, else None."""
    if isinstance(p, Compare) and p.op == "=":
        return p.column, (p.value,)
    if isinstance(p, InList) and not p.negated:
        return p.column, tuple(p.values)
    return None


def _path_and_source(cut: Predicate) -> tuple:
    """(induction path, source predicate) of a join-induced cut; (None, cut) of a simple one."""
    return (cut.hops, cut.source) if isinstance(cut, JoinInduced) else (None, cut)


def _on_path(hops, p: Predicate) -> Predicate:
    """p as a cut on the target table: itself, or induced along `hops`."""
    return p if hops is None else JoinInduced(hops, p)


def literal_range_cuts(cuts: Counter) -> Counter:
    """Cuts `col < v` between the literals that equality cuts (`col = v`,
    `col IN (...)`) compare one column with, counted as often as those cuts.

    A workload whose parameters change from run to run (a brand, a nation, a
    ship mode) meets values tomorrow that no training query used, so no
    equality cut of today's log is implied by them. A range cut between
    today's literals is still disjoint with one side for any value, so a tree
    that splits on it halves what such a query reads. For join-induced cuts
    the ranges are put on the source column, per induction path. Literals of
    different types are not compared."""
    values: dict[tuple, set] = {}
    counts: Counter = Counter()
    for cut, n in cuts.items():
        hops, source = _path_and_source(cut)
        found = _equality_literals(source)
        if found is None:
            continue
        column, literals = found
        for v in literals:
            if v is None:
                continue
            group = (hops, column, type(v).__name__)
            values.setdefault(group, set()).add(v)
            counts[group] += n
    ranges: Counter = Counter()
    for group, vs in values.items():
        hops, column, _ = group
        for v in sorted(vs)[1:]:
            ranges[_on_path(hops, Compare(column, "<", v))] = counts[group]
    return ranges


def _column_hull(disjunct: Predicate) -> dict:
    """{column: (values or None, low or None, high or None)} that one OR branch
    bounds its columns to, from its top-level conjuncts. Bounds are kept
    non-strict and an atom with a NULL literal is ignored: a hull may only be
    looser than the branch."""
    out: dict = {}
    for atom in conjuncts(disjunct):
        if isinstance(atom, (Compare, InList, Between)) and not getattr(atom, "negated", False):
            if None in (atom.values if isinstance(atom, InList) else (atom.low, atom.high)
                        if isinstance(atom, Between) else (atom.value,)):
                continue
            values, low, high = out.get(atom.column, (None, None, None))
            found = _equality_literals(atom)
            if found is not None:
                literals = set(found[1])
                values = literals if values is None else values & literals
            elif isinstance(atom, Between):
                low = atom.low if low is None else max(low, atom.low)
                high = atom.high if high is None else min(high, atom.high)
            elif atom.op in (">", ">="):
                low = atom.value if low is None else max(low, atom.value)
            elif atom.op in ("<", "<="):
                high = atom.value if high is None else min(high, atom.value)
            out[atom.column] = (values, low, high)
    return out


def _or_hulls(p: Predicate) -> list[Predicate]:
    """What every branch of OR `p` says about one column: the union of their
    literals (`col IN (...)`), or the interval around their bounds."""
    branches = [_column_hull(d) for d in p.children]
    hulls: list[Predicate] = []
    for column in set.intersection(*(set(b) for b in branches)):
        values, lows, highs = zip(*(b[column] for b in branches))
        if all(v is not None for v in values) and any(values):
            hulls.append(InList(column, frozenset().union(*values)))
        low = min(lows) if all(v is not None for v in lows) else None
        high = max(highs) if all(v is not None for v in highs) else None
        if low is not None and high is not None:
            hulls.append(Between(column, low, high))
        elif low is not None or high is not None:
            hulls.append(Compare(column, ">=", low) if low is not None else Compare(column, "<=", high))
    return hulls


def or_hull_cuts(cuts: Counter) -> Counter:
    """Cuts implied by an OR cut: per column that every branch bounds, the union
    of the branches' literals or the interval around their bounds, counted as
    often as the OR cuts they come from.

    TPC-H q19 ORs three (brand, container set, size range) branches. Its
    brands change from run to run, its container sets and size ranges do not:
    the hulls `p_container IN (...)` and `p_size BETWEEN 1 AND 15` are implied
    by every instance, also by those no training query was. Join-induced OR
    cuts give join-induced hulls on the same path."""
    hulls: Counter = Counter()
    for cut, n in cuts.items():
        hops, source = _path_and_source(cut)
        if not isinstance(source, Or):
            continue
        try:
            found = _or_hulls(source)
        except TypeError:  # literals of different types: no hull
            continue
        for hull in found:
            hulls[_on_path(hops, hull)] += n
    return hulls


def candidate_cut_lists(analyses: Sequence[QueryAnalysis], table: str, key_hops,
                        max_per_kind: int = DEFAULT_MAX_CUTS_PER_KIND, references: Sequence[bool] | None = None
                        ) -> tuple[list[Predicate], list[JoinInduced]]:
    """(simple cuts, join-induced cuts) of `table`, each the `max_per_kind` most
    frequent (a query counts once per distinct cut; a range cut between
    literals or an OR's hull as often as the cuts it comes from).
    `references`: only the references to `table` marked True, in the order
    `workload_matrices` gives them rows (default: all)."""
    simple, induced = Counter(), Counter()
    refs = [(a, ref) for a in analyses for ref in a.refs_of_table(table)]
    if references is not None:
        refs = [pair for pair, keep in zip(refs, references, strict=True) if keep]
    for a, ref in refs:
        s, i = candidate_cuts(a, ref.key, key_hops)
        simple.update({c for c in s if usable_cut(c)})
        induced.update({c for c in i if usable_cut(c.source)})
    for cuts in (simple, induced):
        derived = literal_range_cuts(cuts) + or_hull_cuts(cuts)
        cuts.update(derived)
    return _most_frequent(simple, max_per_kind), _most_frequent(induced, max_per_kind)


def workload_matrices(analyses: Sequence[QueryAnalysis], table: str, key_hops,
                      cuts: Sequence[Predicate]) -> Workload:
    """implies/disjoint of every reference to `table` (one row each) against `cuts`."""
    preds = [a.predicate(ref.key, key_hops) for a in analyses for ref in a.refs_of_table(table)]
    shape = (len(preds), len(cuts))
    prepared = [Prepared(q) for q in preds]  # each reference's DNF once, not once per cut
    imp = np.array([[q.implies(c) for c in cuts] for q in prepared], dtype=bool).reshape(shape)
    dis = np.array([[q.disjoint(c) for c in cuts] for q in prepared], dtype=bool).reshape(shape)
    return Workload(imp, dis)


def _column_counts(analyses: Sequence[QueryAnalysis], table: str, keep=lambda atom: True, key_hops=None
                   ) -> list[tuple[str, int]]:
    """(column, references) of `table`'s columns in the kept filter atoms (with `key_hops`:
    the atoms of the whole predicate, join-induced ones included), most often first (ties:
    by name); a reference counts once per column."""
    counts = Counter()
    for a in analyses:
        for ref in a.refs_of_table(table):
            p = a.filter(ref.key) if key_hops is None else a.predicate(ref.key, key_hops)
            counts.update({c for atom in atoms(p) if keep(atom) for c in atom.columns()})
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def filtered_columns(analyses: Sequence[QueryAnalysis], table: str, k: int) -> list[str]:
    """The k columns of `table` most often filtered (ties: by name)."""
    return [c for c, _ in _column_counts(analyses, table)][:k]


RANGE_OPS = ("<", "<=", ">", ">=")


def induced_columns(analyses: Sequence[QueryAnalysis], table: str, key_hops) -> list[tuple[str, int]]:
    """(column, references) of `table`'s foreign keys through which filters on the tables
    they reference reach it (the columns of the join-induced atoms of its predicates), most
    often first (ties: by name); a reference counts once per column."""
    return _column_counts(analyses, table, lambda atom: isinstance(atom, JoinInduced), key_hops)


def is_range_atom(p: Predicate) -> bool:
    """A comparison with <, <=, >, >= or a BETWEEN: what a zone map of a sorted column prunes best."""
    return (isinstance(p, Compare) and p.op in RANGE_OPS) or isinstance(p, Between)


def range_filtered_columns(analyses: Sequence[QueryAnalysis], table: str) -> list[tuple[str, int]]:
    """(column, references) of `table`'s columns that queries filter by a range
    (`is_range_atom`), most often first (ties: by name); a reference counts once per column."""
    return _column_counts(analyses, table, is_range_atom)
