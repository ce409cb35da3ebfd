"""The layout catalog on SQLite and PostgreSQL (see the catalog_url fixture)."""

from __future__ import annotations

import datetime as dt
import json
import threading

import pytest
import sqlalchemy as sa
from pyroaring import BitMap64

from layout_core.catalog import (
    ActiveLayout,
    BlockRecord,
    Catalog,
    CatalogError,
    CutRecord,
    PurgeRecord,
    TableInfo,
    TreeNodeRecord,
    leaf_of,
)

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)


class FakeClock:
    """Returns T0, then T0 + 1 h, T0 + 2 h, ... one step per call."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> dt.datetime:
        self.calls += 1
        return T0 + dt.timedelta(hours=self.calls - 1)


@pytest.fixture
def catalog(catalog_url):
    cat = Catalog(catalog_url, clock=FakeClock())
    cat.register_table("orders", "/warehouse/orders", "o_orderdate", {"o_orderkey": "int"})
    cat.register_table("region", "/warehouse/region")
    yield cat
    cat.close()


def block(block_id: int, rows: int = 10, union_bits: int = 0b1, all_bits: int = 0) -> BlockRecord:
    return BlockRecord(block_id, rows, rows * 100, f"/warehouse/orders/b{block_id}", {},
                       union_bits, all_bits)


def active_version(cat: Catalog, partition: str, run_id: str, blocks: int = 1) -> int:
    version_id, ids = cat.begin_version("orders", partition, "greedy", {}, run_id, blocks)
    cat.set_blocks(version_id, [block(b) for b in ids])
    cat.activate(version_id)
    return version_id


# ------------------------------------------------------------------- tables


def test_register_and_list_tables(catalog):
    catalog.register_table("region", "/moved/region", None, {"r_regionkey": "int"})
    catalog.register_table("region", "/moved/region", None, {"r_regionkey": "int"})

    assert catalog.tables() == [
        TableInfo("orders", "/warehouse/orders", "o_orderdate", {"o_orderkey": "int"}),
        TableInfo("region", "/moved/region", None, {"r_regionkey": "int"}),
    ]
    assert catalog.table("orders") == TableInfo(
        "orders", "/warehouse/orders", "o_orderdate", {"o_orderkey": "int"})


def test_unknown_table_and_version_raise_clear_errors(catalog):
    with pytest.raises(CatalogError, match="unknown table 'nope'"):
        catalog.table("nope")
    with pytest.raises(CatalogError, match="unknown table 'nope'"):
        catalog.begin_version("nope", "", "greedy", {}, "run-1", 3)
    with pytest.raises(CatalogError, match="unknown table 'nope'"):
        catalog.partitions("nope")
    with pytest.raises(CatalogError, match="unknown table 'nope'"):
        catalog.snapshot(["orders", "nope"])
    with pytest.raises(CatalogError, match="unknown table 'nope'"):
        catalog.active_layout("nope", "")
    for call in (catalog.version, catalog.activate, catalog.mark_purged,
                 lambda v: catalog.set_cuts(v, []), lambda v: catalog.set_blocks(v, []),
                 lambda v: catalog.fail(v, "x"), lambda v: catalog.set_plan(v, {})):
        with pytest.raises(CatalogError, match="unknown layout version 999"):
            call(999)


# ------------------------------------------------------------------ versions


def test_begin_version_is_idempotent_by_run_id(catalog):
    first = catalog.begin_version("orders", "1995-01", "greedy", {"min_rows": 5}, "run-1", 4)
    again = catalog.begin_version("orders", "1995-01", "greedy", {"min_rows": 5}, "run-1", 4)

    assert first[1] == range(0, 4)
    assert again == first
    [info] = catalog.versions("orders")
    assert (info.version_id, info.state, info.run_id, info.n_blocks, info.block_ids) == (
        first[0], "building", "run-1", 4, range(0, 4))
    assert info.params == {"min_rows": 5}
    assert info.created_at == T0

    catalog.fail(first[0], "executor lost")
    assert catalog.version(first[0]).reason == "executor lost"
    assert catalog.begin_version("orders", "1995-01", "greedy", {}, "run-1", 4) == first
    retried = catalog.version(first[0])
    assert (retried.state, retried.reason) == ("building", None)

    catalog.activate(first[0])
    assert catalog.begin_version("orders", "1995-01", "greedy", {}, "run-1", 4) == first
    assert catalog.version(first[0]).state == "active"
    assert len(catalog.versions("orders")) == 1


def test_begin_version_retry_must_keep_block_count_and_run_ids_are_not_reused(catalog):
    old = active_version(catalog, "", "run-1")
    with pytest.raises(CatalogError, match="reserved 1 block ids; a retry cannot ask for 2"):
        catalog.begin_version("orders", "", "greedy", {}, "run-1", 2)
    active_version(catalog, "", "run-2")
    assert catalog.version(old).state == "retired"
    with pytest.raises(CatalogError, match="is retired; start a new run"):
        catalog.begin_version("orders", "", "greedy", {}, "run-1", 1)


def test_block_ids_never_collide_across_versions_and_partitions(catalog):
    assert catalog.begin_version("orders", "1995-01", "greedy", {}, "run-1", 3)[1] == range(0, 3)
    assert catalog.begin_version("orders", "1995-02", "greedy", {}, "run-1", 2)[1] == range(3, 5)
    assert catalog.begin_version("orders", "1995-01", "greedy", {}, "run-2", 4)[1] == range(5, 9)
    assert catalog.begin_version("orders", "1995-03", "greedy", {}, "run-1", 0)[1] == range(9, 9)
    assert catalog.begin_version("orders", "1995-03", "greedy", {}, "run-2", 1)[1] == range(9, 10)
    # Each table counts on its own.
    assert catalog.begin_version("region", "", "greedy", {}, "run-1", 2)[1] == range(0, 2)
    # Re-registering a table keeps its counter.
    catalog.register_table("orders", "/warehouse/orders2", "o_orderdate")
    assert catalog.begin_version("orders", "1995-04", "greedy", {}, "run-1", 1)[1] == range(10, 11)


def test_set_blocks_checks_block_ids_and_state(catalog):
    version_id, ids = catalog.begin_version("orders", "", "greedy", {}, "run-1", 2)
    assert ids == range(0, 2)
    with pytest.raises(CatalogError, match=r"block ids \[2\] are outside version"):
        catalog.set_blocks(version_id, [block(0), block(2)])
    with pytest.raises(CatalogError, match=r"duplicate block ids: \[1\]"):
        catalog.set_blocks(version_id, [block(1), block(1)])
    catalog.set_blocks(version_id, [block(0), block(1)])
    catalog.activate(version_id)
    with pytest.raises(CatalogError, match="cannot set its blocks: version .* is active"):
        catalog.set_blocks(version_id, [block(0)])
    with pytest.raises(CatalogError, match="cannot set its cuts: version .* is active"):
        catalog.set_cuts(version_id, [])


def test_cuts_and_blocks_round_trip_exactly(catalog):
    keys = BitMap64([3, 7, 2**40])
    cuts = [
        CutRecord(0, '{"cmp":["o_orderdate","date"],"op":"<","value":{"date":"1995-03-15"}}',
                  "o_orderdate < DATE '1995-03-15'", "simple"),
        CutRecord(1, '{"induced":[],"negated":false,"source":{"const":true}}',
                  "o_custkey IN (SELECT ...)", "join_induced",
                  path=("region.r_regionkey->nation.n_regionkey",
                        "nation.n_nationkey->customer.c_nationkey"),
                  literal_keys=keys.serialize(),
                  source_versions=(("region", 4), ("nation", 9))),
        CutRecord(2, '{"opaque":"f(x)"}', "f(x)", "opaque"),
    ]
    stats = {
        "o_orderdate": {"min": {"date": "1992-01-01"}, "max": {"date": "1998-08-02"},
                        "null_count": 0},
        "o_totalprice": {"min": {"decimal": "857.71"}, "max": {"decimal": "555285.16"},
                         "null_count": 2},
        "o_comment": {"min": "about", "max": "zebra", "null_count": 0},
    }
    big = 2**70 + 2**64 + 5
    blocks = [
        BlockRecord(1, 1500, 65536, "/warehouse/orders/b1", stats, big, 2**65),
        BlockRecord(0, 10, 300, "/warehouse/orders/b0", {}, 0, 0),
    ]
    version_id, _ = catalog.begin_version("orders", "", "greedy", {"k": [1, 2]}, "run-1", 2)
    catalog.set_cuts(version_id, [CutRecord(0, "{}", "old", "simple")])
    catalog.set_cuts(version_id, cuts)
    catalog.set_blocks(version_id, blocks)
    catalog.activate(version_id)

    layout = catalog.active_layout("orders", "")
    assert layout.cuts == tuple(cuts)
    assert layout.blocks == (blocks[1], blocks[0])  # ordered by block id
    assert layout.blocks[1].union_bits == 1199038364791120855045  # 2**70 + 2**64 + 5
    assert layout.blocks[1].stats["o_totalprice"]["max"] == {"decimal": "555285.16"}
    assert layout.cuts[1].keys() == BitMap64([3, 7, 1099511627776])
    assert layout.cuts[0].keys() is None
    assert layout.version.params == {"k": [1, 2]}
    assert catalog.block_paths(version_id) == ["/warehouse/orders/b0", "/warehouse/orders/b1"]


def test_activate_retires_the_previous_version(catalog):
    v1 = active_version(catalog, "1995-01", "run-1")  # created T0, activated T0+1h
    v2, _ = catalog.begin_version("orders", "1995-01", "greedy", {}, "run-2", 1)  # T0+2h
    assert catalog.version(v1).state == "active"
    catalog.activate(v2)  # T0+3h

    old, new = catalog.version(v1), catalog.version(v2)
    assert (old.state, old.activated_at, old.retired_at) == (
        "retired", dt.datetime(2024, 3, 1, 13, tzinfo=UTC), dt.datetime(2024, 3, 1, 15, tzinfo=UTC))
    assert (new.state, new.created_at, new.activated_at, new.retired_at) == (
        "active", dt.datetime(2024, 3, 1, 14, tzinfo=UTC), dt.datetime(2024, 3, 1, 15, tzinfo=UTC),
        None)

    catalog.activate(v2)  # already active: nothing changes
    assert catalog.version(v2).activated_at == dt.datetime(2024, 3, 1, 15, tzinfo=UTC)
    assert [v.state for v in catalog.versions("orders", "1995-01")] == ["retired", "active"]
    assert catalog.partitions("orders") == ["1995-01"]


def test_activating_a_failed_or_retired_version_keeps_the_previous_one_active(catalog):
    v1 = active_version(catalog, "", "run-1")
    v2, _ = catalog.begin_version("orders", "", "greedy", {}, "run-2", 1)
    catalog.fail(v2, "disk full")
    with pytest.raises(CatalogError, match="cannot activate it: version .* is failed"):
        catalog.activate(v2)
    assert catalog.active_layout("orders", "").version.version_id == v1
    assert [v.state for v in catalog.versions("orders")] == ["active", "failed"]

    v3 = active_version(catalog, "", "run-3")
    with pytest.raises(CatalogError, match="cannot activate it: version .* is retired"):
        catalog.activate(v1)
    assert catalog.active_layout("orders", "").version.version_id == v3


def test_fail_leaves_the_active_layout_serving(catalog):
    v1 = active_version(catalog, "", "run-1", blocks=2)
    v2, ids = catalog.begin_version("orders", "", "greedy", {}, "run-2", 3)
    catalog.set_blocks(v2, [block(b) for b in ids])
    catalog.fail(v2, "optimizer timed out")

    layout = catalog.active_layout("orders", "")
    assert layout.version.version_id == v1
    assert [b.block_id for b in layout.blocks] == [0, 1]
    failed = catalog.version(v2)
    assert (failed.state, failed.reason) == ("failed", "optimizer timed out")
    with pytest.raises(CatalogError, match="cannot fail it: version .* is active"):
        catalog.fail(v1, "no")


def test_active_layout_is_none_without_an_active_version(catalog):
    assert catalog.active_layout("orders", "1995-01") is None
    catalog.begin_version("orders", "1995-01", "greedy", {}, "run-1", 1)
    assert catalog.active_layout("orders", "1995-01") is None
    assert catalog.partitions("orders") == []


def test_snapshot_holds_every_active_layout(catalog):
    v_b = active_version(catalog, "1995-02", "run-1")
    v_a = active_version(catalog, "1995-01", "run-1")
    catalog.begin_version("orders", "1995-03", "greedy", {}, "run-1", 1)  # building: not shown
    r, ids = catalog.begin_version("region", "", "greedy", {}, "run-1", 1)
    catalog.set_cuts(r, [CutRecord(0, "{}", "r_name = 'ASIA'", "simple")])
    catalog.activate(r)

    snap = catalog.snapshot()
    assert sorted(snap.tables) == ["orders", "region"]
    assert sorted(snap.layouts) == [("orders", "1995-01"), ("orders", "1995-02"), ("region", "")]
    assert [l.version.version_id for l in snap.layouts_of("orders")] == [v_a, v_b]
    assert [l.version.partition for l in snap.layouts_of("orders")] == ["1995-01", "1995-02"]
    assert snap.layouts[("region", "")] == ActiveLayout(
        catalog.version(r), (CutRecord(0, "{}", "r_name = 'ASIA'", "simple"),), ())
    assert [b.block_id for b in snap.layouts[("orders", "1995-01")].blocks] == [1]

    only_region = catalog.snapshot(["region"])
    assert list(only_region.tables) == ["region"]
    assert list(only_region.layouts) == [("region", "")]
    assert only_region.layouts_of("orders") == []


def test_retired_before_and_mark_purged(catalog):
    v1 = active_version(catalog, "", "run-1")  # activated T0+1h
    active_version(catalog, "", "run-2")  # created T0+2h, retires v1 at T0+3h
    assert catalog.retired_before(dt.datetime(2024, 3, 1, 15, tzinfo=UTC)) == []
    [due] = catalog.retired_before(dt.datetime(2024, 3, 1, 15, 0, 1, tzinfo=UTC))
    assert (due.version_id, due.retired_at) == (v1, dt.datetime(2024, 3, 1, 15, tzinfo=UTC))
    # A naive cutoff is read as UTC.
    assert [v.version_id for v in catalog.retired_before(dt.datetime(2024, 3, 2))] == [v1]

    catalog.mark_purged(v1)
    catalog.mark_purged(v1)  # idempotent
    assert catalog.version(v1).state == "purged"
    assert catalog.retired_before(dt.datetime(2024, 3, 2, tzinfo=UTC)) == []
    with pytest.raises(CatalogError, match="cannot purge it: version .* is active"):
        catalog.mark_purged(catalog.active_layout("orders", "").version.version_id)


def test_reopening_the_catalog_sees_the_data(catalog_url):
    with Catalog(catalog_url) as first:
        first.register_table("orders", "/warehouse/orders")
        version_id, _ = first.begin_version("orders", "", "greedy", {}, "run-1", 2)
        first.set_blocks(version_id, [block(0, union_bits=2**80)])
        first.activate(version_id)

    with Catalog(catalog_url) as again:
        assert again.tables() == [TableInfo("orders", "/warehouse/orders", None, {})]
        layout = again.active_layout("orders", "")
        assert layout.version.version_id == version_id
        assert layout.blocks == (block(0, union_bits=2**80),)
        # The block-id counter survived too.
        assert again.begin_version("orders", "", "greedy", {}, "run-2", 1)[1] == range(2, 3)


# ------------------------------------------------------ trees, plans, lineage


def three_node_tree(tree: int = 0) -> list[TreeNodeRecord]:
    """Cut 0 splits 30 rows: bit 1 -> node 1 (leaf 0), bit 0 -> node 2 (leaf 1)."""
    return [
        TreeNodeRecord(tree, 2, rows=20, leaf_id=1),
        TreeNodeRecord(tree, 0, rows=30, cut=0, left=1, right=2),
        TreeNodeRecord(tree, 1, rows=10, leaf_id=0),
    ]


def test_tree_node_record_checks_internal_nodes_and_leaves():
    TreeNodeRecord(0, 0, rows=5, cut=3, left=1, right=2)
    TreeNodeRecord(1, 7, rows=0, leaf_id=4)
    with pytest.raises(ValueError, match="an internal node needs cut, left and right"):
        TreeNodeRecord(0, 0, rows=5, cut=3, left=1)
    with pytest.raises(ValueError, match="an internal node needs cut, left and right"):
        TreeNodeRecord(0, 0, rows=5)
    with pytest.raises(ValueError, match="a leaf .* has no cut, left or right"):
        TreeNodeRecord(0, 0, rows=5, cut=1, leaf_id=0)
    with pytest.raises(ValueError, match="must be two other nodes"):
        TreeNodeRecord(0, 0, rows=5, cut=1, left=1, right=1)
    with pytest.raises(ValueError, match="must be two other nodes"):
        TreeNodeRecord(0, 0, rows=5, cut=1, left=0, right=1)
    with pytest.raises(ValueError, match="rows, cut must be >= 0"):
        TreeNodeRecord(0, 0, rows=-1, cut=-2, left=1, right=2)


def test_leaf_of_follows_the_bits_of_the_cuts():
    nodes = three_node_tree() + [TreeNodeRecord(1, 0, rows=30, cut=2, left=1, right=2),
                                 TreeNodeRecord(1, 1, rows=3, leaf_id=7),
                                 TreeNodeRecord(1, 2, rows=27, leaf_id=8)]
    assert leaf_of(nodes, 0, "1") == 0
    assert leaf_of(nodes, 0, "0") == 1
    assert leaf_of(nodes, 1, "001") == 7  # tree 1 routes on cut 2
    assert leaf_of(nodes, 1, "110") == 8
    with pytest.raises(ValueError, match="only 2 bits"):
        leaf_of(nodes, 1, "11")
    with pytest.raises(ValueError, match="strings of '0' and '1'"):
        leaf_of(nodes, 0, "x")
    with pytest.raises(ValueError, match="tree 5 has 0 roots"):
        leaf_of(nodes, 5, "1")


def test_trees_round_trip_sorted_and_are_replaced_by_a_retry(catalog):
    version_id, _ = catalog.begin_version("orders", "", "qdtree", {}, "run-1", 2)
    assert catalog.trees(version_id) == ()
    catalog.set_trees(version_id, [TreeNodeRecord(0, 0, rows=1, leaf_id=0)])  # an earlier attempt
    pando = three_node_tree(1) + three_node_tree(0)
    catalog.set_trees(version_id, pando)

    assert catalog.trees(version_id) == tuple(sorted(pando, key=lambda n: (n.tree, n.node_id)))
    assert catalog.trees(version_id)[:3] == (
        TreeNodeRecord(0, 0, rows=30, cut=0, left=1, right=2),
        TreeNodeRecord(0, 1, rows=10, leaf_id=0),
        TreeNodeRecord(0, 2, rows=20, leaf_id=1),
    )
    catalog.set_trees(version_id, [])
    assert catalog.trees(version_id) == ()


def test_set_trees_refuses_what_is_not_a_tree(catalog):
    version_id, _ = catalog.begin_version("orders", "", "qdtree", {}, "run-1", 2)
    root, leaf_a, leaf_b = (TreeNodeRecord(0, 0, rows=30, cut=0, left=1, right=2),
                            TreeNodeRecord(0, 1, rows=10, leaf_id=0),
                            TreeNodeRecord(0, 2, rows=20, leaf_id=1))
    dangling = TreeNodeRecord(0, 0, rows=30, cut=0, left=1, right=5)
    with pytest.raises(CatalogError, match=r"node 0 has children \[5\] that are not nodes"):
        catalog.set_trees(version_id, [dangling, leaf_a, leaf_b])
    with pytest.raises(CatalogError, match=r"tree 0 must have exactly one root .* not 2: \[0, 3\]"):
        catalog.set_trees(version_id, [root, leaf_a, leaf_b, TreeNodeRecord(0, 3, rows=1, leaf_id=2)])
    with pytest.raises(CatalogError, match=r"tree 0 must have exactly one root .* not 0"):
        catalog.set_trees(version_id, [TreeNodeRecord(0, 0, rows=1, cut=0, left=1, right=2),
                                       TreeNodeRecord(0, 1, rows=1, cut=0, left=0, right=2), leaf_b])
    with pytest.raises(CatalogError, match="node 2 has two parents"):
        catalog.set_trees(version_id, [TreeNodeRecord(0, 0, rows=1, cut=0, left=1, right=2),
                                       TreeNodeRecord(0, 1, rows=1, cut=1, left=2, right=3),
                                       leaf_b, TreeNodeRecord(0, 3, rows=1, leaf_id=3)])
    with pytest.raises(CatalogError, match="duplicate node id 1"):
        catalog.set_trees(version_id, [root, leaf_a, leaf_a, leaf_b])
    with pytest.raises(CatalogError, match="duplicate leaf ids"):
        catalog.set_trees(version_id, [root, leaf_a, TreeNodeRecord(0, 2, rows=20, leaf_id=0)])
    with pytest.raises(CatalogError, match=r"trees must be numbered 0..0, not \[1\]"):
        catalog.set_trees(version_id, three_node_tree(1))
    assert catalog.trees(version_id) == ()  # nothing refused was stored

    catalog.set_trees(version_id, [root, leaf_a, leaf_b])
    catalog.activate(version_id)
    with pytest.raises(CatalogError, match="cannot set its trees: version .* is active"):
        catalog.set_trees(version_id, [root, leaf_a, leaf_b])
    with pytest.raises(CatalogError, match="cannot set its plan: version .* is active"):
        catalog.set_plan(version_id, {})
    for call in (catalog.trees, catalog.plan, lambda v: catalog.set_trees(v, []),
                 lambda v: catalog.set_plan(v, {}), lambda v: catalog.record_purge(v, "/x", 1)):
        with pytest.raises(CatalogError, match="unknown layout version 999"):
            call(999)


def test_block_leaf_sets_round_trip(catalog):
    version_id, ids = catalog.begin_version("orders", "", "pando", {}, "run-1", 4)
    blocks = [BlockRecord(ids[0], 10, 100, "/w/b0", {}, 1, 0, leaves=((0, 2), (5,))),
              BlockRecord(ids[1], 10, 100, "/w/b1", {}, 1, 0, leaves=((1,), (2**40, 3, 5))),
              BlockRecord(ids[2], 10, 100, "/w/b2", {}, 1, 0, leaves=((4,), ())),  # tree 1 unknown
              BlockRecord(ids[3], 10, 100, "/w/b3", {}, 1, 0)]  # a layout without trees
    catalog.set_blocks(version_id, blocks)
    catalog.activate(version_id)
    assert catalog.active_layout("orders", "").blocks == tuple(blocks)
    snapshot_blocks = catalog.snapshot().layouts[("orders", "")].blocks
    assert [b.leaves for b in snapshot_blocks] == [((0, 2), (5,)), ((1,), (3, 5, 2**40)), ((4,), ()), ()]


def test_block_leaves_are_normalized_to_sorted_distinct_sets(catalog):
    def leaves(value):
        return BlockRecord(0, 1, 1, "/w", {}, 0, 0, leaves=value).leaves

    assert leaves((3,)) == ((3,),)  # the single-leaf lineage of qd-tree and MTO callers
    assert leaves((3, 5)) == ((3,), (5,))
    assert leaves([[7, 2, 7, 0], 4, (), {9}]) == ((0, 2, 7), (4,), (), (9,))
    assert leaves(()) == ()
    for bad in [(-1,), ((0, -3),), ([1], [2, -1])]:
        with pytest.raises(ValueError, match="leaf ids must be >= 0"):
            leaves(bad)
    with pytest.raises(TypeError):
        leaves((("a",),))
    # Written unsorted with duplicates, read back normalized (and equal to what was written).
    version_id, (block_id,) = catalog.begin_version("orders", "", "pando", {}, "run-1", 1)
    written = BlockRecord(block_id, 10, 100, "/w/b", {}, 1, 0, leaves=([9, 1, 9], 4))
    catalog.set_blocks(version_id, [written])
    catalog.activate(version_id)
    (read,) = catalog.active_layout("orders", "").blocks
    assert read == written and read.leaves == ((1, 9), (4,))


def test_blocks_written_with_one_leaf_per_tree_are_read_as_one_leaf_sets(catalog):
    """Older code stored `leaves_json` as a flat list of leaf ids, one per tree."""
    version_id, ids = catalog.begin_version("orders", "", "qdtree", {}, "run-1", 3)
    catalog.set_blocks(version_id, [BlockRecord(b, 10, 100, f"/w/b{b}", {}, 1, 0) for b in ids])
    catalog.activate(version_id)
    engine = sa.create_engine(catalog.url)
    with engine.begin() as conn:
        for block_id, old_json in zip(ids, ["[3, 5]", "[0]", None]):
            conn.execute(sa.text("UPDATE layout_blocks SET leaves_json = :j WHERE block_id = :b"),
                         {"j": old_json, "b": block_id})
    engine.dispose()
    layout = catalog.active_layout("orders", "")
    assert [b.leaves for b in layout.blocks] == [((3,), (5,)), ((0,),), ()]
    assert layout.blocks == catalog.snapshot().layouts[("orders", "")].blocks


def test_plan_round_trips_and_is_replaced(catalog):
    version_id, _ = catalog.begin_version("orders", "", "qdtree", {}, "run-1", 1)
    assert catalog.plan(version_id) is None
    catalog.set_plan(version_id, {"old": True})
    plan = {"kind": "tree", "cuts": 3, "leaf_n_blocks": list(range(50_000)),  # far beyond 64 KiB
            "nested": {"sort_columns": ["o_orderdate"], "sample_fraction": 0.25}}
    catalog.set_plan(version_id, plan)
    assert catalog.plan(version_id) == plan
    with pytest.raises(CatalogError, match="a layout plan is a JSON object, not list"):
        catalog.set_plan(version_id, [1, 2])


def test_activate_records_the_version_it_replaces_and_fail_its_time(catalog):
    v1 = active_version(catalog, "1995-01", "run-1")  # created T0, activated T0+1h
    v2 = active_version(catalog, "1995-01", "run-2")  # created T0+2h, activated T0+3h
    other = active_version(catalog, "1995-02", "run-1")
    assert [catalog.version(v).replaces for v in (v1, v2, other)] == [None, v1, None]
    assert catalog.version(v1).retired_at == catalog.version(v2).activated_at

    v3, _ = catalog.begin_version("orders", "1995-01", "greedy", {}, "run-3", 1)  # T0+6h
    catalog.fail(v3, "disk full")  # T0+7h
    failed = catalog.version(v3)
    assert (failed.replaces, failed.failed_at) == (v2, T0 + dt.timedelta(hours=7))
    catalog.begin_version("orders", "1995-01", "greedy", {}, "run-3", 1)  # a retry resumes it
    assert catalog.version(v3).failed_at is None
    catalog.activate(v3)
    assert catalog.version(v3).replaces == v2


def test_snapshot_and_active_layout_carry_trees(catalog):
    tree_version, _ = catalog.begin_version("orders", "1995-01", "qdtree", {}, "run-1", 1)
    catalog.set_trees(tree_version, three_node_tree(0) + three_node_tree(1))
    catalog.activate(tree_version)
    plain = active_version(catalog, "1995-02", "run-1")
    building, _ = catalog.begin_version("orders", "1995-03", "qdtree", {}, "run-1", 1)
    catalog.set_trees(building, three_node_tree())

    expected = catalog.trees(tree_version)
    assert len(expected) == 6
    snap = catalog.snapshot()
    assert snap.layouts[("orders", "1995-01")].trees == expected
    assert snap.layouts[("orders", "1995-02")].trees == ()
    assert catalog.active_layout("orders", "1995-01").trees == expected
    assert catalog.active_layout("orders", "1995-02").version.version_id == plain
    assert ("orders", "1995-03") not in snap.layouts


def test_a_record_is_routed_through_the_stored_tree_to_its_block(catalog):
    """Cut 0, then cut 2 on the left: '1?1' -> leaf 10, '1?0' -> leaf 11, '0??' -> leaf 12."""
    nodes = [TreeNodeRecord(0, 0, rows=100, cut=0, left=1, right=2),
             TreeNodeRecord(0, 1, rows=60, cut=2, left=3, right=4),
             TreeNodeRecord(0, 2, rows=40, leaf_id=12),
             TreeNodeRecord(0, 3, rows=25, leaf_id=10),
             TreeNodeRecord(0, 4, rows=35, leaf_id=11)]
    version_id, ids = catalog.begin_version("orders", "", "qdtree", {}, "run-1", 4)
    leaves = {ids[0]: 12, ids[1]: 10, ids[2]: 11, ids[3]: 12}  # leaf 12 cut into two blocks
    catalog.set_trees(version_id, reversed(nodes))
    catalog.set_blocks(version_id, [BlockRecord(b, 10, 100, f"/w/b{b}", {}, 1, 0, leaves=(leaf,))
                                    for b, leaf in leaves.items()])
    catalog.activate(version_id)

    layout = catalog.active_layout("orders", "")
    tree = catalog.trees(version_id)

    def blocks_of(bits: str) -> list[int]:
        leaf = leaf_of(tree, 0, bits)
        return [b.block_id for b in layout.blocks if b.leaves[0] == (leaf,)]

    assert blocks_of("101") == [ids[1]]
    assert blocks_of("111") == [ids[1]]
    assert blocks_of("100") == [ids[2]]
    assert blocks_of("011") == [ids[0], ids[3]]


def test_record_purge_and_purges(catalog):
    v1 = active_version(catalog, "", "run-1")
    active_version(catalog, "", "run-2")
    assert catalog.purges() == []
    at = dt.datetime(2024, 3, 5, tzinfo=UTC)
    first = catalog.record_purge(v1, "/w/orders/block_id=0", 2**40, purged_at=at)
    catalog.record_purge(None, "/w/_runs/orders/_all/run-0", 12)  # the catalog's clock: T0+4h
    assert first == PurgeRecord(v1, "/w/orders/block_id=0", 2**40, at)
    assert catalog.purges() == [first, PurgeRecord(None, "/w/_runs/orders/_all/run-0", 12,
                                                   T0 + dt.timedelta(hours=4))]


# ------------------------------------------------------------------ migration

# The tables as the first release created them, before trees, plans, lineage and purges.
FIRST_RELEASE_DDL = """
CREATE TABLE layout_tables (
    name VARCHAR(255) PRIMARY KEY, location TEXT NOT NULL, partition_column VARCHAR(255),
    schema_json TEXT NOT NULL, next_block_id BIGINT NOT NULL);
