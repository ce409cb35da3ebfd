"""What a query says about each table it reads: filters, join edges, induced cuts.

`analyze(sql, schema)` parses one Spark SQL query and returns a
`QueryAnalysis`:

- one `TableRef` per base-table reference (a table read twice is two refs);
- `filter(ref)`: a predicate over that table's columns that every row the
  query needs from that reference satisfies. Only conjuncts that are safe to
  apply to the scan are kept (see "Soundness" below); the rest is dropped,
  which only makes the filter weaker;
- `edges`: semi-join reductions. An `Edge(a -> b)` says: rows of `b` whose
  column matches no row of `a` that passes `filter(a)` are never needed;
  `joint_edges`, where one join condition equates two or more columns of `a`
  and `b` (`JointEdge`): rows of `b` matching no row of `a` on all of them;
  `union_edges`, out of a UNION's column (`UnionEdge`): rows of `b` matching
  no row of any branch's reference on the column that branch passes on;
- `induced(ref, hops)`: join-induced predicates (MTO section 4.1.1), pushed
  along edges that follow a primary key to a foreign key that references it,
  directly or through a chain of equality edges (a correlated subquery's
  `l2.l_orderkey = l1.l_orderkey`, where l1 joins orders on its key).

Soundness rules (a filter or edge is kept only when removing the rows it
excludes cannot change the query's answer):

- WHERE and inner-join ON conjuncts filter every table they touch alone,
  except a table on the NULL-supplying side of an outer join, where only
  conjuncts that cannot be TRUE on a NULL-extended row count.
- LEFT JOIN: ON conjuncts on the right table filter it; its equalities give
  edges left -> right only. RIGHT JOIN mirrors it: ON conjuncts on the tables
  joined so far filter them, edges go right -> those tables only. FULL joins
  give nothing (conservative).
- LEFT SEMI JOIN: ON conjuncts filter both sides, equalities give edges both
  ways; LEFT ANTI JOIN: ON conjuncts filter the right side, edges left ->
  right only.
- A subquery's own WHERE always filters its own tables. Inside the outer
  WHERE, a correlation `inner.a = outer.b` gives the edge outer -> inner;
  a top-level EXISTS (no aggregation) also gives inner -> outer; NOT EXISTS
  gives only outer -> inner. `x IN (SELECT col ...)` as a top-level conjunct
  gives inner -> outer, and outer -> inner when the subquery has no LIMIT or
  window and no aggregation other than GROUP BY exactly that column.
  NOT IN gives no edge (NULL semantics).
- Equalities among inner-joined tables are closed transitively
  (a.x = b.y AND b.y = c.z relates a and c).
- Derived tables and CTEs are analyzed as queries of their own, and a column
  they pass on unchanged stands for its base column outside (diPs §3.3,
  rules 2-3): filters and edges reach the base table through it when the derived
  query is read once and is transparent for that column (no LIMIT, window or
  rollup; under aggregation only a grouping key; its table not NULL-supplying
  inside); otherwise only edges out of it (`OUTWARD`).
- A UNION [ALL] read once, without ORDER BY, LIMIT or OFFSET of its own
  (rule 4): where every branch passes a column on as above, with one type,
  filters on it and edges into it go to each branch's base column, and an
  edge out of it becomes a `UnionEdge` from all those columns at once (the
  union's values are the branches' values); INTERSECT and EXCEPT pass nothing.
"""

from __future__ import annotations

import dataclasses
import re
from collections import Counter, defaultdict, deque
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Mapping, NamedTuple

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, traverse_scope
from sqlglot.schema import MappingSchema
from sqlglot.tokens import Token, TokenType

from layout_core.base.errors import UserError
from layout_core.predicates import (
    TRUE, Column, ColumnCompare, Hop, JoinInduced, Predicate, atoms, can_be_true_on_nulls, conj, conjuncts,
    map_atoms,
)
from layout_core.predicates.model import ColumnAtom
from layout_core.predicates.simplify import simplify
from layout_core.base.schema import KeyHops, Schema
from layout_core.sql.columns import UNHANDLED, resolve_columns
from layout_core.sql.convert import SUBQUERY_MARK, project, refs_of, split_qualified, to_predicate

DEFAULT_MAX_DEPTH = 4

# A derived table's or CTE's column that passes on a base column, but where
# nothing may be pushed into that column (the CTE is read twice, the query has
# a LIMIT, a window or a rollup, the column is not a grouping key, or its table
# is NULL-supplying there), resolves to its reference's key behind this mark:
# diPs flow out of it (its values are a subset of the base column's), never in.
OUTWARD = "~"

# A UNION's output column that every branch passes on (diPs §3.3 rule 4) resolves
# to a key of the union itself, this prefix and a number: its filters and the
# diPs into it go to every branch's base column (`_fan_out_unions`).
UNION_KEY = "u"


# Past these a statement is refused (QueryError, kind "too complex": the query reads
# everything) before the work that grows faster than its size: sqlglot's qualify
# takes time quadratic in the column references (2,000: 1.6 s, 8,000: 21 s here),
# and a boolean or subquery nesting this deep would exhaust Python's recursion.
# A 10,000-literal IN list has one column reference and nests nothing.
MAX_COLUMN_REFERENCES = 1000
MAX_NESTING = 100  # levels of nested expressions; a chain of one binary operator (a OR b OR c) is one


class QueryError(UserError, ValueError):
    """The statement cannot be analyzed: a parse failure, or an unknown table or column.

    `kind` names the class of the failure in a few words, the same for every
    statement of that class: "empty", "parse error", "not a query", "unknown
    table", "unknown column", "too complex" or "not analyzed" (a construct the
    analysis refuses)."""

    def __init__(self, message: str, kind: str = "parse error"):
        super().__init__(message)
        self.kind = kind


