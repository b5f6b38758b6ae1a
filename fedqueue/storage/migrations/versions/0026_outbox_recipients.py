"""outbox: recipients, the actors an activity's fan-out addressed (each follower once)

NULL for every row expanded before (its status shows `recipients` null, its `inboxes` still
counted from its deliveries) and for a row that named its own inboxes. Additive and nullable:
a worker of the previous release neither reads nor writes it and keeps running.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0026"
down_revision = "0025"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.add_column(sa.Column("recipients", sa.Integer(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outbox", schema=None) as batch_op:
        batch_op.drop_column("recipients")
