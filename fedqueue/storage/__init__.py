"""The storage boundary: the only package that imports SQLAlchemy.

`Store` groups one repository per concern; each method is named for what it means to the
caller (`enqueue`, `claim`, `record`, `insert_inbound_if_new`, ...), never for SQL.
"""

from __future__ import annotations

from fedqueue.storage.actor_lifecycle import ActorLifecycleStore
from fedqueue.storage.actors import ActorStore, CreatedActor, LocalActor
from fedqueue.storage.admin import AdminStore
from fedqueue.storage.audience import AudienceStore
from fedqueue.storage.backlog_samples import BacklogSampleStore
from fedqueue.storage.blocks import BlockStore
from fedqueue.storage.coalescing_reads import CoalescingStore, Decision, HistoryRow
from fedqueue.storage.console_sessions import ConsoleSessionStore
from fedqueue.storage.consumers import Consumer, ConsumerStore
from fedqueue.storage.database import Database
from fedqueue.storage.deliveries import DeliveryStore, DeliveryView, Enqueued, Target
from fedqueue.storage.followers import Follower, FollowerStore
from fedqueue.storage.following import FollowingStore
from fedqueue.storage.hosts import HostStore
from fedqueue.storage.inbox import Admission, InboxEntry, InboxStore, Pulled
from fedqueue.storage.inbox_writes import NewInbound
from fedqueue.storage.outbox import Accepted, OutboxEntry, OutboxStore, OutboxSummary, Sendable
from fedqueue.storage.published import PublishedStore
from fedqueue.storage.relays import RelayStore
from fedqueue.storage.remote_actors import CachedRemote, RemoteActorStore
from fedqueue.storage.retention import RetentionStore
from fedqueue.storage.stats import StatsStore
from fedqueue.storage.status_pages import FanoutPage, StatusPages
from fedqueue.storage.tombstones import TombstoneStore
from fedqueue.storage.webhook_registry import Webhook, WebhookPayload, WebhookStore
from fedqueue.storage.workers import WorkerStore

__all__ = [
    "Accepted",
    "Admission",
    "CachedRemote",
    "Consumer",
    "CreatedActor",
    "Decision",
    "DeliveryView",
    "Enqueued",
    "FanoutPage",
    "Follower",
    "HistoryRow",
    "InboxEntry",
    "LocalActor",
    "NewInbound",
    "OutboxEntry",
    "OutboxSummary",
    "Pulled",
    "Sendable",
    "Store",
    "Target",
    "Webhook",
    "WebhookPayload",
]


class Store:
    """Every repository over one database connection pool."""

    def __init__(self, database: Database, key_passphrase: bytes | None = None) -> None:
        self.database = database
        self.actors = ActorStore(database, key_passphrase)
        self.actor_lifecycle = ActorLifecycleStore(database)
        self.remote_actors = RemoteActorStore(database)
        self.admin = AdminStore(database)
        self.stats = StatsStore(database)
        self.inbox = InboxStore(database)
        self.followers = FollowerStore(database)
        self.following = FollowingStore(database)
        self.outbox = OutboxStore(database)
        self.deliveries = DeliveryStore(database)
        self.status_pages = StatusPages(database)
        self.hosts = HostStore(database)
        self.blocks = BlockStore(database)
        self.relays = RelayStore(database)
        self.audience = AudienceStore(database)
        self.coalescing = CoalescingStore(database)
        self.published = PublishedStore(database)
        self.webhooks = WebhookStore(database)
        self.console_sessions = ConsoleSessionStore(database)
        self.tombstones = TombstoneStore(database)
        self.retention = RetentionStore(database)
        self.consumers = ConsumerStore(database)
        self.workers = WorkerStore(database)
        self.backlog_samples = BacklogSampleStore(database)

    @classmethod
    def open(cls, database_url: str, key_passphrase: bytes | None = None) -> Store:
        """The store over `database_url`; `key_passphrase` seals and opens the private keys."""
        return cls(Database.open(database_url), key_passphrase)

    async def close(self) -> None:
        """Store what was queued to be written behind (`RemoteActorStore.put_behind`), then close."""
        await self.remote_actors.flushed()
        await self.database.dispose()
