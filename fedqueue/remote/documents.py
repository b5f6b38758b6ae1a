"""Remote actors and keys: signed, guarded, size-capped fetches behind an expiring cache.

A key is trusted only through its owner's actor document: when a key id names a separate key
document (as GoToSocial serves), the owner named there is fetched too, and the key must be the
one that actor document lists. So `RemoteKey.owner` is always an actor that claims the key.
"""

from __future__ import annotations

import asyncio
import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urldefrag, urlsplit

from fedqueue.errors import TooLarge
from fedqueue.remote.client import ACCEPT_ACTIVITY, HttpClient, SigningIdentity, signed_headers
from fedqueue.remote.guard import FetchError, Gone, check_url, host_of
from fedqueue.signing.requests import SignatureScheme
from fedqueue.storable import URI_CHARS, text_problem
from fedqueue.storage import CachedRemote, Store
from fedqueue.storage.types import utcnow

ACTOR_TTL = timedelta(hours=24)
FAILURE_TTL = timedelta(minutes=5)
#: How long a key stays in a process's memory (never past its database entry's expiry): short,
#: so a key that another `serve` process re-fetched (rotation) replaces it here soon too.
MEMORY_KEY_TTL = timedelta(minutes=5)
#: Keys kept in memory per process, least recently used dropped first.
MEMORY_KEYS = 10_000
_JSON_TYPES = ("application/activity+json", "application/ld+json", "application/json")
#: Answers to a GET that mean the document was deleted (`Gone`), not that the server failed.
_GONE_STATUSES = (404, 410)
#: The size of the URI columns of remote_actors (storage.tables.URI): longer URIs cannot be stored.
#: A remembered failure's reason is cut to this many characters.
_REASON_MAX_CHARS = 500


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


