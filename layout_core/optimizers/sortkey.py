"""sortkey: rows sorted by one column and cut into equal blocks (the classic baseline)."""

from __future__ import annotations

from layout_core.optimizers.base import BLOCK_ROWS, Optimizer, PlanError, Setting
from layout_core.optimizers.plan import SortBlocks, even_sizes, new_plan

SORT_KEY = Setting("sort_column", "str", "", "column the rows are sorted by (default: the primary key)")


class SortKey(Optimizer):
    name = "sortkey"
    help = "rows sorted by sort_column, cut every block_rows rows"
    settings = (BLOCK_ROWS, SORT_KEY)

    def fit(self, inputs, settings):
        table = inputs.table
        column = settings["sort_column"] or (table.primary_key[0] if table.primary_key else "")
        if not column:
            raise PlanError(f"sortkey needs the sort_column setting: {table.name} has no primary key")
        if not table.has_column(column):
            raise PlanError(f"{table.name} has no column {column!r} to sort by")
        rule = SortBlocks((column,), settings["block_rows"])
        return new_plan(self, inputs, settings, rule, even_sizes(inputs.vectors.rows, settings["block_rows"]))
