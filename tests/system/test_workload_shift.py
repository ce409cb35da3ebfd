"""Workload shift (MTO §5.1): the window, the old tree from the catalog, rewards, the monitor DAG."""

import datetime as dt
import json
import sqlite3
from dataclasses import replace

import numpy as np
import pytest

from layout_core.algorithms.qdtree import Node
from layout_core.algorithms.types import VectorCounts
from layout_core.base.schema import load_schema
from layout_core.catalog import ActiveLayout, BlockRecord, QueryRecord, TreeNodeRecord, VersionInfo
from layout_core.flows.reorg.monitor import asset_extra, report_path
from layout_core.flows.reorg.shift import (
    InSample,
    ShiftSettings,
    SubtreeBenefits,
    choose,
    old_tree,
    window_queries,
)
from layout_core.flows.reorg.simulated_reads import ColumnValues, OutOfSampleGain, References, SampledRows
from layout_core.flows.reorg.subtrees import old_subtrees
from layout_core.predicates import TRUE, Compare
from layout_core.predicates.model import Column
from layout_core.workload.history import template_fingerprint
from tests.helpers.tpch_layouts import lineitem_trained_on_1_to_11, query_history

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 11, 25, 12, tzinfo=UTC)
SCHEMA = load_schema("tpch")


def _query(sql: str) -> QueryRecord:
    return QueryRecord(NOW, sql, template_fingerprint(sql), "import")


def test_the_window_keeps_queries_on_the_table_and_counts_the_rest():
    history = [_query(s) for s in (
        "SELECT sum(l_extendedprice) FROM lineitem WHERE l_shipdate < date '1995-01-01'",
        "SELECT count(*) FROM lineitem l1 JOIN lineitem l2 ON l1.l_orderkey = l2.l_orderkey",
        "SELECT count(*) FROM orders WHERE o_totalprice > 5",
        "SELECT count(*) FROM lineitem WHERE l_no_such_column = 1",
        "SELECT count(*) FROM dropped_table",
        "SELEC broken",
        "DELETE FROM lineitem",
    )]
    window = window_queries(history, SCHEMA, "lineitem", NOW - dt.timedelta(hours=1), NOW)
    assert window.queries == 7
    assert len(window.analyses) == 2 and window.references == 3  # the self-join scans lineitem twice
    assert (window.other_tables, window.unknown, window.unparsable) == (1, 2, 2)


def _version(optimizer="qdtree", version_id=7) -> VersionInfo:
    return VersionInfo(version_id, "lineitem", "", "active", optimizer, {"block_rows": 100}, "r", NOW, NOW, 4)


def _block(block_id, leaf, rows=100):
    return BlockRecord(block_id, rows, 1000, f"/b{block_id}", {}, 0, 0, ((leaf,),) if leaf is not None else ())


def test_the_old_tree_comes_from_the_catalog_in_breadth_first_order():
    # root 5 cuts on bit 0: left 9 (leaf 0), right 3 (internal, bit 1) -> 4 (leaf 1), 6 (leaf 2)
    nodes = (TreeNodeRecord(0, 5, 400, cut=0, left=9, right=3), TreeNodeRecord(0, 9, 200, leaf_id=0),
             TreeNodeRecord(0, 3, 200, cut=1, left=4, right=6), TreeNodeRecord(0, 4, 100, leaf_id=1),
             TreeNodeRecord(0, 6, 100, leaf_id=2))
    layout = ActiveLayout(_version(), (), (_block(10, 0), _block(11, 0), _block(12, 1), _block(13, 2)), nodes)
    tree = old_tree(layout)
    assert not tree.whole_partition
    assert tree.node_ids == (5, 9, 3, 4, 6)
    assert tree.leaf_of_block == {10: 0, 11: 0, 12: 1, 13: 2}
    assert tree.root.cut == 0 and tree.root.left.leaf_id == 0 and tree.root.right.cut == 1

    # A layout without a qd-tree is one subtree: the whole partition or nothing.
    sortkey = ActiveLayout(_version("sortkey"), (), (_block(10, None), _block(11, None)), ())
    whole = old_tree(sortkey)
    assert whole.whole_partition and whole.node_ids == (0,) and whole.leaf_of_block == {10: 0, 11: 0}
    pando = ActiveLayout(_version("mto"), (), layout.blocks, nodes + (TreeNodeRecord(1, 0, 400, leaf_id=0),))
    assert old_tree(pando).whole_partition


