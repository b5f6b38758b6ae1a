"""inbound_activities: object_error, why an activity's bare object URI could not be dereferenced

NULL for every activity stored before (and for one whose object came embedded or was fetched).

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("inbound_activities", schema=None) as batch_op:
        batch_op.add_column(sa.Column("object_error", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("inbound_activities", schema=None) as batch_op:
        batch_op.drop_column("object_error")
