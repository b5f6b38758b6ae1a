"""retention: counts of pruned deliveries kept on their outbox row; dropped webhook events counted

Delivered, dead and coalesced delivery rows are deleted after their retention
(`retention_delivered_days`, `retention_dead_days`); the status counts of their activity must not
change, so each deletion adds its rows to `outbox.pruned_<state>` in the same transaction.
`webhooks.dropped_events` counts the events dropped past `retention_webhook_backlog`.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

PRUNED = ("pruned_delivered", "pruned_dead", "pruned_coalesced")
COUNT = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        for name in PRUNED:
            batch.add_column(sa.Column(name, COUNT, nullable=False, server_default="0"))
    with op.batch_alter_table("webhooks") as batch:
        batch.add_column(sa.Column("dropped_events", COUNT, nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("webhooks") as batch:
        batch.drop_column("dropped_events")
    with op.batch_alter_table("outbox") as batch:
        for name in PRUNED:
            batch.drop_column(name)
