"""backlog_samples: per lane, the deliveries due and the oldest one's wait, sampled by the workers

Additive: a worker of the previous release neither reads nor writes it and keeps running.

Revision ID: 0025
Revises: 0024
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "backlog_samples",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lane", sa.SmallInteger(), nullable=False),
        sa.Column("due", sa.Integer(), nullable=False),
        sa.Column("oldest_due_age_seconds", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_backlog_samples_at", "backlog_samples", ["at"])


def downgrade() -> None:
    op.drop_index("ix_backlog_samples_at", table_name="backlog_samples")
    op.drop_table("backlog_samples")
