"""The router's rule 4 (Pando §5): the leaves of every tree of a layout are
intersected with the blocks' lineage, on top of cut bits and zone maps.

Table t has int columns x and y. The hand-built layouts below have two cuts
and two trees:

    cut 0  x < 10      tree 0: node 0 on cut 0 -> leaf 10 (bit 1, x < 10), leaf 11 (bit 0)
    cut 1  y < 10      tree 1: node 0 on cut 1 -> leaf 20 (bit 1, y < 10), leaf 21 (bit 0)
"""

from __future__ import annotations

import dataclasses
import logging
import operator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from layout_core.base.schema import Schema, TableSchema
from layout_core.catalog import BlockRecord, Catalog, CutRecord, TreeNodeRecord
from layout_core.predicates import Column, Compare, IsNull, dumps, to_sql, value_to_json
from layout_core.skipping.router import LayoutIndex, RoutingIndex, route_query

X, Y = Column("x", "int"), Column("y", "int")
SCHEMA = Schema("trees", {"t": TableSchema("t", (("x", "int"), ("y", "int")))})
CUTS = (Compare(X, "<", 10), Compare(Y, "<", 10))
NO_CUT_BITS = {"union_bits": 0b11, "all_bits": 0}  # some rows on both sides of every cut: no proof


def two_trees(cut_of_tree_1: int = 1) -> tuple[TreeNodeRecord, ...]:
    return (
        TreeNodeRecord(0, 0, rows=40, cut=0, left=1, right=2),
        TreeNodeRecord(0, 1, rows=20, leaf_id=10),
        TreeNodeRecord(0, 2, rows=20, leaf_id=11),
        TreeNodeRecord(1, 0, rows=40, cut=cut_of_tree_1, left=1, right=2),
        TreeNodeRecord(1, 1, rows=20, leaf_id=20),
        TreeNodeRecord(1, 2, rows=20, leaf_id=21),
    )


def block(block_id: int, leaves=(), stats=None, union_bits=0b11, all_bits=0) -> BlockRecord:
    return BlockRecord(block_id, 10, 100, f"/w/t/block_id={block_id}", stats or {}, union_bits, all_bits, leaves)


def stat(lo, hi, nulls=0):
    return {"min": value_to_json(lo), "max": value_to_json(hi), "null_count": nulls}


def read(layout: LayoutIndex, where: str) -> set[int]:
    """The blocks of `layout` that `SELECT * FROM t WHERE <where>` reads."""
    route = route_query(f"SELECT * FROM t WHERE {where}", RoutingIndex({"t": (layout,)}, {"t": None}), SCHEMA)
    assert route.analyzed, route.warnings
    (ref,) = route.refs
    return set(ref.blocks)


# Blocks named by letter; their block ids are 100, 101, ...
HAND_BLOCKS = {
    "A": block(100, ((10,), (20,))),
    "B": block(101, ((10, 11), (21,))),  # both leaves of tree 0, only the right leaf of tree 1
    "C": block(102, ((11,), (20, 21))),
    "D": block(103, ((10, 11), (20, 21))),
    # Admitted by both trees, but its zone map puts every x above 5.
    "E": block(104, ((10,), (20,)), stats={"x": stat(7, 9), "y": stat(6, 8)}),
    # No lineage for tree 1, and no row satisfies cut 1: only the cut bits skip it.
    "F": block(105, ((10, 11),), union_bits=0b01),
}


TWO_TREES = two_trees()


def hand_layout(trees=TWO_TREES, blocks=HAND_BLOCKS) -> LayoutIndex:
    return LayoutIndex.from_blocks("t", list(blocks.values()), CUTS, trees=trees)


def names(block_ids: set[int]) -> str:
    return "".join(sorted(name for name, b in HAND_BLOCKS.items() if b.block_id in block_ids))


