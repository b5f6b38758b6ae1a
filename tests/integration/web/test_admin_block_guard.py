"""Blocks through the admin API: a block must name a host, a whole top-level domain or public
suffix needs `confirm_tld=true`, and a block made again says which reason it replaced."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from starlette.applications import Starlette

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client

AUTH = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    app: Starlette = create_app(settings, store)
    async with asgi_client(app) as opened:
        yield opened


@pytest.mark.parametrize("pattern", ["%2E", "%2E%2E", "%20", ".com", "com.", "%2A.spam.example"])
async def test_a_block_that_names_no_host_is_a_one_line_400_and_blocks_nothing(
    client: httpx.AsyncClient, store: Store, pattern: str
) -> None:
    refused = await client.post(f"/admin/hosts/{pattern}/block", headers=AUTH)

    assert refused.status_code == 400
    assert "\n" not in refused.json()["error"]
    assert await store.blocks.current() == {}


@pytest.mark.parametrize("pattern", ["com", "co.uk", "localhost"])
async def test_a_tld_wide_block_needs_confirm_tld(
    client: httpx.AsyncClient, store: Store, pattern: str
) -> None:
    unconfirmed = await client.post(f"/admin/hosts/{pattern}/block", headers=AUTH)
    assert unconfirmed.status_code == 400
    assert "confirm_tld=true" in unconfirmed.json()["error"]
    assert await store.blocks.current() == {}

    confirmed = await client.post(f"/admin/hosts/{pattern}/block?confirm_tld=true", headers=AUTH)

    assert (confirmed.status_code, confirmed.json()["blocked"]) == (200, True)
    assert pattern in await store.blocks.current()


async def test_a_block_of_one_domain_needs_no_confirmation(client: httpx.AsyncClient) -> None:
    blocked = await client.post("/admin/hosts/spam.example/block?reason=spam%20waves", headers=AUTH)

    assert blocked.status_code == 200, blocked.text
    assert (blocked.json()["block_reason"], "reason_replaced" in blocked.json()) == ("spam waves", False)


async def test_blocking_again_with_another_reason_says_which_reason_it_replaced(
    client: httpx.AsyncClient,
) -> None:
    await client.post("/admin/hosts/spam.example/block?reason=spam", headers=AUTH)

    again = (await client.post("/admin/hosts/spam.example/block?reason=harassment", headers=AUTH)).json()
    same = (await client.post("/admin/hosts/spam.example/block?reason=harassment", headers=AUTH)).json()

    assert again["reason_replaced"] == {"old": "spam", "new": "harassment"}
    assert "reason_replaced" not in same


async def test_the_openapi_document_names_the_blocks_parameters(client: httpx.AsyncClient) -> None:
    document = (await client.get("/admin/openapi.json", headers=AUTH)).json()

    parameters = document["paths"]["/admin/hosts/{host}/block"]["post"]["parameters"]

    assert {"reason", "confirm_tld"} <= {p["name"] for p in parameters}
