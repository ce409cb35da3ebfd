"""Pando blocks keep their cells (the k-tuples of leaf ids of their rows).

Revision ID: 0006
Revises: 0005
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("layout_blocks", sa.Column("cells_json", sa.Text))


def downgrade() -> None:
    raise NotImplementedError("catalog revisions are only applied upwards")