def _two_leaf_partition():
    """Worked by hand below. Old tree: leaf 0 = blocks 0, 1 and leaf 1 = blocks 2, 3, four
    sampled rows each (block_rows 4, the whole partition sampled). Block 0 holds x = 1, 5, 2, 6,
    block 1 3, 7, 4, 8 (interleaved), blocks 2 and 3 x = 11..14 and 15..18. One window cut,
    x <= 4; vectors are per (block, bit)."""
    values = [1, 5, 2, 6, 3, 7, 4, 8, 11, 12, 13, 14, 15, 16, 17, 18]
    block = np.repeat([0, 1, 2, 3], 4)
    pairs = sorted({(b, int(v <= 4)) for b, v in zip(block, values)})  # (0,0) (0,1) (1,0) (1,1) (2,0) (3,0)
    vector = np.array([pairs.index((b, int(v <= 4))) for b, v in zip(block, values)])
    bits = np.array([[bit == 1] for _, bit in pairs])
    vc = VectorCounts(bits, np.bincount(vector), np.ones(1))
    sample = SampledRows(vector, block, np.arange(16), {"x": ColumnValues.of(values)})
    leaf_of_vector = np.array([0 if b < 2 else 1 for b, _ in pairs])
    root = Node.split(0, Node.leaf(0, np.zeros(0, np.int64), 0), Node.leaf(1, np.zeros(0, np.int64), 0))
    old = old_subtrees(vc, root, leaf_of_vector)
    return sample, vc, old


def _gain(sample, vc, queries=4):
    """`queries` references x <= 4, one per query, alternating folds 0 and 1."""
    at_most_4 = Compare(Column("x", "int"), "<=", 4)
    refs = References(np.arange(queries), np.ones((queries, 1), bool), np.zeros((queries, 1), bool),
                      (at_most_4,) * queries, np.ones(queries, bool), queries)
    return OutOfSampleGain(sample, vc, refs, np.arange(queries) % 2, (np.array([0]), np.array([0])),
                           np.array([0, 0, 1, 1]), 4, 1.0, 4)


def test_rewards_pick_the_subtree_whose_queries_a_new_tree_would_serve_better():
    """Now each query reads blocks 0 and 1 (both hold x <= 4); blocks 2 and 3 are skipped by
    their zone maps and bits: A(leaf 0) = 2, A(leaf 1) = 0, A(root) = 2. A tree grown on the
    other fold's queries splits on the cut: leaf 0's 8 rows become 1..4 (read) and 5..8
    (skipped), B = 1; the root's become 1..4 and 12 rows in 3 blocks, all skipped, B = 1.
    With q/w = 4: R(leaf 0) = 4·1 - 2 = 2, R(root) = 4·1 - 4 = 0, R(leaf 1) <= 4·0 - 2.
    The best set is {leaf 0} with reward 2, and every query gains alike, so the bootstrap
    bound is 2 as well."""
    sample, vc, old = _two_leaf_partition()
    blocks = [4, 2, 2]
    for prune in (True, False):
        benefits = SubtreeBenefits.out_of_sample(old, blocks, _gain(sample, vc), None)
        rewards = choose(benefits, ShiftSettings(q=400, w=100, prune=prune))
        assert rewards.shape.reads == (2.0, 2.0, 0.0)
        assert rewards.plan.nodes == (1,) and rewards.plan.reward == pytest.approx(2.0)
        assert rewards.plan.rewards[0] == pytest.approx(0.0) and rewards.lower_bound == pytest.approx(2.0)
        assert rewards.significant
    # The same gain on the layout's own training log is the noise floor: nothing is left.
    floored = SubtreeBenefits.out_of_sample(old, blocks, _gain(sample, vc), _gain(sample, vc, 6))
    rewards = choose(floored, ShiftSettings(q=400, w=100))
    assert rewards.plan.nodes == () and rewards.noise[0] == pytest.approx(1.0)
    # q <= w: nothing is worth rewriting, and nothing is computed.
    rewards = choose(SubtreeBenefits.out_of_sample(old, blocks, _gain(sample, vc), None), ShiftSettings(q=100, w=100))
    assert rewards.plan.nodes == () and rewards.plan.evaluated == 0 and rewards.lower_bound is None


