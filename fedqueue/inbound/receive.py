"""Receive: one signed POST to an inbox, from its checked request to the stored activity.

The order is the cheap refusals first: the addressed actor (404), the Host header and the
signature's time window and coverage (401), then JSON (400), the throttle (429, see
`inbound.throttle`), the block list (403), the key fetch and signature (401, one fixed line:
the detail goes to the log), and finally one transaction that stores the activity and its
effects. The web edge reads the body and answers; this module holds the flow.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from fedqueue import tracing
from fedqueue.inbound.authenticate import Authenticated, DocumentFetcher, NotAuthenticated, authenticate
from fedqueue.inbound.dereference import dereference
from fedqueue.inbound.followers_sync import FollowersSync
from fedqueue.inbound.gone import claims_departure
from fedqueue.inbound.heard_from import heard_from
from fedqueue.inbound.ld_verifier import LdVerifier
from fedqueue.inbound.moves import effects_of_move
from fedqueue.inbound.relay_answers import AcceptRelay, answer_relay_follow, record_relay_answer
from fedqueue.inbound.throttle import InboxThrottle
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import SigningIdentity
from fedqueue.remote.keyring import Keyring
from fedqueue.rules.address_guard import FetchError, Gone, host_of
from fedqueue.rules.columns import URI_CHARS, check_actor_name, check_text
from fedqueue.rules.errors import Forbidden, Unauthorized
from fedqueue.rules.follow_effects import Effect, FollowerInboxes, created_object, effects_for
from fedqueue.rules.followers_digest import HEADER as SYNC_HEADER
from fedqueue.rules.forwarding import forwarding_for
from fedqueue.rules.inbox_acceptance import Activity, named_local_actors, parse_activity, relay_protocol
from fedqueue.rules.peer_address import UNKNOWN
from fedqueue.rules.signature_parsing import InboundRequest, ParsedSignature
from fedqueue.rules.signing.requests import SignatureError
from fedqueue.rules.states import InboxAnswer
from fedqueue.rules.urls import Urls
from fedqueue.rules.verification import KeyRecord, KeyResolver, TimeWindow, precheck
from fedqueue.settings import Settings
from fedqueue.storage import Admission, NewInbound, Store
from fedqueue.storage.actors import ActorStore
from fedqueue.storage.column_types import utcnow

log = logging.getLogger("fedqueue.inbox")

#: `host_of` of the actors and keys seen lately: the same senders post again and again.
_host_of = functools.lru_cache(maxsize=1024)(host_of)

#: What a sender is told when its signature's key could not be had, or did not verify it.
KEY_UNFETCHED = "the signature's key could not be fetched"
NOT_VERIFIED = "the signature could not be verified"
FORWARD_UNAUTHENTICATED = "the forwarded activity could not be authenticated"

#: More named local recipients than this in one activity are ignored beyond the first ones.
MAX_NAMED_RECIPIENTS = 100
#: At most this many local-looking names of an activity are looked up (the first, sorted).
MAX_MENTIONED_NAMES = 1000


@dataclass(frozen=True)
class Receiver:
    """What receiving needs: the store, the local actors' keys and the remote documents."""

    settings: Settings
    store: Store
    urls: Urls
    keyring: Keyring
    directory: RemoteDirectory
    ld_verifier: LdVerifier
    throttle: InboxThrottle | None = None
    followers_sync: FollowersSync | None = None
    #: Counts each bare object URI dereferenced, by outcome (`states.DereferenceOutcome`).
    on_dereference: Callable[[str], None] | None = None
    #: (relay inbox, its Follow) -> None: POSTs the instance actor's Accept (RelayRefused if not taken).
    accept_relay: AcceptRelay | None = None
    #: Counts each forwarded activity accepted, by what vouched for it (`proof_counts.FORWARDED_BY`).
    on_forwarded: Callable[[str], None] | None = None

    async def addressed(self, name: str | None) -> None:
        """NotFound (404) when the path names no local actor: checked before the body is read."""
        if name is not None:
            await self.keyring.identity(check_actor_name(name))

    async def receive(self, signed: InboundRequest, name: str | None, address: str = UNKNOWN) -> InboxAnswer:
        """Verify and store one inbound activity from `address`; what became of it (all answered 202).

        Only "accepted" stored something new; "gone_actor" is a gone actor's self-Delete
        (`inbound.gone`), "unproven_departure" one whose actor's own document does not say it
        is gone (nothing changes), "deleted_object" a Create or Update of an object its actor
        deleted lately (a tombstone).
        """
        settings = self.settings
        candidates, activity, admission = await self._admit(signed, name, address)
        recipients = await _recipients(self.store.actors, name, admission.auto_accept)
        # The instance actor signs any key fetch (servers in secure mode answer it).
        signer, timeout_s = await self.keyring.instance(), settings.inbound_verify_timeout_seconds
        authenticated = await self._authenticate(candidates, activity, signer, address)
        if not isinstance(authenticated, Authenticated):  # a departure: nothing more to store
            return authenticated
        activity = authenticated.activity  # a forwarded one may be replaced by its re-fetched copy
        reader = sorted(admission.auto_accept)[0] if name is None and admission.auto_accept else name
        dereferenced = await dereference(
            activity,
            self.urls,
            self.directory,
            await self.keyring.identity(reader) if reader is not None else signer,
            attempts=settings.inbound_dereference_attempts,
            timeout_s=settings.inbound_dereference_timeout_seconds,
            max_depth=settings.inbox_max_json_depth,
            record=self.on_dereference,
        )
        activity = dereferenced.activity
        check_text("the signature's keyId", authenticated.key_id, URI_CHARS)
        await heard_from(self.store, admission, activity.actor, authenticated.key_id, utcnow())
        effects = await self._effects(activity, authenticated.forwardable, admission, signer, timeout_s)
        if activity.type in ("Accept", "Reject"):  # a relay's answer to the instance actor's Follow
            await record_relay_answer(self.store.relays, activity)
        if relay_protocol(activity, self.urls):  # stored (duplicates, effects), shown to no app
            recipients = set()
        stored = await self.store.inbox.insert_inbound_if_new(
            NewInbound(
                activity_id=activity.id,
                actor_uri=activity.actor,
                activity_type=activity.type,
                body=activity.text,
                key_id=authenticated.key_id,
                recipients=tuple(sorted(recipients)),
                received_at=utcnow(),
                object_error=dereferenced.object_error,
            ),
            effects,
            tombstone=_tombstone(activity, settings),
        )
        return await self._after_storing(signed, activity, authenticated, stored, signer, timeout_s)

    async def _admit(
        self, signed: InboundRequest, name: str | None, address: str
    ) -> tuple[list[ParsedSignature], Activity, Admission]:
        """The cheap refusals, before any fetch: Host (401), the signatures' window and coverage
        (401), JSON (400), the throttle (429) and the federation policy (403)."""
        settings = self.settings
        if signed.headers.get("host", "").lower() != settings.host.lower():
            raise Unauthorized(
                f"request is for host {signed.headers.get('host', '')[:100]!r}, not this server"
            )
        window = TimeWindow(settings.signature_max_age_seconds, settings.signature_max_skew_seconds)
        candidates = precheck(signed, utcnow(), window, limit=settings.inbound_max_signatures)
        activity = parse_activity(
            signed.body, max_depth=settings.inbox_max_json_depth, anonymous_seed=signed.headers["signature"]
        )
        hosts = {_host_of(activity.actor)} | {_host_of(parsed.key_id) for parsed in candidates}
        if self.throttle is not None:  # before any lookup: a flood costs a JSON parse per request
            self.throttle.screen(address, hosts, asyncio.get_running_loop().time())
        mentioned = sorted(named_local_actors(activity, self.urls) | ({name} if name else set()))
        admission = await self.store.inbox.admission(
            hosts, mentioned[:MAX_MENTIONED_NAMES], activity.actor, utcnow()
        )
        # Any signature's key on a refused host (blocked, covered by a block of its domain, off
        # the allowlist) refuses the request: no fetch goes to such a host. No read: in memory.
        policy = await self.store.blocks.policy(settings.federation_mode, settings.allowed_domains)
        refused = policy.first_refusal(hosts)
        if refused is not None:
            log.info("inbox %s refused: %s", activity.type, refused.reason)
            raise Forbidden(refused.answer)
        return candidates, activity, admission

    async def _authenticate(
        self, candidates: list[ParsedSignature], activity: Activity, signer: SigningIdentity, address: str
    ) -> Authenticated | InboxAnswer:
        """The activity as its signatures authenticate it (SignatureError: 401, one fixed line), or,
        for a gone actor's self-Delete signed with a key that is gone, what became of it."""
        clock = asyncio.get_running_loop()
        timeout_s = self.settings.inbound_verify_timeout_seconds
        deadline = clock.time() + timeout_s  # the key fetches' budget, shared by a departure's proof
        gone_keys: set[str] = set()
        unfetched: set[str] = set()
        if self.throttle is not None:  # the address pays for the fetches unless the signature verifies
            self.throttle.reserve(address, clock.time())
        try:
            with tracing.span("fedqueue.inbox.verify", {"fedqueue.actor": activity.actor}) as span:
                fetch = document_fetcher(self.directory, signer, timeout_s)
                authenticated = await authenticate(
                    candidates,
                    key_resolver(self.directory, signer, timeout_s, gone_keys, unfetched),
                    activity,
                    fetch,
                    self.ld_verifier.verify,
                    functools.partial(self.directory.proof_keys.key, fetch=fetch),
                    max_depth=self.settings.inbox_max_json_depth,
                )
                span.set("fedqueue.key_id", authenticated.key_id)
                span.set("fedqueue.activity_id", authenticated.activity.id)
        except SignatureError as exc:
            if not claims_departure(activity, (parsed.key_id for parsed in candidates), gone_keys):
                raise opaque(exc, [parsed.key_id for parsed in candidates], unfetched, address) from None
            if not await self.directory.gone(activity.actor, signer, deadline=deadline):
                log.info(
                    "inbox %s %s from %s: unproven departure (its actor document does not answer"
                    " 410 or 404), nothing changed",
                    activity.type,
                    activity.id,
                    activity.actor,
                )
                return InboxAnswer.UNPROVEN_DEPARTURE
            await self._depart(activity)
            return InboxAnswer.GONE_ACTOR
        for key_id in authenticated.verified_keys:  # genuine keys: their actors are stored now
            await self.directory.verified(key_id)
        if authenticated.vouched_by is not None and self.on_forwarded is not None:
            self.on_forwarded(authenticated.vouched_by)
        if self.throttle is not None:  # charged to the verified sender, never to a host a forgery names
            sender = authenticated.forwarded_by or authenticated.activity.actor
            self.throttle.verified(address, {_host_of(sender)}, clock.time())
        return authenticated

    async def _effects(
        self,
        activity: Activity,
        forwardable: bool,
        admission: Admission,
        signer: SigningIdentity,
        timeout_s: float,
    ) -> list[Effect]:
        """What storing the activity changes besides the inbox (`follow_effects`), its forwarding
        included when `forwardable`; a Move's once checked against its target's alsoKnownAs."""
        forward = forwarding_for(activity, self.urls) if forwardable else None
        effects = effects_for(
            activity,
            self.urls,
            _auto_accept(activity, self.urls, admission.auto_accept),
            await _follower_inboxes(self.directory, activity),
        ) + ([forward] if forward else [])
        if activity.type == "Move":  # checked against its target's alsoKnownAs first
            effects += await effects_of_move(
                activity, self.store.following, self.directory, self.urls, signer, timeout_s
            )
        return effects

    async def _after_storing(
        self,
        signed: InboundRequest,
        activity: Activity,
        authenticated: Authenticated,
        stored: str,
        signer: SigningIdentity,
        timeout_s: float,
    ) -> InboxAnswer:
        """Log what storing did; answer a relay's Follow and run a followers sync when asked."""
        if stored == "deleted":  # a Create or Update of an object its actor deleted lately
            log.info(
                "inbox %s %s from %s dropped: %s was deleted",
                activity.type,
                activity.id,
                activity.actor,
                created_object(activity),
            )
            return InboxAnswer.DELETED_OBJECT
        log.info("inbox %s %s from %s (%s)", activity.type, activity.id, activity.actor, stored)
        if stored == "new" and activity.type == "Follow" and relay_protocol(activity, self.urls):
            await answer_relay_follow(self.store.relays, self.accept_relay, activity)
        sync = signed.headers.get(SYNC_HEADER.lower())
        # Only the actor's own HTTP signature speaks for its followers collection.
        if sync and self.followers_sync is not None and authenticated.forwarded_by is None:
            await self.followers_sync.run(
                self.store, self.directory, self.urls, signer, activity.actor, sync, timeout_s
            )
        return InboxAnswer.ACCEPTED if stored == "new" else InboxAnswer.DUPLICATE

    async def _depart(self, activity: Activity) -> None:
        """A gone actor's self-Delete (`inbound.gone`): forget it, store nothing else."""
        reason = f"the recipient {activity.actor[:200]} was deleted (its {activity.type} arrived)"
        departure = await self.store.followers.depart(activity.actor, reason)
        log.info(
            "inbox %s %s from gone actor %s: %d follows removed, %d deliveries given up",
            activity.type,
            activity.id,
            activity.actor,
            departure.follows_removed,
            departure.deliveries_dead,
        )


