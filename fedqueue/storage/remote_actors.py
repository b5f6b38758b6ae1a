"""Cache of remote actor documents and keys, with expiry, pruned when unused (`prune`).

Failures are remembered in the fetching process's memory (`remote.documents`); rows with an
`error` are only those an older version wrote, deleted by `prune` once expired.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from sqlalchemy import (
    CompoundSelect,
    and_,
    bindparam,
    delete,
    literal,
    null,
    or_,
    select,
    union_all,
)

from fedqueue.storage.database import Database
from fedqueue.storage.database_errors import refuse_unstorable
from fedqueue.storage.group_commit import GroupCommit
from fedqueue.storage.schema import GONE_INBOXES, HOSTS, REMOTE_ACTORS

log = logging.getLogger("fedqueue.storage")

#: What a fetch needs of an entry: everything but the (large) document.
_ENTRY = (
    "uri",
    "inbox",
    "shared_inbox",
    "key_id",
    "public_key_pem",
    "error",
    "fetched_at",
    "expires_at",
    "gone",
)
#: Entries written in one transaction, or lookups answered by one read, at most.
MAX_BATCH = 100
#: Entries `put_behind` queued and did not store yet, at most: beyond, it waits for its own.
MAX_BEHIND = 1_000
#: Entries queued by `put_behind` wait this long for others to share their transaction: under a
#: flood of new senders, a few cache writes a second instead of one beside every inbox write.
BEHIND_LINGER_S = 0.1
#: What `put` writes besides the URI.
_VALUES = (*_ENTRY[1:5], "document", *_ENTRY[5:])


@dataclass(frozen=True)
class CachedRemote:
    """A cache entry: either a usable document (error is None) or a remembered failure.

    `gone`: the failure was a 410 Gone or 404 (the document was deleted), not an outage.
    """

    uri: str
    inbox: str | None
    shared_inbox: str | None
    key_id: str | None
    public_key_pem: str | None
    document: str | None
    error: str | None
    fetched_at: datetime
    expires_at: datetime
    gone: bool = False


@dataclass(frozen=True)
class Lookup:
    """What a fetch needs to know before it goes out, read at once (`RemoteActorStore.lookup`)."""

    #: The unexpired entry at the URI (a usable document or a remembered failure).
    entry: CachedRemote | None
    #: The unexpired usable entry of an actor listing the key id asked for.
    key_owner: CachedRemote | None
    #: The signature scheme deliveries found the URI's host to take ("unknown" if it has no row).
    host_scheme: str


@dataclass(frozen=True)
class _Wanted:
    """One `lookup`'s question."""

    uri: str
    key_id: str | None
    host: str
    now: datetime


def _lookup_statement(database: Database) -> CompoundSelect[Any]:
    """Rows of (kind, entry columns...) answering the questions of several lookups in one read.

    Built once, with bound parameters only (lists bound whole, `Dialect.one_of`): a lookup costs
    no statement building or cache-key walk. The host's row puts its name in the `uri` column
    and its scheme in the `key_id` column (the other columns are NULL).
    """
    now = bindparam("now", type_=REMOTE_ACTORS.c.expires_at.type)
    entry = [REMOTE_ACTORS.c[name] for name in _ENTRY]
    host = [HOSTS.c.host, *[null()] * 2, HOSTS.c.signature_scheme, *[null()] * (len(_ENTRY) - 4)]
    return union_all(
        select(literal("entry"), *entry).where(
            database.dialect.one_of(REMOTE_ACTORS.c.uri, "uris"), REMOTE_ACTORS.c.expires_at > now
        ),
        select(literal("key"), *entry).where(
            database.dialect.one_of(REMOTE_ACTORS.c.key_id, "key_ids"),
            REMOTE_ACTORS.c.expires_at > now,
            REMOTE_ACTORS.c.error.is_(None),
        ),
        select(literal("host"), *host).where(database.dialect.one_of(HOSTS.c.host, "hosts")),
    )


