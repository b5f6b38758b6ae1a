"""A local actor's life after creation: aliases, its profile, a Move out, deletion, and the
tombstone's end.

Each change is one transaction with its audit row and the outbox row it causes (the Move, the
Delete, the Update of its profile), so an actor is never deleted without its Delete queued, nor
moved without its Move, nor shown with a profile its followers will not hear of.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, exists, insert, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.rules.actor_documents import (
    ActorFacts,
    Deletion,
    actor_document,
    delete_inboxes,
    profile_update,
)
from fedqueue.rules.errors import ActorGone, InvalidInput, NotFound
from fedqueue.rules.key_choice import KeyKind
from fedqueue.rules.profile_fields import ProfileSaved, changed
from fedqueue.rules.signing.fep521a import with_multikey
from fedqueue.rules.signing.keys import KeyPair
from fedqueue.rules.states import (
    BACKLOG,
    UNFINISHED,
    UNSENT,
    DeliveryState,
    FollowerState,
    OutboxState,
    RelayState,
)
from fedqueue.rules.urls import Urls
from fedqueue.storage import webhook_events
from fedqueue.storage.actors import PROFILE_COLUMNS, profile_of, profile_values
from fedqueue.storage.audit import record_audit
from fedqueue.storage.database import Database
from fedqueue.storage.schema import ACTORS, DELIVERIES, FOLLOWERS, FOLLOWING, OUTBOX, RELAYS, REMOTE_ACTORS

#: Each kind's (private, public) PEM columns.
_KEY_COLUMNS: dict[KeyKind, tuple[str, str]] = {
    "rsa": ("private_key_pem", "public_key_pem"),
    "ed25519": ("ed25519_private_key_pem", "ed25519_public_key_pem"),
}


@dataclass(frozen=True)
class KeyRotated:
    """A key rotation done: which key, when, and the Update queued for `update_inboxes` inboxes
    (`merged`: into the profile Update that was waiting)."""

    name: str
    key: KeyKind
    rotated_at: datetime
    update_inboxes: int
    merged: bool


#: Most aliases one actor may list.
MAX_ALIASES = 20


@dataclass(frozen=True)
class QueuedDeletion(Deletion):
    """A deletion and its Delete's outbox id (its status id), None when no inbox had heard of the actor."""

    status_id: int | None = None


async def _live_row(conn: AsyncConnection, name: str, *columns: Any) -> Any:
    row = (
        await conn.execute(
            select(ACTORS.c.deleted_at, ACTORS.c.also_known_as, ACTORS.c.moved_to, *columns).where(
                ACTORS.c.name == name
            )
        )
    ).first()
    if row is None:
        raise NotFound(f"no local actor named {name!r}")
    if row.deleted_at is not None:
        raise ActorGone(f"actor {name!r} was deleted")
    return row


class ActorLifecycleStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def set_aliases(
        self, name: str, add: Sequence[str], remove: Sequence[str], who: str, now: datetime
    ) -> tuple[str, ...]:
        """Add and remove URIs of the actor's `alsoKnownAs`; the new list."""
        async with self._db.transaction() as conn:
            row = await _live_row(conn, name)
            aliases = [uri for uri in json.loads(row.also_known_as or "[]") if uri not in remove]
            aliases += [uri for uri in dict.fromkeys(add) if uri not in aliases]
            if len(aliases) > MAX_ALIASES:
                raise InvalidInput(f"an actor lists at most {MAX_ALIASES} aliases")
            await conn.execute(
                update(ACTORS).where(ACTORS.c.name == name).values(also_known_as=json.dumps(aliases))
            )
            await record_audit(
                conn, who, "actor_alias", name, {"add": list(add), "remove": list(remove)}, now
            )
        return tuple(aliases)

    async def set_profile(
        self,
        name: str,
        change: Mapping[str, Any],
        urls: Urls,
        token: str,
        who: str,
        now: datetime,
        send_at: datetime,
    ) -> ProfileSaved:
        """Apply a checked profile change and queue the actor's Update (its whole document) for
        every inbox that has it: its followers', the accepted relays', every one it delivered to.

        The Update waits in the outbox until `send_at` (`expanding`, no lease owner, never
        claimed). A change while one waits rewrites that one (document, id, inboxes): every
        edit until it is sent is carried by one Update, the latest.
        """
        async with self._db.transaction() as conn:
            row = await _live_row(conn, name, *PROFILE_COLUMNS)
            profile = changed(profile_of(row), change)
            await conn.execute(update(ACTORS).where(ACTORS.c.name == name).values(**profile_values(profile)))
            inboxes, merged = await _queue_self_update(conn, name, urls, token, send_at)
            await record_audit(conn, who, "actor_profile", name, {"changed": sorted(change)}, now)
        return ProfileSaved(profile, inboxes, merged)

    async def rotated_at(self, name: str) -> datetime | None:
        """When the actor's key was last rotated (None: never, or no such actor)."""
        async with self._db.reading() as conn:
            query = select(ACTORS.c.key_rotated_at).where(ACTORS.c.name == name)
            return (await conn.execute(query)).scalar()

    async def rotate_key(
        self, name: str, kind: KeyKind, pair: KeyPair, urls: Urls, token: str, who: str, now: datetime
    ) -> KeyRotated:
        """Replace the live actor's `kind` key pair with `pair` (`key_rotated_at` = `now`) and queue
        its Update, the new key in it, for every inbox that has it, due at once (a profile
        Update waiting is rewritten instead); audited as `who`."""
        private, public = _KEY_COLUMNS[kind]
        async with self._db.transaction() as conn:
            await _live_row(conn, name)
            new = {private: pair.private_pem, public: pair.public_pem, "key_rotated_at": now}
            await conn.execute(update(ACTORS).where(ACTORS.c.name == name).values(new))
            inboxes, merged = await _queue_self_update(conn, name, urls, token, now)
            await record_audit(conn, who, "actor_key_rotate", name, {"key": kind}, now)
        return KeyRotated(name, kind, now, inboxes, merged)

    async def set_manual_approval(self, name: str, manual: bool, who: str, now: datetime) -> None:
        """Lock (`manual`) or unlock the actor: a locked actor's new follows wait for approval."""
        async with self._db.transaction() as conn:
            await _live_row(conn, name)
            await conn.execute(
                update(ACTORS).where(ACTORS.c.name == name).values(auto_accept_follows=not manual)
            )
            await record_audit(conn, who, "actor_lock" if manual else "actor_unlock", name, {}, now)

    async def move(self, name: str, target: str, activity: dict[str, Any], who: str, now: datetime) -> int:
        """Record the actor's move to `target` and queue its Move (addressed to its followers): its
        outbox id (its status)."""
        async with self._db.transaction() as conn:
            row = await _live_row(conn, name)
            if row.moved_to is not None:
                raise InvalidInput(f"actor {name!r} moved to {row.moved_to} already")
            await conn.execute(update(ACTORS).where(ACTORS.c.name == name).values(moved_to=target))
            outbox_id = (
                await conn.execute(
                    insert(OUTBOX)
                    .values(actor=name, activity=json.dumps(activity, ensure_ascii=False))
                    .returning(OUTBOX.c.id)
                )
            ).scalar_one()
            await record_audit(conn, who, "actor_move", name, {"target": target}, now)
        return int(outbox_id)

    async def delete(
        self, name: str, activity: dict[str, Any], reason: str, who: str, now: datetime
    ) -> QueuedDeletion:
        """Delete the actor: its token stops working, what it had queued is cancelled with
        `reason`, and its Delete (`activity`) is queued for its followers' inboxes, the accepted
        relays' and every inbox it delivered to. Its key stays until that Delete is delivered or given up."""
        async with self._db.transaction() as conn:
            await _live_row(conn, name)
            await conn.execute(
                update(ACTORS).where(ACTORS.c.name == name).values(deleted_at=now, token_hash="")
            )
            inboxes = await _heard_from_inboxes(conn, name)
            killed = list(
                (
                    await conn.execute(
                        update(DELIVERIES)
                        .where(
                            DELIVERIES.c.actor == name,
                            DELIVERIES.c.webhook_id.is_(None),
                            DELIVERIES.c.state.in_(UNSENT),
                        )
                        .values(state=DeliveryState.DEAD, last_error=reason, last_error_detail=None)
                        .returning(DELIVERIES.c.id)
                    )
                ).scalars()
            )
            await webhook_events.after_given_up(self._db, conn, killed, now)
            rejected = await conn.execute(
                update(OUTBOX)
                .where(
                    OUTBOX.c.actor == name,
                    # What waits to be expanded: new rows, and those waiting for a later try
                    # or their time (a profile Update) with no lease.
                    or_(
                        OUTBOX.c.state == OutboxState.PENDING,
                        and_(OUTBOX.c.state == OutboxState.EXPANDING, OUTBOX.c.lease_owner.is_(None)),
                    ),
                )
                .values(state=OutboxState.REJECTED, error=reason)
            )
            await conn.execute(delete(FOLLOWERS).where(FOLLOWERS.c.actor == name))
            await conn.execute(delete(FOLLOWING).where(FOLLOWING.c.actor == name))
            outbox_id = await _queue_delete(conn, name, activity, inboxes) if inboxes else None
            deletion = QueuedDeletion(len(inboxes), len(killed), int(rejected.rowcount or 0), outbox_id)
            await record_audit(conn, who, "actor_delete", name, deletion.__dict__, now)
        return deletion

    async def finish_deletions(self, tombstone_before: datetime) -> tuple[int, int]:
        """Drop the keys of deleted actors with nothing left to send, and forget the actors
        deleted before `tombstone_before` (their names are free again); (keys, actors)."""
        waiting = exists().where(
            DELIVERIES.c.actor == ACTORS.c.name,
            DELIVERIES.c.webhook_id.is_(None),
            DELIVERIES.c.state.in_(UNFINISHED),
        )
        unexpanded = exists().where(OUTBOX.c.actor == ACTORS.c.name, OUTBOX.c.state.in_(BACKLOG))
        async with self._db.transaction() as conn:
            keys = await conn.execute(
                update(ACTORS)
                .where(
                    ACTORS.c.deleted_at.is_not(None),
                    ACTORS.c.private_key_pem != "",
                    ~waiting,
                    ~unexpanded,
                )
                .values(private_key_pem="", public_key_pem="")
            )
            forgotten = await conn.execute(
                delete(ACTORS).where(
                    and_(ACTORS.c.deleted_at < tombstone_before, ACTORS.c.private_key_pem == "")
                )
            )
        return int(keys.rowcount or 0), int(forgotten.rowcount or 0)


