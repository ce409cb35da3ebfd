"""`layout bench trips`: B1's measurements on taxi trips with correlated columns and
outliers (Pando's example; data and templates in workload.trips): zone and payment
laid out first, then trips, by every layout asked for; odd instances of the ten
templates train, even ones test; the same report as `layout bench tpch`."""

from __future__ import annotations

from pathlib import Path

from layout_core.base.schema import load_schema
from layout_core.bench.tpch import LAYOUTS, BenchData, run_benchmark
from layout_core.workload.trips import TABLES, generate, generate_trips

SORT_KEYS = {"trips": "tr_pickup"}  # sortkey: trips in pickup order, the dimensions by key


def run(rows: int = 6_000_000, outliers: float = 0.01, block_rows: int = 10_000, per_template: int = 8,
        seed: int = 1, work: Path = Path(".layout/bench/trips"), layouts=LAYOUTS, spark_e2e: bool = False,
        dips: bool = False) -> dict:
    work = work.resolve()
    name = f"rows{rows}_outliers{outliers:g}_seed{seed}"
    data = work / f"trips_{name}"
    # made once per setting, cached in the work folder (generate_trips renames a whole folder into place)
    paths = ({t: data / f"{t}.parquet" for t in TABLES} if data.is_dir()
             else generate_trips(rows, outliers, seed, data))
    bench = BenchData(f"taxi trips, {rows:,} rows, {outliers:.0%} outliers", load_schema("trips"), paths,
                      tuple(generate(per_template, seed)), SORT_KEYS, name,
                      {"rows": rows, "outliers": outliers, "seed": seed})
    return run_benchmark(bench, block_rows, work, layouts, spark_e2e, None, dips)
