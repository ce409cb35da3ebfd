"""The query history: queries and what each table reference read.

Revision ID: 0003
Revises: 0002
"""

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "layout_queries",
        sa.Column("query_id", Id, primary_key=True, autoincrement=True),
        sa.Column("ts", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sql_text", sa.Text, nullable=False),
        sa.Column("fingerprint", sa.String(64), nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("analyzed", sa.Boolean, nullable=False),
    )
    op.create_index("ix_layout_queries_ts", "layout_queries", ["ts"])
    op.create_index("ix_layout_queries_fingerprint", "layout_queries", ["fingerprint"])
    op.create_table(
        "layout_query_reads",
        sa.Column("query_id", Id, sa.ForeignKey("layout_queries.query_id", ondelete="CASCADE"),
                  primary_key=True),
        sa.Column("ref", sa.Integer, primary_key=True),
        sa.Column("table_name", sa.String(255), nullable=False),
        sa.Column("blocks_read", sa.BigInteger, nullable=False),
        sa.Column("blocks_total", sa.BigInteger, nullable=False),
        sa.Column("rows_read", sa.BigInteger, nullable=False),
        sa.Column("rows_total", sa.BigInteger, nullable=False),
        sa.Column("versions_json", sa.Text, nullable=False),
        sa.Column("block_ids", sa.LargeBinary),
    )
    op.create_index("ix_layout_query_reads_table_name", "layout_query_reads", ["table_name"])


def downgrade() -> None:
    raise NotImplementedError("catalog revisions are only applied upwards")
