"""following: the remote actors local actors follow (for FEP-8fcf followers synchronization)

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "following",
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("followed_uri", sa.String(length=2048), nullable=False),
        sa.Column("follow_activity_id", sa.String(length=2048), nullable=True),
        sa.Column("accepted_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("actor", "followed_uri"),
    )
    op.create_index("ix_following_followed_uri", "following", ["followed_uri"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_following_followed_uri", table_name="following")
    op.drop_table("following")
