"""B judged the router's way on blocks simulated from sampled rows: small cases worked by hand."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.algorithms.types import VectorCounts
from layout_core.flows.reorg.simulated_reads import (
    ColumnValues,
    OutOfSampleGain,
    References,
    HeldOut,
    SampledRows,
    held_out_lower_bound,
    query_folds,
    reads,
    simulated_blocks,
    writer_rank,
)
from layout_core.predicates import TRUE, Compare
from layout_core.predicates.model import Column

X = Column("x", "int")
AT_MOST_4 = Compare(X, "<=", 4)  # the one cut, and the filter of every reference below

# Eight sampled rows, x = 1, 5, 2, 6, 3, 7, 4, 8 in sample order; the cut's bit is x <= 4.
VALUES = [1, 5, 2, 6, 3, 7, 4, 8]
BITS = np.array([[True], [False]])  # vector 0: x <= 4, vector 1: x > 4
VECTOR = np.array([0 if v <= 4 else 1 for v in VALUES])
# The old layout interleaves: block 0 holds x = 1, 5, 2, 6 and block 1 holds 3, 7, 4, 8.
OLD_BLOCK = np.array([0, 0, 0, 0, 1, 1, 1, 1])


def _sample(rank=None, block=OLD_BLOCK, values=VALUES):
    x = ColumnValues.of(values)
    return SampledRows(VECTOR, block, np.arange(len(values)) if rank is None else rank, {"x": x})


def _refs(n_queries=1, filters=(AT_MOST_4,), query=(0,), satisfiable=(True,)):
    k = len(filters)
    return References(np.array(query), np.ones((k, 1), bool), np.zeros((k, 1), bool), tuple(filters),
                      np.array(satisfiable), n_queries)


def test_column_values_code_rows_by_their_rank_among_distinct_values_and_null_as_minus_one():
    col = ColumnValues.of(["b", None, "a", "b"])
    assert col.codes.tolist() == [1, -1, 0, 1] and col.values.tolist() == ["a", "b"]
    assert ColumnValues.of([None, None]).codes.tolist() == [-1, -1]
    # sorted by x: rows 0 (x=1), 2 (2), 4 (3), 6 (4), 1 (5), ...
    assert writer_rank([ColumnValues.of(VALUES)], 8).tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    assert writer_rank([], 3).tolist() == [0, 1, 2]  # no sort column: the sample's order


def test_blocks_get_bits_and_zone_maps_of_their_sampled_rows():
    sample = _sample()
    blocks = simulated_blocks(sample, BITS, np.arange(8), OLD_BLOCK, 3)  # block 2 holds no row
    assert blocks.rows.tolist() == [4, 4, 0]
    assert blocks.union[:, 0].tolist() == [True, True, False] and blocks.every[:, 0].tolist() == [False] * 3
    x = blocks.zone_maps.columns["x"]
    assert x.mins.tolist() == [1, 3, None] and x.maxs.tolist() == [6, 8, None]

    # x <= 4 implies the cut, and both blocks hold rows with it: zone maps decide. Block 0
    # (1..6) and block 1 (3..8) may both hold x <= 4; x <= 2 skips block 1 (min 3).
    assert reads(_refs(), blocks).tolist() == [[True, True, False]]
    assert reads(_refs(filters=(Compare(X, "<=", 2),)), blocks).tolist() == [[True, False, False]]
    # A predicate never TRUE reads nothing; TRUE reads every block with rows.
    assert reads(_refs(filters=(TRUE,), satisfiable=(False,)), blocks).tolist() == [[False] * 3]
    refs = References(np.array([0]), np.zeros((1, 1), bool), np.zeros((1, 1), bool), (TRUE,), np.array([True]), 1)
    assert reads(refs, blocks).tolist() == [[True, True, False]]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_blocks_bits_are_the_or_and_the_and_of_its_rows_bits(data):
    """Any rows (repeats of a vector, empty blocks, a subset of the sample): per block, a cut's
    union bit is set when some row of the block has it, its every bit when all rows have it."""
    n_vectors = data.draw(st.integers(1, 6))
    m = data.draw(st.integers(1, 5))
    bits = np.array(data.draw(st.lists(st.lists(st.booleans(), min_size=m, max_size=m),
                                       min_size=n_vectors, max_size=n_vectors)), dtype=bool)
    vector = np.array(data.draw(st.lists(st.integers(0, n_vectors - 1), min_size=1, max_size=30)))
    sample = SampledRows(vector, np.zeros(vector.size, np.int64), np.arange(vector.size),
                         {"x": ColumnValues.of(list(range(vector.size)))})
    members = data.draw(st.lists(st.integers(0, n_vectors - 1), unique=True))
    rows = sample.rows_of(np.array(members, dtype=np.int64))
    assert rows.tolist() == [r for r in range(vector.size) if vector[r] in members]
    n_blocks = data.draw(st.integers(1, 5))
    block = np.array(data.draw(st.lists(st.integers(0, n_blocks - 1), min_size=rows.size, max_size=rows.size)),
                     dtype=np.int64)
    blocks = simulated_blocks(sample, bits, rows, block, n_blocks)
    for b in range(n_blocks):
        held = [bits[vector[r]] for r, in_block in zip(rows, block) if in_block == b]
        assert blocks.rows[b] == len(held)
        for j in range(m):
            assert blocks.union[b, j] == any(h[j] for h in held)
            assert blocks.every[b, j] == (bool(held) and all(h[j] for h in held))


def test_a_cut_every_row_has_skips_a_query_disjoint_with_it_without_zone_maps():
    rows = np.array([0, 2, 4, 6])  # x = 1, 2, 3, 4: every row has the bit
    blocks = simulated_blocks(_sample(), BITS, rows, np.zeros(4, np.int64), 1)
    refs = References(np.array([0]), np.zeros((1, 1), bool), np.ones((1, 1), bool), (TRUE,), np.array([True]), 1)
    assert reads(refs, blocks).tolist() == [[False]]


def _gain(rank, allowed=(np.array([0]), np.array([0])), block_rows=4):
    """Two queries, x <= 4 each, one per half; 8 rows in 2 old blocks of 4 (block_rows 4)."""
    sample = _sample(rank)
    vc = VectorCounts(BITS, np.bincount(VECTOR), np.ones(1))
    refs = _refs(2, (AT_MOST_4, AT_MOST_4), (0, 1), (True, True))
    return OutOfSampleGain(sample, vc, refs, np.array([0, 1]), allowed, np.array([0, 0]), block_rows, 1.0, 4)


def test_a_tree_split_on_the_cut_saves_each_held_out_query_one_block():
    """Old: both interleaved blocks hold x <= 4, each query reads 2. T' (grown on the other
    half's query) splits on the cut: leaf x <= 4 is one block (read), leaf x > 4 one block
    (skipped by its union bit): 1 read, a gain of 1 per query."""
    gain = _gain(rank=np.arange(8))
    assert gain.reads_now([0]).tolist() == [2.0, 2.0]
    assert gain.per_query(np.array([0, 1]), [0]).tolist() == [1.0, 1.0]


def test_the_routers_verdicts_on_the_real_blocks_replace_the_simulated_ones_for_t():
    """The router reads only block 0 of the old layout for each query (its range sets or tree
    path ruled out block 1): A(T) = 1, what T' reads too, so nothing is gained; simulated, A(T) = 2."""
    gain = _gain(rank=np.arange(8))
    gain = OutOfSampleGain(gain.sample, gain.vc, gain.refs, gain.fold, gain.allowed, gain.block_leaf, 4, 1.0, 4,
                           np.array([[True, False], [True, False]]))
    assert gain.reads_now([0]).tolist() == [1.0, 1.0] and gain.reads_now([0], simulated=True).tolist() == [2.0, 2.0]
    assert gain.per_query(np.array([0, 1]), [0]).tolist() == [0.0, 0.0]
    with pytest.raises(ValueError, match="one row per reference"):
        OutOfSampleGain(gain.sample, gain.vc, gain.refs, gain.fold, gain.allowed, gain.block_leaf, 4, 1.0, 4,
                        np.ones((1, 2), bool))


