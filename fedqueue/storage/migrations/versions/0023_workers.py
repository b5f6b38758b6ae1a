"""workers: one heartbeat row per running worker (id, host, pid, version, started, beats, progress)

Additive: a worker of the previous release neither reads nor writes it and keeps running.

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "workers",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("host", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("version", sa.String(32), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("beat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("progress_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("in_flight", sa.Integer(), nullable=False),
        sa.Column("done", sa.BigInteger(), nullable=False),
        sa.Column("errors", sa.BigInteger(), nullable=False),
    )
    op.create_index("ix_workers_beat_at", "workers", ["beat_at"])


def downgrade() -> None:
    op.drop_index("ix_workers_beat_at", table_name="workers")
    op.drop_table("workers")
