"""hosts.block_reason (a block covers subdomains); relays the instance actor follows

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("hosts", schema=None) as batch_op:
        batch_op.add_column(sa.Column("block_reason", sa.String(length=500), nullable=True))
    op.create_table(
        "relays",
        sa.Column("uri", sa.String(length=2048), nullable=False),
        sa.Column("inbox", sa.String(length=2048), nullable=False),
        sa.Column("follow_activity_id", sa.String(length=2048), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("uri"),
    )


def downgrade() -> None:
    op.drop_table("relays")
    with op.batch_alter_table("hosts", schema=None) as batch_op:
        batch_op.drop_column("block_reason")
