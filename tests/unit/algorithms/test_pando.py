"""Pando (§6): k trees grown together, cells merged into blocks, truncation.

Expected values are worked by hand or come from brute-force references in
this file (own routing, own path checks, exhaustive greedy choices), never
from the code under test.
"""

from __future__ import annotations

import itertools
import logging

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import layout_core.algorithms.pando as pando
from layout_core.algorithms.pando import (
    Cells,
    PandoBlocks,
    TupleBoundError,
    admitted,
    block_reads,
    bottom_up_blocks,
    grow_within_bound,
    k_tuples,
    leaf_block_sets,
    merge_cells,
    rows_read,
    top_down,
    truncate,
)
from layout_core.algorithms.qdtree import Node, greedy_tree, leaves
from layout_core.algorithms.types import VectorCounts, Workload
from tests.unit.algorithms.test_qdtree import vcounts, workload

L, S = Node.leaf, Node.split


# ---------------------------------------------------------------------------
# Independent references


def leaf_paths(root: Node) -> list[tuple[tuple[tuple[int, int], ...], list[int]]]:
    """Leaves left to right as (path of (cut, bit), vector indices)."""
    out = []

    def walk(node, path):
        if node.is_leaf:
            out.append((path, node.vector_indices.tolist()))
        else:
            walk(node.left, path + ((node.cut, 1),))
            walk(node.right, path + ((node.cut, 0),))

    walk(root, ())
    return out


def path_admits(path, wl: Workload, q: int) -> bool:
    return not any((wl.implies[q, j] and not b) or (wl.disjoint[q, j] and b) for j, b in path)


def route_one(root: Node, vector) -> Node:
    node = root
    while not node.is_leaf:
        node = node.left if vector[node.cut] else node.right
    return node


def tree_skips_vector(root: Node, vector, wl: Workload, q: int) -> bool:
    """The cuts on the vector's path let q skip it."""
    node = root
    while not node.is_leaf:
        j = node.cut
        if vector[j]:
            if wl.disjoint[q, j]:
                return True
            node = node.left
        else:
            if wl.implies[q, j]:
                return True
            node = node.right
    return False


def reference_top_down(vc: VectorCounts, wl: Workload, k: int, thr: int, allowed) -> list:
    """Exhaustive §6.1 greedy: every (tree, leaf, cut) tried, the workload cost
    recomputed from scratch; the largest strict decrease wins, scanning trees,
    then leaves left to right, then cuts in ascending order."""
    n, m, c, w = vc.n, vc.m, vc.counts, wl.weights
    trees = [[((), list(range(n)))] for _ in range(k)]

    def cost(trees):
        leaf_path = [{v: path for path, idx in tree for v in idx} for tree in trees]
        return sum(w[q] * c[v] for q in range(wl.n_queries) for v in range(n)
                   if all(path_admits(lp[v], wl, q) for lp in leaf_path))

    while True:
        current, best = cost(trees), None
        for t in range(k):
            for p, (path, idx) in enumerate(trees[t]):
                for j in range(m):
                    left = [v for v in idx if vc.vectors[v, j]]
                    right = [v for v in idx if not vc.vectors[v, j]]
                    if not allowed[j] or c[left].sum() < thr or c[right].sum() < thr:
                        continue
                    cand = [list(tree) for tree in trees]
                    cand[t][p:p + 1] = [(path + ((j, 1),), left), (path + ((j, 0),), right)]
                    gain = current - cost(cand)
                    if gain > 0 and (best is None or gain > best[0]):
                        best = (gain, cand)
        if best is None:
            return trees
        trees = best[1]