@pytest.mark.parametrize(
    "where,expected",
    [
        # implies cut 0 and cut 1: each tree admits only its left leaf; B (tree 1: right
        # leaf only) and C (tree 0: right leaf only) go, E by zone maps, F by cut bits
        ("x < 5 AND y < 5", "AD"),
        # disjoint with cut 0: tree 0 admits only leaf 11; tree 1 admits both
        ("x >= 20", "BCDF"),
        # implies cut 0, disjoint with cut 1 (F: no lineage for tree 1, and not every row has y < 10)
        ("x < 10 AND y >= 10", "BDF"),
        # nothing proven about any cut: no tree skips anything
        ("x < 15 AND y > 3", "ABCDEF"),
        ("x < 5 OR y < 5", "ABCDF"),  # (E: zone maps)
    ],
)
def test_a_block_is_read_only_when_every_tree_admits_one_of_its_leaves(where, expected):
    assert names(read(hand_layout(), where)) == expected


def test_without_the_trees_the_cut_bits_alone_skip_less():
    # The same blocks and query without trees: only E (zone map) and F (cut bits) go.
    assert names(read(hand_layout(trees=()), "x < 5 AND y < 5")) == "ABCD"


def test_from_blocks_without_trees_keeps_working_for_summaries_without_leaves():
    class Summary:  # what the benchmarks pass: no `leaves`
        def __init__(self, block_id):
            self.block_id, self.row_count, self.stats, self.union_bits, self.all_bits = block_id, 10, {}, 0b11, 0

    layout = LayoutIndex.from_blocks("t", [Summary(1), Summary(2)], CUTS)
    assert layout.trees == () and layout.leaves == ((), ()) and layout.tree_routes == ()
    assert read(layout, "x < 5 AND y < 5") == {1, 2}
    with_trees = LayoutIndex.from_blocks("t", [Summary(1), Summary(2)], CUTS, "", 0, two_trees())
    assert read(with_trees, "x < 5 AND y < 5") == {1, 2}  # no lineage: the trees skip nothing


# ------------------------------------------------- when in doubt, the trees skip nothing

ALL_HAND = "ABCD"  # E and F are skipped by zone maps and cut bits, whatever the trees say


@pytest.mark.parametrize(
    "case,trees,blocks",
    [
        ("no lineage at all", two_trees(), {n: block(b.block_id, (), b.stats, b.union_bits) for n, b in
                                            HAND_BLOCKS.items()}),
        ("a cut beyond the layout's cuts", two_trees(cut_of_tree_1=2), HAND_BLOCKS),
        ("a cut far beyond the layout's cuts", two_trees(cut_of_tree_1=500), HAND_BLOCKS),
        ("tree 1 has two roots", two_trees() + (TreeNodeRecord(1, 7, rows=1, leaf_id=22),), HAND_BLOCKS),
        ("trees numbered 0 and 3", tuple(TreeNodeRecord(3 if n.tree else 0, n.node_id, n.rows, n.cut, n.left,
                                                        n.right, n.leaf_id) for n in two_trees()), HAND_BLOCKS),
        ("a child that is not a node", two_trees()[:2] + two_trees()[3:], HAND_BLOCKS),
        ("a cycle", (TreeNodeRecord(0, 0, rows=1, cut=0, left=1, right=2),
                     TreeNodeRecord(0, 1, rows=1, cut=0, left=0, right=2),
                     TreeNodeRecord(0, 2, rows=1, leaf_id=10)), HAND_BLOCKS),
    ],
)
def test_unsound_trees_or_missing_lineage_read_everything(case, trees, blocks, caplog):
    layout = hand_layout(trees, blocks)
    with caplog.at_level(logging.WARNING, logger="layout.router"):
        assert names(read(layout, "x < 5 AND y < 5")) == ALL_HAND, case
    if case != "no lineage at all":
        assert any("trees are not used" in r.getMessage() for r in caplog.records)


def test_lineage_a_tree_does_not_have_is_not_used_by_that_tree():
    blocks = dict(HAND_BLOCKS, B=block(101, ((10, 11), (99,))),  # leaf 99 is no leaf of tree 1
                  C=block(102, ((11,), ())))  # tree 0 still skips C
    assert names(read(hand_layout(blocks=blocks), "x < 5 AND y < 5")) == "ABD"
    # Lineage that is no leaf sets at all (a summary that did not go through BlockRecord)
    garbled = dataclasses.replace(hand_layout(), leaves=((11, 21),) + (("leaf", None),) * 5)
    assert names(read(garbled, "x < 5 AND y < 5")) == ALL_HAND


