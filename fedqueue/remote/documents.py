"""Remote actors and keys: signed, guarded, size-capped fetches behind an expiring cache.

A document is who it says only at its own address: one whose `id` is not the URL it was fetched
from (fragment aside) is not taken as it is. The document at the `id` it claims, on the same
origin only, is fetched instead and must carry that id (as Mastodon does): so an upload on an
actor's origin that claims to be the actor does not speak for it. GoToSocial's key ids
(`https://h/users/x/main-key`, a stub whose `id` is the actor) work this way.

A key is trusted only through its owner's actor document: when a key id names a separate key
document, the owner named there is fetched too (at its own address), and the key must be the
one that actor document lists. So `RemoteKey.owner` is always an actor that claims the key.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import urldefrag

from fedqueue import tracing
from fedqueue.remote.http_client import HttpClient, SigningIdentity, signed_headers
from fedqueue.remote.key_hints import KeyHints
from fedqueue.remote.proof_keys import ProofKeys
from fedqueue.rules.activitystreams import ACCEPT_ACTIVITY
from fedqueue.rules.address_guard import FetchError, Gone, host_of
from fedqueue.rules.assertion_methods import with_assertion_key
from fedqueue.rules.bounded_memory import (
    MEMORY_TTL,
    ActorMemory,
    BoundedMemory,
    CacheFigures,
    Fetched,
    RemoteActor,
    RemoteKey,
    fetched_bytes,
    key_of,
    slim_document,
)
from fedqueue.rules.errors import TooLarge
from fedqueue.rules.remote_actor_documents import (
    checked_url,
    document_field,
    json_object,
    parse_actor,
    same_origin,
)
from fedqueue.rules.signing.requests import SignatureScheme
from fedqueue.storage import CachedRemote, Store
from fedqueue.storage.column_types import utcnow

ACTOR_TTL = timedelta(hours=24)
FAILURE_TTL = timedelta(minutes=5)
_JSON_TYPES = ("application/activity+json", "application/ld+json", "application/json")
#: Answers to a GET that mean the document was deleted (`Gone`), not that the server failed.
_GONE_STATUSES = (404, 410)
#: A remembered failure's reason is cut to this many characters.
_REASON_MAX_CHARS = 500


@dataclass(frozen=True)
class _Failure:
    """A fetch that failed, remembered in memory until FAILURE_TTL has passed."""

    reason: str
    gone: bool

    def error(self) -> FetchError:
        return (Gone if self.gone else FetchError)(self.reason)


class RemoteDirectory:
    """Looks up remote actors and keys: from memory, else from the cache when it is fresh, else fetched.

    A fetch is signed on the client's signing threads, with the scheme the host's deliveries
    found it to take; what a fetch needs to know beforehand is one database read
    (`RemoteActorStore.lookup`).

    What an unauthenticated request makes it fetch stays in memory, bounded: a key's actor is
    held in the unverified memory (`remote_unverified_cache_entries` and `_bytes`, least recently
    used dropped first) and stored only once a signature made with that key verifies
    (`verified`); a failure is remembered in memory (`remote_failure_cache_entries`) for
    FAILURE_TTL; a key is fetched again at most once per `key_refetch_cooldown_seconds`.
    Actors fetched by `actor` (for deliveries, or named by a verified request) are stored.
    """

    def __init__(self, store: Store, client: HttpClient, clock: Callable[[], datetime] = utcnow) -> None:
        settings = client.settings
        self._store = store
        self._client = client
        self._clock = clock
        self._memory = ActorMemory()
        self._document_bytes = settings.remote_actor_document_max_bytes
        self._cooldown = timedelta(seconds=settings.key_refetch_cooldown_seconds)
        self._unverified = BoundedMemory[str, Fetched](
            settings.remote_unverified_cache_entries, settings.remote_unverified_cache_bytes, fetched_bytes
        )
        self._failures = BoundedMemory[str, _Failure](settings.remote_failure_cache_entries)
        #: The keys fetched again lately (for the cooldown), each until its cooldown ends.
        self._refetched = BoundedMemory[str, datetime](settings.remote_failure_cache_entries)
        #: The Ed25519 keys remote actors list under assertionMethod (FEP-8b32 proofs' keys).
        self.proof_keys = ProofKeys(clock, self._cooldown, store.remote_actors.get)
        self._key_hints = KeyHints(store.hosts, clock)
        self._refetches_skipped = 0

    @property
    def http(self) -> HttpClient:
        """The shared HTTP client the directory fetches through (guarded, capped)."""
        return self._client

    async def actor(self, uri: str, signer: SigningIdentity | None, *, refresh: bool = False) -> RemoteActor:
        """The actor at `uri`, stored; FetchError (also remembered for a few minutes) if it is unusable."""
        uri = urldefrag(checked_url(uri, "actor URI")).url
        now = self._clock()
        if not refresh:
            remembered = self._memory.actor(uri, now)
            if remembered is not None:
                return remembered
            failed = self._failures.get(uri, now)
            if failed is not None:
                raise failed.error()
        lookup = await self._store.remote_actors.lookup(uri, None, host_of(uri), now)
        if not refresh and lookup.entry is not None:
            actor = self._from_cache(lookup.entry)
            self._memory.put(actor, now, lookup.entry.expires_at)
            return actor
        try:
            doc, own_url = await self._fetch_own(uri, signer, None, self._scheme(lookup.host_scheme))
            actor = parse_actor(doc, own_url)
        except FetchError as exc:
            self._memory.forget(uri)
            self._remember_failure(uri, exc, now)
            raise
        await self._key_hints.heard(doc, actor.uri)
        await self._remember(actor, slim_document(doc, self._document_bytes), now)
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

        A key fetched here is held in memory, not stored, until `verified` says a signature made
        with it verified; what the latest fetch brought comes first. `refresh` fetches the key
        again, unless it was fetched again less than `key_refetch_cooldown_seconds` ago (that
        fetch's answer is used). `deadline` (the event loop's clock) ends the fetches early; a fetch cut
        short by it is a failure like any other, remembered for a few minutes.
        """
        now = self._clock()
        url = urldefrag(checked_url(key_id, "key id")).url
        if refresh and self._refetched.get(key_id, now) is not None:
            refresh = False  # what the last refetch brought is still the answer
            self._refetches_skipped += 1
        elif refresh:  # counted before the fetch: concurrent refetches of the key are skipped too
            self._refetched.put(key_id, now, now + self._cooldown)
        if not refresh:
            remembered = self._unverified_key(key_id, now) or self._memory.key(key_id, now)
            if remembered is not None:
                return remembered
            failed = self._failures.get(key_id, now) or self._failures.get(url, now)
            if failed is not None:
                raise failed.error()
        lookup = await self._store.remote_actors.lookup(url, None if refresh else key_id, host_of(url), now)
        owner = lookup.key_owner
        if owner is not None and owner.public_key_pem:
            if owner.inbox is not None:
                self._memory.put(self._from_cache(owner), now, owner.expires_at)
            return RemoteKey(key_id=key_id, owner=owner.uri, public_key_pem=owner.public_key_pem)
        if not refresh and lookup.entry is not None and lookup.entry.error is not None:
            raise _remembered(lookup.entry)
        try:
            scheme = self._scheme(lookup.host_scheme)
            with tracing.span(
                "fedqueue.key_fetch", {"fedqueue.key_id": key_id, "server.address": host_of(url)}
            ):
                doc, actor_url = await self._fetch_key_owner(key_id, url, signer, deadline, scheme)
            actor = with_assertion_key(parse_actor(doc, actor_url, key_id), doc, key_id)
            key = key_of(actor, key_id)
            if key is None:
                raise FetchError(f"actor {actor.uri} does not list key {key_id}")
        except FetchError as exc:
            # A 410 or 404 at the key's URL itself is remembered there (`_fetch_own`): for every
            # key id on that URL, and for `gone`.
            if self._failures.get(url, now) is None:
                self._remember_failure(key_id, exc, now)
            raise
        await self._key_hints.heard(doc, actor.uri)
        fetched = Fetched(actor, slim_document(doc, self._document_bytes), now)
        self._unverified.put(key_id, fetched, now + MEMORY_TTL)
        return key

    async def _fetch_key_owner(
        self,
        key_id: str,
        url: str,
        signer: SigningIdentity | None,
        deadline: float | None,
        scheme: SignatureScheme,
    ) -> tuple[dict[str, Any], str]:
        """The document that should list `key_id` and its own URL: the one at `url` (or at the id
        it claims, `_fetch_own`), or the owner's that a key document there names."""
        doc, url = await self._fetch_own(url, signer, deadline, scheme)
        if "publicKeyPem" in doc and "inbox" not in doc:  # a separate key document
            owner_uri = doc.get("owner")
            if not isinstance(owner_uri, str):
                raise FetchError(f"key document {key_id} names no owner")
            same_host = host_of(owner_uri) == host_of(url)
            url = urldefrag(checked_url(owner_uri, "key owner")).url
            # Fetched at the address the key names: `parse_actor` then requires that id there.
            doc, _raw = await self.fetch_json(
                url, signer, deadline=deadline, scheme=scheme if same_host else None
            )
        return doc, url

    async def _fetch_own(
        self, url: str, signer: SigningIdentity | None, deadline: float | None, scheme: SignatureScheme
    ) -> tuple[dict[str, Any], str]:
        """The document at `url` and `url` when its `id` is `url` (fragment aside); otherwise the
        document at the id it claims (on `url`'s origin only) and that id, which it must carry.

        One hop at most. A 410 or 404 at `url` is remembered for `gone` (FAILURE_TTL).
        """
        try:
            doc, _raw = await self.fetch_json(url, signer, deadline=deadline, scheme=scheme)
        except Gone as exc:
            self._memory.forget(url)
            self._remember_failure(url, exc, self._clock())
            raise
        claimed = document_field("id", doc.get("id"))
        if claimed is not None and urldefrag(claimed).url == url:
            return doc, url
        if claimed is None or not same_origin(claimed, url):
            raise FetchError(f"document at {url} has a missing or foreign id")
        own_url = urldefrag(claimed).url
        doc, _raw = await self.fetch_json(own_url, signer, deadline=deadline, scheme=scheme)
        found = doc.get("id")
        if not isinstance(found, str) or urldefrag(found).url != own_url:
            raise FetchError(f"{url} claims the id {own_url}, whose document has another id")
        return doc, own_url

    async def gone(self, uri: str, signer: SigningIdentity | None, *, deadline: float | None) -> bool:
        """Whether the actor at `uri` is gone: its own document answers 410 or 404 to our fetch.

        A 410 or 404 that a fetch of `uri` itself met within FAILURE_TTL (a key id on `uri`, the
        sender's retry) counts without another fetch; anything else is fetched now. Any other
        answer, a failure included, is not a proof of departure.
        """
        now = self._clock()
        try:
            uri = urldefrag(checked_url(uri, "actor URI")).url
            failed = self._failures.get(uri, now)
            if failed is not None and failed.gone:
                return True
            await self.fetch_json(uri, signer, deadline=deadline)
        except Gone as exc:
            self._memory.forget(uri)
            self._remember_failure(uri, exc, now)
            return True
        except FetchError:
            return False
        return False

    def _unverified_key(self, key_id: str, now: datetime) -> RemoteKey | None:
        fetched = self._unverified.get(key_id, now)
        return None if fetched is None else key_of(fetched.actor, key_id)

    async def verified(self, key_id: str) -> None:
        """A signature made with `key_id` verified: store its actor, if a request fetched it."""
        fetched = self._unverified.pop(key_id)
        if fetched is not None:
            await self._remember(fetched.actor, fetched.document, fetched.fetched_at)

    def figures(self) -> CacheFigures:
        """The sizes and counters of the directory's memories."""
        return CacheFigures(
            unverified_entries=len(self._unverified),
            unverified_bytes=self._unverified.bytes,
            unverified_evictions=self._unverified.evictions,
            failures=len(self._failures),
            failure_evictions=self._failures.evictions,
            refetches_skipped=self._refetches_skipped,
        )

    async def fetch_json(
        self,
        url: str,
        signer: SigningIdentity | None,
        *,
        deadline: float | None = None,
        scheme: SignatureScheme | None = None,
    ) -> tuple[dict[str, Any], str]:
        """A signed GET of an ActivityStreams document: (parsed object, raw text).

        Signed under `scheme`, or when None the one `_get_scheme` reads for the host; the body
        must be a UTF-8 JSON object (`json_object`).
        """
        await self._check_policy(url)
        timeout_s = None if deadline is None else max(0.0, deadline - asyncio.get_running_loop().time())
        headers = {"accept": ACCEPT_ACTIVITY}
        if signer is not None:
            scheme = scheme or await self._get_scheme(url)
            sign = partial(signed_headers, "GET", url, signer, self._clock(), scheme=scheme)
            headers.update(await self._client.signing.run(sign))
        try:
            async with self._client.get(url, headers, timeout_s=timeout_s) as reply:
                if reply.status in _GONE_STATUSES:
                    raise Gone(f"GET {url} answered {reply.status}")
                if reply.status != 200:
                    raise FetchError(f"GET {url} answered {reply.status}")
                if reply.media_type not in _JSON_TYPES:
                    raise FetchError(f"GET {url} answered {reply.media_type or 'no content type'}, not JSON")
                raw = await reply.read()
        except TooLarge as exc:
            raise FetchError(f"GET {url}: {exc}") from None
        return json_object(raw, url)

    async def _check_policy(self, url: str) -> None:
        """FetchError when the federation policy refuses `url`'s host: nothing is fetched from it."""
        settings = self._client.settings
        policy = await self._store.blocks.policy(settings.federation_mode, settings.allowed_domains)
        refusal = policy.refusal(host_of(url))
        if refusal is not None:
            raise FetchError(f"GET {url} not sent: {refusal.reason}")

    async def _get_scheme(self, url: str) -> SignatureScheme:
        """The scheme to sign a GET of `url` with (`_scheme`), from its host's row."""
        host = host_of(url)
        health = (await self._store.hosts.health([host])).get(host)
        return self._scheme(health.signature_scheme if health is not None else "unknown")

    def _scheme(self, host_scheme: str) -> SignatureScheme:
        """draft-cavage, unless deliveries found the host refusing it (its row says rfc9421).

        GETs are not double-knocked: some servers (Misskey) answer a GET whose signature they
        cannot verify with a stripped-down document instead of a 401, so a refusal is not
        reliably visible, and cavage is what nearly every server verifies today.
        """
        if self._client.settings.signature_scheme_policy == "cavage-only":
            return "cavage"
        return "rfc9421" if host_scheme == "rfc9421" else "cavage"

    async def _remember(self, actor: RemoteActor, document: str | None, fetched_at: datetime) -> None:
        """Store a fetched actor; its inboxes that once answered 410 Gone are worth trying again.

        Written behind: this process has it in memory already, and nothing waits on the row.
        """
        self._memory.put(actor, self._clock(), fetched_at + ACTOR_TTL)
        await self._store.remote_actors.put_behind(
            CachedRemote(
                uri=actor.uri,
                inbox=actor.inbox,
                shared_inbox=actor.shared_inbox,
                key_id=actor.key_id,
                public_key_pem=actor.public_key_pem,
                document=document,
                error=None,
                fetched_at=fetched_at,
                expires_at=fetched_at + ACTOR_TTL,
            )
        )

    def _remember_failure(self, name: str, exc: FetchError, now: datetime) -> None:
        """Remember in memory, for FAILURE_TTL, that fetching `name` (a URI or key id) failed."""
        # The reason may quote a fetched document: make it one bounded line.
        reason = " ".join(str(exc).replace("\x00", "\\0").split())[:_REASON_MAX_CHARS]
        reason = reason.encode("utf-8", "backslashreplace").decode("utf-8")
        self._failures.put(name, _Failure(reason, isinstance(exc, Gone)), now + FAILURE_TTL)

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