async def _queue_self_update(
    conn: AsyncConnection, name: str, urls: Urls, token: str, send_at: datetime
) -> tuple[int, bool]:
    """Queue the actor's Update (its whole document, as stored now) for every inbox that has it:
    its followers', the accepted relays', every one it delivered to; how many inboxes, and
    whether it rewrote the Update already waiting. It waits until `send_at` (`expanding`, no
    lease owner, never claimed)."""
    facts = (
        ACTORS.c.public_key_pem,
        ACTORS.c.auto_accept_follows,
        ACTORS.c.created_at,
        ACTORS.c.ed25519_public_key_pem,
    )
    row = await _live_row(conn, name, *facts, *PROFILE_COLUMNS)
    also_known_as = tuple(json.loads(row.also_known_as or "[]"))
    actor = ActorFacts(
        name, row.public_key_pem, not row.auto_accept_follows, row.created_at, also_known_as, row.moved_to
    )
    # The document as served (`web.actors`), its FEP-521a key included: peers replace what they
    # hold of the actor with the Update's object.
    document = with_multikey(actor_document(urls, actor, profile_of(row)), row.ed25519_public_key_pem)
    activity = profile_update(urls, document, token)
    inboxes = await _heard_from_inboxes(conn, name)
    merged = bool(inboxes) and await _rewrite_waiting_update(conn, name, activity, inboxes)
    if inboxes and not merged:
        await conn.execute(
            insert(OUTBOX).values(
                actor=name,
                activity=json.dumps(activity, ensure_ascii=False),
                inboxes=json.dumps(inboxes),
                activity_id=activity["id"],
                activity_type="Update",
                object_id=activity["actor"],
                state=OutboxState.EXPANDING,
                lease_until=send_at,
            )
        )
    return len(inboxes), merged