def test_a_stale_cut_never_skips_a_leaf():
    layout = LayoutIndex.from_blocks("t", list(HAND_BLOCKS.values()), (CUTS[0], None), trees=two_trees())
    # cut 1 unusable: tree 1 admits both of its leaves (B stays), its bits skip nothing
    # (F stays); tree 0 still skips C
    assert names(read(layout, "x < 5 AND y < 5")) == "ABDF"


# ------------------------------------------------------------- cells (Pando's k-tuples)


def test_a_block_whose_cells_pair_the_admitted_leaves_of_different_rows_is_skipped():
    # D holds rows of leaves 10 and 11 (tree 0) and 20 and 21 (tree 1), but in the
    # cells (10, 21) and (11, 20) only: for x < 5 AND y < 5 each tree admits its left
    # leaf (10, 20), so each tree's block set has D, yet no row of D is in (10, 20).
    paired = dict(HAND_BLOCKS, D=dataclasses.replace(HAND_BLOCKS["D"], cells=((10, 21), (11, 20))))
    assert names(read(hand_layout(blocks=paired), "x < 5 AND y < 5")) == "A"
    # a row in (10, 20) makes it needed again
    needed = dict(HAND_BLOCKS, D=dataclasses.replace(HAND_BLOCKS["D"], cells=((10, 21), (11, 20), (10, 20))))
    assert names(read(hand_layout(blocks=needed), "x < 5 AND y < 5")) == "AD"
    # disjoint with cut 0 (tree 0 admits 11 only), tree 1 admits both: (11, 20) is admitted
    assert names(read(hand_layout(blocks=paired), "x >= 20")) == "BCDF"


@pytest.mark.parametrize("cells", [
    ((10, 21), (11, 99)),  # leaf 99 is no leaf of tree 1
    ((10,), (11, 20)),  # a cell naming one tree only
    ((10, 21, 30),),  # three trees
])
def test_cells_the_trees_cannot_place_are_not_used(cells):
    layout = dataclasses.replace(hand_layout(), cells=((),) * 3 + (cells,) + ((),) * 2)  # D's cells
    assert names(read(layout, "x < 5 AND y < 5")) == "AD"  # D: per-tree intersection only


def test_one_tree_keeps_no_cells():
    one_tree = two_trees()[:3]
    blocks = {"A": block(100, ((10,),)), "B": block(101, ((11,),))}
    layout = dataclasses.replace(LayoutIndex.from_blocks("t", list(blocks.values()), CUTS, trees=one_tree),
                                 cells=(((10,),), ((11,),)))
    assert layout.cell_index is None and read(layout, "x < 5") == {100}


# --------------------------------------------------- property: no needed row is skipped

# A cut atom is (column, op, constant) or (column, "is null"); a query is a tree of
# ("atom", atom), ("not", q), ("and", q, q), ("or", q, q). Both are evaluated here,
# in SQL's three-valued logic, independently of the router.
VALUES = st.one_of(st.none(), st.integers(-2, 12))
CONSTANTS = st.integers(-3, 13)
COLUMNS = st.sampled_from(["x", "y"])
COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "=": operator.eq,
           "<>": operator.ne}


def evaluate_atom(atom, row):
    column, op, *args = atom
    value = row[column]
    if op == "is null":
        return value is None
    if op == "is not null":
        return value is not None
    if value is None:
        return None  # a comparison with NULL is NULL
    if op == "in":
        return value in args[0]
    return COMPARE[op](value, args[0])


def evaluate(query, row):
    kind, *parts = query
    if kind == "atom":
        return evaluate_atom(parts[0], row)
    values = [evaluate(p, row) for p in parts]
    if kind == "not":
        return None if values[0] is None else not values[0]
    absorbing = kind == "or"  # TRUE decides an OR, FALSE an AND
    if absorbing in values:
        return absorbing
    return None if None in values else not absorbing


