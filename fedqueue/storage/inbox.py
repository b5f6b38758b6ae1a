"""Inbound activities: stored once per activity id, one inbox item per local recipient, pulled by cursor."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

from sqlalchemy import (
    Boolean,
    CompoundSelect,
    Select,
    String,
    and_,
    bindparam,
    delete,
    exists,
    func,
    literal,
    or_,
    select,
    union_all,
)

from fedqueue import tracing
from fedqueue.rules.follow_effects import Effect
from fedqueue.rules.states import CircuitState
from fedqueue.storage.database import Database
from fedqueue.storage.database_errors import refuse_unstorable
from fedqueue.storage.group_commit import GroupCommit
from fedqueue.storage.inbox_writes import InboundWrite, InboxWriter, NewInbound, Stored
from fedqueue.storage.schema import (
    ACTORS,
    GONE_INBOXES,
    HOSTS,
    INBOUND_ACTIVITIES,
    INBOX_CURSORS,
    INBOX_ITEMS,
    REMOTE_ACTORS,
)
from fedqueue.storage.write_counts import committed_writes

#: How long an admission is remembered: the longest a block, a new or deleted actor, an opened
#: circuit or an inbox marked gone in another process goes unseen here (this process's own
#: writes that may change an admission forget every remembered one at once: `_ADMISSION_READS`).
ADMISSION_MEMORY_S = 1.0
#: The columns an admission depends on, per table. A write in this process that may change one
#: of them (any INSERT or DELETE, an UPDATE that sets one) forgets every remembered admission;
#: the worker's bookkeeping of a healthy host (`last_success_at` alone) does not. A sender's
#: refreshed inboxes (`remote_actors`) are seen within `ADMISSION_MEMORY_S`, as before.
_ADMISSION_READS = (
    (HOSTS, ("host", "blocked", "circuit", "circuit_until", "unavailable")),
    (ACTORS, ("name", "auto_accept_follows")),
    (GONE_INBOXES, ("inbox",)),
)
#: At most this many admissions are remembered; past it, all are forgotten.
ADMISSION_MEMORY_SIZE = 10_000
#: At most this many requests' admissions are read together.
ADMISSION_BATCH = 64


def _admission_statement(database: Database) -> CompoundSelect[Any]:
    """Rows of (kind, name, sender, flag, flag) answering the questions of several admissions at once.

    Built once per store and run on the driver's connection (`Database.fetch`): an inbox
    request then costs no statement building, compiling or preparing, only the parameters
    `hosts`, `names`, `senders` (lists) and `now`. A gone inbox's row names the sender it
    belongs to; host and actor rows have no sender.
    """
    now = bindparam("now", type_=HOSTS.c.circuit_until.type)
    no, nobody = literal(False, Boolean()), literal(None, String())
    # Given up (`unavailable`) counts as failing even while its daily probe is due: a verified
    # request from it revives it (`HostStore.probe_now`).
    failing = or_(
        and_(HOSTS.c.circuit == CircuitState.OPEN, HOSTS.c.circuit_until > now), HOSTS.c.unavailable
    )
    senders_inbox = or_(
        GONE_INBOXES.c.inbox == REMOTE_ACTORS.c.inbox, GONE_INBOXES.c.inbox == REMOTE_ACTORS.c.shared_inbox
    )
    return union_all(
        select(literal("host"), HOSTS.c.host, nobody, HOSTS.c.blocked, failing).where(
            database.dialect.one_of(HOSTS.c.host, "hosts")
        ),
        select(literal("actor"), ACTORS.c.name, nobody, ACTORS.c.auto_accept_follows, no).where(
            database.dialect.one_of(ACTORS.c.name, "names")
        ),
        select(literal("gone"), GONE_INBOXES.c.inbox, REMOTE_ACTORS.c.uri, no, no)
        .select_from(REMOTE_ACTORS.join(GONE_INBOXES, senders_inbox))
        .where(database.dialect.one_of(REMOTE_ACTORS.c.uri, "senders")),
    )


def _admission_version() -> int:
    """Grows with every write committed in this process that may change an admission."""
    return sum(committed_writes(table, columns) for table, columns in _ADMISSION_READS)


@dataclass(frozen=True)
class Admission:
    """What the inbox needs to know before it verifies a request, read at once."""

    #: The given hosts an admin blocked.
    blocked_hosts: frozenset[str]
    #: The given hosts whose circuit is open, waiting for its next probe, or given up (`HostStore.probe_now`).
    failing_hosts: frozenset[str]
    #: The sender's inboxes (as cached) that answered 410 Gone (`AudienceStore.forget_gone`).
    gone_inboxes: frozenset[str]
    #: The given names that are local actors, each with whether it accepts follows by itself.
    auto_accept: Mapping[str, bool]


@dataclass(frozen=True)
class _Asked:
    """One `admission`'s question."""

    hosts: tuple[str, ...]
    names: tuple[str, ...]
    sender: str
    now: datetime