@dataclass(frozen=True)
class TableRef:
    key: str  # unique within the query: "t<ref_id>"
    table: str
    alias: str
    ref_id: int  # position of the table node in the parsed query (see parse_tagged)


@dataclass(frozen=True)
class Edge:
    """Rows of to_ref whose to_column matches no qualifying row of from_ref are not needed."""

    from_ref: str
    from_column: str
    to_ref: str
    to_column: str

    @property
    def from_columns(self) -> tuple[str, ...]:
        return (self.from_column,)

    @property
    def to_columns(self) -> tuple[str, ...]:
        return (self.to_column,)


@dataclass(frozen=True)
class JointEdge:
    """Rows of to_ref whose to_columns match no qualifying row of from_ref on all of
    from_columns at once are not needed: the equalities of one join condition
    (`ps_partkey = l_partkey AND ps_suppkey = l_suppkey`), which the single-column
    `Edge`s of the same pairs only say one at a time."""

    from_ref: str
    from_columns: tuple[str, ...]
    to_ref: str
    to_columns: tuple[str, ...]

    @property
    def from_column(self) -> str:  # for messages
        return f"({', '.join(self.from_columns)})"

    @property
    def to_column(self) -> str:
        return f"({', '.join(self.to_columns)})"


@dataclass(frozen=True)
class UnionEdge:
    """Rows of to_ref whose to_column matches no qualifying row of any (reference, column)
    of `sources` are not needed: an edge out of a UNION's column (`union`.`column`), whose
    values are those its branches pass on (diPs §3.3 rule 4, a diP pulled up a union)."""

    union: str  # the union's key (UNION_KEY and a number)
    column: str  # its output column
    sources: tuple[tuple[str, str], ...]  # per branch, (ref key, base column)
    to_ref: str
    to_column: str

    @property
    def from_ref(self) -> str:  # for messages and scheduling: the union itself
        return self.union

    @property
    def from_column(self) -> str:
        return self.column

    @property
    def from_columns(self) -> tuple[str, ...]:
        return (self.column,)

    @property
    def to_columns(self) -> tuple[str, ...]:
        return (self.to_column,)


@dataclass(frozen=True)
class InducedPredicate:
    source_ref: str
    predicate: JoinInduced  # with the source's whole filter

    @property
    def hops(self) -> tuple[Hop, ...]:
        return self.predicate.hops


@dataclass(frozen=True)
class QueryAnalysis:
    sql: str
    refs: tuple[TableRef, ...]
    filters: Mapping[str, Predicate]
    edges: tuple[Edge, ...]
    # Equality joins between tables, as written: ((table, column), (table, column)) sorted.
    joins: tuple[tuple[tuple[str, str], tuple[str, str]], ...] = ()
    notes: tuple[str, ...] = field(default=())  # what was ignored and why
    joint_edges: tuple[JointEdge, ...] = ()  # where two or more equalities link two references at once
    # equalities between two references on expressions (`c.c_custkey + 1 = o.o_custkey`), as SQL:
    # they make no edge, so no diP or join-induced cut goes through them
    expression_joins: tuple[str, ...] = ()
    union_edges: tuple[UnionEdge, ...] = ()  # out of a UNION's column (no join-induced cut goes through them)

    def ref(self, key: str) -> TableRef:
        for r in self.refs:
            if r.key == key:
                return r
        raise KeyError(key)

    def filter(self, key: str) -> Predicate:
        return self.filters.get(key, TRUE)

    def refs_of_table(self, table: str) -> tuple[TableRef, ...]:
        return tuple(r for r in self.refs if r.table == table)

    def predicate(self, key: str, key_hops: Iterable[Hop], max_depth: int = DEFAULT_MAX_DEPTH) -> Predicate:
        """Everything the query says about ref `key`: its filter and the join-induced
        predicates its joins push onto it (what routing and tree training both use)."""
        return conj(self.filter(key), *(ip.predicate for ip in self.induced(key, key_hops, max_depth)))

    def induced(
        self, key: str, key_hops: Iterable[Hop], max_depth: int = DEFAULT_MAX_DEPTH
    ) -> tuple[InducedPredicate, ...]:
        """Join-induced predicates on ref `key`: one per simple path of PK -> FK
        edges (at most max_depth hops) from a reference with a filter.

        A hop's edge may also be a chain of edges through other references
        (`relay`): in TPC-H q21, `l2.l_orderkey = l1.l_orderkey` correlates the
        subquery's lineitem with the outer one, which joins orders on its key,
        so l2 needs only the order keys of qualifying orders. Each edge is a
        semi-join reduction that stays valid after the others are applied, so
        their chain is one too (MTO §4.1.1 induces into correlated subqueries);
        the hop itself still starts at the parent's key."""
        hops_index = key_hops if isinstance(key_hops, KeyHops) else KeyHops(key_hops)
        table_of = {r.key: r.table for r in self.refs}
        incoming = defaultdict(list)
        for e in self.edges:
            incoming[e.to_ref].append(e)

        found: list[InducedPredicate] = []

        def walk(ref: str, path: tuple[Hop, ...], seen: frozenset[str]) -> None:
            if len(path) >= max_depth:
                return
            hops_in = {h for e in incoming[ref] for h in hops_index.by_child.get((table_of[ref], e.to_column), ())}
            for hop in sorted(hops_in, key=hops_index.order.__getitem__):
                for source in relay(ref, hop, seen):
                    hops = (hop,) + path
                    source_filter = self.filter(source)
                    if source_filter != TRUE:
                        found.append(InducedPredicate(source, JoinInduced(hops, source_filter)))
                    walk(source, hops, seen | {source})

        def relay(ref: str, hop: Hop, seen: frozenset[str]) -> list[str]:
            """The references of the hop's parent table whose key column reaches
            `ref`'s hop column through a chain of edges (breadth first, each
            (reference, column) once, none of `seen`)."""
            sources, queue = [], [(ref, hop.child_column)]
            visited = set(queue)
            while queue:
                at, column = queue.pop(0)
                for e in incoming[at]:
                    step = (e.from_ref, e.from_column)
                    if e.to_column != column or e.from_ref in seen or step in visited:
                        continue
                    visited.add(step)
                    queue.append(step)
                    if table_of[e.from_ref] == hop.parent_table and e.from_column == hop.parent_column:
                        sources.append(e.from_ref)
            return sources

        walk(key, (), frozenset([key]))
        return tuple(dict.fromkeys(found))  # the same path can be reached twice via equal edges


