"""The first release's catalog: tables, versions, their cuts and blocks.

Revision ID: 0001
Revises: none
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

# SQLite only auto-increments an INTEGER PRIMARY KEY, so ids are BIGINT elsewhere.
Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _version_key() -> sa.Column:
    return sa.Column("version_id", Id, sa.ForeignKey("layout_versions.version_id", ondelete="CASCADE"),
                     primary_key=True)


def upgrade() -> None:
    op.create_table(
        "layout_tables",
        sa.Column("name", sa.String(255), primary_key=True),
        sa.Column("location", sa.Text, nullable=False),
        sa.Column("partition_column", sa.String(255)),
        sa.Column("schema_json", sa.Text, nullable=False),
        sa.Column("next_block_id", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "layout_versions",
        sa.Column("version_id", Id, primary_key=True, autoincrement=True),
        sa.Column("table_name", sa.String(255), sa.ForeignKey("layout_tables.name"), nullable=False),
        sa.Column("partition_name", sa.String(1024), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("optimizer", sa.String(255), nullable=False),
        sa.Column("params_json", sa.Text, nullable=False),
        sa.Column("run_id", sa.String(255), nullable=False),
        sa.Column("n_blocks", sa.BigInteger, nullable=False),
        sa.Column("first_block_id", sa.BigInteger, nullable=False),
        sa.Column("routing_index_json", sa.Text),
        sa.Column("reason", sa.Text),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("activated_at", sa.DateTime(timezone=True)),
        sa.Column("retired_at", sa.DateTime(timezone=True)),
        sa.UniqueConstraint("table_name", "partition_name", "run_id", name="layout_versions_run_uq"),
    )
    # The database itself refuses two active versions of one partition.
    op.create_index("layout_versions_one_active", "layout_versions", ["table_name", "partition_name"],
                    unique=True, postgresql_where=sa.text("state = 'active'"),
                    sqlite_where=sa.text("state = 'active'"))
    op.create_table(
        "layout_cuts",
        _version_key(),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("predicate", sa.Text, nullable=False),
        sa.Column("cut_sql", sa.Text, nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("path_json", sa.Text, nullable=False),
        sa.Column("literal_keys", sa.LargeBinary),
        sa.Column("source_versions_json", sa.Text, nullable=False),
    )
    op.create_table(
        "layout_blocks",
        _version_key(),
        sa.Column("block_id", sa.BigInteger, primary_key=True),
        sa.Column("row_count", sa.BigInteger, nullable=False),
        sa.Column("size_bytes", sa.BigInteger, nullable=False),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("stats_json", sa.Text, nullable=False),
        sa.Column("union_bits", sa.Text, nullable=False),
        sa.Column("all_bits", sa.Text, nullable=False),
    )


def downgrade() -> None:
    raise NotImplementedError("catalog revisions are only applied upwards")
