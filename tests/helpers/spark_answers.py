"""Run queries on the raw tables and, rewritten with their routes, on the active
layouts; the answers must be the same (skipping never loses a row)."""

from __future__ import annotations

from layout_core.base.schema import Schema
from layout_core.skipping.rewrite import rewrite_sql
from layout_core.skipping.router import RoutingIndex, route_query


def assert_same_answers_on_layouts(spark, snapshot, schema: Schema, tpch_dir, statements, raw_filters=None):
    """`raw_filters` ({table: SQL condition}) restrict a raw table to the rows its
    layouts hold (a laid-out partition). The raw tables' views are put back after."""
    from layout_core.spark.compare import same_rows
    from layout_core.spark.views import register_layout_views

    def use_raw():
        for t in schema.tables:
            spark.read.parquet(str(tpch_dir / f"{t}.parquet")).createOrReplaceTempView(t)

    use_raw()
    for t, condition in (raw_filters or {}).items():
        spark.table(t).where(condition).createOrReplaceTempView(t)
    expected = {sql: spark.sql(sql).collect() for sql in statements}
    use_raw()
    try:
        assert register_layout_views(spark, snapshot, [schema.table(t) for t in schema.tables])
        index = RoutingIndex.from_snapshot(snapshot)
        for sql in statements:
            rewritten = rewrite_sql(route_query(sql, index, schema), index)
            equal, why = same_rows(expected[sql], spark.sql(rewritten).collect())
            assert equal, f"{why}\n{rewritten}"
    finally:
        use_raw()