# ---------------------------------------------------------------------------
# Parsing


def _clean_error(e: Exception) -> str:
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e))
    return " ".join(text.split())[:300]


_SPARK = Dialect.get_or_raise("spark")

# A Spark SQL query starts with one of these tokens. Anything else is refused
# before sqlglot parses it: for some statements sqlglot falls back to a generic
# Command and logs a warning on its own logger first, and we report the reason
# ourselves (without touching that logger's settings). It still warns about a
# WITH clause followed by such a statement, which it then fails to parse.
_QUERY_STARTS = frozenset({TokenType.SELECT, TokenType.WITH, TokenType.FROM, TokenType.VALUES, TokenType.L_PAREN})
# The first tokens of the statements sqlglot knows that are not queries (CREATE, INSERT, SHOW, ...).
_OTHER_STATEMENTS = frozenset(_SPARK.parser_class.STATEMENT_PARSERS) | frozenset(_SPARK.tokenizer_class.COMMANDS)


class ParsedQuery(NamedTuple):
    """A parsed query and what one walk over its tree found (`_survey`)."""

    tree: exp.Query
    tables: tuple[exp.Table, ...]  # its table nodes, numbered (meta "ref_id") in traversal order
    cte_names: frozenset[str]  # lower case
    unhandled: bool  # a construct our column resolution leaves to qualify (`sql.columns.UNHANDLED`)


def parse_query(sql: str) -> exp.Query:
    """The sqlglot tree of one Spark SQL query, or QueryError with the reason."""
    return parse_tagged(sql).tree


def parse_tagged(sql: str) -> ParsedQuery:
    """`parse_query`, with the table nodes numbered: the same SQL always gets the same numbers
    (`TableRef.ref_id`), so a route made from one parse applies to another (`skipping.rewrite`)."""
    try:
        statements = _split_tokens(_SPARK.tokenize(sql))
        if not statements:
            raise QueryError("empty statement: no SQL outside comments", kind="empty")
        if len(statements) != 1:
            raise QueryError(f"expected one statement, found {len(statements)}")
        first = statements[0][0]
        if first.token_type in _OTHER_STATEMENTS:
            raise QueryError(f"not a query: a {first.text.upper()} statement", kind="not a query")
        if first.token_type not in _QUERY_STARTS:
            raise QueryError(f"cannot parse SQL: a query does not start with {first.text!r}")
        (tree,) = _SPARK.parser().parse(statements[0], sql)
    except SqlglotError as e:
        raise QueryError(f"cannot parse SQL: {_clean_error(e)}") from None
    except RecursionError:  # sqlglot's parser recurses once per nesting level
        raise QueryError("too complex: the statement nests too deeply to parse", kind="too complex") from None
    if isinstance(tree, exp.Command):
        raise QueryError(f"cannot parse SQL: unsupported statement starting with {tree.name!r}")
    if not isinstance(tree, exp.Query):
        raise QueryError(f"not a query: a {tree.key.upper()} statement", kind="not a query")
    return _survey(tree)


_COLUMN, _TABLE, _CTE, _HINT, _UNHANDLED = "column", "table", "cte", "hint", "unhandled"
_NODE_KINDS: dict[type, tuple[bool, bool, str]] = {}  # node type -> (a Paren, a Binary, what `_survey` notes)


def _node_kind(node_type: type) -> tuple[bool, bool, str]:
    """What `_survey` needs to know of a node type, worked out once per type (a dict lookup
    per node instead of a chain of isinstance checks)."""
    kind = next((k for k, cls in ((_COLUMN, exp.Column), (_TABLE, exp.Table), (_CTE, exp.CTE), (_HINT, exp.Hint),
                                  (_UNHANDLED, UNHANDLED)) if issubclass(node_type, cls)), "")
    _NODE_KINDS[node_type] = issubclass(node_type, exp.Paren), issubclass(node_type, exp.Binary), kind
    return _NODE_KINDS[node_type]


