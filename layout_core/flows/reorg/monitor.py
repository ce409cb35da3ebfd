"""The workload monitor: the shift reward of every laid-out table, written as one report.

`jobs/measure_shift.py` (the `layout_workload_monitor` DAG's Spark step) and
`layout workload shift` call `monitor_tables`; the DAG's next task reads the
report and emits one Asset event per table whose reward is positive.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import sys
from pathlib import Path
from typing import Sequence

from layout_core.base import params
from layout_core.base.config import load_settings
from layout_core.base.errors import UserError
from layout_core.base.schema import load_schema
from layout_core.catalog import Catalog
from layout_core.flows.names import MONITOR_REPORT_VERSION as REPORT_VERSION
from layout_core.flows.names import monitor_report_path as report_path  # noqa: F401 - the DAG and tests use it
from layout_core.flows.reorg.shift import ShiftReport, ShiftSettings, default_w, measure_shift
from layout_core.spark.session import job_session

log = logging.getLogger(__name__)

def monitor_tables(spark, catalog, schema, tables: Sequence[str], settings: ShiftSettings,
                   now: dt.datetime | None = None) -> list[ShiftReport]:
    """One report per table (default: every table of the catalog with an active layout).
    A table the schema does not know is reported, not fatal."""
    now = now or dt.datetime.now(dt.timezone.utc)
    snapshot = catalog.snapshot()  # once for every table: the monitor writes nothing
    if not tables:
        tables = sorted({name for name, _ in snapshot.layouts})
    history = catalog.query_history(since=now - dt.timedelta(hours=settings.window_hours), until=now)
    log.info("workload monitor: %d queries in the last %g hours, %d tables", len(history),
             settings.window_hours, len(tables))
    reports = []
    for table in tables:
        if table not in schema.tables:
            log.warning("workload monitor: table %s is not in the schema; skipped", table)
            continue
        reports.append(measure_shift(spark, catalog, schema, table, settings, now, history, snapshot))
    return reports


def write_report(path: Path, reports: Sequence[ShiftReport], settings: ShiftSettings) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"version": REPORT_VERSION, "q": settings.q, "w": settings.w,
                               "window_hours": settings.window_hours,
                               "tables": [r.to_json() for r in reports]}, indent=1))
    tmp.replace(path)  # readers never see half a report


def read_report(path: Path) -> dict:
    data = json.loads(Path(path).read_text())
    if data.get("version") != REPORT_VERSION:
        raise ValueError(f"{path}: a report of version {data.get('version')}, expected {REPORT_VERSION}: "
                         f"run measure_shift again")
    return data


def asset_extra(table_report: dict) -> dict:
    """What the Asset event of a shifted table carries (small: Airflow stores it). The
    reorganization it triggers measures again with its q, w and window length."""
    start, end = (dt.datetime.fromisoformat(t) for t in table_report["window"])
    return {
        "table": table_report["table"], "reward": table_report["reward"], "window": table_report["window"],
        "window_hours": round((end - start).total_seconds() / 3600, 6),
        "q": table_report["q"], "w": table_report["w"], "references": table_report["references"],
        "subtrees": [{"partition": p["partition"], "version": p["version"], "node": c["node"],
                      "blocks": c["blocks"], "reward": c["reward"]}
                     for p in table_report["partitions"] for c in p["chosen"]],
        "subtrees_evaluated": sum(p["subtrees_evaluated"] for p in table_report["partitions"]),
        "subtrees_total": sum(p["subtrees_total"] for p in table_report["partitions"]),
    }


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="jobs/measure_shift.py",
                                description="the reward of re-laying out each table's subtrees for the recent queries")
    p.add_argument("--tables", default="", help="comma-separated tables (default: every laid-out table)")
    p.add_argument("--run-id", required=True, help="Airflow run id: the report goes to <warehouse>/_monitor/<run id>/")
    p.add_argument("--q", type=float, default=ShiftSettings.q, help="queries expected before the next shift")
    p.add_argument("--w", type=params.optional_float, default=None,
                   help="cost of writing a block, in block reads (default: `layout calibrate`'s, else 100)")
    p.add_argument("--window-hours", type=float, default=ShiftSettings.window_hours)
    p.add_argument("--min-references", type=int, default=ShiftSettings.min_references)
    p.add_argument("--warehouse", help="warehouse root (default LAYOUT_WAREHOUSE)")
    p.add_argument("--catalog", help="catalog URL (default LAYOUT_CATALOG_URL)")
    p.add_argument("--schema", help="schema name or file (default LAYOUT_SCHEMA or tpch)")
    return p


def main(argv: list[str] | None = None) -> int:

    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = load_settings(catalog_url=args.catalog, warehouse=args.warehouse, schema=args.schema)
    try:  # checked before Spark starts or the catalog is opened
        schema = load_schema(config.schema)
        tables = [params.table_of(schema, t.strip()).name for t in args.tables.split(",") if t.strip()]
        params.run_id(args.run_id)
        params.input_path(config.warehouse, "the warehouse", config.allowed_roots)
    except UserError as e:
        log.error("measure_shift refused its arguments: %s", e)
        return 2
    with Catalog(config.catalog_url) as catalog:
        try:
            settings = ShiftSettings(q=args.q, w=args.w or default_w(catalog), window_hours=args.window_hours,
                                     min_references=args.min_references)
        except ValueError as e:
            log.error("measure_shift: %s", e)
            return 1
    spark = job_session("layout-measure-shift")
    try:
        with Catalog(config.catalog_url) as catalog:
            reports = monitor_tables(spark, catalog, schema, tables, settings)
    finally:
        spark.stop()
    path = report_path(config.warehouse, args.run_id)
    write_report(path, reports, settings)
    for r in reports:
        log.info("%s: reward %.1f, %s", r.table, r.reward, r.reason)
    log.info("report written to %s", path)
    return 0