def _tombstone(activity: Activity, settings: Settings) -> tuple[str, datetime] | None:
    """For a Create or Update: its object, and since when that object's deletion drops it."""
    subject = created_object(activity)
    if subject is None:
        return None
    return subject, utcnow() - timedelta(hours=settings.inbox_tombstone_hours)


def key_resolver(
    directory: RemoteDirectory,
    signer: SigningIdentity | None,
    timeout_s: float,
    gone: set[str] | None = None,
    unfetched: set[str] | None = None,
) -> KeyResolver:
    """Keys through the directory's signed, guarded, cached fetch; fetch failures become 401s.

    Every fetch through one resolver ends by one deadline, `timeout_s` from now: one budget
    for all of a request's keys, however many fetches (and re-fetches) they take. The ids of
    keys whose fetch answered 410 or 404 are added to `gone`, of all that failed to `unfetched`.
    """
    deadline = asyncio.get_running_loop().time() + timeout_s

    async def resolve(key_id: str, refresh: bool) -> KeyRecord:
        try:
            return await directory.key(key_id, signer, refresh=refresh, deadline=deadline)
        except FetchError as exc:
            if isinstance(exc, Gone) and gone is not None:
                gone.add(key_id)
            if unfetched is not None:
                unfetched.add(key_id)
            raise SignatureError(f"cannot use key {key_id}: {exc}") from None

    return resolve


