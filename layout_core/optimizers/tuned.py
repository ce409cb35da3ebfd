"""tuned: the hand-tuned baseline of the diPs paper (§13.1), made generic.

TPC-H's tuned layout clusters lineitem by l_shipdate (one cluster per month)
and orders the rows of each cluster by l_orderkey; orders by o_orderdate and
o_orderkey; partsupp (no date column) is sorted by ps_partkey, the other
tables by their primary key. Here: the cluster column is the date or timestamp
column the log filters most (or `cluster_column`), truncated to
`cluster_granularity`; the order column is the primary key's first column (or
`order_column`). Rows are cut into blocks of `block_rows` in (cluster, order
column) order, a cluster boundary always starting a new block, so a block
holds one month's dates and a narrow range of the join key.

A table with no date column the log filters is sorted by the order column;
a fact table (one no foreign key references) that the log filters through
its foreign keys (TPC-DS's, whose dates are in date_dim: §13.2 clusters
them on their date keys) by the key its filters reach it through most,
then by the order column. Dimension tables keep their key order (§13).
"""

from __future__ import annotations

import logging

from layout_core.optimizers.base import BLOCK_ROWS, Optimizer, PlanError, Setting
from layout_core.optimizers.plan import (
    CLUSTER_GRANULARITIES, ClusterBlocks, SortBlocks, even_sizes, new_plan,
)

log = logging.getLogger("layout.tuned")

DATE_KINDS = ("date", "timestamp")

CLUSTER_COLUMN = Setting("cluster_column", "str", "",
                         "date or timestamp column rows are clustered by (default: the one the log filters most; "
                         "none filtered: no clusters, rows sorted by order_column)")
CLUSTER_GRANULARITY = Setting("cluster_granularity", "choice", "month",
                              "one cluster per day, month or year of cluster_column",
                              choices=CLUSTER_GRANULARITIES)
ORDER_COLUMN = Setting("order_column", "str", "",
                       "order of rows inside a cluster (default: the primary key's first column)")
MAX_CLUSTERS = Setting("max_clusters", "int", 4096,
                       "clusters that get blocks of their own (block ids are reserved for them; later clusters "
                       "share the last one's blocks)")


class Tuned(Optimizer):
    name = "tuned"
    help = ("rows clustered by a date column (one cluster per month by default) and sorted by the primary key "
            "inside a cluster, cut every block_rows rows, no block spanning two clusters; a fact table without a "
            "filtered date column sorted by the foreign key the log filters through most, then the primary key "
            "(diPs §13)")
    settings = (BLOCK_ROWS, CLUSTER_COLUMN, CLUSTER_GRANULARITY, ORDER_COLUMN, MAX_CLUSTERS)

    def resolve(self, raw=None):
        resolved = super().resolve(raw)
        if resolved["max_clusters"] < 1:
            raise PlanError(f"max_clusters must be positive, not {resolved['max_clusters']}")
        return resolved

    def fit(self, inputs, settings):
        table, block_rows, rows = inputs.table, settings["block_rows"], inputs.vectors.rows
        order = settings["order_column"] or (table.primary_key[0] if table.primary_key else "")
        if not order:
            raise PlanError(f"tuned needs the order_column setting: {table.name} has no primary key")
        if not table.has_column(order):
            raise PlanError(f"{table.name} has no column {order!r} to order rows by (order_column)")
        cluster = settings["cluster_column"]
        if cluster:
            if not table.has_column(cluster):
                raise PlanError(f"{table.name} has no column {cluster!r} to cluster rows by (cluster_column)")
            if table.column(cluster).kind not in DATE_KINDS:
                raise PlanError(f"cluster_column {cluster!r} of {table.name} is {table.spark_type(cluster)}, "
                                f"not a date or timestamp column")
        else:
            cluster = next((c for c in inputs.workload.filtered_columns
                            if table.has_column(c) and table.column(c).kind in DATE_KINDS), "")
        if not cluster:
            # No date column to cluster by: rows sorted by the order column, sizes exact. A fact
            # table whose dates live in a dimension (TPC-DS's, §13.2) is filtered through a foreign
            # key: unless an order column is given, rows are sorted first by the key the log's
            # filters reach it through most, so that the dimension's diPs find narrow blocks.
            most = next(iter(inputs.workload.induced_columns), "")
            reached = "" if settings["order_column"] or most == order else most
            if reached:
                log.info("tuned %s: no filtered date column; rows sorted by %s (the foreign key the log's "
                         "filters reach it through most), then by %s", table.name, reached, order)
            return new_plan(self, inputs, settings, SortBlocks((reached, order) if reached else (order,), block_rows),
                            even_sizes(rows, block_rows), {"cluster_column": ""})
        # Expected sizes. The per-cluster row counts decide how many blocks there
        # are (sum of ceil(cluster rows / block_rows)), and the plan does not have
        # them: tuned featurizes no cuts, so its vector sample is only the row
        # count. The simplest correct choice: reserve an upper bound of block ids
        # (ceil(rows / block_rows) + max_clusters - 1; a table has no more
        # clusters than rows, hence the min), expect the first ceil(rows /
        # block_rows) ids to be sized as one cluster's would be (sortkey's
        # sizes, summing to the table's rows) and the other ids to be empty.
        # Block ids are dense in cluster order, so the used ids are the first
        # ones; a block after a cluster's small last block is expected larger
        # than it is, and update_catalog's block_rows_error reports that error.
        # Exact sizes need the cluster counts at plan time (e.g. reduce counting
        # rows per cluster), which the pipeline does not compute.
        rule = ClusterBlocks(cluster, settings["cluster_granularity"], (order,), block_rows,
                             min(settings["max_clusters"], rows) or 1)
        sizes = even_sizes(rows, block_rows)
        expected = sizes + (0.0,) * (rule.n_blocks(rows) - len(sizes))
        log.info("tuned %s: clusters of %s by %s, rows in %s order; %d block ids reserved for %d rows in up to "
                 "%d clusters", table.name, cluster, rule.granularity, order, len(expected), rows,
                 rule.max_clusters)
        return new_plan(self, inputs, settings, rule, expected, {"cluster_column": cluster})
