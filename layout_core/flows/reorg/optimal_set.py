"""Which qd-tree subtrees to reorganize after a workload shift (MTO, Ding et al., §5.1.3).

For a subtree T (node T of one table's qd-tree and everything below it):

* C(T): blocks in T, the cost of rewriting them;
* A(T): blocks of T an average query of the new workload Q reads now;
* B(T): blocks an average query would read less if T were re-optimized on its
  own. Computing it re-runs the optimizer, so it is a callable, called at
  most once per node and as rarely as possible;
* R(T) = (q/w)·B(T) - C(T), the reward: q more queries are expected, and
  rewriting a block costs w block reads.

The optimal set is the set of non-overlapping subtrees (no chosen node is an
ancestor of another) with the largest total reward; the empty set has reward
0. Dynamic programming, leaves first: a node's best set is {T} or the union of
its children's best sets, whichever has the higher reward. {T} needs R(T) > 0,
and on a tie {T} wins (one rewrite instead of several, as property 3 below).

The workload monitor (`reorg.shift.SubtreeBenefits`) builds the shape from the old tree's
subtrees (`subtrees.old_subtrees`), C from the catalog and A from the router, and B
from `reorg.simulated_reads` (out of sample, less the noise floor).

Pruning (``prune=True``) skips benefit() where the answer cannot change. The
paper's properties, with U(T) the tightest known upper bound of B(T):

1. B(T) <= A(T): a query cannot read fewer than 0 blocks. U(T) starts at A(T).
2. B(T) >= B(T_L) + B(T_R): re-optimizing T can do what re-optimizing both
   children does. So U(child) <= U(parent), and once B(T) is known, its
   sibling S has U(S) <= U(parent) - B(T). A bound on a node bounds every
   node below it, so each node takes min(own bound, parent's bound) when visited.
3. Any non-empty set of subtrees inside T has reward <= (q/w)·U(T) - m(T),
   m(T) being the fewest blocks of any non-empty node in T's subtree (by 2,
   the set's benefits add up to at most B(T); it holds at least one node
   with blocks, as only those can have a positive reward). The paper's
   version, R(T) >= B(T_L) + B(T_R), lacks the q/w and the m.

Nodes are visited breadth-first from the root (parents before children, the
paper's order). At each node T:

* if (q/w)·U(T) - m(T) <= 0, nothing in T's subtree can have a positive
  reward: T's best set is empty and nothing below T is visited;
* else if (q/w)·U(T) - C(T) <= 0, T itself cannot be chosen: B(T) is not
  computed, but the nodes below T are still visited (C shrinks downwards);
* else B(T) is computed. Then T, and T's parent if B(parent) is known, is
  checked with property 3: if R(T) >= best(T_L) + best(T_R), where
  best(c) = max(0, (q/w)·U(c) - m(c)) bounds what c's subtree can add, then
  T's best set is {T} (or empty if R(T) <= 0) and nothing below T's children
  is visited. Breadth-first order makes this check happen before any
  grandchild is visited.

With ``prune=False`` every node is evaluated, and the same bounds are only
used to report benefits that break property 2 (`bound_violations`). When
property 2 holds, both modes choose the same set; when it does not (a greedy
optimizer can build a T' worse than two separately re-optimized children),
pruning may miss a better set, and `bound_violations` says where it noticed.
"""

from __future__ import annotations

import math
import numbers
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

__all__ = ["Reorganization", "SubtreeShape", "optimal_set"]

# B and A are averages over queries, so float noise is allowed when comparing them with bounds.
_SLACK = 1e-9


@dataclass(frozen=True)
class SubtreeShape:
    """One qd-tree: nodes 0..n-1, root 0 (any numbering; `subtrees` numbers breadth-first).

    children[i]: (left, right) of node i, or None for a leaf.
    blocks[i]:   C, blocks in node i's subtree (an int >= 0, children's blocks add up).
    reads[i]:    A, blocks of the subtree an average query reads now (A >= 0; A <= C unless
                 queries read the table more than once, as a self-join does).
    Invalid shapes raise ValueError when constructed.
    """

    children: tuple[tuple[int, int] | None, ...]
    blocks: tuple[int, ...]
    reads: tuple[float, ...]

    def __post_init__(self) -> None:
        # Stored as tuples of Python ints and floats (lists and numpy numbers are accepted): the
        # shape cannot change under a running search.
        for name, value in zip(("children", "blocks", "reads"), _normalized(self)):
            object.__setattr__(self, name, value)
        _check_tree(self)

    def __len__(self) -> int:
        return len(self.blocks)


@dataclass(frozen=True)
class Reorganization:
    """The optimal set and how it was found."""

    nodes: tuple[int, ...]  # the subtrees to reorganize (their root nodes), sorted
    reward: float  # total reward of `nodes`, 0.0 when empty
    rewards: Mapping[int, float]  # R(T) of every node whose benefit was computed
    evaluated: int  # calls of benefit()
    considered: int  # nodes in the tree
    reason: str  # one sentence: why this set
    bound_violations: tuple[int, ...] = ()  # nodes whose B broke property 2 (see the module docstring)


