"""The tables an operator's actions fill, as SQLModel tables: the relays followed, the webhooks
registered, the console's session, the audit log of admin actions, the instance actor's key.
Only the storage package imports this."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, CheckConstraint, Column, Integer, String, Text, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from fedqueue.storage.column_types import NAME, STATE, URI, BigId, UTCDateTime, creation_time


class InstanceKeyRow(SQLModel, table=True):
    """The instance actor's key pair (at most one row, id 1): made the first time it is needed."""

    __tablename__ = "instance_key"
    __table_args__ = (CheckConstraint("id = 1", name="instance_key_one_row"),)

    id: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=False))
    private_key_pem: str = Field(sa_column=Column(Text, nullable=False))
    public_key_pem: str = Field(sa_column=Column(Text, nullable=False))
    created_at: datetime | None = Field(default=None, sa_column=creation_time())
    #: Its Ed25519 key pair (FEP-521a); NULL until made (migration 0024).
    ed25519_private_key_pem: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    ed25519_public_key_pem: str | None = Field(default=None, sa_column=Column(Text, nullable=True))


class ConsoleSessionRow(SQLModel, table=True):
    """The console's session version (one row, id 1): cookies carry it, a logout moves it on."""

    __tablename__ = "console_session"
    __table_args__ = (CheckConstraint("id = 1", name="console_session_one_row"),)

    id: int | None = Field(default=None, sa_column=Column(Integer, primary_key=True, autoincrement=False))
    version: int = Field(sa_column=Column(Integer, nullable=False))


class RelayRow(SQLModel, table=True):
    """A relay (FEP-ae0c) the instance actor follows: `pending` until its Accept, then `accepted`.

    Public activities also go to the `inbox` of every accepted relay.
    """

    __tablename__ = "relays"

    uri: str = Field(sa_column=Column(URI, primary_key=True))
    inbox: str = Field(sa_column=Column(URI, nullable=False))
    follow_activity_id: str = Field(sa_column=Column(URI, nullable=False))
    state: str = Field(sa_column=Column(STATE, nullable=False))
    created_at: datetime = Field(sa_column=Column(UTCDateTime(), nullable=False))
    accepted_at: datetime | None = Field(default=None, sa_column=Column(UTCDateTime(), nullable=True))


class WebhookRow(SQLModel, table=True):
    """Where to POST one consumer's events about one local actor, and the secret that signs them."""

    __tablename__ = "webhooks"
    __table_args__ = (UniqueConstraint("actor", "consumer", name="uq_webhooks_actor_consumer"),)

    id: int | None = Field(default=None, sa_column=Column(BigId, primary_key=True))
    actor: str = Field(sa_column=Column(NAME, nullable=False))
    consumer: str = Field(sa_column=Column(NAME, nullable=False))
    url: str = Field(sa_column=Column(URI, nullable=False))
    secret: str = Field(sa_column=Column(String(256), nullable=False))
    #: Subscribed event names, comma-separated.
    events: str = Field(sa_column=Column(Text, nullable=False))
    #: Its URL may be a loopback or private address although the server's fetches may not.
    allow_private: bool = Field(
        default=False, sa_column=Column(Boolean, nullable=False, server_default=text("false"))
    )
    created_at: datetime | None = Field(default=None, sa_column=creation_time())
    #: Events dropped unsent, oldest first, while more than `retention_webhook_backlog` waited.
    dropped_events: int = Field(default=0, sa_column=Column(BigId, nullable=False, server_default="0"))


class AuditRow(SQLModel, table=True):
    """One admin action: who, what and when."""

    __tablename__ = "audit_log"

    id: int | None = Field(default=None, sa_column=Column(BigId, primary_key=True))
    at: datetime | None = Field(default=None, sa_column=creation_time())
    who: str = Field(sa_column=Column(String(255), nullable=False))
    action: str = Field(sa_column=Column(NAME, nullable=False))
    target: str = Field(sa_column=Column(URI, nullable=False))
    detail: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