def _in_sample(gain: OutOfSampleGain) -> InSample:
    """`gain`'s log judged in sample: its trees use its one cut, on all of it and on each fold."""
    return InSample(gain, np.array([0]), (np.array([0]),) * 2)


def test_judged_in_sample_the_reference_windows_own_fit_is_the_floor():
    """floor "reference-in-sample": T' grown on all of the window and judged on it gains 1
    block per query on leaf 0 and on the root (as out of sample above). A reference window of
    the same kind of queries (x <= 4) gains as much in sample: that is fit to a log's own
    queries, not shift, and nothing is left. A reference of full scans gains nothing on any
    subtree, so the window keeps its B and leaf 0 is chosen as above (q/w = 4: reward 4·1 - 2
    = 2); the guard's trees, grown on each fold alone, gain as much on it."""
    sample, vc, old = _two_leaf_partition()
    blocks, window = [4, 2, 2], _in_sample(_gain(sample, vc))
    same = SubtreeBenefits.in_sample(old, blocks, window, _in_sample(_gain(sample, vc, 6)))
    rewards = choose(same, ShiftSettings(q=400, w=100))
    assert rewards.plan.nodes == () and same.gains[0].tolist() == [1.0] * 4 and rewards.noise[0] == pytest.approx(1.0)

    scans = References(np.arange(6), np.zeros((6, 1), bool), np.zeros((6, 1), bool), (TRUE,) * 6, np.ones(6, bool), 6)
    full_scans = OutOfSampleGain(sample, vc, scans, np.arange(6) % 2, (np.array([0]),) * 2, np.array([0, 0, 1, 1]),
                                 4, 1.0, 4)
    other = SubtreeBenefits.in_sample(old, blocks, window, _in_sample(full_scans))
    rewards = choose(other, ShiftSettings(q=400, w=100))
    assert rewards.plan.nodes == (1,) and rewards.plan.reward == pytest.approx(2.0)
    assert rewards.noise[1] == 0.0 and rewards.lower_bound == pytest.approx(2.0)
    assert other.fold_gains[1][0].tolist() == [1.0] * 4 and other.fold_gains[1][1].tolist() == [0.0] * 6


def test_in_sample_the_guard_judges_a_fold_on_trees_that_never_saw_the_queries_that_chose():
    """B in sample: the root and leaf 1 save 2 blocks on queries 0 and 2, nothing on 1 and 3,
    by the tree grown on all four (B = 1, q/w 4: leaf 1 rewards 4·1 - 2 = 2). Grown on each
    fold alone, the trees confirm it on fold 0 only: a set chosen on fold 1 is empty, one
    chosen on fold 0 (leaf 1) is judged on fold 1 and saves nothing (4·0 - 2): not told from
    noise. With fold-wise gains of 1 everywhere the same set stands."""
    _, _, old = _two_leaf_partition()
    gains = {0: np.array([2.0, 0, 2, 0]), 1: np.array([2.0, 0, 2, 0]), 2: np.zeros(4)}
    floors = {i: np.zeros(6) for i in range(3)}
    halves, floor_halves = np.arange(4) % 2, np.arange(6) % 2

    def benefits(fold_wise):
        return SubtreeBenefits(old, [4, 2, 2], [2.0, 2.0, 0.0], 4, gains.__getitem__, floors.__getitem__, halves,
                               clip_floor=False, fold_guard=(lambda i: (fold_wise[i], floors[i]), floor_halves))

    lucky = choose(benefits(gains), ShiftSettings(q=400, w=100))
    assert lucky.plan.nodes == (1,) and lucky.plan.reward == pytest.approx(2.0) and not lucky.significant
    steady = choose(benefits({0: np.ones(4), 1: np.ones(4), 2: np.zeros(4)}), ShiftSettings(q=400, w=100))
    assert steady.plan.nodes == (1,) and steady.lower_bound == pytest.approx(2.0) and steady.significant


