"""actors.deleted_at, also_known_as, moved_to; followers.moved_to; outbox by object

A deleted actor's row stays (its key signs the Delete; its name stays taken while the tombstone
lasts). `also_known_as` is a JSON array of URIs. `followers.moved_to` records a follower's Move.
`ix_outbox_actor_object` finds the activities of an object, for the recipients of its Delete.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("actors", schema=None) as batch_op:
        batch_op.add_column(sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("also_known_as", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("moved_to", sa.String(length=2048), nullable=True))
    with op.batch_alter_table("followers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("moved_to", sa.String(length=2048), nullable=True))
    op.create_index("ix_outbox_actor_object", "outbox", ["actor", "object_id"], unique=False)


def downgrade() -> None:
    op.drop_index("ix_outbox_actor_object", table_name="outbox")
    with op.batch_alter_table("followers", schema=None) as batch_op:
        batch_op.drop_column("moved_to")
    with op.batch_alter_table("actors", schema=None) as batch_op:
        batch_op.drop_column("moved_to")
        batch_op.drop_column("also_known_as")
        batch_op.drop_column("deleted_at")
