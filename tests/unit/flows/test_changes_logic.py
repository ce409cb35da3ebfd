"""The pure parts of change batches: how a batch moves a table's keys across a
cut (MTO §5.2), the repaired key set, and block statistics that only grow."""

from __future__ import annotations

import datetime as dt

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from pyroaring import BitMap64

from layout_core.flows.changes.repair import KeyChanges, repaired_keys
from layout_core.predicates import value_from_json, value_to_json
from layout_core.skipping.rangesets import merge_column_stats


def changes(deleted: dict[int, bool], inserted: dict[int, bool]) -> KeyChanges:
    """From {key: reaches the cut's predicate} of the old (deleted) and new (inserted) rows."""
    return KeyChanges.of(np.array(list(deleted), dtype=np.int64), np.array(list(deleted.values()), dtype=bool),
                         np.array(list(inserted), dtype=np.int64), np.array(list(inserted.values()), dtype=bool))


def test_new_keys_that_satisfy_the_cut_join_it_and_deleted_ones_leave():
    c = changes(deleted={4: True, 5: False}, inserted={10: True, 11: False})
    assert set(c.on) == {10} and set(c.off) == {4} and set(c.gone) == {4, 5}
    assert set(repaired_keys(BitMap64([1, 4, 7]), c)) == {1, 7, 10}


def test_an_update_flips_only_when_its_answer_changes():
    c = changes(deleted={3: True, 6: False, 8: True}, inserted={3: False, 6: True, 8: True})
    assert set(c.on) == {6} and set(c.off) == {3}
    assert not c.gone  # every deleted key came back
    assert set(c.touched) == {3, 6}  # key 8 kept its answer: rows referencing it stay where they are
    assert set(repaired_keys(BitMap64([3, 8]), c)) == {6, 8}


@given(st.dictionaries(st.integers(0, 50), st.booleans()), st.dictionaries(st.integers(0, 100), st.booleans()),
       st.sets(st.integers(0, 50)))
def test_repaired_keys_equal_recomputing_from_the_changed_table(deleted, inserted, before):
    # keys 0..50 exist (`before` satisfy the cut); a batch inserts only deleted keys (updates) or new ones
    inserted = {k: ok for k, ok in inserted.items() if k in deleted or k > 50}
    old = {k: k in before for k in range(51)}
    old.update(deleted)
    keys = BitMap64(k for k, ok in old.items() if ok)
    new = {k: ok for k, ok in old.items() if k not in deleted}
    new.update(inserted)
    assert set(repaired_keys(keys, changes(deleted, inserted))) == {k for k, ok in new.items() if ok}


def stats(*ranges, nulls=0) -> dict:
    out = {"min": value_to_json(ranges[0][0]), "max": value_to_json(ranges[-1][1]), "null_count": nulls}
    if len(ranges) > 1:
        out["ranges"] = [[value_to_json(a), value_to_json(b)] for a, b in ranges]
    return out


def ranges_of(merged: dict) -> list[tuple]:
    raw = merged.get("ranges", [[merged["min"], merged["max"]]])
    return [(value_from_json(a), value_from_json(b)) for a, b in raw]


def test_merged_statistics_cover_both_sides_and_close_the_narrowest_gaps():
    merged = merge_column_stats(stats((1, 5), (20, 30), nulls=2), stats((7, 8), (100, 100), nulls=1), 3)
    assert merged["null_count"] == 3
    assert ranges_of(merged) == [(1, 8), (20, 30), (100, 100)]  # the gap 5..7 was the narrowest
    day = dt.date(2024, 1, 1)
    merged = merge_column_stats(stats((day, day)), stats((day + dt.timedelta(days=9),) * 2), 1)
    assert (value_from_json(merged["min"]), value_from_json(merged["max"])) == (day, day + dt.timedelta(days=9))
    assert merge_column_stats(stats((1, 2)) | {"tainted": True}, stats((3, 4)), 4)["tainted"]


@given(st.lists(st.integers(-1000, 1000), min_size=1, max_size=40),
       st.lists(st.integers(-1000, 1000), min_size=1, max_size=40), st.integers(1, 6))
def test_every_value_of_either_block_part_stays_covered(old_values, new_values, n_r):
    def summary(values):  # one range per value, as a block summarized with many ranges would be
        values = sorted(set(values))
        return stats(*[(v, v) for v in values])

    ranges = ranges_of(merge_column_stats(summary(old_values), summary(new_values), n_r))
    assert len(ranges) <= n_r
    for v in old_values + new_values:
        assert any(lo <= v <= hi for lo, hi in ranges)
