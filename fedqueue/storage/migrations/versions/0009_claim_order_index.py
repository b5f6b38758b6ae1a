"""claim order: ix_deliveries_due gains `id`, so each state's due rows are read in claim order

A claim takes the earliest due rows by (next_attempt_at, id). Rows enqueued together share
next_attempt_at, so without `id` in the index the database sorted a whole fan-out's rows (all
of one activity's 100,000 followers) to take 200 of them.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

from __future__ import annotations

from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index("ix_deliveries_due", table_name="deliveries")
    op.create_index("ix_deliveries_due", "deliveries", ["state", "next_attempt_at", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_deliveries_due", table_name="deliveries")
    op.create_index("ix_deliveries_due", "deliveries", ["state", "next_attempt_at"], unique=False)
