"""A workload shift under a real Airflow (issue 36 item 5): api-server, scheduler, DAG processor
and triggerer on 127.0.0.1 with PostgreSQL metadata (layout_core.airflow.deployment).

lineitem (SF 0.01, qdtree for templates 1-11, 50 blocks of 1,000 rows) served yesterday's
queries: date-range templates (6, 14, 15, 20) with every date in the latest tenth of its range,
routed and recorded in the query history. The monitor DAG sees them, emits the shift's Asset
event, the scheduler starts `layout_reoptimize` on it, and the rewritten subtrees serve today's
queries of the same kind; the Skipping page shows the blocks a scan reads falling from one day
to the next. (A shift of the same templates 1-11 to their latest dates does not pay at this
scale: a tree grown on half of such a window reads more than the old one on the other half, so
the monitor stays quiet; docs/benchmarks.md.)"""

from __future__ import annotations

import datetime as dt
import json
import re
import urllib.parse

import pytest

from layout_core.base.schema import load_schema
from tests.helpers.deployment import http_get, wait_for_runs
from tests.helpers.tpch_layouts import lineitem_trained_on_1_to_11

pytestmark = [pytest.mark.slow, pytest.mark.extended]

SCHEMA = load_schema("tpch")
TEMPLATES = (6, 14, 15, 20)


def _shifted(seed: int) -> list[str]:
    from layout_core.workload.tpch import Focus, generate

    return [q.sql for q in generate(8, seed=seed, templates=TEMPLATES, scale_factor=0.01, focus=Focus(0.1, None))]


def _route(catalog, sql: list[str]) -> list:
    from layout_core.skipping.router import RoutingIndex, route_query

    index = RoutingIndex.from_snapshot(catalog.snapshot())
    return [route_query(text, index, SCHEMA, dips=False) for text in sql]


def _lineitem_reads(routes) -> tuple[int, int]:
    """(scans of lineitem, blocks they read)."""
    scans = [r for route in routes for r in route.refs if r.table == "lineitem"]
    assert scans and not any(r.read_all for r in scans)
    return len(scans), sum(len(r.blocks) for r in scans)


def test_the_monitor_sees_a_shift_and_the_reorganization_it_triggers_serves_the_next_day_better(
        spark, tpch_sf001, tmp_path_factory, tmp_path, metadata_url, monkeypatch):
    from layout_core.airflow.deployment import airflow_deployment
    from layout_core.catalog import Catalog
    from layout_core.workload.history import query_record

    url = lineitem_trained_on_1_to_11(spark, tpch_sf001, tmp_path_factory, tmp_path)
    now = dt.datetime.now(dt.timezone.utc)
    yesterday = dt.datetime.combine(now.date(), dt.time(), dt.timezone.utc) - dt.timedelta(hours=2)
    window, today = _shifted(seed=5), _shifted(seed=6)
    with Catalog(url) as catalog:
        base = catalog.active_layout("lineitem", "").version.version_id
        routes = _route(catalog, window)
        catalog.record_queries([query_record(r, "route", yesterday) for r in routes])
        day1 = _lineitem_reads(routes)
        before = _lineitem_reads(_route(catalog, today))  # today's queries on the old layout

    # only what the test triggers runs: no hourly monitor, no nightly or gc of its own
    for name in ("LAYOUT_MONITOR_SCHEDULE", "LAYOUT_NIGHTLY_SCHEDULE", "LAYOUT_GC_SCHEDULE"):
        monkeypatch.setenv(name, "")
    with airflow_deployment(tmp_path / "airflow", metadata_url, url, tmp_path / "wh") as airflow:
        airflow.assert_loopback_only()
        assert airflow.wait_for_dag("layout_reoptimize", timeout=300)["is_paused"] is False
        # w = 2: what `layout calibrate` measures for 1,000-row blocks on local disk
        monitor = airflow.trigger("layout_workload_monitor",
                                  {"tables": "lineitem", "q": 200, "w": 2, "window_hours": 48})
        assert airflow.wait_for_run("layout_workload_monitor", monitor, timeout=900) == "success"
        status, xcom = airflow.request(
            "GET", f"/api/v2/dags/layout_workload_monitor/dagRuns/{urllib.parse.quote(monitor, safe='')}"
                   "/taskInstances/emit_shift_events/xcomEntries/return_value")
        assert status == 200, xcom
        seen = (xcom["value"] if isinstance(xcom["value"], dict) else json.loads(xcom["value"]))["lineitem"]
        assert seen["reorganize"] is True and seen["subtrees"] >= 1 and 0 < seen["blocks_chosen"] < 50, seen

        # nobody triggers it: the scheduler starts the reorganization on the Asset event
        (reorg,) = wait_for_runs(airflow, "layout_reoptimize", "asset_triggered", 1, timeout=300)
        assert airflow.wait_for_run("layout_reoptimize", reorg["dag_run_id"], timeout=1200) == "success"
        status, xcom = airflow.request(
            "GET", f"/api/v2/dags/layout_reoptimize/dagRuns/{urllib.parse.quote(reorg['dag_run_id'], safe='')}"
                   "/taskInstances/choose_table/xcomEntries/return_value")
        chosen = xcom["value"] if isinstance(xcom["value"], dict) else json.loads(xcom["value"])
        # the monitor's settings, carried by the event: the reorganization measures the shift it saw
        assert chosen == {"table": "lineitem", "q": 200.0, "w": 2.0, "window_hours": 48.0}, chosen

        with Catalog(url) as catalog:
            layout = catalog.active_layout("lineitem", "")
            assert layout.version.params["reorganized_from"] == base
            assert sum(b.row_count for b in layout.blocks) == 60_175  # every row of SF 0.01's lineitem
            routes = _route(catalog, today)
            catalog.record_queries([query_record(r, "route", now) for r in routes])
            after = _lineitem_reads(routes)
        assert after[0] == before[0] and after[1] < before[1], (before, after)

        # the Skipping page: yesterday's and today's scans of lineitem, blocks read per scan falling
        status, body, _ = http_get(f"{airflow.url}/layouts/skipping?days=2",
                                   {"Authorization": f"Bearer {airflow.token()}"})
        assert status == 200, body[:300]
        lineitem = body.decode().split('id="s-lineitem"', 1)[1]
        days = re.search(r'<table class="days">(.*?)</table>', lineitem).group(1)
        rows = re.findall(r"<tr><td>([\d-]+)</td><td class=\"n\">(\d+)</td><td class=\"n\">([\d.]+)</td>", days)
        assert rows == [(now.date().isoformat(), str(after[0]), f"{after[1] / after[0]:.1f}"),
                        (yesterday.date().isoformat(), str(day1[0]), f"{day1[1] / day1[0]:.1f}")], rows
        assert after[1] / after[0] < day1[1] / day1[0]
        print(f"lineitem blocks per scan: yesterday {day1[1] / day1[0]:.2f} (window), today's queries "
              f"{before[1] / before[0]:.2f} on the old layout, {after[1] / after[0]:.2f} after the reorganization")
