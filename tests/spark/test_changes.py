"""Change batches on TPC-H laid out by mto (MTO §5.2): dimension changes repair the
fact tables' join-induced cuts instead of leaving them stale, late fact rows find
their blocks, and every query returns what it returns on the changed raw tables."""

from __future__ import annotations

import pytest

from layout_core.catalog import Catalog
from layout_core.flows.changes.apply import apply_changes_in_process
from layout_core.flows.nightly.steps import RunPaths, StepError
from layout_core.skipping.router import RoutingIndex, route_query
from layout_core.workload.tpch import generate
from tests.conftest import TPCH_TABLES
from tests.helpers.tpch_layouts import BLOCK_ROWS, SCHEMA, copied_tpch_layout, use

pytestmark = pytest.mark.slow
# templates that read each changed table (customer, orders and lineitem: 3 5 10 13 22 and
# 3 5 10 14 19; part: 14 19; nation: 5 10), one parameter draw each; every check runs them on
# the layout and on the raw tables (in make test four checks, 56 Spark queries)
QUERIES = [q.sql for q in generate(1, seed=11, templates=[3, 5, 10, 13, 14, 19, 22], scale_factor=0.01)]


class Tables:
    """The laid-out warehouse and the raw tables as they should be after every batch."""

    def __init__(self, spark, home, laid_out):
        self.spark, self.home = spark, home
        self.url = f"sqlite:///{home / 'catalog.db'}"
        self.raw = dict(laid_out["raw"])
        self.runs = 0

    def apply(self, table: str, inserted=None, deleted=None) -> dict:
        """Write the batch as Parquet, apply it, and change the raw tables the same way."""
        self.runs += 1
        folder = self.home / f"batch{self.runs}"
        ins = del_ = None
        if inserted is not None:
            inserted.write.parquet(str(folder / "inserted"))
            ins = str(folder / "inserted")
        if deleted is not None:
            deleted.write.parquet(str(folder / "deleted"))
            del_ = str(folder / "deleted")
        with Catalog(self.url) as catalog:
            metrics = apply_changes_in_process(self.spark, catalog, SCHEMA,
                                               RunPaths(self.home / "wh", table, "", f"changes-{self.runs}"),
                                               ins, del_)
        raw = self.raw[table]
        pk = list(SCHEMA.table(table).primary_key)
        if deleted is not None:
            raw = raw.join(deleted, on=pk, how="left_anti")
        if inserted is not None:
            raw = raw.unionByName(inserted)
        self.raw[table] = raw.localCheckpoint()
        return metrics

    def snapshot(self):
        with Catalog(self.url) as catalog:
            return catalog.snapshot()

    def assert_same_answers(self, statements=QUERIES) -> RoutingIndex:
        from layout_core.skipping.rewrite import rewrite_sql
        from layout_core.spark.compare import same_rows
        from layout_core.spark.views import register_layout_views

        use(self.raw)
        expected = {sql: self.spark.sql(sql).collect() for sql in statements}
        snapshot = self.snapshot()
        index = RoutingIndex.from_snapshot(snapshot)
        try:
            assert register_layout_views(self.spark, snapshot, [SCHEMA.table(t) for t in TPCH_TABLES])
            for sql in statements:
                rewritten = rewrite_sql(route_query(sql, index, SCHEMA), index)
                equal, why = same_rows(expected[sql], self.spark.sql(rewritten).collect())
                assert equal, f"{why}\n{rewritten}"
        finally:
            use(self.raw)
        return index


@pytest.fixture(scope="module")
def tables(spark, tpch_sf001, tmp_path_factory):
    # test_check's layout (the same tables, optimizer and block sizes), copied: this module changes it
    home = tmp_path_factory.mktemp("changes")
    laid_out = copied_tpch_layout(spark, tpch_sf001, tmp_path_factory, "mto", BLOCK_ROWS, home)
    yield Tables(spark, home, laid_out)
    use(laid_out["raw"])


def blocks_read(index: RoutingIndex, statements=QUERIES) -> int:
    return sum(len(ref.blocks) for sql in statements for ref in route_query(sql, index, SCHEMA).refs)


def induced_cuts_through(snapshot, table: str) -> list:
    return [(layout.version.table, cut.position) for layout in snapshot.layouts.values() for cut in layout.cuts
            if cut.kind == "join_induced" and any(t == table for t, _ in cut.source_versions)]