def optimal_set(shape: SubtreeShape, benefit: Callable[[int], float], q: float, w: float,
                prune: bool = True) -> Reorganization:
    """The set of non-overlapping subtrees of `shape` with the highest total reward (q/w)·B - C.

    benefit(node) -> B(node): called at most once per node; its exceptions propagate.
    q: queries expected before the next shift; w: cost of writing a block in block reads.
    """
    if not isinstance(shape, SubtreeShape):
        raise TypeError(f"shape must be a SubtreeShape (it checks the tree), not {type(shape).__name__}")
    _check_positive("q", q)
    _check_positive("w", w)
    n = len(shape)
    if n == 0:
        return Reorganization((), 0.0, {}, 0, 0, "the tree has no nodes, so there is nothing to reorganize")
    if q <= w:
        # The paper's rule (§5.1.2): with B(T) <= C(T), (q/w)·B(T) - C(T) <= 0 for every T. Only
        # queries reading the table several times can make B exceed C; the rule stands for them too.
        return Reorganization((), 0.0, {}, 0, n, "q <= w: reward can never be positive because B(T) <= C(T)")
    ratio = q / w
    order, parent = _breadth_first(shape)
    search = _search(shape, order, parent, benefit, ratio, prune)
    nodes, reward = _best_set(shape, order, search)
    return Reorganization(nodes, reward, search.rewards, len(search.rewards), n,
                          _reason(nodes, search.violations), search.violations)


def _breadth_first(shape: SubtreeShape) -> tuple[list[int], list[int]]:
    """Nodes breadth-first from root 0 (left before right), and each node's parent (-1 for the root).

    ValueError if `shape.children` is not one binary tree rooted at 0 over all nodes.
    """
    n = len(shape.children)
    parent = [-1] * n
    seen = [False] * n
    order: list[int] = []
    queue = deque([0] if n else [])
    if n:
        seen[0] = True
    while queue:
        node = queue.popleft()
        order.append(node)
        pair = shape.children[node]
        if pair is None:
            continue
        for child in pair:
            if not 0 <= child < n:
                raise ValueError(f"node {node} has child {child!r}, which is not a node index 0..{n - 1}")
            if seen[child]:
                raise ValueError(f"node {child} is reached twice (child of node {node} and of another node, "
                                 "or the root): not a tree")
            seen[child] = True
            parent[child] = node
            queue.append(child)
    if len(order) != n:
        missing = [i for i in range(n) if not seen[i]]
        raise ValueError(f"nodes {missing[:10]} are not reachable from the root 0")
    return order, parent


# ---------------------------------------------------------------------------
# The breadth-first search with pruning


@dataclass(frozen=True)
class _Search:
    rewards: dict[int, float]  # R(T) of the evaluated nodes
    settled: frozenset[int]  # best set is {T} if T was evaluated and R(T) > 0, else empty; below is ignored
    violations: tuple[int, ...]


def _search(shape: SubtreeShape, order: list[int], parent: list[int], benefit: Callable[[int], float],
            ratio: float, prune: bool) -> _Search:
    children, blocks = shape.children, shape.blocks
    fewest = _fewest_blocks_below(shape, order)
    bound = list(shape.reads)  # U(T); becomes B(T) once computed (property 1: starts at A)
    rewards: dict[int, float] = {}
    settled: set[int] = set()
    below_settled: set[int] = set()  # below a settled node: skipped (its children may have been visited)
    violations: list[int] = []

    def best_inside_at_most(child: int, up: int) -> float:
        # Property 3: no set inside child's subtree beats (q/w)·U - m; the empty set gives 0.
        return max(0.0, ratio * min(bound[child], bound[up]) - fewest[child])

    def settle_if_children_cannot_win(node: int) -> None:
        pair = children[node]
        if pair is None or node not in rewards or node in settled or node in below_settled:
            return
        if rewards[node] >= sum(best_inside_at_most(c, node) for c in pair):
            settled.add(node)
            below_settled.update(pair)  # the children may have been visited already; their children not yet

    for node in order:
        up = parent[node]
        if up >= 0:
            if up in settled or up in below_settled:
                below_settled.add(node)
                continue
            bound[node] = min(bound[node], bound[up])  # property 2: B(node) <= B(up)
        if prune and ratio * bound[node] - fewest[node] <= 0:
            settled.add(node)  # nothing in this subtree can have a positive reward
            continue
        if prune and ratio * bound[node] - blocks[node] <= 0:
            continue  # node cannot be chosen; smaller subtrees below it still might
        value = _checked_benefit(benefit, node, shape.reads[node])
        if value > bound[node] + _SLACK * max(1.0, shape.reads[node]):  # bounds come from subtractions
            violations.append(node)  # property 2 does not hold here: pruning may have been wrong
        bound[node] = value
        rewards[node] = ratio * value - blocks[node]
        if up >= 0:
            left, right = children[up]
            sibling = right if node == left else left
            bound[sibling] = min(bound[sibling], bound[up] - value)  # property 2: B(L) + B(R) <= B(up)
        if prune:
            settle_if_children_cannot_win(node)
            if up >= 0:
                settle_if_children_cannot_win(up)  # B(node) may have tightened the parent's check
    return _Search(rewards, frozenset(settled), tuple(violations))


