"""The nightly steps run in-process: retries, bad input, and failures that must not go live."""

import shutil

import pytest

from layout_core.base.schema import load_schema
from layout_core.catalog import Catalog
from layout_core.flows.nightly import steps
from layout_core.runs.artifacts import WrittenBlocks, read_artifact
from layout_core.runs.paths import read_metrics
from layout_core.skipping.router import RoutingIndex, route_query
from layout_core.workload.tpch import generate, write_sql_file

pytestmark = pytest.mark.slow
SCHEMA = load_schema("tpch")
LINEITEM = SCHEMA.table("lineitem")


def _run(spark, catalog, warehouse, source, run_id, partition="1995", query_log=None, optimizer="fineblock",
         start="1995-01-01", end="1996-01-01", block_rows=500, until="update_catalog", settings=None):
    paths = steps.RunPaths(warehouse, "lineitem", partition, run_id)
    steps.ingest(spark, paths, LINEITEM, str(source), catalog, "l_shipdate", start, end)
    settings = settings or ({"num_feat": 6} if optimizer == "fineblock" else {"sort_column": "l_shipdate"})
    steps.featurize(spark, paths, SCHEMA, query_log, optimizer, {"block_rows": block_rows, **settings}, catalog)
    steps.reduce_vectors(spark, paths, LINEITEM)
    steps.optimize(paths, LINEITEM)
    steps.write_blocks(spark, paths, LINEITEM, catalog)
    if until == "write_blocks":
        return paths
    steps.verify(spark, paths, LINEITEM, catalog)
    steps.update_catalog(spark, paths, LINEITEM, catalog)
    return paths


@pytest.fixture
def env(tmp_path, tpch_sf001):
    log = tmp_path / "queries.sql"
    write_sql_file(generate(6, seed=4, templates=[1, 6, 12, 14, 19]), log)
    with Catalog(f"sqlite:///{tmp_path / 'catalog.db'}") as catalog:
        yield {"catalog": catalog, "warehouse": tmp_path / "wh", "log": str(log),
               "source": tpch_sf001 / "lineitem.parquet"}


def _blocks_on_disk(warehouse, partition="1995"):
    return sorted(p.name for p in (warehouse / "lineitem" / f"dt={partition}").iterdir())


def test_steps_make_a_verified_layout_and_retries_change_nothing(spark, env):
    c = env["catalog"]
    paths = _run(spark, c, env["warehouse"], env["source"], "run-1", query_log=env["log"])
    layout = c.active_layout("lineitem", "1995")
    expected = spark.read.parquet(str(env["source"])).where(
        "l_shipdate >= DATE'1995-01-01' AND l_shipdate < DATE'1996-01-01'").count()
    assert sum(b.row_count for b in layout.blocks) == expected
    assert all(500 <= b.row_count < 1500 for b in layout.blocks)
    folders = _blocks_on_disk(env["warehouse"])
    # an Airflow retry of the last three steps: same version, same folders, no duplicate rows
    steps.write_blocks(spark, paths, LINEITEM, c)
    steps.verify(spark, paths, LINEITEM, c)
    steps.update_catalog(spark, paths, LINEITEM, c)
    assert _blocks_on_disk(env["warehouse"]) == folders
    assert c.active_layout("lineitem", "1995").blocks == layout.blocks
    assert len(c.versions("lineitem", "1995")) == 1


def test_a_new_run_replaces_the_layout_and_retires_the_old(spark, env):
    c = env["catalog"]
    _run(spark, c, env["warehouse"], env["source"], "run-1", query_log=env["log"])
    _run(spark, c, env["warehouse"], env["source"], "run-2", optimizer="sortkey", block_rows=2000)
    states = {v.run_id: v.state for v in c.versions("lineitem", "1995")}
    assert states == {"run-1": "retired", "run-2": "active"}
    sortkey = c.active_layout("lineitem", "1995")
    dates = [(b.stats["l_shipdate"]["min"]["date"], b.stats["l_shipdate"]["max"]["date"]) for b in sortkey.blocks]
    assert all(hi <= nxt_lo for (_, hi), (nxt_lo, _) in zip(dates, dates[1:]))  # sorted ranges


def test_failed_verify_activates_nothing_and_the_old_layout_keeps_serving(spark, env):
    c = env["catalog"]
    _run(spark, c, env["warehouse"], env["source"], "run-1", query_log=env["log"])
    before = c.active_layout("lineitem", "1995")
    paths = _run(spark, c, env["warehouse"], env["source"], "run-2", query_log=env["log"], until="write_blocks")
    written = read_artifact(paths.staging, WrittenBlocks, "test")
    shutil.rmtree(next(iter(written.blocks.values()))["path"])  # a block lost on the way
    with pytest.raises(steps.StepError, match="verify failed"):
        steps.verify(spark, paths, LINEITEM, c)
    with pytest.raises(steps.StepError, match="verified.json .written by verify. is missing: run verify before update_catalog"):
        steps.update_catalog(spark, paths, LINEITEM, c)
    assert c.active_layout("lineitem", "1995") == before
    assert {v.run_id: v.state for v in c.versions("lineitem", "1995")} == {"run-1": "active", "run-2": "failed"}


