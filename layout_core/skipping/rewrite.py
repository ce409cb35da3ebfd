"""Add the router's block lists to a query's SQL.

Each routed table reference `lineitem AS l` becomes
`(SELECT * FROM lineitem WHERE dt IN (...) AND block_id IN (...)) AS l`,
so Spark prunes the `block_id=` folders (and `dt=` partitions) it need not
list. The rewrite works on a fresh parse of the original SQL, matching table
references by their position (`parse_tagged`), so the rest of the query is
kept as written.
"""

from __future__ import annotations

from sqlglot import exp

from layout_core.base.names import BLOCK_ID_COLUMN
from layout_core.predicates import identifier, literal
from layout_core.sql.analysis import QueryError, parse_tagged
from layout_core.skipping.router import RefRoute, Route, RoutingIndex



def block_condition(ref: RefRoute, partition_column: str | None) -> str:
    """The SQL condition selecting a reference's routed blocks (FALSE when none)."""
    if not ref.blocks:
        return "FALSE"
    blocks = f"{BLOCK_ID_COLUMN} IN ({', '.join(str(b) for b in sorted(ref.blocks))})"
    partitions = sorted({p.partition for p in ref.partitions if p.blocks and p.partition})
    if partition_column and partitions:
        listed = ", ".join(literal(p) for p in partitions)
        return f"{identifier(partition_column)} IN ({listed}) AND {blocks}"
    return blocks


def rewrite_sql(route: Route, index: RoutingIndex) -> str:
    """The query with block filters on every reference that has an active layout.
    A query the router could not analyze comes back unchanged."""
    if not route.analyzed:
        return route.sql
    try:
        parsed = parse_tagged(route.sql)
    except QueryError:
        return route.sql
    for table in parsed.tables:
        ref = route.ref(table.meta["ref_id"])
        if ref is None or ref.read_all:
            continue
        alias = table.alias_or_name
        bare = table.copy()
        bare.set("alias", None)
        condition = block_condition(ref, index.partition_columns.get(ref.table))
        select = exp.select("*").from_(bare).where(condition, dialect="spark")
        table.replace(select.subquery(alias))
    return parsed.tree.sql(dialect="spark")
