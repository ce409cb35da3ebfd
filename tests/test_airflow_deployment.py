"""The nightly DAG under a real Airflow: api-server, scheduler (LocalExecutor), DAG
processor and triggerer on 127.0.0.1 with PostgreSQL metadata, a run triggered
through the REST API (layout_core.airflow_deployment)."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture
def metadata_url():
    """A fresh PostgreSQL database for Airflow's metadata, dropped afterwards."""
    from layout_core.airflow_deployment import PG_SERVER, pg_error, scratch_database

    if error := pg_error(PG_SERVER):
        pytest.skip(f"a real Airflow deployment needs PostgreSQL at {PG_SERVER}: {error}")
    with scratch_database(PG_SERVER) as url:
        yield url


def test_a_scheduled_deployment_lays_out_a_partition_triggered_through_the_rest_api(
        metadata_url, tmp_path, tpch_sf001):
    import pyarrow.parquet as pq

    from layout_core.airflow_deployment import airflow_deployment, is_loopback
    from layout_core.catalog import Catalog
    from layout_core.workload.tpch import generate, write_sql_file

    warehouse = tmp_path / "warehouse"
    catalog_url = f"sqlite:///{tmp_path / 'catalog.db'}"
    log = tmp_path / "queries.sql"
    write_sql_file(generate(6, seed=2, templates=[1, 6, 12, 14, 19]), log)
    conf = {
        "table": "lineitem", "partition": "1995", "source": str(tpch_sf001 / "lineitem.parquet"),
        "date_column": "l_shipdate", "start": "1995-01-01", "end": "1996-01-01",
        "optimizer": "qdtree", "block_rows": 1000, "query_log": str(log), "settings": {},
    }
    started = time.monotonic()
    with airflow_deployment(tmp_path / "airflow", metadata_url, catalog_url, warehouse) as airflow:
        # nothing listens beyond loopback, and the log servers are not started
        listening = airflow.assert_loopback_only()
        assert [port for _, _, port in listening] == [int(airflow.url.rsplit(":", 1)[1])], listening
        assert airflow.env["AIRFLOW__CORE__EXECUTOR"] == "LocalExecutor"
        # the REST API wants a token
        for method, path in (("GET", "/api/v2/dags"), ("POST", "/api/v2/dags/layout_nightly/dagRuns")):
            status, _ = airflow.request(method, path, {"logical_date": None} if method == "POST" else None,
                                        token=None)
            assert status in (401, 403), (method, path, status)
        assert airflow.request("GET", "/api/v2/dags", token="not-a-jwt")[0] in (401, 403)

        dag = airflow.wait_for_dag("layout_nightly", timeout=300)
        assert dag["is_paused"] is False
        run_id = airflow.trigger("layout_nightly", conf)
        assert airflow.wait_for_run("layout_nightly", run_id, timeout=900) == "success"
        states = airflow.task_states("layout_nightly", run_id)
        assert set(states.values()) == {"success"} and len(states) == 7, states
        # every socket seen while the run went on (spark-submit's JVMs too) was on loopback
        airflow.assert_loopback_only()
        assert all(is_loopback(address) for _, address, _ in airflow.listeners_seen)
        pids = dict(airflow.pids)
    print(f"deployment, run and stop: {time.monotonic() - started:.0f} s")
    from layout_core.airflow_deployment import _alive

    assert not any(_alive(pid) for pid in pids.values())

    expected = pq.read_table(tpch_sf001 / "lineitem.parquet", columns=["l_shipdate"]).to_pandas()
    year_rows = int((expected["l_shipdate"].astype(str).str[:4] == "1995").sum())
    with Catalog(catalog_url) as catalog:
        (version,) = [v for v in catalog.versions("lineitem", "1995") if v.state == "active"]
        layout = catalog.active_layout("lineitem", "1995")
    assert version.optimizer == "qdtree"
    assert sum(b.row_count for b in layout.blocks) == year_rows
    assert len(layout.blocks) > 1
