"""A join-induced cut stays in use while its dimension tables hold the same rows."""

from __future__ import annotations

import pytest

from layout_core.base.schema import load_schema
from layout_core.catalog import BlockRecord, Catalog, CutRecord
from layout_core.predicates import Column, Compare, Hop, JoinInduced, dumps, to_sql
from layout_core.skipping.router import RoutingIndex, route_query

SCHEMA = load_schema("tpch")
URGENT = JoinInduced((Hop("orders", "o_orderkey", "lineitem", "l_orderkey"),),
                     Compare(Column("o_orderpriority", "string"), "=", "1-URGENT"))
QUERY = ("SELECT count(*) FROM lineitem JOIN orders ON l_orderkey = o_orderkey "
         "WHERE o_orderpriority = '1-URGENT'")


@pytest.fixture
def catalog(catalog_url):
    with Catalog(catalog_url) as cat:
        cat.register_table("orders", "/wh/orders")
        cat.register_table("lineitem", "/wh/lineitem")
        yield cat


def _orders(cat: Catalog, run_id: str, fingerprint: str | None) -> int:
    version, ids = cat.begin_version("orders", "", "mto", {}, run_id, 1)
    cat.set_blocks(version, [BlockRecord(ids.start, 10, 100, f"/wh/orders/{ids.start}", {}, 0, 0)])
    cat.activate(version, input_fingerprint=fingerprint)
    return version


def _lineitem(cat: Catalog, orders_version: int | None) -> None:
    """Two blocks: the first has no urgent rows (union bit 0), the second has some."""
    version, ids = cat.begin_version("lineitem", "", "mto", {}, "li-1", 2)
    sources = (("orders", orders_version),) if orders_version is not None else ()
    cat.set_cuts(version, [CutRecord(0, dumps(URGENT), to_sql(URGENT), "join_induced",
                                     path=(str(URGENT.hops[0]),), source_versions=sources)])
    cat.set_blocks(version, [BlockRecord(ids.start, 5, 50, "/wh/l/0", {}, 0b0, 0b0),
                             BlockRecord(ids.start + 1, 5, 50, "/wh/l/1", {}, 0b1, 0b0)])
    cat.activate(version)


def _lineitem_blocks(cat: Catalog) -> tuple[int, int]:
    index = RoutingIndex.from_snapshot(cat.snapshot())
    (ref,) = [r for r in route_query(QUERY, index, SCHEMA).refs if r.table == "lineitem"]
    return len(ref.blocks), index.stale_cuts


def test_the_cut_skips_while_its_source_version_is_active(catalog):
    _lineitem(catalog, _orders(catalog, "o-1", "1500:42"))
    assert _lineitem_blocks(catalog) == (1, 0)


def test_a_new_layout_of_the_same_rows_keeps_the_cut(catalog):
    _lineitem(catalog, _orders(catalog, "o-1", "1500:42"))
    _orders(catalog, "o-2", "1500:42")  # laid out again, same fingerprint
    assert _lineitem_blocks(catalog) == (1, 0)


def test_changed_rows_make_the_cut_stale_and_every_block_is_read(catalog):
    _lineitem(catalog, _orders(catalog, "o-1", "1500:42"))
    _orders(catalog, "o-2", "1501:77")
    assert _lineitem_blocks(catalog) == (2, 1)


def test_an_unknown_fingerprint_is_not_proof_of_the_same_rows(catalog):
    _lineitem(catalog, _orders(catalog, "o-1", None))  # a version from before fingerprints
    _orders(catalog, "o-2", None)
    assert _lineitem_blocks(catalog) == (2, 1)


def test_a_cut_that_does_not_say_where_its_keys_came_from_is_not_used(catalog):
    _orders(catalog, "o-1", "1500:42")
    _lineitem(catalog, None)
    assert _lineitem_blocks(catalog) == (2, 1)
