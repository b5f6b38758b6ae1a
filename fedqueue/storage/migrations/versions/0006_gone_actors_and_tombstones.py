"""remote_actors.gone (a fetch answered 410/404) and inbox_tombstones (Delete before Create)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("remote_actors", schema=None) as batch_op:
        batch_op.add_column(sa.Column("gone", sa.Boolean(), server_default=sa.text("false"), nullable=False))
    op.create_table(
        "inbox_tombstones",
        sa.Column("object_id", sa.String(length=2048), nullable=False),
        sa.Column("actor_uri", sa.String(length=2048), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("object_id", "actor_uri"),
    )
    op.create_index("ix_inbox_tombstones_deleted_at", "inbox_tombstones", ["deleted_at"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_inbox_tombstones_deleted_at", table_name="inbox_tombstones")
    op.drop_table("inbox_tombstones")
    with op.batch_alter_table("remote_actors", schema=None) as batch_op:
        batch_op.drop_column("gone")
