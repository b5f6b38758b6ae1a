"""Authenticate an inbound activity, also when another actor forwarded it (ActivityPub 7.1.2).

The HTTP signature must verify under its key, whoever owns that key: the request is genuinely
from someone. When the key is the activity's actor's own, that is all. Otherwise the activity
was forwarded, and it is accepted only if one of these holds, in order:

1. Its FEP-8b32 `eddsa-jcs-2022` proof verifies under an Ed25519 key its actor lists under
   `assertionMethod` (`inbound.proofs`): the body is stored as it came, with no JSON-LD work.
2. Its embedded `RsaSignature2017` Linked Data signature verifies under a key of the activity's
   actor (`ld_signatures`): the body is stored as it came. It is checked only within the
   bounds of `ld_verifier` (values, triples, steps, a deadline); past them, as if it had none.
3. Its object (a Create's or Update's, with an id on the actor's origin) re-fetched from that
   origin has the same id and is attributed to the actor: the activity is stored with the
   fetched copy as its object, never with the forwarded one.
4. For a Delete: its object (an id on the actor's origin, not the actor itself) fetched from
   that origin answers 410 or 404, as Mastodon checks: what it deletes is gone there.

Only activities authenticated by the actor's own key (HTTP or LD signature, or a proof) may be forwarded
again: a re-fetched copy is not what the actor signed, so it is stored but not passed on.

Whatever authenticated it, an activity embeds whole only objects its actor speaks for
(`origin_rules`: the object's id on the actor's origin, the actor its author). A Create's or
Update's other object is stored as its id only.

An Announce (a relay's, or anyone's) vouches only for itself, not for what it embeds, unless the
embedded object is the announcer's own. One from another origin is checked as a forwarded
activity is: an embedded activity by the same ways (its actor's proof or LD signature, else
its object re-fetched); an embedded object by its copy re-fetched from its own origin, which must
name only authors on that origin. One on the announcer's origin by another author, or one that
fails those checks, is stored as its id only, so nothing unverified is stored as another's word.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from fedqueue.inbound.proofs import ProofKeyResolver, proved_by
from fedqueue.rules.address_guard import Gone
from fedqueue.rules.errors import FedqueueError
from fedqueue.rules.inbox_acceptance import Activity, parse_activity, same_origin
from fedqueue.rules.origins import attributed_at_home, speaks_for, unvouched_object
from fedqueue.rules.signature_parsing import ParsedSignature
from fedqueue.rules.signing import data_integrity, ld_signatures
from fedqueue.rules.signing.requests import SignatureError
from fedqueue.rules.verification import KeyResolver, verify_signature

log = logging.getLogger("fedqueue.inbox")

#: url -> the JSON object served there; raises FedqueueError (e.g. FetchError) when it cannot be had.
DocumentFetcher = Callable[[str], Awaitable[dict[str, Any]]]
#: (activity, public key PEM) -> None, or Unusable / Forged: `ld_verifier.LdVerifier.verify`.
LdCheck = Callable[[Mapping[str, Any], str], Awaitable[None]]
#: Activities whose object is re-fetched when their LD signature cannot vouch for them.
REFETCHED_TYPES = ("Create", "Update")


class NotAuthenticated(SignatureError):
    """A forwarded activity whose sender verified but whose actor's word could not be had."""


@dataclass(frozen=True)
class Authenticated:
    """What to store: the activity (a re-fetched copy's, see above) and the key that vouches for it.

    `forwardable` is True when the actor's own key signed the body (HTTP or LD signature).
    `forwarded_by` is the HTTP signer's actor when it is not the activity's actor.
    `signed_with` is the key of the HTTP signature that verified (`key_id`'s unless forwarded).
    `vouched_by` says what vouched for a forwarded one (`proof_counts.FORWARDED_BY`).
    """

    activity: Activity
    key_id: str
    forwardable: bool
    forwarded_by: str | None = None
    signed_with: str | None = None
    vouched_by: str | None = None

    @property
    def verified_keys(self) -> tuple[str, ...]:
        """Every key a signature on the request verified with."""
        return tuple(dict.fromkeys((self.key_id, self.signed_with or self.key_id)))


