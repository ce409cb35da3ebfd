"""Seeded random Spark SQL queries over a schema's tables, for checking skipping.

Every query is built from the real values of the data (`profile`), so its
predicates are selective, touch the blocks' edge values, and are sometimes
empty. What the generator writes, each recorded in `GeneratedQuery.features`:

- predicates on every column kind (int, decimal, string, date): comparisons
  (literal on either side, an edge value or one step past it, an int column
  against a decimal literal), BETWEEN (sometimes with its bounds reversed),
  IN lists (with NULL, with values not in the data), IS [NOT] NULL, LIKE
  (prefix, suffix, infix, `_`), date arithmetic (`DATE 'd' + INTERVAL 'n'
  MONTH`, date_add, on the column's side too), column-to-column comparisons,
  functions the router cannot reason about, `= NULL`;
- NOT, AND, OR, nested, and ORs across tables;
- joins along foreign keys (chains of up to four tables), LEFT, RIGHT and
  FULL outer joins with ON conditions and NULL tests on the NULL-supplying
  side, self joins on a key;
- subqueries: [NOT] IN (SELECT ...) (one with NULLs), [NOT] EXISTS
  (correlated), scalar subqueries, derived tables, CTEs, UNION ALL (alone and
  joined to the table its foreign key references).

Queries return aggregates, groups or a few columns, never `*` and never a
LIMIT (a multiset compare needs the whole, deterministic answer). Each query
depends only on (seed, its index), so one query of a run can be made again.
"""

from __future__ import annotations

import calendar
import datetime as dt
import math
import random
from dataclasses import dataclass
from decimal import Decimal
from typing import Iterator

from layout_core.predicates.render import literal as _spark_literal
from layout_core.base.schema import Schema
from layout_core.check.profile import LITERAL_KINDS, ColumnValues, DataProfile

# Every feature a run should cover (`tests/unit/check/test_check_generator.py` checks each appears).
PREDICATE_FEATURES = ("comparison", "between", "in_list", "is_null", "like", "date_arithmetic",
                      "not", "or", "column_compare", "opaque")
QUERY_FEATURES = ("join", "outer_join", "subquery", "exists", "scalar_subquery", "derived_table",
                  "cte", "union", "self_join", "group_by", "projection")

_OPS = ("=", "<>", "<", "<=", ">", ">=")


@dataclass(frozen=True)
class GeneratedQuery:
    index: int
    sql: str
    features: frozenset[str]


@dataclass(frozen=True)
class _ForeignKey:
    child: str
    child_columns: tuple[str, ...]
    parent: str
    parent_columns: tuple[str, ...]


def generate_queries(schema: Schema, profile: DataProfile, count: int, seed: int = 0,
                     start: int = 0) -> Iterator[GeneratedQuery]:
    """Queries start .. start+count-1 of the seed's sequence."""
    for i in range(start, start + count):
        yield QueryMaker(schema, profile, random.Random(f"{seed}/{i}")).query(i)


