"""deliveries: inbox nullable, recipient (an actor whose inbox is not known yet), last_error_detail

A recipient whose actor document could not be fetched used to be stored with its actor URI
in `inbox`; a retry then POSTed the activity to that URI. Such a row now has no inbox and
names the actor in `recipient`; a retry fetches the actor document again first. Old rows that
were dead for that reason are moved over (their `last_error` starts with "recipient ").

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.alter_column("inbox", existing_type=sa.String(2048), nullable=True)
        batch_op.add_column(sa.Column("recipient", sa.String(2048), nullable=True))
        batch_op.add_column(sa.Column("last_error_detail", sa.Text(), nullable=True))
        batch_op.create_unique_constraint("uq_deliveries_outbox_recipient", ["outbox_id", "recipient"])
    op.execute(
        "UPDATE deliveries SET recipient = inbox, inbox = NULL "
        "WHERE state = 'dead' AND last_error LIKE 'recipient %' AND attempts = 0"
    )


def downgrade() -> None:
    op.execute("UPDATE deliveries SET inbox = recipient WHERE inbox IS NULL")
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_constraint("uq_deliveries_outbox_recipient", type_="unique")
        batch_op.drop_column("last_error_detail")
        batch_op.drop_column("recipient")
        batch_op.alter_column("inbox", existing_type=sa.String(2048), nullable=False)