def reference_bottom_up(vc: VectorCounts, wl: Workload, trees, b: int):
    """Brute-force §6.2 over the documented rules: (tuples, first, n, rows, block_rows)."""
    k, w = len(trees), wl.weights
    routes = [[route_one(root, vc.vectors[v]) for root in trees] for v in range(vc.n)]
    cell_rows: dict[tuple, int] = {}
    for v in range(vc.n):
        if vc.counts[v] > 0:
            key = tuple(leaf.leaf_id for leaf in routes[v])
            cell_rows[key] = cell_rows.get(key, 0) + int(vc.counts[v])
    cells = sorted(cell_rows)
    rows = [cell_rows[cell] for cell in cells]
    paths = [{leaf_id: path for leaf_id, (path, _) in enumerate(leaf_paths(root))} for root in trees]
    admitted_by = [frozenset(q for q in range(wl.n_queries)
                             if all(path_admits(paths[i][cell[i]], wl, q) for i in range(k))) for cell in cells]
    vectors_of = [[vc.vectors[v] for v in range(vc.n) if vc.counts[v] > 0
                   and tuple(leaf.leaf_id for leaf in routes[v]) == cell] for cell in cells]

    def group_reads(members):
        # the router: some cell every tree admits, and no cut bit of the rows lets q skip
        bits = [vec for i in members for vec in vectors_of[i]]
        some = [any(vec[j] for vec in bits) for j in range(vc.m)]
        every = [all(vec[j] for vec in bits) for j in range(vc.m)]
        return frozenset(q for q in frozenset().union(*(admitted_by[i] for i in members))
                         if not any((wl.implies[q, j] and not some[j]) or (wl.disjoint[q, j] and every[j])
                                    for j in range(vc.m)))

    reads = [group_reads([i]) for i in range(len(cells))]

    def wsum(qs):
        return sum(w[q] for q in qs)

    blocks = []  # [key, rows, reads, owner, piece, small cells]
    for i, r in enumerate(rows):
        if r >= b:
            n = r // b
            for p in range(n):
                blocks.append([(i, p), r // n + (p < r % n), reads[i], i, p, []])
    groups = {i: ([i], r, reads[i]) for i, r in enumerate(rows) if r < b}  # keyed by lowest cell
    while len(groups) > 1:
        best = None
        for a, bb in itertools.combinations(sorted(groups), 2):
            (_, ra, qa), (_, rb, qb) = groups[a], groups[bb]
            added = (ra + rb) * wsum(qa | qb) - ra * wsum(qa) - rb * wsum(qb)
            if best is None or added < best[0]:
                best = (added, a, bb)
        _, a, bb = best
        members = groups[a][0] + groups.pop(bb)[0]
        merged = (members, sum(rows[i] for i in members), group_reads(members))
        if merged[1] >= b:
            del groups[a]
            blocks.append([(min(members), 0), merged[1], merged[2], -1, -1, sorted(members)])
        else:
            groups[a] = merged
    if groups:
        (members, r, qs), = groups.values()
        if not blocks:
            blocks.append([(min(members), 0), r, qs, -1, -1, sorted(members)])
        else:
            blocks.sort(key=lambda blk: blk[0])
            costs = [((blk[1] + r) * wsum(blk[2] | qs) - blk[1] * wsum(blk[2]) - r * wsum(qs), blk[1], pos)
                     for pos, blk in enumerate(blocks)]
            target = blocks[min(costs)[2]]
            target[1] += r
            target[5] = target[5] + sorted(members)
            if target[4] < 0:
                target[0] = (min(target[0][0], min(members)), 0)
    blocks.sort(key=lambda blk: blk[0])
    first, nb = [0] * len(cells), [1] * len(cells)
    for number, blk in enumerate(blocks):
        if blk[4] == 0:
            first[blk[3]], nb[blk[3]] = number, rows[blk[3]] // b
        for cell in blk[5]:
            first[cell] = number
    return [list(cell) for cell in cells], first, nb, rows, [blk[1] for blk in blocks]


# ---------------------------------------------------------------------------
# The paper's X/Y example, worked by hand
#
# Cut 0: x < 50, cut 1: y < 50. x and y are correlated: 40 rows have both,
# 40 neither, and two groups of 10 outliers have only one of them.
#   v0 = 11: 40 rows, v1 = 10: 10 rows, v2 = 01: 10 rows, v3 = 00: 40 rows
# q0: x < 40 (implies cut 0), q1: x > 60 (disjoint with cut 0),
# q2: y < 40 (implies cut 1), q3: y > 60 (disjoint with cut 1).

XY = vcounts([[1, 1], [1, 0], [0, 1], [0, 0]], [40, 10, 10, 40])
XY_WL = workload(2, n_queries=4, implies=[(0, 0), (2, 1)], disjoint=[(1, 0), (3, 1)])


def test_xy_one_tree_is_mto():
    # Root: cut 0 and cut 1 both let two queries skip 50 rows each (gain 100);
    # tie -> cut 0. Below it, cut 1 would leave a 10-row child (< 20).
    expected = S(0, L(0, [0, 1], 50), L(1, [2, 3], 50))
    assert greedy_tree(XY, XY_WL, 20) == expected
    (tree,) = top_down(XY, XY_WL, 1, 20)
    assert tree == expected
    blocks = bottom_up_blocks(XY, XY_WL, (tree,), 20)
    # Each leaf is one cell of 50 rows: 50 // 20 = 2 blocks of 25.
    assert blocks.tuples.tolist() == [[0], [1]]
    assert blocks.tuple_first_block.tolist() == [0, 2]
    assert blocks.tuple_n_blocks.tolist() == [2, 2]
    assert blocks.block_rows.tolist() == [25, 25, 25, 25]
    # q0, q1 read their 50-row leaf; q2, q3 read everything.
    assert rows_read((tree,), XY_WL, blocks).tolist() == [50, 50, 100, 100]


def test_xy_two_trees_read_less():
    # Step 1: as for k = 1, tree 0 (lowest tree on the tie) is cut on cut 0.
    # Step 2: cut 0 in tree 1 gains nothing (q0, q1 skip those rows already);
    # cut 1 in tree 1 lets q2 skip its bit-0 side {10, 00} (50 rows) and q3
    # its bit-1 side {11, 01} (50): gain 100. Cut 1 under tree 0's leaves
    # would leave a 10-row child (< 20).
    # Step 3: every remaining cut leaves a 10-row child: stop.
    trees = top_down(XY, XY_WL, 2, 20)
    assert trees == (S(0, L(0, [0, 1], 50), L(1, [2, 3], 50)), S(1, L(0, [0, 2], 50), L(1, [1, 3], 50)))
    tuple_of_vector, tuples = k_tuples(trees, XY)
    assert tuple_of_vector.tolist() == [0, 1, 2, 3]
    assert tuples.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    blocks = bottom_up_blocks(XY, XY_WL, trees, 20)
    # Cells (0,0) and (1,1) have 40 rows: two blocks of 20 each. The two
    # outlier cells (10 rows each) merge into one block of 20.
    assert blocks.tuple_first_block.tolist() == [0, 2, 2, 3]
    assert blocks.tuple_n_blocks.tolist() == [2, 1, 1, 2]
    assert blocks.block_rows.tolist() == [20] * 5
    assert blocks.n_blocks == 5
    # q0 (x < 40) needs cells (0,0) and (0,1): 40 rows + the 20-row outlier block.
    read = rows_read(trees, XY_WL, blocks)
    assert read.tolist() == [60, 60, 60, 60]
    assert read.sum() == 240  # one tree read 300 (above)
    assert rows_read(trees, XY_WL, blocks, per_tree=True).tolist() == [60, 60, 60, 60]
    # The two leaves of each tree point to different blocks: nothing to truncate.
    assert leaf_block_sets(trees, blocks)[0][0].tolist() == [0, 1, 2]
    assert leaf_block_sets(trees, blocks)[0][1].tolist() == [2, 3, 4]
    truncated = truncate(trees, blocks)
    assert truncated.trees == trees
    assert [m.tolist() for m in truncated.leaf_maps] == [[0, 1], [0, 1]]


def test_correlated_cuts_go_to_different_trees():
    # With a threshold of 5 the outliers could be cut off, but after the two
    # root cuts cut 1 under cut 0 saves nothing: q2 and q3 already skip
    # those rows through tree 1. So the trees stay one cut each.
    trees = top_down(XY, XY_WL, 2, 5)
    assert trees == (S(0, L(0, [0, 1], 50), L(1, [2, 3], 50)), S(1, L(0, [0, 2], 50), L(1, [1, 3], 50)))
    # One tree at threshold 5 stacks them instead.
    (tree,) = top_down(XY, XY_WL, 1, 5)
    assert tree == S(0, S(1, L(0, [0], 40), L(1, [1], 10)), S(1, L(2, [2], 10), L(3, [3], 40)))
    # A third tree has nothing left to gain.
    assert top_down(XY, XY_WL, 3, 5)[2] == L(0, [0, 1, 2, 3], 100)


def test_ties_go_to_the_lowest_tree_and_gains_count_other_trees():
    vc = vcounts([[1, 1], [1, 0], [0, 1], [0, 0]], [25, 25, 25, 25])
    wl = workload(2, n_queries=2, implies=[(0, 0), (1, 1)])
    # Step 1: cut 0 and cut 1 gain 50 each at either root -> tree 0, cut 0.
    # Step 2: tree 0's left leaf (cut 1: q1 skips 25), right leaf (q1 skips
    # 25) and tree 1's root (cut 1: q1 skips 50) -> tree 1 wins with 50.
    # Step 3: nothing gains: q0 skips 01, 00 through tree 0 and q1 skips 10, 00
    # through tree 1, whatever leaf a second cut would go under.
    trees = top_down(vc, wl, 2, 1)
    assert trees == (S(0, L(0, [0, 1], 50), L(1, [2, 3], 50)), S(1, L(0, [0, 2], 50), L(1, [1, 3], 50)))
    # Only q1 (implies cut 1): tree 0's root gets cut 1, then nothing gains.
    wl1 = workload(2, n_queries=1, implies=[(0, 1)])
    assert top_down(vc, wl1, 2, 1) == (S(1, L(0, [0, 2], 50), L(1, [1, 3], 50)), L(0, [0, 1, 2, 3], 100))


# ---------------------------------------------------------------------------
# Bottom-up, by hand


def test_merge_cost_uses_query_weights():
    # One tree, four 10-row leaves: cut 0 then cut 1 on both sides.
    tree = S(0, S(1, L(0, [0], 10), L(1, [1], 10)), S(1, L(2, [2], 10), L(3, [3], 10)))
    vc = vcounts([[1, 1], [1, 0], [0, 1], [0, 0]], [10, 10, 10, 10])
    # q0: implies cut 0 -> leaves 0, 1; q1: disjoint cut 0 -> 2, 3;
    # q2: implies cut 1 -> 0, 2; q3: disjoint cut 1 -> 1, 3.
    imp, dis = [(0, 0), (2, 1)], [(1, 0), (3, 1)]
    # Weights 3, 3, 1, 1: every cell is read with weight 4. Merging 0+1 (or
    # 2+3) is read by q0, q2, q3: 20 * 5 - 40 - 40 = 20; 0+2 by q0, q1, q2:
    # 20 * 7 - 80 = 60; 0+3 by all: 20 * 8 - 80 = 80. So {0, 1} and {2, 3}.
    wl = workload(2, imp, dis, n_queries=4, weights=[3.0, 3.0, 1.0, 1.0])
    blocks = bottom_up_blocks(vc, wl, (tree,), 20)
    assert blocks.tuple_first_block.tolist() == [0, 0, 1, 1]
    assert blocks.tuple_n_blocks.tolist() == [1, 1, 1, 1]
    assert blocks.block_rows.tolist() == [20, 20]
    assert rows_read((tree,), wl, blocks).tolist() == [20, 20, 40, 40]
    # Weights 1, 1, 3, 3: now {0, 2} and {1, 3}.
    wl = workload(2, imp, dis, n_queries=4, weights=[1.0, 1.0, 3.0, 3.0])
    blocks = bottom_up_blocks(vc, wl, (tree,), 20)
    assert blocks.tuple_first_block.tolist() == [0, 1, 0, 1]
    assert rows_read((tree,), wl, blocks).tolist() == [40, 40, 20, 20]
    # Leaf 0 and leaf 2 now point to block 0, leaves 1 and 3 to block 1: the
    # cut 1 nodes have children with different sets, nothing is truncated.
    assert truncate((tree,), blocks).trees == (tree,)


def test_big_cell_is_cut_and_the_leftover_joins_the_smaller_piece():
    # Leaf 0: 45 rows -> 45 // 20 = 2 pieces of 23 and 22. Leaf 1: 5 rows,
    # the leftover. q0 reads only leaf 0, so adding leaf 1 to either piece
    # costs 5; the tie goes to the piece with fewer rows (block 1).
    vc = vcounts([[1], [0]], [45, 5])
    tree = S(0, L(0, [0], 45), L(1, [1], 5))
    wl = workload(1, n_queries=1, implies=[(0, 0)])
    blocks = bottom_up_blocks(vc, wl, (tree,), 20)
    assert blocks.tuple_first_block.tolist() == [0, 1]
    assert blocks.tuple_n_blocks.tolist() == [2, 1]
    assert blocks.tuple_rows.tolist() == [45, 5]
    assert blocks.block_rows.tolist() == [23, 27]
    assert rows_read((tree,), wl, blocks).tolist() == [50]


def test_fewer_rows_than_a_block_is_one_block_and_nothing_is_no_block():
    vc = vcounts([[1], [0]], [3, 4])
    tree = S(0, L(0, [0], 3), L(1, [1], 4))
    blocks = bottom_up_blocks(vc, workload(1, n_queries=0), (tree,), 20)
    assert blocks.tuple_first_block.tolist() == [0, 0]
    assert blocks.block_rows.tolist() == [7]
    empty = bottom_up_blocks(vcounts(np.zeros((0, 1)), []), workload(1, n_queries=0), (L(0, [], 0),), 20)
    assert empty.n_blocks == 0 and empty.tuples.shape == (0, 1)


def test_pando_blocks_are_read_only_and_validated():
    blocks = PandoBlocks([[0], [1]], [0, 0], [1, 1], [3, 4], [7])
    with pytest.raises(ValueError):
        blocks.block_rows[0] = 1
    with pytest.raises(ValueError):
        PandoBlocks([[0]], [0], [2], [7], [7])  # points past the last block
    with pytest.raises(ValueError):
        PandoBlocks([[0]], [0], [0], [7], [7])  # no block


def test_merge_ties_go_to_the_lowest_pair():
    # Nine cells whose pairwise costs tie a lot (found by random search): a
    # nearest-partner cache that kept an old partner on a tie with a merged,
    # lower block merged another pair than the exhaustive reference.
    sizes = [3, 2, 4, 4, 4, 4, 3, 2, 3]
    reads = np.array([[1, 0, 0], [1, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 1],
                      [0, 0, 1], [1, 1, 0], [1, 0, 0], [1, 0, 1]], bool)
    # Cuts 0-3 number the cells (cell c has bits 15 - c, so leaves come in
    # cell order); query q implies cut 4 + q, set exactly for the cells it reads.
    n, q = reads.shape
    ids = np.array([[(15 - c) >> (3 - b) & 1 for b in range(4)] for c in range(n)], bool)
    vc = vcounts(np.concatenate([ids, reads], axis=1), sizes)
    imp = np.zeros((q, vc.m), bool)
    imp[np.arange(q), 4 + np.arange(q)] = True
    wl = Workload(imp, np.zeros_like(imp))
    tree = full_tree(vc)
    blocks = bottom_up_blocks(vc, wl, (tree,), 8)
    _, first, _, _, block_rows = reference_bottom_up(vc, wl, (tree,), 8)
    assert blocks.tuple_first_block.tolist() == first == [0, 0, 1, 0, 1, 1, 0, 0, 1]
    assert blocks.block_rows.tolist() == block_rows == [14, 15]


def test_merges_see_the_cut_bits_the_router_keeps():
    # One tree cuts on cuts 0 and 2; cut 1 is on no path. Cells (leaves, bit-1
    # side first): 0 = 111, 1 = 100, 2 = 001, 3 = 010, 10 rows each. q0 implies
    # cut 1: every leaf admits it, but only cells 0 and 3 hold rows with cut 1
    # set, so the router's cut bits skip a block of cells 1 and 2 for q0.
    # Merge costs: 0+3 and 1+2 add nothing, any other pair 20 - 10 = 10; the
    # tie goes to the lowest pair, 0+3, then 1+2. q0 reads one block of 20
    # rows (by the trees alone every pair costs 0: {0, 1} and {2, 3}, 40 rows).
    tree = S(0, S(2, L(0, [0], 10), L(1, [1], 10)), S(2, L(2, [2], 10), L(3, [3], 10)))
    vc = vcounts([[1, 1, 1], [1, 0, 0], [0, 0, 1], [0, 1, 0]], [10, 10, 10, 10])
    wl = workload(3, n_queries=1, implies=[(0, 1)])
    blocks = bottom_up_blocks(vc, wl, (tree,), 20)
    assert blocks.tuples.tolist() == [[0], [1], [2], [3]]
    assert blocks.tuple_first_block.tolist() == [0, 1, 1, 0]
    assert blocks.block_rows.tolist() == [20, 20]
    assert pando.estimated_rows_read(vc, wl, (tree,), blocks).tolist() == [20]
    blind = merge_cells(Cells([[0], [1], [2], [3]], [10] * 4), admitted((tree,), wl), wl, 20)
    assert blind.tuple_first_block.tolist() == [0, 0, 1, 1]


def test_a_merged_block_is_read_when_its_rows_together_meet_the_query():
    # q0 implies cuts 1 and 2 (a conjunction); the tree cuts on 0, 3 and 4, so
    # it admits every leaf. Cells (leaf order): A = 11010 (11 rows, cut 1
    # only), B = 10100 (10, cut 2 only), C = 00010 (10), E = 01101 (5, both:
    # read), D = 00000 (15). Block rows 25. Every pair without E costs 0:
    # A+B first (lowest pair), 21 rows. Together A's and B's rows set cuts 1
    # and 2, so q0 reads {A, B}: now AB+E adds 26 - 21 - 5 = 0 and C+D 0, the
    # rest more; AB+E (lower pair) is finished with 26 rows, then C+D with 25.
    # Taking {A, B} as unread (the union of its parts' reads) would have
    # merged AB+C and left one block of 51 rows that q0 reads.
    tree = S(0, S(3, L(0, [0], 11), L(1, [1], 10)), S(3, L(2, [2], 10), S(4, L(3, [3], 5), L(4, [4], 15))))
    vc = vcounts([[1, 1, 0, 1, 0], [1, 0, 1, 0, 0], [0, 0, 0, 1, 0], [0, 1, 1, 0, 1], [0, 0, 0, 0, 0]],
                 [11, 10, 10, 5, 15])
    wl = workload(5, n_queries=1, implies=[(0, 1), (0, 2)])
    blocks = bottom_up_blocks(vc, wl, (tree,), 25)
    assert blocks.tuple_first_block.tolist() == [0, 0, 1, 0, 1]
    assert blocks.block_rows.tolist() == [26, 25]
    assert pando.estimated_rows_read(vc, wl, (tree,), blocks).tolist() == [26]


def test_the_estimate_cuts_a_big_cell_along_the_sort_column():
    # One leaf of 40 rows, blocks of 20: two blocks, cut along the sort column x.
    # Cut 0 is x < 10 (20 rows, rank 0: above no range cut), cut 1 y = 1 (the
    # other 20 rows, x >= 10: rank 1). q0 implies cut 0. Placed by rank, block
    # 0 holds the x < 10 rows and block 1 none of them: q0 reads 20 rows. Not
    # placed, both blocks count as holding every vector: 40.
    vc = vcounts([[1, 0], [0, 1]], [20, 20])
    wl = workload(2, n_queries=1, implies=[(0, 0)])
    trees = (L(0, [0, 1], 40),)
    blocks = bottom_up_blocks(vc, wl, trees, 20)
    assert blocks.tuple_n_blocks.tolist() == [2]
    assert pando.estimated_rows_read(vc, wl, trees, blocks).tolist() == [40]
    assert pando.estimated_rows_read(vc, wl, trees, blocks, order=np.array([0, 1])).tolist() == [20]
    # one rank for both: they overlap both blocks
    assert pando.estimated_rows_read(vc, wl, trees, blocks, order=np.array([0, 0])).tolist() == [40]


def test_merges_of_equal_cost_go_to_the_narrowest_span():
    # Nobody reads anything: every merge costs 0. By index: {0, 1} and {2, 3};
    # with the sort column's spans [0, 1], [10, 11], [1, 2], [11, 12] the
    # narrowest merges are 0+2 and 1+3 (width 2 each, lowest pair first).
    wl = workload(1, n_queries=1)
    adm = (np.ones((1, 4), bool),)
    plain = merge_cells(Cells([[0], [1], [2], [3]], [10] * 4), adm, wl, 20)
    assert plain.tuple_first_block.tolist() == [0, 0, 1, 1]
    spans = [[0, 1], [10, 11], [1, 2], [11, 12]]
    near = merge_cells(Cells([[0], [1], [2], [3]], [10] * 4, span=spans), adm, wl, 20)
    assert near.tuple_first_block.tolist() == [0, 1, 0, 1]
    # A cell without values (NaN) spans nothing: it joins the one it is tied with first.
    spans = [[0, 1], [np.nan, np.nan], [5, 9], [1, 2]]
    near = merge_cells(Cells([[0], [1], [2], [3]], [10] * 4, span=spans), adm, wl, 20)
    assert near.tuple_first_block.tolist() == [0, 0, 1, 1]  # 0+1 spans 1 (as 0+3), lowest pair


def test_the_leftover_renumbers_the_merged_block_it_joins():
    # Cuts 0-2 on every path, so each vector is a cell; leaves (and cells) go
    # bit-1 first: cell 0 = 110 (4 rows), 1 = 101 (4), 2 = 011 (4), 3 = 010 (3),
    # 4 = 000 (2). q0 implies cuts 0 and 1 and is disjoint with cut 2: it reads
    # cell 0 only. Block rows 5, so every cell is small.
    vc = vcounts([[0, 0, 0], [0, 1, 0], [0, 1, 1], [1, 0, 1], [1, 1, 0]], [2, 3, 4, 4, 4])
    wl = workload(3, n_queries=1, implies=[(0, 0), (0, 1)], disjoint=[(0, 2)])
    tree = full_tree(vc)
    # Merges: cells 1 + 2 cost 0 (nobody reads them; lowest pair) -> 8 rows,
    # finished. Then 3 + 4 cost 0 (0 + 3 would cost 3) -> 5 rows, finished.
    # Cell 0 is left over: joining {1, 2} costs 12 - 4 = 8, joining {3, 4}
    # costs 9 - 4 = 5. So {0, 3, 4} (9 rows), now led by cell 0, is block 0.
    blocks = bottom_up_blocks(vc, wl, (tree,), 5)
    assert k_tuples((tree,), vc)[0].tolist() == [4, 3, 2, 1, 0]
    assert blocks.tuple_first_block.tolist() == [0, 1, 1, 0, 0]
    assert blocks.block_rows.tolist() == [9, 8]
    assert rows_read((tree,), wl, blocks).tolist() == [9]


def full_tree(vc: VectorCounts) -> Node:
    """Cuts 0, 1, ... m-1 on every path that holds a vector (leaves left to right)."""
    next_id = [0]

    def build(idx, depth):
        if idx.size == 0 or depth == vc.m:
            next_id[0] += 1
            return L(next_id[0] - 1, idx, int(vc.counts[idx].sum()))
        bit = vc.vectors[idx, depth]
        left = build(idx[bit], depth + 1)
        return S(depth, left, build(idx[~bit], depth + 1))

    return build(np.arange(vc.n), 0)


# ---------------------------------------------------------------------------
# Truncation, by hand


def test_truncate_merges_siblings_with_the_same_blocks():
    # Leaves 0 and 1 both point to block 0, leaf 2 to block 1.
    tree = S(0, S(1, L(0, [0], 5), L(1, [1], 5)), L(2, [2, 3], 10))
    blocks = PandoBlocks([[0], [1], [2]], [0, 0, 1], [1, 1, 1], [5, 5, 10], [10, 10])
    out = truncate((tree,), blocks)
    assert out.trees == (S(0, L(0, [0, 1], 10), L(1, [2, 3], 10)),)
    assert out.leaf_maps[0].tolist() == [0, 0, 1]
    # If leaf 2 points to block 0 as well, the root goes too (repeatedly).
    blocks = PandoBlocks([[0], [1], [2]], [0, 0, 0], [1, 1, 1], [5, 5, 10], [20])
    out = truncate((tree,), blocks)
    assert out.trees == (L(0, [0, 1, 2, 3], 20),)
    assert out.leaf_maps[0].tolist() == [0, 0, 0]


def test_truncate_keeps_ids_left_to_right():
    # Leaves 2 and 3 (under the right child) share blocks, leaves 0, 1 do not.
    tree = S(0, S(1, L(0, [0], 5), L(1, [1], 5)), S(1, L(2, [2], 5), L(3, [3], 5)))
    blocks = PandoBlocks([[0], [1], [2], [3]], [0, 1, 2, 2], [1, 1, 1, 1], [5, 5, 5, 5], [5, 5, 10])
    out = truncate((tree,), blocks)
    assert out.trees == (S(0, S(1, L(0, [0], 5), L(1, [1], 5)), L(2, [2, 3], 10)),)
    assert out.leaf_maps[0].tolist() == [0, 1, 2, 2]
    assert [s.tolist() for s in leaf_block_sets(out.trees, blocks, out.leaf_maps)[0]] == [[0], [1], [2]]


def test_admitted_follows_the_path():
    tree = S(0, S(1, L(0, [0], 5), L(1, [1], 5)), L(2, [2], 5))
    # q0 implies cut 0: skips leaf 2. q1 disjoint with cut 1: skips leaf 0.
    # q2 implies cut 1: skips leaf 1 only (cut 1 is not on leaf 2's path).
    wl = workload(2, n_queries=3, implies=[(0, 0), (2, 1)], disjoint=[(1, 1)])
    (adm,) = admitted((tree,), wl)
    assert adm.tolist() == [[True, True, False], [False, True, True], [True, False, True]]


# ---------------------------------------------------------------------------
# Tree 0 is mto's tree (Pando Fig. 2c)


def test_a_given_first_tree_is_kept_and_the_others_grow_around_it():
    # Tree 0 given as cut 1 (y < 50) although the greedy would cut 0 first:
    # it stays as given, and tree 1 takes cut 0, which serves q0 and q1 on
    # the rows tree 0 does not already let them skip.
    given = S(1, L(0, [0, 2], 50), L(1, [1, 3], 50))
    trees = top_down(XY, XY_WL, 2, 20, first_tree=given)
    assert trees == (given, S(0, L(0, [0, 1], 50), L(1, [2, 3], 50)))
    # one tree: the given tree, never split further, even where a split would pay
    assert top_down(XY, XY_WL, 1, 1, first_tree=L(0, [0, 1, 2, 3], 100)) == (L(0, [0, 1, 2, 3], 100),)


def test_blocks_stay_inside_the_first_trees_leaves():
    # Cells (tree 0 leaf, tree 1 leaf): A = (0, 0) 6 rows, B = (0, 1) 5, C = (1, 0) 6,
    # D = (1, 1) 5; blocks of 10 rows. q0 reads A and C, q1 reads B and D (tree 1).
    # Freely, A + C (12 rows) and B + D (10) merge at no cost (each read by one
    # query); inside tree 0's leaves, A + B and C + D (11 each, read by both queries).
    vc = vcounts([[1, 1], [1, 0], [0, 1], [0, 0]], [6, 5, 6, 5])
    wl = workload(2, n_queries=2, implies=[(0, 1)], disjoint=[(1, 1)])
    trees = (S(0, L(0, [0, 1], 11), L(1, [2, 3], 11)), S(1, L(0, [0, 2], 12), L(1, [1, 3], 10)))
    free = bottom_up_blocks(vc, wl, trees, 10)
    assert free.tuples.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert free.tuple_first_block.tolist() == [0, 1, 0, 1] and free.block_rows.tolist() == [12, 10]
    inside = bottom_up_blocks(vc, wl, trees, 10, within_first_tree=True)
    assert inside.tuple_first_block.tolist() == [0, 0, 1, 1] and inside.block_rows.tolist() == [11, 11]


def test_what_a_leaf_leaves_unfinished_goes_to_an_outlier_block():
    # The Fig. 2 data with tree 0 = mto's tree (x < 50) and tree 1 grown around it
    # (y < 50): the 40-row cells make 2 blocks each; the two 10-row off-diagonal
    # cells are each alone in their leaf of tree 0, so both go to one outlier block.
    grown, blocks, _ = pando.grow_layout(XY, XY_WL, 2, 20, 100, first_tree=pando.mto_tree(XY, XY_WL, 20))
    assert grown.trees == (S(0, L(0, [0, 1], 50), L(1, [2, 3], 50)), S(1, L(0, [0, 2], 50), L(1, [1, 3], 50)))
    assert blocks.tuples.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert blocks.tuple_first_block.tolist() == [0, 2, 2, 3] and blocks.tuple_n_blocks.tolist() == [2, 1, 1, 2]
    assert blocks.block_rows.tolist() == [20, 20, 20, 20, 20]
    with pytest.raises(ValueError, match="first_tree is one of grown, mto, not 'best'"):
        pando.choose_k(XY, XY_WL, 20, 100, first_tree="best")


# ---------------------------------------------------------------------------
# Threshold


def test_the_threshold_k1_is_block_rows():
    assert grow_within_bound(XY, XY_WL, 1, 20, max_tuples=1).threshold == 20


def test_the_threshold_xy():
    # t0 = ceil(20 / 8) = 3 -> 4 cells (the trees above). With a bound of 4
    # that passes at once; with a bound of 1, thresholds 3, 6, 12, 24, 48 all
    # give 4 cells (both trees cut 50/50) and 96 gives one; bisection then
    # probes 72, 60, 54, which all pass (no split of 100 rows keeps 51 on both sides).
    assert grow_within_bound(XY, XY_WL, 2, 20, max_tuples=4).threshold == 3
    assert grow_within_bound(XY, XY_WL, 2, 20, max_tuples=1).threshold == 54
    assert grow_within_bound(XY, XY_WL, 2, 20, max_tuples=1, refine_steps=0).threshold == 96
    assert grow_within_bound(XY, XY_WL, 2, 20, max_tuples=4, min_threshold=1).threshold == 1


def test_a_raised_threshold_is_said_and_the_trees_come_with_it(caplog):
    with caplog.at_level(logging.WARNING, "layout_core.algorithms.pando"):
        grown = grow_within_bound(XY, XY_WL, 2, 20, max_tuples=1)
    assert "threshold raised from 3 to 54 rows so that the trees make at most 1 k-tuples (more at the threshold 3)" \
        in caplog.text
    assert grown.n_tuples == 1 and grown.trees == (L(0, [0, 1, 2, 3], 100), L(0, [0, 1, 2, 3], 100))


def test_the_threshold_stops_at_one_block_when_asked(caplog):
    # The cap, 20, is probed first: both trees cut 50/50, more k-tuples than
    # the bound of 1 (the probe stops at 2), so the finer 3, 6 and 12 are not tried.
    with caplog.at_level(logging.INFO, "layout_core.algorithms.pando"), \
            pytest.raises(TupleBoundError, match=r"k = 2: the trees make more than 1 k-tuples \(at least 2\) even "
                                                 r"with leaves of 20 sampled rows") as raised:
        grow_within_bound(XY, XY_WL, 2, 20, max_tuples=1, max_threshold=20)
    assert (raised.value.k, raised.value.threshold, raised.value.bound) == (2, 20, 1)
    probes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("pando threshold")]
    assert probes == ["pando threshold 20: stopped at 2 k-tuples (bound 1)"]
    # A bound the cap meets: then the smallest passing threshold from t0 up, as without it.
    assert grow_within_bound(XY, XY_WL, 2, 20, max_tuples=4, max_threshold=20).threshold == 3
    # t0 = 25 and 50 cut 50/50 (4 cells), 100 passes (one cell), bisection 75, 62, 56 pass.
    assert grow_within_bound(XY, XY_WL, 2, 200, max_tuples=1, max_threshold=200).threshold == 56
    # A cap below the first candidate is the only one tried.
    assert grow_within_bound(XY, XY_WL, 2, 20, max_tuples=4, max_threshold=2).threshold == 2


def test_the_threshold_bounds_the_cells_of_a_random_table():
    rng = np.random.default_rng(7)
    m, q = 10, 16
    vectors = rng.random((400, m)) < 0.5
    vc = VectorCounts.from_rows(vectors, np.ones(m))
    assert vc.n > 250  # many distinct vectors
    state = rng.integers(0, 3, size=(q, m)) * (rng.random((q, m)) < 0.4)
    wl = Workload(state == 1, state == 2)
    # The first candidate, ceil(16 / 8) = 2, gives far more cells than 25.
    assert k_tuples(top_down(vc, wl, 3, 2), vc)[1].shape[0] > 25
    thr = grow_within_bound(vc, wl, 3, 16, max_tuples=25).threshold
    assert thr > 2
    assert k_tuples(top_down(vc, wl, 3, thr), vc)[1].shape[0] <= 25


# ---------------------------------------------------------------------------
# Random instances


@st.composite
def instances(draw, max_n=9, max_m=4, max_q=4):
    n = draw(st.integers(0, max_n))
    m = draw(st.integers(1, max_m))
    q = draw(st.integers(0, max_q))
    bits = np.array(draw(st.lists(st.booleans(), min_size=n * m, max_size=n * m)), bool).reshape(n, m)
    counts = np.array(draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)), np.int64)
    # 0: neither, 1: implies, 2: disjoint (never both: that is an unsatisfiable query)
    state = np.array(draw(st.lists(st.integers(0, 2), min_size=q * m, max_size=q * m)), np.int64).reshape(q, m)
    weights = None if draw(st.booleans()) else \
        np.array(draw(st.lists(st.integers(0, 3), min_size=q, max_size=q)), float)
    return vcounts(bits, counts), Workload(state == 1, state == 2, weights)


