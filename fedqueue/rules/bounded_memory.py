"""What a process remembers of remote actors and keys (pure: `now` is passed in).

- `ActorMemory`: actors whose documents were stored (verified or fetched for delivery).
- `BoundedMemory`: a least-recently-used map bounded in count and bytes, each entry expiring;
  it holds the keys fetched for requests not verified yet, remembered failures and the times
  keys were last fetched (the refetch cooldown).
- `slim_document`: the part of an actor document that is stored, capped in size.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Generic, TypeVar

#: How long an actor and its key stay in a process's memory (never past its database entry's
#: expiry): short, so an actor that another `serve` process re-fetched (key rotation) replaces
#: it here soon too.
MEMORY_TTL = timedelta(minutes=5)
#: Actors kept in memory per process, least recently used dropped first.
MEMORY_ACTORS = 10_000
#: The fields of an actor document that are stored, in the order they are given up when the
#: document is over its cap (the last first). `_followers` (followers synchronization) and
#: `ProofKeys` (`assertionMethod`: the Ed25519 keys of FEP-8b32 proofs) read the stored document;
#: the others are what an operator looking at the row needs to recognise it.
SLIM_FIELDS = (
    "id",
    "type",
    "inbox",
    "endpoints",
    "publicKey",
    "followers",
    "movedTo",
    "assertionMethod",
    "alsoKnownAs",
    "preferredUsername",
    "url",
)
#: At most this many of a list field's entries (publicKey, assertionMethod, alsoKnownAs) are stored.
SLIM_LIST_ENTRIES = 10
#: The parts of a key object (`publicKey`), a Multikey (`assertionMethod`) and `endpoints` stored.
_KEY_FIELDS = ("id", "type", "owner", "publicKeyPem")
_MULTIKEY_FIELDS = ("id", "type", "controller", "publicKeyMultibase")
_ENDPOINT_FIELDS = ("sharedInbox",)

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class RemoteActor:
    uri: str
    inbox: str
    shared_inbox: str | None
    key_id: str | None
    public_key_pem: str | None


@dataclass(frozen=True)
class RemoteKey:
    key_id: str
    owner: str
    public_key_pem: str


@dataclass(frozen=True)
class Fetched:
    """A key's actor, fetched for a request whose signature has not verified yet."""

    actor: RemoteActor
    document: str | None
    fetched_at: datetime


def fetched_bytes(fetched: Fetched) -> int:
    """What an unverified entry holds, in characters: its document, key and URIs."""
    actor = fetched.actor
    texts = (fetched.document, actor.public_key_pem, actor.uri, actor.inbox, actor.shared_inbox, actor.key_id)
    return sum(len(text) for text in texts if text is not None)


@dataclass(frozen=True)
class CacheFigures:
    """The directory's memories, for the metrics (counters since the process started)."""

    unverified_entries: int
    unverified_bytes: int
    unverified_evictions: int
    failures: int
    failure_evictions: int
    refetches_skipped: int


class ActorMemory:
    """Recently used actors and their keys in this process's memory: a cached actor or key
    reads no database row.

    Bounded (least recently used dropped first) and each entry expires at its database entry's
    expiry or after `ttl`, whichever comes first. One entry per actor: an actor fetched afresh
    with another key drops the old one, as its database row does.
    """

    def __init__(self, ttl: timedelta = MEMORY_TTL, size: int = MEMORY_ACTORS) -> None:
        self._ttl = ttl
        self._size = size
        self._actors: OrderedDict[str, tuple[RemoteActor, datetime]] = OrderedDict()
        self._by_key: dict[str, str] = {}

    def actor(self, uri: str, now: datetime) -> RemoteActor | None:
        found = self._actors.get(uri)
        if found is None:
            return None
        actor, expires_at = found
        if expires_at <= now:
            self.forget(uri)
            return None
        self._actors.move_to_end(uri)
        return actor

    def key(self, key_id: str, now: datetime) -> RemoteKey | None:
        """The key `key_id` and its owner, if a remembered actor lists it."""
        uri = self._by_key.get(key_id)
        actor = None if uri is None else self.actor(uri, now)
        return None if actor is None else key_of(actor, key_id)

    def put(self, actor: RemoteActor, now: datetime, expires_at: datetime) -> None:
        self.forget(actor.uri)
        self._actors[actor.uri] = (actor, min(expires_at, now + self._ttl))
        if actor.key_id is not None and actor.public_key_pem:
            self._by_key[actor.key_id] = actor.uri
        while len(self._actors) > self._size:
            self.forget(next(iter(self._actors)))

    def forget(self, uri: str) -> None:
        """Drop the actor at `uri` and its key (its document could not be fetched, or it expired)."""
        found = self._actors.pop(uri, None)
        key_id = None if found is None else found[0].key_id
        if key_id is not None and self._by_key.get(key_id) == uri:
            del self._by_key[key_id]


