"""The console's actor page (issue 50, item 1): the profile in a form, saved as the PATCH saves it."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from starlette.applications import Starlette

from fedqueue.rules.states import OutboxState
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.helpers import asgi_client
from tests.integration.web.test_actor_profiles import (
    ADMIN,
    BLOG,
    PROFILE,
    assert_has_the_profile,
    outbox_rows,
)
from tests.integration.web.test_dashboard import _login
from tests.outbound import add_follower

#: PROFILE as the console's form posts it (an unchecked box is absent).
FORM: list[tuple[str, str]] = [
    *((field, PROFILE[field]) for field in ("name", "summary", "icon", "image", "url", "type")),
    ("field_name", "Website"),
    ("field_value", PROFILE["fields"][0]["value"]),
    *(pair for _ in range(4) for pair in (("field_name", ""), ("field_value", ""))),
    ("discoverable", "on"),
    ("indexable", "on"),
]


@pytest.fixture
def app(settings: Settings, store: Store) -> Starlette:
    return create_app(settings, store)


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(app) as opened:
        yield opened


async def post_form(
    client: httpx.AsyncClient, headers: dict[str, str], csrf: str | None, actor: str = "blog", **changes: str
) -> httpx.Response:
    """POST FORM with `changes` to `actor`'s page as a browser does, carrying `csrf` if given."""
    pairs = [(k, changes.get(k, v)) for k, v in FORM]
    body = urlencode([("csrf", csrf), *pairs] if csrf is not None else pairs)
    form_type = {"content-type": "application/x-www-form-urlencoded"}
    return await client.post(f"/admin/ui/actors/{actor}", content=body, headers={**headers, **form_type})


async def test_the_overview_links_each_local_actor_to_its_profile_page(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("blog")
    await store.actors.create("news")
    headers, _ = await _login(client)
    overview = await client.get("/admin/", headers=headers)
    assert '<a href="/admin/ui/actors/blog">blog</a>' in overview.text
    assert '<a href="/admin/ui/actors/news">news</a>' in overview.text

    page = await client.get("/admin/ui/actors/blog", headers=headers)
    assert page.status_code == 200
    assert 'id="profile"' in page.text
    assert 'name="field_name"' in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]


async def test_the_overview_lists_the_live_actors_as_the_actor_list_does_in_its_order(
    client: httpx.AsyncClient, store: Store
) -> None:
    for name in ("news", "blog", "gone", "arts"):
        await store.actors.create(name)
    assert (await client.delete("/admin/actors/gone", headers=ADMIN)).status_code == 200
    headers, _ = await _login(client)

    overview = (await client.get("/admin/", headers=headers)).text

    linked = re.findall(r'<a href="/admin/ui/actors/([^"]+)">', overview)
    listed = (await client.get("/admin/actors", headers=ADMIN)).json()["items"]
    assert linked == [a["name"] for a in listed if a["deleted"] is None] == ["arts", "blog", "news"]
    assert [a["name"] for a in listed if a["deleted"]] == ["gone"]


async def test_a_profile_saved_in_the_console_is_in_the_actor_document_and_queues_its_update(
    app: Starlette, client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("blog")
    await add_follower(store, "blog", "https://f.example/users/f", "https://f.example/inbox")
    headers, csrf = await _login(client)

    saved = await post_form(client, headers, csrf)

    assert saved.status_code == 303, saved.text
    assert saved.headers["location"] == "/admin/ui/actors/blog"
    assert_has_the_profile((await client.get("/actors/blog")).json())
    [row] = await outbox_rows(store)
    assert (row.state, row.activity_type, row.object_id) == (OutboxState.EXPANDING, "Update", BLOG)
    assert dict(app.state.metrics.profile_updates) == {"queued": 1}
    flash = saved.headers["set-cookie"].split(";")[0].split("=", 1)[1]
    page = await client.get(
        "/admin/ui/actors/blog", headers={**headers, "cookie": f"{headers['cookie']}; fedqueue_flash={flash}"}
    )
    assert "Profile of blog saved; its Update goes to 1 inbox in" in page.text
    # The form shows what is stored, escaped, with the box ticked.
    assert 'value="The Blog"' in page.text
    assert "&lt;p&gt;Posts from" in page.text
    assert '<option value="Service" selected>' in page.text
    assert 'name="discoverable" id="p-discoverable" checked' in page.text


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"icon": "javascript:alert(1)"}, "profile field &#39;icon&#39; must be an http(s) URL"),
        ({"type": "Robot"}, "profile field &#39;type&#39; must be one of Person"),
        ({"name": "x" * 101}, "profile field &#39;name&#39; is longer than 100 characters"),
    ],
)
async def test_a_bad_field_in_the_console_form_is_a_400_page_with_the_reason_and_changes_nothing(
    app: Starlette, client: httpx.AsyncClient, store: Store, changes: dict[str, str], reason: str
) -> None:
    await store.actors.create("blog")
    await add_follower(store, "blog", "https://f.example/users/f", "https://f.example/inbox")
    headers, csrf = await _login(client)

    page = await post_form(client, headers, csrf, **changes)

    assert page.status_code == 400
    [line] = re.findall(r'id="error-reason">Not saved: ([^<]*)</p>', page.text)
    assert reason in line
    # The form comes back as submitted, to be corrected.
    assert 'value="Website"' in page.text
    document: dict[str, Any] = (await client.get("/actors/blog")).json()
    assert "name" not in document and "attachment" not in document
    assert await outbox_rows(store) == []
    assert dict(app.state.metrics.profile_updates) == {"refused": 1}


@pytest.mark.parametrize("token", [None, "foreign"])
async def test_a_console_profile_post_without_the_sessions_csrf_token_is_refused(
    client: httpx.AsyncClient, store: Store, token: str | None
) -> None:
    await store.actors.create("blog")
    headers, csrf = await _login(client)
    if token == "foreign":  # another console's session: its token is not this one's
        _, token = await _login(client)
        assert token != csrf

    refused = await post_form(client, headers, token)

    assert refused.status_code == 401
    assert "CSRF" in refused.text
    assert "name" not in (await client.get("/actors/blog")).json()
    assert await outbox_rows(store) == []


async def test_the_console_page_of_an_unknown_or_deleted_actor_is_a_404_or_410_page(
    client: httpx.AsyncClient, store: Store
) -> None:
    headers, csrf = await _login(client)
    assert (await client.get("/admin/ui/actors/nobody", headers=headers)).status_code == 404
    posted = await post_form(client, headers, csrf, "nobody")
    assert posted.status_code == 404
    await store.actors.create("blog")
    assert (await client.delete("/admin/actors/blog", headers=ADMIN)).status_code == 200

    page = await client.get("/admin/ui/actors/blog", headers=headers)
    assert page.status_code == 200
    assert 'id="actor-deleted"' in page.text and 'id="profile"' not in page.text
    posted = await post_form(client, headers, csrf)
    assert posted.status_code == 410
