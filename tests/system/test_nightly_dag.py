"""The DAG files: they import cleanly and light, their steps and order, and the star steps with pando
(one day of one table runs in tests/system/test_nightly_schedule.py)."""

import subprocess
import sys

import pytest

from tests.helpers.paths import PROJECT

STEPS = ["ingest", "featurize", "reduce", "optimize", "write_blocks", "verify", "update_catalog"]


# What a DAG file may import of layout_core: stdlib-only modules (names, limits, patterns, step lists,
# the driver's JVM options, the version that `import layout_core` reads).
LIGHT = {"layout_core", "layout_core.base", "layout_core.base.errors", "layout_core.base.names",
         "layout_core.base.params", "layout_core.base.jvm", "layout_core.base.version", "layout_core.flows",
         "layout_core.flows.names"}


@pytest.mark.parametrize("dag_file", sorted(p.name for p in (PROJECT / "dags").glob("*.py")))
def test_dag_files_have_no_heavy_top_level_imports(dag_file):
    code = (
        # Airflow puts the DAG folder on sys.path (dags/spark_jobs.py is imported by name)
        f"import sys, runpy; sys.path.insert(0, 'dags'); runpy.run_path('dags/{dag_file}');"
        f"light = {sorted(LIGHT)!r};"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('pyspark', 'sqlglot', 'numpy')"
        " or (m.startswith('layout_core') and m not in light)];"
        "print(','.join(sorted(heavy)))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


@pytest.fixture
def dagbag(tmp_path, monkeypatch):
    """The project's DAG folder parsed as the DAG processor does (no examples, a private home)."""
    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path))
    monkeypatch.setenv("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    from airflow.dag_processing.dagbag import BundleDagBag

    # a bundle's folder is on sys.path, as in the DAG processor: DAG files import dags/spark_jobs.py
    bag = BundleDagBag(dag_folder=str(PROJECT / "dags"), bundle_path=PROJECT / "dags")
    assert bag.import_errors == {}
    return bag


@pytest.mark.slow
def test_dagbag_imports_without_errors(dagbag):
    dag = dagbag.dags["layout_nightly"]
    assert [t.task_id for t in dag.topological_sort()] == ["wait_for_input", *STEPS]
    assert dag.get_task("wait_for_input").task_type == "LandingSensor"
    for task in (dag.get_task(step) for step in STEPS):
        assert task.task_type == "LayoutSparkSubmit"  # a SparkSubmitOperator that sets the catalog first
        assert task.application.endswith(f"jobs/{task.task_id}.py")
    assert {"table", "partition", "optimizer", "block_rows", "settings", "query_log"} <= set(dag.params)
    # the optimizers are the registry's business: the DAG file names none but its defaults
    source = (PROJECT / "dags" / "layout_nightly.py").read_text()
    assert not any(f'"{name}"' in source for name in ("sortkey", "qdtree", "zorder", "hilbert"))
    featurize = dag.get_task("featurize")
    assert "--settings" in featurize.application_args
    assert all("--optimizer" not in dag.get_task(step).application_args for step in STEPS if step != "featurize")


@pytest.mark.slow
def test_the_workload_dags_measure_then_reorganize_on_the_shift_alias(dagbag):
    monitor, reopt = dagbag.dags["layout_workload_monitor"], dagbag.dags["layout_reoptimize"]
    assert [t.task_id for t in monitor.topological_sort()] == ["measure_shift", "emit_shift_events"]
    assert monitor.get_task("measure_shift").application.endswith("jobs/measure_shift.py")
    assert [t.task_id for t in reopt.topological_sort()] == [
        "choose_table", "plan_reorg", "write_reorg", "verify_reorg", "activate_reorg", "report"]
    assert all(reopt.get_task(s).application.endswith("jobs/reorganize.py")
               for s in ("plan_reorg", "write_reorg", "verify_reorg", "activate_reorg"))
    assert "layout_workload_shift" in str(reopt.timetable.asset_condition)
    assert reopt.max_active_runs == 1 and {"table", "q"} <= set(reopt.params)


@pytest.mark.slow
def test_star_dag_lays_out_dimension_tables_before_the_fact_table(dagbag):
    dag = dagbag.dags["layout_star_nightly"]
    order = [t.task_id for t in dag.topological_sort()]
    tables = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"]
    assert order == [f"{table}.{step}" for table in tables for step in STEPS]
    assert dag.params["optimizer"] == "mto"
    fact, dimension = dag.get_task("lineitem.ingest"), dag.get_task("customer.ingest")
    assert "--date-column" in fact.application_args and "--date-column" not in dimension.application_args
    partition = dimension.application_args.index("--partition") + 1
    assert dimension.application_args[partition] == ""  # dimension tables are laid out whole
    assert "{{ params.source_dir }}/customer.parquet" in dimension.application_args


@pytest.mark.slow
def test_star_steps_with_pando_give_the_fact_table_join_induced_cuts(tmp_path, spark, tpch_sf001):
    """The star DAG's steps for orders then lineitem (SF 0.01) with pando (two trees), in
    one process (the DAG's own spark-submits run in tests/system/test_example_star.py): a
    join-induced cut on lineitem from the orders layout activated first."""
    from layout_core.base.schema import load_schema
    from layout_core.catalog import Catalog
    from layout_core.flows.nightly import steps

    warehouse = tmp_path / "warehouse"
    catalog_url = f"sqlite:///{tmp_path / 'catalog.db'}"
    log = tmp_path / "queries.sql"
    log.write_text("SELECT count(*) FROM lineitem, orders WHERE l_orderkey = o_orderkey "
                   "AND o_orderpriority = '1-URGENT';\n" * 3 +
                   "SELECT count(*) FROM lineitem WHERE l_quantity < 10;\n"
                   "SELECT count(*) FROM orders WHERE o_orderdate < DATE '1993-01-01';\n" * 2)
    schema = load_schema("tpch")
    with Catalog(catalog_url) as catalog:
        steps.run_in_process(spark, catalog, schema, steps.RunPaths(warehouse, "orders", "", "star"),
                             str(tpch_sf001 / "orders.parquet"), "pando",
                             {"block_rows": 3000, "trees": 2}, str(log))
        steps.run_in_process(spark, catalog, schema, steps.RunPaths(warehouse, "lineitem", "1995", "star"),
                             str(tpch_sf001 / "lineitem.parquet"), "pando",
                             {"block_rows": 1000, "sort_column": "l_shipdate", "trees": 2}, str(log),
                             date_column="l_shipdate", start="1995-01-01", end="1996-01-01")

    with Catalog(catalog_url) as catalog:
        orders = catalog.active_layout("orders", "")
        lineitem = catalog.active_layout("lineitem", "1995")
    assert orders.version.optimizer == lineitem.version.optimizer == "pando"
    assert sum(b.row_count for b in orders.blocks) == 15000
    (urgent,) = [c for c in lineitem.cuts if c.kind == "join_induced"]
    assert "1-URGENT" in urgent.sql and urgent.source_versions == (("orders", orders.version.version_id),)
    assert len(urgent.keys()) > 0
    assert any(b.union_bits >> urgent.position & 1 == 0 for b in lineitem.blocks)  # some blocks have no urgent rows
    # the layout itself is in the catalog: the plan, its two trees, and each block's leaves in both
    with Catalog(catalog_url) as catalog:
        plan = catalog.plan(lineitem.version.version_id)
        nodes = catalog.trees(lineitem.version.version_id)
    assert plan["optimizer"] == "pando" and plan["settings"]["sort_column"] == "l_shipdate"
    assert plan["assignment"]["kind"] == "tuples" and plan["choices"]["trees"] == 2
    for tree in (0, 1):
        leaf_ids = {n.leaf_id for n in nodes if n.tree == tree and n.leaf_id is not None}
        assert len(leaf_ids) >= 2  # each tree holds one of the two cuts
        assert all(set(b.leaves[tree]) <= leaf_ids and b.leaves[tree] for b in lineitem.blocks)
        # the cells (k-tuples) of each block's rows name exactly the leaves of its lineage
        assert all({cell[tree] for cell in b.cells} == set(b.leaves[tree]) for b in lineitem.blocks)
    assert all(len(cell) == 2 for b in lineitem.blocks for cell in b.cells)
    assert sum(len(b.cells) for b in lineitem.blocks) > len(lineitem.blocks)  # merged cells share blocks
