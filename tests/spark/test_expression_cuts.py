"""Cuts on arithmetic expressions (virtual columns) are sound only if the reasoning
about their values agrees with the bits Spark computes for them: checked on
random rows with NULLs, zeros (division), negative numbers under a square root
(NaN, which Spark orders above every number), duplicates and edge values, for
queries as a user writes them (legacy mode: `/` by zero is NULL; ANSI mode fails
such a query, so it has no rows to lose)."""

from decimal import Decimal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout_core.base.schema import schema_from_dict
from layout_core.predicates import disjoint, implies, to_sql
from layout_core.sql.analysis import analyze

pytestmark = pytest.mark.slow

SCHEMA = schema_from_dict({"name": "shapes", "tables": {"t": {
    "columns": {"x": "double", "y": "double", "a": "decimal(6,2)", "b": "decimal(6,2)", "n": "int"}}}})
EXPRESSIONS = ["sqrt(x)", "x / y", "a * (1 - b)", "a / b", "n / 4", "abs(x - y) * 2.5", "power(x, 2) + y"]
DOUBLES = st.one_of(st.none(), st.sampled_from([0.0, -0.0, 1.0, -1.0, 2.5, 4.0, 9.0, 1e-9, -16.0]),
                    st.floats(-100, 100, allow_nan=False))
DECIMALS = st.one_of(st.none(), st.sampled_from([Decimal("0"), Decimal("1"), Decimal("-1"), Decimal("0.05")]),
                     st.decimals(-99, 99, places=2, allow_nan=False, allow_infinity=False))
ROWS = st.tuples(DOUBLES, DOUBLES, DECIMALS, DECIMALS, st.one_of(st.none(), st.integers(-20, 20)))
LITERALS = st.sampled_from(["0", "0.5", "1", "2", "3.25", "-1", "10"])
OPS = st.sampled_from(["<", "<=", ">", ">=", "="])


def _atom(where: str):
    a = analyze(f"SELECT * FROM t WHERE {where}", SCHEMA)
    return a.filter(a.refs[0].key)


CUT_OPS = ["<", "<=", ">", ">=", "="]
CUT_LITERALS = ["0", "0.5", "1", "2", "3.25", "-1", "10"]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(ROWS, min_size=1, max_size=12), expression=st.sampled_from(EXPRESSIONS),
       query_op=OPS, query_at=LITERALS)
def test_the_reasoning_on_an_expression_agrees_with_the_cut_bits_spark_computes(
        spark, rows, expression, query_op, query_at):
    query_sql = f"{expression} {query_op} {query_at}"
    query = _atom(query_sql)
    cuts = [_atom(f"{expression} {op} {at}") for op in CUT_OPS for at in CUT_LITERALS]
    assert query.column.virtual and all(c.column.virtual for c in cuts)  # understood, not opaque
    frame = spark.createDataFrame(rows, "x double, y double, a decimal(6,2), b decimal(6,2), n int")
    previous = spark.conf.get("spark.sql.ansi.enabled")
    spark.conf.set("spark.sql.ansi.enabled", "false")
    try:
        # the rows the user's query returns, and their cut bits as featurize computes them (NULL: FALSE)
        selected = frame.where(query_sql).selectExpr(*(f"coalesce({to_sql(c)}, false)" for c in cuts)).collect()
    finally:
        spark.conf.set("spark.sql.ansi.enabled", previous)
    for j, cut in enumerate(cuts):
        bits = [row[j] for row in selected]
        if implies(query, cut):
            assert all(bits), (query_sql, to_sql(cut), rows)
        if disjoint(query, cut):
            assert not any(bits), (query_sql, to_sql(cut), rows)


def test_a_cut_with_a_zero_divisor_is_computed_in_ansi_mode_too(spark):
    # featurize runs in the session's mode; try_divide keeps a zero divisor from failing it
    cut = _atom("x / y > 1")
    frame = spark.createDataFrame([(1.0, 0.0), (3.0, 2.0), (None, 1.0)], "x double, y double")
    assert spark.conf.get("spark.sql.ansi.enabled") == "true"
    bits = [r[0] for r in frame.selectExpr(f"coalesce({to_sql(cut)}, false)").collect()]
    assert bits == [False, True, False]
