"""One column for the version a version replaces: replaces_version_id takes the place
of parent_version_id (the version it retired on activation) and base_version_id (the
version serving when it began), which an activation always made equal.

A version that was activated keeps the one it retired; one never activated (building,
failed) the one it began from.

Revision ID: 0007
Revises: 0006
"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("layout_versions", sa.Column("replaces_version_id", sa.BigInteger))
    versions = sa.table("layout_versions", sa.column("parent_version_id"), sa.column("base_version_id"),
                        sa.column("replaces_version_id"))
    op.execute(versions.update().values(
        replaces_version_id=sa.func.coalesce(versions.c.parent_version_id, versions.c.base_version_id)))
    # Plain columns (no index or constraint names them), so SQLite drops them in place.
    op.drop_column("layout_versions", "parent_version_id")
    op.drop_column("layout_versions", "base_version_id")


def downgrade() -> None:
    raise NotImplementedError("catalog revisions are only applied upwards")
