"""One layout plan for every path: the nightly steps and the benchmark's code path
put every row of a TPC-H table in the same block, given the same seed and settings.

The nightly side runs the seven step functions (what the DAG's jobs call) with
the dimension tables laid out first; the benchmark side is
`pipeline.in_memory.lay_out_in_memory`, which `layout bench tpch` calls. Each
side's blocks are summarized as a checksum over (primary key, block index).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from layout_core.base.schema import load_schema
from layout_core.catalog import Catalog
from layout_core.flows.nightly import steps
from layout_core.flows.nightly.in_memory import lay_out_in_memory
from layout_core.optimizers import TableQueries
from layout_core.workload.analyze import analyze_file
from layout_core.workload.tpch import generate, write_sql_file

pytestmark = pytest.mark.slow
SCHEMA = load_schema("tpch")
# templates over lineitem, orders, customer and nation only: those four are laid out
TEMPLATES = [1, 3, 4, 6, 10, 12, 18]
DIMENSIONS = {"nation": 10, "customer": 300, "orders": 2000}
# lineitem (60,175 rows) is planned on a sample of about a third of its rows
SETTINGS = {
    "sortkey": {"block_rows": 4000, "sort_column": "l_shipdate"},
    "qdtree": {"block_rows": 4000, "sample_rows": 20_000},
    "mto": {"block_rows": 4000, "sample_rows": 20_000},
    "pando": {"block_rows": 4000, "sample_rows": 20_000, "trees": 3},
    "tuned": {"block_rows": 4000},  # a block per month of the date column the log filters most (< 4,000 rows a month)
}


def _checksum(frame, table: str, block) -> tuple[int, int, int]:
    """(rows, distinct blocks, sum of a 64-bit hash of (primary key, block index))."""
    from pyspark.sql import functions as F

    keys = [F.col(c) for c in SCHEMA.table(table).primary_key]
    row = frame.agg(F.count(F.lit(1)), F.countDistinct(block),
                    F.sum(F.xxhash64(*keys, block).cast("decimal(38,0)"))).collect()[0]
    return int(row[0]), int(row[1]), int(row[2])


class NightlyLayouts:
    """The layouts the step functions write, each made when a test first asks for it:
    `sums[(table, optimizer)]` is its checksum, `routed["lineitem"]` mto's tree, blocks
    and 3,000 of its rows with their cut bits."""

    def __init__(self, spark, tpch_sf001, home: Path):
        self.spark, self.source, self.home = spark, tpch_sf001, home
        self.log = home / "train.sql"
        write_sql_file(generate(3, seed=1, templates=TEMPLATES, scale_factor=0.01), self.log)
        self.sums, self.routed = {}, {}
        self.catalog = Catalog(f"sqlite:///{home / 'catalog.db'}")
        for table, rows in DIMENSIONS.items():  # the sources of lineitem's join-induced cuts
            self.lay_out(table, "mto", {"block_rows": rows}, "dim")

    def checksum(self, table: str, optimizer: str) -> tuple[int, int, int]:
        if (table, optimizer) not in self.sums:
            self.lay_out(table, optimizer, SETTINGS[optimizer], optimizer)
        return self.sums[(table, optimizer)]

    def lay_out(self, table, optimizer, settings, run_id):
        from pyspark.sql import functions as F

        spark, catalog, home = self.spark, self.catalog, self.home
        paths = steps.RunPaths(home / "wh", table, "", run_id)
        steps.run_in_process(spark, catalog, SCHEMA, paths, str(self.source / f"{table}.parquet"), optimizer,
                             settings, str(self.log))
        layout = catalog.active_layout(table, "")
        block_paths = [b.path for b in layout.blocks]
        blocks = spark.read.option("basePath", str(Path(block_paths[0]).parent)).parquet(*block_paths)
        index = F.col("block_id") - F.lit(layout.version.block_ids.start)
        self.sums[(table, optimizer)] = _checksum(blocks, table, index)
        if table == "lineitem" and optimizer == "mto":  # rows and their bits, to route through the tree
            keys = list(SCHEMA.table(table).primary_key)
            vectors = spark.read.parquet(str(paths.file("featurized"))).select(*keys, "_vec")
            rows = blocks.select(*keys, "block_id").join(vectors, keys).orderBy(*keys).limit(3000).collect()
            self.routed["lineitem"] = (catalog.trees(layout.version.version_id), layout.blocks, rows)


@pytest.fixture(scope="module")
def nightly(spark, tpch_sf001, tmp_path_factory):
    layouts = NightlyLayouts(spark, tpch_sf001, tmp_path_factory.mktemp("one_plan"))
    yield layouts
    layouts.catalog.close()


# make test: mto on a fact table and a dimension; pando (mto's sample and cuts, its cells
# placed by the same plan), sortkey, qdtree and tuned (a sort, qdtree's tree without
# join-induced cuts, month clusters): make test-full.
@pytest.mark.parametrize("table,optimizer", [
    pytest.param("lineitem", "sortkey", marks=pytest.mark.extended),
    pytest.param("lineitem", "qdtree", marks=pytest.mark.extended),
    ("lineitem", "mto"), pytest.param("lineitem", "pando", marks=pytest.mark.extended),
    pytest.param("lineitem", "tuned", marks=pytest.mark.extended),
    ("orders", "mto")])
def test_the_benchmark_path_puts_every_row_in_the_nightly_block(spark, tpch_sf001, nightly, table, optimizer):
    from pyspark.sql import functions as F

    frames = {t: spark.read.parquet(str(tpch_sf001 / f"{t}.parquet")) for t in SCHEMA.tables}
    queries = TableQueries(table, tuple(analyze_file(nightly.log, SCHEMA).analyses), SCHEMA.key_hops())
    settings = SETTINGS[optimizer] if table == "lineitem" else {"block_rows": DIMENSIONS[table]}
    laid = lay_out_in_memory(SCHEMA.table(table), frames[table], frames, optimizer, settings, queries)
    try:
        in_memory = _checksum(laid.blocked, table, F.col("_block"))
    finally:
        laid.release()
    rows, blocks, _ = nightly.checksum(table, optimizer)
    assert rows == frames[table].count() and blocks >= 3  # a real layout, not one block
    if optimizer not in ("sortkey", "tuned"):
        assert laid.plan.n_cuts >= 3
    assert in_memory == nightly.checksum(table, optimizer)


def test_routing_a_row_through_the_catalogs_tree_gives_its_block(nightly):
    from layout_core.catalog import leaf_of

    nightly.checksum("lineitem", "mto")  # lays lineitem out by mto, if no test has yet
    nodes, blocks, rows = nightly.routed["lineitem"]
    leaves_of_block = {b.block_id: b.leaves for b in blocks}
    assert len({n.leaf_id for n in nodes if n.leaf_id is not None}) >= 3 and len(rows) == 3000
    for row in rows:
        # the tree read back from the catalog sends the row to the leaf its block came from
        assert leaves_of_block[row["block_id"]] == ((leaf_of(nodes, 0, row["_vec"]),),)
