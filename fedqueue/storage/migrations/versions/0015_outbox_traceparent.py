"""outbox.traceparent: the W3C trace context an activity was handed in with

Set at intake (the span of `POST /actors/{name}/outbox`, or the app's own `traceparent` header),
or by an app that INSERTs the row itself; the worker continues that trace for the fan-out and
each delivery's send (`fedqueue.tracing`). NULL: no trace.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("traceparent", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("traceparent")