class RemoteActorStore:
    def __init__(self, database: Database) -> None:
        self._db = database
        # Built once for this engine (bound parameters only): every fetch writes its outcome.
        self._written = database.dialect.rows(REMOTE_ACTORS, ("uri", *_VALUES))
        upsert = self._written.into(database.dialect.upsert(REMOTE_ACTORS))
        put = upsert.on_conflict_do_update(
            index_elements=["uri"], set_={name: upsert.excluded[name] for name in _VALUES}
        )
        # Only marks older than the fetches: a 410 answered after one is news the entry cannot undo.
        since = bindparam("answered_since", type_=GONE_INBOXES.c.gone_at.type)
        forget_gone = delete(GONE_INBOXES).where(
            database.dialect.one_of(GONE_INBOXES.c.inbox, "answered"), GONE_INBOXES.c.gone_at <= since
        )
        self._put, self._forget_gone = database.dialect.with_delete(put, forget_gone)
        self._writes: GroupCommit[CachedRemote, None] = GroupCommit(
            self._put_batch, max_batch=MAX_BATCH, linger_s=BEHIND_LINGER_S
        )
        #: Entries `put_behind` queued and not yet stored or failed; the latest one of each URI.
        self._behind: set[asyncio.Future[None]] = set()
        self._latest: dict[str, asyncio.Future[None]] = {}
        self._lookup = _lookup_statement(database)
        self._reads: GroupCommit[_Wanted, Lookup] = GroupCommit(self._lookup_batch, max_batch=MAX_BATCH)

    async def get(self, uri: str, now: datetime) -> CachedRemote | None:
        """The unexpired entry for `uri` (an actor id or a key id), or None."""
        async with self._db.reading() as conn:
            row = (
                await conn.execute(
                    select(REMOTE_ACTORS).where(REMOTE_ACTORS.c.uri == uri, REMOTE_ACTORS.c.expires_at > now)
                )
            ).first()
        return None if row is None else CachedRemote(**row._asdict())

    async def lookup(self, uri: str, key_id: str | None, host: str, now: datetime) -> Lookup:
        """The unexpired entry at `uri`, the actor entry listing `key_id` (if given), and the
        signature scheme of `host`. Entries come without their document.

        Concurrent lookups share one read (`GroupCommit`): under an inbound flood every new
        sender's key needs one.
        """
        refuse_unstorable([uri, host] if key_id is None else [uri, key_id, host])
        return await self._reads.submit(_Wanted(uri, key_id, host, now))

    async def _lookup_batch(self, wanted: Sequence[_Wanted]) -> list[Lookup]:
        parameters = {
            "uris": sorted({one.uri for one in wanted}),
            "key_ids": sorted({one.key_id for one in wanted if one.key_id is not None}),
            "hosts": sorted({one.host for one in wanted}),
            # The latest: no entry is taken that expired before any of the lookups was asked.
            "now": max(one.now for one in wanted),
        }
        async with self._db.reading() as conn:
            rows = (await conn.execute(self._lookup, parameters)).all()
        entries: dict[str, CachedRemote] = {}
        owners: dict[str, CachedRemote] = {}
        schemes: dict[str, str] = {}
        for kind, *columns in rows:
            values = dict(zip(_ENTRY, columns, strict=True))
            if kind == "host":
                schemes[values["uri"]] = values["key_id"]
                continue
            found = CachedRemote(**values, document=None)
            if kind == "entry":
                entries[found.uri] = found
            else:
                owners.setdefault(values["key_id"], found)
        return [
            Lookup(
                entry=entries.get(one.uri),
                key_owner=None if one.key_id is None else owners.get(one.key_id),
                host_scheme=schemes.get(one.host, "unknown"),
            )
            for one in wanted
        ]

    async def put(self, entry: CachedRemote) -> None:
        """Insert or replace the entry for `entry.uri`, once committed.

        The inboxes of a usable entry (the actor just answered) that once answered 410 Gone are
        delivered to again (`AudienceStore.forget_gone`), in the same transaction. Concurrent
        puts share one transaction (`GroupCommit`): under an inbound flood every new sender's
        key fetch writes one.
        """
        await self._writes.submit(entry)

    async def put_behind(self, entry: CachedRemote) -> None:
        """`put`, without waiting for the commit: for an entry its caller no longer needs stored.

        A request that fetched a sender's key has the key; waiting for the cache write would
        only hold it (on SQLite behind every other writer) and the sender's connection with it.
        Cache writes queued this way go together, after up to BEHIND_LINGER_S (at once with a
        `put`); a failed one is logged, and the actor is fetched again when next needed.
        `written` waits for one, `flushed` for all (`Store.close`). At most MAX_BEHIND entries
        wait at once: beyond that, the caller waits for its own (back-pressure).
        """
        if len(self._behind) >= MAX_BEHIND:
            self._behind = {queued for queued in self._behind if not queued.done()}  # an old loop's
        if len(self._behind) >= MAX_BEHIND:
            await self.put(entry)
            return
        written = self._writes.enqueue(entry, behind=True)
        self._behind.add(written)
        self._latest[entry.uri] = written
        written.add_done_callback(partial(self._written_behind, entry.uri))

    def _written_behind(self, uri: str, written: asyncio.Future[None]) -> None:
        self._behind.discard(written)
        if self._latest.get(uri) is written:
            del self._latest[uri]
        if not written.cancelled() and (exc := written.exception()) is not None:
            log.warning("remote actor cache: an entry was not stored (fetched again when needed): %s", exc)

    async def written(self, uri: str) -> None:
        """Return once the entry `put_behind` queued for `uri`, if any, is stored (or failed).

        For a read of the entry's row that must see what was just fetched (its document).
        """
        queued = self._latest.get(uri)
        if queued is not None:
            await self._writes.settled(queued)

    async def flushed(self) -> None:
        """Return once every entry `put_behind` queued so far is stored or failed."""
        await self._writes.flushed()

    async def prune(self, now: datetime, before: datetime) -> int:
        """Delete the entries fetched before `before` and the remembered failures expired by `now`.

        Returns how many. An actor in use is fetched again once its entry expires, so only
        actors no request or delivery needed lately are deleted (fetched again when next needed).
        """
        old = or_(
            REMOTE_ACTORS.c.fetched_at < before,
            and_(REMOTE_ACTORS.c.error.is_not(None), REMOTE_ACTORS.c.expires_at <= now),
        )
        async with self._db.transaction() as conn:
            deleted = await conn.execute(delete(REMOTE_ACTORS).where(old))
        return int(deleted.rowcount or 0)

    async def _put_batch(self, entries: Sequence[CachedRemote]) -> list[None]:
        """The entries in one transaction: a URI that comes twice keeps its last entry, as one by one."""
        latest = {entry.uri: entry for entry in entries}
        rows = [{name: getattr(entry, name) for name in ("uri", *_VALUES)} for entry in latest.values()]
        answered = sorted(
            {inbox for entry in entries for inbox in (entry.inbox, entry.shared_inbox) if inbox is not None}
        )
        # The batch's earliest fetch: a mark between it and a later fetch of the batch stays (rare;
        # the actor's next activity or fetch clears it), never one newer than the fetch.
        forgotten = {"answered": answered, "answered_since": min(entry.fetched_at for entry in entries)}
        async with self._db.transaction() as conn:
            await conn.execute(self._put, self._written.parameters(rows, **forgotten))
            if self._forget_gone is not None:
                await conn.execute(self._forget_gone, forgotten)
        return [None] * len(entries)
