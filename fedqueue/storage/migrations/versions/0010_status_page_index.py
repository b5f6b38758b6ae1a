"""status pages: ix_deliveries_outbox_state (outbox_id, state, id)

A status read shows one page of an activity's deliveries, failing and in-flight first, by id
within each state. Without this index each page found the activity's rows through
uq_deliveries_outbox_inbox and sorted all of them (50,000 for an activity to 50,000 inboxes)
to show 100; with it, each state's rows are one index range already in id order, and the
counts per state are read from the index alone.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_deliveries_outbox_state", "deliveries", ["outbox_id", "state", "id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_deliveries_outbox_state", table_name="deliveries")
