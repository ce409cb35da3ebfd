"""The nightly layout DAGs: tables laid out into blocks that queries can skip.

    ingest -> featurize -> reduce -> optimize -> write_blocks -> verify -> update_catalog

- layout_nightly: one new partition of one table (any optimizer);
- layout_star_nightly: the tables of a star or snowflake schema, one task
  group each, dimension tables first, so that the fact table's join-induced
  cuts (optimizer mto) are computed from the dimension layouts just activated.
  The tables and their order come from LAYOUT_STAR_TABLES (parents before
  children; default: TPC-H, lineitem last).

Each step is a spark-submit of `jobs/<step>.py` on the `spark_default`
connection (local mode unless the connection says otherwise). Steps keep
their outputs under the run's staging folder, so a retried task redoes only
its own work; the new layout becomes visible in the last step, in one
catalog transaction. The catalog URL and warehouse come from the
environment (LAYOUT_CATALOG_URL, LAYOUT_WAREHOUSE).

Kept light on purpose: no Spark or layout_core import here, so the DAG
processor parses this file in milliseconds.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta
from pathlib import Path

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.sdk import DAG, Asset, Param, TaskGroup, chain

JOBS_DIR = Path(os.environ.get("LAYOUT_JOBS_DIR", Path(__file__).resolve().parent.parent / "jobs"))
LAYOUT_CATALOG = Asset(name="layout_catalog", uri="file:///layout/catalog")

STAR_TABLES = [t for t in os.environ.get(
    "LAYOUT_STAR_TABLES", "region,nation,supplier,customer,part,partsupp,orders,lineitem").split(",") if t]

# Scheduled run ids ("scheduled__<date>") are the same in every DAG: prefix the DAG id
# so the two DAGs never share a staging folder or a catalog version.
RUN_ID = "{{ dag.dag_id }}__{{ run_id }}"
RUN_ARGS = [
    "--table", "{{ params.table }}",
    "--partition", "{{ params.partition or ds }}",
    "--run-id", RUN_ID,
]
SPARK_CONF = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.session.timeZone": "UTC",
    # short jobs: the JIT's top tier costs more than it saves
    "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m",
}
# The optimizer and its settings go to featurize only: later steps read them from its artifact.
FEATURIZE_ARGS = (
    "--query-log", "{{ params.query_log }}",
    "--optimizer", "{{ params.optimizer }}",
    "--block-rows", "{{ params.block_rows }}",
    "--settings", "{{ params.settings | tojson }}",
)


DAG_DEFAULTS = {
    "start_date": datetime(2024, 1, 1),
    "catchup": False,
    "max_active_runs": 1,
    "default_args": {"retries": 1, "retry_delay": timedelta(seconds=30)},
    "tags": ["layout"],
}


def spark_step(step: str, *extra_args: str, run_args: list[str] = RUN_ARGS, **kwargs) -> SparkSubmitOperator:
    return SparkSubmitOperator(
        task_id=step,
        application=str(JOBS_DIR / f"{step}.py"),
        application_args=[*run_args, *extra_args],
        conn_id="spark_default",
        conf=SPARK_CONF,
        name=f"layout-{step}",
        **kwargs,
    )


with DAG(
    dag_id="layout_nightly",
    description="Lay out a new table partition into blocks that queries can skip",
    schedule=os.environ.get("LAYOUT_NIGHTLY_SCHEDULE") or None,
    **DAG_DEFAULTS,
    params={
        "table": Param("lineitem", type="string", description="warehouse table"),
        "partition": Param("", type="string", description="partition value (default: the run's date)"),
        "source": Param("", type="string", description="Parquet path of the new batch"),
        "date_column": Param("", type="string", description="column for the date range (optional)"),
        "start": Param("", type="string", description="first date of the batch, inclusive (optional)"),
        "end": Param("", type="string", description="end date of the batch, exclusive (optional)"),
        "optimizer": Param("fineblock", type="string",
                           description="a registered optimizer (`layout optimizers` lists them and their settings)"),
        "block_rows": Param(50000, type="integer", minimum=1, description="rows per block"),
        "settings": Param({}, type="object",
                          description='the optimizer\'s other settings, e.g. {"sort_column": "l_shipdate"} '
                                      'or {"trees": 3} for pando'),
        "query_log": Param("", type="string", description="SQL file of past queries"),
    },
) as dag:
    ingest = spark_step(
        "ingest",
        "--source", "{{ params.source }}",
        "--date-column", "{{ params.date_column }}",
        "--start", "{{ params.start }}",
        "--end", "{{ params.end }}",
    )
    featurize = spark_step("featurize", *FEATURIZE_ARGS)
    reduce = spark_step("reduce")
    optimize = spark_step("optimize")
    write_blocks = spark_step("write_blocks")
    verify = spark_step("verify")
    update_catalog = spark_step("update_catalog", outlets=[LAYOUT_CATALOG])

    ingest >> featurize >> reduce >> optimize >> write_blocks >> verify >> update_catalog


def table_steps(table: str, fact: bool) -> TaskGroup:
    """The seven steps of one table of the star DAG: the fact table gets the run's
    partition, date range and settings, a dimension table is laid out whole."""
    run_args = ["--table", table, "--partition", "{{ params.partition or ds }}" if fact else "",
                "--run-id", RUN_ID]
    # the settings name the fact table's columns: dimension tables get the defaults
    featurize_args = FEATURIZE_ARGS if fact else (
        "--query-log", "{{ params.query_log }}", "--optimizer", "{{ params.optimizer }}",
        "--block-rows", "{{ params.dimension_block_rows }}")
    with TaskGroup(group_id=table) as group:
        chain(
            spark_step("ingest", "--source", f"{{{{ params.source_dir }}}}/{table}.parquet",
                       *(("--date-column", "{{ params.date_column }}", "--start", "{{ params.start }}",
                          "--end", "{{ params.end }}") if fact else ()), run_args=run_args),
            spark_step("featurize", *featurize_args, run_args=run_args),
            spark_step("reduce", run_args=run_args),
            spark_step("optimize", run_args=run_args),
            spark_step("write_blocks", run_args=run_args),
            spark_step("verify", run_args=run_args),
            spark_step("update_catalog", run_args=run_args, outlets=[LAYOUT_CATALOG]),
        )
    return group


with DAG(
    dag_id="layout_star_nightly",
    description="Lay out dimension tables, then the new fact partition, with join-induced cuts (MTO)",
    schedule=os.environ.get("LAYOUT_STAR_SCHEDULE") or None,
    **DAG_DEFAULTS,
    params={
        "source_dir": Param("", type="string", description="folder with <table>.parquet for every table"),
        "partition": Param("", type="string", description="fact partition (default: the run's date)"),
        "date_column": Param("", type="string", description="fact column for the date range (optional)"),
        "start": Param("", type="string", description="first date of the fact batch, inclusive (optional)"),
        "end": Param("", type="string", description="end date of the fact batch, exclusive (optional)"),
        "optimizer": Param("mto", type="string", description="a registered optimizer"),
        "block_rows": Param(50000, type="integer", minimum=1, description="rows per fact block"),
        "dimension_block_rows": Param(50000, type="integer", minimum=1, description="rows per dimension block"),
        "settings": Param({}, type="object",
                          description='the optimizer\'s other settings for the fact table, e.g. {"trees": 3} for pando'),
        "query_log": Param("", type="string", description="SQL file of past queries"),
    },
) as star_dag:
    chain(*[table_steps(table, fact=(table == STAR_TABLES[-1])) for table in STAR_TABLES])
