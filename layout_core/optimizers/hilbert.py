"""hilbert: a Hilbert curve over the most filtered columns."""

from __future__ import annotations

from layout_core.optimizers.zorder import CurveOptimizer


class Hilbert(CurveOptimizer):
    name = "hilbert"
    help = "rows sorted by the Hilbert key of curve_columns, cut every block_rows rows"
    curve = "hilbert"
