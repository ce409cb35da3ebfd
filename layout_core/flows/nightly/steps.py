"""The nightly layout of one table partition, as seven restartable steps.

    ingest -> featurize -> reduce -> optimize -> write_blocks -> verify -> update_catalog

Each step reads the artifacts the previous ones left under the run's staging
folder (`<warehouse>/_runs/<table>/<partition>/<run id>/`, typed in
`flows.nightly.artifacts` and `runs.artifacts`) and writes its own, replacing any output of an earlier
attempt: re-running a step (an Airflow retry) gives the same result and
never duplicates rows. Nothing is visible to readers until update_catalog
activates the version, in one catalog transaction; a failure before that
leaves the previous layout serving.

The optimizer and its settings are given once, to featurize, and travel in
`features.json`; `optimize` calls `optimizers.plan_layout`, the same function
the benchmarks call, and `write_blocks` applies the plan with
`spark.assign.with_plan_blocks` (a Pando plan's cells merged again on every
row first, `spark.cells`, and the plan file replaced by that plan).

Every step returns a small dict of numbers (logged, and kept in
`metrics.json` so reports and benchmarks can show time per step). `NIGHTLY`
is the flow: the steps with one signature (a `runs.flow.RunContext` in,
metrics out), run by the jobs (`flows.nightly.job`) and by `run_in_process`.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any, Mapping

from pyspark.sql import functions as F

from layout_core.base.names import BLOCK_ID_COLUMN, BLOCK_INDEX_COLUMN, VECTOR_COLUMN
from layout_core.base.schema import Schema, TableSchema
from layout_core.catalog import Catalog, CatalogError
from layout_core.flows.names import NIGHTLY_STEPS, PLAN_FILE
from layout_core.flows.nightly.artifacts import CutEntry, Features, IngestSummary, Vectors, training_log_record
from layout_core.optimizers import (
    CandidateCut,
    LayoutPlan,
    PlanError,
    PlanWorkload,
    TableQueries,
    VectorSample,
    get_optimizer,
    plan_layout,
)
from layout_core.optimizers.base import schema_fingerprint
from layout_core.optimizers.plan import TreeBlocks, as_lists
from layout_core.predicates import dumps, loads
from layout_core.runs.artifacts import VerifiedBlocks, WrittenBlocks, read_step_artifact, write_artifact
from layout_core.runs.flow import Flow, RunContext, Step, run_steps
from layout_core.runs.paths import RunPaths, StepError, record_metrics, write_json
from layout_core.runs.publish import block_record, cut_records, keys_file, publish, tree_records
from layout_core.runs.sources import active_sources, frames_of_versions, source_frames
from layout_core.runs.verify import rows_fingerprint, verified_version, verify_blocks, written_frame
from layout_core.skipping.zonemaps import DEFAULT_RANGE_SETS
from layout_core.spark.assign import BlockBits, block_bits, with_plan_blocks
from layout_core.spark.cells import with_exact_cells
from layout_core.spark.blocks import summarize_blocks, write_block_folders
from layout_core.spark.featurize import path_tables, usable_cuts, vector_sample, with_vectors
from layout_core.spark.induced import cut_columns, literal_keys_of, with_layout_cut_flags
from layout_core.workload.analyze import analyze_file

log = logging.getLogger("layout.pipeline")



# ---------------------------------------------------------------------------
# ingest


def ingest(spark, paths: RunPaths, table: TableSchema, source: str, catalog: Catalog,
           date_column: str | None = None, start: str | None = None, end: str | None = None,
           partition_column: str = "dt") -> dict:
    """Copy one batch (a Parquet path, optionally a [start, end) date range) into staging."""

    t0 = time.monotonic()
    df = spark.read.parquet(source)
    missing = [c for c in table.column_names if c not in df.columns]
    if missing:
        raise StepError(f"{source} lacks columns of {table.name}: {missing}")
    if start or end:
        if not date_column:
            raise StepError("a date range needs --date-column")
        if start:
            df = df.where(F.col(date_column) >= F.lit(start).cast("date"))
        if end:
            df = df.where(F.col(date_column) < F.lit(end).cast("date"))
    # the schema's types, so that later batches (changes.apply casts its rows the same way) can
    # share a block's folder: Parquet files of one folder must agree on their column types
    df = df.select(*[F.col(c).cast(table.spark_type(c)).alias(c) for c in table.column_names])
    df.write.mode("overwrite").parquet(str(paths.file("input")))
    rows, checksum = rows_fingerprint(spark.read.parquet(str(paths.file("input"))), table.column_names)
    write_artifact(paths.staging, IngestSummary(rows, str(checksum)))  # verify compares the blocks with this
    catalog.register_table(table.name, str(paths.location), partition_column if paths.partition else None,
                           schema_json={"columns": dict(table.columns)})
    if rows == 0:
        log.warning("ingest %s/%s: the batch is empty; the layout will have no blocks",
                    table.name, paths.partition)
    return record_metrics(paths, "ingest", {"rows": rows, "seconds": round(time.monotonic() - t0, 2)})


# ---------------------------------------------------------------------------
# featurize


def _read_log(query_log: str | None, schema: Schema):
    """The analyzed query log (None without one); statements that fail are logged and skipped."""

    if not query_log:
        return None
    summary = analyze_file(query_log, schema)
    for index, error in summary.failed:
        log.warning("query log statement %d skipped: %s", index, error)
    if summary.queries and not summary.analyses:
        log.warning("query log %s: none of its %d statements could be analyzed", query_log, summary.queries)
    return summary


def _log_numbers(summary, queries: TableQueries) -> dict:
    """The query log in numbers; queries_on_table counts the table's references (a self-join twice)."""
    if summary is None:
        return {"queries": 0, "parsed": 0, "failed": 0, "queries_on_table": 0}
    return {"queries": summary.queries, "parsed": len(summary.analyses), "failed": len(summary.failed),
            "queries_on_table": queries.references}


