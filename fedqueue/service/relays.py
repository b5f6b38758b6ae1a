"""Relays as admins follow and unfollow them (`fedqueue relay add|remove|list`): each action with
the HTTP client, key ring and remote directory it needs, made here and closed after it."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from fedqueue.outbound.relay_follows import add_relay, remove_relay
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient
from fedqueue.remote.keyring import Keyring
from fedqueue.rules.address_guard import with_private_hint
from fedqueue.rules.admin_views import Relay
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.urls import Urls

if TYPE_CHECKING:
    from fedqueue.settings import Settings
    from fedqueue.storage import Store


async def follow(
    store: Store, settings: Settings, uri: str, *, who: str, now: datetime | None = None
) -> Relay:
    """Follow the relay whose actor or inbox is `uri` (pending until it accepts); RelayRefused if
    its inbox does not take the Follow; InvalidInput if it cannot be used (with the
    FEDQUEUE_ALLOW_PRIVATE_ADDRESSES hint for a loopback or private address)."""
    http = HttpClient(settings)
    urls = Urls(settings.base_url)
    try:
        directory, keyring = RemoteDirectory(store, http), Keyring(store, urls)
        return await add_relay(
            store, directory, keyring, http, urls, uri, who=who, now=now or datetime.now(UTC)
        )
    except InvalidInput as exc:
        raise InvalidInput(with_private_hint(str(exc))) from None
    finally:
        await http.aclose()


async def unfollow(
    store: Store, settings: Settings, uri: str, *, who: str, now: datetime | None = None
) -> Relay:
    """Stop following the relay whose actor or inbox is `uri` and send the Undo; InvalidInput if
    it is not a relay here."""
    http = HttpClient(settings)
    urls = Urls(settings.base_url)
    try:
        keyring = Keyring(store, urls)
        return await remove_relay(store, keyring, http, urls, uri, who=who, now=now or datetime.now(UTC))
    finally:
        await http.aclose()


async def followed(store: Store) -> list[Relay]:
    """Every relay, with its state."""
    return await store.relays.all()
