"""The nightly layout DAGs: tables laid out into blocks that queries can skip.

    ingest -> featurize -> reduce -> optimize -> write_blocks -> verify -> update_catalog

- layout_nightly: one new partition of one table (any optimizer), daily by
  default: `wait_for_input` waits for the day's batch (its `source` and
  `partition` may name the run's date, `/landing/lineitem/dt={{ ds }}`), then
  the seven steps lay it out; a run, or a re-run of its day, activates a new
  version of that partition only;
- layout_star_nightly: the tables of a star or snowflake schema, one task
  group each, dimension tables first, so that the fact table's join-induced
  cuts (optimizer mto) are computed from the dimension layouts just activated.
  The tables and their order come from LAYOUT_STAR_TABLES (parents before
  children; default: TPC-H, lineitem last).

Each step is a spark-submit of `jobs/<step>.py` on the `spark_default`
connection (local mode unless the connection says otherwise). Steps keep
their outputs under the run's staging folder, so a retried task redoes only
its own work; the new layout becomes visible in the last step, in one
catalog transaction. The catalog is the Airflow connection `layout_catalog`'s
when it is defined (`layout_core.airflow.catalog_connection`), else
LAYOUT_CATALOG_URL's; the warehouse comes from LAYOUT_WAREHOUSE.

layout_nightly's schedule and defaults for unattended runs come from the
environment of the Airflow processes (read when this file is parsed; a bad
value is an import error naming the variable):

    LAYOUT_NIGHTLY_SCHEDULE      cron or preset, default @daily; empty or "none": manual runs only
    LAYOUT_NIGHTLY_CATCHUP       true/false, default false (past days: `airflow backfill create`)
    LAYOUT_NIGHTLY_START_DATE    first logical date, default 2024-01-01
    LAYOUT_NIGHTLY_SOURCE        default `source`, e.g. /landing/lineitem/dt={{ ds }}
    LAYOUT_NIGHTLY_PARAMS        JSON object of other param defaults, e.g. {"query_log": "/logs/q.sql"}
    LAYOUT_NIGHTLY_WAIT_TIMEOUT  seconds wait_for_input waits for the batch, default 21600 (6 h)
    LAYOUT_NIGHTLY_POKE_INTERVAL seconds between its checks, default 300 (reschedule mode from
                                 60 s up: no worker slot held while waiting; poke mode below)

layout_nightly starts paused in a deployment (unpause it in the UI or with `airflow dags
unpause`) until a default source is set (LAYOUT_NIGHTLY_SOURCE, or "source" in
LAYOUT_NIGHTLY_PARAMS): without one every scheduled run would wait for nothing and fail.
layout_star_nightly runs on LAYOUT_STAR_SCHEDULE (default: manual runs only) with the
param defaults of LAYOUT_STAR_PARAMS (a JSON object, e.g. {"source_dir": "/landing/shop",
"date_column": "sa_day"}), and starts paused until that gives a source_dir.

Kept light on purpose: no Spark import here, and of layout_core only the
stdlib-only modules (base.names, base.params, flows.names), so the DAG
processor parses this file in milliseconds.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta

from airflow.sdk import (DAG, BaseSensorOperator, CronDataIntervalTimetable, Param, PokeReturnValue,
                         TaskGroup, chain)
from airflow.sdk.exceptions import AirflowFailException, AirflowSensorTimeout
from spark_jobs import ACTIVATES, RUN_ID, spark_submit

from layout_core.base.names import MAX_BLOCK_ROWS
from layout_core.base.params import PARTITION_PARAM_PATTERN, PATH_PARAM_PATTERN
from layout_core.flows.names import NIGHTLY_DAG, NIGHTLY_STEPS, STAR_NIGHTLY_DAG

STAR_TABLES = [t for t in os.environ.get(
    "LAYOUT_STAR_TABLES", "region,nation,supplier,customer,part,partsupp,orders,lineitem").split(",") if t]

RUN_ARGS = [
    "--table", "{{ params.table }}",
    "--partition", "{{ params.partition or ds }}",
    "--run-id", RUN_ID,
]
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


def spark_step(step: str, *extra_args: str, run_args: list[str] = RUN_ARGS, **kwargs):
    return spark_submit(step, f"{step}.py", [*run_args, *extra_args], **kwargs)


def nightly_steps(run_args: list[str], extra_args: dict[str, tuple[str, ...]]) -> list:
    """One spark-submit task per nightly step (jobs/<step>.py), in the order of
    flows.names.NIGHTLY_STEPS; the last one publishes the layout to the catalog."""
    return [spark_step(step, *extra_args.get(step, ()), run_args=run_args,
                       outlets=ACTIVATES if step == NIGHTLY_STEPS[-1] else [])
            for step in NIGHTLY_STEPS]


# --- layout_nightly: settings for unattended runs, and the sensor for the day's batch -------


def _env_seconds(name: str, default: int) -> int:
    text = os.environ.get(name, "").strip() or str(default)
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{name} must be a whole number of seconds > 0, not {text!r}")
    return value


def _env_bool(name: str, default: bool) -> bool:
    text = os.environ.get(name, "").strip().lower()
    if not text:
        return default
    if text not in ("true", "false", "1", "0", "yes", "no"):
        raise ValueError(f"{name} must be true or false, not {text!r}")
    return text in ("true", "1", "yes")


def _env_schedule(name: str, default: str) -> CronDataIntervalTimetable | None:
    """A cron expression or preset as data intervals: the run for the day D starts after D
    ends, and its `ds` is D (Airflow 3's plain cron schedule would make `ds` the day the run
    starts on, whose landing folder is still filling)."""
    text = os.environ.get(name, default).strip()
    if text.lower() in ("", "none"):
        return None
    try:
        timetable = CronDataIntervalTimetable(text, timezone="UTC")
        timetable.validate()
        return timetable
    except Exception as e:
        raise ValueError(f"{name} must be a cron expression or preset such as @daily, not {text!r}: {e}") from None


def _env_start_date(name: str, default: str) -> datetime:
    text = os.environ.get(name, "").strip() or default
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{name} must be a date such as 2024-01-01, not {text!r}") from None


NIGHTLY_SCHEDULE = _env_schedule("LAYOUT_NIGHTLY_SCHEDULE", "@daily")
NIGHTLY_CATCHUP = _env_bool("LAYOUT_NIGHTLY_CATCHUP", False)
NIGHTLY_START_DATE = _env_start_date("LAYOUT_NIGHTLY_START_DATE", "2024-01-01")
WAIT_TIMEOUT = _env_seconds("LAYOUT_NIGHTLY_WAIT_TIMEOUT", 6 * 3600)
POKE_INTERVAL = _env_seconds("LAYOUT_NIGHTLY_POKE_INTERVAL", 300)

# Checked again, fully, by the jobs (layout_core.base.params) before any work; these JSON-schema
# constraints refuse the obvious cases in the trigger form already (Jinja may follow here,
# so a partition or path is only kept free of separators, '..' and control characters).
TABLE_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,127}$"
COLUMN_PATTERN = r"^([A-Za-z_][A-Za-z0-9_]{0,127})?$"
PARTITION_PATTERN = PARTITION_PARAM_PATTERN
PATH_PATTERN = PATH_PARAM_PATTERN  # no '..' part

NIGHTLY_PARAMS = {
    "table": Param("lineitem", type="string", pattern=TABLE_PATTERN, description="warehouse table"),
    "partition": Param("", type="string", pattern=PARTITION_PATTERN,
                       description="partition value (default: the run's date, {{ ds }}); may use the "
                                   "run's date as Jinja, e.g. {{ ds_nodash }}"),
    "source": Param("", type="string", pattern=PATH_PATTERN,
                    description="Parquet path of the batch; may use the run's date as Jinja, "
                                "e.g. /landing/lineitem/dt={{ ds }}"),
    "ready_file": Param("", type="string",
                        description="a file the source folder holds once the batch is complete, "
                                    "e.g. _SUCCESS (default: any data file)"),
    "date_column": Param("", type="string", pattern=COLUMN_PATTERN, description="column for the date range (optional)"),
    "start": Param("", type="string",
                   description="first date of the batch, inclusive (optional; may be {{ ds }})"),
    "end": Param("", type="string",
                 description="end date of the batch, exclusive (optional; may be "
                             "{{ macros.ds_add(ds, 1) }})"),
    "optimizer": Param("fineblock", type="string",
                       description="a registered optimizer (`layout optimizers` lists them and their settings)"),
    "block_rows": Param(50000, type="integer", minimum=1, maximum=MAX_BLOCK_ROWS, description="rows per block"),
    "settings": Param({}, type="object",
                      description='the optimizer\'s other settings, e.g. {"sort_column": "l_shipdate"} '
                                  'or {"trees": 3} for pando'),
    "query_log": Param("", type="string", pattern=PATH_PATTERN, description="SQL file of past queries"),
}


def _param_defaults(params: dict, variable: str = "LAYOUT_NIGHTLY_PARAMS",
                    source_variable: str | None = "LAYOUT_NIGHTLY_SOURCE") -> dict:
    """The params with the defaults of the JSON object in `variable` (and the `source`
    of `source_variable`)."""
    text = os.environ.get(variable, "").strip()
    try:
        defaults = json.loads(text) if text else {}
    except ValueError as e:
        raise ValueError(f"{variable} is not JSON: {e}") from None
    if not isinstance(defaults, dict):
        raise ValueError(f"{variable} must be a JSON object, not {text!r}")
    unknown = sorted(set(defaults) - set(params))
    if unknown:
        raise ValueError(f"{variable} names unknown params {unknown}; known: {sorted(params)}")
    source = os.environ.get(source_variable, "").strip() if source_variable else ""
    if source:
        if "source" in defaults:
            raise ValueError(f"set the default source in {source_variable} or {variable}, not both")
        defaults["source"] = source
    out = dict(params)
    for name, value in defaults.items():
        param = params[name]
        out[name] = Param(value, description=param.description, **param.schema)
        try:
            out[name].resolve()
        except Exception as e:  # ParamValidationError
            raise ValueError(f"{variable}: {name}: {e}".splitlines()[0]) from None
    return out


# What the steps of a layout_nightly run read from wait_for_input's XCom (small metadata only).
READY = "ti.xcom_pull(task_ids='wait_for_input')"
NIGHTLY_RUN_ARGS = [
    "--table", "{{ params.table }}",
    "--partition", "{{ %s['partition'] }}" % READY,
    "--run-id", "{{ %s['run_key'] }}" % READY,
]


def check_rendered(resolved: dict) -> None:
    """The partition, source and dates as rendered for the run, checked as the jobs will
    check them (layout_core.base.params): a bad one fails the run before it waits for anything."""
    from layout_core.base import params
    from layout_core.base.config import load_settings

    params.partition_value(resolved["partition"], required=True)
    if resolved["source"]:
        params.input_path(resolved["source"], "the source", load_settings().allowed_roots)
    params.iso_date(resolved["start"], "start")
    params.iso_date(resolved["end"], "end")


class LandingSensor(BaseSensorOperator):
    """Waits until the run's batch has landed; returns (XCom) the source, partition and date
    range rendered for the run's logical date, and the run key the steps build one catalog
    version under.

    The params are rendered as Jinja once more here (Airflow renders `{{ params.source }}`
    to the param's text, not the text's own template), so `/landing/lineitem/dt={{ ds }}`
    becomes the day's folder. The run key is `<dag_id>__<run_id>`, plus `__rerun<n>` once
    the run has been cleared n times and this task runs again: re-running a day (clearing
    the run, or `airflow backfill create --reprocess-behavior completed`) builds a new
    version of that partition, which retires the old one when it goes live, while clearing
    one failed step later in the run resumes the run's own version (this task's XCom stays).
    A missing source, or a template that needs a logical date the run lacks, fails at once;
    a batch that never arrives fails after `timeout` seconds, naming the path."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._waiting_for = ""

    def _render_param(self, text: str, context, what: str) -> str:
        try:
            return str(self.render_template(text, context)).strip()
        except Exception as e:  # jinja2.UndefinedError for {{ ds }} in a run without a logical date
            raise AirflowFailException(f"cannot render {what} {text!r} for this run: {e}") from None

    def poke(self, context) -> PokeReturnValue:
        from layout_core.base.errors import UserError
        from layout_core.airflow.landing import LandingError, missing_input

        params = context["params"]
        resolved = {
            "source": self._render_param(params["source"], context, "source"),
            "partition": self._render_param(params["partition"] or "{{ ds }}", context, "partition"),
            "start": self._render_param(params["start"], context, "start"),
            "end": self._render_param(params["end"], context, "end"),
        }
        if not resolved["partition"]:
            raise AirflowFailException("the partition rendered empty: set the partition param")
        try:
            check_rendered(resolved)
            missing = missing_input(resolved["source"], params.get("ready_file") or "")
        except (LandingError, UserError) as e:
            raise AirflowFailException(str(e)) from None
        if missing:
            self._waiting_for = missing
            self.log.info("waiting for the batch of %s %s: %s", params["table"], resolved["partition"], missing)
            return PokeReturnValue(is_done=False)
        dag_run = context["dag_run"]
        clears = getattr(dag_run, "clear_number", 0) or 0
        run_key = f"{self.dag_id}__{dag_run.run_id}" + (f"__rerun{clears}" if clears else "")
        self.log.info("batch of %s %s is there: %s (run key %s)", params["table"], resolved["partition"],
                      resolved["source"], run_key)
        return PokeReturnValue(is_done=True, xcom_value={**resolved, "run_key": run_key})

    def execute(self, context):
        try:
            return super().execute(context)
        except AirflowSensorTimeout as e:
            raise AirflowSensorTimeout(
                f"the input never arrived within {self.timeout:.0f} s (LAYOUT_NIGHTLY_WAIT_TIMEOUT): "
                f"{self._waiting_for or e}") from None