CREATE TABLE layout_versions (
    version_id {id} PRIMARY KEY,
    table_name VARCHAR(255) NOT NULL REFERENCES layout_tables (name),
    partition_name VARCHAR(1024) NOT NULL, state VARCHAR(16) NOT NULL,
    optimizer VARCHAR(255) NOT NULL, params_json TEXT NOT NULL, run_id VARCHAR(255) NOT NULL,
    n_blocks BIGINT NOT NULL, first_block_id BIGINT NOT NULL, routing_index_json TEXT,
    reason TEXT, created_at {ts} NOT NULL, activated_at {ts}, retired_at {ts},
    CONSTRAINT layout_versions_run_uq UNIQUE (table_name, partition_name, run_id));
CREATE UNIQUE INDEX layout_versions_one_active ON layout_versions (table_name, partition_name)
    WHERE state = 'active';
CREATE TABLE layout_cuts (
    version_id {fk_id} NOT NULL REFERENCES layout_versions (version_id) ON DELETE CASCADE,
    position INTEGER NOT NULL, predicate TEXT NOT NULL, cut_sql TEXT NOT NULL,
    kind VARCHAR(32) NOT NULL, path_json TEXT NOT NULL, literal_keys {blob},
    source_versions_json TEXT NOT NULL, PRIMARY KEY (version_id, position));
