"""initial schema

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


#: PostgreSQL wakes idle workers when an app INSERTs into the outbox (polling is the fallback).
_NOTIFY_FUNCTION = """
CREATE FUNCTION fedqueue_outbox_notify() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('fedqueue_outbox', NEW.id::text);
    RETURN NEW;
END;
$$ LANGUAGE plpgsql
"""
_NOTIFY_TRIGGER = """
CREATE TRIGGER fedqueue_outbox_notify AFTER INSERT ON outbox
FOR EACH ROW EXECUTE FUNCTION fedqueue_outbox_notify()
"""


def upgrade() -> None:
    op.create_table(
        "actors",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("private_key_pem", sa.Text(), nullable=False),
        sa.Column("public_key_pem", sa.Text(), nullable=False),
        sa.Column("token_hash", sa.String(length=64), nullable=False),
        sa.Column("auto_accept_follows", sa.Boolean(), server_default=sa.text("(true)"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("name"),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column(
            "at", sa.DateTime(timezone=True), server_default=sa.text("(CURRENT_TIMESTAMP)"), nullable=False
        ),
        sa.Column("who", sa.String(length=255), nullable=False),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target", sa.String(length=2048), nullable=False),
        sa.Column("detail", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "followers",
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("follower_uri", sa.String(length=2048), nullable=False),
        sa.Column("inbox", sa.String(length=2048), nullable=False),
        sa.Column("shared_inbox", sa.String(length=2048), nullable=True),
        sa.Column("follow_activity_id", sa.String(length=2048), nullable=True),
        sa.Column("state", sa.String(length=16), server_default=sa.text("'accepted'"), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("actor", "follower_uri"),
    )
    op.create_table(
        "gone_inboxes",
        sa.Column("inbox", sa.String(length=2048), nullable=False),
        sa.Column("gone_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("inbox"),
    )
    op.create_table(
        "hosts",
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), server_default="0", nullable=False),
        sa.Column("first_failure_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_failure_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_success_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("circuit", sa.String(length=16), server_default=sa.text("'closed'"), nullable=False),
        sa.Column("circuit_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("recovery_allowance", sa.Integer(), server_default="0", nullable=False),
        sa.Column("unavailable", sa.Boolean(), server_default=sa.text("(false)"), nullable=False),
        sa.Column("paused", sa.Boolean(), server_default=sa.text("(false)"), nullable=False),
        sa.Column("blocked", sa.Boolean(), server_default=sa.text("(false)"), nullable=False),
        sa.Column(
            "signature_scheme", sa.String(length=16), server_default=sa.text("'unknown'"), nullable=False
        ),
        sa.Column("scheme_checked_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("host"),
    )
    op.create_table(
        "inbound_activities",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("activity_id", sa.String(length=2048), nullable=False),
        sa.Column("actor_uri", sa.String(length=2048), nullable=False),
        sa.Column("activity_type", sa.String(length=64), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("key_id", sa.String(length=2048), nullable=False),
        sa.Column(
            "received_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("activity_id"),
    )
    op.create_table(
        "inbox_cursors",
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("consumer", sa.String(length=64), nullable=False),
        sa.Column(
            "last_item_id",
            sa.BigInteger().with_variant(sa.Integer(), "sqlite"),
            server_default="0",
            nullable=False,
        ),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("actor", "consumer"),
    )
    op.create_table(
        "outbox",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("activity", sa.Text(), nullable=False),
        sa.Column("inboxes", sa.Text(), nullable=True),
        sa.Column("activity_id", sa.String(length=2048), nullable=True),
        sa.Column("activity_type", sa.String(length=64), nullable=True),
        sa.Column("object_id", sa.String(length=2048), nullable=True),
        sa.Column("state", sa.String(length=16), server_default=sa.text("'pending'"), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("fanout_cursor", sa.Text(), nullable=True),
        sa.Column("lease_owner", sa.String(length=64), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column("expanded_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("activity_id"),
    )
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.create_index("ix_outbox_state_id", ["state", "id"], unique=False)

    op.create_table(
        "remote_actors",
        sa.Column("uri", sa.String(length=2048), nullable=False),
        sa.Column("inbox", sa.String(length=2048), nullable=True),
        sa.Column("shared_inbox", sa.String(length=2048), nullable=True),
        sa.Column("key_id", sa.String(length=2048), nullable=True),
        sa.Column("public_key_pem", sa.Text(), nullable=True),
        sa.Column("document", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("fetched_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("uri"),
    )
    with op.batch_alter_table("remote_actors", schema=None) as batch_op:
        batch_op.create_index("ix_remote_actors_key_id", ["key_id"], unique=False)

    op.create_table(
        "deliveries",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("outbox_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("inbox", sa.String(length=2048), nullable=False),
        sa.Column("host", sa.String(length=255), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.Column("activity_type", sa.String(length=64), nullable=False),
        sa.Column("object_id", sa.String(length=2048), nullable=True),
        sa.Column("state", sa.String(length=16), server_default=sa.text("'queued'"), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("lease_owner", sa.String(length=64), nullable=True),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_status", sa.Integer(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("undoes", sa.String(length=2048), nullable=True),
        sa.Column("target", sa.String(length=2048), nullable=True),
        sa.Column("coalesced_by", sa.String(length=2048), nullable=True),
        sa.Column("coalesced_reason", sa.Text(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("(CURRENT_TIMESTAMP)"),
            nullable=False,
        ),
        sa.Column("last_attempt_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["outbox_id"], ["outbox.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("outbox_id", "inbox", name="uq_deliveries_outbox_inbox"),
    )
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.create_index("ix_deliveries_due", ["state", "next_attempt_at"], unique=False)
        batch_op.create_index("ix_deliveries_host_state", ["host", "state"], unique=False)
        batch_op.create_index("ix_deliveries_inbox_object", ["inbox", "object_id", "outbox_id"], unique=False)

    op.create_table(
        "inbox_items",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("inbound_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("actor", sa.String(length=64), nullable=False),
        sa.ForeignKeyConstraint(["inbound_id"], ["inbound_activities.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("inbound_id", "actor", name="uq_inbox_items_inbound_actor"),
    )
    with op.batch_alter_table("inbox_items", schema=None) as batch_op:
        batch_op.create_index("ix_inbox_items_actor_id", ["actor", "id"], unique=False)
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_NOTIFY_FUNCTION)
        op.execute(_NOTIFY_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER fedqueue_outbox_notify ON outbox")
        op.execute("DROP FUNCTION fedqueue_outbox_notify()")
    with op.batch_alter_table("inbox_items", schema=None) as batch_op:
        batch_op.drop_index("ix_inbox_items_actor_id")

    op.drop_table("inbox_items")
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_inbox_object")
        batch_op.drop_index("ix_deliveries_host_state")
        batch_op.drop_index("ix_deliveries_due")

    op.drop_table("deliveries")
    with op.batch_alter_table("remote_actors", schema=None) as batch_op:
        batch_op.drop_index("ix_remote_actors_key_id")

    op.drop_table("remote_actors")
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_index("ix_outbox_state_id")

    op.drop_table("outbox")
    op.drop_table("inbox_cursors")
    op.drop_table("inbound_activities")
    op.drop_table("hosts")
    op.drop_table("gone_inboxes")
    op.drop_table("followers")
    op.drop_table("audit_log")
    op.drop_table("actors")