def atom_sql(atom) -> str:
    column, op, *args = atom
    if op in ("is null", "is not null"):
        return f"{column} {op.upper()}"
    if op == "in":
        return f"{column} IN ({', '.join(map(str, args[0]))})"
    return f"{column} {op} {args[0]}"


def query_sql(query) -> str:
    kind, *parts = query
    if kind == "atom":
        return atom_sql(parts[0])
    if kind == "not":
        return f"NOT ({query_sql(parts[0])})"
    return f"({query_sql(parts[0])} {kind.upper()} {query_sql(parts[1])})"


def cut_predicate(atom):
    column = Column(atom[0], "int")
    return IsNull(column) if atom[1] == "is null" else Compare(column, atom[1], atom[2])


cut_atoms = st.one_of(
    st.tuples(COLUMNS, st.sampled_from(["<", ">=", "="]), CONSTANTS),
    st.tuples(COLUMNS, st.just("is null")),
)
query_atoms = st.one_of(
    st.tuples(COLUMNS, st.sampled_from(sorted(COMPARE)), CONSTANTS),
    st.tuples(COLUMNS, st.sampled_from(["is null", "is not null"])),
    st.tuples(COLUMNS, st.just("in"), st.lists(CONSTANTS, min_size=1, max_size=3).map(tuple)),
)
queries = st.recursive(
    query_atoms.map(lambda a: ("atom", a)),
    lambda q: st.one_of(q.map(lambda p: ("not", p)),
                        st.tuples(st.sampled_from(["and", "or"]), q, q)),
    max_leaves=4,
)


def tree_shapes(n_cuts: int):
    """None is a leaf; (cut, left, right) an internal node."""
    return st.recursive(st.none(), lambda kids: st.tuples(st.integers(0, n_cuts - 1), kids, kids), max_leaves=6)


def tree_records(shape, tree: int) -> list[TreeNodeRecord]:
    """The nodes of a shape, numbered depth first; leaf ids are arbitrary distinct numbers."""
    nodes: list = []

    def add(s) -> int:
        node_id = len(nodes)
        nodes.append(None)
        if s is None:
            nodes[node_id] = TreeNodeRecord(tree, node_id, rows=0, leaf_id=7 * node_id + 3)
        else:
            left, right = add(s[1]), add(s[2])
            nodes[node_id] = TreeNodeRecord(tree, node_id, rows=0, cut=s[0], left=left, right=right)
        return node_id

    add(shape)
    return nodes


def leaf_of_row(nodes: list[TreeNodeRecord], bits: list[bool]) -> int:
    node = nodes[0]
    while node.leaf_id is None:
        node = nodes[node.left if bits[node.cut] else node.right]
    return node.leaf_id


def summarize(block_id: int, rows: list[dict], bits: list[list[bool]], cells: list[tuple],
              with_cut_bits: bool, with_stats: bool, with_cells: bool) -> BlockRecord:
    """A block record of `rows` (each row's cut bits and leaf per tree given), with exact
    lineage and, `with_cells`, the rows' cells."""
    n_cuts = len(bits[0]) if bits else 0
    union = sum(1 << j for j in range(n_cuts) if any(b[j] for b in bits))
    all_ = sum(1 << j for j in range(n_cuts) if all(b[j] for b in bits))
    if not with_cut_bits:
        union, all_ = 2**64 - 1, 0
    stats = {}
    if with_stats:
        for column in ("x", "y"):
            present = [r[column] for r in rows if r[column] is not None]
            stats[column] = {"min": value_to_json(min(present)) if present else None,
                             "max": value_to_json(max(present)) if present else None,
                             "null_count": len(rows) - len(present)}
    leaves = tuple(sorted(set(leaf_ids)) for leaf_ids in zip(*cells))
    return BlockRecord(block_id, len(rows), 1, f"/w/{block_id}", stats, union, all_, leaves,
                       cells=tuple(cells) if with_cells else ())