def opaque(
    exc: SignatureError, key_ids: Sequence[str], unfetched: Collection[str], sender: str
) -> SignatureError:
    """The 401 a sender gets for a signature that did not verify: one fixed line per kind.

    The reason itself (what a key fetch met, the address guard's finding, whose key it was)
    goes to the log only: sent back, it would let anyone probe what this server can reach.
    """
    named = ", ".join(repr(key_id[:200]) for key_id in dict.fromkeys(key_ids))
    log.info("signature from %s with keyId %s refused: %s", sender[:100], named, exc)
    if isinstance(exc, NotAuthenticated):
        return SignatureError(FORWARD_UNAUTHENTICATED)
    if key_ids and all(key_id in unfetched for key_id in key_ids):
        return SignatureError(KEY_UNFETCHED)
    return SignatureError(NOT_VERIFIED)


def document_fetcher(
    directory: RemoteDirectory, signer: SigningIdentity, timeout_s: float
) -> DocumentFetcher:
    """Documents through the directory's signed, guarded fetch, all ended by one deadline."""
    deadline = asyncio.get_running_loop().time() + timeout_s

    async def fetch(url: str) -> dict[str, Any]:
        doc, _raw = await directory.fetch_json(url, signer, deadline=deadline)
        return doc

    return fetch


