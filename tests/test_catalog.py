"""The layout catalog on SQLite and PostgreSQL (see the catalog_url fixture)."""

from __future__ import annotations

import datetime as dt
import threading

import pytest
from pyroaring import BitMap64

from layout_core.catalog import (
    ActiveLayout,
    BlockRecord,
    Catalog,
    CatalogError,
    CutRecord,
    TableInfo,
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
                 lambda v: catalog.fail(v, "x"), lambda v: catalog.set_routing_index(v, {})):
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
    with pytest.raises(CatalogError, match="cannot set its routing index"):
        catalog.set_routing_index(version_id, {})


def test_cuts_blocks_and_routing_index_round_trip_exactly(catalog):
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
    catalog.set_routing_index(version_id, {"o_orderdate": [[0, 1]], "depth": 2})
    catalog.activate(version_id)

    layout = catalog.active_layout("orders", "")
    assert layout.cuts == tuple(cuts)
    assert layout.blocks == (blocks[1], blocks[0])  # ordered by block id
    assert layout.blocks[1].union_bits == 1199038364791120855045  # 2**70 + 2**64 + 5
    assert layout.blocks[1].stats["o_totalprice"]["max"] == {"decimal": "555285.16"}
    assert layout.cuts[1].keys() == BitMap64([3, 7, 1099511627776])
    assert layout.cuts[0].keys() is None
    assert layout.version.routing_index == {"o_orderdate": [[0, 1]], "depth": 2}
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
