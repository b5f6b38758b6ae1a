"""Cache of remote actor documents and keys, with expiry; failures are cached briefly too."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import CompoundSelect, Executable, bindparam, delete, literal, null, select, union_all

from fedqueue.storage.database import Database
from fedqueue.storage.group_commit import GroupCommit
from fedqueue.storage.tables import GoneInboxRow, HostRow, RemoteActorRow

_remote = RemoteActorRow.__table__  # type: ignore[attr-defined]
_hosts = HostRow.__table__  # type: ignore[attr-defined]
_gone = GoneInboxRow.__table__  # type: ignore[attr-defined]
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
#: Entries written in one transaction at most.
MAX_BATCH = 100
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


def _lookup_statement() -> CompoundSelect[Any]:
    """Rows of (kind, entry columns...) answering `lookup`'s three questions in one read.

    Built once, with bound parameters only: a lookup costs no statement building or cache-key
    walk. The host's row puts its scheme in the `key_id` column (the other columns are NULL).
    """
    now = bindparam("now", type_=_remote.c.expires_at.type)
    entry = [_remote.c[name] for name in _ENTRY]
    host = [_hosts.c.host, *[null()] * 2, _hosts.c.signature_scheme, *[null()] * (len(_ENTRY) - 4)]
    return union_all(
        select(literal("entry"), *entry).where(_remote.c.uri == bindparam("uri"), _remote.c.expires_at > now),
        select(literal("key"), *entry).where(
            _remote.c.key_id == bindparam("key_id", type_=_remote.c.key_id.type),
            _remote.c.expires_at > now,
            _remote.c.error.is_(None),
        ),
        select(literal("host"), *host).where(_hosts.c.host == bindparam("host")),
    )


_LOOKUP = _lookup_statement()


class RemoteActorStore:
    def __init__(self, database: Database) -> None:
        self._db = database
        # Built once for this engine (bound parameters only): every fetch writes its outcome.
        values: dict[str, Any] = {name: bindparam(name) for name in ("uri", *_VALUES)}
        upsert = database.upsert(_remote).values(values)
        put = upsert.on_conflict_do_update(
            index_elements=["uri"], set_={name: upsert.excluded[name] for name in _VALUES}
        )
        forget_gone = delete(_gone).where(_gone.c.inbox.in_([values["inbox"], values["shared_inbox"]]))
        statements: tuple[Executable, ...] = (put, forget_gone)
        if database.is_postgres:  # one statement: a DELETE in a WITH clause runs though nothing reads it
            statements = (put.add_cte(forget_gone.cte("forgotten")),)
        self._puts = statements
        self._writes: GroupCommit[CachedRemote, None] = GroupCommit(
            self._put_batch, self._put_one, max_batch=MAX_BATCH
        )

    async def get(self, uri: str, now: datetime) -> CachedRemote | None:
        """The unexpired entry for `uri` (an actor id or a key id), or None."""
        async with self._db.reading() as conn:
            row = (
                await conn.execute(select(_remote).where(_remote.c.uri == uri, _remote.c.expires_at > now))
            ).first()
        return None if row is None else CachedRemote(**row._asdict())

    async def lookup(self, uri: str, key_id: str | None, host: str, now: datetime) -> Lookup:
        """The unexpired entry at `uri`, the actor entry listing `key_id` (if given), and the
        signature scheme of `host`: one read. Entries come without their document."""
        parameters = {"uri": uri, "key_id": key_id, "host": host, "now": now}
        async with self._db.reading() as conn:
            rows = (await conn.execute(_LOOKUP, parameters)).all()
        found: dict[str, CachedRemote] = {}
        scheme = "unknown"
        for kind, *columns in rows:
            if kind == "host":
                scheme = columns[_ENTRY.index("key_id")]
            else:
                found.setdefault(kind, CachedRemote(**dict(zip(_ENTRY, columns, strict=True)), document=None))
        return Lookup(entry=found.get("entry"), key_owner=found.get("key"), host_scheme=scheme)

    async def put(self, entry: CachedRemote) -> None:
        """Insert or replace the entry for `entry.uri`, once committed.

        The inboxes of a usable entry (the actor just answered) that once answered 410 Gone are
        delivered to again (`AudienceStore.forget_gone`), in the same transaction. Concurrent
        puts share one transaction (`GroupCommit`): under an inbound flood every new sender's
        key fetch writes one.
        """
        await self._writes.submit(entry)

    async def _put_batch(self, entries: Sequence[CachedRemote]) -> list[None]:
        # executemany: each entry its own statement, so one URI may come twice in a batch.
        values = [{name: getattr(entry, name) for name in ("uri", *_VALUES)} for entry in entries]
        async with self._db.transaction() as conn:
            for statement in self._puts:
                await conn.execute(statement, values)
        return [None] * len(entries)

    async def _put_one(self, entry: CachedRemote) -> None:
        await self._put_batch([entry])
