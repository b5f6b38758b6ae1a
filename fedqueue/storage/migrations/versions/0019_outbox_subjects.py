"""outbox: ix_outbox_object_id, and every Undo row's object_id its deliveries' subject

Coalescing reads a claimed batch's (inbox, subject) histories only for subjects that two
outbox rows or more name (or an Undo): one lookup per subject, by ix_outbox_object_id, before
one per key. That holds only if a row's `object_id` is its deliveries' subject, as intake
stores it for an Undo that embeds what it undoes. An Undo naming the undone activity by id was
stored with that id and its deliveries with the undone activity's object; the fan-out now
stores the subject on the row too, and this sets it on the rows already expanded (from any
one of their deliveries: all of a row's have the same subject).

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-26
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_outbox = sa.table("outbox", sa.column("id"), sa.column("activity_type"), sa.column("object_id"))
_deliveries = sa.table("deliveries", sa.column("outbox_id"), sa.column("object_id"))


def upgrade() -> None:
    op.create_index("ix_outbox_object_id", "outbox", ["object_id"], unique=False)
    subject = (
        sa.select(_deliveries.c.object_id)
        .where(_deliveries.c.outbox_id == _outbox.c.id, _deliveries.c.object_id.is_not(None))
        .limit(1)
        .scalar_subquery()
    )
    op.execute(
        _outbox.update()
        .where(_outbox.c.activity_type == "Undo", subject.is_not(None), subject != _outbox.c.object_id)
        .values(object_id=subject)
    )


def downgrade() -> None:
    # The subjects stay: they are what the rows' deliveries say, and nothing before 0019 reads
    # an Undo row's object_id as its undone activity's id.
    op.drop_index("ix_outbox_object_id", table_name="outbox")