def test_in_sample_the_tree_is_grown_and_judged_on_every_query():
    # grown on both queries with the cut, judged on both: 2 blocks read before, 1 after, per query
    assert _gain(np.arange(8)).in_sample(np.array([0, 1]), [0], np.array([0])) == pytest.approx(1.0)
    assert _gain(np.arange(8)).in_sample(np.array([0, 1]), [0], np.array([], np.int64)) == 0.0


def test_without_the_cut_the_writer_order_decides():
    """No cut allowed: T' is one leaf of 8 rows, 2 blocks of 4 in the writer's order. In sample
    order (x = 1, 5, 2, 6 | 3, 7, 4, 8) both blocks hold x <= 4: no gain. Sorted by x
    (1..4 | 5..8) the zone maps skip the second block: a gain of 1."""
    none = (np.array([], np.int64), np.array([], np.int64))
    assert _gain(np.arange(8), none).per_query(np.array([0, 1]), [0]).tolist() == [0.0, 0.0]
    by_x = writer_rank([ColumnValues.of(VALUES)], 8)
    assert _gain(by_x, none).per_query(np.array([0, 1]), [0]).tolist() == [1.0, 1.0]


def test_t_prime_is_judged_by_its_own_cuts_only():
    """The judged queries filter nothing the zone maps can use (TRUE) but imply the cut. T' sorted
    by x without the cut allowed: blocks 1..4 | 5..8, and no row of the second has the cut's bit.
    A writer of T' would not record that bit (T' has no such cut): both blocks are read, no gain.
    With the cut allowed, T' splits on it and the second block is skipped by its bit: a gain of 1."""
    sample = _sample(writer_rank([ColumnValues.of(VALUES)], 8))
    vc = VectorCounts(BITS, np.bincount(VECTOR), np.ones(1))
    refs = References(np.array([0, 1]), np.ones((2, 1), bool), np.zeros((2, 1), bool), (TRUE, TRUE),
                      np.array([True, True]), 2)
    none = (np.array([], np.int64), np.array([], np.int64))
    judged_by_own_cuts = OutOfSampleGain(sample, vc, refs, np.array([0, 1]), none, np.array([0, 0]), 4, 1.0, 4)
    assert judged_by_own_cuts.per_query(np.array([0, 1]), [0]).tolist() == [0.0, 0.0]
    with_cut = OutOfSampleGain(sample, vc, refs, np.array([0, 1]), (np.array([0]),) * 2, np.array([0, 0]), 4, 1.0, 4)
    assert with_cut.per_query(np.array([0, 1]), [0]).tolist() == [1.0, 1.0]


