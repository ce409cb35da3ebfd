"""`make demo`: TPC-H from nothing to a report, through the real nightly DAG.

1. TPC-H at SF 0.05 (tpchgen-cli) and a query log: training and test
   instances of the lineitem templates Sun et al. use (q3 q5 q6 q8 q10 q12 q14 q19).
2. Two nightly partitions of lineitem (ship years 1995 and 1996) laid out by
   `airflow dags test layout_nightly` with the fineblock optimizer.
3. The same partitions laid out with the sortkey baseline (l_shipdate) and
   with mto (dimension tables first, so lineitem gets join-induced cuts), by
   the same step functions run in-process, each into a catalog of its own.
4. The report: per layout the fraction of lineitem rows and blocks the test
   queries read, a chart, and a Spark check (fineblock and mto) that every
   rewritten test query returns exactly the rows of the query as written.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

import numpy as np

from layout_core.airflow.dag_run import airflow_env, run_dag_test
from layout_core.base.config import load_settings
from layout_core.base.schema import load_schema
from layout_core.base.urls import masked_url
from layout_core.catalog import Catalog
from layout_core.flows.nightly import steps
from layout_core.skipping.router import RoutingIndex, route_query
from layout_core.spark.runner import register_raw_tables, run_workload
from layout_core.spark.session import local_session
from layout_core.spark.views import register_layout_views
from layout_core.sql.statements import split_statements
from layout_core.workload.history import QueryRecorder
from layout_core.workload.tpch import generate, write_sql_file
from layout_core.workload.tpch_data import generate_tpch

log = logging.getLogger("layout.demo")

TEMPLATES = (3, 5, 6, 8, 10, 12, 14, 19)
PARTITIONS = (("1995", "1995-01-01", "1996-01-01"), ("1996", "1996-01-01", "1997-01-01"))
BLOCK_ROWS = 2000
NUM_FEAT = 15
DIMENSIONS = ("region", "nation", "supplier", "customer", "part", "orders")  # parents first


# each layout's settings for lineitem (`layout optimizers` describes them)
SETTINGS = {"fineblock": {"num_feat": NUM_FEAT, "min_support": 2}, "sortkey": {"sort_column": "l_shipdate"},
            "mto": {"sort_column": "l_shipdate"}}


def _conf(tpch: Path, log_file: Path, partition: str, start: str, end: str, optimizer: str) -> dict:
    return {
        "table": "lineitem", "partition": partition, "source": str(tpch / "lineitem.parquet"),
        "date_column": "l_shipdate", "start": start, "end": end, "optimizer": optimizer,
        "block_rows": BLOCK_ROWS, "settings": SETTINGS[optimizer], "query_log": str(log_file),
    }


def _in_process(spark, home: Path, tpch: Path, train: Path, optimizer: str) -> str:
    """The same partitions laid out by the same step functions the jobs call, into
    a catalog of their own; mto lays out the dimension tables first (their
    active layouts give lineitem its join-induced cuts)."""

    url = f"sqlite:///{home / f'{optimizer}_catalog.db'}"
    warehouse = home / f"{optimizer}_warehouse"
    schema = load_schema("tpch")
    run = f"demo-{time.time_ns()}"
    with Catalog(url) as catalog:
        for table in (DIMENSIONS if optimizer == "mto" else ()):
            steps.run_in_process(spark, catalog, schema, steps.RunPaths(warehouse, table, "", run),
                                 str(tpch / f"{table}.parquet"), optimizer, {"block_rows": BLOCK_ROWS}, str(train))
        for partition, start, end in PARTITIONS:
            paths = steps.RunPaths(warehouse, "lineitem", partition, run)
            steps.run_in_process(spark, catalog, schema, paths, str(tpch / "lineitem.parquet"), optimizer,
                                 {"block_rows": BLOCK_ROWS, **SETTINGS[optimizer]}, str(train),
                                 date_column="l_shipdate", start=start, end=end)
    return url


def read_fractions(url: str, queries: list[str]) -> dict:
    """Rows and blocks of lineitem the router reads for each query, and totals.
    The routes go to the catalog's query history (the Airflow Skipping page shows them)."""
    schema = load_schema("tpch")
    with Catalog(url) as catalog:
        index = RoutingIndex.from_snapshot(catalog.snapshot())
    per_query = []
    with QueryRecorder(url, "demo") as record:
        routes = [route_query(sql, index, schema) for sql in queries]
        for route in routes:
            record(route)
    for route in routes:
        refs = [r for r in route.refs if r.table == "lineitem" and not r.read_all]
        per_query.append({
            "rows": sum(r.rows for r in refs), "rows_total": sum(r.rows_total for r in refs),
            "blocks": sum(len(r.blocks) for r in refs), "blocks_total": sum(r.blocks_total for r in refs),
        })
    total = {k: sum(q[k] for q in per_query) for k in ("rows", "rows_total", "blocks", "blocks_total")}
    return {
        "per_query": per_query,
        "rows_fraction": total["rows"] / total["rows_total"] if total["rows_total"] else 0.0,
        "blocks_fraction": total["blocks"] / total["blocks_total"] if total["blocks_total"] else 0.0,
        "blocks": sum(len(layout.block_ids) for layout in index.layouts.get("lineitem", ())),
    }


