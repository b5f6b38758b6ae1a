"""The queues' data model, as SQLModel tables. Only the storage package imports this.

Outbound: outbox -> deliveries (one per activity and inbox) -> hosts, remote_actors.
Inbound: inbound_activities -> inbox_items (one per local recipient) -> inbox_cursors; followers.
Webhooks: webhooks (storage/operator_tables) -> webhook_events, each sent as a deliveries row
(webhook_id set). What an operator sets up (relays, webhooks, the console, the audit log, the
instance key) is in storage/operator_tables; every table as a Core `Table` in storage/schema.

The outbox table is a public contract (the transactional outbox): apps may INSERT into it
inside their own transactions, so every column an app need not fill has a server default.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    Boolean,
    Column,
    ForeignKey,
    Index,
    Integer,
    SmallInteger,
    String,
    Text,
    UniqueConstraint,
    text,
)
from sqlmodel import Field, SQLModel

from fedqueue.rules.profile_fields import MAX_NAME_CHARS
from fedqueue.rules.states import CircuitState, DeliveryState, FollowerState, Lane, OutboxState
from fedqueue.storage.column_types import HOST, NAME, STATE, URI, BigId, UTCDateTime, creation_time, where_set


class ActorRow(SQLModel, table=True):
    """A local actor: its key pair and the hash of its outbox bearer token.

    `deleted_at`: deleted (a Tombstone); the row stays while the tombstone lasts, its key until
    its Delete was delivered or given up. `also_known_as`: a JSON array of URIs. `moved_to`:
    the account it moved to (its outbox refuses new activities).
    """

    __tablename__ = "actors"

    id: int | None = Field(default=None, sa_column=Column(BigId, primary_key=True))
    name: str = Field(sa_column=Column(NAME, nullable=False, unique=True))
    private_key_pem: str = Field(sa_column=Column(Text, nullable=False))
    public_key_pem: str = Field(sa_column=Column(Text, nullable=False))
    token_hash: str = Field(sa_column=Column(String(64), nullable=False))
    auto_accept_follows: bool = Field(
        default=True, sa_column=Column(Boolean, nullable=False, server_default=text("true"))
    )
    created_at: datetime | None = Field(default=None, sa_column=creation_time())
    deleted_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    also_known_as: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    moved_to: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    # Its profile: NULL where unset; `summary` and `profile_fields`' values are sanitised HTML.
    display_name: str | None = Field(default=None, sa_column=Column(String(MAX_NAME_CHARS), nullable=True))
    summary: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    icon_url: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    image_url: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    profile_url: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    actor_type: str = Field(
        default="Person", sa_column=Column(String(16), nullable=False, server_default=text("'Person'"))
    )
    profile_fields: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    discoverable: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=text("false"))
    )
    indexable: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=text("false"))
    )
    # Its Ed25519 key pair (FEP-521a) as the RSA one is kept; NULL until made (migration 0024);
    # `key_rotated_at`: its last `fedqueue actor rotate-key`.
    ed25519_private_key_pem: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    ed25519_public_key_pem: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    key_rotated_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))


class OutboxRow(SQLModel, table=True):
    """An activity handed to fedqueue by a local app (HTTP or a direct INSERT).

    An app INSERTs `actor` (a local actor's name) and `activity` (JSON text), optionally
    `inboxes` (a JSON array of inbox URLs that replaces addressing). The worker validates the
    row, fills `activity_id`, `activity_type` and `object_id`, and fans it out.
    `state`: pending -> expanding -> expanded, or rejected (see `error`) or duplicate.
    `expansion_attempts` counts claims for expansion (a worker killed mid-way counts too);
    `error` keeps the last expansion failure while the row waits to be tried again.
    `forwarded`: an inbound activity passed on as it came to `actor`'s followers (AP 7.1.2),
    not `actor`'s own: never coalesced, never in `actor`'s outbox collection.
    `pruned_<state>`: its delivery rows in that state deleted after retention (`storage.retention`),
    which the status counts add. `traceparent`: the W3C trace context the worker's spans continue
    (`fedqueue.tracing`), if any. `recipients`: the actors its fan-out addressed, each follower once
    (`addressing.recipient_count`); NULL if expanded before migration 0026 or if it names `inboxes`.
    """

    __tablename__ = "outbox"
    __table_args__ = (
        Index("ix_outbox_state_id", "state", "id"),
        Index("ix_outbox_actor_object", "actor", "object_id"),  # for an object's Delete or Update
        # Whether a subject is named by other activities, any actor's: coalescing reads a key's
        # history only then (`CoalescingStore.history`); Follows of an actor (`storage.following`).
        Index("ix_outbox_object_id", "object_id"),
    )

    id: int | None = Field(default=None, sa_column=Column(BigId, primary_key=True))
    actor: str = Field(sa_column=Column(NAME, nullable=False))
    activity: str = Field(sa_column=Column(Text, nullable=False))
    inboxes: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    activity_id: str | None = Field(default=None, sa_column=Column(URI, nullable=True, unique=True))
    activity_type: str | None = Field(default=None, sa_column=Column(NAME, nullable=True))
    object_id: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    state: str = Field(
        default=OutboxState.PENDING,
        sa_column=Column(STATE, nullable=False, server_default=text(f"'{OutboxState.PENDING}'")),
    )
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    fanout_cursor: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    expansion_attempts: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))
    lease_owner: str | None = Field(default=None, sa_column=Column(NAME, nullable=True))
    lease_until: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    created_at: datetime | None = Field(default=None, sa_column=creation_time())
    expanded_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    forwarded: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=text("false"))
    )
    pruned_delivered: int = Field(default=0, sa_column=Column(BigId, nullable=False, server_default="0"))
    pruned_dead: int = Field(default=0, sa_column=Column(BigId, nullable=False, server_default="0"))
    pruned_coalesced: int = Field(default=0, sa_column=Column(BigId, nullable=False, server_default="0"))
    traceparent: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    recipients: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))


class DeliveryRow(SQLModel, table=True):
    """One (activity, inbox) pair, tracked until it is delivered, dead or coalesced.

    `object_id` is the coalescing subject: the activity's object id, or for an Undo the object
    of the undone activity (`undoes`). `target`: an Add's or Remove's collection.
    `inbox` is NULL while the inbox is not known: `recipient` then names the actor whose
    document could not be fetched, and a retry fetches it again before anything is sent.
    `last_error` is for a person; `last_error_detail` keeps the raw transport text.
    """

    __tablename__ = "deliveries"
    __table_args__ = (
        UniqueConstraint("outbox_id", "inbox", name="uq_deliveries_outbox_inbox"),
        # Mostly-NULL keys are indexed only where set (migration 0018, whose docstring says why):
        # an activity delivery's writes skip these; each read by them has `col = ?` or `IS NOT NULL`.
        where_set("uq_deliveries_outbox_recipient", "outbox_id", "recipient", unique=True),
        # Removing a webhook deletes its rows (ON DELETE CASCADE), and so does a webhook event's
        # deletion (`retention`): without these, each one read the whole table.
        where_set("ix_deliveries_webhook_id", "webhook_id"),
        where_set("ix_deliveries_webhook_event_id", "webhook_event_id"),
        # Claims read each (state, lane)'s due rows in claim order (`DeliveryStore.claim`): no sort.
        Index("ix_deliveries_due", "state", "lane", "next_attempt_at", "id"),
        # Coalescing reads one (inbox, subject) history in submission order: one index range.
        Index("ix_deliveries_inbox_object", "inbox", "object_id", "outbox_id"),
        Index("ix_deliveries_host_state", "host", "state"),
        # A status page reads each state's deliveries of one activity in id order: one index
        # range per state, no sort of the whole fan-out (`storage.fanout`); counts use it too.
        Index("ix_deliveries_outbox_state", "outbox_id", "state", "id"),
    )

    id: int | None = Field(default=None, sa_column=Column(BigId, primary_key=True))
    # NULL for a webhook POST (`webhook_id` and `webhook_event_id` set instead).
    outbox_id: int | None = Field(
        default=None, sa_column=Column(BigId, ForeignKey("outbox.id", ondelete="CASCADE"), nullable=True)
    )
    inbox: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    recipient: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    host: str = Field(sa_column=Column(HOST, nullable=False))
    actor: str = Field(sa_column=Column(NAME, nullable=False))
    activity_type: str = Field(sa_column=Column(NAME, nullable=False))
    object_id: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    state: str = Field(
        default=DeliveryState.QUEUED,
        sa_column=Column(STATE, nullable=False, server_default=text(f"'{DeliveryState.QUEUED}'")),
    )
    attempts: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))
    # `Lane`: 0 interactive, 1 normal, 2 bulk; a claim serves a lower lane first.
    lane: int = Field(
        default=Lane.NORMAL,
        sa_column=Column(SmallInteger, nullable=False, server_default=str(int(Lane.NORMAL))),
    )
    next_attempt_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    lease_owner: str | None = Field(default=None, sa_column=Column(NAME, nullable=True))
    lease_until: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    last_status: int | None = Field(default=None, sa_column=Column(Integer, nullable=True))
    last_error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    last_error_detail: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    undoes: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    target: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    coalesced_by: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    coalesced_reason: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: datetime | None = Field(default=None, sa_column=creation_time())
    last_attempt_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    delivered_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    webhook_id: int | None = Field(
        default=None, sa_column=Column(BigId, ForeignKey("webhooks.id", ondelete="CASCADE"), nullable=True)
    )
    webhook_event_id: int | None = Field(
        default=None,
        sa_column=Column(BigId, ForeignKey("webhook_events.id", ondelete="CASCADE"), nullable=True),
    )


class HostRow(SQLModel, table=True):
    """Health and admin flags of one remote host (`example.org` or `example.org:8443`)."""

    __tablename__ = "hosts"

    host: str = Field(sa_column=Column(HOST, primary_key=True))
    consecutive_failures: int = Field(
        default=0, sa_column=Column(Integer, nullable=False, server_default="0")
    )
    first_failure_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    last_failure_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    last_success_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    circuit: str = Field(
        default=CircuitState.CLOSED,
        sa_column=Column(STATE, nullable=False, server_default=text(f"'{CircuitState.CLOSED}'")),
    )
    circuit_until: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    recovery_allowance: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))
    unavailable: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=text("false"))
    )
    paused: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=text("false"))
    )
    blocked: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=text("false"))
    )
    #: Why an admin blocked it (shown in the console and the audit log); a block covers subdomains.
    block_reason: str | None = Field(default=None, sa_column=Column(String(500), nullable=True))
    signature_scheme: str = Field(
        default="unknown", sa_column=Column(STATE, nullable=False, server_default=text("'unknown'"))
    )
    scheme_checked_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))
    #: The key it accepts (`unknown`, `ed25519`, `rsa`), learned like `signature_scheme`.
    signature_key: str = Field(
        default="unknown", sa_column=Column(STATE, nullable=False, server_default=text("'unknown'"))
    )
    key_checked_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))


class RemoteActorRow(SQLModel, table=True):
    """Cache of fetched remote actors: delivery recipients, and senders whose signature verified.

    `document` holds only the fields fedqueue uses (`remote.memory.slim_document`), capped in
    size. Rows not fetched again for `retention_remote_actors_days` are pruned. `error` rows
    (a short negative cache) are written by older versions only: failures are kept in memory.

    `gone`: an `error` row's fetch answered 410 or 404 (the actor was deleted, see docs/inbox.md,
    Deleted actors).
    """

    __tablename__ = "remote_actors"
    __table_args__ = (Index("ix_remote_actors_key_id", "key_id"),)

    uri: str = Field(sa_column=Column(URI, primary_key=True))
    inbox: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    shared_inbox: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    key_id: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    public_key_pem: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    document: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    fetched_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    expires_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    gone: bool = Field(default=False, sa_column=Column(Boolean, nullable=False, server_default=text("false")))


class GoneInboxRow(SQLModel, table=True):
    """An inbox that answered 410 Gone: skipped until its actor is seen again."""

    __tablename__ = "gone_inboxes"

    inbox: str = Field(sa_column=Column(URI, primary_key=True))
    gone_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class TombstoneRow(SQLModel, table=True):
    """A remote actor deleted one of its objects: its later Create or Update of it is dropped.

    Kept `inbox_tombstone_hours`, so a Delete that overtakes its Create still wins.
    """

    __tablename__ = "inbox_tombstones"
    __table_args__ = (Index("ix_inbox_tombstones_deleted_at", "deleted_at"),)

    object_id: str = Field(sa_column=Column(URI, primary_key=True))
    actor_uri: str = Field(sa_column=Column(URI, primary_key=True))
    deleted_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class InboundActivityRow(SQLModel, table=True):
    """A verified activity received from a remote server, stored once per activity id."""

    __tablename__ = "inbound_activities"

    id: int | None = Field(default=None, sa_column=Column(BigId, primary_key=True))
    activity_id: str = Field(sa_column=Column(URI, nullable=False, unique=True))
    actor_uri: str = Field(sa_column=Column(URI, nullable=False))
    activity_type: str = Field(sa_column=Column(NAME, nullable=False))
    body: str = Field(sa_column=Column(Text, nullable=False))
    key_id: str = Field(sa_column=Column(URI, nullable=False))
    received_at: datetime | None = Field(default=None, sa_column=creation_time())
    #: Why the activity's bare object URI could not be dereferenced (`inbound.dereference`), else NULL.
    object_error: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class InboxItemRow(SQLModel, table=True):
    """An inbound activity addressed to one local actor; `id` is the pull cursor."""

    __tablename__ = "inbox_items"
    __table_args__ = (
        UniqueConstraint("inbound_id", "actor", name="uq_inbox_items_inbound_actor"),
        Index("ix_inbox_items_actor_id", "actor", "id"),
    )

    id: int | None = Field(default=None, sa_column=Column(BigId, primary_key=True))
    inbound_id: int = Field(
        sa_column=Column(BigId, ForeignKey("inbound_activities.id", ondelete="CASCADE"), nullable=False)
    )
    actor: str = Field(sa_column=Column(NAME, nullable=False))


class InboxCursorRow(SQLModel, table=True):
    """How far one consumer (a local app) has read one actor's inbox."""

    __tablename__ = "inbox_cursors"

    actor: str = Field(sa_column=Column(NAME, primary_key=True))
    consumer: str = Field(sa_column=Column(NAME, primary_key=True))
    last_item_id: int = Field(default=0, sa_column=Column(BigId, nullable=False, server_default="0"))
    updated_at: datetime | None = Field(default=None, sa_column=creation_time())


