"""console_session (the version a logout moves on) and webhooks.allow_private

A dashboard cookie carries the session version it was issued under; a logout increments the
one row's version, so every cookie issued before it is refused by every process. A webhook's
`allow_private` lets its URL (only its) be a loopback or private address.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    session = op.create_table(
        "console_session",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.CheckConstraint("id = 1", name="console_session_one_row"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.bulk_insert(session, [{"id": 1, "version": 0}])
    with op.batch_alter_table("webhooks", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("allow_private", sa.Boolean(), server_default=sa.text("false"), nullable=False)
        )


def downgrade() -> None:
    with op.batch_alter_table("webhooks", schema=None) as batch_op:
        batch_op.drop_column("allow_private")
    op.drop_table("console_session")
