"""Every table of the data model as a typed Core `Table`, what storage's statements are built on,
and the `METADATA` they belong to (migrations compare against it).

SQLModel leaves a row class's `__table__` untyped: storage names the tables here, once.
"""

from __future__ import annotations

from sqlalchemy import MetaData, Table
from sqlmodel import SQLModel

from fedqueue.storage.operator_tables import AuditRow, ConsoleSessionRow, InstanceKeyRow, RelayRow, WebhookRow
from fedqueue.storage.sample_tables import BacklogSampleRow
from fedqueue.storage.tables import (
    ActorRow,
    DeliveryRow,
    FollowerRow,
    FollowingRow,
    GoneInboxRow,
    HostRow,
    InboundActivityRow,
    InboxCursorRow,
    InboxItemRow,
    OutboxRow,
    RemoteActorRow,
    TombstoneRow,
    WebhookEventRow,
)
from fedqueue.storage.worker_tables import WorkerRow

#: Every table, of storage/tables, storage/operator_tables, storage/worker_tables and
#: storage/sample_tables.
METADATA: MetaData = SQLModel.metadata


def _table(row: type[SQLModel]) -> Table:
    """The Core table of the SQLModel table class `row`."""
    return METADATA.tables[str(row.__tablename__)]


ACTORS = _table(ActorRow)
OUTBOX = _table(OutboxRow)
DELIVERIES = _table(DeliveryRow)
HOSTS = _table(HostRow)
REMOTE_ACTORS = _table(RemoteActorRow)
GONE_INBOXES = _table(GoneInboxRow)
TOMBSTONES = _table(TombstoneRow)
INBOUND_ACTIVITIES = _table(InboundActivityRow)
INBOX_ITEMS = _table(InboxItemRow)
INBOX_CURSORS = _table(InboxCursorRow)
FOLLOWERS = _table(FollowerRow)
FOLLOWING = _table(FollowingRow)
WEBHOOK_EVENTS = _table(WebhookEventRow)
INSTANCE_KEY = _table(InstanceKeyRow)
CONSOLE_SESSION = _table(ConsoleSessionRow)
RELAYS = _table(RelayRow)
WEBHOOKS = _table(WebhookRow)
AUDIT_LOG = _table(AuditRow)
WORKERS = _table(WorkerRow)
BACKLOG_SAMPLES = _table(BacklogSampleRow)
