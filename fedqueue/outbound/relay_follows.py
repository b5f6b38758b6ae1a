"""Following a relay (FEP-ae0c, Mastodon's `relay.rb`): the instance actor's Follow of `as:Public`.

A relay is added by its actor URI or by its inbox (what Mastodon admins paste), and recorded by
its actor's id either way, since its Accept names that actor (`resolve_relay`). The Follow (and
the Undo of it) is POSTed at once, signed by the instance actor, to the relay's inbox; the relay
is recorded `pending` first, so its Accept, however fast, finds it (`inbound.receive` records it
`accepted`), and forgotten again if the POST is refused. Public activities then also go to the
relay's inbox (`outbound.fanout`).
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from fedqueue.outbound.send import post, prepare_body
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient, SigningIdentity
from fedqueue.remote.keyring import Keyring
from fedqueue.rules.activitystreams import AS_CONTEXT
from fedqueue.rules.address_guard import FetchError
from fedqueue.rules.addressing import is_public
from fedqueue.rules.admin_views import Relay
from fedqueue.rules.bounded_memory import RemoteActor
from fedqueue.rules.errors import FedqueueError, InvalidInput
from fedqueue.rules.states import RelayState
from fedqueue.rules.urls import Urls
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow

#: The object of a relay Follow, as Mastodon sends it.
PUBLIC = "https://www.w3.org/ns/activitystreams#Public"


class RelayRefused(FedqueueError):
    """The relay's inbox did not take the Follow (or its Undo): the reason in one line."""


def relay_follow(urls: Urls, relay_uri: str, token: str) -> dict[str, object]:
    """The instance actor's Follow of the public collection, addressed to the relay (pure)."""
    return {
        "@context": AS_CONTEXT,
        "id": f"{urls.instance_actor()}/relay-follows/{token}",
        "type": "Follow",
        "actor": urls.instance_actor(),
        "object": PUBLIC,
        "to": [relay_uri],
    }


async def resolve_relay(directory: RemoteDirectory, signer: SigningIdentity, uri: str) -> RemoteActor:
    """The relay actor `uri` names: the actor it answers with, else (a LitePub relay's inbox, which
    answers no GET) `/actor` on its origin, if that actor's inbox or shared inbox is `uri`.

    InvalidInput, one line, for anything else: a relay is recorded by whose Accept it awaits.
    """
    try:
        return await directory.actor(uri, signer)
    except FetchError as exc:
        refusal = f"relay {uri} cannot be used: {exc}"
    parts = urlsplit(uri)
    litepub_actor = f"{parts.scheme}://{parts.netloc}/actor"
    if litepub_actor == uri:
        raise InvalidInput(refusal)
    try:
        actor = await directory.actor(litepub_actor, signer)
    except FetchError:
        raise InvalidInput(refusal) from None
    if uri not in (actor.inbox, actor.shared_inbox):
        raise InvalidInput(f"{refusal}; nor is it the inbox of the relay actor {actor.uri}")
    return actor


async def add_relay(
    store: Store,
    directory: RemoteDirectory,
    keyring: Keyring,
    http: HttpClient,
    urls: Urls,
    uri: str,
    *,
    who: str,
    now: datetime,
) -> Relay:
    """Follow the relay whose actor or inbox is `uri`: record it `pending` by its actor's id, then
    POST the Follow; if that is not taken, forget the relay again and raise RelayRefused."""
    actor = await resolve_relay(directory, await keyring.instance(), uri)
    follow = relay_follow(urls, actor.uri, secrets.token_urlsafe(12))
    relay = Relay(actor.uri, actor.inbox, str(follow["id"]), RelayState.PENDING, now, None)
    await store.relays.add(relay, who=who)
    try:
        await _send(http, relay.inbox, follow, keyring, now)
    except RelayRefused as exc:
        await store.relays.withdraw(relay, str(exc), who=who, now=now)
        raise
    return relay


async def remove_relay(
    store: Store, keyring: Keyring, http: HttpClient, urls: Urls, uri: str, *, who: str, now: datetime
) -> Relay:
    """Stop following the relay whose actor or inbox is `uri`: forget it (nothing more goes to it),
    then POST the Undo of the Follow."""
    relay = await store.relays.remove(uri, who=who, now=now)
    if relay is None:
        raise InvalidInput(f"{uri} is not a relay here (fedqueue relay list)")
    follow = relay_follow(urls, relay.uri, "")
    follow["id"] = relay.follow_activity_id
    undo: dict[str, object] = {
        "@context": AS_CONTEXT,
        "id": f"{relay.follow_activity_id}/undo",
        "type": "Undo",
        "actor": urls.instance_actor(),
        "object": {k: v for k, v in follow.items() if k != "@context"},
        "to": [relay.uri],
    }
    await _send(http, relay.inbox, undo, keyring, now)
    return relay


def relay_accept(urls: Urls, follow: dict[str, Any], token: str) -> dict[str, object]:
    """The instance actor's Accept of a relay's Follow of it, addressed to the relay (pure)."""
    return {
        "@context": AS_CONTEXT,
        "id": f"{urls.instance_actor()}/relay-accepts/{token}",
        "type": "Accept",
        "actor": urls.instance_actor(),
        "object": {key: value for key, value in follow.items() if key not in ("@context", "signature")},
        "to": [follow["actor"]],
    }


async def accept_relay_follow(
    http: HttpClient, keyring: Keyring, urls: Urls, inbox: str, follow: dict[str, Any]
) -> None:
    """POST the instance actor's Accept of a relay's Follow of it to the relay's `inbox`; RelayRefused
    if it is not taken."""
    accept = relay_accept(urls, follow, secrets.token_urlsafe(12))
    await _send(http, inbox, accept, keyring, utcnow())


async def relays_reached(store: Store, activity: dict[str, Any]) -> int:
    """How many relays an activity from the outbox also goes to: every accepted one if it is public."""
    return len(await store.relays.accepted_inboxes()) if is_public(activity) else 0


async def _send(
    http: HttpClient, inbox: str, activity: dict[str, object], keyring: Keyring, now: datetime
) -> None:
    attempt = await post(http, inbox, prepare_body(json.dumps(activity)), await keyring.instance(), now)
    if attempt.status is None or not 200 <= attempt.status < 300:
        raise RelayRefused(f"{activity['type']} to {inbox} not taken: {attempt.error or attempt.status}")