def test_the_reference_window_is_the_first_day_after_the_layout_went_live(tmp_path):
    from layout_core.catalog import Catalog
    from layout_core.flows.reorg.shift import RoutedTexts, reference_window

    live = NOW - dt.timedelta(days=3)
    on_lineitem = "SELECT count(*) FROM lineitem WHERE l_quantity < {}"
    history = ([QueryRecord(live + dt.timedelta(hours=h), on_lineitem.format(h), "f", "import") for h in range(12)]
               + [QueryRecord(live + dt.timedelta(hours=1), sql, "f", "import")
                  for sql in ("SELECT count(*) FROM orders", "SELEC broken")]
               # the day after: not in the reference window
               + [QueryRecord(live + dt.timedelta(hours=30), on_lineitem.format(99), "f", "import")]
               # a layout that went live ten days ago saw one query twelve times: one fold
               + [QueryRecord(live - dt.timedelta(days=7) + dt.timedelta(hours=h), on_lineitem.format(5), "f",
                              "import") for h in range(12)])
    settings = ShiftSettings()  # 24-hour windows, at least 10 references
    window = window_queries([], SCHEMA, "lineitem", NOW - dt.timedelta(hours=24), NOW)
    routed = RoutedTexts(SCHEMA, None)  # analyses only: nothing is routed
    with Catalog(f"sqlite:///{tmp_path / 'catalog.db'}") as catalog:
        catalog.record_queries(history)

        def reference(activated: dt.datetime, min_references: int = 10):
            version = replace(_version(), activated_at=activated)
            return reference_window(catalog, ActiveLayout(version, (), (), ()), routed, window,
                                    replace(settings, min_references=min_references))

        log, what = reference(live)
        assert len(log.sql) == 12 and log.queries == 13  # the orders query counts in B's unit; the broken one not
        assert on_lineitem.format(99) not in log.sql and what.startswith("reference window from")
        # went live a day and a half ago: its first day overlaps the window judged
        log, what = reference(NOW - dt.timedelta(hours=36))
        assert log is None and "less than two windows ago" in what
        log, what = reference(live, min_references=13)
        assert log is None and "12 references" in what
        log, what = reference(live - dt.timedelta(days=7))
        assert log is None and "all fall in one fold" in what


def test_each_subtree_is_measured_once_however_many_searches_decide():
    """A root over two leaves, C = 4, 2, 2 blocks; four queries each gain 1 block on the root
    and on leaf 1, none on leaf 2 (A = 2, 2, 0). R = (q/w)·B - C:
    q/w 4: root 0, leaf 1 2 -> {leaf 1}, reward 2; q/w 10: root 6, leaf 1 8 -> {leaf 1}, 8;
    q/w 1.5: leaf 1 -0.5 -> nothing. Whatever the q/w and the search, each node's gains are
    computed once."""
    _, _, old = _two_leaf_partition()
    calls = []
    gains = {0: np.ones(4), 1: np.ones(4), 2: np.zeros(4)}

    def per_query(i):
        calls.append(i)
        return gains[i]

    benefits = SubtreeBenefits(old, [4, 2, 2], [2.0, 2.0, 0.0], 4, per_query, folds=np.array([0, 1, 0, 1]))
    found = {}
    for q, prune in ((400, True), (1000, False), (1000, True), (150, False)):
        rewards = choose(benefits, ShiftSettings(q=q, w=100, prune=prune))
        found[(q, prune)] = (rewards.plan.nodes, round(rewards.plan.reward, 6))
    assert found == {(400, True): ((1,), 2.0), (1000, False): ((1,), 8.0), (1000, True): ((1,), 8.0),
                     (150, False): ((), 0.0)}
    assert sorted(calls) == [0, 1, 2]
    # Without the guard (the benchmark's oracle) the set stands on its reward alone.
    unguarded = choose(benefits, ShiftSettings(q=400, w=100), guard=False)
    assert unguarded.lower_bound == pytest.approx(2.0) and unguarded.significant


