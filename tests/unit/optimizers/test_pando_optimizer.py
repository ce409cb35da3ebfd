"""The registered `pando` optimizer: settings, the plan it makes, k = 1 is mto,
trees=auto, and the paper's correlated-columns example (Fig. 2) worked by hand
and routed by the catalog's router."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from layout_core.base.schema import TableSchema
from layout_core.optimizers import CandidateCut, PlanError, PlanWorkload, VectorSample, get_optimizer, plan_layout
from layout_core.optimizers.plan import LayoutPlan, TreeBlocks, TupleBlocks
from layout_core.predicates import Column, Compare
from layout_core.skipping.router import LayoutIndex, route_layout

T = TableSchema("t", (("id", "bigint"), ("x", "int"), ("y", "int")), ("id",))
X, Y = Column("x", "int"), Column("y", "int")

# Fig. 2: x and y are correlated. Cut 0: x < 50, cut 1: y < 50.
# 45 rows have both, 45 neither, two groups of 5 outliers have one of them.
# Queries: q0 x < 40 (implies cut 0), q1 x > 60 (disjoint with cut 0),
#          q2 y < 40 (implies cut 1), q3 y > 60 (disjoint with cut 1).
CUTS = [CandidateCut(Compare(X, "<", 50)), CandidateCut(Compare(Y, "<", 50))]
XY = VectorSample(("11", "10", "01", "00"), [45, 5, 5, 45], 100)
XY_WORKLOAD = PlanWorkload(implies=((True, False), (False, False), (False, True), (False, False)),
                           disjoint=((False, False), (True, False), (False, False), (False, True)),
                           range_columns=("x",))
QUERIES = [Compare(X, "<", 40), Compare(X, ">", 60), Compare(Y, "<", 40), Compare(Y, ">", 60)]
# the bits of each vector key, for the blocks' union / all bit vectors below
BITS = {"11": 0b11, "10": 0b01, "01": 0b10, "00": 0b00}  # bit i = cut i


def _plan(optimizer: str, **settings) -> LayoutPlan:
    return plan_layout(optimizer, T, XY, CUTS, XY_WORKLOAD, {"block_rows": 10, "sample_rows": 0, **settings})


def _blocks_read(block_keys: list[list[str]], block_rows: list[int]) -> tuple[int, int]:
    """(blocks, rows) the four queries read through the router, given the vector
    keys whose rows each block holds (worked out by hand below)."""

    class Block:
        def __init__(self, i, keys, rows):
            self.block_id, self.row_count, self.stats = i, rows, {}
            self.union_bits = self.all_bits = 0
            self.union_bits = int(np.bitwise_or.reduce([BITS[k] for k in keys]))
            self.all_bits = int(np.bitwise_and.reduce([BITS[k] for k in keys]))

    index = LayoutIndex.from_blocks("t", [Block(i, k, r) for i, (k, r) in enumerate(zip(block_keys, block_rows))],
                                    [c.predicate for c in CUTS])
    routes = [route_layout(q, q, index) for q in QUERIES]
    return sum(len(r.blocks) for r in routes), sum(r.rows for r in routes)


def test_settings_take_a_number_of_trees_or_auto():
    pando = get_optimizer("pando")
    assert pando.resolve({})["trees"] == 3
    assert pando.resolve({"trees": "auto"})["trees"] == "auto"
    assert pando.resolve({"trees": "2"})["trees"] == 2
    with pytest.raises(PlanError, match="pando takes 1 to 8 trees .or auto., not 0"):
        pando.resolve({"trees": 0})
    with pytest.raises(PlanError, match="pando takes 1 to 8 trees .or auto., not 50"):
        pando.resolve({"trees": 50})
    with pytest.raises(PlanError, match="setting trees takes an integer or auto, not 'many'"):
        pando.resolve({"trees": "many"})
    with pytest.raises(PlanError, match="max_tuples must be positive"):
        pando.resolve({"max_tuples": 0})
    with pytest.raises(PlanError, match="tuples_per_block must be positive"):
        pando.resolve({"tuples_per_block": 0})


def test_pando_samples_as_mto_does():
    # equal footing: one sample for k = 1 (mto's plan) and every other k
    assert get_optimizer("pando").resolve({})["sample_rows"] == get_optimizer("mto").resolve({})["sample_rows"]


def test_the_k_tuple_bound_scales_with_the_blocks():
    from layout_core.optimizers.pando import tuple_bound

    assert tuple_bound(rows=100, block_rows=10, per_block=16, cap=10_000) == 160
    assert tuple_bound(rows=101, block_rows=10, per_block=16, cap=10_000) == 176  # 11 blocks
    assert tuple_bound(rows=600_000, block_rows=100, per_block=16, cap=10_000) == 10_000  # the cap
    assert tuple_bound(rows=0, block_rows=10, per_block=16, cap=10_000) == 1
    # A plan on a sample counts the blocks in sampled rows: 100 of 1,000 rows
    # sampled, blocks of 100 rows are 10 sampled rows, 10 blocks.
    sample = VectorSample(XY.keys, XY.counts, 1000)
    plan = plan_layout("pando", T, sample, CUTS, XY_WORKLOAD, {"block_rows": 100, "sample_rows": 0, "trees": 2})
    assert plan.choices["k_tuple_bound"] == 160


def test_mto_reads_whole_leaves_for_the_other_column():
    # mto: root cut on x < 50 (ties with y < 50, lowest cut wins); a cut on
    # y < 50 below it would leave 5 rows (< 10). Two leaves of 50 rows, 5
    # blocks each. q0, q1 read one leaf; q2, q3 read both.
    plan = _plan("mto")
    assert isinstance(plan.assignment, TreeBlocks)
    assert plan.assignment.leaf_n_blocks == (5, 5)
    leaf0, leaf1 = ["11", "10"], ["01", "00"]
    assert _blocks_read([leaf0] * 5 + [leaf1] * 5, [10] * 10) == (5 + 5 + 10 + 10, 300)


def test_pando_two_trees_read_fewer_blocks_than_mto_on_correlated_columns():
    # Tree 0 cuts x < 50, tree 1 cuts y < 50 (in tree 0 it would save nothing
    # more: the queries on y skip those rows through tree 1). Cells, in
    # lexicographic order of (leaf in tree 0, leaf in tree 1):
    #   (0,0) = "11": 45 rows -> 45 // 10 = 4 blocks (12, 11, 11, 11), blocks 0-3
    #   (0,1) = "10":  5 rows -> merged with (1,0) into one block of 10, block 4
    #   (1,0) = "01":  5 rows
    #   (1,1) = "00": 45 rows -> blocks 5-8
    plan = _plan("pando", trees=2)
    rule = plan.assignment
    assert isinstance(rule, TupleBlocks) and rule.k == 2
    assert rule.cells == ((0, 0), (0, 1), (1, 0), (1, 1))
    assert rule.cell_first_block == (0, 4, 4, 5) and rule.cell_n_blocks == (4, 1, 1, 4)
    assert plan.expected_block_rows == (12, 11, 11, 11, 10, 12, 11, 11, 11)
    assert rule.sort_columns == ("x",)
    assert plan.choices["trees"] == 2 and plan.choices["k_tuples"] == 4
    # Each query reads its 45-row cell (4 blocks) and the outlier block: 5 blocks, 55 rows.
    blocks = [["11"]] * 4 + [["10", "01"]] + [["00"]] * 4
    assert _blocks_read(blocks, [12, 11, 11, 11, 10, 12, 11, 11, 11]) == (20, 220)
    # mto above: 30 blocks and 300 rows


def test_two_trees_around_mtos_tree_make_the_fig_2c_layout():
    # first_tree=mto: tree 0 is mto's tree (x < 50, leaves of 50 rows), tree 1
    # grows around it (y < 50). The 45-row cells fill 4 blocks inside their
    # leaf of tree 0; each leaf leaves its 5-row off-diagonal cell unfinished,
    # and the two make the outlier block (block 4), as in the test above.
    plan = _plan("pando", trees=2, first_tree="mto")
    rule = plan.assignment
    assert rule.cells == ((0, 0), (0, 1), (1, 0), (1, 1))
    assert rule.cell_first_block == (0, 4, 4, 5) and rule.cell_n_blocks == (4, 1, 1, 4)
    assert plan.choices["first_tree"] == "mto"
    with pytest.raises(PlanError, match="setting first_tree takes one of grown, mto, not 'best'"):
        get_optimizer("pando").resolve({"first_tree": "best"})


def test_one_tree_is_mtos_plan():
    rng = np.random.default_rng(7)
    keys = tuple(sorted({"".join(rng.choice(["0", "1"], 2)) for _ in range(10)}))
    sample = VectorSample(keys, rng.integers(1, 60, len(keys)), 400)
    settings = {"block_rows": 40, "sample_rows": 0}
    mto = plan_layout("mto", T, sample, CUTS, XY_WORKLOAD, settings)
    pando = plan_layout("pando", T, sample, CUTS, XY_WORKLOAD, {**settings, "trees": 1})
    assert pando.optimizer == "pando" and pando.choices == {"trees": 1}
    assert pando.assignment == mto.assignment
    assert pando.expected_block_rows == mto.expected_block_rows


def test_trees_auto_keeps_the_smallest_k_within_two_percent_of_the_best():
    # Each k is fitted to one half of the queries and measured on the other:
    # {q0 x < 40, q2 y < 40} and {q1 x > 60, q3 y > 60} (alternate distinct
    # rows). Fitted to q0 and q2: k = 1 (mto) cuts x < 50, two leaves of 50
    # rows; q1 reads the 50 rows with x >= 50, q3 all 100 (no tree or cut
    # bit rules out y): 150 / 200. k = 2 cuts x < 50 in one tree and y < 50
    # in the other, the two 5-row outlier cells share one block: q1 and q3
    # each read a 45-row cell and that block, 110 / 200. k = 3 and 4 add
    # single-leaf trees. The other way round is the mirror image.
    plan = _plan("pando", trees="auto")
    assert plan.choices["trees_evaluated"] == [[1, 0.75], [2, 0.55], [3, 0.55], [4, 0.55]]
    assert plan.choices["trees_evaluated_on"] == "held-out queries"
    assert plan.choices["trees"] == 2 and plan.assignment.k == 2
    again = LayoutPlan.from_json(plan.to_json())  # the figures are kept with the plan (and in the catalog)
    assert again.choices["trees_evaluated"] == [[1, 0.75], [2, 0.55], [3, 0.55], [4, 0.55]]
    assert again.assignment == plan.assignment


def test_trees_auto_fits_each_half_to_its_own_cuts():
    # The halves are {q0 x < 40, q2 y < 40} and {q1 x > 60, q3 y > 60}. Say
    # half 0's literals made only cut 0 (x < 50) and half 1's only cut 1
    # (y < 50). Fitted to half 0 with cut 0 alone, every k cuts x < 50 in
    # one tree and nothing else; measured with cut 0 alone, q1 reads the 50
    # rows with x >= 50 and q3 all 100: 0.75. The mirror image: 0.75. The
    # gain of k = 2 (0.55 in the test above) came from the other half's cut.
    workload = PlanWorkload(XY_WORKLOAD.implies, XY_WORKLOAD.disjoint, range_columns=("x",),
                            held_out_cuts=((True, False), (False, True)))
    plan = plan_layout("pando", T, XY, CUTS, workload, {"block_rows": 10, "sample_rows": 0, "trees": "auto"})
    assert plan.choices["trees_evaluated"] == [[1, 0.75], [2, 0.75], [3, 0.75], [4, 0.75]]
    assert plan.choices["trees_evaluated_on"] == "held-out queries, each half with its own cuts"
    assert plan.choices["trees"] == 1
    assert PlanWorkload.from_json(workload.to_json()) == workload
    # features written before the masks existed read back without them
    old = {k: v for k, v in workload.to_json().items() if k != "held_out_cuts"}
    assert PlanWorkload.from_json(old).held_out_cuts == ()


def test_trees_auto_skips_a_k_that_needs_leaves_over_one_block():
    # With at most 3 k-tuples, every k >= 2 fitted to a half makes 4 (x < 50
    # in one tree, y < 50 in another) at any leaf threshold up to one block
    # (10 rows): only k = 1 is measured (the first test's 0.75) and kept.
    plan = _plan("pando", trees="auto", max_tuples=3)
    assert plan.choices["trees_evaluated"] == [[1, 0.75], [2, None], [3, None], [4, None]]
    assert plan.choices["trees"] == 1 and plan.choices["k_tuple_bound"] == 3
    assert isinstance(plan.assignment, TreeBlocks)


def test_trees_auto_skips_a_k_that_fits_each_half_but_not_all_the_queries():
    # As in the first trees=auto test (k = 2, 3, 4 all 0.55), but say k = 2's
    # trees on all four queries make more k-tuples than the bound: k = 2 is
    # skipped (its figure None) and the rule picks among the rest: k = 3.
    from unittest import mock

    import layout_core.algorithms.pando as algorithm
    from layout_core.algorithms.pando import TupleBoundError

    grow = algorithm.grow_layout

    def over_the_bound_on_all_queries(vc, workload, k, *args, **kwargs):
        if k == 2 and workload.n_queries == 4:
            raise TupleBoundError(2, 10, 5, 4)
        return grow(vc, workload, k, *args, **kwargs)

    with mock.patch.object(algorithm, "grow_layout", over_the_bound_on_all_queries):
        plan = _plan("pando", trees="auto")
    assert plan.choices["trees_evaluated"] == [[1, 0.75], [2, None], [3, 0.55], [4, 0.55]]
    assert plan.choices["trees"] == 3 and plan.assignment.k == 3


def test_trees_auto_stops_at_the_first_k_that_reads_more_than_the_best():
    # Say the held-out estimates were k = 1: 0.60, 2: 0.70, 3: 0.50. k = 2 reads over
    # 2% more than k = 1, so k = 3 is not tried (or grown) and k = 1 is kept; a k
    # within 2% of the best goes on (the second run: 2: 0.61, then 3: 0.50 wins).
    from unittest import mock

    import layout_core.algorithms.pando as algorithm

    grow, grown = algorithm.grow_layout, []

    def recorded(vc, workload, k, *args, **kwargs):
        grown.append(k)
        return grow(vc, workload, k, *args, **kwargs)

    for estimates, figures, chosen in (({1: 0.6, 2: 0.7, 3: 0.5, 4: 0.5}, [[1, 0.6], [2, 0.7]], 1),
                                       ({1: 0.6, 2: 0.61, 3: 0.5, 4: 0.5}, [[1, 0.6], [2, 0.61], [3, 0.5], [4, 0.5]],
                                        3)):
        grown.clear()
        with mock.patch.object(algorithm, "grow_layout", recorded), \
                mock.patch.object(algorithm, "rows_read_share", lambda vc, w, trees, *a: estimates[len(trees)]):
            plan = _plan("pando", trees="auto")
        assert plan.choices["trees_evaluated"] == figures and plan.choices["trees"] == chosen
        assert max(grown, default=1) == max(k for k, _ in figures)  # no larger k was grown


def test_an_explicit_k_over_one_block_says_so(caplog):
    # trees=2 with at most 3 k-tuples: thresholds 2, 4, 8, 16, 32 rows all let
    # both trees cut 50/50 (4 k-tuples), 64 allows no cut (1); bisection
    # probes 48 (fails), 56 and 52 (pass): leaves of 52 rows, 5.2 blocks.
    with caplog.at_level(logging.WARNING, "layout.pando"):
        plan = _plan("pando", trees=2, max_tuples=3)
    assert plan.choices["threshold_sampled_rows"] == 52 and plan.choices["threshold_blocks"] == 5.2
    assert "pando t: k = 2 needs leaves of 5.2 blocks to stay within 3 k-tuples" in caplog.text
    assert plan.choices["k_tuples"] == 1


def test_trees_auto_keeps_one_tree_when_more_trees_fit_only_the_training_literals():
    # q0 x < 40 and q1 y < 40. Measured on themselves, k = 2 (the Fig. 2 plan,
    # 55 + 55 rows) beats mto (q0 50, q1 100 rows). Fitted to q0 alone, every
    # k cuts only x < 50, and q1 reads all 100 rows. Fitted to q1 alone, every
    # k cuts only y < 50; the blocks of a leaf are ranges of x, the sort column
    # (rank 0: x < 50, rank 1: x >= 50). Leaf y < 50 (45 rows x < 50, then 5)
    # has no block without x < 50 rows; leaf y >= 50 (5 rows x < 50, then 45)
    # has four blocks with none, which q0 skips: it reads 60 rows. Every k:
    # (1.0 + 0.6) / 2 = 0.8. No k generalizes better than one tree, so auto
    # keeps mto's plan.
    workload = PlanWorkload(implies=((True, False), (False, True)), disjoint=((False, False), (False, False)),
                            range_columns=("x",))
    plan = plan_layout("pando", T, XY, CUTS, workload, {"block_rows": 10, "sample_rows": 0, "trees": "auto"})
    assert plan.choices["trees_evaluated"] == [[1, 0.8], [2, 0.8], [3, 0.8], [4, 0.8]]
    assert plan.choices["trees"] == 1 and isinstance(plan.assignment, TreeBlocks)
    assert plan.assignment == plan_layout("mto", T, XY, CUTS, workload,
                                          {"block_rows": 10, "sample_rows": 0}).assignment


def test_trees_auto_measures_on_the_training_queries_when_they_cannot_be_split():
    # One query, q0 x < 40: every k cuts x < 50 and q0 reads 50 of 100 rows.
    workload = PlanWorkload(implies=((True, False),), disjoint=((False, False),), range_columns=("x",))
    plan = plan_layout("pando", T, XY, CUTS, workload, {"block_rows": 10, "sample_rows": 0, "trees": "auto"})
    assert plan.choices["trees_evaluated_on"] == "training queries"
    assert plan.choices["trees_evaluated"] == [[1, 0.5], [2, 0.5], [3, 0.5], [4, 0.5]]
    assert plan.choices["trees"] == 1


def test_held_out_halves_keep_identical_references_together():
    from layout_core.algorithms.pando import held_out_halves
    from layout_core.algorithms.types import Workload

    # references: a, b, a (the same predicate again), c, b -> halves {a, a, c} and {b, b}
    a, b, c = (True, False), (False, True), (False, False)
    implies = np.array([a, b, a, c, b])
    disjoint = np.zeros((5, 2), dtype=bool)
    disjoint[3, 0] = True  # c: disjoint with cut 0
    first, second = held_out_halves(Workload(implies, disjoint, np.array([1.0, 2.0, 3.0, 4.0, 5.0])))
    assert first.implies.tolist() == [list(a), list(a), list(c)] and first.weights.tolist() == [1.0, 3.0, 4.0]
    assert first.disjoint.tolist() == [[False, False], [False, False], [True, False]]
    assert second.implies.tolist() == [list(b), list(b)] and second.weights.tolist() == [2.0, 5.0]
    # one distinct reference cannot be split: trees=auto measures on the training queries
    assert held_out_halves(Workload(np.array([a, a]), np.zeros((2, 2), dtype=bool))) is None
    # nor can a half whose queries never run (weight 0)
    assert held_out_halves(Workload(np.array([a, b]), np.zeros((2, 2), dtype=bool), np.array([1.0, 0.0]))) is None


def test_a_workload_without_usable_predicates_is_one_leaf_in_sort_order(caplog):
    with caplog.at_level(logging.WARNING, "layout.pando"):
        plan = plan_layout("pando", T, VectorSample(("",), [95], 95), [], PlanWorkload(),
                           {"block_rows": 10, "sample_rows": 0, "sort_column": "y"})
    assert "no usable predicate" in caplog.text
    assert isinstance(plan.assignment, TreeBlocks) and plan.assignment.leaf_n_blocks == (9,)
    assert plan.assignment.sort_columns == ("y",)


def test_a_table_smaller_than_one_block_is_one_block():
    small = VectorSample(("11", "10", "01", "00"), [4, 1, 1, 4], 10)
    plan = plan_layout("pando", T, small, CUTS, XY_WORKLOAD, {"block_rows": 50, "sample_rows": 0, "trees": 2})
    assert plan.n_blocks == 1 and plan.expected_block_rows == (10,)


def test_duplicate_and_contradictory_cuts_change_nothing():
    # cut 2 repeats cut 0; cut 3 holds for no row (every query is disjoint with it)
    cuts = CUTS + [CandidateCut(Compare(X, "<", 50)), CandidateCut(Compare(X, "<", -1000))]
    sample = VectorSample(("1110", "1010", "0100", "0000"), [45, 5, 5, 45], 100)
    workload = PlanWorkload(implies=tuple(r + (r[0], False) for r in XY_WORKLOAD.implies),
                            disjoint=tuple(r + (r[0], True) for r in XY_WORKLOAD.disjoint))
    plan = plan_layout("pando", T, sample, cuts, workload, {"block_rows": 10, "sample_rows": 0, "trees": 2})
    assert plan.assignment.cells == ((0, 0), (0, 1), (1, 0), (1, 1))
    assert plan.assignment.cell_n_blocks == (4, 1, 1, 4)


def test_unseen_k_tuples_fall_back_to_a_block_of_their_tree_0_leaf():
    rule = _plan("pando", trees=2).assignment
    # tree 0's leaf 0 ("1?") has cells (0,0) of 45 rows and (0,1) of 5: the larger one's first block
    assert rule.fallback_block == (0, 5)
    assert len(rule.routing_trees) == 2


def test_the_plan_keeps_the_queries_each_leaf_is_admitted_by():
    rule = _plan("pando", trees=2).assignment
    # tree 0 (x < 50): leaf 0 is skipped by q1 (x > 60), leaf 1 by q0 (x < 40);
    # tree 1 (y < 50): leaf 0 by q3 (y > 60), leaf 1 by q2 (y < 40). Bits q0..q3, packed.
    assert rule.leaf_reads == (("b0", "70"), ("e0", "d0"))
    assert rule.query_weights == (1.0, 1.0, 1.0, 1.0)
    assert [a.tolist() for a in rule.admissions()[0].T] == [[True, False, True, True], [False, True, True, True]]


def test_cells_the_sample_never_saw_go_where_they_add_the_fewest_rows_read():
    from layout_core.algorithms.pando import place_cells

    # Blocks: b0 100 rows read by q0, b1 100 rows read by q1; weights q0 = 2, q1 = 1, q2 = 1.
    planned = np.array([[True, False], [False, True], [False, False]])
    weights = np.array([2.0, 1.0, 1.0])
    # Adding r rows read by A to a block of R rows read by B costs R w(A - B) + r w(B - A):
    #   u0, 10 rows read by q0:      b0 100*0 + 10*0 = 0;    b1 100*2 + 10*1 = 210  -> b0
    #   u1, 10 rows read by nobody:  b0 10*2 = 20;           b1 10*1 = 10           -> b1
    #   u2, 10 rows read by q0, q1:  b0 100*1 = 100;         b1 100*2 = 200         -> b0
    #   u3, 10 rows read by q2:      b0 100*1 + 10*2 = 120;  b1 100*1 + 10*1 = 110 -> b1
    new_reads = np.array([[True, False, True, False], [False, False, True, False], [False, False, False, True]])
    got = place_cells(new_reads, np.array([10, 10, 10, 10]), planned, np.array([100, 100]), weights)
    assert got.tolist() == [0, 1, 0, 1]
    # nothing to place; a tie goes to the lower block
    assert place_cells(np.zeros((3, 0), bool), np.zeros(0), planned, np.array([100, 100]), weights).tolist() == []
    assert place_cells(np.zeros((3, 1), bool), np.array([5]), planned, np.array([100, 100]),
                       np.ones(3)).tolist() == [0]


def test_a_block_that_took_a_new_cell_draws_the_next_one_placed_after_it(monkeypatch):
    from layout_core.algorithms import pando

    # b0: 10 rows read by q0 (weight 2); b1: 40 rows read by q1 (weight 1). Two new cells read
    # by q2 (weight 1), of 20 and 60 rows. Against the planned blocks:
    #   the 60: b0 10*1 + 60*2 = 130, b1 40*1 + 60*1 = 100 -> b1
    #   the 20: b0 10*1 + 20*2 = 50,  b1 40*1 + 20*1 = 60  -> b0
    # One at a time, largest first: after the 60, b1 holds 100 rows read by q1 and q2, and
    #   the 20: b0 50, b1 100*0 + 20*1 = 20 -> b1.
    planned = np.array([[True, False], [False, True], [False, False]])
    new_reads = np.array([[False, False], [False, False], [True, True]])
    weights = np.array([2.0, 1.0, 1.0])
    args = (new_reads, np.array([20, 60]), planned, np.array([10, 40]), weights)
    assert pando.place_cells(*args).tolist() == [0, 1]  # one chunk: both against the planned blocks
    monkeypatch.setattr(pando, "_PLACE_CHUNK", 1)
    assert pando.place_cells(*args).tolist() == [1, 1]


def test_a_new_k_tuple_of_the_fig_2_plan_joins_the_block_of_the_outliers():
    from dataclasses import replace

    from layout_core.optimizers.pando import place_unseen_cells

    plan = _plan("pando", trees=2)
    # Blocks (see above): 0-3 cell (0,0), read by q0 q2 (12, 11, 11, 11 rows); 4 cells (0,1) and
    # (1,0), read by all four (10 rows); 5-8 cell (1,1), read by q1 q3 (12, 11, 11, 11 rows).
    # 5 more rows of (1,0), read by q1 q2, cost R w(A - B) + r w(B - A):
    #   block 0: 12*1 + 5*1 = 17, blocks 1-3: 16; block 4: 10*0 + 5*2 = 10; block 5: 17, 6-8: 16.
    got = place_unseen_cells(plan.assignment, plan.expected_block_rows, [(1, 0)], [5])
    assert got.tolist() == [4]
    # a plan written before the leaves' queries were kept: the fallback block of the tree-0 leaf
    old = replace(plan.assignment, leaf_reads=(), query_weights=())
    assert place_unseen_cells(old, plan.expected_block_rows, [(1, 0), (0, 1)], [5, 5]).tolist() == [5, 0]


def test_the_cells_are_merged_again_on_the_rows_of_the_whole_partition():
    from dataclasses import replace

    from layout_core.algorithms.pando import Cells
    from layout_core.optimizers.pando import exact_plan

    # Fig. 2's plan (test above), then the partition's own counts: cell (0,1)
    # ("10") has 12 rows, a block of its own; (1,0) ("01") has 3 and is left
    # over. With the cells' cut bits q0 (x < 40) reads the cells with bit 0 set,
    # q1 those without, q2 / q3 the same on bit 1: (0,0) {q0, q2}, (0,1) {q0, q3},
    # (1,0) {q1, q2}, (1,1) {q1, q3}. The leftover's 3 rows joining a piece of R
    # rows of (0,0) or (1,1) add (R + 3)·3 - 2R - 6 = R + 3 (14 for the 11-row
    # pieces), joining (0,1) adds 15·4 - 24 - 6 = 30: it joins the first 11-row
    # piece (fewest rows, then the lowest key), block 1.
    plan = _plan("pando", trees=2)
    cells = Cells([[0, 0], [0, 1], [1, 0], [1, 1]], [45, 12, 3, 45],
                  any_cut=[[1, 1], [1, 0], [0, 1], [0, 0]], all_cut=[[1, 1], [1, 0], [0, 1], [0, 0]])
    exact = exact_plan(plan, cells)
    rule = exact.assignment
    assert rule.cells == ((0, 0), (0, 1), (1, 0), (1, 1))
    assert rule.cell_first_block == (0, 4, 1, 5) and rule.cell_n_blocks == (4, 1, 1, 4)
    assert exact.expected_block_rows == (12, 14, 11, 11, 12, 12, 11, 11, 11) and exact.rows == 105
    assert exact.choices["cells_counted"] == "every row" and exact.choices["blocks_on_the_sample"] == 9
    assert rule.trees == plan.assignment.trees and rule.leaf_reads == plan.assignment.leaf_reads
    assert exact_plan(exact, cells) is exact  # merged once: a retry counts nothing again
    # a plan of an earlier version, without its queries' cut relations, is kept as it is
    older = replace(plan, assignment=replace(plan.assignment, query_implies=(), query_disjoint=()))
    assert exact_plan(older, cells) is older
    assert LayoutPlan.from_json(exact.to_json()) == exact


def test_sort_ranks_count_the_range_cuts_a_row_lies_above():
    from layout_core.optimizers.pando import sort_ranks

    cuts = [CandidateCut(Compare(X, "<", 10)), CandidateCut(Compare(X, ">=", 20)), CandidateCut(Compare(Y, "<", 5)),
            CandidateCut(Compare(X, "<=", 30))]
    # x = 5: below all three x cuts -> rank 0; x = 15: above x < 10 -> 1;
    # x = 25: above x < 10 and x >= 20 -> 2; x = 35: above all three -> 3 (cut 2 is on y)
    vectors = np.array([[1, 0, 1, 1], [0, 0, 0, 1], [0, 1, 1, 1], [0, 1, 0, 0]], bool)
    assert sort_ranks(cuts, "x", vectors).tolist() == [0, 1, 2, 3]
    assert sort_ranks(cuts, "id", vectors) is None