def featurize(spark, paths: RunPaths, schema: Schema, query_log: str | None, optimizer: str,
              settings: Mapping[str, Any] | None = None, catalog: Catalog | None = None) -> dict:
    """Pick the optimizer's cuts from the query log and add the bit vector column to every row.

    Join-induced cuts (mto) get bits computed exactly from the active layouts
    of the dimension tables on their paths; their literal keys are kept as
    Roaring bitmaps."""

    t0 = time.monotonic()
    table = schema.table(paths.table)
    try:
        chosen = get_optimizer(optimizer)
        resolved = chosen.resolve(settings)
    except PlanError as e:
        raise StepError(str(e)) from None
    summary = _read_log(query_log, schema)
    queries = TableQueries(table.name, tuple(summary.analyses) if summary else (), schema.key_hops())
    cuts = chosen.choose_cuts(queries, resolved)
    frames: dict = {}
    sources: dict = {}
    induced_tables = set().union(*map(path_tables, cuts)) if cuts else set()
    if induced_tables:
        if catalog is None:
            raise StepError("join-induced cuts need the catalog of the dimension layouts")
        sources = active_sources(catalog, induced_tables)
        frames = source_frames(spark, schema, {t: sources[t]["paths"] for t in sources})
    cuts = usable_cuts(table.name, cuts, frames)
    workload = queries.summary(cuts, table)
    induced_keys = iter(literal_keys_of(frames, [c.predicate for c in cuts if c.kind == "join_induced"]))
    entries = []
    for position, cut in enumerate(cuts):
        # support: Sun's (fineblock), else the training references that imply the cut or are disjoint with it
        support = cut.support or sum(i[position] or d[position] for i, d in zip(workload.implies, workload.disjoint))
        induced = {}
        if cut.kind == "join_induced":
            keys = next(induced_keys)
            keys_path = keys_file(paths, position)
            keys_path.parent.mkdir(parents=True, exist_ok=True)
            keys_path.write_bytes(keys.serialize())
            induced = {"path": tuple(str(h) for h in cut.predicate.hops), "literal_keys": len(keys),
                       "source_versions": tuple((t, int(v)) for t in sorted(path_tables(cut))
                                                for v in sources[t]["versions"])}
        entries.append(CutEntry(position, cut.kind, cut.sql, dumps(cut.predicate), support, **induced))
        log.info("cut %d (%s, support %d): %s", position, cut.kind, support, cut.sql)
    if summary is None or not summary.analyses:
        log.warning("featurize %s: no usable queries in the log; %s lays the table out without them",
                    table.name, chosen.name)
    df = spark.read.parquet(str(paths.file("input")))
    flagged = with_vectors(df, cuts, frames)
    flagged.select(*df.columns, VECTOR_COLUMN).write.mode("overwrite").parquet(str(paths.file("featurized")))
    numbers = _log_numbers(summary, queries)
    training = tuple(a.sql for a in summary.analyses if a.refs_of_table(table.name)) if summary else ()
    write_artifact(paths.staging, Features(chosen.name, as_lists(resolved), table.name,
                                           schema_fingerprint(table), tuple(entries), workload.to_json(), numbers,
                                           training))
    return record_metrics(paths, "featurize", {
        **numbers, "optimizer": chosen.name, "cuts": len(entries),
        "join_induced": sum(e.kind == "join_induced" for e in entries),
        "seconds": round(time.monotonic() - t0, 2)})