def test_a_training_log_floor_below_zero_counts_only_as_bias():
    """Root and leaf 1 save each of four window queries 1 block, leaf 2 nothing; on the
    training log trees grown on half of it lose 2 blocks per query on the root and leaf 1
    (leaf 2: 0). As noise (the default) a floor below 0 counts 0: B = 1, 1, 0. As bias it is
    added back: B = 3, 3, 0, and at q/w 4 the root (4·3 - 4 = 8) and leaf 1 (4·3 - 2 = 10) pay."""
    _, _, old = _two_leaf_partition()
    gains = {0: np.ones(4), 1: np.ones(4), 2: np.zeros(4)}
    floors = {0: np.full(6, -2.0), 1: np.full(6, -2.0), 2: np.zeros(6)}
    halves = np.arange(4) % 2
    noise = SubtreeBenefits(old, [4, 2, 2], [2.0, 2.0, 0.0], 4, gains.__getitem__, floors.__getitem__, halves)
    bias = SubtreeBenefits(old, [4, 2, 2], [4.0, 3.0, 1.0], 4, gains.__getitem__, floors.__getitem__, halves,
                           clip_floor=False)
    assert [noise.benefit(i) for i in range(3)] == [1.0, 1.0, 0.0]
    assert [bias.benefit(i) for i in range(3)] == [3.0, 3.0, 0.0] and bias.noise[0] == -2.0
    rewards = choose(bias, ShiftSettings(q=400, w=100, prune=False, floor="bias"))
    assert rewards.plan.nodes == (1,) and rewards.plan.reward == pytest.approx(10.0)
    assert rewards.lower_bound == pytest.approx(10.0)  # every query and floor alike: no spread


def test_the_floor_is_measured_only_where_it_can_change_b():
    """The floor costs as much as the gain (trees grown on the training log), and a floor
    counted only when positive cannot lift a mean gain <= 0 above B = 0: leaf 2's (gain 0)
    is never computed as noise; as bias (any sign) it could be, so it is."""
    _, _, old = _two_leaf_partition()
    gains = {0: np.ones(4), 1: np.ones(4), 2: np.array([1.0, -1.0, 0.0, -1.0])}
    asked: list[int] = []

    def floor(i: int) -> np.ndarray:
        asked.append(i)
        return np.full(6, -1.0 if i == 2 else 0.5)

    halves = np.arange(4) % 2
    noise = SubtreeBenefits(old, [4, 2, 2], [2.0, 2.0, 0.0], 4, gains.__getitem__, floor, halves)
    assert [noise.benefit(i) for i in range(3)] == [0.5, 0.5, 0.0] and asked == [0, 1]
    # judged on query 0 alone, leaf 2 gains 1: now its floor counts (clipped to 0)
    assert noise.benefit_on(np.array([True, False, False, False]))(2) == 1.0 and asked == [0, 1, 2]
    asked.clear()
    bias = SubtreeBenefits(old, [4, 2, 2], [2.0, 2.0, 0.0], 4, gains.__getitem__, floor, halves, clip_floor=False)
    assert [bias.benefit(i) for i in range(3)] == [0.5, 0.5, 0.75] and asked == [0, 1, 2]


