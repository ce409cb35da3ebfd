"""The layout_changes DAG: a real `airflow dags test` run inserts customers into a
laid-out customer table, and the orders layout's cuts through customer are repaired
(they name the new customer version) instead of going stale."""

from __future__ import annotations

import json
import sqlite3

import pytest

from layout_core.catalog import Catalog
from layout_core.flows.nightly import steps
from layout_core.skipping.router import RoutingIndex
from layout_core.workload.tpch import generate, write_sql_file
from tests.helpers.tpch_layouts import SCHEMA

pytestmark = pytest.mark.slow


def test_the_changes_dag_inserts_customers_and_repairs_the_orders_cuts(spark, tpch_sf001, tmp_path):
    from layout_core.airflow.dag_run import airflow_env, run_dag_test

    url, warehouse = f"sqlite:///{tmp_path / 'catalog.db'}", tmp_path / "wh"
    log = tmp_path / "train.sql"
    write_sql_file(generate(3, seed=1, templates=[3, 5, 10, 13, 18, 22], scale_factor=0.01), log)
    with Catalog(url) as catalog:
        for table, rows in {"region": 2, "nation": 5, "customer": 100, "orders": 1000}.items():
            steps.run_in_process(spark, catalog, SCHEMA, steps.RunPaths(warehouse, table, "", "night-1"),
                                 str(tpch_sf001 / f"{table}.parquet"), "mto", {"block_rows": rows}, str(log))
        base = catalog.active_layout("customer", "").version.version_id
        through = [c.position for c in catalog.active_layout("orders", "").cuts
                   if c.kind == "join_induced" and ("customer", base) in c.source_versions]
    assert through, "mto gave orders no cut through customer"
    new = spark.read.parquet(str(tpch_sf001 / "customer.parquet")).where("c_custkey <= 40") \
        .selectExpr("c_custkey + 50000 AS c_custkey", "c_name", "c_address", "c_nationkey", "c_phone",
                    "c_acctbal", "c_mktsegment", "c_comment")
    new.write.parquet(str(tmp_path / "new_customers"))

    env = airflow_env(tmp_path / "airflow", url, warehouse)
    run_dag_test(env, "layout_changes", {"table": "customer", "partition": "",
                                         "inserted": str(tmp_path / "new_customers"), "deleted": ""})

    with Catalog(url) as catalog:
        customer = catalog.active_layout("customer", "")
        orders = catalog.active_layout("orders", "")
        index = RoutingIndex.from_snapshot(catalog.snapshot())
    assert customer.version.version_id != base and customer.version.params["changes_from"] == base
    assert sum(b.row_count for b in customer.blocks) == 1500 + 40
    repaired = {c.position: c for c in orders.cuts if c.position in through}
    assert all(("customer", customer.version.version_id) in c.source_versions for c in repaired.values())
    assert index.stale_cuts == 0
    with sqlite3.connect(tmp_path / "airflow" / "airflow.db") as db:
        (value,), = db.execute("SELECT value FROM xcom WHERE dag_id = 'layout_changes' "
                               "AND task_id = 'report' AND key = 'return_value'").fetchall()
    numbers = json.loads(value)
    assert numbers["inserted"] == 40 and numbers["cuts_repaired"] == len(through)
    assert numbers["version"] == customer.version.version_id