def test_empty_partition_gives_an_empty_layout(spark, env):
    c = env["catalog"]
    _run(spark, c, env["warehouse"], env["source"], "run-e", partition="2001", start="2001-01-01",
         end="2002-01-01", query_log=env["log"])
    layout = c.active_layout("lineitem", "2001")
    assert layout is not None and layout.blocks == ()
    route = route_query("SELECT * FROM lineitem", RoutingIndex.from_snapshot(c.snapshot()), SCHEMA)
    assert route.refs[0].blocks == ()


def test_garbage_query_log_and_no_log(spark, env, tmp_path):
    c = env["catalog"]
    garbage = tmp_path / "garbage.sql"
    garbage.write_text("this is not sql;\nSELECT * FROM nowhere;\n"
                       "SELECT count(*) FROM lineitem WHERE l_returnflag = 'R';\n"
                       "SELECT count(*) FROM lineitem WHERE l_returnflag = 'R' AND l_quantity > 1000;\n")
    paths = _run(spark, c, env["warehouse"], env["source"], "run-g", query_log=str(garbage))
    metrics = read_metrics(paths)
    assert metrics["featurize"]["failed"] == 2 and metrics["featurize"]["cuts"] >= 1
    layout = c.active_layout("lineitem", "1995")
    assert sum(b.row_count for b in layout.blocks) == metrics["ingest"]["rows"]
    # no log at all: every row has the same vector and blocks are cut by size only
    paths = _run(spark, c, env["warehouse"], env["source"], "run-n", partition="1996",
                 start="1996-01-01", end="1997-01-01", query_log=None)
    metrics = read_metrics(paths)
    assert metrics["reduce"]["distinct_vectors"] == 1
    assert all(500 <= b.row_count < 1000 for b in c.active_layout("lineitem", "1996").blocks)


def test_nulls_in_filtered_columns_route_correctly(spark, env, tmp_path):
    from pyspark.sql import functions as F

    from layout_core.skipping.rewrite import rewrite_sql
    from layout_core.spark.compare import same_rows
    from layout_core.spark.views import register_layout_views

    c = env["catalog"]
    source = spark.read.parquet(str(env["source"]))
    nulled = source.select(*[
        (F.when(F.col("l_linenumber") % 3 == 0, F.lit(None)).otherwise(F.col(name)).cast(source.schema[name].dataType)
         if name in ("l_returnflag", "l_quantity", "l_shipmode", "l_discount") else F.col(name)).alias(name)
        for name in source.columns])
    nulled_path = tmp_path / "nulled"
    nulled.write.parquet(str(nulled_path))
    log = tmp_path / "q.sql"
    queries = [
        "SELECT count(*) FROM lineitem WHERE l_returnflag = 'R'",
        "SELECT count(*) FROM lineitem WHERE l_returnflag IS NULL",
        "SELECT count(*) FROM lineitem WHERE NOT (l_quantity < 20)",
        "SELECT count(*) FROM lineitem WHERE l_shipmode NOT IN ('AIR', 'MAIL')",
        "SELECT count(*) FROM lineitem WHERE l_discount BETWEEN 0.02 AND 0.04 OR l_quantity IS NULL",
    ]
    log.write_text(";\n".join(queries * 3) + ";\n")
    _run(spark, c, env["warehouse"], nulled_path, "run-null", query_log=str(log))
    snapshot = c.snapshot()
    register_layout_views(spark, snapshot, [LINEITEM])
    index = RoutingIndex.from_snapshot(snapshot)
    try:
        for sql in queries:
            rewritten = rewrite_sql(route_query(sql, index, SCHEMA), index)
            ok, why = same_rows(spark.sql(sql).collect(), spark.sql(rewritten).collect())
            assert ok, f"{sql}: {why}"
    finally:
        spark.catalog.dropTempView("lineitem")