def key_of(actor: RemoteActor, key_id: str) -> RemoteKey | None:
    """The key `key_id` as `actor` lists it, or None if it lists another one (or none)."""
    if actor.key_id != key_id or not actor.public_key_pem:
        return None
    return RemoteKey(key_id=key_id, owner=actor.uri, public_key_pem=actor.public_key_pem)


class BoundedMemory(Generic[K, V]):
    """At most `entries` values and `max_bytes` of their `size`, each until its expiry.

    Past either bound the least recently used go first, counted in `evictions` (expired
    entries dropped are not counted).
    """

    def __init__(
        self, entries: int, max_bytes: int | None = None, size: Callable[[V], int] = lambda _value: 0
    ) -> None:
        self._entries = entries
        self._max_bytes = max_bytes
        self._size = size
        self._values: OrderedDict[K, tuple[V, datetime]] = OrderedDict()
        self.bytes = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._values)

    def get(self, key: K, now: datetime) -> V | None:
        """The unexpired value at `key` (now the most recently used), or None."""
        found = self._values.get(key)
        if found is None:
            return None
        if found[1] <= now:
            self.pop(key)
            return None
        self._values.move_to_end(key)
        return found[0]

    def put(self, key: K, value: V, expires_at: datetime) -> None:
        """Remember `value` at `key` until `expires_at`; one larger than `max_bytes` is not kept."""
        self.pop(key)
        size = self._size(value)
        if self._max_bytes is not None and size > self._max_bytes:
            self.evictions += 1
            return
        self._values[key] = (value, expires_at)
        self.bytes += size
        while len(self._values) > self._entries or (
            self._max_bytes is not None and self.bytes > self._max_bytes
        ):
            self.pop(next(iter(self._values)))
            self.evictions += 1

    def pop(self, key: K) -> V | None:
        """Forget the value at `key`, returning it (expired or not), or None."""
        found = self._values.pop(key, None)
        if found is None:
            return None
        self.bytes -= self._size(found[0])
        return found[0]


def _slim_keys(value: Any, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    keys = value if isinstance(value, list) else [value]
    return [
        {name: key[name] for name in fields if name in key}
        for key in keys[:SLIM_LIST_ENTRIES]
        if isinstance(key, dict)
    ]


def _slim_field(name: str, value: Any) -> Any:
    """The stored part of one field, or None when nothing of it is kept."""
    if name == "publicKey":
        return _slim_keys(value, _KEY_FIELDS) or None
    if name == "assertionMethod":
        return _slim_keys(value, _MULTIKEY_FIELDS) or None
    if name == "endpoints":
        kept = (
            {key: value[key] for key in _ENDPOINT_FIELDS if key in value} if isinstance(value, dict) else {}
        )
        return kept or None
    if isinstance(value, list):
        return [item for item in value[:SLIM_LIST_ENTRIES] if isinstance(item, str)] or None
    return value if isinstance(value, str) else None


def slim_document(doc: dict[str, Any], max_bytes: int) -> str | None:
    """The fields of `doc` fedqueue uses (`SLIM_FIELDS`), as JSON of at most `max_bytes` (UTF-8).

    Over the cap, the fields are given up from the end of `SLIM_FIELDS`; None if even `id`
    alone is over it.
    """
    slim = {name: kept for name in SLIM_FIELDS if (kept := _slim_field(name, doc.get(name))) is not None}
    while slim:
        text = json.dumps(slim, ensure_ascii=False, separators=(",", ":"))
        if len(text.encode("utf-8")) <= max_bytes:
            return text
        slim.popitem()
    return None