class QueryMaker:
    """One query's worth of random choices (a fresh instance per query)."""

    def __init__(self, schema: Schema, profile: DataProfile, rng: random.Random):
        self.schema = schema
        self.profile = profile
        self.rng = rng
        self.tables = sorted(profile.tables)
        if not self.tables:
            raise ValueError("no table to query: the profile is empty")
        self.fks = [_ForeignKey(t.name, fk.columns, fk.references, fk.ref_columns)
                    for t in schema.tables.values() for fk in t.foreign_keys
                    if t.name in profile.tables and fk.references in profile.tables]
        # bigger tables more often (lineitem about 5 times as often as region), and
        # dates and short strings more often than free text (comments, names)
        self.table_weights = [1.0 + math.log10(1 + profile.rows.get(t, 1)) for t in self.tables]
        self.features: set[str] = set()
        self.aliases = 0

    # -- queries -----------------------------------------------------------

    def query(self, index: int) -> GeneratedQuery:
        shapes = [(self._single, 30), (self._join, 22), (self._outer_join, 14), (self._in_subquery, 9),
                  (self._exists, 8), (self._scalar_subquery, 5), (self._derived, 5), (self._union, 3),
                  (self._union_join, 3), (self._self_join, 4), (self._window, 2)]
        if not self.fks:
            shapes = [s for s in shapes if s[0] in (self._single, self._scalar_subquery, self._derived,
                                                    self._union, self._self_join, self._window)]
        make = self.rng.choices([s for s, _ in shapes], [w for _, w in shapes])[0]
        sql = make()
        return GeneratedQuery(index, sql, frozenset(self.features))

    def _table(self) -> str:
        return self.rng.choices(self.tables, self.table_weights)[0]

    def _alias(self, table: str) -> str:
        self.aliases += 1
        prefix = self.schema.table(table).column_names[0].split("_")[0] or table[:1]
        return f"{prefix}{self.aliases}"

    def _single(self) -> str:
        table = self._table()
        a = self._alias(table)
        where = self._where([(a, table)])
        shape = self.rng.random()
        if shape < 0.25:
            self.features.add("projection")
            columns = self.rng.sample(self._columns(table), min(len(self._columns(table)), self.rng.randint(1, 3)))
            distinct = "DISTINCT " if self.rng.random() < 0.3 else ""
            return f"SELECT {distinct}{', '.join(f'{a}.{c}' for c in columns)} FROM {table} {a}{where}"
        select, group = self._outputs([(a, table)])
        return f"SELECT {select} FROM {table} {a}{where}{group}"

    def _join(self) -> str:
        refs, from_sql = self._join_chain(self.rng.randint(2, 4))
        self.features.add("join")
        where = self._where(refs, cross=True)
        select, group = self._outputs(refs)
        return f"SELECT {select} FROM {from_sql}{where}{group}"

    def _outer_join(self) -> str:
        """parent/child joined by an outer join, predicates in ON and WHERE, NULL tests on
        the NULL-supplying side (rows that found no match, or that did)."""
        fk = self.rng.choice(self.fks)
        self.features.update(("join", "outer_join"))
        child, parent = self._alias(fk.child), self._alias(fk.parent)
        on = " AND ".join(f"{child}.{c} = {parent}.{p}" for c, p in zip(fk.child_columns, fk.parent_columns))
        kind = self.rng.choices(["LEFT", "RIGHT", "FULL"], [6, 2, 2])[0]
        left, right = [(parent, fk.parent), (child, fk.child)]
        if self.rng.random() < 0.5:
            left, right = right, left
        if self.rng.random() < 0.6:
            # on the NULL-supplying side it filters that side; on the preserved side it
            # filters nothing (a preserved row without a match comes back NULL-extended)
            side = right if self.rng.random() < 0.7 else left
            on += " AND " + self._predicate(side[0], side[1], 1)
        conditions = []
        if self.rng.random() < 0.7:
            conditions.append(self._predicate(left[0], left[1], 2))
        nullable = right if kind == "LEFT" else left if kind == "RIGHT" else self.rng.choice([left, right])
        test = self.rng.random()
        column = self.rng.choice(self._columns(nullable[1]))
        if test < 0.3:
            conditions.append(f"{nullable[0]}.{column} IS NULL")
            self.features.add("is_null")
        elif test < 0.5:
            conditions.append(f"{nullable[0]}.{column} IS NOT NULL")
            self.features.add("is_null")
        elif test < 0.7:
            self.features.update(("or", "is_null"))
            conditions.append(f"({self._predicate(nullable[0], nullable[1], 1)} OR {nullable[0]}.{column} IS NULL)")
        elif test < 0.85:
            conditions.append(self._predicate(nullable[0], nullable[1], 2))
        refs = [left, right]
        where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
        select, group = self._outputs(refs)
        return (f"SELECT {select} FROM {left[1]} {left[0]} {kind} JOIN {right[1]} {right[0]} "
                f"ON {on}{where}{group}")

    def _in_subquery(self) -> str:
        fk = self.rng.choice(self.fks)
        self.features.add("subquery")
        outer_is_child = self.rng.random() < 0.5
        outer_t, inner_t = (fk.child, fk.parent) if outer_is_child else (fk.parent, fk.child)
        outer_cols, inner_cols = ((fk.child_columns, fk.parent_columns) if outer_is_child
                                  else (fk.parent_columns, fk.child_columns))
        o, i = self._alias(outer_t), self._alias(inner_t)
        inner_where = self._where([(i, inner_t)])
        negated = self.rng.random() < 0.3
        if negated:
            self.features.add("not")
        selected = f"{i}.{inner_cols[0]}"
        if self.rng.random() < 0.2:
            # some of the subquery's values are NULL: NOT IN is then never true, IN unchanged
            selected = f"CASE WHEN {self._predicate(i, inner_t, 1)} THEN {selected} END"
            self.features.add("opaque")
        tail = ""
        shape = self.rng.random()
        if shape < 0.1 and selected.startswith(i):
            # the subquery's values, not its rows, are fixed by ORDER BY the value
            tail = f" ORDER BY {selected} LIMIT {self.rng.choice([1, 5, 50])}"
            self.features.add("limit_subquery")
        elif shape < 0.2 and selected.startswith(i):
            tail = f" GROUP BY {selected} HAVING count(*) > {self.rng.choice([1, 2, 4])}"
            self.features.add("having")
        condition = (f"{o}.{outer_cols[0]} {'NOT IN' if negated else 'IN'} "
                     f"(SELECT {selected} FROM {inner_t} {i}{inner_where}{tail})")
        conditions = [condition]
        if self.rng.random() < 0.6:
            conditions.append(self._predicate(o, outer_t, 2))
        self.rng.shuffle(conditions)
        select, group = self._outputs([(o, outer_t)])
        return f"SELECT {select} FROM {outer_t} {o} WHERE {' AND '.join(conditions)}{group}"

    def _exists(self) -> str:
        fk = self.rng.choice(self.fks)
        self.features.update(("subquery", "exists"))
        outer_is_child = self.rng.random() < 0.5
        outer_t, inner_t = (fk.child, fk.parent) if outer_is_child else (fk.parent, fk.child)
        o, i = self._alias(outer_t), self._alias(inner_t)
        pairs = zip(fk.child_columns, fk.parent_columns)
        correlation = " AND ".join(f"{o}.{c} = {i}.{p}" if outer_is_child else f"{i}.{c} = {o}.{p}"
                                   for c, p in pairs)
        inner = [correlation]
        if self.rng.random() < 0.8:
            inner.append(self._predicate(i, inner_t, 2))
        negated = self.rng.random() < 0.35
        if negated:
            self.features.add("not")
        exists = f"{'NOT ' if negated else ''}EXISTS (SELECT 1 FROM {inner_t} {i} WHERE {' AND '.join(inner)})"
        conditions = [exists]
        if self.rng.random() < 0.6:
            conditions.append(self._predicate(o, outer_t, 2))
        if self.rng.random() < 0.15:  # EXISTS under an OR: no edge may be derived from it
            self.features.add("or")
            conditions = [f"({' AND '.join(conditions)} OR {self._predicate(o, outer_t, 1)})"]
        select, group = self._outputs([(o, outer_t)])
        return f"SELECT {select} FROM {outer_t} {o} WHERE {' AND '.join(conditions)}{group}"

    def _scalar_subquery(self) -> str:
        table = self._table()
        numeric = [c for c in self._columns(table) if self._values(table, c).kind in ("int", "decimal")]
        if not numeric:
            return self._single()
        self.features.update(("subquery", "scalar_subquery"))
        column = self.rng.choice(numeric)
        o, i = self._alias(table), self._alias(table)
        agg = self.rng.choice(["avg", "min", "max"])
        inner_where = self._where([(i, table)])
        op = self.rng.choice(_OPS[2:])
        conditions = [f"{o}.{column} {op} (SELECT {agg}({i}.{column}) FROM {table} {i}{inner_where})"]
        if self.rng.random() < 0.7:
            conditions.append(self._predicate(o, table, 2))
        select, group = self._outputs([(o, table)])
        return f"SELECT {select} FROM {table} {o} WHERE {' AND '.join(conditions)}{group}"

    def _derived(self) -> str:
        """A filtered derived table (or CTE) joined to another table or aggregated again."""
        table = self._table()
        self.features.add("derived_table")
        i = self._alias(table)
        columns = self._columns(table)
        kept = sorted(set(self.rng.sample(columns, min(len(columns), 3))) |
                      {c for fk in self.fks for c in fk.child_columns + fk.parent_columns
                       if (fk.child == table and c in fk.child_columns) or (fk.parent == table and c in fk.parent_columns)})
        inner = f"SELECT {', '.join(f'{i}.{c}' for c in kept)} FROM {table} {i}{self._where([(i, table)])}"
        d = f"d{self.aliases}"
        links = [fk for fk in self.fks if table in (fk.child, fk.parent)]
        cte = self.rng.random() < 0.4
        if cte:
            self.features.add("cte")
        source = d if cte else f"({inner}) {d}"
        if links and self.rng.random() < 0.6:
            fk = self.rng.choice(links)
            other_t = fk.parent if fk.child == table else fk.child
            other = self._alias(other_t)
            pairs = zip(fk.child_columns, fk.parent_columns)
            on = " AND ".join(f"{d}.{c} = {other}.{p}" if fk.child == table else f"{other}.{c} = {d}.{p}"
                              for c, p in pairs)
            self.features.add("join")
            body = (f"SELECT count(*), {self._aggregate(other, other_t)} FROM {source} "
                    f"JOIN {other_t} {other} ON {on}{self._where([(other, other_t)])}")
        else:
            column = self.rng.choice(kept)
            outer_where = ""
            if self.rng.random() < 0.5:
                outer_where = " WHERE " + self._predicate(d, table, 1, columns=kept)
            body = f"SELECT count(*), count(DISTINCT {d}.{column}), max({d}.{column}) FROM {source}{outer_where}"
        return f"WITH {d} AS ({inner}) {body}" if cte else body

    def _window(self) -> str:
        """The first row per group of a filtered table: a filter on a window function's
        result must not be pushed below the window. The count of first rows is
        deterministic whatever the order of ties."""
        table = self._table()
        self.features.update(("derived_table", "window"))
        i = self._alias(table)
        columns = self._columns(table)
        group = self.rng.choice([c for c in columns if 0 < self._values(table, c).distinct <= 2000] or columns)
        order = self.rng.choice(columns)
        d = f"w{self.aliases}"
        inner = (f"SELECT {i}.{group}, row_number() OVER (PARTITION BY {i}.{group} ORDER BY {i}.{order}) AS rn "
                 f"FROM {table} {i}{self._where([(i, table)])}")
        return f"SELECT count(*), count(DISTINCT {d}.{group}) FROM ({inner}) {d} WHERE {d}.rn = 1"

    def _union(self) -> str:
        table = self._table()
        self.features.add("union")
        columns = self.rng.sample(self._columns(table), min(2, len(self._columns(table))))
        parts = []
        for _ in range(2):
            a = self._alias(table)
            parts.append(f"SELECT {', '.join(f'{a}.{c}' for c in columns)} FROM {table} {a}{self._where([(a, table)])}")
        u = f"u{self.aliases}"
        return (f"SELECT count(*), count(DISTINCT {u}.{columns[0]}) "
                f"FROM ({' UNION ALL '.join(parts)}) {u}")

    def _union_join(self) -> str:
        """A UNION ALL of a foreign key from two filtered references of its table, joined to
        the table it references (inner, or the union preserved): filters and diPs go into
        the branches and out of the union."""
        fk = self.rng.choice([f for f in self.fks if len(f.child_columns) == 1] or self.fks)
        self.features.update(("union", "join"))
        key, parent_key = fk.child_columns[0], fk.parent_columns[0]
        parts = []
        for _ in range(2):
            a = self._alias(fk.child)
            parts.append(f"SELECT {a}.{key} AS k FROM {fk.child} {a}{self._where([(a, fk.child)])}")
        u, p = f"u{self.aliases}", self._alias(fk.parent)
        join = self.rng.choice(["JOIN", "LEFT JOIN"])
        return (f"SELECT count(*), count(DISTINCT {p}.{parent_key}) FROM ({' UNION ALL '.join(parts)}) {u} "
                f"{join} {fk.parent} {p} ON {p}.{parent_key} = {u}.k{self._where([(p, fk.parent)])}")

    def _self_join(self) -> str:
        """A table joined with itself on its key's first column (lineitem l1, l2 on l_orderkey)."""
        candidates = [t for t in self.tables if self.schema.table(t).primary_key]
        table = self.rng.choice(candidates or self.tables)
        key = (self.schema.table(table).primary_key or self._columns(table))[0]
        self.features.update(("join", "self_join"))
        a, b = self._alias(table), self._alias(table)
        refs = [(a, table), (b, table)]
        extra = ""
        other = [c for c in self._columns(table) if c != key and self._values(table, c).kind in LITERAL_KINDS]
        if other and self.rng.random() < 0.5:
            column = self.rng.choice(other)
            extra = f" AND {a}.{column} {self.rng.choice(['<>', '<', '>'])} {b}.{column}"
            self.features.add("column_compare")
        select, group = self._outputs(refs)
        return (f"SELECT {select} FROM {table} {a} JOIN {table} {b} ON {a}.{key} = {b}.{key}{extra}"
                f"{self._where(refs, cross=True)}{group}")

    def _join_chain(self, size: int) -> tuple[list[tuple[str, str]], str]:
        """A connected chain of inner joins along foreign keys (either direction)."""
        start = self.rng.choice(sorted({fk.child for fk in self.fks} | {fk.parent for fk in self.fks}))
        refs = [(self._alias(start), start)]
        sql = f"{start} {refs[0][0]}"
        for _ in range(size - 1):
            options = [(ref, fk) for ref in refs for fk in self.fks if ref[1] in (fk.child, fk.parent)]
            if not options:
                break
            (alias, table), fk = self.rng.choice(options)
            as_child = fk.child == table and (fk.parent != table or self.rng.random() < 0.5)
            other_t = fk.parent if as_child else fk.child
            other = self._alias(other_t)
            pairs = zip(fk.child_columns, fk.parent_columns)
            on = " AND ".join(f"{alias}.{c} = {other}.{p}" if as_child else f"{other}.{c} = {alias}.{p}"
                              for c, p in pairs)
            if self.rng.random() < 0.25:
                on += " AND " + self._predicate(other, other_t, 1)
            sql += f" JOIN {other_t} {other} ON {on}"
            refs.append((other, other_t))
        return refs, sql

    # -- outputs -----------------------------------------------------------

    def _outputs(self, refs: list[tuple[str, str]]) -> tuple[str, str]:
        """(select list, GROUP BY clause or ""): aggregates, sometimes per group of a
        column with few values."""
        items = ["count(*)"] + [self._aggregate(*self.rng.choice(refs)) for _ in range(self.rng.randint(1, 3))]
        if self.rng.random() < 0.3:
            alias, table = self.rng.choice(refs)
            groupable = [c for c in self._columns(table) if 0 < self._values(table, c).distinct <= 60]
            if groupable:
                self.features.add("group_by")
                column = f"{alias}.{self.rng.choice(groupable)}"
                having = ""
                if self.rng.random() < 0.3:  # not a row filter: never a reason to skip
                    self.features.add("having")
                    having = f" HAVING count(*) > {self.rng.choice([0, 1, 2, 5, 50])}"
                return f"{column}, {', '.join(items)}", f" GROUP BY {column}{having}"
        return ", ".join(items), ""

    def _aggregate(self, alias: str, table: str) -> str:
        column = self.rng.choice(self._columns(table))
        kind = self._values(table, column).kind
        functions = ["min", "max", "count", "count_distinct"] + (["sum", "avg"] if kind in ("int", "decimal") else [])
        f = self.rng.choice(functions)
        if f == "count_distinct":
            return f"count(DISTINCT {alias}.{column})"
        return f"{f}({alias}.{column})"

    # -- predicates --------------------------------------------------------

    def _where(self, refs: list[tuple[str, str]], cross: bool = False) -> str:
        conditions = []
        for alias, table in refs:
            if self.rng.random() < (0.85 if len(refs) == 1 else 0.55):
                conditions.append(self._predicate(alias, table, 2))
        if cross and len(refs) > 1 and self.rng.random() < 0.3:
            (a, ta), (b, tb) = self.rng.sample(refs, 2)
            self.features.add("or")
            conditions.append(f"({self._predicate(a, ta, 1)} OR {self._predicate(b, tb, 1)})")
        return f" WHERE {' AND '.join(conditions)}" if conditions else ""

    def _predicate(self, alias: str, table: str, depth: int, columns: list[str] | None = None) -> str:
        r = self.rng.random()
        if depth <= 0 or r < 0.5:
            return self._atom(alias, table, columns)
        if r < 0.72:
            parts = [self._predicate(alias, table, depth - 1, columns) for _ in range(self.rng.randint(2, 3))]
            return "(" + " AND ".join(parts) + ")"
        if r < 0.9:
            self.features.add("or")
            parts = [self._predicate(alias, table, depth - 1, columns) for _ in range(self.rng.randint(2, 3))]
            return "(" + " OR ".join(parts) + ")"
        self.features.add("not")
        return f"NOT ({self._predicate(alias, table, depth - 1, columns)})"

    def _atom(self, alias: str, table: str, allowed: list[str] | None = None) -> str:
        if self.rng.random() < 0.01:
            self.features.add("constant")
            return self.rng.choice(["TRUE", "FALSE", "1 = 0", "1 = 1", "NULL IS NULL", "NOT (NULL IS NULL)"])
        columns = [c for c in (allowed or self._columns(table)) if self._values(table, c).kind in LITERAL_KINDS
                   and self._values(table, c).values]
        if not columns:
            column = self.rng.choice(allowed or self._columns(table))
            self.features.add("is_null")
            return f"{alias}.{column} IS {self.rng.choice(['', 'NOT '])}NULL"
        column = self.rng.choices(columns, [self._column_weight(table, c) for c in columns])[0]
        values = self._values(table, column)
        ref = f"{alias}.{column}"
        makers = [(self._comparison, 30), (self._between, 12), (self._in_list, 14), (self._is_null, 5),
                  (self._opaque, 6), (self._null_literal, 1)]
        if values.kind == "string":
            makers.append((self._like, 16))
        if values.kind == "date":
            makers.append((self._date_arithmetic, 18))
        same_kind = [c for c in columns if c != column and self._values(table, c).kind == values.kind]
        if same_kind:
            makers.append((lambda r, v: self._column_compare(r, alias, same_kind), 6))
        make = self.rng.choices([m for m, _ in makers], [w for _, w in makers])[0]
        return make(ref, values)

    def _comparison(self, ref: str, values: ColumnValues) -> str:
        self.features.add("comparison")
        op = self.rng.choice(_OPS)
        value = self._value(values)
        if self.rng.random() < 0.2:
            return f"{self._literal(value, values.kind)} {_flip(op)} {ref}"  # literal on the left
        return f"{ref} {op} {self._literal(value, values.kind)}"

    def _between(self, ref: str, values: ColumnValues) -> str:
        self.features.add("between")
        low, high = sorted([self._value(values), self._value(values)], key=_order_key)
        if self.rng.random() < 0.1:
            low, high = high, low  # reversed bounds: never true
        negated = self.rng.random() < 0.2
        if negated:
            self.features.add("not")
        return (f"{ref} {'NOT ' if negated else ''}BETWEEN {self._literal(low, values.kind)} "
                f"AND {self._literal(high, values.kind)}")

    def _in_list(self, ref: str, values: ColumnValues) -> str:
        self.features.add("in_list")
        size = self.rng.randint(1, 6) if self.rng.random() < 0.9 else self.rng.randint(20, 60)
        items = [self._literal(self._value(values), values.kind) for _ in range(size)]
        if self.rng.random() < 0.15:
            items.insert(self.rng.randrange(len(items) + 1), "NULL")
        negated = self.rng.random() < 0.25
        if negated:
            self.features.add("not")
        return f"{ref} {'NOT IN' if negated else 'IN'} ({', '.join(items)})"

    def _is_null(self, ref: str, values: ColumnValues) -> str:
        self.features.add("is_null")
        return f"{ref} IS {self.rng.choice(['', 'NOT '])}NULL"

    def _null_literal(self, ref: str, values: ColumnValues) -> str:
        """A comparison with NULL: never true, nor is its negation."""
        self.features.update(("comparison", "is_null"))
        return f"{ref} {self.rng.choice(_OPS)} NULL"

    def _like(self, ref: str, values: ColumnValues) -> str:
        self.features.add("like")
        value = self.rng.choice(values.values)
        n = len(value)
        form = self.rng.random()
        if n == 0:
            pattern = "%"
        elif form < 0.35:
            pattern = value[: self.rng.randint(1, n)] + "%"
        elif form < 0.55:
            pattern = "%" + value[self.rng.randint(0, n - 1):]
        elif form < 0.8:
            i = self.rng.randint(0, n - 1)
            pattern = "%" + value[i: i + self.rng.randint(1, 6)] + "%"
        elif form < 0.9:
            i = self.rng.randint(0, n - 1)
            pattern = value[:i] + "_" + value[i + 1:]  # one character any
        else:
            pattern = value  # no wildcard: an equality
        negated = self.rng.random() < 0.25
        if negated:
            self.features.add("not")
        return f"{ref} {'NOT ' if negated else ''}LIKE '{pattern}'"

    def _date_arithmetic(self, ref: str, values: ColumnValues) -> str:
        self.features.add("date_arithmetic")
        day = self._value(values)
        n = self.rng.randint(0, 40)
        unit = self.rng.choice(["DAY", "MONTH", "YEAR"])
        n = n if unit == "DAY" else n % 13 if unit == "MONTH" else n % 3
        sign = self.rng.choice(["+", "-"])
        op = self.rng.choice(_OPS[2:] + ("=",))
        form = self.rng.random()
        if form < 0.4:
            return f"{ref} {op} DATE '{day.isoformat()}' {sign} INTERVAL '{n}' {unit}"
        if form < 0.6:
            return (f"{ref} BETWEEN DATE '{day.isoformat()}' "
                    f"AND DATE '{day.isoformat()}' + INTERVAL '{max(n, 1)}' {unit}")
        if form < 0.8:
            return f"{ref} {op} {self.rng.choice(['date_add', 'date_sub'])}(DATE '{day.isoformat()}', {n})"
        # arithmetic on the column's side: nothing the router reasons with
        self.features.add("opaque")
        return f"date_add({ref}, {n}) {op} DATE '{day.isoformat()}'"

    def _column_compare(self, ref: str, alias: str, others: list[str]) -> str:
        self.features.add("column_compare")
        return f"{ref} {self.rng.choice(_OPS)} {alias}.{self.rng.choice(others)}"

    def _opaque(self, ref: str, values: ColumnValues) -> str:
        """Functions of the column: the router cannot use them, so they must never skip."""
        self.features.add("opaque")
        value = self._value(values)
        literal = self._literal(value, values.kind)
        if values.kind in ("int", "decimal"):
            return self.rng.choice([f"abs({ref}) > {literal}", f"{ref} * 2 <= {literal}",
                                    f"coalesce(nullif({ref}, {literal}), 0) > 0",
                                    f"nullif({ref}, {literal}) IS NULL"])
        if values.kind == "string":
            return self.rng.choice([f"substring({ref}, 1, 2) = '{value[:2]}'", f"length({ref}) > {len(value)}",
                                    f"upper({ref}) = '{value.upper()}'", f"nullif({ref}, {literal}) IS NULL"])
        return self.rng.choice([f"year({ref}) = {value.year}", f"month({ref}) IN ({value.month}, {value.month % 12 + 1})",
                                f"CASE WHEN {ref} > {literal} THEN 1 ELSE 0 END = 1"])

    # -- values ------------------------------------------------------------

    def _column_weight(self, table: str, column: str) -> float:
        values = self._values(table, column)
        if values.kind == "date":
            return 3.0
        if values.kind == "string" and values.distinct > 1000:
            return 0.5  # free text
        return 1.0

    def _columns(self, table: str) -> list[str]:
        return list(self.schema.table(table).column_names)

    def _values(self, table: str, column: str) -> ColumnValues:
        return self.profile.column(table, column)

    def _value(self, values: ColumnValues):
        """A value of the column: mostly one it holds (a block edge or a sample),
        sometimes one step past such a value, or past the column's whole range."""
        value = self.rng.choice(values.values)
        r = self.rng.random()
        if r < 0.2:
            return _step(value, self.rng.choice([-1, 1]))
        if r < 0.25:
            return _step(values.low, -1) if self.rng.random() < 0.5 else _step(values.high, 1)
        if r < 0.28 and values.kind == "int":
            self.features.add("mixed_types")
            return Decimal(value) + Decimal("0.5")  # an int column against a decimal literal
        if r < 0.31 and values.kind == "decimal":
            self.features.add("mixed_types")
            return value + Decimal(self.rng.choice(["0.005", "-0.005", "0.000"]))  # more digits than the column
        if r < 0.34 and values.kind == "string" and len(value) > 1:
            return value[: self.rng.randint(1, len(value) - 1)]  # a prefix: between values in string order
        if r < 0.38 and values.kind == "date":
            self.features.add("date_edges")
            if self.rng.random() < 0.5:  # the last day of its month (INTERVAL MONTH clamps there)
                return dt.date(value.year, value.month, calendar.monthrange(value.year, value.month)[1])
            return dt.date(1996, 2, 29) if self.rng.random() < 0.5 else dt.date(value.year, 1, 1)
        return value

    def _literal(self, value, kind: str) -> str:
        r = self.rng.random()
        if isinstance(value, dt.date) and r < 0.15:
            return f"'{value.isoformat()}'"  # a date written as a string: Spark reads it as a date
        if isinstance(value, dt.date) and r < 0.22:
            # a timestamp against a date column compares as timestamps: the day itself is
            # before noon of that day, so `d < TIMESTAMP 'day 12:00'` holds for d = day
            self.features.add("mixed_types")
            return f"TIMESTAMP '{value.isoformat()} {self.rng.choice(['00:00:00', '12:00:00', '23:59:59'])}'"
        if kind == "int" and type(value) is int and r < 0.04:
            self.features.add("mixed_types")
            return f"'{value}'"  # an int column against a string of digits
        return _spark_literal(value)


def _step(value, direction: int):
    """The next value up or down in the column's type (a string gets a character more or less)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return value + direction
    if isinstance(value, Decimal):
        exponent = value.as_tuple().exponent
        unit = Decimal(1).scaleb(exponent if isinstance(exponent, int) and exponent < 0 else 0)
        return value + direction * unit
    if isinstance(value, dt.date):
        return value + dt.timedelta(days=direction)
    if isinstance(value, str):
        return value + "A" if direction > 0 else value[:-1]
    return value


def _order_key(value):
    return (type(value).__name__ if not isinstance(value, (int, Decimal)) else "number", value)


def _flip(op: str) -> str:
    return {"<": ">", "<=": ">=", ">": "<", ">=": "<="}.get(op, op)