def _chart(path: Path, templates: list[int], layouts: dict[str, dict]) -> None:
    import matplotlib  # here: the headless backend must be chosen before pyplot is imported

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # after the backend is set

    labels = sorted(set(templates))
    x = np.arange(len(labels))
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.8 / max(1, len(layouts))
    for i, (name, result) in enumerate(layouts.items()):
        values = []
        for t in labels:
            qs = [q for q, tt in zip(result["per_query"], templates) if tt == t]
            rows, total = sum(q["rows"] for q in qs), sum(q["rows_total"] for q in qs)
            values.append(rows / total if total else 0.0)
        ax.bar(x + i * width, values, width, label=name)
    ax.set_xticks(x + width * (len(layouts) - 1) / 2, [f"q{t}" for t in labels])
    ax.set_ylabel("fraction of lineitem rows read")
    ax.set_title("Test queries: rows read per template (lower is better)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _nightly_catalog(home: Path) -> tuple[str, Path]:
    """Where the nightly DAG's layouts go: the default catalog and warehouse when nothing
    is configured, so that `layout route`, `explain` and `stats` read them with no setting;
    else (a catalog of one's own is set) a catalog of the demo's own under `home`."""

    configured = any(os.environ.get(v) for v in ("LAYOUT_CATALOG_URL", "LAYOUT_WAREHOUSE", "LAYOUT_CONFIG"))
    if configured or Path("layout.yaml").is_file():
        return f"sqlite:///{home / 'catalog.db'}", home / "warehouse"
    settings = load_settings()
    return settings.catalog_url, Path(settings.warehouse)


def _default_catalog() -> str:

    return load_settings().catalog_url


def run_demo(home: Path, sf: float = 0.05) -> int:
    home = home.resolve()
    home.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    print(f"[1/4] TPC-H SF {sf} and query logs in {home}")
    tpch = home / "tpch"
    generate_tpch(sf, tpch)
    train, test = home / "train.sql", home / "test.sql"
    write_sql_file(generate(10, seed=1, templates=TEMPLATES, scale_factor=sf), train)
    test_queries = generate(3, seed=2, templates=TEMPLATES, scale_factor=sf)
    write_sql_file(test_queries, test)

    print("[2/4] nightly DAG (airflow dags test layout_nightly), fineblock, partitions 1995 and 1996")
    catalog_url, warehouse = _nightly_catalog(home)
    env = airflow_env(home / "airflow", catalog_url, warehouse)
    for partition, start, end in PARTITIONS:
        t0 = time.monotonic()
        run_dag_test(env, "layout_nightly", _conf(tpch, train, partition, start, end, "fineblock"),
                     log_file=home / "logs" / f"dag_{partition}.log",
                     echo=lambda line: print(f"      {line[:200]}", flush=True))
        print(f"      partition {partition}: done in {time.monotonic() - t0:.0f} s "
              f"(log: {home / 'logs' / f'dag_{partition}.log'})")

    print("[3/4] sortkey baseline and mto (dimension tables first), same steps in-process; "
          "Spark check of the rewritten queries")

    schema = load_schema("tpch")
    spark = local_session("layout-demo")
    try:
        sortkey_url = _in_process(spark, home, tpch, train, "sortkey")
        mto_url = _in_process(spark, home, tpch, train, "mto")
        sqls = [s.sql for s in split_statements(test.read_text())]
        checks = {}
        for name, url in (("fineblock", catalog_url), ("mto", mto_url)):
            register_raw_tables(spark, tpch, list(schema.tables))
            with Catalog(url) as catalog:
                snapshot = catalog.snapshot()
            register_layout_views(spark, snapshot, list(schema.tables.values()))
            checks[name] = run_workload(spark, sqls, RoutingIndex.from_snapshot(snapshot), schema,
                                        {n: i.location for n, i in snapshot.tables.items()}, compare=True)
    finally:
        spark.stop()

    print("[4/4] report")
    layouts = {"fineblock": read_fractions(catalog_url, sqls), "mto": read_fractions(mto_url, sqls),
               "sortkey": read_fractions(sortkey_url, sqls)}
    templates = [q.template for q in test_queries]
    _chart(home / "report.png", templates, layouts)
    runs = checks["fineblock"]
    same = {name: sum(1 for r in checked if r.equal) for name, checked in checks.items()}
    report = {
        "test_queries": len(sqls),
        "layouts": {name: {k: v for k, v in r.items() if k != "per_query"} for name, r in layouts.items()},
        "spark_identical_answers": same,
        "spark_files_read": {"rewritten": sum(r.scan_rewritten.files for r in runs),
                             "as_written": sum(r.scan_original.files for r in runs)},
        "seconds": round(time.monotonic() - started, 1),
    }
    (home / "report.json").write_text(json.dumps(report, indent=2))
    print(f"\n{len(sqls)} test queries over lineitem ship years 1995-1996 (blocks of >= {BLOCK_ROWS} rows):")
    print(f"  {'layout':10s} {'blocks':>7s} {'rows read':>10s} {'blocks read':>12s}")
    for name, r in layouts.items():
        print(f"  {name:10s} {r['blocks']:7d} {r['rows_fraction']:10.1%} {r['blocks_fraction']:12.1%}")
    for name, checked in checks.items():
        print(f"  Spark, {name}: {same[name]}/{len(checked)} rewritten queries returned identical answers")
    print(f"  files read by fineblock's rewritten queries: {report['spark_files_read']['rewritten']} "
          f"vs {report['spark_files_read']['as_written']} as written")
    print(f"  chart: {home / 'report.png'}   numbers: {home / 'report.json'}   "
          f"total {report['seconds']:.0f} s")
    print(f"  the fineblock layouts and the test queries' history are in {masked_url(catalog_url)}: try\n"
          f"    layout route \"SELECT count(*) FROM lineitem WHERE l_shipdate < date '1995-03-01'\"\n"
          f"    layout stats" + ("" if catalog_url == _default_catalog() else f"   (with --catalog {masked_url(catalog_url)})"))
    return 0 if all(same[name] == len(checked) for name, checked in checks.items()) else 1