def test_a_gain_one_half_of_the_window_does_not_confirm_is_noise():
    """A root over two leaves, C = 4, 2, 2; eight queries, halves 0, 1, 0, 1, ...; q/w 10.
    Leaf 1 saves 2 blocks to each query of half 0 and none of half 1, leaf 2 the reverse;
    the root saves nothing (the exact search: B breaks the pruning's property 2). On the
    whole window B = 1 for each leaf, R = 10·1 - 2 = 8, and
    {leaf 1, leaf 2} rewards 16: every query gains 2, so a bootstrap over the same queries
    would keep it. Chosen on half 0 the set is {leaf 1} (B = 2 there), which half 1 judges
    at 10·0 - 2 = -2; chosen on half 1, {leaf 2}, -2 on half 0. The guard drops the set.
    When leaf 1 saves 2 blocks to every query, each half chooses {leaf 1}, which the other
    half confirms: 10·2 - 2 = 18."""
    _, _, old = _two_leaf_partition()
    halves = np.arange(8) % 2
    one_sided = {0: np.zeros(8), 1: 2.0 * (halves == 0), 2: 2.0 * (halves == 1)}
    benefits = SubtreeBenefits(old, [4, 2, 2], [4.0, 2.0, 2.0], 8, one_sided.__getitem__, folds=halves)
    rewards = choose(benefits, ShiftSettings(q=1000, w=100, prune=False))
    assert rewards.plan.nodes == (1, 2) and rewards.plan.reward == pytest.approx(16.0)
    assert rewards.lower_bound == pytest.approx(-2.0) and not rewards.significant

    confirmed = {0: np.zeros(8), 1: np.full(8, 2.0), 2: np.zeros(8)}
    benefits = SubtreeBenefits(old, [4, 2, 2], [4.0, 2.0, 2.0], 8, confirmed.__getitem__, folds=halves)
    rewards = choose(benefits, ShiftSettings(q=1000, w=100, prune=False))
    assert rewards.plan.nodes == (1,) and rewards.lower_bound == pytest.approx(18.0) and rewards.significant



def test_with_three_folds_the_guard_chooses_outside_each_fold_and_judges_on_it():
    """The same partition and q/w 10; six queries in folds 0, 1, 2, 0, 1, 2. Leaf 1 saves 2
    blocks to each query of fold 0 only: on the whole window B = 2/3, R = 10·2/3 - 2 = 4.67, so
    {leaf 1} is the best set. Chosen outside fold 0 (gain 0 there) the set is empty: 0 on
    fold 0. Chosen outside fold 1 (folds 0 and 2, mean gain 1: R = 8) it is {leaf 1}, which
    fold 1 judges at 10·0 - 2 = -2; outside fold 2 the same, -2 on fold 2. The bound is the
    folds' mean, -4/3 (every fold's gains are equal, so resampling moves nothing)."""
    _, _, old = _two_leaf_partition()
    folds = np.arange(6) % 3
    one_fold = {0: np.zeros(6), 1: 2.0 * (folds == 0), 2: np.zeros(6)}
    benefits = SubtreeBenefits(old, [4, 2, 2], [4.0, 2.0, 2.0], 6, one_fold.__getitem__, folds=folds)
    rewards = choose(benefits, ShiftSettings(q=1000, w=100, prune=False))
    assert rewards.plan.nodes == (1,) and rewards.plan.reward == pytest.approx(10 * 2 / 3 - 2)
    assert rewards.lower_bound == pytest.approx(-4 / 3) and not rewards.significant

def test_shift_settings_refuse_nonsense():
    for bad in ({"q": 0}, {"w": -1}, {"window_hours": 0}, {"min_references": 0}, {"floor": "none"}):
        with pytest.raises(ValueError):
            ShiftSettings(**bad)


