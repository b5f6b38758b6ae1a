"""Following a relay (FEP-ae0c, Mastodon's `relay.rb`): the instance actor's Follow of `as:Public`.

The Follow (and the Undo of it) is POSTed at once, signed by the instance actor, to the relay's
inbox; the relay is recorded `pending` first, so its Accept, however fast, finds it
(`inbound.receive` records it `accepted`). Public activities then also go to the relay's inbox
(`outbound.fanout`).
"""

from __future__ import annotations

import json
import secrets
from datetime import datetime

from fedqueue.activitystreams import AS_CONTEXT
from fedqueue.errors import FedqueueError, InvalidInput
from fedqueue.outbound.send import post, prepare_body
from fedqueue.remote.client import HttpClient
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.guard import FetchError
from fedqueue.remote.keyring import Keyring
from fedqueue.storage import Relay, Store
from fedqueue.storage.relays import PENDING
from fedqueue.urls import Urls

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
    """Follow the relay at `uri`: record it `pending`, then POST the Follow; RelayRefused if not taken."""
    signer = await keyring.instance()
    try:
        actor = await directory.actor(uri, signer)
    except FetchError as exc:
        raise InvalidInput(f"relay {uri} cannot be used: {exc}") from None
    follow = relay_follow(urls, uri, secrets.token_urlsafe(12))
    relay = Relay(uri, actor.inbox, str(follow["id"]), PENDING, now, None)
    await store.relays.add(relay, who=who)
    await _send(http, relay.inbox, follow, keyring, now)
    return relay


async def remove_relay(
    store: Store, keyring: Keyring, http: HttpClient, urls: Urls, uri: str, *, who: str, now: datetime
) -> Relay:
    """Stop following the relay: forget it (nothing more goes to it), then POST the Undo of the Follow."""
    relay = await store.relays.remove(uri, who=who, now=now)
    if relay is None:
        raise InvalidInput(f"{uri} is not a relay here (fedqueue relay list)")
    follow = relay_follow(urls, uri, "")
    follow["id"] = relay.follow_activity_id
    undo: dict[str, object] = {
        "@context": AS_CONTEXT,
        "id": f"{relay.follow_activity_id}/undo",
        "type": "Undo",
        "actor": urls.instance_actor(),
        "object": {k: v for k, v in follow.items() if k != "@context"},
        "to": [uri],
    }
    await _send(http, relay.inbox, undo, keyring, now)
    return relay


async def _send(
    http: HttpClient, inbox: str, activity: dict[str, object], keyring: Keyring, now: datetime
) -> None:
    attempt = await post(http, inbox, prepare_body(json.dumps(activity)), await keyring.instance(), now)
    if attempt.status is None or not 200 <= attempt.status < 300:
        raise RelayRefused(f"{activity['type']} to {inbox} not taken: {attempt.error or attempt.status}")
