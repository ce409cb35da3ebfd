"""A change batch on a laid-out table (MTO §5.2).

    stage_changes -> write_changes -> verify_changes -> activate_changes -> report

Params: the table, its partition ('' for a table laid out whole), the
Parquet path of the inserted rows and that of the deleted primary keys
(either may be empty; an update is a delete plus an insert). Each step is a
spark-submit of `jobs/apply_changes.py <step>`: stage_changes checks the
batch and routes the new rows through the active tree to their blocks and
repairs the join-induced cuts of other tables computed from this one;
write_changes writes new folders for the blocks that change only;
verify_changes checks their rows and checksum; activate_changes switches
to the new version and the repaired cuts in one catalog transaction, only
while the version the batch was staged on still serves (max_active_runs=1
makes batches queue; a batch staged on an older version fails there and
changes nothing). A batch that changes no row makes no version.

Kept light on purpose: of layout_core only the stdlib-only flows.names at the top; the rest
is imported inside the report task.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from airflow.sdk import DAG, Param, chain, task
from spark_jobs import ACTIVATES, RUN_ID, spark_submit

from layout_core.flows.names import CHANGES_DAG, CHANGES_STEPS



def changes_step(step: str, **kwargs):
    return spark_submit(step, "apply_changes.py",
                        [step, "--table", "{{ params.table }}", "--partition", "{{ params.partition }}",
                         "--inserted", "{{ params.inserted }}", "--deleted", "{{ params.deleted }}",
                         "--run-id", RUN_ID], **kwargs)


with DAG(
    dag_id=CHANGES_DAG,
    description="Apply inserted rows and deleted keys to a laid-out table, repairing join-induced cuts",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=30)},
    tags=["layout"],
    # JSON-schema constraints refuse the obvious cases in the trigger form; the job checks
    # everything again (layout_core.base.params) before any work. As in layout_nightly.py.
    params={
        "table": Param("customer", type="string", pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$",
                       description="the laid-out table the batch changes"),
        "partition": Param("", type="string", pattern=r"^(?!.*\.\.)[^/\\\x00-\x1f\x7f]{0,256}$",
                           description="its partition ('' = laid out whole)"),
        "inserted": Param("", type="string", pattern=r"^(?!(.*[/\\])?\.\.([/\\].*)?$)[^\x00-\x1f\x7f]*$",
                          description="Parquet path of the inserted rows (every column)"),
        "deleted": Param("", type="string", pattern=r"^(?!(.*[/\\])?\.\.([/\\].*)?$)[^\x00-\x1f\x7f]*$",
                         description="Parquet path of the deleted primary keys"),
    },
) as dag:

    @task
    def report(params: dict | None = None, dag=None, run_id=None) -> dict:
        """The batch's numbers (from the steps' metrics), for the UI."""
        from layout_core.base.config import load_settings
        from layout_core.runs.paths import RunPaths, read_metrics

        params = params or {}
        paths = RunPaths(Path(load_settings().warehouse), params["table"], params.get("partition", ""),
                         f"{dag.dag_id}__{run_id}")
        m = read_metrics(paths)
        staged, done = m.get("stage_changes", {}), m.get("activate_changes", {})
        return {"version": done.get("version"), "replaces": staged.get("replaces", staged.get("base_version")),
                "inserted": staged.get("inserted"), "deleted": staged.get("deleted"),
                "deleted_missing": staged.get("deleted_missing"), "blocks_changed": done.get("blocks_changed"),
                "cuts_repaired": done.get("cuts_repaired"), "cuts_left_stale": staged.get("cuts_left_stale"),
                "dangling_rows": staged.get("dangling_rows"), "empty": bool(done.get("empty"))}

    chain(*[changes_step(step, outlets=ACTIVATES if step == CHANGES_STEPS[-1] else [])
            for step in CHANGES_STEPS], report())