CREATE TABLE layout_blocks (
    version_id {fk_id} NOT NULL REFERENCES layout_versions (version_id) ON DELETE CASCADE,
    block_id BIGINT NOT NULL, row_count BIGINT NOT NULL, size_bytes BIGINT NOT NULL,
    path TEXT NOT NULL, stats_json TEXT NOT NULL, union_bits TEXT NOT NULL, all_bits TEXT NOT NULL,
    PRIMARY KEY (version_id, block_id));
INSERT INTO layout_tables VALUES ('orders', '/warehouse/orders', NULL, '{{}}', 2);
INSERT INTO layout_versions (table_name, partition_name, state, optimizer, params_json, run_id,
                             n_blocks, first_block_id, created_at, activated_at)
    VALUES ('orders', '', 'active', 'greedy', '{{}}', 'run-1', 2, 0, {t0}, {t0});
INSERT INTO layout_blocks SELECT version_id, 1, 10, 1000, '/warehouse/orders/block_id=1', '{{}}', 'a', '0'
    FROM layout_versions;
"""

DIALECT_TYPES = {
    "sqlite": {"id": "INTEGER", "fk_id": "INTEGER", "ts": "DATETIME", "blob": "BLOB",
               "t0": "'2024-03-01 12:00:00.000000'"},
    "postgresql": {"id": "BIGSERIAL", "fk_id": "BIGINT", "ts": "TIMESTAMP WITH TIME ZONE",
                   "blob": "BYTEA", "t0": "'2024-03-01 12:00:00+00'"},
}


def make_first_release_catalog(url: str) -> None:
    engine = sa.create_engine(url)
    ddl = FIRST_RELEASE_DDL.format(**DIALECT_TYPES[engine.dialect.name])
    with engine.begin() as conn:
        for statement in ddl.split(";"):
            if statement.strip():
                conn.exec_driver_sql(statement)
    engine.dispose()


def test_a_first_release_catalog_is_migrated_on_open(catalog_url):
    make_first_release_catalog(catalog_url)

    with Catalog(catalog_url, clock=FakeClock()) as cat:
        old = cat.active_layout("orders", "")
        assert old.version.replaces is None and old.version.failed_at is None
        assert old.blocks == (BlockRecord(1, 10, 1000, "/warehouse/orders/block_id=1", {}, 10, 0),)
        assert old.trees == ()
        assert cat.plan(old.version.version_id) is None

        new, ids = cat.begin_version("orders", "", "qdtree", {}, "run-2", 2)
        assert ids == range(2, 4)  # the old block-id counter holds
        cat.set_trees(new, three_node_tree())
        cat.set_blocks(new, [BlockRecord(ids[0], 5, 50, "/w/b2", {}, 1, 1, leaves=(0,)),
                             BlockRecord(ids[1], 5, 50, "/w/b3", {}, 1, 1, leaves=((1,), (2,)), cells=((1, 2),))])
        cat.set_plan(new, {"kind": "tree"})
        cat.activate(new)
        cat.record_purge(old.version.version_id, "/warehouse/orders/block_id=1", 1000)
        assert cat.version(new).replaces == old.version.version_id
        assert cat.active_layout("orders", "").trees == tuple(sorted(
            three_node_tree(), key=lambda n: n.node_id))

    with Catalog(catalog_url) as again:  # a second open finds nothing left to add
        first, second = again.active_layout("orders", "").blocks
        assert first.leaves == ((0,),) and first.cells == ()
        assert second.cells == ((1, 2),)  # a column the first release did not have
        assert len(again.purges()) == 1
    engine = sa.create_engine(catalog_url)
    columns = {c["name"] for c in sa.inspect(engine).get_columns("layout_versions")}
    engine.dispose()
    assert {"replaces_version_id", "failed_at"} <= columns


# ---------------------------------------------------------------- concurrency


def run_in_threads(n: int, work) -> list:
    """Run work(i) in n threads started together; re-raise the first error."""
    barrier = threading.Barrier(n)
    results: list = [None] * n
    errors: list[BaseException] = []

    def target(i: int) -> None:
        try:
            barrier.wait()
            results[i] = work(i)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    if errors:
        raise errors[0]
    return results


@pytest.mark.timeout(180)
def test_concurrent_begin_version_reserves_disjoint_block_ids(catalog_url):
    with Catalog(catalog_url) as cat:
        cat.register_table("orders", "/warehouse/orders")

    def work(i: int) -> list[range]:
        with Catalog(catalog_url) as cat:  # one catalog each, as separate workers would have
            return [cat.begin_version("orders", f"p{i % 2}", "greedy", {}, f"run-{i}-{j}", 50)[1]
                    for j in range(3)]

    ranges = [r for per_thread in run_in_threads(4, work) for r in per_thread]
    ids = sorted(b for r in ranges for b in r)
    assert ids == list(range(0, 600))  # 12 versions x 50 ids, no id twice, no gap
    assert all(len(r) == 50 and r.step == 1 for r in ranges)


@pytest.mark.timeout(180)
def test_concurrent_retries_of_one_run_share_one_version(catalog_url):
    with Catalog(catalog_url) as cat:
        cat.register_table("orders", "/warehouse/orders")

    def work(_: int):
        with Catalog(catalog_url) as cat:
            return cat.begin_version("orders", "", "greedy", {}, "run-1", 5)

    results = run_in_threads(4, work)
    assert [r[1] for r in results] == [range(0, 5)] * 4
    assert len({r[0] for r in results}) == 1
    with Catalog(catalog_url) as cat:
        assert len(cat.versions("orders")) == 1


@pytest.mark.timeout(180)
def test_workers_opening_a_first_release_catalog_together_migrate_it_once(catalog_url):
    make_first_release_catalog(catalog_url)

    def work(_: int) -> int:
        with Catalog(catalog_url) as cat:
            return len(cat.versions("orders"))

    for _ in range(3):  # the first round migrates, later ones open an up-to-date catalog
        assert run_in_threads(6, work) == [1] * 6
    with Catalog(catalog_url) as cat:
        assert cat.active_layout("orders", "").trees == ()


# ------------------------------------------------------------------- cut repair


def test_activating_a_change_repairs_other_tables_cuts_in_the_same_transaction(catalog):
    from layout_core.catalog import CutUpdate

    region_v1, _ = catalog.begin_version("region", "", "greedy", {}, "r1", 0)
    catalog.activate(region_v1)
    active_version(catalog, "2024-01", "o1")
    old_keys = BitMap64([1, 2]).serialize()
    cut = CutRecord(0, "pred", "o_custkey IN (SELECT ...)", "join_induced", ("orders.o_custkey->region.r_x",),
                    old_keys, (("region", region_v1),))
    building, ids = catalog.begin_version("orders", "2024-03", "greedy", {}, "o3", 1)
    catalog.set_cuts(building, [cut])  # a version still being built: never repaired
    # orders' active version gets the cut through region by hand (set before activation)
    fresh, fresh_ids = catalog.begin_version("orders", "2024-01", "greedy", {}, "o1b", 1)
    catalog.set_cuts(fresh, [cut])
    catalog.set_blocks(fresh, [block(b) for b in fresh_ids])
    catalog.activate(fresh)  # retires `orders`

    region_v2, _ = catalog.begin_version("region", "", "greedy", {"changes_from": region_v1}, "r2", 0)
    new_keys = BitMap64([1, 2, 7]).serialize()
    updates = [CutUpdate(fresh, 0, (("region", region_v1),), new_keys, (("region", region_v2),)),
               CutUpdate(building, 0, (("region", region_v1),), new_keys, (("region", region_v2),)),
               CutUpdate(fresh, 0, (("region", 999),), b"", (("region", region_v2),))]  # names other sources
    applied = catalog.activate(region_v2, replaces=region_v1, cut_updates=updates)

    assert applied == updates[:1]
    (repaired,) = catalog.active_layout("orders", "2024-01").cuts
    assert repaired.source_versions == (("region", region_v2),)
    assert set(repaired.keys()) == {1, 2, 7}
    with catalog._read() as conn:  # the building version's cut is as it was
        from layout_core.catalog.db_tables import cuts_t

        row = conn.execute(sa.select(cuts_t.c.source_versions_json).where(cuts_t.c.version_id == building)).one()
    assert json.loads(row.source_versions_json) == [["region", region_v1]]


def test_a_change_staged_on_a_version_that_no_longer_serves_is_refused(catalog):
    base = active_version(catalog, "2024-01", "b")
    first, ids1 = catalog.begin_version("orders", "2024-01", "greedy", {}, "change-1", 1)
    second, ids2 = catalog.begin_version("orders", "2024-01", "greedy", {}, "change-2", 1)
    catalog.set_blocks(first, [block(b) for b in ids1])
    catalog.set_blocks(second, [block(b) for b in ids2])
    catalog.activate(first, replaces=base)
    with pytest.raises(CatalogError, match=f"built from version {base}"):
        catalog.activate(second, replaces=base)
    assert catalog.active_layout("orders", "2024-01").version.version_id == first
