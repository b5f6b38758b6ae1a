"""deliveries.lane: priority lanes, and ix_deliveries_due reads each (state, lane) in claim order

0 interactive (Accept, Reject, Follow, Undo, direct messages, webhook events), 1 normal,
2 bulk (an actor's Delete of itself, fan-outs over `bulk_lane_threshold`). A claim serves a
lower lane first (`DeliveryStore.claim`); rows queued before this revision are normal.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(sa.Column("lane", sa.SmallInteger(), nullable=False, server_default="1"))
    op.drop_index("ix_deliveries_due", table_name="deliveries")
    op.create_index(
        "ix_deliveries_due", "deliveries", ["state", "lane", "next_attempt_at", "id"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_deliveries_due", table_name="deliveries")
    op.create_index("ix_deliveries_due", "deliveries", ["state", "next_attempt_at", "id"], unique=False)
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_column("lane")
