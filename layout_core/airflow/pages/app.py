"""The Layouts pages' FastAPI app, which plugins/layouts_plugin.py mounts under URL_PREFIX of
the api-server. Its routes are plain `def`s (run in a worker thread) so a slow database never
blocks the api-server's event loop; a catalog that cannot be reached gives a 503 page."""

from __future__ import annotations

import datetime as dt
import logging
import time
from pathlib import Path
from typing import Any, Callable

from fastapi import Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from layout_core.airflow.pages.auth import require_run_reader, require_user
from layout_core.airflow.pages.data import (
    CatalogPool,
    CatalogUnavailable,
    RunReport,
    RunSection,
    SkippingReport,
    read_overview,
    read_run,
    read_skipping,
    read_table,
)
from layout_core.airflow.pages.markup import SECURITY_HEADERS, render_error, render_unavailable
from layout_core.airflow.pages.render_catalog import render_skipping, render_tables
from layout_core.airflow.pages.render_reports import render_gc, render_monitor
from layout_core.airflow.pages.render_runs import render_run
from layout_core.airflow.pages.reports import block_sizes, read_gc_run, read_monitor_run, step_seconds
from layout_core.base.config import load_settings
from layout_core.base.errors import UserError
from layout_core.flows.names import GC_DAG, MONITOR_DAG

log = logging.getLogger(__name__)

URL_PREFIX = "/layouts"
DEFAULT_DAYS = 7  # the skipping page's window
MAX_DAYS = 3650  # the longest history kept (config.history_retention_days)


def parse_days(text: str | None) -> int:
    """The `days` parameter of the skipping page: a whole number of days, 1 to MAX_DAYS."""
    if text is None or text == "":
        return DEFAULT_DAYS
    value = text.strip()
    if not value.isascii() or not value.isdigit() or not 1 <= int(value) <= MAX_DAYS:
        raise ValueError(f"days must be a whole number of days from 1 to {MAX_DAYS}, not {text[:40]!r}")
    return int(value)


def _plots():
    # inside: matplotlib takes about a second to import, and every Airflow process imports this app
    from layout_core.airflow.pages import plots

    return plots


def deployment_catalog_url(max_age_seconds: float = 60.0) -> Callable[[], str | None]:
    """The Airflow connection layout_catalog's URL (None: not defined), looked up at most once
    a minute: the pages ask at every request, the connection lives in Airflow's database."""
    from layout_core.airflow.catalog_connection import connection_catalog_url  # needs Airflow

    cached: list = []  # [(looked up at, url)]

    def lookup() -> str | None:
        now = time.monotonic()
        if not cached or now - cached[0][0] > max_age_seconds:
            try:
                url = connection_catalog_url()
            except UserError as e:  # a connection that names no catalog: the environment's, said
                log.warning("%s; the pages read LAYOUT_CATALOG_URL's catalog", e)
                url = None
            cached[:] = [(now, url)]
        return cached[0][1]

    return lookup


