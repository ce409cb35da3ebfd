"""Skipping's named verdicts, type dispatch in one place, and read-only cached values."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pytest

from layout_core.algorithms.types import masks_bits
from layout_core.predicates import (
    TRUE,
    Column,
    ColumnStats,
    Compare,
    Hop,
    InList,
    JoinInduced,
    Opaque,
    PredicateVisitor,
    conj,
    negate,
)
from layout_core.predicates.model import VISIT_METHODS
from layout_core.predicates.reasoning import atom_sets, box_of, to_cnf, to_dnf
from layout_core.skipping.router import (
    CutMasks, LayoutIndex, cut_masks, cut_verdict, cuts_exclude, route_layout, set_bits, trees_admit,
)
from layout_core.skipping.verdict import Verdict
from layout_core.skipping.zonemaps import ZoneMaps, might_match_blocks

X = Column("x", "int")
D = Column("d", "date")


def test_verdict_values_are_the_meaning_of_might_match_arrays():
    assert Verdict.ROWS_MIGHT_MATCH.value is True
    assert Verdict.ROWS_CANNOT_MATCH.value is False


def test_cut_verdict():
    implies_cut0 = CutMasks(implied=0b01, disjoint=0)
    assert cut_verdict(implies_cut0, union_bits=0b10, all_bits=0) is Verdict.ROWS_CANNOT_MATCH  # no row has bit 0
    assert cut_verdict(implies_cut0, union_bits=0b11, all_bits=0) is Verdict.ROWS_MIGHT_MATCH
    disjoint_cut1 = CutMasks(implied=0, disjoint=0b10)
    assert cut_verdict(disjoint_cut1, union_bits=0b11, all_bits=0b10) is Verdict.ROWS_CANNOT_MATCH  # all have bit 1
    assert cut_verdict(disjoint_cut1, union_bits=0b11, all_bits=0b01) is Verdict.ROWS_MIGHT_MATCH
    assert cut_verdict(CutMasks(0, 0), 0, 0b11) is Verdict.ROWS_MIGHT_MATCH  # nothing proven: read


def test_cuts_exclude_gives_cut_verdict_for_every_block_at_once():
    """The router's vectorized form of cut_verdict, over cut counts that cross byte and
    64-bit boundaries (bits past the layout's cuts are never asked)."""
    from collections import namedtuple

    from hypothesis import given, settings
    from hypothesis import strategies as st

    Block = namedtuple("Block", "block_id row_count stats union_bits all_bits")

    @settings(max_examples=200, deadline=None)
    @given(st.integers(1, 140).flatmap(lambda m: st.tuples(
        st.just(m),
        st.lists(st.tuples(st.integers(0, 2 ** (m + 3) - 1), st.integers(0, 2 ** (m + 3) - 1)), max_size=6),
        st.integers(0, 2 ** m - 1), st.integers(0, 2 ** m - 1))))
    def check(case):
        m, bits, implied, disjoint = case
        layout = LayoutIndex.from_blocks("t", [Block(i, 1, {}, u, a) for i, (u, a) in enumerate(bits)], [None] * m)
        masks = CutMasks(implied, disjoint)
        expected = [cut_verdict(masks, u, a) is Verdict.ROWS_CANNOT_MATCH for u, a in bits]
        assert cuts_exclude(masks, layout).tolist() == expected

    check()


def test_trees_admit_a_block_when_every_tree_admits_one_of_its_leaves():
    from types import SimpleNamespace

    # three blocks; tree 0 has leaves 0 and 1, tree 1 leaves 0, 1 and 2
    layout = SimpleNamespace(block_ids=(10, 11, 12), tree_leaf_matrices=(
        masks_bits((0b01, 0b10, 0b11), 2), masks_bits((0b001, 0b100, 0b110), 3)))
    assert trees_admit((0b10, 0b111), layout).tolist() == [False, True, True]  # block 10: only tree 0's leaf 0
    assert trees_admit((0b11, 0b001), layout).tolist() == [True, False, False]  # tree 1 admits leaf 0 only
    assert trees_admit((0b00, 0b111), layout).tolist() == [False, False, False]  # tree 0 admits nothing
    assert trees_admit((), layout).tolist() == [True, True, True]  # no tree asked: every block admitted


def test_masks_bits_and_set_bits():
    assert masks_bits((0b101, 0, 1 << 70), 3).tolist() == [[True, False, True], [False] * 3, [False] * 3]
    assert masks_bits((), 5).shape == (0, 5)
    assert set_bits(0b1010).tolist() == [1, 3] and set_bits(0).tolist() == [] and set_bits(1 << 64).tolist() == [64]


def test_cut_masks_are_named_and_still_a_pair():
    masks = cut_masks(Compare(X, "<", 5), [Compare(X, "<", 10), Compare(X, ">", 20)])
    assert masks == (0b01, 0b10) and (masks.implied, masks.disjoint) == (0b01, 0b10)


def test_what_zone_maps_do_not_understand_might_match():
    stats = [{"x": ColumnStats(1, 5, 0, 10)}, {"x": ColumnStats(6, 9, 0, 10)}, {"x": ColumnStats(1, 2, 0, 0)}]
    zm = ZoneMaps.of(stats, [10, 10, 0])
    induced = JoinInduced((Hop("orders", "o_orderkey", "lineitem", "x"),), Compare(D, "<", dt.date(2020, 1, 1)))
    for unknown in [Opaque("f(x) > 1", frozenset({"x"})), induced, Compare(Column("no_stats", "int"), "=", 1),
                    Compare(X, "=", "not an int")]:
        assert list(might_match_blocks(unknown, zm)) == [True, True, False]  # (an empty block matches nothing)
    assert list(might_match_blocks(Compare(X, "<", 3), zm)) == [True, False, False]


def test_route_layout_reads_what_is_not_proven_skippable():
    cuts = [Compare(X, "<", 5)]
    stats = [{"x": ColumnStats(1, 4, 0, 10)}, {"x": ColumnStats(5, 9, 0, 10)}, {"x": ColumnStats(1, 9, 0, 10)}]
    blocks = [_Block(10 + i, 10, s, union, every) for i, (s, union, every) in
              enumerate(zip(stats, [0b1, 0b0, 0b1], [0b1, 0b0, 0b0]))]
    layout = LayoutIndex.from_blocks("t", blocks, cuts)
    # x < 3 implies cut 0: block 11 has no row with bit 0; zone maps skip block 11 too
    assert route_layout(Compare(X, "<", 3), Compare(X, "<", 3), layout).blocks == (10, 12)
    # x >= 7 is disjoint with cut 0: every row of block 10 is in it (the filter TRUE leaves zone maps out)
    assert route_layout(Compare(X, ">=", 7), TRUE, layout).blocks == (11, 12)
    assert route_layout(InList(X, frozenset(), negated=True, has_null=True), TRUE, layout).blocks == ()


class _Block:
    def __init__(self, block_id, row_count, stats, union_bits, all_bits):
        self.block_id, self.row_count, self.union_bits, self.all_bits = block_id, row_count, union_bits, all_bits
        self.stats = {c: {"min": {"int": str(s.min)}, "max": {"int": str(s.max)}, "null_count": s.null_count}
                      for c, s in stats.items()}


def test_every_predicate_type_has_a_visitor_method_and_others_go_to_default():
    class Names(PredicateVisitor[str]):
        def default(self, p):
            return "default"

    assert Names()(Compare(X, "=", 1)) == "default"
    assert Names()(42) == "default"
    with pytest.raises(TypeError, match="not a predicate"):
        PredicateVisitor()(42)
    with pytest.raises(TypeError, match="not a predicate"):
        negate("x = 1")
    assert len(set(VISIT_METHODS.values())) == len(VISIT_METHODS) == 11


def test_cached_values_are_read_only():
    induced = JoinInduced((Hop("o", "k", "t", "x"),), Compare(D, "<", dt.date(2020, 1, 1)))
    p = conj(Compare(X, ">", 1), Compare(X, "<", 9), induced)
    (conjunction,) = to_dnf(p)
    box = box_of(conjunction)
    with pytest.raises(TypeError):
        box.sets["x"] = None
    with pytest.raises(TypeError):
        box.induced[()] = ()
    assert all(isinstance(v, tuple) for v in box.induced.values())
    assert isinstance(box.column_compares, tuple)
    with pytest.raises(AttributeError):
        box.atoms = frozenset()
    assert isinstance(to_dnf(p), tuple) and isinstance(to_cnf(p), tuple)
    with pytest.raises(AttributeError):
        atom_sets(Compare(X, ">", 1)).over = None

    zm = ZoneMaps.of([{"x": ColumnStats(1, 4, 0, 10)}], [10])
    with pytest.raises(TypeError):
        zm.columns["y"] = None
    arrays = zm.columns["x"]
    fits, mins, maxs = arrays.usable(X)
    for a in (zm.row_counts, arrays.mins, arrays.maxs, arrays.null_counts, arrays.has_values, arrays.known,
              fits, mins, maxs):
        assert not a.flags.writeable
    with pytest.raises(ValueError):
        arrays.mins[0] = 0
    assert np.array_equal(might_match_blocks(Compare(X, ">", 3), zm), [True])
