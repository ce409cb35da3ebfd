"""Querying the laid-out tables from a Spark job (`layout_core.spark_sql`): the 22 TPC-H
templates give the raw tables' answers while reading fewer blocks, every query lands in
the catalog's history, and a table without a layout is read as the session defines it."""

from __future__ import annotations

import logging

import pytest

from layout_core.catalog import Catalog
from layout_core.workload.tpch import generate
from tests.conftest import TPCH_TABLES
from tests.helpers.tpch_layouts import BLOCK_ROWS, copied_tpch_layout, lay_out_tpch, use

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def mto(spark, tpch_sf001, tmp_path_factory):
    home = tmp_path_factory.mktemp("spark_sql")
    laid_out = copied_tpch_layout(spark, tpch_sf001, tmp_path_factory, "mto", BLOCK_ROWS, home)
    yield {**laid_out, "url": f"sqlite:///{home / 'catalog.db'}"}
    use(laid_out["raw"])


def test_the_templates_answer_as_on_the_raw_tables_and_are_recorded(spark, mto):
    from layout_core import LaidOutTables
    from layout_core.spark.compare import same_rows

    queries = generate(1, seed=7, scale_factor=0.01)
    use(mto["raw"])
    expected = [spark.sql(q.sql).collect() for q in queries]

    tables = LaidOutTables(spark, mto["url"], "tpch")
    assert set(tables.state.views) == set(TPCH_TABLES)
    read = total = 0
    for query, rows in zip(queries, expected):
        equal, why = same_rows(rows, tables.sql(query.sql).collect())
        assert equal, f"template {query.template}: {why}"
        route = tables.route(query.sql)
        read += sum(len(r.blocks) for r in route.refs)
        total += sum(r.blocks_total for r in route.refs)
    tables.close()
    assert read < total * 0.8, (read, total)  # the views alone would read every block

    with Catalog(mto["url"]) as catalog:
        history = catalog.query_history()
    assert [h.sql for h in history] == [q.sql for q in queries]
    assert {h.source for h in history} == {"api"} and all(h.analyzed for h in history)


def test_a_table_without_a_layout_is_read_as_the_session_defines_it(spark, tpch_sf001, tmp_path, caplog):
    """Only nation is laid out: region comes from the session's own view, said once."""
    from layout_core import spark_sql

    lay_out_tpch(spark, tpch_sf001, tmp_path, "mto", {"nation": 5})
    raw = {t: spark.read.parquet(str(tpch_sf001 / f"{t}.parquet")) for t in ("nation", "region")}
    use(raw)
    sql = ("SELECT r_name, count(*) AS n FROM nation JOIN region ON n_regionkey = r_regionkey "
           "WHERE r_name = '{}' GROUP BY r_name")
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    with caplog.at_level(logging.WARNING, logger="layout.spark_sql"):
        answers = [spark_sql(spark, sql.format(region), url, "tpch").collect() for region in ("ASIA", "EUROPE")]
    assert [[tuple(r) for r in rows] for rows in answers] == [[("ASIA", 5)], [("EUROPE", 5)]]
    said = [r.getMessage() for r in caplog.records if "region has no active layout" in r.getMessage()]
    assert len(said) == 1
    with Catalog(url) as catalog:
        assert len(catalog.query_history()) == 2
    use(raw)
