"""Actor profiles (issue 50, item 1): PATCH /admin/actors/{name}, the document, WebFinger, the Update."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import select
from starlette.applications import Starlette

from fedqueue.rules.states import Lane, OutboxState
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import DeliveryRow, OutboxRow
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer
from tests.outbound import accept_all, add_follower, fast, run_burst, verify_delivery

BLOG = "http://127.0.0.1:8000/actors/blog"
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}
_outbox = OutboxRow.__table__  # type: ignore[attr-defined]
_deliveries = DeliveryRow.__table__  # type: ignore[attr-defined]

PROFILE: dict[str, Any] = {
    "name": "The Blog",
    "summary": '<p>Posts from <a href="https://blog.example/" rel="me">the blog</a></p>',
    "icon": "https://blog.example/avatar.png",
    "image": "https://blog.example/header.jpg",
    "url": "https://blog.example/",
    "type": "Service",
    "fields": [{"name": "Website", "value": '<a href="https://blog.example/">blog.example</a>'}],
    "discoverable": True,
    "indexable": True,
}


@pytest.fixture
def app(settings: Settings, store: Store) -> Starlette:
    return create_app(settings, store)


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(app) as opened:
        yield opened


def profile_updates(app: Starlette) -> dict[str, int]:
    """fedqueue_actor_profile_updates_total, by result."""
    return dict(app.state.metrics.profile_updates)


async def outbox_rows(store: Store) -> list[Any]:
    async with store.database.reading() as conn:
        return list(await conn.execute(select(_outbox).order_by(_outbox.c.id)))


def assert_has_the_profile(document: dict[str, Any]) -> None:
    """Every field of PROFILE, as an actor document carries it."""
    assert document["id"] == BLOG
    assert document["type"] == "Service"
    assert document["name"] == "The Blog"
    assert document["summary"] == PROFILE["summary"]
    assert document["icon"] == {"type": "Image", "url": "https://blog.example/avatar.png"}
    assert document["image"] == {"type": "Image", "url": "https://blog.example/header.jpg"}
    assert document["url"] == "https://blog.example/"
    assert document["attachment"] == [
        {
            "type": "PropertyValue",
            "name": "Website",
            "value": '<a href="https://blog.example/">blog.example</a>',
        }
    ]
    assert (document["discoverable"], document["indexable"]) == (True, True)
    assert document["published"].endswith("Z")


async def test_a_profile_set_through_the_admin_api_is_in_the_actor_document_and_webfinger(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("blog")
    bare = (await client.get("/actors/blog")).json()
    assert (bare["type"], bare["discoverable"]) == ("Person", False)
    assert "name" not in bare and "icon" not in bare

    answer = await client.patch("/admin/actors/blog", json=PROFILE, headers=ADMIN)

    assert answer.status_code == 200, answer.text
    assert answer.json()["profile"] == PROFILE
    assert_has_the_profile((await client.get("/actors/blog")).json())
    finger = (
        await client.get("/.well-known/webfinger", params={"resource": "acct:blog@127.0.0.1:8000"})
    ).json()
    assert finger["aliases"] == [BLOG, "https://blog.example/"]
    assert {
        "rel": "http://webfinger.net/rel/profile-page",
        "type": "text/html",
        "href": "https://blog.example/",
    } in (finger["links"])
    # Only what is given changes; an empty value clears a field.
    again = await client.patch("/admin/actors/blog", json={"name": "", "fields": []}, headers=ADMIN)
    assert again.status_code == 200, again.text
    document = (await client.get("/actors/blog")).json()
    assert "name" not in document and "attachment" not in document
    assert document["summary"] == PROFILE["summary"]
    entry = (await client.get("/admin/audit", headers=ADMIN)).json()["items"][0]
    assert (entry["action"], entry["target"]) == ("actor_profile", "blog")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"icon": "javascript:alert(1)"}, "profile field 'icon' must be an http(s) URL"),
        ({"url": "https://blog.example/ x"}, "profile field 'url' must be an http(s) URL"),
        ({"type": "Robot"}, "profile field 'type' must be one of Person"),
        ({"name": "x" * 101}, "profile field 'name' is longer than 100 characters"),
        ({"name": "a\x00b"}, "contains a NUL character"),
        ({"summary": "x" * 5001}, "profile field 'summary' is longer than 5000 characters"),
        ({"fields": [{"name": str(n), "value": "v"} for n in range(17)]}, "at most 16 profile fields"),
        ({"fields": [{"name": "a", "value": "b", "extra": 1}]}, "exactly 'name' and 'value'"),
        ({"fields": [{"name": "", "value": "b"}]}, "profile field 1 needs a name"),
        ({"fields": "Website=x"}, "must be a list"),
        ({"discoverable": "yes"}, "must be true or false"),
        ({"name": 7}, "must be a string or null"),
        ({"avatar": "https://x.example/a.png"}, "unknown field 'avatar'"),
        ({}, "nothing to change"),
    ],
)
async def test_a_bad_profile_change_is_a_one_line_400_and_changes_nothing(
    app: Starlette, client: httpx.AsyncClient, store: Store, body: dict[str, Any], reason: str
) -> None:
    await store.actors.create("blog")
    await add_follower(store, "blog", "https://f.example/users/f", "https://f.example/inbox")
    # Beside a good field: nothing of the change is kept.
    answer = await client.patch(
        "/admin/actors/blog", json={"name": "Kept", **body} if body else {}, headers=ADMIN
    )

    assert answer.status_code == 400
    assert reason in answer.json()["error"]
    assert "\n" not in answer.json()["error"]
    assert "name" not in (await client.get("/actors/blog")).json()
    assert await outbox_rows(store) == []
    assert profile_updates(app) == {"refused": 1}


async def test_a_profile_change_of_an_unknown_or_deleted_actor_is_404_or_410(
    client: httpx.AsyncClient, store: Store
) -> None:
    assert (await client.patch("/admin/actors/nobody", json=PROFILE, headers=ADMIN)).status_code == 404
    await store.actors.create("blog")
    assert (await client.delete("/admin/actors/blog", headers=ADMIN)).status_code == 200
    assert (await client.patch("/admin/actors/blog", json=PROFILE, headers=ADMIN)).status_code == 410


async def test_hostile_summary_html_is_cut_to_what_mastodon_keeps(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("blog")
    summary = (
        '<p onclick="steal()">hi<script>alert(1)</script><img src=x onerror=alert(1)>'
        '<a href="javascript:alert(1)" style="x">link</a></p>'
    )
    answer = await client.patch("/admin/actors/blog", json={"summary": summary}, headers=ADMIN)

    assert answer.status_code == 200, answer.text
    assert (await client.get("/actors/blog")).json()["summary"] == "<p>hi<a>link</a></p>"


async def test_ten_profile_edits_in_the_delay_reach_a_follower_as_one_update_with_the_latest_document(
    app: Starlette, client: httpx.AsyncClient, settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    created = await store.actors.create("blog")
    # Two followers on one server share an inbox: one copy each Update.
    shared = remote.url("/inbox")
    await add_follower(store, "blog", remote.url("/users/f0"), remote.url("/users/f0/inbox"), shared)
    await add_follower(store, "blog", remote.url("/users/f1"), remote.url("/users/f1/inbox"), shared)
    accept_all(remote, ["/inbox"])

    for n in range(10):
        answer = await client.patch(
            "/admin/actors/blog", json={**PROFILE, "name": f"Edit {n}"}, headers=ADMIN
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["update_inboxes"] == 1

    [row] = await outbox_rows(store)
    assert (row.state, row.activity_type, row.object_id) == (OutboxState.EXPANDING, "Update", BLOG)
    # Not sent before its time: a worker now finds nothing due.
    await run_burst(fast(settings), store)
    assert remote.requests == []

    later = utcnow() + timedelta(seconds=settings.actor_update_delay_seconds + 1)
    await run_burst(fast(settings), store, clock=lambda: later)

    [post] = [r for r in remote.requests if r.method == "POST"]
    update = verify_delivery(remote, post, BLOG, created.actor.public_key_pem)
    assert (update["type"], update["actor"]) == ("Update", BLOG)
    assert update["object"]["name"] == "Edit 9"
    assert_has_the_profile({**update["object"], "name": "The Blog"})
    async with store.database.reading() as conn:
        lanes = list((await conn.execute(select(_deliveries.c.lane))).scalars())
    assert lanes == [Lane.BULK]
    assert profile_updates(app) == {"queued": 1, "merged": 9}


async def test_an_edit_after_the_update_was_sent_queues_another(
    client: httpx.AsyncClient, settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("blog")
    await add_follower(store, "blog", remote.url("/users/f0"), remote.url("/f0"))
    accept_all(remote, ["/f0"])
    later = utcnow() + timedelta(seconds=settings.actor_update_delay_seconds + 1)
    for name in ("First", "Second"):
        assert (
            await client.patch("/admin/actors/blog", json={"name": name}, headers=ADMIN)
        ).status_code == 200
        await run_burst(fast(settings), store, clock=lambda: later)

    names = [json.loads(r.body)["object"]["name"] for r in remote.requests if r.method == "POST"]
    assert names == ["First", "Second"]


async def test_a_profile_edit_with_no_one_to_tell_queues_nothing(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("blog")
    answer = await client.patch("/admin/actors/blog", json=PROFILE, headers=ADMIN)

    assert answer.json()["update_inboxes"] == 0
    assert await outbox_rows(store) == []


async def test_deleting_an_actor_cancels_its_waiting_profile_update(
    client: httpx.AsyncClient, settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("blog")
    await add_follower(store, "blog", remote.url("/users/f0"), remote.url("/f0"))
    accept_all(remote, ["/f0"])
    assert (await client.patch("/admin/actors/blog", json=PROFILE, headers=ADMIN)).status_code == 200
    assert (await client.delete("/admin/actors/blog", headers=ADMIN)).status_code == 200

    later = utcnow() + timedelta(seconds=settings.actor_update_delay_seconds + 1)
    await run_burst(fast(settings), store, clock=lambda: later)

    sent = [json.loads(r.body)["type"] for r in remote.requests if r.method == "POST"]
    assert sent == ["Delete"]
    update, _delete = await outbox_rows(store)
    assert update.state == OutboxState.REJECTED


async def test_a_profile_body_nested_too_deep_is_a_400_not_a_500(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("blog")
    deep = b'{"fields":' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    answer = await client.patch(
        "/admin/actors/blog", content=deep, headers={**ADMIN, "content-type": "application/json"}
    )

    assert answer.status_code == 400
    assert answer.json()["error"] == "the body must be a JSON object"