async def _rewrite_waiting_update(
    conn: AsyncConnection, name: str, activity: dict[str, Any], inboxes: list[str]
) -> bool:
    """Put `activity` in place of the actor's profile Update that waits unclaimed; whether one did.

    A row claimed meanwhile is left alone (`expansion_attempts` counts the claim, in the same
    statement), and the caller queues a new one.
    """
    o = OUTBOX.c
    rewritten = await conn.execute(
        update(OUTBOX)
        .where(
            o.actor == name,
            o.object_id == activity["actor"],
            o.activity_type == "Update",
            o.state == OutboxState.EXPANDING,
            o.lease_owner.is_(None),
            o.expansion_attempts == 0,
        )
        .values(
            activity=json.dumps(activity, ensure_ascii=False),
            activity_id=activity["id"],
            inboxes=json.dumps(inboxes),
        )
    )
    return bool(rewritten.rowcount)


async def _queue_delete(
    conn: AsyncConnection, name: str, activity: dict[str, Any], inboxes: list[str]
) -> int:
    """Queue the actor's Delete for `inboxes`: its outbox id."""
    insert_delete = insert(OUTBOX).values(
        actor=name,
        activity=json.dumps(activity, ensure_ascii=False),
        inboxes=json.dumps(inboxes),
        activity_id=activity["id"],
        activity_type="Delete",
        object_id=activity["object"],
    )
    return int((await conn.execute(insert_delete.returning(OUTBOX.c.id))).scalar_one())


async def _heard_from_inboxes(conn: AsyncConnection, name: str) -> list[str]:
    """Every inbox that has the actor (its Delete's and its profile Update's): its followers',
    the accepted relays' and every inbox it delivered to, shared ones preferred."""
    followers = (
        await conn.execute(
            select(FOLLOWERS.c.inbox, FOLLOWERS.c.shared_inbox)
            .where(FOLLOWERS.c.actor == name, FOLLOWERS.c.state == FollowerState.ACCEPTED)
            .order_by(FOLLOWERS.c.created_at, FOLLOWERS.c.follower_uri)
        )
    ).all()
    # With the shared inbox the actor cache knows for each (one statement, however many).
    delivered = (
        await conn.execute(
            select(DELIVERIES.c.inbox, REMOTE_ACTORS.c.shared_inbox)
            .select_from(DELIVERIES.outerjoin(REMOTE_ACTORS, REMOTE_ACTORS.c.inbox == DELIVERIES.c.inbox))
            .where(
                DELIVERIES.c.actor == name,
                DELIVERIES.c.webhook_id.is_(None),
                DELIVERIES.c.inbox.is_not(None),
            )
            .distinct()
            .order_by(DELIVERIES.c.inbox)
        )
    ).all()
    relays = (
        await conn.execute(
            select(RELAYS.c.inbox).where(RELAYS.c.state == RelayState.ACCEPTED).order_by(RELAYS.c.uri)
        )
    ).scalars()
    shared_of = {row.inbox: row.shared_inbox for row in delivered if row.shared_inbox}
    return delete_inboxes(
        [(row.inbox, row.shared_inbox) for row in followers],
        list(relays),
        [row.inbox for row in delivered],
        shared_of,
    )