def leaf_ids_are_left_to_right(root: Node) -> bool:
    return [leaf.leaf_id for leaf in leaves(root)] == list(range(len(list(leaves(root)))))


@settings(max_examples=150, deadline=None)
@given(instances(max_n=12, max_m=5, max_q=5), st.integers(1, 25), st.data())
def test_one_tree_is_greedy_tree(inst, threshold, data):
    vc, wl = inst
    allowed = None
    if data.draw(st.booleans()):
        allowed = np.array(data.draw(st.lists(st.booleans(), min_size=vc.m, max_size=vc.m)), bool)
    (tree,) = top_down(vc, wl, 1, threshold, allowed)
    assert tree == greedy_tree(vc, wl, threshold, allowed)


@settings(max_examples=60, deadline=None)
@given(instances(max_n=12, max_m=4, max_q=5), st.integers(1, 3), st.integers(1, 20))
def test_halved_weights_grow_the_same_trees(inst, k, threshold):
    # Integer weights take the split's shortcut (subtract the terms of the queries that
    # stop reading a vector); halves of odd weights are not integers and rescore every
    # changed vector. Halves are exact in floating point: both ways give the same trees.
    vc, wl = inst
    odd = wl.weights * 2 + 1  # their halves are not integers
    whole, halved = Workload(wl.implies, wl.disjoint, odd), Workload(wl.implies, wl.disjoint, odd / 2)
    assert top_down(vc, whole, k, threshold) == top_down(vc, halved, k, threshold)


