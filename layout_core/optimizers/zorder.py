"""zorder: a Z-order curve over the most filtered columns (what Delta, Iceberg and Hudi users run)."""

from __future__ import annotations

from layout_core.optimizers.base import BLOCK_ROWS, Optimizer, PlanError, Setting
from layout_core.optimizers.plan import CurveBlocks, even_sizes, new_plan

CURVE_COLUMNS = Setting("curve_columns", "columns", (),
                        "columns the curve interleaves (default: the 3 the log filters most, else the primary key)")
DEFAULT_CURVE_WIDTH = 3


class CurveOptimizer(Optimizer):
    curve = "zorder"
    settings = (BLOCK_ROWS, CURVE_COLUMNS)

    def fit(self, inputs, settings):
        table = inputs.table
        columns = (settings["curve_columns"] or inputs.workload.filtered_columns[:DEFAULT_CURVE_WIDTH]
                   or tuple(table.primary_key))
        if not columns:
            raise PlanError(f"{self.name} needs the curve_columns setting, filtered columns in the log "
                            f"or a primary key")
        unknown = [c for c in columns if not table.has_column(c)]
        if unknown:
            raise PlanError(f"{table.name} has no column {', '.join(unknown)} for the curve")
        rule = CurveBlocks(self.curve, tuple(columns), settings["block_rows"])
        return new_plan(self, inputs, settings, rule, even_sizes(inputs.vectors.rows, settings["block_rows"]))


class ZOrder(CurveOptimizer):
    name = "zorder"
    help = "rows sorted by the Z-order key of curve_columns, cut every block_rows rows"
