"""Query the laid-out tables from your own Spark job: route, rewrite, run, record.

    from layout_core import spark_sql
    spark_sql(spark, "SELECT sum(l_extendedprice) FROM lineitem WHERE l_shipdate >= '1995-01-01'").show()

`spark_sql` routes the query through the catalog's active layouts, adds the
routed blocks to it (`skipping.rewrite`), runs it on temp views of the
laid-out tables, records it in the catalog's query history (what the
Skipping page, `layout stats` and the workload monitor read) and returns the
DataFrame. `LaidOutTables` is the same for a caller that keeps it:
`tables.sql(...)`, `tables.refresh()`.

The views list the block folders of the active layouts read at one moment.
A view read a while later still reads that layout: the nightly and the
reorganizations write new versions beside it and the garbage collector
removes a retired version only days later, so a query never sees half a
version. `spark_sql` reads the catalog again when its tables are more than
`max_age_seconds` old. A table without an active layout gets no view: the
query reads whatever the session calls by that name (your raw table), and
says so once. A view alone (`register_layouts`, for tools that cannot call
`spark_sql`) reads the laid-out copy without skipping: only the rewrite names
the blocks to read.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession

from layout_core.base.config import load_settings
from layout_core.base.schema import Schema, load_schema
from layout_core.catalog import Catalog
from layout_core.skipping.rewrite import rewrite_sql
from layout_core.skipping.router import Route, RoutingIndex, route_query
from layout_core.spark.views import register_layout_views
from layout_core.workload.history import QueryRecorder

log = logging.getLogger("layout.spark_sql")

HISTORY_SOURCE = "api"  # the history's `source` of the queries run here
DEFAULT_MAX_AGE_SECONDS = 60.0


@dataclass(frozen=True)
class LaidOutState:
    index: RoutingIndex
    views: tuple[str, ...]  # the tables given a view of their active layouts
    read_at: float  # time.monotonic() of the catalog read


class LaidOutTables:
    """The catalog's laid-out tables as temp views of one SparkSession, and queries on them.

    catalog_url and schema: default from the settings (`LAYOUT_CATALOG_URL`, the config
    file), as the CLI reads them; dips: route with data-induced predicates; record: add
    each query to the catalog's history."""

    def __init__(self, spark: SparkSession, catalog_url: str | None = None, schema: str | Schema | None = None,
                 dips: bool = True, record: bool = True) -> None:
        settings = load_settings(catalog_url=catalog_url)
        self.spark = spark
        self.catalog_url = settings.catalog_url
        self.schema = schema if isinstance(schema, Schema) else load_schema(schema or settings.schema)
        self.dips = dips
        self._recorder = QueryRecorder(self.catalog_url, HISTORY_SOURCE, settings.history_retention_days) \
            if record else None
        self._warned: set[str] = set()
        self.state = self._read()

    def _read(self) -> LaidOutState:
        with Catalog(self.catalog_url) as catalog:
            snapshot = catalog.snapshot()
        views = register_layout_views(self.spark, snapshot, list(self.schema.tables.values()))
        log.info("spark_sql: %d laid-out tables as views (%s)", len(views), ", ".join(views) or "none")
        return LaidOutState(RoutingIndex.from_snapshot(snapshot), tuple(views), time.monotonic())

    def refresh(self) -> None:
        """Read the catalog again: the views and the router follow its active layouts now."""
        self.state = self._read()

    def route(self, sql: str) -> Route:
        return route_query(sql, self.state.index, self.schema, dips=self.dips)

    def sql(self, sql: str) -> DataFrame:
        """The query's DataFrame, reading only the blocks its route keeps."""
        route = self.route(sql)
        for ref in route.refs:
            if ref.read_all and ref.table not in self._warned:
                self._warned.add(ref.table)
                log.warning("spark_sql: %s has no active layout in the catalog; the query reads %s as this "
                            "Spark session defines it (said once)", ref.table, ref.table)
        if not route.analyzed:
            log.warning("spark_sql: the query could not be analyzed (%s); it reads every block",
                        route.failure)
        if self._recorder is not None:
            self._recorder(route)
        return self.spark.sql(rewrite_sql(route, self.state.index))

    def close(self) -> None:
        if self._recorder is not None:
            self._recorder.close()


_OPEN: dict[tuple, LaidOutTables] = {}  # per session and options: the tables `spark_sql` keeps


def spark_sql(spark: SparkSession, sql: str, catalog_url: str | None = None, schema: str | None = None,
              dips: bool = True, record: bool = True,
              max_age_seconds: float = DEFAULT_MAX_AGE_SECONDS) -> DataFrame:
    """Run `sql` on the laid-out tables, skipping the blocks its route leaves out (see the
    module docstring). The views are registered on the first call and read again from the
    catalog when older than `max_age_seconds`."""
    key = (id(spark), load_settings(catalog_url=catalog_url).catalog_url, schema, dips, record)
    tables = _OPEN.get(key)
    if tables is None or tables.spark is not spark:
        tables = _OPEN[key] = LaidOutTables(spark, catalog_url, schema, dips, record)
    elif time.monotonic() - tables.state.read_at > max_age_seconds:
        tables.refresh()
    return tables.sql(sql)


def register_layouts(spark: SparkSession, catalog_url: str | None = None,
                     schema: str | None = None) -> tuple[str, ...]:
    """Register the laid-out tables as temp views (once per session) for tools that cannot
    call `spark_sql`: they read the laid-out copy, without block skipping. Returns the views."""
    return LaidOutTables(spark, catalog_url, schema, record=False).state.views