def _features(paths: RunPaths, table: TableSchema, step: str) -> Features:
    """features.json, refused when the table's schema changed since featurize ran."""

    features = read_step_artifact(paths, Features, step)
    if features.table != table.name or features.schema_fingerprint != schema_fingerprint(table):
        raise StepError(f"featurize ran for another schema of {table.name}: run it again")
    return features


# ---------------------------------------------------------------------------
# reduce


def reduce_vectors(spark, paths: RunPaths, table: TableSchema) -> dict:
    """(vector, count) pairs of the partition, or of a row-hash sample of about
    `sample_rows` rows when the optimizer builds its plan on a sample."""

    t0 = time.monotonic()
    features = _features(paths, table, "reduce")
    df = spark.read.parquet(str(paths.file("featurized")))
    if dict(df.dtypes).get(VECTOR_COLUMN) != "string":
        raise StepError("the featurized rows were written by an older version: run featurize again")
    sample = vector_sample(df, table.column_names, int(features.settings.get("sample_rows", 0)))
    write_artifact(paths.staging, Vectors(sample.keys, tuple(sample.counts.tolist()), sample.rows))
    return record_metrics(paths, "reduce", {"rows": sample.rows, "sampled_rows": sample.sampled_rows,
                                     "distinct_vectors": len(sample.keys),
                                     "seconds": round(time.monotonic() - t0, 2)})


# ---------------------------------------------------------------------------
# optimize


def plan_inputs(features: Features, vectors: Vectors):
    """(vector sample, candidate cuts, workload) of the plan, from the artifacts."""

    cuts = [CandidateCut(loads(c.predicate), c.kind, c.support) for c in features.cuts]
    return (VectorSample(vectors.keys, list(vectors.counts), vectors.rows), cuts,
            PlanWorkload.from_json(features.workload))


def optimize(paths: RunPaths, table: TableSchema) -> dict:
    """The layout plan: which rows go to which block (`optimizers.plan_layout`)."""

    t0 = time.monotonic()
    features = _features(paths, table, "optimize")
    sample, cuts, workload = plan_inputs(features, read_step_artifact(paths, Vectors, "optimize"))
    try:
        plan = plan_layout(features.optimizer, table, sample, cuts, workload, features.settings)
    except PlanError as e:
        raise StepError(str(e)) from None
    write_json(paths.file(PLAN_FILE), plan.to_json())
    numbers = {"optimizer": plan.optimizer, "blocks": plan.n_blocks, "rows": plan.rows,
               "sampled_rows": sample.sampled_rows}
    if isinstance(plan.assignment, TreeBlocks):
        numbers["leaves"] = len(plan.assignment.leaf_n_blocks)
    if plan.choices:
        numbers["choices"] = as_lists(dict(plan.choices))
    return record_metrics(paths, "optimize", {**numbers, "seconds": round(time.monotonic() - t0, 3)})


