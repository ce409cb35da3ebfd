"""The random queries of `layout check`: seeded, covering every predicate and query
kind the check promises, analyzable by the router, and selective on real data.
Also the answer comparison the check relies on. (No Spark; DuckDB for the
selectivity check.)"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from decimal import Decimal

import pytest
import sqlglot
from sqlglot import exp

from layout_core.base.schema import load_schema
from layout_core.catalog import CatalogSnapshot
from layout_core.check.profile import profile_tables
from layout_core.check.random_queries import generate_queries
from layout_core.check.run import compare_answers
from layout_core.sql.analysis import analyze

SCHEMA = load_schema("tpch")


@pytest.fixture(scope="module")
def profile(tpch_sf001):
    return profile_tables(SCHEMA, {t: [str(tpch_sf001 / f"{t}.parquet")] for t in SCHEMA.tables}, seed=1)


@pytest.fixture(scope="module")
def queries(profile):
    return [q.sql for q in generate_queries(SCHEMA, profile, 600, seed=4)]


def test_the_same_seed_gives_the_same_queries_and_another_seed_others(profile):
    first = [q.sql for q in generate_queries(SCHEMA, profile, 50, seed=4)]
    again = [q.sql for q in generate_queries(SCHEMA, profile, 50, seed=4)]
    other = [q.sql for q in generate_queries(SCHEMA, profile, 50, seed=5)]
    assert first == again
    assert len(set(first) & set(other)) < 5
    # query 37 of a seed can be made alone, to reproduce one query of a long run
    (alone,) = generate_queries(SCHEMA, profile, 1, seed=4, start=37)
    assert alone.sql == first[37]


def test_every_query_is_analyzed_by_the_router(queries):
    for sql in queries:
        analyze(sql, SCHEMA)  # raises QueryError when the router could not use the query


def _kinds_in_predicates(tree: exp.Expression) -> set[str]:
    """The schema kinds of the columns compared with a literal in WHERE or ON clauses."""
    kinds = set()
    for node in tree.find_all(exp.EQ, exp.NEQ, exp.LT, exp.LTE, exp.GT, exp.GTE, exp.Between, exp.In, exp.Like):
        column = node.this
        if isinstance(column, exp.Column) and (node.find(exp.Literal) is not None):
            for table in SCHEMA.tables.values():
                if table.has_column(column.name):
                    kinds.add(table.column(column.name).kind)
    return kinds


def test_queries_cover_every_kind_of_predicate_and_query(queries):
    seen: Counter = Counter()
    kinds: set[str] = set()
    for sql in queries:
        tree = sqlglot.parse_one(sql, read="spark")
        kinds |= _kinds_in_predicates(tree)
        seen["is null"] += any(isinstance(n.expression, exp.Null) for n in tree.find_all(exp.Is))
        seen["in list"] += any(n.expressions for n in tree.find_all(exp.In))
        seen["in list with NULL"] += any(isinstance(e, exp.Null) for n in tree.find_all(exp.In) for e in n.expressions)
        seen["not"] += tree.find(exp.Not) is not None
        seen["or"] += tree.find(exp.Or) is not None
        seen["like"] += tree.find(exp.Like) is not None
        seen["between"] += tree.find(exp.Between) is not None
        seen["date arithmetic"] += tree.find(exp.Interval, exp.DateAdd, exp.DateSub, exp.TsOrDsAdd) is not None
        joins = list(tree.find_all(exp.Join))
        seen["inner join"] += any(not j.side and not j.kind for j in joins)
        seen["outer join"] += any(j.side in ("LEFT", "RIGHT", "FULL") for j in joins)
        seen["in subquery"] += any(n.args.get("query") is not None for n in tree.find_all(exp.In))
        seen["exists"] += tree.find(exp.Exists) is not None
        seen["derived table"] += any(isinstance(s.parent, (exp.From, exp.Join)) for s in tree.find_all(exp.Subquery))
        seen["cte"] += tree.find(exp.CTE) is not None
        seen["union"] += tree.find(exp.Union) is not None
    assert kinds >= {"int", "decimal", "string", "date"}
    wanted = ["is null", "in list", "in list with NULL", "not", "or", "like", "between", "date arithmetic",
              "inner join", "outer join", "in subquery", "exists", "derived table", "cte", "union"]
    assert not [k for k in wanted if seen[k] == 0], seen
    # joins, outer joins and subqueries are each a good share of 600 queries, not a rarity
    assert seen["inner join"] > 150 and seen["outer join"] > 50 and seen["exists"] > 30, seen


def test_literals_come_from_the_data_so_answers_are_neither_all_empty_nor_all_full(tpch_sf001, profile):
    from layout_core.check.engines import DuckDBEngine

    engine = DuckDBEngine(SCHEMA, CatalogSnapshot({}, {}), {t: str(tpch_sf001 / f"{t}.parquet") for t in SCHEMA.tables})
    empty = some = 0
    for query in generate_queries(SCHEMA, profile, 200, seed=9):
        rows = engine.run(query.sql)
        if not rows or rows[0][0] in (0, None) and len(rows) == 1:
            empty += 1
        else:
            some += 1
    assert empty >= 10  # empty answers are tried too (never-true predicates, values past the edges)
    assert some >= 100  # but most queries return something


def test_literals_are_the_columns_values_or_one_step_past_them():
    # a profile built by hand: the generator only picks among these values or one step past them
    from layout_core.base.schema import schema_from_dict
    from layout_core.check.profile import ColumnValues, DataProfile

    schema = schema_from_dict({"tables": {"t": {"columns": {"k": "bigint", "d": "date", "p": "decimal(15,2)"}}}})
    profile = DataProfile({"t": {"k": ColumnValues("int", (1, 5, 9), False, 3),
                                 "d": ColumnValues("date", (dt.date(1995, 1, 31),), False, 1),
                                 "p": ColumnValues("decimal", (Decimal("1.50"),), False, 1)}}, {"t": 10})
    sqls = [q.sql for q in generate_queries(schema, profile, 300, seed=2)]
    literals = Counter(lit.this for sql in sqls for lit in sqlglot.parse_one(sql, read="spark").find_all(exp.Literal)
                       if not lit.is_string)
    assert literals["10"] > 0 and literals["0"] > 0  # one past 9, one before 1
    assert literals["1.49"] + literals["1.51"] > 0  # a cent past the decimal value


def test_answers_compare_as_multisets_with_float_tolerance_and_equal_nulls():
    assert compare_answers([(1, None), (2, "a")], [(2, "a"), (1, None)])[0]
    assert compare_answers([(0.1 + 0.2,)], [(0.3,)])[0]  # the order of additions moves the last bits
    assert compare_answers([(Decimal("1.10"), dt.date(1995, 1, 1))], [(Decimal("1.1"), dt.date(1995, 1, 1))])[0]
    equal, what, missing, extra = compare_answers([(1,), (1,), (2,)], [(1,), (2,), (2,)])
    assert not equal and missing == ((1,),) and extra == ((2,),)  # duplicates count
    equal, what, missing, extra = compare_answers([(1.0,)], [(1.001,)])
    assert not equal and missing == ((1.0,),)
    assert not compare_answers([(None,)], [(0,)])[0]