@settings(max_examples=80, deadline=None)
@given(instances(max_n=7, max_m=3, max_q=3), st.integers(1, 3), st.integers(1, 20), st.data())
def test_top_down_is_the_exhaustive_greedy(inst, k, threshold, data):
    vc, wl = inst
    allowed = np.array(data.draw(st.lists(st.booleans(), min_size=vc.m, max_size=vc.m)), bool)
    trees = top_down(vc, wl, k, threshold, allowed)
    expected = reference_top_down(vc, wl, k, threshold, allowed)
    assert [leaf_paths(tree) for tree in trees] == [
        [(path, sorted(idx)) for path, idx in tree] for tree in expected
    ]
    for tree in trees:
        assert leaf_ids_are_left_to_right(tree)
        in_leaves = np.sort(np.concatenate([leaf.vector_indices for leaf in leaves(tree)]))
        assert in_leaves.tolist() == list(range(vc.n))
    # the running count of non-empty k-tuples, which lets a threshold probe stop early,
    # is the number of distinct leaf-id tuples of the vectors holding rows
    routed = {tuple(route_one(tree, v).leaf_id for tree in trees) for v, c in zip(vc.vectors, vc.counts) if c > 0}
    assert pando._grow(vc, wl, k, threshold, allowed, False).n_cells == len(routed)


