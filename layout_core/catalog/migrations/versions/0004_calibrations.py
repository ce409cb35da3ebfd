"""`layout calibrate` measurements of w.

Revision ID: 0004
Revises: 0003
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "layout_calibrations",
        sa.Column("id", Id, primary_key=True, autoincrement=True),
        sa.Column("measured_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("w", sa.Float, nullable=False),
        sa.Column("write_seconds", sa.Float, nullable=False),
        sa.Column("read_seconds", sa.Float, nullable=False),
        sa.Column("block_rows", sa.BigInteger, nullable=False),
        sa.Column("blocks", sa.Integer, nullable=False),
        sa.Column("rounds", sa.Integer),
        sa.Column("location", sa.Text, nullable=False),
    )
    op.create_index("ix_layout_calibrations_measured_at", "layout_calibrations", ["measured_at"])


def downgrade() -> None:
    raise NotImplementedError("catalog revisions are only applied upwards")
