"""The console's blocks page (issue 51 row 6): the federation mode and allowlist shown, blocks
listed with their reasons, added (a TLD-wide one asked about first, as the CLI and API do, and a
replaced reason said) and lifted, through service/admin_actions and audited."""

from __future__ import annotations

from collections.abc import AsyncIterator
from urllib.parse import unquote

import httpx
import pytest

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.helpers import asgi_client
from tests.integration.web.test_dashboard import _login

WHO = "dashboard@127.0.0.1"


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    allowlisted = settings.model_copy(
        update={"federation_mode": "allowlist", "federation_allowlist": "friends.example,pals.example"}
    )
    async with asgi_client(create_app(allowlisted, store)) as opened:
        yield opened


def flash_of(response: httpx.Response) -> str:
    return unquote(response.headers["set-cookie"].split(";")[0])


async def test_a_block_added_in_the_console_is_listed_with_its_reason_and_a_new_reason_is_said(
    client: httpx.AsyncClient, store: Store
) -> None:
    headers, csrf = await _login(client)
    page = await client.get("/admin/ui/blocks", headers=headers)
    assert "<strong>allowlist</strong>" in page.text
    assert "<code>friends.example</code>, <code>pals.example</code>" in page.text
    added = await client.post(
        "/admin/ui/blocks", data={"csrf": csrf, "domain": "spam.example", "reason": "spam"}, headers=headers
    )
    assert added.status_code == 303
    assert "spam.example and its subdomains are blocked" in flash_of(added)
    assert dict(await store.blocks.current()) == {"spam.example": "spam"}
    [entry, *_] = await store.admin.audit_log()
    assert (entry.who, entry.target) == (WHO, "host:spam.example")
    listed = await client.get("/admin/ui/blocks", headers=headers)
    row = listed.text[listed.text.index('data-block="spam.example"') :].split("</tr>")[0]
    assert 'data-label="reason">spam<' in row
    again = await client.post(
        "/admin/ui/blocks", data={"csrf": csrf, "domain": "spam.example", "reason": "ads"}, headers=headers
    )
    assert "Its reason was replaced: spam → ads." in flash_of(again)
    lifted = await client.post(
        "/admin/ui/blocks/unblock",
        data={"csrf": csrf, "domain": "spam.example", "next": "/admin/ui/blocks"},
        headers=headers,
    )
    assert "spam.example is unblocked" in flash_of(lifted)
    assert dict(await store.blocks.current()) == {}


async def test_a_tld_wide_block_is_asked_about_first_and_a_dot_is_refused(
    client: httpx.AsyncClient, store: Store
) -> None:
    headers, csrf = await _login(client)
    asked = await client.post(
        "/admin/ui/blocks", data={"csrf": csrf, "domain": "com", "reason": "x"}, headers=headers
    )
    assert asked.status_code == 200
    assert "Block every host under com?" in asked.text
    assert 'name="confirm_tld" value="true"' in asked.text
    assert dict(await store.blocks.current()) == {}
    confirmed = await client.post(
        "/admin/ui/blocks",
        data={"csrf": csrf, "domain": "com", "reason": "x", "confirm_tld": "true"},
        headers=headers,
    )
    assert confirmed.status_code == 303
    assert dict(await store.blocks.current()) == {"com": "x"}
    dot = await client.post("/admin/ui/blocks", data={"csrf": csrf, "domain": "."}, headers=headers)
    assert "Not done:" in flash_of(dot)
    forged = await client.post(
        "/admin/ui/blocks", data={"csrf": "forged", "domain": "a.example"}, headers=headers
    )
    assert forged.status_code == 401