async def authenticate(
    candidates: Sequence[ParsedSignature],
    resolve: KeyResolver,
    activity: Activity,
    fetch: DocumentFetcher,
    check_ld: LdCheck,
    proof_key: ProofKeyResolver,
    *,
    max_depth: int,
) -> Authenticated:
    """The activity as authenticated; SignatureError (401) with a one-line reason when it is not."""
    verdict = await verify_signature(candidates, resolve, None)
    others = [parsed for parsed in candidates if parsed.key_id != verdict.key_id]
    if verdict.owner != activity.actor and others:
        # Another signature may be the actor's own: it wins over a relayer's that passed first.
        with contextlib.suppress(SignatureError):
            verdict = await verify_signature(others, resolve, activity.actor)
    if verdict.owner == activity.actor:
        authenticated = Authenticated(activity, verdict.key_id, forwardable=True)
    else:
        try:
            vouched, ld_key_id, how = await _vouched(activity, resolve, fetch, check_ld, proof_key, max_depth)
        except NotAuthenticated as exc:
            raise NotAuthenticated(
                f"activity of {activity.actor} was forwarded by {verdict.owner} (key {verdict.key_id} belongs"
                f" to {verdict.owner}, not to the activity's actor) and could not be authenticated: {exc}"
            ) from None
        authenticated = Authenticated(
            vouched,
            ld_key_id or verdict.key_id,
            forwardable=ld_key_id is not None,
            forwarded_by=verdict.owner,
            signed_with=verdict.key_id if ld_key_id is not None else None,
            vouched_by=how,
        )
    return await _announced_checked(
        _own_object(authenticated, max_depth), resolve, fetch, check_ld, proof_key, max_depth
    )


def _own_object(authenticated: Authenticated, max_depth: int) -> Authenticated:
    """A Create or Update with an object its actor does not speak for, with that object's id instead."""
    activity = authenticated.activity
    object_id = unvouched_object(activity)
    if object_id is None:
        return authenticated
    log.info(
        "%s %s: the embedded %s is not %s's own: stored as its id only",
        activity.type,
        activity.id,
        object_id,
        activity.actor,
    )
    copy = with_object(activity, object_id, max_depth)
    return replace(authenticated, activity=copy, forwardable=False)


async def _vouched(
    activity: Activity,
    resolve: KeyResolver,
    fetch: DocumentFetcher,
    check_ld: LdCheck,
    proof_key: ProofKeyResolver,
    max_depth: int,
) -> tuple[Activity, str | None, str]:
    """The activity as its actor vouches for it, whoever delivered it, and what vouched for it: as
    it came with its proof's or LD signature's key id, else its re-fetched copy (or, a Delete, as
    it came) with None; NotAuthenticated with every reason."""
    reasons: list[str] = []
    try:
        return activity, await proved_by(activity, proof_key), "proof"
    except (data_integrity.Unusable, SignatureError) as exc:
        reasons.append(f"integrity proof: {exc}")
    try:
        return activity, await _ld_signed(activity, resolve, check_ld), "ld_signature"
    except (ld_signatures.Unusable, ld_signatures.Forged, SignatureError) as exc:
        reasons.append(f"Linked Data signature: {exc}")
    try:
        if activity.type == "Delete":
            return await _gone_at_origin(activity, fetch), None, "gone_at_origin"
        return await _refetched(activity, fetch, max_depth), None, "refetch"
    except FedqueueError as exc:
        reasons.append(f"re-fetch: {exc}")
    raise NotAuthenticated("; ".join(reasons))