with DAG(
    dag_id=NIGHTLY_DAG,
    description="Lay out a new table partition into blocks that queries can skip",
    schedule=NIGHTLY_SCHEDULE,
    # max_active_runs=1 (DAG_DEFAULTS): one run of this DAG at a time, whatever its table, so
    # at most one per table; runs of other tables queue. (A backfill has its own limit: give it
    # --max-active-runs 1.) The star and reoptimize DAGs are not serialized with it: the
    # catalog keeps a partition consistent (one activation transaction retires the other).
    **{**DAG_DEFAULTS, "start_date": NIGHTLY_START_DATE, "catchup": NIGHTLY_CATCHUP},
    params=(nightly_params := _param_defaults(NIGHTLY_PARAMS)),
    # without a default source a scheduled run has nothing to lay out (module docstring)
    is_paused_upon_creation=not nightly_params["source"].value,
) as dag:
    wait_for_input = LandingSensor(
        task_id="wait_for_input",
        timeout=WAIT_TIMEOUT,
        poke_interval=POKE_INTERVAL,
        # reschedule frees the worker slot between checks; below a minute poking is cheaper
        mode="reschedule" if POKE_INTERVAL >= 60 else "poke",
    )
    ingest_args = ("--source", "{{ %s['source'] }}" % READY, "--date-column", "{{ params.date_column }}",
                   "--start", "{{ %s['start'] }}" % READY, "--end", "{{ %s['end'] }}" % READY)
    steps = nightly_steps(NIGHTLY_RUN_ARGS, {"ingest": ingest_args, "featurize": FEATURIZE_ARGS})
    chain(wait_for_input, *steps)


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
        ingest_args = ("--source", f"{{{{ params.source_dir }}}}/{table}.parquet",
                       *(("--date-column", "{{ params.date_column }}", "--start", "{{ params.start }}",
                          "--end", "{{ params.end }}") if fact else ()))
        chain(*nightly_steps(run_args, {"ingest": ingest_args, "featurize": featurize_args}))
    return group


