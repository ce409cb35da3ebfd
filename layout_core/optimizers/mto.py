"""mto: the qd-tree with join-induced cuts (MTO §4), bits exact through PK -> FK joins."""

from __future__ import annotations

from layout_core.optimizers.qdtree import TreeOptimizer


class Mto(TreeOptimizer):
    name = "mto"
    help = ("greedy qd-tree over simple and join-induced cuts (bits from the dimension tables' active "
            "layouts, literal keys kept as Roaring bitmaps)")
    join_induced = True
