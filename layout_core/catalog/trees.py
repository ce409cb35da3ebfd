"""The check that tree nodes form trees 0..k-1, before `set_trees` stores them."""

from __future__ import annotations

from layout_core.catalog.errors import CatalogError
from layout_core.catalog.records import TreeNodeRecord, tree_roots


def check_trees(nodes: list[TreeNodeRecord]) -> None:
    """Refuse nodes that do not form trees 0..k-1: each with unique node and
    leaf ids, children that exist in the same tree, exactly one root, and
    every node reachable from it (no node with two parents, no cycle)."""
    by_tree: dict[int, dict[int, TreeNodeRecord]] = {}
    for node in nodes:
        same_tree = by_tree.setdefault(node.tree, {})
        if node.node_id in same_tree:
            raise CatalogError(f"tree {node.tree}: duplicate node id {node.node_id}")
        same_tree[node.node_id] = node
    if sorted(by_tree) != list(range(len(by_tree))):
        raise CatalogError(f"trees must be numbered 0..{len(by_tree) - 1}, not {sorted(by_tree)}")
    for tree, tree_nodes in by_tree.items():
        _check_tree(tree, tree_nodes)


def _check_tree(tree: int, nodes: dict[int, TreeNodeRecord]) -> None:
    leaf_ids = [node.leaf_id for node in nodes.values() if node.is_leaf]
    if len(set(leaf_ids)) != len(leaf_ids):
        raise CatalogError(f"tree {tree}: duplicate leaf ids")
    for node in nodes.values():
        missing = [c for c in (node.left, node.right) if c is not None and c not in nodes]
        if missing:
            raise CatalogError(f"tree {tree}: node {node.node_id} has children {missing} "
                               f"that are not nodes of the tree")
    roots = tree_roots(nodes.values())[tree]
    if len(roots) != 1:
        raise CatalogError(f"tree {tree} must have exactly one root (a node that is nobody's "
                           f"child), not {len(roots)}: {roots[:10]}")
    seen, stack = set(), [roots[0]]
    while stack:
        node = nodes[stack.pop()]
        if node.node_id in seen:
            raise CatalogError(f"tree {tree}: node {node.node_id} has two parents")
        seen.add(node.node_id)
        if not node.is_leaf:
            stack += [node.left, node.right]
    if len(seen) != len(nodes):
        unreachable = sorted(set(nodes) - seen)
        raise CatalogError(f"tree {tree}: nodes {unreachable[:10]} cannot be reached from the "
                           f"root {roots[0]} (a cycle)")
