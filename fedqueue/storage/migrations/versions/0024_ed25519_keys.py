"""Ed25519 keys (FEP-521a) for local actors and the instance actor; each host's accepted key

Additive: nullable columns and a column with a server default, so a worker of the previous
release keeps running against this schema until it is restarted. The keys themselves are made
by the new release where the private-key passphrase is known, not here.

Revision ID: 0024
Revises: 0023
Create Date: 2026-11-28
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("actors") as batch:
        batch.add_column(sa.Column("ed25519_private_key_pem", sa.Text(), nullable=True))
        batch.add_column(sa.Column("ed25519_public_key_pem", sa.Text(), nullable=True))
        batch.add_column(sa.Column("key_rotated_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("instance_key") as batch:
        batch.add_column(sa.Column("ed25519_private_key_pem", sa.Text(), nullable=True))
        batch.add_column(sa.Column("ed25519_public_key_pem", sa.Text(), nullable=True))
    with op.batch_alter_table("hosts") as batch:
        batch.add_column(
            sa.Column("signature_key", sa.String(16), nullable=False, server_default=sa.text("'unknown'"))
        )
        batch.add_column(sa.Column("key_checked_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("hosts") as batch:
        batch.drop_column("key_checked_at")
        batch.drop_column("signature_key")
    with op.batch_alter_table("instance_key") as batch:
        batch.drop_column("ed25519_public_key_pem")
        batch.drop_column("ed25519_private_key_pem")
    with op.batch_alter_table("actors") as batch:
        batch.drop_column("key_rotated_at")
        batch.drop_column("ed25519_public_key_pem")
        batch.drop_column("ed25519_private_key_pem")