async def _recipients(actors: ActorStore, name: str | None, named: Mapping[str, bool]) -> set[str]:
    """The addressed local actors; on the shared inbox with none named, every local actor.

    `named` holds the local actors the activity (or the path) names. Only when it names none
    on the shared inbox are all local actors read: whom local actors follow is recorded only
    from Accepts (`storage.following`), which misses follows made before it was, so a
    followers-only post there is not narrowed down; it goes to all, not none.
    """
    recipients = set(sorted(named)[:MAX_NAMED_RECIPIENTS])
    if name is not None:
        recipients.add(name)
    elif not recipients:
        recipients = set(await actors.names())
    return recipients


def _auto_accept(activity: Activity, urls: Urls, named: Mapping[str, bool]) -> dict[str, bool]:
    """The followed local actor's auto-accept setting, if this is a Follow of a local actor."""
    if activity.type != "Follow":
        return {}
    target = activity.doc.get("object")
    target_uri = target.get("id") if isinstance(target, dict) else target
    name = urls.local_actor_name(target_uri) if isinstance(target_uri, str) else None
    if name is None or name not in named:
        return {}
    return {name: named[name]}


async def _follower_inboxes(directory: RemoteDirectory, activity: Activity) -> FollowerInboxes | None:
    if activity.type != "Follow":
        return None
    try:
        # Cached: the key fetch just fetched this actor (the key's owner is the actor).
        actor = await directory.actor(activity.actor, None)
    except FetchError as exc:
        log.warning("follow from %s not recorded: %s", activity.actor, exc)
        return None
    check_text("the follower's inbox", actor.inbox, URI_CHARS)
    if actor.shared_inbox is not None:
        check_text("the follower's sharedInbox", actor.shared_inbox, URI_CHARS)
    return FollowerInboxes(inbox=actor.inbox, shared_inbox=actor.shared_inbox)