def _best_set(shape: SubtreeShape, order: list[int], search: _Search) -> tuple[tuple[int, ...], float]:
    """The dynamic program of §5.1.3 over the visited nodes, leaves first; then the chosen roots."""
    children, rewards, settled = shape.children, search.rewards, search.settled
    best = [0.0] * len(order)  # best total reward inside each subtree
    take = [False] * len(order)  # is the best set of this subtree {node} itself?
    # Below a settled node the values are meaningless (those nodes were skipped), but no node
    # reads them: a settled node ignores its children, here and when collecting the set.
    for node in reversed(order):
        pair = children[node]
        below = 0.0 if pair is None or node in settled else best[pair[0]] + best[pair[1]]
        own = rewards.get(node)  # None: not evaluated, because R(node) <= 0 was proven
        take[node] = own is not None and own > 0 and own >= below
        best[node] = own if take[node] else below
    chosen: list[int] = []
    stack = [0]
    while stack:
        node = stack.pop()
        if take[node]:
            chosen.append(node)
        elif node not in settled and children[node] is not None:
            stack.extend(children[node])
    nodes = tuple(sorted(chosen))
    return nodes, sum(rewards[t] for t in nodes) if nodes else 0.0


def _fewest_blocks_below(shape: SubtreeShape, order: list[int]) -> list[float]:
    """m(T): the fewest blocks of any non-empty node in T's subtree; inf if there is none.

    A node with 0 blocks has A = B = 0, so reward 0: it is never chosen and must not make m 0.
    """
    fewest = [float(c) if c > 0 else math.inf for c in shape.blocks]
    for node in reversed(order):
        pair = shape.children[node]
        if pair is not None:
            fewest[node] = min(fewest[node], fewest[pair[0]], fewest[pair[1]])
    return fewest


def _checked_benefit(benefit: Callable[[int], float], node: int, reads: float) -> float:
    value = benefit(node)
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"benefit({node}) returned {value!r}, not a number") from None
    if not math.isfinite(value) or value < -_SLACK:
        raise ValueError(f"benefit({node}) returned {value}; it must be a finite number >= 0")
    if value > reads * (1 + _SLACK):
        raise ValueError(f"benefit({node}) returned {value}, more than the {reads} blocks an average query "
                         "reads in that subtree now (property 1: B <= A)")
    return value


def _reason(nodes: tuple[int, ...], violations: tuple[int, ...]) -> str:
    if not nodes:
        why = "no set of subtrees has a positive reward, so the current layout stays"
    elif nodes == (0,):
        why = "reorganizing the whole tree has the highest reward"
    else:
        why = f"these {len(nodes)} non-overlapping subtrees have the highest total reward"
    if violations:
        why += (f", but benefit broke property 2 (B(T) >= B(T_L) + B(T_R)) at nodes {list(violations[:5])}, "
                "so pruning may have missed a better set (prune=False does not prune)")
    return why


# ---------------------------------------------------------------------------
# Input checks


def _check_positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a finite number > 0, not {value!r}")


def _normalized(shape: SubtreeShape) -> tuple[tuple, tuple, tuple]:
    """(children, blocks, reads) as tuples of ints and floats; ValueError on malformed entries."""
    n = len(shape.children)
    if not len(shape.blocks) == len(shape.reads) == n:
        raise ValueError(f"children, blocks and reads must have one entry per node, not "
                         f"{n}, {len(shape.blocks)} and {len(shape.reads)}")
    children = []
    for node, pair in enumerate(shape.children):
        if pair is not None and (not isinstance(pair, (tuple, list)) or len(pair) != 2
                                 or not all(_is_int(c) for c in pair)):
            raise ValueError(f"children[{node}] = {pair!r}; a node has two children (left, right) or None")
        children.append(None if pair is None else (int(pair[0]), int(pair[1])))
    for node, (c, a) in enumerate(zip(shape.blocks, shape.reads)):
        if not _is_int(c) or c < 0:
            raise ValueError(f"blocks[{node}] = {c!r}; blocks are ints >= 0")
        if not isinstance(a, numbers.Real) or isinstance(a, bool) or not math.isfinite(a) or a < 0:
            raise ValueError(f"reads[{node}] = {a!r}; reads are finite numbers >= 0")
    return tuple(children), tuple(int(c) for c in shape.blocks), tuple(float(a) for a in shape.reads)


def _check_tree(shape: SubtreeShape) -> None:
    _breadth_first(shape)  # raises if not one tree rooted at 0
    for node, pair in enumerate(shape.children):
        if pair is not None and shape.blocks[node] != shape.blocks[pair[0]] + shape.blocks[pair[1]]:
            raise ValueError(f"blocks[{node}] = {shape.blocks[node]}, but its children {pair} have "
                             f"{shape.blocks[pair[0]]} + {shape.blocks[pair[1]]} blocks")


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)