def read_plan(paths: RunPaths, step: str):

    path = paths.file(PLAN_FILE)
    if not path.exists():
        raise StepError(f"{path} (written by optimize) is missing: run optimize before {step}")
    try:
        return LayoutPlan.from_json(json.loads(path.read_text()), source=f"{path} (written by optimize)")
    except (PlanError, ValueError) as e:
        raise StepError(str(e)) from None


# ---------------------------------------------------------------------------
# write_blocks


def write_blocks(spark, paths: RunPaths, table: TableSchema, catalog: Catalog,
                 partition_column: str = "dt") -> dict:
    """Reserve block ids (one catalog version per run id) and write the block folders."""


    t0 = time.monotonic()
    plan = read_plan(paths, "write_blocks")
    try:
        plan.check_table(table)
    except PlanError as e:
        raise StepError(str(e)) from None
    df = spark.read.parquet(str(paths.file("featurized")))
    exact = with_exact_cells(df, plan, table)  # Pando's cells merged again on every row
    if exact is not plan:  # a retry reads this plan and counts nothing again
        write_json(paths.file(PLAN_FILE), exact.to_json())
        plan = exact
    try:
        version, ids = catalog.begin_version(table.name, paths.partition, plan.optimizer, dict(plan.settings),
                                             paths.run_id, plan.n_blocks)
    except CatalogError as e:
        raise StepError(f"{e} (the optimizer's result changed since the first attempt of this run: "
                        f"start a new run)") from None
    if catalog.version(version).state == "active" and paths.file(WrittenBlocks.FILE).exists():
        # A retry after this run already went live: its folders are being read; leave them.
        return record_metrics(paths, "write_blocks", {"version": version, "already_active": True})
    for stale in (VerifiedBlocks.FILE, WrittenBlocks.FILE):  # an earlier attempt's: never trust them now
        paths.file(stale).unlink(missing_ok=True)
    ingested = read_step_artifact(paths, IngestSummary, "write_blocks")  # what the blocks must hold
    written = {}
    if plan.n_blocks:
        blocked = with_plan_blocks(df, plan).withColumn(BLOCK_ID_COLUMN, F.col(BLOCK_INDEX_COLUMN) + F.lit(ids.start))
        written = write_block_folders(blocked, table.column_names, paths.location,
                                      paths.file("block_staging"),
                                      partition_column if paths.partition else None, paths.partition)
    write_artifact(paths.staging, WrittenBlocks(
        version, ids.start, {str(b): {"path": str(p), "bytes": n} for b, (p, n) in written.items()},
        ingested.rows, ingested.checksum))
    return record_metrics(paths, "write_blocks", {"version": version, "blocks": len(written),
                                           "bytes": sum(n for _, n in written.values()),
                                           "seconds": round(time.monotonic() - t0, 2)})


# ---------------------------------------------------------------------------
# verify


def verify(spark, paths: RunPaths, table: TableSchema, catalog: Catalog) -> dict:
    """Rows and checksum of the written blocks equal those of the ingested batch; else the
    version fails."""
    return verify_blocks(spark, paths, catalog, table, WrittenBlocks, VerifiedBlocks)


# ---------------------------------------------------------------------------
# update_catalog


def block_rows_error(plan, summaries, first_id: int) -> float | None:
    """Largest relative error of the plan's expected block sizes against the written blocks."""
    errors = [abs(s.row_count - plan.expected_block_rows[s.block_id - first_id])
              / plan.expected_block_rows[s.block_id - first_id]
              for s in summaries if plan.expected_block_rows[s.block_id - first_id] > 0]
    return round(max(errors), 4) if errors else None


