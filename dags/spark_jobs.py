"""What the layout DAGs' spark-submit steps share: where the jobs are, the
Spark settings of short jobs, the run id steps stage under, and the catalog's
Asset. Airflow puts the DAG folder on sys.path, so the DAG files import this
module by name. Kept light: no Spark import, and of layout_core only stdlib-only modules."""

from __future__ import annotations

import os
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import Asset, AssetAlias

from layout_core.base.jvm import driver_java_options, spark_conf_from_env

JOBS_DIR = Path(os.environ.get("LAYOUT_JOBS_DIR", Path(__file__).resolve().parent.parent / "jobs"))
# Every run that activates a layout version updates it (the UI's "what changed the catalog").
LAYOUT_CATALOG = Asset(name="layout_catalog", uri="file:///layout/catalog")
# ... and the table's own Asset (`table_asset`), through this alias: the table is a run's param.
LAYOUT_TABLES = AssetAlias("layout_tables")
ACTIVATES = [LAYOUT_CATALOG, LAYOUT_TABLES]  # the outlets of a step that activates a version

# Scheduled run ids ("scheduled__<date>") are the same in every DAG: prefix the DAG id
# so two DAGs never share a staging folder or a catalog version.
RUN_ID = "{{ dag.dag_id }}__{{ run_id }}"
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
    # short jobs start faster (the JIT's quick tier, the class archive `make install` makes)
    "spark.driver.extraJavaOptions": driver_java_options(),
    # the Airflow processes' LAYOUT_SPARK_CONF (a JSON object) overrides any of these
    **spark_conf_from_env(),
}


def table_asset(table: str) -> Asset:
    """One table's Asset: an event each time a run activates a new layout of it. A DAG
    scheduled on it runs after the table's layout changed."""
    return Asset(name=f"layout_table_{table}", uri=f"file:///layout/tables/{table}")


class LayoutSparkSubmit(SparkSubmitOperator):
    """spark-submit with the catalog of the Airflow connection `layout_catalog`, when defined
    (`layout_core.airflow.catalog_connection`; the job inherits the task's environment), and
    the Spark settings of the connection's extra "conf" object (e.g. {"conf":
    {"spark.sql.shuffle.partitions": "64"}}) over SPARK_CONF, LAYOUT_SPARK_CONF over both."""

    def execute(self, context):
        # at run time, in the task's process: not when the DAG file is parsed
        from layout_core.airflow.catalog_connection import airflow_connection, use_catalog_connection
        from layout_core.base.jvm import spark_conf_of_connection

        use_catalog_connection()
        spark = airflow_connection(self._conn_id)  # not defined: the hook's defaults, no settings of ours
        extra = {} if spark is None else spark.extra_dejson
        self.conf = {**(self.conf or {}), **spark_conf_of_connection(extra, self._conn_id), **spark_conf_from_env()}
        result = super().execute(context)
        if LAYOUT_TABLES in self.outlets:  # the step activated a version of the table in --table
            table = self.application_args[self.application_args.index("--table") + 1]
            context["outlet_events"][LAYOUT_TABLES].add(table_asset(table))
        return result


def spark_submit(task_id: str, job: str, args: list[str], **kwargs) -> SparkSubmitOperator:
    """A step that spark-submits `jobs/<job>` with `args` on the spark_default connection."""
    return LayoutSparkSubmit(
        task_id=task_id,
        application=str(JOBS_DIR / job),
        application_args=args,
        conn_id="spark_default",
        conf=SPARK_CONF,
        name=f"layout-{task_id}",
        **kwargs,
    )
