"""The catalog's database tables (SQLAlchemy Core), as of the newest schema revision.

The migrations in `migrations/versions/` create and change these tables; this
module only describes the result for the queries. A change here needs a new
revision there (tests/unit/catalog/test_catalog_migrations.py compares the two).
"""

from __future__ import annotations

import sqlalchemy as sa

# SQLite only auto-increments an INTEGER PRIMARY KEY, so ids are BIGINT elsewhere.
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

metadata = sa.MetaData()


def _version_key() -> sa.Column:
    """The version a row belongs to: part of the key, deleted with its version."""
    return sa.Column("version_id", Id, sa.ForeignKey("layout_versions.version_id", ondelete="CASCADE"),
                     primary_key=True)


tables_t = sa.Table(
    "layout_tables", metadata,
    sa.Column("name", sa.String(255), primary_key=True),
    sa.Column("location", sa.Text, nullable=False),
    sa.Column("partition_column", sa.String(255)),
    sa.Column("schema_json", sa.Text, nullable=False),
    # The next free block id: block ids are unique per table across versions.
    sa.Column("next_block_id", sa.BigInteger, nullable=False, default=0),
)

versions_t = sa.Table(
    "layout_versions", metadata,
    sa.Column("version_id", Id, primary_key=True, autoincrement=True),
    sa.Column("table_name", sa.String(255), sa.ForeignKey("layout_tables.name"), nullable=False),
    sa.Column("partition_name", sa.String(1024), nullable=False),
    sa.Column("state", sa.String(16), nullable=False),
    sa.Column("optimizer", sa.String(255), nullable=False),
    sa.Column("params_json", sa.Text, nullable=False),
    sa.Column("run_id", sa.String(255), nullable=False),
    sa.Column("n_blocks", sa.BigInteger, nullable=False),
    sa.Column("first_block_id", sa.BigInteger, nullable=False),
    sa.Column("reason", sa.Text),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("activated_at", sa.DateTime(timezone=True)),
    sa.Column("retired_at", sa.DateTime(timezone=True)),
    sa.Column("failed_at", sa.DateTime(timezone=True)),
    # The version this one replaces (NULL: none): the one serving the partition when
    # begin_version made it, or the one `activate(replaces=...)` named; activating it
    # retires that version and no other. No foreign key: versions are never deleted.
    sa.Column("replaces_version_id", sa.BigInteger),
    sa.UniqueConstraint("table_name", "partition_name", "run_id", name="layout_versions_run_uq"),
    # The database itself refuses two active versions of one partition.
    sa.Index(
        "layout_versions_one_active", "table_name", "partition_name", unique=True,
        postgresql_where=sa.text("state = 'active'"),
        sqlite_where=sa.text("state = 'active'"),
    ),
)

cuts_t = sa.Table(
    "layout_cuts", metadata,
    _version_key(),
    sa.Column("position", sa.Integer, primary_key=True),
    sa.Column("predicate", sa.Text, nullable=False),
    sa.Column("cut_sql", sa.Text, nullable=False),
    sa.Column("kind", sa.String(32), nullable=False),
    sa.Column("path_json", sa.Text, nullable=False),
    sa.Column("literal_keys", sa.LargeBinary),
    sa.Column("source_versions_json", sa.Text, nullable=False),
)

blocks_t = sa.Table(
    "layout_blocks", metadata,
    _version_key(),
    sa.Column("block_id", sa.BigInteger, primary_key=True),
    sa.Column("row_count", sa.BigInteger, nullable=False),
    sa.Column("size_bytes", sa.BigInteger, nullable=False),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("stats_json", sa.Text, nullable=False),
    sa.Column("union_bits", sa.Text, nullable=False),  # hex
    sa.Column("all_bits", sa.Text, nullable=False),  # hex
    # Per tree, the leaf ids holding the block's rows: [[3], [0, 2]]. Older rows hold one
    # leaf per tree, [3, 0]; NULL (a first-release row) means none.
    sa.Column("leaves_json", sa.Text),
    # Pando layouts: the k-tuples of leaf ids of the block's rows, [[3, 0], [4, 2]]; NULL: not known.
    sa.Column("cells_json", sa.Text),
)

tree_nodes_t = sa.Table(
    "layout_tree_nodes", metadata,
    _version_key(),
    sa.Column("tree", sa.Integer, primary_key=True),
    sa.Column("node_id", sa.BigInteger, primary_key=True),
    sa.Column("cut", sa.Integer),  # internal nodes: cut position, bit 1 -> left_id, 0 -> right_id
    sa.Column("left_id", sa.BigInteger),
    sa.Column("right_id", sa.BigInteger),
    sa.Column("leaf_id", sa.BigInteger),  # leaves only
    sa.Column("rows", sa.BigInteger, nullable=False),
)

# A plan can be large (every node of a big tree, per-leaf block counts), so it
# has its own table and version listings never load it.
plans_t = sa.Table(
    "layout_plans", metadata,
    _version_key(),
    sa.Column("plan_json", sa.Text, nullable=False),
)

purges_t = sa.Table(
    "layout_purges", metadata,
    sa.Column("purge_id", Id, primary_key=True, autoincrement=True),
    # NULL for a run staging folder, which belongs to no version.
    sa.Column("version_id", Id, sa.ForeignKey("layout_versions.version_id", ondelete="CASCADE")),
    sa.Column("path", sa.Text, nullable=False),
    sa.Column("bytes", sa.BigInteger, nullable=False),
    sa.Column("purged_at", sa.DateTime(timezone=True), nullable=False),
)

# The query history: every routed or imported query, pruned after a retention
# period. Reads are per table reference, so a self-join records each of its scans.
queries_t = sa.Table(
    "layout_queries", metadata,
    sa.Column("query_id", Id, primary_key=True, autoincrement=True),
    sa.Column("ts", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("sql_text", sa.Text, nullable=False),
    sa.Column("fingerprint", sa.String(64), nullable=False, index=True),
    sa.Column("source", sa.String(16), nullable=False),
    sa.Column("analyzed", sa.Boolean, nullable=False),
)

query_reads_t = sa.Table(
    "layout_query_reads", metadata,
    sa.Column("query_id", Id, sa.ForeignKey("layout_queries.query_id", ondelete="CASCADE"),
              primary_key=True),
    sa.Column("ref", sa.Integer, primary_key=True),
    # No foreign key: history outlives a table that is dropped from the catalog.
    sa.Column("table_name", sa.String(255), nullable=False, index=True),
    sa.Column("blocks_read", sa.BigInteger, nullable=False),
    sa.Column("blocks_total", sa.BigInteger, nullable=False),
    sa.Column("rows_read", sa.BigInteger, nullable=False),
    sa.Column("rows_total", sa.BigInteger, nullable=False),
    sa.Column("versions_json", sa.Text, nullable=False),
    sa.Column("block_ids", sa.LargeBinary),  # BitMap64, NULL when read in full
)

# `layout calibrate` measurements of w, the cost of rewriting a block in block
# reads (MTO §5.1.2); the workload-shift reward uses the latest one.
calibrations_t = sa.Table(
    "layout_calibrations", metadata,
    sa.Column("id", Id, primary_key=True, autoincrement=True),
    sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("w", sa.Float, nullable=False),
    sa.Column("write_seconds", sa.Float, nullable=False),  # per block
    sa.Column("read_seconds", sa.Float, nullable=False),  # per block
    sa.Column("block_rows", sa.BigInteger, nullable=False),
    sa.Column("blocks", sa.Integer, nullable=False),
    sa.Column("rounds", sa.Integer),
    sa.Column("location", sa.Text, nullable=False),
)