def update_catalog(spark, paths: RunPaths, table: TableSchema, catalog: Catalog,
                   schema: Schema | None = None, range_sets: int = DEFAULT_RANGE_SETS) -> dict:
    """Cuts (with literal keys), the plan and its tree, per-block stats (range
    sets of at most `range_sets` ranges per column), cut bit vectors and
    lineage, then activate (retiring the old version)."""

    t0 = time.monotonic()
    written, verified = verified_version(paths, WrittenBlocks, VerifiedBlocks, "update_catalog")
    version = written.version
    info = catalog.version(version)
    if info.state == "active":
        return record_metrics(paths, "update_catalog", {"version": version, "already_active": True})
    features = _features(paths, table, "update_catalog")
    plan = read_plan(paths, "update_catalog")
    predicates = [loads(c.predicate) for c in features.cuts]
    # the bits of join-induced cuts come from the dimension versions featurize used
    source_versions = {(t, v) for c in features.cuts for t, v in c.source_versions}
    if source_versions and schema is None:
        raise StepError("join-induced cuts need the schema of their dimension tables")
    frames = frames_of_versions(spark, catalog, schema, source_versions)
    frame = written_frame(spark, table, written)
    summaries, bits = [], {}
    if frame is not None:
        # two passes: statistics over every column; the cut bits over the columns the cuts
        # read, so the join-induced cuts' joins carry narrow rows
        summaries = summarize_blocks(frame, table, 0, range_sets)
        flagged = with_layout_cut_flags(cut_columns(frame, predicates, [BLOCK_ID_COLUMN]), predicates, frames)
        bits = block_bits(flagged, len(predicates), plan.routing_trees(), BLOCK_ID_COLUMN)
    blocks = []
    for s in summaries:
        b = bits.get(s.block_id, BlockBits(0, 0))
        blocks.append(block_record(s, written.blocks[str(s.block_id)], union_bits=b.union_bits, all_bits=b.all_bits,
                                   leaves=b.leaves, cells=b.cells))
    # the fingerprint of the rows verified in the blocks, not of an earlier attempt's input
    publish(catalog, version, "update_catalog", cuts=cut_records(paths, features.cuts),
            plan={**plan.to_json(), **training_log_record(features.training_sql, features.log.get("parsed", 0))},
            trees=tree_records(plan), blocks=blocks, input_fingerprint=f"{verified.rows}:{verified.checksum}")
    numbers = {"version": version, "blocks": len(blocks), "rows": sum(b.row_count for b in blocks),
               "expected_blocks": plan.n_blocks, "range_sets": range_sets}
    error = block_rows_error(plan, summaries, written.first_block_id)
    if error is not None:
        numbers["block_rows_error_max"] = error
    return record_metrics(paths, "update_catalog", {**numbers, "seconds": round(time.monotonic() - t0, 2)})


# ---------------------------------------------------------------------------
# all steps in one process


NIGHTLY = Flow("nightly", (
    Step("ingest", lambda c: ingest(c.spark, c.paths, c.table, c.inputs["source"], c.catalog, c.input("date_column"),
                                    c.input("start"), c.input("end"), c.input("partition_column", "dt"))),
    Step("featurize", lambda c: featurize(c.spark, c.paths, c.schema, c.input("query_log"), c.inputs["optimizer"],
                                          c.input("settings"), c.catalog)),
    Step("reduce", lambda c: reduce_vectors(c.spark, c.paths, c.table)),
    Step("optimize", lambda c: optimize(c.paths, c.table), needs_spark=False),
    Step("write_blocks", lambda c: write_blocks(c.spark, c.paths, c.table, c.catalog,
                                                c.input("partition_column", "dt"))),
    Step("verify", lambda c: verify(c.spark, c.paths, c.table, c.catalog)),
    Step("update_catalog", lambda c: update_catalog(c.spark, c.paths, c.table, c.catalog, c.schema, c.range_sets)),
), declared=NIGHTLY_STEPS)


def run_in_process(spark, catalog: Catalog, schema: Schema, paths: RunPaths, source: str, optimizer: str,
                   settings: Mapping[str, Any] | None = None, query_log: str | None = None, *,
                   date_column: str | None = None, start: str | None = None, end: str | None = None,
                   partition_column: str = "dt", range_sets: int = DEFAULT_RANGE_SETS) -> dict:
    """The nightly steps in order in one Spark session (tests, the demo's baselines, tools);
    returns the run's metrics. The nightly DAG runs the same steps as separate jobs."""
    inputs = {"source": source, "optimizer": optimizer, "settings": settings, "query_log": query_log,
              "date_column": date_column, "start": start, "end": end, "partition_column": partition_column}
    return run_steps(NIGHTLY, RunContext(spark, catalog, schema, paths, inputs, range_sets))