with DAG(
    dag_id=STAR_NIGHTLY_DAG,
    description="Lay out dimension tables, then the new fact partition, with join-induced cuts (MTO)",
    schedule=os.environ.get("LAYOUT_STAR_SCHEDULE") or None,
    **DAG_DEFAULTS,
    params=(star_params := _param_defaults({
        "source_dir": Param("", type="string", pattern=PATH_PATTERN,
                            description="folder with <table>.parquet for every table"),
        "partition": Param("", type="string", pattern=PARTITION_PATTERN,
                           description="fact partition (default: the run's date)"),
        "date_column": Param("", type="string", pattern=COLUMN_PATTERN,
                             description="fact column for the date range (optional)"),
        "start": Param("", type="string", description="first date of the fact batch, inclusive (optional)"),
        "end": Param("", type="string", description="end date of the fact batch, exclusive (optional)"),
        "optimizer": Param("mto", type="string", description="a registered optimizer"),
        "block_rows": Param(50000, type="integer", minimum=1, maximum=MAX_BLOCK_ROWS, description="rows per fact block"),
        "dimension_block_rows": Param(50000, type="integer", minimum=1, maximum=MAX_BLOCK_ROWS,
                                      description="rows per dimension block"),
        "settings": Param({}, type="object",
                          description='the optimizer\'s other settings for the fact table, e.g. {"trees": 3} for pando'),
        "query_log": Param("", type="string", pattern=PATH_PATTERN, description="SQL file of past queries"),
    }, "LAYOUT_STAR_PARAMS", None)),
    # scheduled runs need a default source_dir (module docstring)
    is_paused_upon_creation=not star_params["source_dir"].value,
) as star_dag:
    chain(*[table_steps(table, fact=(table == STAR_TABLES[-1])) for table in STAR_TABLES])