@settings(max_examples=100, deadline=None)
@given(instances(max_n=12, max_m=4, max_q=4), st.integers(1, 3), st.integers(1, 15), st.integers(1, 40))
def test_bottom_up_blocks(inst, k, threshold, block_rows):
    vc, wl = inst
    check_bottom_up(vc, wl, top_down(vc, wl, k, threshold), block_rows)


@settings(max_examples=100, deadline=None)
@given(instances(max_n=12, max_m=4, max_q=4), st.integers(1, 3), st.integers(1, 15), st.integers(1, 40), st.data())
def test_bottom_up_blocks_with_cuts_off_the_trees(inst, k, threshold, block_rows, data):
    # Trees grown on some cuts only: the others decide reads through the cells' cut bits.
    vc, wl = inst
    allowed = np.array(data.draw(st.lists(st.booleans(), min_size=vc.m, max_size=vc.m)), bool)
    check_bottom_up(vc, wl, top_down(vc, wl, k, threshold, allowed), block_rows)


@settings(max_examples=100, deadline=None)
@given(instances(max_n=12, max_m=4, max_q=4), st.lists(st.sampled_from([0, 2, 3, 4]), min_size=12, max_size=12),
       st.sampled_from([5, 6, 8, 10]), st.booleans(), st.booleans())
