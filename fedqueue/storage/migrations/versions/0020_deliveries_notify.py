"""deliveries: an INSERT wakes idle workers on PostgreSQL, as an outbox INSERT does

A worker that finds nothing to claim waits for a NOTIFY on `fedqueue_outbox`, or its poll
interval. Only the outbox's trigger sent one, so when one worker expanded a fan-out the others
joined it a poll interval later (1 s by default), and deliveries queued by another process
(a webhook event from `serve --no-worker`) waited as long. One NOTIFY per INSERT statement (a
fan-out writes its rows 1,000 to a statement), sent at commit; identical ones in a transaction
are sent once.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-26
"""

from __future__ import annotations

from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

_NOTIFY_FUNCTION = """
CREATE FUNCTION fedqueue_deliveries_notify() RETURNS trigger AS $$
BEGIN
    PERFORM pg_notify('fedqueue_outbox', '');
    RETURN NULL;
END;
$$ LANGUAGE plpgsql
"""
_NOTIFY_TRIGGER = """
CREATE TRIGGER fedqueue_deliveries_notify AFTER INSERT ON deliveries
FOR EACH STATEMENT EXECUTE FUNCTION fedqueue_deliveries_notify()
"""


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_NOTIFY_FUNCTION)
        op.execute(_NOTIFY_TRIGGER)


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER fedqueue_deliveries_notify ON deliveries")
        op.execute("DROP FUNCTION fedqueue_deliveries_notify()")
