"""Column resolution: each column of a parsed query tied to the FROM item it reads, in place.

sqlglot's `qualify` does this and much more: it expands stars, alias
references, positional GROUP BY and USING, and quotes every identifier. It
costs about 2 ms a query, as much as the rest of the analysis. `resolve_columns`
does only what the analysis needs, for plain shapes: each column is found in
exactly one FROM or JOIN item of its SELECT, or, in a subquery, of an
enclosing SELECT.

For any other shape the answer is None, and the caller lets `qualify` resolve
the query. That covers stars in a derived table, column alias lists, USING,
a column that names a projection alias, positional GROUP BY, an ambiguous or
unknown column, and table functions, lambdas and struct fields. Both ways give
the same analysis: tests/unit/sql/test_columns.py compares them on every
benchmark's queries and on the tests' query shapes.
"""

from __future__ import annotations

from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.optimizer.scope import Scope, ScopeType, traverse_scope

from layout_core.base.schema import Schema

# Constructs whose columns `qualify` resolves by rules of its own.
UNHANDLED = (exp.Lambda, exp.Dot, exp.Lateral, exp.Unnest, exp.Values, exp.Pivot, exp.UDTF, exp.Into)


def resolve_columns(tree: exp.Expression, schema: Schema, surveyed: bool = False) -> list[Scope] | None:
    """Set `table` on every column of `tree` that lacks one, from the schema and the query's
    own derived tables and CTEs; returns the query's scopes, or None for a shape left to
    `qualify` (see the module docstring). Identifiers are normalized (lower case) either way,
    as `qualify` would. Nothing else changes before the answer is known. `surveyed`: the
    caller has found no UNHANDLED construct in the tree (`sql.analysis.parse_tagged`)."""
    normalize_identifiers(tree, dialect="spark")
    if not surveyed and tree.find(*UNHANDLED) is not None:
        return None
    scopes = list(traverse_scope(tree))
    items: dict[int, dict[str, frozenset[str]]] = {}  # id(scope) -> FROM/JOIN alias -> its column names
    for scope in scopes:
        if isinstance(scope.expression, exp.Select):
            found = _from_items(scope, schema)
            if found is None:
                return None
            items[id(scope)] = found
        elif scope.expression.args.get("order") is not None:
            return None  # a set operation's ORDER BY names its outputs: qualify checks those
    plan = []
    for scope in scopes:
        if id(scope) not in items:
            continue
        select = scope.expression
        if not _plain_projections(scope) or _positional_group(select):
            return None
        renamed: dict[str, int] = {}  # an alias that is not its own column's name -> its first projection
        for i, p in enumerate(select.expressions):
            if isinstance(p, exp.Alias) and not (isinstance(p.this, exp.Column) and p.this.name == p.alias):
                renamed.setdefault(p.alias, i)
        # (scope.columns leaves out ORDER BY and HAVING names of outputs, and lists a subquery's
        # columns that name no table of the subquery among its enclosing SELECT's: those are
        # the subquery's to resolve)
        for column in scope.columns:
            if column.find_ancestor(exp.Select) is not select:
                continue
            if isinstance(column.this, exp.Star) or column.args.get("db") or column.args.get("catalog"):
                return None
            if column.name in renamed and not column.table:
                # it may name the projection, not a source column: qualify expands it (outside
                # the projections, or in a projection after the alias; `sum(x) AS x` reads x)
                position = _projection_of(column, select)
                if position is None or renamed[column.name] < position:
                    return None
            alias = _source_of(column, scope, items)
            if alias is None:
                return None
            if not column.table:
                plan.append((column, alias))
    for column, alias in plan:
        column.set("table", exp.to_identifier(alias))
    for scope in scopes:
        scope.clear_cache()  # (cached column lists and sources are recomputed on the resolved tree)
    return scopes


def _from_items(scope: Scope, schema: Schema) -> dict[str, frozenset[str]] | None:
    """The SELECT's FROM and JOIN items by alias, each with its column names; None for an
    item other than a schema table or a subquery without a column alias list."""
    select = scope.expression
    nodes = [select.args["from_"].this] if select.args.get("from_") is not None else []
    for join in select.args.get("joins") or []:
        if join.args.get("using"):
            return None
        nodes.append(join.this)
    out = {}
    for node in nodes:
        alias_node = node.args.get("alias")
        if alias_node is not None and alias_node.columns:
            return None
        name = node.alias_or_name
        if name in out:
            return None  # two items under one alias
        source = scope.sources.get(name)
        if isinstance(node, exp.Table) and isinstance(source, exp.Table):
            if node.args.get("db") or node.args.get("catalog") or not isinstance(node.this, exp.Identifier):
                return None
            table = schema.tables.get(node.name)
            if table is None:
                return None
            out[name] = table.column_name_set
        elif isinstance(source, Scope) and isinstance(source.expression, (exp.Select, exp.SetOperation)):
            names = source.expression.named_selects
            if "*" in names or "" in names:
                return None
            out[name] = frozenset(names)
        else:
            return None
    return out


def _plain_projections(scope: Scope) -> bool:
    """No star among the projections, except where the rows alone matter (the root query,
    the SELECT of EXISTS)."""
    select = scope.expression
    star = any(isinstance(p, exp.Star) or (isinstance(p, exp.Column) and isinstance(p.this, exp.Star))
               for p in select.expressions)
    if not star:
        return True
    return scope.is_root or isinstance(select.parent, exp.Exists)


def _projection_of(column: exp.Column, select: exp.Select) -> int | None:
    """The position of the projection of `select` that holds `column`, None outside them."""
    node = column
    while node.parent is not None and node.parent is not select:
        node = node.parent
    return node.index if node.parent is select and node.arg_key == "expressions" else None


def _positional_group(select: exp.Select) -> bool:
    group = select.args.get("group")
    return group is not None and any(isinstance(k, exp.Literal) for k in group.expressions)


def _source_of(column: exp.Column, scope: Scope, items: dict[int, dict[str, frozenset[str]]]) -> str | None:
    """The alias of the FROM item `column` reads: in its own SELECT, else (a subquery only)
    in the nearest enclosing SELECT that has it; None where that is not exactly one item."""
    s = scope
    while s is not None:
        here = items.get(id(s))
        if here is None:
            return None
        if column.table:
            if column.table in here:
                return column.table if column.name in here[column.table] else None
        else:
            hits = [alias for alias, names in here.items() if column.name in names]
            if len(hits) == 1:
                return hits[0]
            if hits:
                return None  # ambiguous
        if s.scope_type != ScopeType.SUBQUERY:
            return None  # only a subquery may read an enclosing query's columns
        s = s.parent
    return None