def test_one_half_without_references_cannot_be_judged_out_of_sample():
    sample = _sample()
    vc = VectorCounts(BITS, np.bincount(VECTOR), np.ones(1))
    refs = _refs(2, (AT_MOST_4,), (0,), (True,))
    gain = OutOfSampleGain(sample, vc, refs, np.array([0, 1]), (np.array([0]),) * 2, np.array([0, 0]), 4, 1.0, 4)
    assert not gain.judgeable
    with pytest.raises(ValueError, match="two folds or more"):
        gain.per_query(np.array([0, 1]), [0])
    with pytest.raises(ValueError, match="one cut list per fold"):
        OutOfSampleGain(sample, vc, refs, np.array([0, 2]), (np.array([0]),) * 2, np.array([0, 0]), 4, 1.0, 4)


def test_with_three_folds_each_query_is_judged_on_a_tree_grown_on_the_other_two_with_their_cuts():
    """Three queries, x <= 4 each, one per fold. The trees judged on fold 0 may use the cut
    (chosen from the queries of folds 1 and 2): T' splits on it, 1 block read of 2 old ones, a
    gain of 1. Those judged on folds 1 and 2 get no cut: one leaf, written in the sample's order
    (x = 1, 5, 2, 6 | 3, 7, 4, 8), both blocks hold x <= 4, no gain."""
    vc = VectorCounts(BITS, np.bincount(VECTOR), np.ones(1))
    refs = _refs(3, (AT_MOST_4,) * 3, (0, 1, 2), (True,) * 3)
    no_cut = np.array([], np.int64)
    gain = OutOfSampleGain(_sample(np.arange(8)), vc, refs, np.array([0, 1, 2]), (np.array([0]), no_cut, no_cut),
                           np.array([0, 0]), 4, 1.0, 4)
    assert gain.folds == 3 and gain.judgeable
    assert gain.per_query(np.array([0, 1]), [0]).tolist() == [1.0, 0.0, 0.0]


def test_repeats_of_one_query_share_a_fold():
    texts = ["select 1", "select 2", " select 1 ", "select 3"]
    for folds in (2, 3, 5):
        fold = query_folds(texts, folds)
        assert fold[0] == fold[2] and set(fold.tolist()) <= set(range(folds))
    with pytest.raises(ValueError, match="at least 2 folds"):
        query_folds(texts, 1)


def test_queries_differing_in_one_literal_fall_in_every_fold():
    # 300 instances of one template with a date literal: each fold gets a fair share
    texts = [f"select * from t where d >= date '1998-01-01' + interval {i} day" for i in range(300)]
    for folds in (2, 4):
        assert np.bincount(query_folds(texts, folds), minlength=folds).min() > 300 / folds * 0.7


def _bound(gains, ratio=1.0, cost=0.0, floor=None) -> float:
    return held_out_lower_bound([HeldOut(np.asarray(gains, dtype=float), floor, cost)], ratio)