def test_new_customers_repair_the_cuts_through_customer(tables):
    spark = tables.spark
    before = tables.snapshot()
    through_customer = induced_cuts_through(before, "customer")
    assert through_customer, "mto made no join-induced cut through customer: nothing to repair"
    # 50 new customers with keys above every existing one (1,500 at SF 0.01), mixed segments
    use(tables.raw)
    new = spark.sql("SELECT c_custkey + 100000 AS c_custkey, c_name, c_address, c_nationkey, c_phone, c_acctbal, "
                    "c_mktsegment, c_comment FROM customer WHERE c_custkey <= 50").localCheckpoint()
    metrics = tables.apply("customer", inserted=new)
    assert metrics["stage_changes"]["inserted"] == 50
    assert metrics["activate_changes"]["cuts_repaired"] == len(through_customer)
    after = tables.snapshot()
    assert after.layouts[("customer", "")].version.version_id != before.layouts[("customer", "")].version.version_id
    index = tables.assert_same_answers()
    assert index.stale_cuts == 0  # without repair every cut through customer would be stale now
    # each repaired cut holds the keys a new layout would compute from the changed tables
    from layout_core.predicates import loads
    from layout_core.spark.induced import literal_keys

    repaired = [(layout.version.table, cut) for layout in after.layouts.values() for cut in layout.cuts
                if (layout.version.table, cut.position) in through_customer]
    assert any(table == "orders" for table, _ in repaired)  # orders' keys are customers: they grow
    for table, cut in repaired:
        assert cut.keys() == literal_keys(tables.raw, loads(cut.predicate)), (table, cut.predicate)


def test_a_batch_is_flagged_alike_from_stored_keys_and_by_joining_the_tables_below(tables):
    """A changed customer reaches a cut's source through nation and region: the repair reads
    that from the literal keys of the same path's cut on customer's own layout; joining the
    rows down the path in Spark must say the same, for NULL and dangling foreign keys too."""
    from layout_core.flows.changes.repair import _flags_of_rows, _level, cuts_to_repair, stored_path_keys
    from layout_core.predicates import loads

    spark = tables.spark
    use(tables.raw)
    rows = spark.sql("SELECT c_custkey + 200000 AS c_custkey, c_name, c_address, "
                     "CASE WHEN c_custkey % 7 = 0 THEN NULL WHEN c_custkey % 11 = 0 THEN 99 ELSE c_nationkey END "
                     "AS c_nationkey, c_phone, c_acctbal, c_mktsegment, c_comment FROM customer "
                     "WHERE c_custkey <= 200").localCheckpoint()
    snapshot = tables.snapshot()
    base = snapshot.layouts[("customer", "")].version.version_id
    cuts = {c.predicate: loads(c.predicate) for _, c in cuts_to_repair(snapshot, "customer", base)}
    stored = stored_path_keys(snapshot, SCHEMA.table("customer"))
    below = [text for text, cut in cuts.items() if _level(cut, "customer")[0] > 0]
    assert below and stored  # paths through nation (and region) whose keys customer's layout holds
    asked = []

    def frames(wanted):
        asked.append(wanted)
        return {t: tables.raw[t] for t in wanted}

    from_keys = _flags_of_rows(rows, "customer", cuts, lambda wanted: 1 / 0, stored)  # never reads the tables
    joined = _flags_of_rows(rows, "customer", cuts, frames, {})
    assert asked == [frozenset({"nation", "region"})]  # just the tables below customer on the paths
    assert sum(flags.sum() for _, flags in from_keys.values()) > 0
    for text in cuts:
        keys, flags = from_keys[text]
        order = keys.argsort()
        other_keys, other_flags = joined[text]
        other = other_keys.argsort()
        assert (keys[order] == other_keys[other]).all() and (flags[order] == other_flags[other]).all(), text


# make test inserts into a dimension and repairs its cuts (above) and applies random batches
# (test_changes_property.py); parts that come and go unreferenced: make test-full.
@pytest.mark.extended
def test_deleting_parts_nobody_ordered_keeps_the_cuts(tables):
    """At SF 0.01 every part has lineitems: 20 new parts come, then go (with 3 keys
    that never existed, counted and ignored); no lineitem references them."""
    spark = tables.spark
    use(tables.raw)
    new = spark.sql("SELECT p_partkey + 100000 AS p_partkey, p_name, p_mfgr, p_brand, p_type, p_size, "
                    "p_container, p_retailprice, p_comment FROM part WHERE p_partkey <= 20").localCheckpoint()
    assert tables.apply("part", inserted=new)["stage_changes"]["cuts_left_stale"] == 0
    use(tables.raw)
    gone = spark.sql("SELECT p_partkey FROM part WHERE p_partkey > 100000 "
                     "UNION ALL SELECT CAST(id + 900000 AS BIGINT) FROM range(3)").localCheckpoint()
    metrics = tables.apply("part", deleted=gone)
    assert metrics["stage_changes"]["deleted"] == 20 and metrics["stage_changes"]["deleted_missing"] == 3
    assert metrics["stage_changes"]["cuts_left_stale"] == 0
    assert metrics["activate_changes"]["cuts_repaired"] > 0
    assert tables.assert_same_answers().stale_cuts == 0


