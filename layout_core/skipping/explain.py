"""Why each skipped block was skipped: `layout explain`.

The same proofs as the router (`skipping.router`), attributed: for every
block a reference does not read, the first of these that rules it out:

- the query's predicate on the table is never TRUE;
- a cut the predicate implies and no row of the block satisfies, or one it
  is disjoint with and every row satisfies (`cut <i>: <sql>`);
- a tree of the layout admitting none of the block's leaves (`tree <t>`);
- the statistics (range sets, min/max, NULL counts) of one conjunct of the
  table's filter (`statistics: <sql>`);
- a diP of a join (`diP a.x -> b.y`).

The blocks read are exactly the route's (the explanation is built from the
same route), so explaining never changes what a query reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from layout_core.predicates import conjuncts, satisfiable, to_sql
from layout_core.base.schema import Schema
from layout_core.sql.analysis import DEFAULT_MAX_DEPTH, QueryError, analyze
from layout_core.skipping.router import (
    LayoutIndex, Route, RoutingIndex, admitted_leaves, cut_masks, route_analysis,
)
from layout_core.skipping.zonemaps import might_match_blocks


@dataclass(frozen=True)
class RefExplanation:
    ref: str
    table: str
    alias: str
    blocks_total: int
    blocks_read: int
    skipped: tuple[tuple[int, str], ...]  # (block id, what proved it empty)
    read_all: bool = False

    def to_json(self) -> dict:
        return {"table": self.table, "alias": self.alias, "blocks_total": self.blocks_total,
                "blocks_read": self.blocks_read, "read_all": self.read_all,
                "skipped": [{"block_id": b, "by": by} for b, by in self.skipped]}


@dataclass(frozen=True)
class Explanation:
    route: Route
    refs: tuple[RefExplanation, ...]

    def to_json(self) -> dict:
        return {"analyzed": self.route.analyzed, "warnings": list(self.route.warnings),
                "dips_built": self.route.dips_built, "dip_notes": list(self.route.dip_notes),
                "refs": [r.to_json() for r in self.refs]}


def explain_query(sql: str, index: RoutingIndex, schema: Schema, dips: bool = True,
                  max_depth: int = DEFAULT_MAX_DEPTH) -> Explanation:
    try:
        analysis = analyze(sql, schema)
    except QueryError as e:
        return Explanation(Route(sql, (), (f"reading everything: {e}",), analyzed=False), ())
    route = route_analysis(analysis, index, schema, max_depth, dips)
    key_hops = schema.key_hops()
    by_dip: dict[tuple[str, int], str] = {}
    names = {r.ref: r.alias or r.table for r in route.refs}
    for effect in route.dips:
        for part in effect.removed:
            for block in part:
                by_dip.setdefault((effect.edge.to_ref, block), effect.describe(names))
    refs = []
    for ref, routed in zip(analysis.refs, route.refs):
        if routed.read_all:
            refs.append(RefExplanation(ref.key, ref.table, ref.alias, 0, 0, (), True))
            continue
        query_predicate = analysis.predicate(ref.key, key_hops, max_depth)
        table_filter = analysis.filter(ref.key)
        skipped = []
        read = set(routed.blocks)
        for layout in index.layouts[ref.table]:
            reasons = block_reasons(query_predicate, table_filter, layout)
            for i, block in enumerate(layout.block_ids):
                if block in read:
                    continue
                by = reasons[i] or by_dip.get((ref.key, block), "not proven (a bug: the route skipped it)")
                skipped.append((block, by))
        refs.append(RefExplanation(ref.key, ref.table, ref.alias, routed.blocks_total, len(routed.blocks),
                                   tuple(skipped)))
    return Explanation(route, tuple(refs))


def block_reasons(query_predicate, table_filter, layout: LayoutIndex) -> list[str | None]:
    """Per block, the first proof that the query needs none of its rows (None: none)."""
    n = len(layout.block_ids)
    if not satisfiable(query_predicate):
        return ["the query's predicate on this table is never TRUE"] * n
    reasons: list[str | None] = [None] * n
    masks = cut_masks(query_predicate, layout.cuts, layout.cuts_by_key)
    for i in range(n):
        ruled = masks.implied & ~layout.union_bits[i] | masks.disjoint & layout.all_bits[i]
        if ruled:
            j = (ruled & -ruled).bit_length() - 1  # the lowest cut position that proves it
            reasons[i] = f"cut {j}: {to_sql(layout.cuts[j])}"
    admitted = admitted_leaves(masks, layout.tree_routes)
    for t, (tree, leaves) in enumerate(zip(layout.tree_routes, admitted)):
        for i in range(n):
            if reasons[i] is None and not tree.blocks[i] & leaves:
                reasons[i] = f"tree {t}"
    if admitted and layout.cell_index is not None:
        for i in np.flatnonzero(~layout.cell_index.blocks_with_admitted_cell(admitted, layout.tree_routes)):
            reasons[i] = reasons[i] or "the trees: no cell of the block is admitted by all of them"
    empty = layout.zone_maps.row_counts == 0
    for i in np.flatnonzero(empty):
        reasons[i] = reasons[i] or "no rows"
    for part in conjuncts(table_filter):
        ruled_out = ~might_match_blocks(part, layout.zone_maps)
        for i in np.flatnonzero(ruled_out):
            reasons[i] = reasons[i] or f"statistics: {to_sql(part)}"
    return reasons
