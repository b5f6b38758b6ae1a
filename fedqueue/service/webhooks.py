"""Webhooks as admins add them, from the admin API and the CLI alike: every input checked, the
URL through the address guard (its host name resolved as a send would resolve it, so a name of a
loopback or private address is refused now, not at the first event), a secret made unless given;
and the JSON both edges print.

Storage writes what this has checked (`WebhookStore.insert`); its events are queued by
`storage.webhook_events`, inside the transaction of the change they report.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import NotRequired
from urllib.parse import urlsplit

from pydantic import with_config
from typing_extensions import TypedDict

from fedqueue.remote.resolver import GuardedResolver
from fedqueue.rules import webhook_payloads as rules
from fedqueue.rules.address_guard import FetchError, ForbiddenAddress, check_url
from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.wire_fields import IsoTime, iso
from fedqueue.service.admin_json import SHAPE
from fedqueue.storage import Store
from fedqueue.storage.webhook_registry import Webhook

#: How long adding a webhook waits for its host name to resolve; past it, or if the name does not
#: resolve, the webhook is added and its deliveries check the name again (it may not be up yet).
RESOLVE_TIMEOUT_S = 5.0


@with_config(SHAPE)
class WebhookJson(TypedDict):
    id: int
    actor: str
    consumer: str
    url: str
    events: list[str]
    allow_private: bool
    created_at: IsoTime | None
    #: Events dropped unsent, oldest first, while more than `retention_webhook_backlog` waited.
    dropped_events: int
    #: Only in the answer to the POST that adds it.
    secret: NotRequired[str]


@with_config(SHAPE)
class WebhookList(TypedDict):
    items: list[WebhookJson]


def webhook_json(item: Webhook) -> WebhookJson:
    """A webhook as the admin API and the CLI print it (never with its secret)."""
    return {
        "id": item.id,
        "actor": item.actor,
        "consumer": item.consumer,
        "url": item.url,
        "events": list(item.events),
        "allow_private": item.allow_private,
        "created_at": iso(item.created_at),
        "dropped_events": item.dropped_events,
    }


async def add(
    store: Store,
    actor: str,
    consumer: str,
    url: str,
    *,
    secret: str | None = None,
    events: Sequence[str] = (),
    allow_private: bool = False,
    server_allows_private: bool = False,
    who: str,
) -> tuple[Webhook, str]:
    """A webhook for one consumer of `actor`'s inbox, and its secret (generated unless given).

    `allow_private`: its URL (only its) may be a loopback or private address, stored with it;
    `server_allows_private`: FEDQUEUE_ALLOW_PRIVATE_ADDRESSES, which allows it for everything.
    Every input is checked first (InvalidInput naming it); Duplicate if that consumer has a
    webhook already, NotFound if `actor` is no local actor. The action is audited.
    """
    check_actor_name(actor)
    rules.check_consumer(consumer)
    rules.check_webhook_url(url)
    try:
        check_url(url, allow_private=allow_private or server_allows_private)
        if not (allow_private or server_allows_private):
            await _check_resolved(url)
    except ForbiddenAddress as exc:
        raise InvalidInput(f"webhook url refused: {exc}; {rules.PRIVATE_HINT}") from None
    except FetchError as exc:
        raise InvalidInput(f"webhook url refused: {exc}") from None
    secret = rules.check_secret(secret) if secret is not None else rules.new_secret()
    subscribed = rules.check_events(events)
    hook = await store.webhooks.insert(
        actor, consumer, url, secret=secret, events=subscribed, allow_private=allow_private, who=who
    )
    return hook, secret


async def listed(store: Store, actor: str | None = None) -> list[Webhook]:
    """The webhooks (of `actor`'s consumers, or every one)."""
    return await store.webhooks.list(actor)


async def remove(store: Store, webhook_id: int, *, who: str) -> Webhook:
    """Remove one webhook (its queued events go with it); NotFound if there is none. Audited."""
    return await store.webhooks.remove(webhook_id, who=who)


async def _check_resolved(url: str) -> None:
    """ForbiddenAddress if the URL's host name resolves only to loopback or private addresses."""
    parts = urlsplit(url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        await asyncio.wait_for(
            GuardedResolver(allow_private=False).resolve(parts.hostname or "", port), RESOLVE_TIMEOUT_S
        )
    except ForbiddenAddress:
        raise
    except (OSError, TimeoutError):
        return  # no answer now (the consumer may not be up yet): each delivery resolves it again