def test_bottom_up_blocks_of_many_small_cells(inst, counts, block_rows, two_trees, cached):
    # Every vector its own leaf, counts from a few values: many cells, many tied costs;
    # with and without the cached pair costs (used up to _CACHED_PAIRS cells).
    from unittest import mock

    vc, wl = inst
    vc = vcounts(vc.vectors, counts[:vc.n])
    trees = (full_tree(vc), top_down(vc, wl, 1, 1)[0]) if two_trees else (full_tree(vc),)
    with mock.patch.object(pando, "_CACHED_PAIRS", 11_000 if cached else 0):
        check_bottom_up(vc, wl, trees, block_rows)


def check_bottom_up(vc: VectorCounts, wl: Workload, trees, block_rows: int) -> None:
    blocks = bottom_up_blocks(vc, wl, trees, block_rows)

    # The documented rules, by brute force.
    tuples, first, nb, rows, sizes = reference_bottom_up(vc, wl, trees, block_rows)
    assert blocks.tuples.tolist() == tuples
    assert blocks.tuple_first_block.tolist() == first
    assert blocks.tuple_n_blocks.tolist() == nb
    assert blocks.tuple_rows.tolist() == rows
    assert blocks.block_rows.tolist() == sizes

    # Every row in exactly one block; sizes.
    total = int(vc.counts.sum())
    assert blocks.block_rows.sum() == total
    if total >= block_rows:
        assert (blocks.block_rows >= block_rows).all()
    else:
        assert blocks.n_blocks == (1 if total else 0)
    _, block = blocks.tuple_block_pairs()
    assert np.unique(block).tolist() == list(range(blocks.n_blocks))  # no block without rows' cell
    # Deterministic.
    again = bottom_up_blocks(vc, wl, trees, block_rows)
    for name in ("tuples", "tuple_first_block", "tuple_n_blocks", "block_rows"):
        assert np.array_equal(getattr(blocks, name), getattr(again, name))

    # Sound: q reads every block holding a vector no tree lets it skip.
    tuple_of_vector, _ = k_tuples(trees, vc)
    reads = block_reads(trees, wl, blocks)
    reads_paper = block_reads(trees, wl, blocks, per_tree=True)
    assert not (reads & ~reads_paper).any()  # the cell map never reads more
    for v in np.flatnonzero(vc.counts > 0):
        t = tuple_of_vector[v]
        vblocks = range(blocks.tuple_first_block[t], blocks.tuple_first_block[t] + blocks.tuple_n_blocks[t])
        for q in range(wl.n_queries):
            if not any(tree_skips_vector(tree, vc.vectors[v], wl, q) for tree in trees):
                assert all(reads[q, b] for b in vblocks)
    assert (rows_read(trees, wl, blocks) == reads.astype(np.int64) @ blocks.block_rows).all()