@st.composite
def layouts(draw):
    cuts = draw(st.lists(cut_atoms, min_size=1, max_size=4))
    trees = [tree_records(draw(tree_shapes(len(cuts))), t) for t in range(draw(st.integers(1, 3)))]
    rows = draw(st.lists(st.fixed_dictionaries({"x": VALUES, "y": VALUES}), min_size=1, max_size=30))
    bits = [[evaluate_atom(c, r) is True for c in cuts] for r in rows]  # NULL goes to the 0 side
    cells = [tuple(leaf_of_row(nodes, b) for nodes in trees) for b in bits]  # a row's leaf per tree
    n_blocks = draw(st.integers(1, 5))
    if draw(st.booleans()):  # each cell's rows in one block, as Pando lays them out
        distinct = sorted(set(cells))
        block_of_cell = draw(st.lists(st.integers(0, n_blocks - 1), min_size=len(distinct),
                                      max_size=len(distinct)))
        owner = [block_of_cell[distinct.index(cell)] for cell in cells]
    else:  # anywhere
        owner = draw(st.lists(st.integers(0, n_blocks - 1), min_size=len(rows), max_size=len(rows)))
    # Mostly without cut bits, so that the trees alone decide what is skipped.
    with_cut_bits, with_stats = draw(st.sampled_from([False, False, True])), draw(st.booleans())
    with_cells = draw(st.booleans())  # Pando's blocks keep their rows' cells
    blocks = []
    for b in range(n_blocks):
        mine = [i for i, o in enumerate(owner) if o == b]
        blocks.append(summarize(b, [rows[i] for i in mine], [bits[i] for i in mine], [cells[i] for i in mine],
                                with_cut_bits, with_stats, with_cells))
    layout = LayoutIndex.from_blocks("t", blocks, [cut_predicate(c) for c in cuts],
                                     trees=[n for nodes in trees for n in nodes])
    return layout, rows, owner


@settings(max_examples=500, deadline=None)
@given(case=layouts(), query=queries)
def test_every_block_holding_a_row_the_query_needs_is_read(case, query):
    layout, rows, owner = case
    assert layout.tree_routes  # the trees are sound: they take part
    kept = read(layout, query_sql(query))
    needed = {b for row, b in zip(rows, owner) if evaluate(query, row) is True}
    assert needed <= kept, (query_sql(query), rows, owner)


# ------------------------------------------------------------- through the catalog


def test_trees_stored_in_the_catalog_skip_blocks(catalog_url):
    with Catalog(catalog_url) as catalog:
        catalog.register_table("t", "/w/t")
        version, ids = catalog.begin_version("t", "", "pando", {"k": 2}, "run-1", 4)
        catalog.set_cuts(version, [CutRecord(j, dumps(c), to_sql(c), "simple") for j, c in enumerate(CUTS)])
        catalog.set_trees(version, two_trees())
        catalog.set_blocks(version, [
            BlockRecord(ids[0], 10, 100, "/w/t/0", {}, **NO_CUT_BITS, leaves=((10,), (20,))),
            BlockRecord(ids[1], 10, 100, "/w/t/1", {}, **NO_CUT_BITS, leaves=((10, 11), (21,))),
            BlockRecord(ids[2], 10, 100, "/w/t/2", {}, **NO_CUT_BITS, leaves=((11, 10), (21, 20, 21))),
            # its cells pair 10 with 21 and 11 with 20 only: no row is in both admitted leaves
            BlockRecord(ids[3], 10, 100, "/w/t/3", {}, **NO_CUT_BITS, leaves=((10, 11), (20, 21)),
                        cells=((11, 20), (10, 21), (11, 20))),
        ])
        catalog.activate(version)
        index = RoutingIndex.from_snapshot(catalog.snapshot())
    route = route_query("SELECT * FROM t WHERE x < 5 AND y < 5", index, SCHEMA)
    (ref,) = route.refs
    assert route.analyzed and ref.blocks == (ids[0], ids[2])
    assert ref.blocks_total == 4 and ref.rows == 20
    (layout,) = index.layouts["t"]
    assert layout.leaves[1] == ((10, 11), (21,)) and len(layout.trees) == 6
    assert layout.cells == ((), (), (), ((10, 21), (11, 20)))  # stored, read back sorted and distinct
    assert layout.tree_routes is layout.tree_routes  # built once per layout, not per query
