"""`layout bench tpcds` (B2): B1's measurements on TPC-DS. dsdgen's tables (cached in
the work folder per scale factor), 36 templates that filter dimensions and join them
to the facts (workload.tpcds), odd instances train, even ones test; every table some
template reads is laid out by every layout asked for; the same report as B1."""

from __future__ import annotations

from pathlib import Path

from layout_core.base.schema import load_schema
from layout_core.bench.tpch import LAYOUTS, BenchData, run_benchmark
from layout_core.workload.tpcds import generate
from layout_core.workload.tpcds_data import generate_tpcds

# sortkey: facts in the order a warehouse loads them (the day of the sale, of the
# return, of the inventory count), dimensions by primary key
SORT_KEYS = {"store_sales": "ss_sold_date_sk", "catalog_sales": "cs_sold_date_sk", "web_sales": "ws_sold_date_sk",
             "store_returns": "sr_returned_date_sk", "catalog_returns": "cr_returned_date_sk",
             "web_returns": "wr_returned_date_sk", "inventory": "inv_date_sk"}


def run(sf: float = 1.0, block_rows: int = 10_000, per_template: int = 8, seed: int = 1,
        work: Path = Path(".layout/bench/tpcds"), layouts=LAYOUTS, spark_e2e: bool = False,
        dips: bool = False, templates=None) -> dict:
    """B2 at `sf` on `templates` (default all 35 of workload.tpcds)."""
    work = work.resolve()
    queries = tuple(generate(per_template, seed, templates))
    bench = BenchData(f"TPC-DS SF {sf:g}", load_schema("tpcds"), generate_tpcds(sf, work / f"tpcds_sf{sf:g}"),
                      queries, SORT_KEYS, f"sf{sf:g}",
                      {"scale_factor": sf, "seed": seed, "templates": sorted({q.template for q in queries})})
    return run_benchmark(bench, block_rows, work, layouts, spark_e2e, None, dips)