def _survey(tree: exp.Query) -> ParsedQuery:
    """One walk over the tree (breadth first, as sqlglot's `find_all`): QueryError (kind
    "too complex") past MAX_COLUMN_REFERENCES or MAX_NESTING, else what the analysis
    needs to know before resolving columns. (One walk, not one per question: on TPC-DS
    queries each walk costs about a tenth of a parse.)

    An explicit queue, not recursion: a recursive walk would itself fail on the trees
    it must refuse. A binary operator under one of its own type (the links of a chain
    a OR b OR c, or a + b + c) and a parenthesis add no level: sqlglot and the analysis
    walk such chains without recursion."""
    columns = 0
    tables: list[exp.Table] = []
    cte_names: set[str] = set()
    unhandled = hints = False
    queue = deque([(tree, 0, None)])
    while queue:
        node, depth, parent_type = queue.popleft()
        node_type = type(node)
        is_paren, is_binary, kind = _NODE_KINDS.get(node_type) or _node_kind(node_type)
        if is_paren:
            node_type = parent_type  # parentheses add no level
        elif node_type is not parent_type or not is_binary:
            depth += 1
        if depth > MAX_NESTING:
            raise QueryError(f"too complex: expressions nested more than {MAX_NESTING} levels deep",
                             kind="too complex")
        if kind is _COLUMN:
            columns += 1
            if columns > MAX_COLUMN_REFERENCES:
                raise QueryError(f"too complex: more than {MAX_COLUMN_REFERENCES} column references",
                                 kind="too complex")
        elif kind is _TABLE:
            if isinstance(node.this, exp.Identifier):
                tables.append(node)
        elif kind is _CTE:
            cte_names.add(node.alias_or_name.lower())
        elif kind is _HINT:
            hints = True
        elif kind is _UNHANDLED:
            unhandled = True
        for child in node.iter_expressions():
            queue.append((child, depth, node_type))
    if hints:  # a hint's arguments, /*+ BROADCAST(o) */, parse as tables too: they name aliases, read nothing
        tables = [t for t in tables if t.find_ancestor(exp.Hint) is None]
    for i, t in enumerate(tables):
        t.meta["ref_id"] = i
    return ParsedQuery(tree, tuple(tables), frozenset(cte_names), unhandled)


def _split_tokens(tokens: list[Token]) -> list[list[Token]]:
    """The non-empty statements of a token list, split at semicolons (as sqlglot splits them)."""
    statements: list[list[Token]] = [[]]
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            statements.append([])
        else:
            statements[-1].append(token)
    return [s for s in statements if s]


def _check_tables(parsed: ParsedQuery, schema: Schema) -> None:
    for t in parsed.tables:
        name = t.name.lower()
        if name not in parsed.cte_names and name not in schema.tables:
            raise QueryError(f"unknown table {t.name!r}", kind="unknown table")


# ---------------------------------------------------------------------------
# Analysis


def analyze(sql: str, schema: Schema, own_resolution: bool = True) -> QueryAnalysis:
    """`sql` analyzed against `schema` (QueryError if it cannot be). Columns are resolved by
    `sql.columns` where it can, else by sqlglot's `qualify`; `own_resolution=False` always
    uses `qualify` (the tests' oracle)."""
    parsed = parse_tagged(sql)
    tree = parsed.tree
    _check_tables(parsed, schema)
    try:
        scopes = resolve_columns(tree, schema, surveyed=True) if own_resolution and not parsed.unhandled else None
        if scopes is None:  # a shape our resolution leaves to sqlglot's (the same answer, slower)
            qualified = qualify(tree, schema=sqlglot_schema(schema), dialect="spark")  # in place: the tree is ours
            scopes = list(traverse_scope(qualified))
    except SqlglotError as e:
        raise QueryError(f"cannot resolve columns: {_clean_error(e)}", kind="unknown column") from None
    except RecursionError:  # _survey should have refused such a tree; never a crash
        raise QueryError("too complex: the statement nests too deeply to resolve", kind="too complex") from None
    try:
        return _Analyzer(sql, schema, scopes).run()
    except RecursionError:
        raise QueryError("too complex: the statement nests too deeply to analyze", kind="too complex") from None


def sqlglot_schema(schema: Schema) -> MappingSchema:
    """sqlglot's form of the schema, built once per schema (building it costs more
    than parsing a query); qualify only reads it."""
    return schema.derived("sqlglot", lambda s: MappingSchema(s.spark_columns(), dialect="spark"))


def _and_parts(node: exp.Expression | None) -> list[exp.Expression]:
    """The conjuncts of an AND chain, left to right (a stack, not recursion: a long chain is common)."""
    parts, stack = [], [] if node is None else [node]
    while stack:
        item = stack.pop()
        while isinstance(item, exp.Paren):
            item = item.this
        if isinstance(item, exp.And):
            stack += [item.expression, item.this]
        else:
            parts.append(item)
    return parts