def test_a_log_with_more_cuts_than_a_long_has_bits_keeps_them_all(spark, env, tmp_path):
    from pyspark.sql import functions as F

    from layout_core.skipping.rewrite import rewrite_sql
    from layout_core.spark.compare import same_rows
    from layout_core.spark.views import register_layout_views

    c = env["catalog"]
    # 70 distinct range cuts l_partkey < 20, < 40, ..., < 1400 (SF 0.01 part keys are 1..2000)
    log = tmp_path / "many.sql"
    log.write_text("".join(f"SELECT sum(l_quantity) FROM lineitem WHERE l_partkey < {20 * k};\n"
                           for k in range(1, 71)))
    paths = steps.RunPaths(env["warehouse"], "lineitem", "1995", "run-wide")
    steps.run_in_process(spark, c, SCHEMA, paths, str(env["source"]), "qdtree",
                         {"block_rows": 500, "sort_column": "l_shipdate"}, str(log),
                         date_column="l_shipdate", start="1995-01-01", end="1996-01-01")
    layout = c.active_layout("lineitem", "1995")
    assert len(layout.cuts) == 70
    (last,) = [cut for cut in layout.cuts if cut.position == 69]  # past the 63 bits of a long
    bound = int(last.sql.removeprefix("l_partkey < "))
    # its union bit is exact per block: set exactly where some row has l_partkey < bound
    rows = spark.read.parquet(*[b.path for b in layout.blocks])
    holding = {r[0] for r in rows.where(F.col("l_partkey") < bound).select(F.input_file_name()).collect()}
    for block in layout.blocks:
        has_rows = any(f"block_id={block.block_id}/" in name for name in holding)
        assert bool(block.union_bits >> 69 & 1) == has_rows
    assert any(block.union_bits >> 69 & 1 == 0 for block in layout.blocks)
    register_layout_views(spark, c.snapshot(), [LINEITEM])
    index = RoutingIndex.from_snapshot(c.snapshot())
    try:
        for bound in (20, 700, 1390, bound):
            sql = f"SELECT l_orderkey, l_linenumber FROM lineitem WHERE l_partkey < {bound}"
            route = route_query(sql, index, SCHEMA)
            assert len(route.refs[0].blocks) < route.refs[0].blocks_total
            same, why = same_rows(spark.sql(sql).collect(), spark.sql(rewrite_sql(route, index)).collect())
            assert same, f"{sql}: {why}"
    finally:
        spark.catalog.dropTempView("lineitem")


def test_featurized_rows_of_an_older_version_are_refused(spark, env):
    paths = steps.RunPaths(env["warehouse"], "lineitem", "1995", "run-old")
    steps.ingest(spark, paths, LINEITEM, str(env["source"]), env["catalog"], "l_shipdate", "1995-01-01",
                 "1996-01-01")
    steps.featurize(spark, paths, SCHEMA, env["log"], "fineblock", {"block_rows": 500}, env["catalog"])
    # before bit strings, the vector was a long column
    spark.range(3).selectExpr("id AS l_orderkey", "id AS _vec").write.mode("overwrite") \
        .parquet(str(paths.file("featurized")))
    with pytest.raises(steps.StepError, match="run featurize again"):
        steps.reduce_vectors(spark, paths, LINEITEM)


def test_artifacts_of_an_older_format_or_a_changed_schema_are_refused(spark, env):
    import json

    from layout_core.base.schema import TableSchema

    paths = _run(spark, env["catalog"], env["warehouse"], env["source"], "run-art", query_log=env["log"],
                 until="write_blocks")
    features = json.loads(paths.file("features.json").read_text())
    # a table that gained a column since featurize ran: its plan no longer fits
    wider = TableSchema("lineitem", (*LINEITEM.columns, ("l_note", "string")), LINEITEM.primary_key)
    with pytest.raises(steps.StepError, match="another schema of lineitem"):
        steps.optimize(paths, wider)
    with pytest.raises(steps.StepError, match="another schema"):
        steps.write_blocks(spark, paths, wider, env["catalog"])
    # written by an older release: no format version
    paths.file("features.json").write_text(json.dumps({k: v for k, v in features.items() if k != "format"}))
    with pytest.raises(steps.StepError, match=r"features.json \(written by featurize\) is from an older version"):
        steps.optimize(paths, LINEITEM)
    # a field of the wrong type names the field and the step to run again
    paths.file("features.json").write_text(json.dumps({**features, "cuts": "none"}))
    with pytest.raises(steps.StepError, match="field cuts must be a list, not str: run featurize again"):
        steps.optimize(paths, LINEITEM)


def test_an_unknown_optimizer_fails_at_featurize_with_the_registered_names(spark, env):
    paths = steps.RunPaths(env["warehouse"], "lineitem", "1995", "run-unknown")
    with pytest.raises(steps.StepError, match="unknown optimizer 'pando9'; registered: fineblock, sortkey, qdtree"):
        steps.featurize(spark, paths, SCHEMA, env["log"], "pando9", {}, env["catalog"])
    with pytest.raises(steps.StepError, match="optimizer sortkey has no setting num_feat"):
        steps.featurize(spark, paths, SCHEMA, env["log"], "sortkey", {"num_feat": 3}, env["catalog"])