@settings(max_examples=100, deadline=None)
@given(instances(max_n=12, max_m=4, max_q=4), st.integers(1, 3), st.integers(1, 10), st.integers(1, 40))
def test_truncated_trees_route_to_the_right_blocks(inst, k, threshold, block_rows):
    vc, wl = inst
    trees = top_down(vc, wl, k, threshold)
    blocks = bottom_up_blocks(vc, wl, trees, block_rows)
    out = truncate(trees, blocks)
    tuple_of_vector, _ = k_tuples(trees, vc)
    sets = leaf_block_sets(out.trees, blocks, out.leaf_maps)
    for i, (old, new) in enumerate(zip(trees, out.trees)):
        assert leaf_ids_are_left_to_right(new)
        assert new.rows == old.rows
        for v in np.flatnonzero(vc.counts > 0):
            t = tuple_of_vector[v]
            vblocks = set(range(blocks.tuple_first_block[t], blocks.tuple_first_block[t] + blocks.tuple_n_blocks[t]))
            new_leaf = route_one(new, vc.vectors[v])
            assert new_leaf.leaf_id == out.leaf_maps[i][route_one(old, vc.vectors[v]).leaf_id]
            assert vblocks <= set(sets[i][new_leaf.leaf_id].tolist())
        # No two sibling leaves left with the same block set.
        stack = [new]
        while stack:
            node = stack.pop()
            if not node.is_leaf:
                if node.left.is_leaf and node.right.is_leaf:
                    assert sets[i][node.left.leaf_id].tolist() != sets[i][node.right.leaf_id].tolist()
                stack += [node.left, node.right]
    # The paper's router reads the same blocks through the truncated trees.
    assert np.array_equal(block_reads(trees, wl, blocks, per_tree=True),
                          block_reads(out.trees, wl, blocks, out.leaf_maps, per_tree=True))


# ---------------------------------------------------------------------------
# Edges


def test_validation():
    with pytest.raises(ValueError):
        top_down(XY, XY_WL, 0, 1)
    with pytest.raises(ValueError):
        top_down(XY, XY_WL, 2, 0)
    with pytest.raises(ValueError):
        top_down(XY, workload(3, n_queries=1), 2, 1)  # 3 cuts in the workload, 2 in the vectors
    with pytest.raises(ValueError):
        bottom_up_blocks(XY, XY_WL, top_down(XY, XY_WL, 2, 20), 0)
    with pytest.raises(ValueError):
        grow_within_bound(XY, XY_WL, 2, 20, max_tuples=0)
    with pytest.raises(ValueError):
        k_tuples((), XY)


