"""deliveries: index recipient, webhook_id and webhook_event_id only where set

An activity delivery has no `recipient` (that is set only while its inbox is unknown), no
`webhook_id` and no `webhook_event_id`, yet uq_deliveries_outbox_recipient and
ix_deliveries_webhook_id held an entry for it: on PostgreSQL every one of its writes (the
fan-out's INSERT, the claim's and the record's UPDATEs, none of them HOT as `state` is indexed)
added one to each, and on SQLite its INSERT and its prune did. Both are now partial
(`... IS NOT NULL`), so they hold webhook POSTs and unresolved recipients only.

The unique key allows what it did before (NULLs never conflicted), and the fan-out's
`ON CONFLICT DO NOTHING` names no target, so it skips a duplicate under a partial unique
index too. On PostgreSQL a constraint cannot be partial, so it becomes a unique index of the
same name; on SQLite dropping it rebuilds the table (batch mode).

ix_deliveries_webhook_event_id is new, and as partial costs an activity delivery nothing: each
deleted webhook event (retention, the backlog cap, a removed webhook's cascade) had its
delivery rows found by ON DELETE CASCADE with a read of the whole table. And on SQLite, which
is never analyzed, the full ix_deliveries_webhook_id served `webhook_id IS NULL`: cancelling a
deleted actor's deliveries, and `finish_deletions` for each deleted actor, read every activity
delivery through it; they now read the unsent (unfinished) ranges of ix_deliveries_due.

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-25
"""

from __future__ import annotations

import sqlalchemy as sa

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

#: Each partial index: its name, its columns (the last one is the one that must be set), unique.
_PARTIAL = (
    ("uq_deliveries_outbox_recipient", ["outbox_id", "recipient"], True),
    ("ix_deliveries_webhook_id", ["webhook_id"], False),
    ("ix_deliveries_webhook_event_id", ["webhook_event_id"], False),
)


def upgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.drop_constraint("uq_deliveries_outbox_recipient", type_="unique")
        batch.drop_index("ix_deliveries_webhook_id")
    for name, columns, unique in _PARTIAL:
        only_set = sa.text(f"{columns[-1]} IS NOT NULL")
        op.create_index(
            name, "deliveries", columns, unique=unique, sqlite_where=only_set, postgresql_where=only_set
        )


def downgrade() -> None:
    for name, _columns, _unique in reversed(_PARTIAL):
        op.drop_index(name, table_name="deliveries")
    with op.batch_alter_table("deliveries") as batch:
        batch.create_index("ix_deliveries_webhook_id", ["webhook_id"], unique=False)
        batch.create_unique_constraint("uq_deliveries_outbox_recipient", ["outbox_id", "recipient"])
