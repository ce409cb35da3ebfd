"""Range cuts on string columns (`p_brand < 'Brand#35'`, from `literal_range_cuts`)
are sound only if the router's reasoning orders strings as Spark does when it
computes the cut bits. Spark's default collation compares UTF-8 bytes, which is
code point order, the order Python's `<` on str uses: checked here on random
strings with NULLs, duplicates, empty strings, prefixes and non-ASCII text."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from layout_core.predicates import Column, Compare, disjoint, implies, to_sql

pytestmark = pytest.mark.slow

COLUMN = Column("s", "string")
EDGE = ["", "a", "a ", "ab", "B", "Brand#3", "Brand#35", "Brand#4", "é", "z", "\u00ff", "\u0100", "\U0001f600"]
TEXT = st.one_of(st.sampled_from(EDGE), st.text(st.characters(codec="utf-8"), max_size=4))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(st.one_of(st.none(), TEXT), min_size=1, max_size=12),
       cut_at=TEXT, query_value=st.one_of(st.sampled_from(EDGE), TEXT))
def test_the_reasoning_orders_strings_as_spark_computes_the_cut_bits(spark, rows, cut_at, query_value):
    cut = Compare(COLUMN, "<", cut_at)
    query = Compare(COLUMN, "=", query_value)
    frame = spark.createDataFrame([(r,) for r in rows + [query_value]], "s string")
    # the cut's bit, as featurize computes it (NULL is not TRUE), for the rows the query selects
    bits = [r[0] for r in frame.where(to_sql(query)).selectExpr(f"coalesce({to_sql(cut)}, false)").collect()]
    assert bits, "the query's own value is among the rows"
    if implies(query, cut):
        assert all(bits)
    if disjoint(query, cut):
        assert not any(bits)
    # and one of the two always holds: a range cut decides every literal
    assert implies(query, cut) or disjoint(query, cut)
