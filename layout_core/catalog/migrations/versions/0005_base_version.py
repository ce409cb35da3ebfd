"""The version that served the partition when begin_version made a version
(base_version_id): activate retires that one or refuses.

Versions still unfinished when the column is added began before anyone recorded
their base: they get the version serving their partition now, the base they most
likely had, so that upgrading the catalog does not make them fail.

Revision ID: 0005
Revises: 0004
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("layout_versions", sa.Column("base_version_id", sa.BigInteger))
    versions = sa.table("layout_versions", sa.column("version_id"), sa.column("table_name"),
                        sa.column("partition_name"), sa.column("state"), sa.column("base_version_id"))
    active = versions.alias("active")
    serving = (sa.select(active.c.version_id)
               .where(active.c.table_name == versions.c.table_name,
                      active.c.partition_name == versions.c.partition_name,
                      active.c.state == "active")
               .scalar_subquery())
    op.execute(versions.update().where(versions.c.state.in_(("building", "failed")))
               .values(base_version_id=serving))


def downgrade() -> None:
    raise NotImplementedError("catalog revisions are only applied upwards")
