"""The console's relays page (issue 51 row 6): a relay followed from a form (its Follow sent to a
loopback relay), listed with its state, and unfollowed after asking (its Undo sent), audited."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from urllib.parse import quote, unquote

import httpx
import pytest
from aiohttp import web

from fedqueue.rules.states import RelayState
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.fediverse import RemoteActor
from tests.helpers import asgi_client
from tests.integration.web.test_dashboard import _login
from tests.loopback import LoopbackServer

WHO = "dashboard@127.0.0.1"
INBOX = "/users/relay/inbox"


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


def flash_of(response: httpx.Response) -> str:
    return unquote(response.headers["set-cookie"].split(";")[0])


async def test_a_relay_followed_in_the_console_is_listed_pending_then_unfollowed_after_asking(
    client: httpx.AsyncClient, store: Store, remote: LoopbackServer
) -> None:
    relay = RemoteActor(remote, name="relay").publish()
    remote.on("POST", INBOX, lambda _r: web.Response(status=202))
    headers, csrf = await _login(client)
    followed = await client.post(
        "/admin/ui/relays", data={"csrf": csrf, "uri": relay.uri, "next": "/admin/ui/relays"}, headers=headers
    )
    assert followed.status_code == 303
    assert "Following relay" in flash_of(followed)
    [sent] = remote.received("POST", INBOX)
    assert json.loads(sent.body)["type"] == "Follow"
    listed = await client.get("/admin/ui/relays", headers=headers)
    assert f'data-relay="{relay.uri}" data-state="{RelayState.PENDING}"' in listed.text
    [entry, *_] = await store.admin.audit_log()
    assert entry.who == WHO

    asked = await client.get(f"/admin/ui/relays/remove?uri={quote(relay.uri, safe='')}", headers=headers)
    assert asked.status_code == 200
    assert f'name="uri" value="{relay.uri}"' in asked.text
    assert [r.uri for r in await store.relays.all()] == [relay.uri]
    gone = await client.post(
        "/admin/ui/relays/remove",
        data={"csrf": csrf, "uri": relay.uri, "next": "/admin/ui/relays"},
        headers=headers,
    )
    assert "is unfollowed" in flash_of(gone)
    assert json.loads(remote.received("POST", INBOX)[-1].body)["type"] == "Undo"
    assert await store.relays.all() == []


async def test_a_relay_that_cannot_be_followed_or_is_unknown_says_why(
    client: httpx.AsyncClient, store: Store
) -> None:
    headers, csrf = await _login(client)
    empty = await client.post("/admin/ui/relays", data={"csrf": csrf, "uri": " "}, headers=headers)
    assert "Not done: name the relay" in flash_of(empty)
    bad = await client.post("/admin/ui/relays", data={"csrf": csrf, "uri": "not a url"}, headers=headers)
    assert "Not done:" in flash_of(bad)
    assert await store.relays.all() == []
    unknown = await client.get(
        "/admin/ui/relays/remove?uri=https%3A%2F%2Fnone.example%2Frelay", headers=headers
    )
    assert unknown.status_code == 404