def test_the_bootstrap_bound_is_below_the_mean_and_zero_spread_gives_the_mean():
    assert _bound(np.full(50, 2.0)) == pytest.approx(2.0)
    gains = np.array([0.0] * 45 + [10.0] * 5)  # mean 1, carried by five queries
    low = _bound(gains)
    assert 0 <= low < 1.0
    assert _bound(gains, ratio=3, cost=1) == pytest.approx(3 * low - 1)


def test_the_bound_averages_the_folds_each_resampled_apart():
    """Fold 1: 2 blocks saved per query, C = 1, ratio 3: reward 5 whatever the resample;
    fold 2: nothing chosen, reward 0. Their mean is 2.5. A fold with a lumpy gain (mean 1
    from a tenth of its queries) pulls the bound below its mean reward."""
    steady, empty = HeldOut(np.full(20, 2.0), None, 1.0), HeldOut(np.zeros(20), None, 0.0)
    assert held_out_lower_bound([steady, empty], 3.0) == pytest.approx(2.5)
    lumpy = HeldOut(np.array([10.0] * 2 + [0.0] * 18), None, 1.0)  # reward 3·1 - 1 = 2 on average
    assert held_out_lower_bound([steady, lumpy], 3.0) < (5 + 2) / 2 - 0.5


def test_the_noise_floor_is_resampled_too():
    """Window gains of 2 blocks per query for every query; a floor measured on another log:
    constant 0.5 (and a second subtree's -1: a floor is never below 0) takes 0.5 off exactly;
    a floor of mean 0.5 carried by a tenth of its queries takes more off at the 5% quantile,
    since resampling that log can make its mean larger."""
    window = np.full(40, 2.0)
    steady = np.array([np.full(30, 0.5), np.full(30, -1.0)])
    assert _bound(window, floor=steady) == pytest.approx(1.5)
    lumpy = np.array([[5.0] * 3 + [0.0] * 27])  # mean 0.5
    low = _bound(window, floor=lumpy)
    assert low < 1.5 - 0.2
    assert _bound(window, floor=np.zeros((0, 30))) == pytest.approx(2.0)


def test_a_bias_floor_is_subtracted_whatever_its_sign():
    """The same window (2 blocks saved per query) against a training log whose trees, grown on
    half of it, lose 3 blocks per query to the layout: as noise the floor counts 0, as bias
    (`clip_floor=False`) it is added back, 2 + 3 = 5; a positive floor is taken off either
    way."""
    window = np.full(40, 2.0)
    losing = np.full((1, 30), -3.0)
    assert _bound(window, floor=losing) == pytest.approx(2.0)
    assert held_out_lower_bound([HeldOut(window, losing, 1.0)], 2.0, clip_floor=False) == pytest.approx(2 * 5 - 1)
    gaining = np.full((1, 30), 0.5)
    assert held_out_lower_bound([HeldOut(window, gaining, 0.0)], 1.0, clip_floor=False) == pytest.approx(1.5)


def test_a_long_training_log_is_kept_as_an_even_spread():
    from layout_core.flows.nightly.artifacts import spread, training_log_record

    assert spread(("a", "b"), 5) == ("a", "b")
    assert spread(tuple(range(9)), 3) == (0, 4, 8)  # first, middle, last
    assert spread(tuple(range(10)), 4) == (0, 3, 6, 9)
    # what a version's plan stores, after the nightly or a partial reorganization: at most 2,000
    long_log = [f"SELECT {i}" for i in range(5000)]
    record = training_log_record(long_log, 7000)
    assert len(record["training_queries"]) == 2000 and record["training_log_queries"] == 7000
    assert record["training_queries"][0] == "SELECT 0" and record["training_queries"][-1] == "SELECT 4999"
    assert training_log_record(["SELECT 1"], 3) == {"training_queries": ["SELECT 1"], "training_log_queries": 3}


def test_the_shift_settings_refuse_fewer_than_two_folds_and_the_cli_defaults_to_theirs():
    from layout_core.cli import build_parser
    from layout_core.flows.reorg.shift import ShiftSettings

    with pytest.raises(ValueError, match="folds must be >= 2"):
        ShiftSettings(folds=1)
    args = build_parser().parse_args(["workload", "shift"])
    assert args.folds == ShiftSettings.folds == 2
    assert build_parser().parse_args(["workload", "shift", "--folds", "4"]).folds == 4
    assert args.floor == ShiftSettings.floor == "noise"
    assert build_parser().parse_args(["workload", "shift", "--floor", "reference"]).floor == "reference"
    with pytest.raises(ValueError, match="floor is one of noise, bias, reference"):
        ShiftSettings(floor="median")