def _unparen(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


class _Analyzer:
    def __init__(self, sql: str, schema: Schema, scopes: list[Scope]):
        self.sql = sql
        self.schema = schema
        self.scopes = [s for s in scopes if isinstance(s.expression, exp.Select)]
        self.refs: dict[str, TableRef] = {}
        self.ref_scope: dict[str, Scope] = {}
        self.filters: dict[str, list[Predicate]] = defaultdict(list)
        self.edges: set[Edge] = set()
        self.joint_edges: set[JointEdge] = set()
        self.union_edges: set[UnionEdge] = set()
        self.expression_joins: list[str] = []
        self.joins: set = set()
        self.notes: list[str] = []
        self.local_refs: dict[int, dict[str, str]] = {}  # id(scope) -> alias -> ref key
        self.nullable: dict[int, set[str]] = {}  # id(scope) -> its NULL-supplying refs, once analyzed
        self.derived_aliases: dict[int, set[str]] = {}  # id(scope) -> `_derived_read`
        self.union_keys: dict[int, str] = {}  # id(union scope) -> its UNION_KEY
        self.union_columns: dict[str, dict[str, list]] = defaultdict(dict)  # key -> output -> [(ref, column)]
        self.root = next(s.expression for s in scopes if s.is_root)

    def run(self) -> QueryAnalysis:
        for scope in self.scopes:
            self._collect_refs(scope)
        for scope in self.scopes:
            self._analyze_scope(scope)
        self._fan_out_unions()
        filters = {}
        for key in self.refs:
            p = simplify(conj(self.filters.get(key, [])))
            if p != TRUE:
                filters[key] = p
        refs = tuple(sorted(self.refs.values(), key=lambda r: r.ref_id))
        return QueryAnalysis(
            self.sql, refs, filters,
            tuple(sorted(self.edges, key=lambda e: (e.from_ref, e.to_ref, e.from_column, e.to_column))),
            tuple(sorted(self.joins)), tuple(self.notes),
            tuple(sorted(self.joint_edges, key=lambda e: (e.from_ref, e.to_ref, e.from_columns, e.to_columns))),
            tuple(dict.fromkeys(self.expression_joins)),
            tuple(sorted(self.union_edges, key=lambda e: (e.union, e.column, e.to_ref, e.to_column))),
        )

    # -- references and column resolution

    def _collect_refs(self, scope: Scope) -> None:
        local = {}
        # scope.sources, not selected_sources: the latter leaves out semi/anti-joined tables.
        for alias, source in scope.sources.items():
            if isinstance(source, exp.Table) and "ref_id" in source.meta:
                table = source.name.lower()
                if table not in self.schema.tables:
                    continue
                key = f"t{source.meta['ref_id']}"
                self.refs[key] = TableRef(key, table, alias, source.meta["ref_id"])
                self.ref_scope[key] = scope
                local[alias] = key
        self.local_refs[id(scope)] = local

    def _resolver(self, scope: Scope):
        """column -> (ref key, schema column) or None: a base table's column of this
        scope or an enclosing one (a correlated reference), or a column a derived table
        or CTE of this scope passes on (`_through`)."""
        def resolve(column: exp.Column):
            found = self._in_scope(scope, column)
            s = scope.parent
            while found is None and s is not None and column.table not in scope.sources:
                if column.table in s.sources:
                    local = self.local_refs.get(id(s), {})
                    return self._base_column(local[column.table], column) if column.table in local else None
                s = s.parent
            return found

        return resolve

    def _in_scope(self, scope: Scope, column: exp.Column):
        local = self.local_refs.get(id(scope), {})
        if column.table in local:
            return self._base_column(local[column.table], column)
        if column.table in self._derived_read(scope):
            return self._through(scope.sources[column.table], column.name)
        return None

    def _derived_read(self, scope: Scope) -> set[str]:
        """The aliases of the derived tables and CTEs this SELECT reads in its FROM and JOINs
        (its sources also list every CTE it could read: a column of one it does not read is
        the enclosing query's, a correlated reference)."""
        if id(scope) not in self.derived_aliases:
            select = scope.expression
            items = [select.args["from_"].this] if select.args.get("from_") is not None else []
            items += [join.this for join in select.args.get("joins") or []]
            aliases = {_from_item(item).alias_or_name for item in items}
            self.derived_aliases[id(scope)] = {a for a in aliases if isinstance(scope.sources.get(a), Scope)}
        return self.derived_aliases[id(scope)]

    def _base_column(self, key: str, column: exp.Column):
        table = self.schema.table(self.refs[key].table)
        name = column.name.lower()
        return (key, table.column(name)) if table.has_column(name) else None

    def _through(self, source, name: str):
        """A derived table's or CTE's column `name` as the base column it passes on:
        (ref key, column), the key prefixed with OUTWARD where filters and diPs may
        only flow out of it (see OUTWARD); None for anything else (expressions,
        aggregates, INTERSECT and EXCEPT, a column of an enclosing query); a UNION's column
        as `_through_union` gives it."""
        if isinstance(source, Scope) and isinstance(source.expression, exp.Union):
            return self._through_union(source, name)
        if not isinstance(source, Scope):
            return None  # (a table function)
        projection = next((e for e in source.expression.expressions if e.alias_or_name == name), None)
        return self._projected(source, projection)

    def _projected(self, source: Scope, projection: exp.Expression | None):
        """`_through` for one projection of the SELECT of `source`."""
        if id(source) not in self.nullable or projection is None:
            return None  # (not a SELECT we analyzed: INTERSECT or EXCEPT)
        node = _unparen(projection.unalias())
        found = self._in_scope(source, node) if isinstance(node, exp.Column) else None
        if found is None:
            return None
        key, column = found
        inward = (not key.startswith(OUTWARD) and key not in self.nullable[id(source)]
                  and self._read_once(source) and _transparent(source.expression, node))
        if inward or key.startswith(OUTWARD):
            return key, column
        return None if key.startswith(UNION_KEY) else (OUTWARD + key, column)  # nothing comes out of a union

    def _through_union(self, source: Scope, name: str):
        """A UNION's output column `name` as (its UNION_KEY, column) where filters and diPs
        may go into every branch (see the module docstring), else None."""
        union = source.expression
        if any(union.args.get(k) for k in ("order", "limit", "offset")) or not self._read_once(source):
            return None
        names = union.named_selects
        branches = _union_branches(source)
        if name not in names or branches is None:
            return None
        position, passed = names.index(name), []
        for branch in branches:
            projections = branch.expression.expressions
            found = self._projected(branch, projections[position]) if len(projections) == len(names) else None
            if found is None or found[0].startswith((OUTWARD, UNION_KEY)):
                return None  # (a branch that only sends it, or a union inside a branch)
            passed.append(found)
        if len({column.kind for _, column in passed}) != 1:
            return None  # branches of different types: a literal may read differently in each
        key = self.union_keys.setdefault(id(source), f"{UNION_KEY}{len(self.union_keys)}")
        self.union_columns[key][name] = passed
        return key, Column(name, passed[0][1].kind)

    def _fan_out_unions(self) -> None:
        """Filters on a union's columns and edges into them, given to its branches' references;
        edges out of them, as `UnionEdge`s from every branch's reference at once."""
        for key, columns in self.union_columns.items():
            for p in self.filters.pop(key, []):
                for part in conjuncts(p):
                    names = part.columns()
                    if len(names) != 1 or not all(isinstance(a, ColumnAtom) and not a.column.virtual
                                                  for a in atoms(part)):
                        continue  # (two outputs may come from two references of a branch; an
                        # expression would lose its arithmetic in the branch column's place)
                    for ref, column in columns.get(next(iter(names)), ()):
                        self.filters[ref].append(map_atoms(part, lambda a, c=column: dataclasses.replace(
                            a, column=Column(c.name, c.kind))))
        edges = set()
        for e in self.edges:
            targets = ([(ref, column.name) for ref, column in self.union_columns[e.to_ref].get(e.to_column, ())]
                       if e.to_ref.startswith(UNION_KEY) else [(e.to_ref, e.to_column)])
            if not e.from_ref.startswith(UNION_KEY):
                edges |= {Edge(e.from_ref, e.from_column, ref, column) for ref, column in targets
                          if ref != e.from_ref}
                continue
            sources = tuple((ref, column.name) for ref, column in self.union_columns[e.from_ref].get(e.from_column, ()))
            if sources:
                self.union_edges |= {UnionEdge(e.from_ref, e.from_column, sources, ref, column)
                                     for ref, column in targets if ref not in dict(sources)}
        self.edges = edges
        self.joint_edges = {e for e in self.joint_edges
                            if not (e.from_ref.startswith(UNION_KEY) or e.to_ref.startswith(UNION_KEY))}

    def _read_once(self, source: Scope) -> bool:
        cte = source.expression.parent
        return not isinstance(cte, exp.CTE) or self._reads[cte.alias_or_name.lower()] == 1

    @cached_property
    def _reads(self) -> Counter:
        """How often each name is read as a table, counted only for a query with a CTE
        (every scope lists the CTEs it could read among its sources, read or not; a
        name that an inner CTE shadows counts for both, which only passes less)."""
        return Counter(t.name.lower() for t in self.root.find_all(exp.Table))

    def _derived_keys(self, scope: Scope, alias: str) -> set[str]:
        """The keys a derived table or CTE read as `alias` in `scope` passes columns of."""
        source = scope.sources.get(alias)
        if alias not in self._derived_read(scope) or not isinstance(source.expression, (exp.Select, exp.Union)):
            return set()
        found = (self._through(source, name) for name in source.expression.named_selects)
        return {f[0] for f in found if f is not None}

    # -- one SELECT

    def _analyze_scope(self, scope: Scope) -> None:
        select = scope.expression
        resolve = self._resolver(scope)
        nullable: set[str] = set()
        equalities: list[tuple[str, str, str, str]] = []  # among inner-joined refs

        def alias_key(node: exp.Expression) -> set[str]:
            node = _from_item(node)
            alias = node.alias_or_name
            key = self.local_refs[id(scope)].get(alias)
            return {key} if key else self._derived_keys(scope, alias)

        local = set(self.local_refs[id(scope)].values())
        for alias in self._derived_read(scope):
            local |= self._derived_keys(scope, alias)

        from_ = select.args.get("from_")
        seen: set[str] = alias_key(from_.this) if from_ is not None else set()
        for join in select.args.get("joins") or []:
            right = alias_key(join.this)
            side, kind = (join.side or "").upper(), (join.kind or "").upper()
            on_parts = self._conjuncts(join.args.get("on"), resolve)
            self._note_expression_joins(join.args.get("on"), resolve)
            if join.args.get("using"):
                self.notes.append("JOIN ... USING is not analyzed (no filters or edges from it)")
                on_parts = []
            if side == "FULL":
                nullable |= seen | right
            elif side == "RIGHT":  # LEFT's mirror: everything joined so far is NULL-supplying
                for p in on_parts:
                    self._add_filters(p, seen, nullable)
                self._edges([e for p in on_parts for e in self._equality(p, right, seen)])
                nullable |= seen
            elif side == "LEFT" and kind == "SEMI":
                for p in on_parts:
                    self._add_filters(p, seen | right, nullable)
                pairs = [e for p in on_parts for e in self._equality(p, seen, right)]
                self._edges(pairs)
                self._edges([(b, cb, a, ca) for a, ca, b, cb in pairs])
            elif side == "LEFT":  # LEFT [OUTER] JOIN and LEFT ANTI JOIN
                for p in on_parts:
                    self._add_filters(p, right, nullable)
                self._edges([e for p in on_parts for e in self._equality(p, seen, right)])
                if kind != "ANTI":
                    nullable |= right
            else:  # inner or cross join
                for p in on_parts:
                    self._add_filters(p, seen | right, nullable)
                    equalities += self._equality(p, seen, right, nullable)
            if not (side == "LEFT" and kind in ("SEMI", "ANTI")):
                seen |= right

        where = select.args.get("where")
        for child in scope.subquery_scopes:
            # (a set operation's scope has no references of its own; its SELECTs are scopes of their own)
            if where is not None and _is_within(child.expression, where) and id(child) in self.local_refs:
                self._correlations(child, scope)  # records the edges outer -> inner
        for part in _and_parts(where.this if where is not None else None):
            self._subquery_link(scope, _unparen(part), resolve)
        self._note_expression_joins(where.this if where is not None else None, resolve)
        for p in self._conjuncts(where, resolve):
            self._add_filters(p, local, nullable)
            equalities += self._equality(p, local, local)
        self._close_equalities(equalities)
        self.nullable[id(scope)] = nullable

    def _note_expression_joins(self, condition: exp.Expression | None, resolve) -> None:
        """Top-level `x = y` conjuncts whose sides are expressions over two different references."""
        for part in map(_unparen, _and_parts(condition)):
            if not isinstance(part, exp.EQ):
                continue
            sides = [_unparen(part.this), _unparen(part.expression)]
            if all(isinstance(side, exp.Column) for side in sides):
                continue
            refs = [{found[0].removeprefix(OUTWARD) for c in side.find_all(exp.Column) if (found := resolve(c))}
                    for side in sides]
            if refs[0] and refs[1] and refs[0] != refs[1]:
                shown = part.copy()
                for identifier in shown.find_all(exp.Identifier):
                    identifier.set("quoted", False)
                self.expression_joins.append(shown.sql(dialect="spark"))

    @staticmethod
    def _conjuncts(condition: exp.Expression | None, resolve) -> list[Predicate]:
        """Top-level conjuncts of a condition, after factoring common parts out of ORs
        (so `(a.x = b.y AND ...) OR (a.x = b.y AND ...)` still yields the join)."""
        if isinstance(condition, exp.Where):
            condition = condition.this
        parts = [to_predicate(part, resolve) for part in _and_parts(condition)]
        return [c for p in parts for c in conjuncts(simplify(p))]

    def _add_filters(self, p: Predicate, refs: set[str], nullable: set[str]) -> None:
        for key in refs_of(p) & refs:
            if key.startswith(OUTWARD):
                continue
            proj = project(p, key)
            if proj == TRUE:
                continue
            if key in nullable and can_be_true_on_nulls(proj):
                continue
            self.filters[key].append(proj)

    def _equality(self, p: Predicate, left: set[str], right: set[str], nullable: set[str] = frozenset()):
        """(ref, col, ref, col) when p is `left.col = right.col` between two references."""
        if not (isinstance(p, ColumnCompare) and p.op == "="):
            return []
        a, ca = split_qualified(p.left.name)
        b, cb = split_qualified(p.right.name)
        if a == b or SUBQUERY_MARK in (a, b):
            return []
        if a in right and b in left:
            a, ca, b, cb = b, cb, a, ca
        if a in left and b in right and not ({a, b} & nullable):
            return [(a, ca, b, cb)]
        return []

    def _edge(self, a: str, ca: str, b: str, cb: str) -> None:
        """The edge a -> b of a written equality."""
        self._implied_edge(a, ca, b, cb)
        self._join(a, ca, b, cb)

    def _implied_edge(self, a: str, ca: str, b: str, cb: str) -> None:
        if b.startswith(OUTWARD):
            return  # nothing flows into a derived table that is not transparent for it
        a = a.removeprefix(OUTWARD)
        if a != b:
            self.edges.add(Edge(a, ca, b, cb))

    def _join(self, a: str, ca: str, b: str, cb: str) -> None:
        if a.startswith(UNION_KEY) or b.startswith(UNION_KEY):
            return
        ta, tb = self.refs[a.removeprefix(OUTWARD)].table, self.refs[b.removeprefix(OUTWARD)].table
        self.joins.add(tuple(sorted([(ta, ca), (tb, cb)])))

    def _edges(self, pairs) -> None:
        """An edge a -> b per (a, ca, b, cb) of `pairs`, equalities of one join condition
        (all hold for the same pair of rows), and a joint edge where two or more link a to b."""
        for a, ca, b, cb in pairs:
            self._edge(a, ca, b, cb)
        self._joint(pairs)

    def _joint(self, pairs) -> None:
        columns = defaultdict(set)
        for a, ca, b, cb in pairs:
            if not b.startswith(OUTWARD) and a.removeprefix(OUTWARD) != b:
                columns[(a.removeprefix(OUTWARD), b)].add((ca, cb))
        for (a, b), linked in columns.items():
            if len(linked) >= 2:
                ordered = sorted(linked)
                self.joint_edges.add(JointEdge(a, tuple(c for c, _ in ordered), b, tuple(c for _, c in ordered)))

    def _close_equalities(self, equalities) -> None:
        """Edges both ways between every pair of columns an inner join makes equal."""
        parent: dict = {}

        def find(x):
            while parent.setdefault(x, x) != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for a, ca, b, cb in equalities:
            parent[find((a, ca))] = find((b, cb))
            self._join(a, ca, b, cb)
        classes = defaultdict(list)
        for node in parent:
            classes[find(node)].append(node)
        pairs = []  # every equality holds for each row of the scope's join: one condition
        for members in classes.values():
            for a, ca in members:
                for b, cb in members:
                    if a != b:
                        self._implied_edge(a, ca, b, cb)
                        pairs.append((a, ca, b, cb))
        self._joint(pairs)

    # -- subqueries

    def _subquery_link(self, outer: Scope, node: exp.Expression, resolve) -> None:
        """Edges between the outer query and a subquery used as a top-level WHERE conjunct."""
        negated = isinstance(node, exp.Not)
        inner_node = _unparen(node.this) if negated else node
        if isinstance(inner_node, exp.Exists):
            inner = self._scope_of(inner_node.this)
            if inner is None:
                return
            correlations = self._correlations(inner, outer)
            if not negated and _plain_select(inner.expression):
                self._edges(correlations)
        elif isinstance(inner_node, exp.In) and inner_node.args.get("query") is not None and not negated:
            query = inner_node.args["query"]
            inner = self._scope_of(query.this if isinstance(query, exp.Subquery) else query)
            outer_col = _unparen(inner_node.this)
            if inner is None or not isinstance(outer_col, exp.Column):
                return
            found = resolve(outer_col)
            projection = inner.expression.expressions
            if found is None or len(projection) != 1:
                return
            inner_col = _unparen(projection[0].unalias())
            inner_found = self._resolver(inner)(inner_col) if isinstance(inner_col, exp.Column) else None
            if inner_found is None or inner_found[0] not in self.local_refs[id(inner)].values():
                return
            (ok, ocol), (ik, icol) = found, inner_found
            if ok not in self.local_refs[id(outer)].values():
                return
            self._edge(ik, icol.name, ok, ocol.name)
            if _membership_preserving(inner.expression, inner_col):
                self._edge(ok, ocol.name, ik, icol.name)

    def _scope_of(self, select: exp.Expression) -> Scope | None:
        for s in self.scopes:
            if s.expression is select:
                return s
        return None

    def _correlations(self, inner: Scope, outer: Scope):
        """(inner ref, col, outer ref, col) for `inner.col = outer.col` conjuncts of
        the subquery's WHERE; also records the always-valid edge outer -> inner."""
        where = inner.expression.args.get("where")
        inner_local = set(self.local_refs[id(inner)].values())
        outer_local = set(self.local_refs[id(outer)].values())
        found = [e for p in self._conjuncts(where, self._resolver(inner))
                 for e in self._equality(p, inner_local, outer_local)]
        self._edges([(b, cb, a, ca) for a, ca, b, cb in found])
        return found


def _union_branches(source: Scope) -> list[Scope] | None:
    """The SELECTs of a UNION [ALL] chain, left to right; None where an INTERSECT or EXCEPT
    is part of it."""
    branches = []
    for part in source.set_operation_scopes:
        if isinstance(part.expression, exp.Union):
            inner = _union_branches(part)
            if inner is None:
                return None
            branches += inner
        elif isinstance(part.expression, exp.Select):
            branches.append(part)
        else:
            return None
    return branches


def _from_item(node: exp.Expression) -> exp.Expression:
    """A FROM or JOIN item with redundant parentheses taken off: `((orders o))` is `orders o`.

    A parenthesized join, `LEFT JOIN (orders o JOIN lineitem l ON ...) ON ...`,
    is refused: which of its tables an outer join makes NULL-extended is not
    modelled, and taking them as inner joins could skip rows the answer needs.
    (With an alias, `(orders o JOIN lineitem l ON ...) AS t`, qualify has made
    it a derived table: a scope of its own, whose columns filter nothing outside.)
    """
    while isinstance(node, exp.Subquery) and isinstance(node.this, (exp.Table, exp.Subquery)) and not node.alias:
        node = node.this
    if node.args.get("joins"):
        raise QueryError("a join in parentheses inside FROM is not analyzed", kind="not analyzed")
    return node


def _is_within(node: exp.Expression, ancestor: exp.Expression) -> bool:
    while node is not None:
        if node is ancestor:
            return True
        node = node.parent
    return False


def _has_aggregate(select: exp.Select) -> bool:
    found = select.meta.get("has_aggregate")  # (asked for each column a filter passes through)
    if found is None:
        found = select.meta["has_aggregate"] = (
            any(e.find(exp.AggFunc) is not None for e in select.expressions)
            or bool(select.args.get("group") or select.args.get("having")))
    return found


def _has_window(select: exp.Select) -> bool:
    found = select.meta.get("has_window")
    if found is None:
        found = select.meta["has_window"] = select.find(exp.Window) is not None
    return found


def _plain_select(select: exp.Select) -> bool:
    """EXISTS over it is TRUE exactly when some row passes its WHERE."""
    return not _has_aggregate(select) and not select.args.get("limit")


def _transparent(select: exp.Select, column: exp.Column) -> bool:
    """Whether a filter on the output `column` of `select` (a derived table or CTE) may
    be applied to its rows instead: for each value of the column, the output rows
    with that value are computed from the input rows with that value alone."""
    if select.args.get("limit") or select.args.get("offset") or _has_window(select):
        return False
    if not _has_aggregate(select):
        return True
    group = select.args.get("group")
    if group is None or any(group.args.get(k) for k in ("rollup", "cube", "grouping_sets")):
        return False
    return column in [_unparen(k) for k in group.expressions]


def _membership_preserving(select: exp.Select, column: exp.Column) -> bool:
    """Whether dropping rows whose `column` value is not probed leaves the answers for probed values unchanged."""
    if select.args.get("limit") or select.args.get("offset") or _has_window(select):
        return False
    group = select.args.get("group")
    if group is not None:
        keys = [_unparen(k) for k in group.expressions]
        return len(keys) == 1 and keys[0] == column
    return not _has_aggregate(select)


# ---------------------------------------------------------------------------
# Candidate cuts


def candidate_cuts(
    analysis: QueryAnalysis, key: str, key_hops: Iterable[Hop], max_depth: int = DEFAULT_MAX_DEPTH
) -> tuple[list[Predicate], list[JoinInduced]]:
    """Simple cuts (the filter's conjuncts) and join-induced cuts (one per
    conjunct of each source's filter, per induction path) for ref `key`."""
    simple = [c for c in conjuncts(analysis.filter(key)) if c != TRUE]
    induced = []
    for ip in analysis.induced(key, key_hops, max_depth):
        for c in conjuncts(ip.predicate.source):
            induced.append(JoinInduced(ip.hops, c))
    return simple, list(dict.fromkeys(induced))
