"""Tree layouts and their lifecycle: tree nodes, plans, purges; the version a version
retired (parent_version_id), when it failed, each block's leaves; routing_index_json goes.

Revision ID: 0002
Revises: 0001
"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

Id = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _version_key() -> sa.Column:
    return sa.Column("version_id", Id, sa.ForeignKey("layout_versions.version_id", ondelete="CASCADE"),
                     primary_key=True)


def upgrade() -> None:
    op.add_column("layout_versions", sa.Column("parent_version_id", sa.BigInteger))
    op.add_column("layout_versions", sa.Column("failed_at", sa.DateTime(timezone=True)))
    op.add_column("layout_blocks", sa.Column("leaves_json", sa.Text))
    # Read by no code since this revision; a plain column, so SQLite drops it in place.
    op.drop_column("layout_versions", "routing_index_json")
    op.create_table(
        "layout_tree_nodes",
        _version_key(),
        sa.Column("tree", sa.Integer, primary_key=True),
        sa.Column("node_id", sa.BigInteger, primary_key=True),
        sa.Column("cut", sa.Integer),
        sa.Column("left_id", sa.BigInteger),
        sa.Column("right_id", sa.BigInteger),
        sa.Column("leaf_id", sa.BigInteger),
        sa.Column("rows", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "layout_plans",
        _version_key(),
        sa.Column("plan_json", sa.Text, nullable=False),
    )
    op.create_table(
        "layout_purges",
        sa.Column("purge_id", Id, primary_key=True, autoincrement=True),
        sa.Column("version_id", Id, sa.ForeignKey("layout_versions.version_id", ondelete="CASCADE")),
        sa.Column("path", sa.Text, nullable=False),
        sa.Column("bytes", sa.BigInteger, nullable=False),
        sa.Column("purged_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    raise NotImplementedError("catalog revisions are only applied upwards")