def test_the_asset_extra_is_small_and_names_the_subtrees(tmp_path):
    table = {"table": "lineitem", "reward": 29.1, "window": ["2026-11-24T10:00:00+00:00", "2026-11-25T16:00:00+00:00"],
             "q": 1000, "w": 2.5, "references": 96,
             "partitions": [{"partition": "", "version": 1, "subtrees_evaluated": 21, "subtrees_total": 49,
                             "chosen": [{"node": 2, "leaves": [0, 1, 2], "blocks": 15, "reads": 10.3,
                                         "benefit": 2.7, "reward": 12.0}]}]}
    extra = asset_extra(table)
    assert extra["subtrees"] == [{"partition": "", "version": 1, "node": 2, "blocks": 15, "reward": 12.0}]
    assert extra["table"] == "lineitem" and extra["reward"] == 29.1 and json.dumps(extra)
    assert (extra["subtrees_evaluated"], extra["subtrees_total"]) == (21, 49)
    # the reorganization it triggers measures again with the monitor's q, w and window length
    assert (extra["q"], extra["w"], extra["window_hours"]) == (1000, 2.5, 30.0)
    assert report_path(tmp_path, "layout_workload_monitor__manual__2026-11-25T10:00:00+00:00").parent.name == (
        "layout_workload_monitor__manual__2026-11-25T10_00_00_00_00")


# ------------------------------------------------------------------ Spark


@pytest.fixture(scope="module")
def shifted_catalog(spark, tpch_sf001, tmp_path_factory):
    """lineitem (SF 0.01) laid out by qdtree for TPC-H templates 1-11 by the nightly steps."""
    home = tmp_path_factory.mktemp("shift")
    return lineitem_trained_on_1_to_11(spark, tpch_sf001, tmp_path_factory, home), home


@pytest.mark.slow
def test_a_shifted_window_has_a_positive_reward_and_the_trained_one_none(spark, shifted_catalog):
    from layout_core.catalog import Catalog
    from layout_core.flows.reorg.shift import measure_shift

    url, _ = shifted_catalog
    with Catalog(url) as catalog:
        # the window the layout was made for, with w as `layout calibrate` measures it on local
        # disk (2-4; the default is 100, and a larger w only lowers a reward): q/w = 100 would pay
        # for a 1% gain, and a tree fitted to the window's own literals finds one; out of sample
        # and over the training log's noise floor, it does not
        same = measure_shift(spark, catalog, SCHEMA, "lineitem", ShiftSettings(w=2), NOW,
                             query_history(range(1, 12), NOW))
        shifted = {prune: measure_shift(spark, catalog, SCHEMA, "lineitem", ShiftSettings(q=5000, prune=prune), NOW,
                                        query_history(range(12, 23), NOW)) for prune in (True, False)}
        tiny = measure_shift(spark, catalog, SCHEMA, "lineitem", ShiftSettings(q=5000), NOW,
                             query_history([6], NOW)[:3])
        # twelve runs of one query: enough references, but all in one fold
        repeated = measure_shift(spark, catalog, SCHEMA, "lineitem", ShiftSettings(q=5000), NOW,
                                 query_history([6], NOW)[:1] * 12)
    assert same.reward == 0 and not same.reorganize and same.references > 50, same.reason
    (part,) = same.partitions
    assert part.chosen == () and part.blocks == 50 and 0 < part.reads < 50
    # the training log recorded in the layout's plan gave the noise floor
    assert part.noise_queries > 50 and 0 < part.reads_simulated < 50

    pruned, full = shifted[True], shifted[False]
    assert pruned.reorganize and pruned.reward > 0
    (p_pruned,), (p_full,) = pruned.partitions, full.partitions
    # A greedy T' need not satisfy MTO's property 2 (B(T) >= B(left) + B(right)), so pruning may
    # miss a little; the exhaustive search is the best set over the B it computed.
    assert full.reward >= pruned.reward - 1e-9 and pruned.reward >= 0.8 * full.reward
    assert p_pruned.subtrees_evaluated < p_full.subtrees_evaluated == p_full.subtrees_total
    assert 0 < p_pruned.blocks_chosen <= 50
    for c in p_pruned.chosen:
        assert 0 < c.benefit <= c.reads <= c.blocks and c.reward == pytest.approx(50 * c.benefit - c.blocks)

    assert tiny.partitions == () and "too few" in tiny.reason
    (alone,) = repeated.partitions
    assert repeated.reward == 0 and "one fold" in alone.reason


