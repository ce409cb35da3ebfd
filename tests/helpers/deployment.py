"""Helpers of the tests that run a real Airflow deployment (`layout_core.airflow.deployment`)."""

from __future__ import annotations

import time
import urllib.error
import urllib.request


def http_get(url: str, headers: dict) -> tuple[int, bytes, str]:
    """(status, body, content type) of a GET, without a proxy."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=60) as response:
            return response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), e.headers.get("Content-Type", "")


def wait_for_runs(airflow, dag_id: str, run_type: str, count: int, timeout: float) -> list[dict]:
    """The DAG's runs of one type (scheduled, backfill, manual) once there are `count`, by
    the REST API."""
    deadline = time.monotonic() + timeout
    while True:
        status, body = airflow.request("GET", f"/api/v2/dags/{dag_id}/dagRuns?run_type={run_type}")
        assert status == 200, body
        if len(body["dag_runs"]) >= count or time.monotonic() > deadline:
            assert len(body["dag_runs"]) == count, body["dag_runs"]
            return body["dag_runs"]
        time.sleep(2)
