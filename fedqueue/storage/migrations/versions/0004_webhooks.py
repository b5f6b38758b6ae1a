"""webhooks: per consumer a URL and a secret; their events are sent as deliveries rows

Revision ID: 0004
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "webhooks",
        sa.Column("id", _ID, nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("consumer", sa.String(length=64), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("secret", sa.String(length=256), nullable=False),
        sa.Column("events", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.current_timestamp(),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("actor", "consumer", name="uq_webhooks_actor_consumer"),
    )
    op.create_table(
        "webhook_events",
        sa.Column("id", _ID, nullable=False),
        sa.Column("webhook_id", _ID, nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("inbox_item_id", _ID, nullable=True),
        sa.Column("dedupe_key", sa.String(length=2048), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.func.current_timestamp(),
            nullable=False,
        ),
        sa.ForeignKeyConstraint(["webhook_id"], ["webhooks.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("webhook_id", "dedupe_key", name="uq_webhook_events_dedupe"),
    )
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.alter_column("outbox_id", existing_type=_ID, nullable=True)
        batch_op.add_column(sa.Column("webhook_id", _ID, nullable=True))
        batch_op.add_column(sa.Column("webhook_event_id", _ID, nullable=True))
        batch_op.create_foreign_key(
            "fk_deliveries_webhook_id", "webhooks", ["webhook_id"], ["id"], ondelete="CASCADE"
        )
        batch_op.create_foreign_key(
            "fk_deliveries_webhook_event_id",
            "webhook_events",
            ["webhook_event_id"],
            ["id"],
            ondelete="CASCADE",
        )
        batch_op.create_index("ix_deliveries_webhook_id", ["webhook_id"], unique=False)


def downgrade() -> None:
    op.execute("DELETE FROM deliveries WHERE outbox_id IS NULL")
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_webhook_id")
        batch_op.drop_constraint("fk_deliveries_webhook_event_id", type_="foreignkey")
        batch_op.drop_constraint("fk_deliveries_webhook_id", type_="foreignkey")
        batch_op.drop_column("webhook_event_id")
        batch_op.drop_column("webhook_id")
        batch_op.alter_column("outbox_id", existing_type=_ID, nullable=False)
    op.drop_table("webhook_events")
    op.drop_table("webhooks")
