"""The nightly DAG on a real Spark standalone cluster (a master and a worker
started from pyspark's `spark-class` on 127.0.0.1), through the
`spark_default` connection: the same blocks as a local[2] run."""

from __future__ import annotations

import pytest

from tests.tpch_layouts import lineitem_1995_conf

pytestmark = pytest.mark.slow


def _blocks_of(catalog_url: str, table: str, partition: str) -> set[tuple]:
    """(l_orderkey, l_linenumber, block_id) of every row of the active layout."""
    import pyarrow.parquet as pq

    from layout_core.catalog import Catalog

    rows = set()
    with Catalog(catalog_url) as catalog:
        layout = catalog.active_layout(table, partition)
    first = min(b.block_id for b in layout.blocks)  # (each catalog numbers its own blocks)
    for block in layout.blocks:
        data = pq.read_table(block.path, columns=["l_orderkey", "l_linenumber"]).to_pydict()
        rows |= {(k, n, block.block_id - first) for k, n in zip(data["l_orderkey"], data["l_linenumber"])}
    return rows


def test_the_nightly_dag_on_a_standalone_cluster_writes_the_local_runs_blocks(tmp_path, tpch_sf001):
    from layout_core.airflow_run import airflow_env, run_dag_test
    from layout_core.spark_cluster import master_state, standalone_cluster

    conf = lineitem_1995_conf(tpch_sf001, tmp_path)
    urls = {}
    for name in ("local", "cluster"):
        urls[name] = f"sqlite:///{tmp_path / name / 'catalog.db'}"
    run_dag_test(airflow_env(tmp_path / "local" / "airflow", urls["local"], tmp_path / "local" / "wh"),
                 "layout_nightly", conf, log_file=tmp_path / "local.log")
    with standalone_cluster(tmp_path / "spark-logs") as master:
        env = airflow_env(tmp_path / "cluster" / "airflow", urls["cluster"], tmp_path / "cluster" / "wh",
                          spark_master=master)
        run_dag_test(env, "layout_nightly", conf, log_file=tmp_path / "cluster.log")
        state = master_state(8090)
    # every Spark step ran on the cluster as an application of its own (optimize needs no Spark)
    finished = sorted(app["name"] for app in state["completedapps"])
    assert len([name for name in finished if name.startswith("layout-")]) == 6, finished
    local, cluster = _blocks_of(urls["local"], "lineitem", "1995"), _blocks_of(urls["cluster"], "lineitem", "1995")
    assert len(local) > 5000 and local == cluster