@dataclass(frozen=True)
class InboxEntry:
    """One pulled item: `cursor` orders it within the actor's inbox."""

    cursor: int
    activity_id: str
    actor_uri: str
    activity_type: str
    body: str
    key_id: str
    received_at: datetime
    object_error: str | None = None


@dataclass(frozen=True)
class Pulled:
    entries: list[InboxEntry]
    next_cursor: int


class InboxStore:
    def __init__(self, database: Database) -> None:
        self._db = database
        self._writer = InboxWriter(database)
        self._admission = database.driver_statement(_admission_statement(database))
        # (hosts, names, sender) -> (admission, when it was read, the write counts it was read at)
        self._admissions: dict[tuple[Any, ...], tuple[Admission, float, int]] = {}
        self._reads: GroupCommit[_Asked, Admission] = GroupCommit(self._read_batch, max_batch=ADMISSION_BATCH)

    async def admission(
        self, hosts: Iterable[str], names: Iterable[str], sender: str, now: datetime
    ) -> Admission:
        """Which of `hosts` are blocked or failing, which of `names` are local actors, and which
        of the `sender`'s cached inboxes are marked gone: one short read, shared with the
        requests asking alongside, or none.

        Costs what the activity mentions, not what the database holds: no full list of actors.
        An answer that asks for no write (no failing host, no gone inbox) is remembered for
        `ADMISSION_MEMORY_S`, until this process commits a write that may change it (a block,
        an opened circuit, a new actor, an inbox marked gone: `_ADMISSION_READS`).
        """
        asked = _Asked(
            tuple(sorted({host.lower() for host in hosts})), tuple(sorted(set(names))), sender, now
        )
        key = (asked.hosts, asked.names, sender)
        versions = _admission_version()
        at_s = time.monotonic()
        remembered = self._admissions.get(key)
        if remembered is not None and remembered[2] == versions and at_s - remembered[1] < ADMISSION_MEMORY_S:
            return remembered[0]
        refuse_unstorable([*asked.hosts, *asked.names, sender])
        admission = await self._reads.submit(asked)
        if not admission.failing_hosts and not admission.gone_inboxes:
            if len(self._admissions) >= ADMISSION_MEMORY_SIZE:
                self._admissions.clear()
            self._admissions[key] = (admission, at_s, versions)
        return admission

    async def _read_batch(self, batch: Sequence[_Asked]) -> list[Admission]:
        """The admissions of concurrent requests in one read (`GroupCommit`): under a flood of
        Follows from new senders, none of them remembered, each would cost a read of its own."""
        parameters = {
            "hosts": sorted({host for asked in batch for host in asked.hosts}),
            "names": sorted({name for asked in batch for name in asked.names}),
            "senders": sorted({asked.sender for asked in batch}),
            # The latest: no circuit counts as open that had closed before any of them asked.
            "now": max(asked.now for asked in batch),
        }
        blocked: set[str] = set()
        failing: set[str] = set()
        auto_accept: dict[str, bool] = {}
        gone: dict[str, set[str]] = {}
        for kind, name, sender, first, second in await self._db.fetch(self._admission, parameters):
            if kind == "host":
                if first:
                    blocked.add(name)
                if second:
                    failing.add(name)
            elif kind == "actor":
                auto_accept[name] = bool(first)
            else:
                gone.setdefault(sender, set()).add(name)
        return [
            Admission(
                blocked_hosts=frozenset(blocked.intersection(asked.hosts)),
                failing_hosts=frozenset(failing.intersection(asked.hosts)),
                # Read-only: a remembered admission is shared by the requests that reuse it.
                auto_accept=MappingProxyType(
                    {name: auto_accept[name] for name in asked.names if name in auto_accept}
                ),
                gone_inboxes=frozenset(gone.get(asked.sender, ())),
            )
            for asked in batch
        ]

    async def insert_inbound_if_new(
        self,
        inbound: NewInbound,
        effects: Sequence[Effect] = (),
        *,
        tombstone: tuple[str, datetime] | None = None,
    ) -> Stored:
        """Store a verified activity and apply its effects, committed before this returns.

        A duplicate only adds inbox items for recipients not named before. With `tombstone`
        (object id, since), nothing is stored if the actor deleted that object at or after
        `since` ("deleted"). Concurrent calls share a transaction (group commit,
        `storage.inbox_writes`).
        """
        with tracing.span("fedqueue.inbox.store", {"fedqueue.activity_id": inbound.activity_id}) as span:
            stored = await self._writer.store(InboundWrite(inbound, tuple(effects), tombstone))
            span.set("fedqueue.stored", stored)
            return stored

    async def pull(self, actor: str, consumer: str, after: int | None, limit: int) -> Pulled:
        """Entries for `actor` after `after` (else after the consumer's stored cursor), oldest first.

        Passing `after` acknowledges everything up to it: the stored cursor moves forward to it
        (never back), so a consumer that restarts without its cursor resumes where it last
        acknowledged. Each consumer has its own cursor; its first pull registers it.
        """
        async with self._db.transaction() as conn:
            stored = (
                await conn.execute(
                    select(INBOX_CURSORS.c.last_item_id).where(
                        INBOX_CURSORS.c.actor == actor, INBOX_CURSORS.c.consumer == consumer
                    )
                )
            ).scalar()
            newest = (await conn.execute(select(func.max(INBOX_ITEMS.c.id)))).scalar() or 0
            after = None if after is None else min(after, newest)  # a cursor from the future skips nothing
            acknowledged = max(stored or 0, after) if after is not None else stored or 0
            await conn.execute(
                self._db.dialect.upsert(INBOX_CURSORS)
                .values(
                    actor=actor,
                    consumer=consumer,
                    last_item_id=acknowledged,
                    updated_at=func.current_timestamp(),
                )
                .on_conflict_do_update(
                    index_elements=["actor", "consumer"],
                    set_={"last_item_id": acknowledged, "updated_at": func.current_timestamp()},
                )
            )
            start = after if after is not None else acknowledged
            rows = await conn.execute(_entries_after(actor, start, limit))
            entries = [
                InboxEntry(
                    cursor=row.id,
                    activity_id=row.activity_id,
                    actor_uri=row.actor_uri,
                    activity_type=row.activity_type,
                    body=row.body,
                    key_id=row.key_id,
                    received_at=row.received_at,
                    object_error=row.object_error,
                )
                for row in rows
            ]
        return Pulled(entries=entries, next_cursor=entries[-1].cursor if entries else start)

    async def prune(self, now: datetime, retention: timedelta, idle: timedelta | None = None) -> int:
        """Delete items older than `retention` that every registered consumer of their actor has seen.

        A consumer not seen (no pull, no webhook ACK) for `idle` holds nothing back: one pull under
        a throwaway name, or a webhook consumer that stays down, cannot keep entries for ever.

        Activities left without items are deleted too (their ids are then forgotten: retention
        is longer than the signature window, so a replay is refused by its date). Returns the
        number of items deleted.
        """
        cutoff = now - retention
        old = select(INBOUND_ACTIVITIES.c.id).where(INBOUND_ACTIVITIES.c.received_at < cutoff)
        unseen = select(INBOX_CURSORS.c.actor).where(
            INBOX_CURSORS.c.actor == INBOX_ITEMS.c.actor, INBOX_CURSORS.c.last_item_id < INBOX_ITEMS.c.id
        )
        if idle is not None:
            unseen = unseen.where(INBOX_CURSORS.c.updated_at >= now - idle)
        async with self._db.transaction() as conn:
            deleted = await conn.execute(
                delete(INBOX_ITEMS).where(INBOX_ITEMS.c.inbound_id.in_(old), ~exists(unseen))
            )
            orphaned = and_(
                INBOUND_ACTIVITIES.c.received_at < cutoff,
                ~exists(select(INBOX_ITEMS.c.id).where(INBOX_ITEMS.c.inbound_id == INBOUND_ACTIVITIES.c.id)),
            )
            await conn.execute(delete(INBOUND_ACTIVITIES).where(orphaned))
        return int(deleted.rowcount or 0)


def _entries_after(actor: str, start: int, limit: int) -> Select[Any]:
    """The query of `actor`'s inbox items after the cursor `start`, oldest first, at most `limit`."""
    return (
        select(
            INBOX_ITEMS.c.id,
            INBOUND_ACTIVITIES.c.activity_id,
            INBOUND_ACTIVITIES.c.actor_uri,
            INBOUND_ACTIVITIES.c.activity_type,
            INBOUND_ACTIVITIES.c.body,
            INBOUND_ACTIVITIES.c.key_id,
            INBOUND_ACTIVITIES.c.received_at,
            INBOUND_ACTIVITIES.c.object_error,
        )
        .join(INBOUND_ACTIVITIES, INBOUND_ACTIVITIES.c.id == INBOX_ITEMS.c.inbound_id)
        .where(INBOX_ITEMS.c.actor == actor, INBOX_ITEMS.c.id > start)
        .order_by(INBOX_ITEMS.c.id)
        .limit(limit)
    )