class FollowerRow(SQLModel, table=True):
    """A remote actor following a local one. `state`: pending (manual approval) or accepted.

    `moved_to`: the follower announced a Move there; it is still delivered to until that
    account follows too.
    """

    __tablename__ = "followers"
    __table_args__ = (
        Index("ix_followers_follower_uri", "follower_uri"),
        where_set("ix_followers_moved_to", "actor", "moved_to"),
    )

    actor: str = Field(sa_column=Column(NAME, primary_key=True))
    follower_uri: str = Field(sa_column=Column(URI, primary_key=True))
    inbox: str = Field(sa_column=Column(URI, nullable=False))
    shared_inbox: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    follow_activity_id: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    state: str = Field(
        default=FollowerState.ACCEPTED,
        sa_column=Column(STATE, nullable=False, server_default=text(f"'{FollowerState.ACCEPTED}'")),
    )
    created_at: datetime | None = Field(default=None, sa_column=creation_time())
    moved_to: str | None = Field(default=None, sa_column=Column(URI, nullable=True))


class FollowingRow(SQLModel, table=True):
    """A local actor following a remote one: its Follow (sent through the outbox) was accepted.

    Recorded when the Accept arrives; removed by the local actor's Undo(Follow), the remote's
    Reject, or a followers synchronization (FEP-8fcf) that no longer lists the local actor.
    """

    __tablename__ = "following"
    __table_args__ = (Index("ix_following_followed_uri", "followed_uri"),)

    actor: str = Field(sa_column=Column(NAME, primary_key=True))
    followed_uri: str = Field(sa_column=Column(URI, primary_key=True))
    follow_activity_id: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    accepted_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))


class WebhookEventRow(SQLModel, table=True):
    """One event body to POST to one webhook (its delivery row points here).

    `inbox_item_id`: for `inbox.new`, the item whose ACK advances the consumer's cursor.
    `dedupe_key`: an event that must be sent once (activity complete) is stored once.
    """

    __tablename__ = "webhook_events"
    __table_args__ = (UniqueConstraint("webhook_id", "dedupe_key", name="uq_webhook_events_dedupe"),)

    id: int | None = Field(default=None, sa_column=Column(BigId, primary_key=True))
    webhook_id: int = Field(
        sa_column=Column(BigId, ForeignKey("webhooks.id", ondelete="CASCADE"), nullable=False)
    )
    kind: str = Field(sa_column=Column(NAME, nullable=False))
    body: str = Field(sa_column=Column(Text, nullable=False))
    inbox_item_id: int | None = Field(default=None, sa_column=Column(BigId, nullable=True))
    dedupe_key: str | None = Field(default=None, sa_column=Column(URI, nullable=True))
    created_at: datetime | None = Field(default=None, sa_column=creation_time())