def test_late_orders_and_lineitems_go_back_into_their_blocks(tables):
    """Orders of the last month leave (lineitems first, then orders), then come back
    (orders first): every cut through orders is repaired each time, never stale."""
    spark = tables.spark
    use(tables.raw)
    late_orders = spark.sql("SELECT * FROM orders WHERE o_orderdate >= DATE'1998-07-01'").localCheckpoint()
    late_lines = spark.sql("SELECT l.* FROM lineitem l JOIN orders o ON l.l_orderkey = o.o_orderkey "
                           "WHERE o.o_orderdate >= DATE'1998-07-01'").localCheckpoint()
    assert late_orders.count() > 20 and late_lines.count() > 50
    lines_pk = late_lines.select("l_orderkey", "l_linenumber")
    out_lines = tables.apply("lineitem", deleted=lines_pk)
    assert out_lines["stage_changes"]["deleted"] == late_lines.count()
    out_orders = tables.apply("orders", deleted=late_orders.select("o_orderkey"))
    assert out_orders["stage_changes"]["cuts_left_stale"] == 0  # no lineitem references them any more
    assert tables.assert_same_answers().stale_cuts == 0

    back_orders = tables.apply("orders", inserted=late_orders)
    assert back_orders["stage_changes"]["cuts_left_stale"] == 0
    back_lines = tables.apply("lineitem", inserted=late_lines)
    staged = back_lines["stage_changes"]
    assert staged["inserted"] == late_lines.count() and staged["dangling_rows"] == 0
    assert staged["new_blocks"] == 0  # every row found a block of its leaf
    index = tables.assert_same_answers()
    assert index.stale_cuts == 0
    total = sum(ref.blocks_total for sql in QUERIES for ref in route_query(sql, index, SCHEMA).refs)
    assert blocks_read(index) < 0.8 * total


def test_deleting_a_referenced_part_leaves_its_cuts_stale_and_answers_right(tables):
    spark = tables.spark
    use(tables.raw)
    used = spark.sql("SELECT p_partkey FROM part WHERE p_partkey IN (SELECT l_partkey FROM lineitem) "
                     "ORDER BY p_partkey LIMIT 3")
    metrics = tables.apply("part", deleted=used)
    through_part = [c for c in induced_cuts_through(tables.snapshot(), "part")]
    assert metrics["stage_changes"]["cuts_left_stale"] >= 1 or not through_part
    tables.assert_same_answers()


def test_bad_batches_are_refused_and_change_nothing(tables):
    spark = tables.spark
    use(tables.raw)
    before = tables.snapshot().layouts[("nation", "")].version.version_id
    existing = spark.sql("SELECT * FROM nation WHERE n_nationkey = 3")
    with pytest.raises(StepError, match="exist already"):
        tables.apply("nation", inserted=existing)
    with pytest.raises(StepError, match=r"missing \['n_comment'\].*not in the schema \['extra'\]"):
        tables.apply("nation", inserted=spark.sql("SELECT n_nationkey + 100 AS n_nationkey, n_name, n_regionkey, "
                                                  "1 AS extra FROM nation"))
    twice = spark.sql("SELECT 500 AS n_nationkey, n_name, n_regionkey, n_comment FROM nation LIMIT 2")
    with pytest.raises(StepError, match="twice"):
        tables.apply("nation", inserted=twice)
    with Catalog(tables.url) as catalog, pytest.raises(StepError, match="no active layout"):
        apply_changes_in_process(spark, catalog, SCHEMA, RunPaths(tables.home / "wh", "lineitem", "1999", "x"),
                                 None, str(tables.home / "batch1" / "inserted"))
    # only missing keys: counted, ignored, no new version
    metrics = tables.apply("nation", deleted=spark.sql("SELECT CAST(999 AS BIGINT) AS n_nationkey"))
    assert metrics["stage_changes"]["deleted_missing"] == 1
    assert metrics["activate_changes"]["empty"] is True
    assert tables.snapshot().layouts[("nation", "")].version.version_id == before
