"""actors: a profile (display name, summary, icon, header image, url, type, fields, discoverable, indexable)

Every column is NULL or its default for the actors that exist: their documents stay as they were
(a `Person`, not discoverable) until a profile is set (`fedqueue actor update`).

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-27
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None

_COLUMNS = (
    ("display_name", sa.String(length=100)),
    ("summary", sa.Text()),
    ("icon_url", sa.String(length=2048)),
    ("image_url", sa.String(length=2048)),
    ("profile_url", sa.String(length=2048)),
    ("profile_fields", sa.Text()),
)


def upgrade() -> None:
    with op.batch_alter_table("actors", schema=None) as batch_op:
        for name, kind in _COLUMNS:
            batch_op.add_column(sa.Column(name, kind, nullable=True))
        batch_op.add_column(
            sa.Column("actor_type", sa.String(length=16), nullable=False, server_default=sa.text("'Person'"))
        )
        for flag in ("discoverable", "indexable"):
            batch_op.add_column(
                sa.Column(flag, sa.Boolean(), nullable=False, server_default=sa.text("false"))
            )


def downgrade() -> None:
    with op.batch_alter_table("actors", schema=None) as batch_op:
        for name in ("indexable", "discoverable", "actor_type", *(name for name, _ in reversed(_COLUMNS))):
            batch_op.drop_column(name)
