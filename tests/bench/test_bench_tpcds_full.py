"""`layout bench tpcds` at SF 0.01 on three templates that read every fact table between them
(inventory, store and catalog sales, store returns, web sales), sortkey and mto, --spark, as a
user runs it (`make test-bench`; tests/spark/test_tpcds.py benches template 25 in `make test`).
TPC-DS's own tests, collected here again with this module's larger run."""

from __future__ import annotations

import pytest

# the benchmark's tests and the data they share, collected here again with this module's run
from tests.spark.test_tpcds import (  # noqa: F401
    bench_work,
    run_tpcds_bench,
    test_rewritten_queries_give_the_raw_answers,
    test_the_report_has_b1s_shape_and_mto_reads_fewer_fact_blocks,
    tpcds_data,
)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tpcds_b2(bench_work, tpcds_data):  # noqa: F811 (the fixtures imported above)
    return run_tpcds_bench(bench_work, (21, 25, 62))


def test_every_fact_table_is_laid_out(tpcds_b2):
    assert {"store_sales", "catalog_sales", "web_sales", "inventory", "store_returns"} <= set(
        tpcds_b2[0]["tables_laid_out"])
