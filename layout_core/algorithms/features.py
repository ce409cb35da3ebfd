"""Feature selection from a query workload (Sun et al., SIGMOD'14, Section 3).

A query is the list of its conjunct predicates on the target table (each may be
a disjunction). A *feature* is a set of predicates whose conjunction subsumes
(is implied by) many queries; a block whose union bit for the feature is 0 can
be skipped by every query the feature subsumes.

Steps (`select_features`):

1. universe: the distinct predicates of the workload (after `exclude`);
2. augmentation (`augment_queries`): each query also gets every predicate of
   the universe it implies, so an itemset's occurrence count equals the number
   of queries it subsumes;
3. frequent itemset mining (mlxtend FP-growth) with absolute support T;
4. redundancy elimination: visit itemsets from most specific to most general
   and keep one only when it subsumes at least T queries not yet covered (I(F));
5. the top `num_features` by I(F).

All orders are deterministic: ties are broken by the predicates' SQL text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np
import pandas as pd
from mlxtend.frequent_patterns import fpgrowth

from layout_core.predicates import Predicate, conj, implies, to_sql

__all__ = ["Feature", "augment_queries", "select_features"]

# Above this many itemsets with the same (size, support), the pairwise
# implication refinement of the visiting order is skipped (SQL order only).
_REFINE_LIMIT = 64


@dataclass(frozen=True)
class Feature:
    predicate: Predicate  # conj of `items`
    items: tuple[Predicate, ...]  # sorted by SQL text
    support: int  # number of queries whose augmented set contains `items`
    gain: int  # I(F): queries first covered by this feature in the elimination pass


class _Implications:
    """Memoized `implies` calls with a cheap column pre-filter.

    `implies(a, c)` is only attempted when c's columns all occur in a: the
    cases this skips (a unsatisfiable, c a tautology) make useless features.
    """

    def __init__(self) -> None:
        self._cache: dict[tuple[Predicate, Predicate], bool] = {}
        self._sql: dict[Predicate, str] = {}

    def __call__(self, a: Predicate, c: Predicate) -> bool:
        key = (a, c)
        hit = self._cache.get(key)
        if hit is None:
            hit = c.columns() <= a.columns() and implies(a, c)
            self._cache[key] = hit
        return hit

    def sql(self, p: Predicate) -> str:
        s = self._sql.get(p)
        if s is None:
            s = self._sql[p] = to_sql(p)
        return s


def _kept(query: Sequence[Predicate], exclude) -> tuple[Predicate, ...]:
    return tuple(p for p in query if exclude is None or not exclude(p))


def _augment(
    queries: Sequence[Sequence[Predicate]],
    exclude: Callable[[Predicate], bool] | None,
    imp: _Implications,
) -> tuple[list[Predicate], list[frozenset[Predicate]]]:
    """(universe sorted by SQL text, augmented item set of each query)."""
    kept = [_kept(q, exclude) for q in queries]
    universe = sorted({p for q in kept for p in q}, key=imp.sql)
    by_set: dict[tuple[frozenset, frozenset], frozenset[Predicate]] = {}
    out: list[frozenset[Predicate]] = []
    for q, k in zip(queries, kept):
        key = (frozenset(q), frozenset(k))
        aug = by_set.get(key)
        if aug is None:
            items = set(k)
            # The whole query filter (excluded conjuncts included: they only
            # narrow the query, so implication from it stays sound).
            whole = conj(*q) if q else None
            for c in universe:
                if c in items:
                    continue
                if any(imp(p, c) for p in k) or (
                    whole is not None and len(q) > 1 and imp(whole, c)
                ):
                    items.add(c)
            aug = by_set[key] = frozenset(items)
        out.append(aug)
    return universe, out


def augment_queries(
    queries: Sequence[Sequence[Predicate]],
    exclude: Callable[[Predicate], bool] | None = None,
) -> list[frozenset[Predicate]]:
    """Sun's predicate augmentation: each query's (non-excluded) predicates plus
    every predicate of the workload's universe that the query implies (tested
    per single query predicate and for the conjunction of the whole query)."""
    return _augment(queries, exclude, _Implications())[1]


def _reduce(items: Iterable[Predicate], imp: _Implications) -> tuple[Predicate, ...]:
    """Drop items implied by another kept item of the same set (their
    conjunction is unchanged); of mutually implying items keep the last by SQL."""
    ordered = sorted(items, key=imp.sql)
    dropped: set[int] = set()
    for i, p in enumerate(ordered):
        for j, q in enumerate(ordered):
            if i != j and j not in dropped and imp(q, p):
                dropped.add(i)
                break
    return tuple(p for i, p in enumerate(ordered) if i not in dropped)


def select_features(
    queries: Sequence[Sequence[Predicate]],
    num_features: int,
    min_support: int,
    exclude: Callable[[Predicate], bool] | None = None,
    *,
    max_len: int = 3,
    simplify: bool = True,
) -> list[Feature]:
    """Sun's workload analysis: features subsuming >= `min_support` (T) queries,
    redundant ones removed, the `num_features` best by gain I(F), then SQL text.

    `exclude(p)` drops predicates before mining (e.g. date filters handled by
    month partitions). `max_len` caps the itemset size given to FP-growth.
    With `simplify`, an itemset item implied by another item of the same set
    is dropped (e.g. {revenue > 32, revenue > 21} becomes {revenue > 32});
    equal reduced sets are merged. This does not change any feature's meaning.
    """
    if min_support < 1:
        raise ValueError("min_support must be >= 1")
    if num_features < 0:
        raise ValueError("num_features must be >= 0")
    n = len(queries)
    if n == 0 or num_features == 0 or min_support > n:
        return []
    imp = _Implications()
    universe, augmented = _augment(queries, exclude, imp)
    if not universe:
        return []

    # (c) frequent itemsets over the augmented sets.
    index = {p: i for i, p in enumerate(universe)}
    onehot = np.zeros((n, len(universe)), dtype=bool)
    for r, aug in enumerate(augmented):
        onehot[r, [index[p] for p in aug]] = True
    frame = pd.DataFrame(onehot, columns=range(len(universe)))

    # Half a query below T so float rounding cannot drop an itemset at exactly T;
    # supports are recounted exactly below.
    mined = fpgrowth(frame, min_support=(min_support - 0.5) / n, max_len=max_len)
    itemsets: set[tuple[Predicate, ...]] = set()
    for cols in mined["itemsets"]:
        items = [universe[c] for c in cols]
        itemsets.add(_reduce(items, imp) if simplify else tuple(sorted(items, key=imp.sql)))

    # Which queries each itemset subsumes (items all in the augmented set).
    def covered(items: tuple[Predicate, ...]) -> np.ndarray:
        return onehot[:, [index[p] for p in items]].all(axis=1)

    candidates = []
    for items in itemsets:
        mask = covered(items)
        support = int(mask.sum())
        if support >= min_support:
            pred = conj(*items)
            candidates.append((items, pred, imp.sql(pred), mask, support))

    # (d) redundancy elimination, most specific first.
    candidates.sort(key=lambda c: (-len(c[0]), c[4], c[2]))
    candidates = _refine_order(candidates, imp)
    covered_so_far = np.zeros(n, dtype=bool)
    kept: list[tuple[int, str, Feature]] = []
    for items, pred, sql, mask, support in candidates:
        gain = int((mask & ~covered_so_far).sum())
        if gain < min_support:
            continue
        covered_so_far |= mask
        kept.append((gain, sql, Feature(pred, items, support, gain)))

    # (e) best gains first.
    kept.sort(key=lambda k: (-k[0], k[1]))
    return [f for _, _, f in kept[:num_features]]


def _refine_order(candidates: list, imp: _Implications) -> list:
    """Within runs of equal (size, support), put an itemset before the ones it
    strictly implies: rank each by how many run members strictly imply it."""
    out: list = []
    start = 0
    while start < len(candidates):
        end = start
        key = (len(candidates[start][0]), candidates[start][4])
        while end < len(candidates) and (len(candidates[end][0]), candidates[end][4]) == key:
            end += 1
        run = candidates[start:end]
        if 1 < len(run) <= _REFINE_LIMIT:
            preds = [c[1] for c in run]
            rank = []
            for i, p in enumerate(preds):
                rank.append(
                    sum(
                        1
                        for j, q in enumerate(preds)
                        if i != j and imp(q, p) and not imp(p, q)
                    )
                )
            run = [c for _, c in sorted(zip(rank, run), key=lambda t: (t[0], t[1][2]))]
        out.extend(run)
        start = end
    return out
