"""`GET /`: what a browser opening the server's address is told."""

from __future__ import annotations

import httpx

from fedqueue import __version__
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.helpers import asgi_client


async def test_the_servers_address_says_what_it_is_its_version_and_where_the_console_and_nodeinfo_are(
    settings: Settings, store: Store
) -> None:
    async with asgi_client(create_app(settings, store)) as client:
        page = await client.get("/")
        named = await asgi_get(settings.model_copy(update={"node_name": "Blog of <b>Bob</b>"}), store)
    assert page.status_code == 200
    assert page.headers["content-type"].startswith("text/html")
    assert f"fedqueue <strong>{__version__}</strong>" in page.text
    assert "ActivityPub delivery service" in page.text
    for link in ('href="/admin/"', 'href="/nodeinfo/2.1"', 'href="/healthz"'):
        assert link in page.text
    assert "<h1>127.0.0.1:8000</h1>" in page.text  # no node name: the server's address
    assert "<h1>Blog of &lt;b&gt;Bob&lt;/b&gt;</h1>" in named.text  # escaped, never markup


async def asgi_get(settings: Settings, store: Store) -> httpx.Response:
    async with asgi_client(create_app(settings, store)) as client:
        return await client.get("/")