def _same_origin(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return (pa.scheme, pa.netloc.lower()) == (pb.scheme, pb.netloc.lower())


def _public_keys(doc: dict[str, Any]) -> list[dict[str, Any]]:
    keys = doc.get("publicKey")
    if isinstance(keys, dict):
        return [keys]
    if isinstance(keys, list):
        return [key for key in keys if isinstance(key, dict)]
    return []


def _unusable_url(value: str) -> str | None:
    """Why `value` cannot be stored and fetched as a remote URI, or None."""
    reason = text_problem(value, URI_CHARS)
    if reason is not None:
        return reason
    try:
        check_url(value, allow_private=True)  # forbidden addresses are refused when fetched
    except FetchError as exc:
        return str(exc)
    return None


def _checked_url(value: str, what: str) -> str:
    """`value`, or FetchError naming `what` when it cannot be stored and fetched."""
    reason = _unusable_url(value)
    if reason is not None:
        raise FetchError(f"{what} is unusable: {reason}")
    return value


def _field(name: str, value: Any, *, url: bool = True) -> str | None:
    """A string field of a fetched document, checked before anything is stored; None if not a string."""
    if not isinstance(value, str):
        return None
    reason = _unusable_url(value) if url else text_problem(value)
    if reason is not None:
        raise FetchError(f"actor document has an unusable {name}: {reason}")
    return value


def _utf8_text(raw: bytes) -> str | None:
    """`raw` as UTF-8 text, or None. A NUL byte is never in JSON text but fills UTF-16 and UTF-32."""
    if b"\x00" in raw:
        return None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return None


def parse_actor(doc: Any, uri: str, key_id: str | None = None) -> RemoteActor:
    """An actor document's inboxes and key (the one named `key_id`, else the first).

    Every field kept is checked first (text storable on both engines, http(s) URLs that fit
    their columns), so what is refused on PostgreSQL is refused on SQLite too.
    """
    if not isinstance(doc, dict):
        raise FetchError(f"actor document of {uri} is not a JSON object")
    actor_id = _field("id", doc.get("id"))
    if actor_id is None or not _same_origin(actor_id, uri):
        raise FetchError(f"actor document of {uri} has a missing or foreign id")
    inbox = _field("inbox", doc.get("inbox"))
    if inbox is None or not _same_origin(inbox, actor_id):
        raise FetchError(f"actor {actor_id} has no usable inbox")
    endpoints = doc.get("endpoints")
    shared = _field("sharedInbox", endpoints.get("sharedInbox") if isinstance(endpoints, dict) else None)
    keys = _public_keys(doc)
    chosen = next((key for key in keys if key.get("id") == key_id), None) if key_id else None
    chosen = chosen or (keys[0] if keys else None)
    pem = _field("publicKeyPem", chosen.get("publicKeyPem"), url=False) if chosen else None
    found_key_id = _field("key id", chosen.get("id")) if chosen else None
    return RemoteActor(
        uri=actor_id,
        inbox=inbox,
        shared_inbox=shared if shared is not None and _same_origin(shared, actor_id) else None,
        key_id=found_key_id,
        public_key_pem=pem,
    )


class KeyMemory:
    """Recently used keys in this process's memory: a cached-key request reads no database row.

    Bounded (least recently used dropped first) and each entry expires at its database entry's
    expiry or after `ttl`, whichever comes first. One entry per owner: an actor fetched afresh
    with another key drops the old one, as its database row does.
    """

    def __init__(self, ttl: timedelta = MEMORY_KEY_TTL, size: int = MEMORY_KEYS) -> None:
        self._ttl = ttl
        self._size = size
        self._keys: OrderedDict[str, tuple[RemoteKey, datetime]] = OrderedDict()
        self._by_owner: dict[str, str] = {}

    def get(self, key_id: str, now: datetime) -> RemoteKey | None:
        found = self._keys.get(key_id)
        if found is None:
            return None
        key, expires_at = found
        if expires_at <= now:
            self._drop(key_id)
            return None
        self._keys.move_to_end(key_id)
        return key

    def put(self, key: RemoteKey, now: datetime, expires_at: datetime) -> None:
        old = self._by_owner.get(key.owner)
        if old is not None:
            self._drop(old)
        self._drop(key.key_id)
        self._keys[key.key_id] = (key, min(expires_at, now + self._ttl))
        self._by_owner[key.owner] = key.key_id
        while len(self._keys) > self._size:
            self._drop(next(iter(self._keys)))

    def forget_owner(self, owner: str) -> None:
        """Drop `owner`'s key: its document could not be fetched (its database row says so now)."""
        key_id = self._by_owner.get(owner)
        if key_id is not None:
            self._drop(key_id)

    def _drop(self, key_id: str) -> None:
        found = self._keys.pop(key_id, None)
        if found is not None and self._by_owner.get(found[0].owner) == key_id:
            del self._by_owner[found[0].owner]


class RemoteDirectory:
    """Looks up remote actors and keys, from the cache when it is fresh (keys from memory first)."""

    def __init__(self, store: Store, client: HttpClient, clock: Callable[[], datetime] = utcnow) -> None:
        self._store = store
        self._client = client
        self._clock = clock
        self._keys = KeyMemory()

    async def actor(self, uri: str, signer: SigningIdentity | None, *, refresh: bool = False) -> RemoteActor:
        """The actor at `uri`; FetchError (also remembered for a few minutes) if it is unusable."""
        uri = urldefrag(_checked_url(uri, "actor URI")).url
        now = self._clock()
        if not refresh:
            cached = await self._store.remote_actors.get(uri, now)
            if cached is not None:
                return self._from_cache(cached)
        try:
            doc, raw = await self.fetch_json(uri, signer)
            actor = parse_actor(doc, uri)
        except FetchError as exc:
            await self._remember_failure(uri, exc, now)
            raise
        await self._remember(actor, raw, now)
        return actor

    async def key(
        self,
        key_id: str,
        signer: SigningIdentity | None,
        *,
        refresh: bool = False,
        deadline: float | None = None,
    ) -> RemoteKey:
        """The public key `key_id` and the actor that claims it; FetchError if there is none.

        `deadline` (the event loop's clock) ends the fetches early; a fetch cut short by it is
        a failure like any other, remembered for a few minutes.
        """
        now = self._clock()
        url = urldefrag(_checked_url(key_id, "key id")).url
        if not refresh:
            remembered = self._keys.get(key_id, now)
            if remembered is not None:
                return remembered
            cached = await self._store.remote_actors.by_key_id(key_id, now)
            if cached is not None and cached.public_key_pem:
                key = RemoteKey(key_id=key_id, owner=cached.uri, public_key_pem=cached.public_key_pem)
                self._keys.put(key, now, cached.expires_at)
                return key
            failed = await self._store.remote_actors.get(url, now)
            if failed is not None and failed.error is not None:
                raise _remembered(failed)
        try:
            doc, raw = await self.fetch_json(url, signer, deadline=deadline)
            if "publicKeyPem" in doc and "inbox" not in doc:  # a separate key document
                owner = doc.get("owner")
                if not isinstance(owner, str):
                    raise FetchError(f"key document {key_id} names no owner")
                url = _checked_url(owner, "key owner")
                doc, raw = await self.fetch_json(url, signer, deadline=deadline)
            actor = parse_actor(doc, url, key_id)
            if actor.key_id != key_id or not actor.public_key_pem:
                raise FetchError(f"actor {actor.uri} does not list key {key_id}")
        except FetchError as exc:
            await self._remember_failure(urldefrag(key_id).url, exc, now)
            raise
        await self._remember(actor, raw, now)
        return RemoteKey(key_id=key_id, owner=actor.uri, public_key_pem=actor.public_key_pem)

    async def fetch_json(
        self, url: str, signer: SigningIdentity | None, *, deadline: float | None = None
    ) -> tuple[dict[str, Any], str]:
        """A signed GET of an ActivityStreams document: (parsed object, raw text).

        The body must be UTF-8 (RFC 8259 8.1). json.loads alone would also take UTF-16 and
        UTF-32 bytes, whose text then could not be stored, so the rule is applied here, once.
        """
        timeout_s = None if deadline is None else max(0.0, deadline - asyncio.get_running_loop().time())
        headers = {"accept": ACCEPT_ACTIVITY}
        if signer is not None:
            scheme = await self._get_scheme(url)
            headers.update(signed_headers("GET", url, signer, self._clock(), scheme=scheme))
        try:
            async with self._client.stream("GET", url, headers=headers, timeout_s=timeout_s) as response:
                if response.status_code in _GONE_STATUSES:
                    raise Gone(f"GET {url} answered {response.status_code}")
                if response.status_code != 200:
                    raise FetchError(f"GET {url} answered {response.status_code}")
                media_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
                if media_type not in _JSON_TYPES:
                    raise FetchError(f"GET {url} answered {media_type or 'no content type'}, not JSON")
                raw = await self._client.read_capped(response)
        except TooLarge as exc:
            raise FetchError(f"GET {url}: {exc}") from None
        text = _utf8_text(raw)
        if text is None:
            raise FetchError(f"GET {url} gave a document that is not UTF-8")
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError):
            raise FetchError(f"GET {url} gave malformed JSON") from None
        if not isinstance(doc, dict):
            raise FetchError(f"GET {url} gave JSON that is not an object")
        return doc, text

    async def _get_scheme(self, url: str) -> SignatureScheme:
        """draft-cavage, unless deliveries found the host refusing it (its row says rfc9421).

        GETs are not double-knocked: some servers (Misskey) answer a GET whose signature they
        cannot verify with a stripped-down document instead of a 401, so a refusal is not
        reliably visible, and cavage is what nearly every server verifies today.
        """
        if self._client.settings.signature_scheme_policy == "cavage-only":
            return "cavage"
        host = host_of(url)
        health = (await self._store.hosts.health([host])).get(host)
        return "rfc9421" if health is not None and health.signature_scheme == "rfc9421" else "cavage"

    async def _remember(self, actor: RemoteActor, raw: str, now: datetime) -> None:
        if actor.key_id is not None and actor.public_key_pem:
            key = RemoteKey(key_id=actor.key_id, owner=actor.uri, public_key_pem=actor.public_key_pem)
            self._keys.put(key, now, now + ACTOR_TTL)
        await self._store.remote_actors.put(
            CachedRemote(
                uri=actor.uri,
                inbox=actor.inbox,
                shared_inbox=actor.shared_inbox,
                key_id=actor.key_id,
                public_key_pem=actor.public_key_pem,
                document=raw,
                error=None,
                fetched_at=now,
                expires_at=now + ACTOR_TTL,
            )
        )
        # The actor answered: inboxes of it that once answered 410 Gone are worth trying again.
        await self._store.audience.forget_gone(filter(None, (actor.inbox, actor.shared_inbox)))

    async def _remember_failure(self, uri: str, exc: FetchError, now: datetime) -> None:
        # The reason may quote a fetched document: make it one storable line.
        reason = " ".join(str(exc).replace("\x00", "\\0").split())[:_REASON_MAX_CHARS]
        reason = reason.encode("utf-8", "backslashreplace").decode("utf-8")
        self._keys.forget_owner(uri)
        await self._store.remote_actors.put(
            CachedRemote(
                uri=uri,
                inbox=None,
                shared_inbox=None,
                key_id=None,
                public_key_pem=None,
                document=None,
                error=reason,
                fetched_at=now,
                expires_at=now + FAILURE_TTL,
                gone=isinstance(exc, Gone),
            )
        )

    @staticmethod
    def _from_cache(cached: CachedRemote) -> RemoteActor:
        if cached.error is not None:
            raise _remembered(cached)
        if cached.inbox is None:
            raise FetchError(f"actor {cached.uri} has no inbox")
        return RemoteActor(
            uri=cached.uri,
            inbox=cached.inbox,
            shared_inbox=cached.shared_inbox,
            key_id=cached.key_id,
            public_key_pem=cached.public_key_pem,
        )


def _remembered(failure: CachedRemote) -> FetchError:
    """A remembered failure raised again as what it was: `Gone` stays `Gone`."""
    return (Gone if failure.gone else FetchError)(failure.error or f"fetching {failure.uri} failed")