def test_zero_count_vectors_and_empty_input():
    vc = vcounts([[1], [0], [1]], [10, 10, 0])
    wl = workload(1, n_queries=1, implies=[(0, 0)])
    trees = top_down(vc, wl, 2, 5)
    assert trees == (S(0, L(0, [0, 2], 10), L(1, [1], 10)), L(0, [0, 1, 2], 20))
    tuple_of_vector, tuples = k_tuples(trees, vc)
    assert tuple_of_vector.tolist() == [0, 1, 0] and tuples.tolist() == [[0, 0], [1, 0]]
    # A count-0 vector alone in its cell has no cell.
    vc = vcounts([[1], [0]], [10, 0])
    assert k_tuples((S(0, L(0, [0], 10), L(1, [1], 0)),), vc)[0].tolist() == [0, -1]
    empty = vcounts(np.zeros((0, 2)), [])
    assert top_down(empty, XY_WL, 2, 1) == (L(0, [], 0), L(0, [], 0))


def test_progress_bar_and_log(capsys, caplog):
    with caplog.at_level(logging.INFO, logger="layout_core.algorithms.pando"):
        top_down(XY, XY_WL, 2, 20, progress=True)
        bottom_up_blocks(XY, XY_WL, top_down(XY, XY_WL, 2, 20), 20, progress=True)
    assert "pando top_down (k=2)" in capsys.readouterr().err  # the tqdm bar
    assert any("pando top_down (k=2)" in r.getMessage() for r in caplog.records)


@settings(max_examples=60, deadline=None)
@given(instances(max_n=12, max_m=4, max_q=4), st.integers(2, 3), st.integers(1, 6), st.integers(1, 4))
def test_a_failed_threshold_probe_also_fails_up_to_its_smallest_leaf(inst, k, threshold, bound):
    # grow_within_bound skips the probes this predicts: the same trees, the same failure
    vc, wl = inst
    forest = pando._grow(vc, wl, k, threshold, None, False, bound)
    if forest.n_cells <= bound:
        return
    top = int(min(forest.smallest_child, vc.counts.sum()))
    for higher in range(threshold, top + 1):
        again = pando._grow(vc, wl, k, higher, None, False, bound)
        assert again.n_cells == forest.n_cells > bound
        assert again.roots() == forest.roots()


def test_probes_a_failed_one_predicts_are_not_run(caplog):
    # XY, k = 2, at most 3 k-tuples. Threshold 3 (ceil(20 / 8)) cuts tree 0 on cut 0
    # and tree 1 on cut 1, leaves of 50 rows, and stops at 4 cells. The doubling
    # goes on at 12, its last step within one block (20 rows; 6 is skipped), then
    # 24 and 48: they would grow the same trees (every leaf it made has >= 50
    # rows), so none is run. At 96 no split is valid: one cell.
    with caplog.at_level(logging.INFO, "layout_core.algorithms.pando"):
        grown = grow_within_bound(XY, XY_WL, 2, 20, max_tuples=3, refine_steps=0)
    probes = [r.getMessage() for r in caplog.records if r.getMessage().startswith("pando threshold")]
    assert probes == ["pando threshold 3: stopped at 4 k-tuples (bound 3)"] + [
        f"pando threshold {t}: fails as at 3 (its splits all left more rows)" for t in (12, 24, 48)] + [
        "pando threshold 96: 1 k-tuples (bound 3)"]
    assert grown.threshold == 96 and grown.n_tuples == 1


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("bound", [12, 70])
def test_the_jump_to_one_block_finds_the_plain_doublings_threshold(seed, bound):
    # Without a cap, a failing t0 sends the search to its last doubling within one
    # block (40 rows): it fails at every seed with a bound of 12 (the steps between
    # are skipped), and passes at some with 70 (they are probed; at one t0 passes). The threshold
    # found is the first passing one of t0, 2·t0, 4·t0, ..., probed here one by one.
    rng = np.random.default_rng(seed)
    m, q = 8, 12
    vc = VectorCounts.from_rows(rng.random((600, m)) < 0.5, np.ones(m))
    state = rng.integers(0, 3, size=(q, m)) * (rng.random((q, m)) < 0.5)
    wl = Workload(state == 1, state == 2)
    block_rows = 40
    t = 5  # ceil(40 / 8)
    while k_tuples(top_down(vc, wl, 2, t), vc)[1].shape[0] > bound:
        t *= 2
    assert grow_within_bound(vc, wl, 2, block_rows, max_tuples=bound, refine_steps=0).threshold == t


def random_table(seed: int, rows: int = 300, m: int = 7, q: int = 10) -> tuple[VectorCounts, Workload]:
    rng = np.random.default_rng(seed)
    vc = VectorCounts.from_rows(rng.random((rows, m)) < 0.5, np.ones(m))
    state = rng.integers(0, 3, size=(q, m)) * (rng.random((q, m)) < 0.5)
    return vc, Workload(state == 1, state == 2)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10_000), st.integers(2, 3), st.lists(st.integers(0, 40), min_size=3, max_size=3),
       st.integers(4, 40))
def test_growth_resumed_from_a_kept_state_is_growth_from_scratch(seed, k, steps, bound):
    # A state kept for level L by a probe at t serves any threshold in [t, L]: the
    # trees, cells and smallest leaf grown on from it are those of a new growth
    # there, also when the probe that kept it had itself resumed.
    vc, wl = random_table(seed)
    first, second, level = np.cumsum(np.array(steps) + 1).tolist()
    probe = pando._grow(vc, wl, k, first, None, False, bound, keep_levels=(second, level))
    if second not in probe.kept:
        return
    again = pando._grow(vc, wl, k, second, None, False, bound, resume=probe.kept[second], keep_levels=(level,))
    for state in (probe.kept.get(level), again.kept.get(level)):
        for at in sorted({second, (second + level) // 2, level}):
            if state is None:
                break
            resumed = pando._grow(vc, wl, k, at, None, False, bound, resume=state)
            fresh = pando._grow(vc, wl, k, at, None, False, bound)
            assert resumed.roots() == fresh.roots()
            assert (resumed.n_cells, resumed.smallest_child) == (fresh.n_cells, fresh.smallest_child)


@pytest.mark.parametrize("seed", [0, 1, 2, 8])  # 8: two probes resume
def test_resumed_probes_choose_the_threshold_and_trees_new_probes_do(seed, monkeypatch, caplog):
    vc, wl = random_table(seed, rows=900, m=9, q=14)
    with caplog.at_level(logging.INFO, "layout_core.algorithms.pando"):
        resumed = grow_within_bound(vc, wl, 3, 64, max_tuples=20)
    assert "splits are those grown at" in caplog.text  # some probe resumed
    monkeypatch.setattr(pando, "_KEPT_BYTES", 0)  # no state kept: every probe grows from the root
    assert grow_within_bound(vc, wl, 3, 64, max_tuples=20) == resumed