@pytest.mark.slow
def test_against_a_reference_window_an_unchanged_window_stays_quiet_and_a_shifted_one_pays(
        spark, shifted_catalog, tmp_path):
    """floor "reference": the day after the layout went live, new instances of its templates
    1-11 (seed 6); three days after it, a window of templates 1-11 (seed 5) and one of 12-22."""
    import shutil

    from layout_core.catalog import Catalog
    from layout_core.flows.reorg.shift import measure_shift

    url, home = shifted_catalog
    shutil.copy(home / "catalog.db", tmp_path / "catalog.db")  # the reference stays out of the other tests' history
    settings = ShiftSettings(w=2, floor="reference")
    with Catalog(f"sqlite:///{tmp_path / 'catalog.db'}") as catalog:
        live = catalog.snapshot().layouts_of("lineitem")[0].version.activated_at
        catalog.record_queries(query_history(range(1, 12), live + dt.timedelta(hours=1), seed=6))
        now = live + dt.timedelta(days=3)
        same = measure_shift(spark, catalog, SCHEMA, "lineitem", settings, now, query_history(range(1, 12), now))
        shifted = measure_shift(spark, catalog, SCHEMA, "lineitem", replace(settings, q=5000), now,
                                query_history(range(12, 23), now))
        # the day after the layout went live: no reference yet, the training log's floor instead
        young = {floor: measure_shift(spark, catalog, SCHEMA, "lineitem", replace(settings, floor=floor),
                                      live + dt.timedelta(hours=25),
                                      query_history(range(1, 12), live + dt.timedelta(hours=24)))
                 for floor in ("reference", "reference-in-sample", "noise")}
    (part,) = same.partitions
    assert part.floor_log.startswith("reference window") and part.noise_queries == 88
    assert same.reward == 0 and part.chosen == (), part.reason
    (moved,) = shifted.partitions
    assert shifted.reorganize and moved.floor_log.startswith("reference window") and moved.blocks_chosen > 0
    # B out of sample, less the reference window's: the chosen subtrees' B is below their reads now
    for c in moved.chosen:
        assert 0 < c.benefit <= c.reads <= c.blocks
    for floor in ("reference", "reference-in-sample"):  # both measured as with "noise"
        (early,) = young[floor].partitions
        assert early.floor_log.startswith("no reference window") and "training log" in early.floor_log
        assert early.noise_queries > 50 and young[floor].reward == 0
        assert (early.root_gain, early.root_noise) == (young["noise"].partitions[0].root_gain,
                                                       young["noise"].partitions[0].root_noise)


@pytest.mark.slow
def test_the_monitor_dag_emits_an_asset_event_for_a_shifted_table(shifted_catalog, tmp_path):
    from layout_core.airflow.dag_run import airflow_env, run_dag_test
    from layout_core.catalog import Catalog

    url, home = shifted_catalog
    now = dt.datetime.now(UTC)
    with Catalog(url) as catalog:
        catalog.record_queries(query_history(range(12, 23), now - dt.timedelta(minutes=5)))
    env = airflow_env(tmp_path / "airflow", url, home / "wh")
    run_dag_test(env, "layout_workload_monitor", {"tables": "lineitem", "q": 5000})
    with sqlite3.connect(tmp_path / "airflow" / "airflow.db") as db:
        events = db.execute("SELECT a.name, e.extra FROM asset_event e JOIN asset a ON a.id = e.asset_id").fetchall()
        (xcom,) = db.execute("SELECT value FROM xcom WHERE dag_id = 'layout_workload_monitor' "
                             "AND task_id = 'emit_shift_events' AND key = 'return_value'").fetchall()
    (name, extra), = [(n, json.loads(e)) for n, e in events if n == "layout_shift_lineitem"]
    assert extra["table"] == "lineitem" and extra["reward"] > 0 and extra["subtrees"]
    assert all(s["blocks"] > 0 for s in extra["subtrees"])
    numbers = json.loads(xcom[0])
    assert numbers["lineitem"]["reorganize"] is True and numbers["lineitem"]["subtrees"] == len(extra["subtrees"])