async def _announced_checked(
    authenticated: Authenticated,
    resolve: KeyResolver,
    fetch: DocumentFetcher,
    check_ld: LdCheck,
    proof_key: ProofKeyResolver,
    max_depth: int,
) -> Authenticated:
    """An Announce whose embedded object is not the announcer's own, with that object as its
    origin vouches for it (see the module's docstring); any other activity as it is."""
    activity = authenticated.activity
    embedded = activity.doc.get("object")
    if activity.type != "Announce" or not isinstance(embedded, dict) or speaks_for(activity.actor, embedded):
        return authenticated
    object_id = embedded.get("id")
    try:
        if not isinstance(object_id, str):
            raise SignatureError("the embedded object has no id")
        if same_origin(object_id, activity.actor):  # its origin has spoken: the announcer's
            raise SignatureError(f"it is on {activity.actor}'s origin but by another author")
        if "actor" in embedded:
            inner = parse_activity(
                json.dumps(embedded).encode("utf-8"), max_depth=max_depth, anonymous_seed=activity.id
            )
            vouched, ld_key_id, _how = await _vouched(inner, resolve, fetch, check_ld, proof_key, max_depth)
            if ld_key_id is not None:
                return authenticated  # signed by its own actor: stored (and forwardable) as it came
            trusted: Any = vouched.doc
        else:
            trusted = await _fetched(object_id, fetch)
            if not attributed_at_home(trusted):
                raise SignatureError(f"{object_id} names an author on another origin")
    except FedqueueError as exc:
        log.info("Announce %s: the embedded %s is stored as its id only: %s", activity.id, object_id, exc)
        trusted = object_id
    copy = with_object(activity, trusted, max_depth)
    return replace(authenticated, activity=copy, forwardable=False)


async def _ld_signed(activity: Activity, resolve: KeyResolver, check_ld: LdCheck) -> str:
    """The LD signature's key id, when it verifies and the activity's actor owns the key."""
    signature = ld_signatures.signature_of(activity.doc)
    key = await resolve(signature.creator, False)
    if key.owner != activity.actor:
        raise SignatureError(f"key {signature.creator} belongs to {key.owner}, not to {activity.actor}")
    await check_ld(activity.doc, key.public_key_pem)  # bounded CPU work, off the event loop
    return signature.creator


def _object_id(activity: Activity) -> str:
    """The object to re-fetch: a Create's or Update's object id, on the actor's origin."""
    if activity.type not in REFETCHED_TYPES:
        only = ", ".join(REFETCHED_TYPES)
        raise SignatureError(f"a forwarded {activity.type} is not re-fetched (only {only})")
    target = activity.doc.get("object")
    object_id = target.get("id") if isinstance(target, dict) else target
    if not isinstance(object_id, str) or not same_origin(object_id, activity.actor):
        raise SignatureError("the object has no id on the actor's origin")
    return object_id


async def _fetched(object_id: str, fetch: DocumentFetcher) -> dict[str, Any]:
    """The document its origin serves at `object_id`, checked to have that id."""
    fetched = await fetch(object_id)
    if fetched.get("id") != object_id:
        raise SignatureError(f"{object_id} serves a document with another id")
    return fetched


async def _gone_at_origin(activity: Activity, fetch: DocumentFetcher) -> Activity:
    """A forwarded Delete as it came, when its object's own origin answers 410 or 404 for it."""
    target = activity.doc.get("object")
    object_id = target.get("id") if isinstance(target, dict) else target
    if not isinstance(object_id, str) or not same_origin(object_id, activity.actor):
        raise SignatureError("the object has no id on the actor's origin")
    if object_id == activity.actor:
        raise SignatureError("a forwarded Delete of its actor is not taken on its origin's word")
    try:
        await fetch(object_id)
    except Gone:
        return activity
    raise SignatureError(f"{object_id} is still served by its origin")


async def _refetched(activity: Activity, fetch: DocumentFetcher, max_depth: int) -> Activity:
    """The activity with its object replaced by the copy its origin serves, checked against the actor."""
    object_id = _object_id(activity)
    fetched = await _fetched(object_id, fetch)
    author = fetched.get("attributedTo")
    author_id = author.get("id") if isinstance(author, dict) else author
    if author_id != activity.actor:
        raise SignatureError(f"{object_id} is not attributed to {activity.actor}")
    return with_object(activity, fetched, max_depth)


def with_object(activity: Activity, target: Any, max_depth: int) -> Activity:
    """The activity with `target` as its object, less its LD signature (which no longer matches)."""
    doc = {**activity.doc, "object": target}
    doc.pop("signature", None)
    text = json.dumps(doc, ensure_ascii=False, separators=(",", ":"))
    # The same rules as any body (depth, ids on the actor's origin, storable text).
    copy = parse_activity(text.encode("utf-8"), max_depth=max_depth, anonymous_seed=activity.id)
    return replace(copy, id=activity.id)  # an activity without an id keeps its synthetic one