def create_app(catalog_url: str | None = None, warehouse: str | Path | None = None,
               connection_url: Callable[[], str | None] | None = None) -> FastAPI:
    """The plugin's FastAPI app. Without arguments the catalog is `connection_url()`'s (the
    plugin's: the Airflow connection layout_catalog), else the settings' (LAYOUT_CATALOG_URL),
    and the warehouse LAYOUT_WAREHOUSE, read at each request."""
    app = FastAPI(title="Layouts", docs_url=None, redoc_url=None, openapi_url=None)
    pool = CatalogPool()
    app.state.catalogs = pool

    def catalog_and_warehouse() -> tuple[str, Path]:
        if catalog_url is not None and warehouse is not None:
            return catalog_url, Path(warehouse)
        settings = load_settings()
        url = catalog_url or (connection_url() if connection_url is not None else None) or settings.catalog_url
        return url, Path(warehouse if warehouse is not None else settings.warehouse)

    def base(request: Request) -> str:
        return str(request.scope.get("root_path", "")).rstrip("/")

    def html_response(content: str, status: int = 200) -> HTMLResponse:
        return HTMLResponse(content, status_code=status, headers=SECURITY_HEADERS)

    def png_response(content: bytes) -> Response:
        return Response(content, media_type="image/png", headers=SECURITY_HEADERS)

    def read(reader: Callable[[Any], Any], empty: Callable[[], Any]):
        return pool.read(catalog_and_warehouse()[0], reader, empty)

    @app.exception_handler(CatalogUnavailable)
    def unavailable(request: Request, exc: CatalogUnavailable):
        return html_response(render_unavailable(exc.reason, base(request)), 503)

    @app.exception_handler(StarletteHTTPException)
    def http_error(request: Request, exc: StarletteHTTPException):
        # raised by the auth dependencies (401/403) and for unknown names (404): a small page
        headers = dict(SECURITY_HEADERS, **(exc.headers or {}))
        return HTMLResponse(render_error(f"{exc.status_code}", str(exc.detail), base(request)),
                            status_code=exc.status_code, headers=headers)

    @app.get("/", response_class=HTMLResponse)
    def tables_page(request: Request, user: Any = Depends(require_user)):
        return html_response(render_tables(read(read_overview, list), base(request)))

    def skipping_report(days: str | None) -> SkippingReport:
        try:
            window = parse_days(days)
        except ValueError as e:
            raise HTTPException(status_code=400, detail=str(e)) from None
        now = dt.datetime.now(dt.timezone.utc)
        return read(lambda c: read_skipping(c, window, now), lambda: read_skipping(None, window, now))

    @app.get("/skipping", response_class=HTMLResponse)
    def skipping_page(request: Request, days: str | None = None, user: Any = Depends(require_user)):
        return html_response(render_skipping(skipping_report(days), base(request)))

    @app.get("/plot/skipping.png")
    def skipping_plot(request: Request, days: str | None = None, table: str | None = None,
                      user: Any = Depends(require_user)):
        image = _plots().plot_skipping(skipping_report(days), table)
        if image is None:
            raise HTTPException(status_code=404, detail="No routed query of this window read a layout of "
                                "this table" if table is not None else "No queries were routed in this window")
        return png_response(image)

    def run_report(dag_id: str, run_id: str) -> RunReport:
        _, folder = catalog_and_warehouse()
        return read(lambda c: read_run(c, folder, dag_id, run_id), lambda: read_run(None, folder, dag_id, run_id))

    @app.get("/run", response_class=HTMLResponse)
    def run_page(request: Request, dag_id: str, run_id: str, user: Any = Depends(require_run_reader)):
        _, folder = catalog_and_warehouse()
        if dag_id == MONITOR_DAG:  # no staging folders, no catalog: its report
            return html_response(render_monitor(read_monitor_run(folder, dag_id, run_id), base(request)))
        if dag_id == GC_DAG:  # the same: its report
            return html_response(render_gc(read_gc_run(folder, dag_id, run_id), base(request)))
        report = run_report(dag_id, run_id)
        return html_response(render_run(report, base(request)), 200 if report.sections or report.planned else 404)

    def run_section(dag_id: str, run_id: str, section: int) -> RunSection:
        report = run_report(dag_id, run_id)
        if not 0 <= section < len(report.sections):
            raise HTTPException(status_code=404, detail="No such staging folder for this run")
        return report.sections[section]

    @app.get("/plot/run-seconds.png")
    def run_seconds_plot(request: Request, dag_id: str, run_id: str, section: int = 0,
                         user: Any = Depends(require_run_reader)):
        found = run_section(dag_id, run_id, section)
        if not step_seconds(found.metrics, found.steps):
            raise HTTPException(status_code=404, detail="No step of this run recorded its seconds yet")
        return png_response(_plots().plot_run_seconds(found))

    @app.get("/plot/run-blocks.png")
    def run_blocks_plot(request: Request, dag_id: str, run_id: str, section: int = 0,
                        user: Any = Depends(require_run_reader)):
        found = run_section(dag_id, run_id, section)
        if block_sizes(found) is None:
            raise HTTPException(status_code=404, detail="No per-block sizes for this run")
        return png_response(_plots().plot_run_blocks(found))

    @app.get("/plot/table.png")
    def table_plot(request: Request, name: str, user: Any = Depends(require_user)):
        table = read(lambda c: read_table(c, name), lambda: None)
        if table is None:
            raise HTTPException(status_code=404, detail="No such table in the layout catalog")
        return png_response(_plots().plot_table(table))

    return app


app = create_app(connection_url=deployment_catalog_url())
