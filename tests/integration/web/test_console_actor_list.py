"""The console's actor list (issue 51 row 6): actors paged by name, a new actor and a new token
shown once, lock and unlock, an actor's followers (removed) and pending follows approved or rejected,
each through service/ and audited as the logged-in admin."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from urllib.parse import unquote

import httpx
import pytest
from sqlalchemy import text

from fedqueue.rules.errors import NotFound
from fedqueue.rules.states import FollowerState
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web import console_actor_list
from fedqueue.web.app import create_app
from tests.helpers import asgi_client
from tests.integration.web.test_dashboard import _login
from tests.outbound import add_follower

WHO = "dashboard@127.0.0.1"


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


async def add_pending(store: Store, actor: str, uri: str) -> None:
    async with store.database.transaction() as conn:
        await conn.execute(
            text("INSERT INTO followers (actor, follower_uri, inbox, state) VALUES (:a, :u, :i, :s)"),
            {"a": actor, "u": uri, "i": uri + "/inbox", "s": FollowerState.PENDING},
        )


def shown_token(html: str) -> str:
    match = re.search(r'id="secret" type="text" readonly value="([^"]+)"', html)
    assert match, html
    return match.group(1)


async def test_the_actor_list_pages_by_name_with_followers_and_lock_state(
    client: httpx.AsyncClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console_actor_list, "ACTOR_PAGE", 2)
    for name in ("carol", "alice", "bob"):
        await store.actors.create(name)
    await add_follower(store, "alice", "https://r.example/u/1", "https://r.example/u/1/inbox")
    headers, _ = await _login(client)
    first = await client.get("/admin/ui/actors", headers=headers)
    assert first.status_code == 200
    assert re.findall(r'data-actor="(\w+)"', first.text) == ["alice", "bob"]
    assert 'aria-label="1 follower of alice"' in first.text
    assert 'href="/admin/ui/actors?cursor=bob"' in first.text
    second = await client.get("/admin/ui/actors?cursor=bob", headers=headers)
    assert re.findall(r'data-actor="(\w+)"', second.text) == ["carol"]
    assert 'id="next-page"' not in second.text
    bad = await client.get("/admin/ui/actors?cursor=Not%20A%20Name", headers=headers)
    assert bad.status_code == 400
    assert "invalid actor name" in bad.text


async def test_an_actor_created_in_the_console_shows_its_token_once_and_is_audited(
    client: httpx.AsyncClient, store: Store
) -> None:
    headers, csrf = await _login(client)
    forged = await client.post("/admin/ui/actors", data={"csrf": "forged", "name": "blog"}, headers=headers)
    assert forged.status_code == 401
    made = await client.post("/admin/ui/actors", data={"csrf": csrf, "name": "blog"}, headers=headers)
    assert made.status_code == 201
    assert made.headers["cache-control"] == "no-store"
    assert await store.actors.owner_of_token(shown_token(made.text)) == "blog"
    [entry, *_] = await store.admin.audit_log()
    assert (entry.who, entry.target) == (WHO, "actor:blog")
    again = await client.post("/admin/ui/actors", data={"csrf": csrf, "name": "blog"}, headers=headers)
    assert again.status_code == 303
    shown = await client.get(
        again.headers["location"], headers={**headers, "cookie": _with_flash(headers, again)}
    )
    assert "Not done:" in shown.text
    refused = await client.post("/admin/ui/actors", data={"csrf": csrf, "name": "Bad Name"}, headers=headers)
    assert refused.status_code == 303


def _with_flash(headers: dict[str, str], response: httpx.Response) -> str:
    flash = response.headers["set-cookie"].split(";")[0]
    return f"{headers['cookie']}; {flash}"


async def test_a_new_token_from_the_console_refuses_the_old_one_at_once(
    client: httpx.AsyncClient, store: Store
) -> None:
    old = (await store.actors.create("blog")).token
    headers, csrf = await _login(client)
    asked = await client.get("/admin/ui/actors/blog/token", headers=headers)
    assert asked.status_code == 200
    assert "is refused at once" in asked.text
    assert await store.actors.owner_of_token(old) == "blog"  # asking changes nothing
    made = await client.post("/admin/ui/actors/blog/token", data={"csrf": csrf}, headers=headers)
    assert made.status_code == 200
    new = shown_token(made.text)
    assert await store.actors.owner_of_token(new) == "blog"
    assert await store.actors.owner_of_token(old) is None
    [entry, *_] = await store.admin.audit_log()
    assert (entry.who, entry.target) == (WHO, "actor:blog")
    missing = await client.get("/admin/ui/actors/nobody/token", headers=headers)
    assert missing.status_code == 404


async def test_lock_then_approve_one_pending_follow_and_reject_another(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("blog")
    headers, csrf = await _login(client)
    back = "/admin/ui/actors"
    locked = await client.post(
        "/admin/ui/actors/blog/lock", data={"csrf": csrf, "next": back}, headers=headers
    )
    assert locked.status_code == 303
    assert not (await store.actors.get("blog")).auto_accept_follows
    listed = await client.get("/admin/ui/actors", headers=headers)
    assert 'aria-label="Unlock blog"' in listed.text
    yes, no = "https://r.example/u/yes", "https://r.example/u/no"
    await add_pending(store, "blog", yes)
    await add_pending(store, "blog", no)
    pending_path = f"/admin/ui/actors/blog/followers?state={FollowerState.PENDING}"
    pending = await client.get(pending_path, headers=headers)
    assert sorted(re.findall(r'data-follower="([^"]+)"', pending.text)) == [no, yes]
    base = "/admin/ui/actors/blog/followers"
    form = {"csrf": csrf, "next": pending_path}
    approved = await client.post(f"{base}/approve", data={**form, "follower": yes}, headers=headers)
    rejected = await client.post(f"{base}/reject", data={**form, "follower": no}, headers=headers)
    assert (approved.status_code, rejected.status_code) == (303, 303)
    assert approved.headers["location"] == pending_path
    assert (await store.followers.get("blog", yes)).state == FollowerState.ACCEPTED
    with pytest.raises(NotFound):
        await store.followers.get("blog", no)
    followers = await client.get(base, headers=headers)
    assert re.findall(r'data-follower="([^"]+)"', followers.text) == [yes]
    assert [e.who for e in (await store.admin.audit_log())[:3]] == [WHO] * 3
    twice = await client.post(f"{base}/approve", data={**form, "follower": yes}, headers=headers)
    assert "Not done:" in _flash_of(twice)
    await client.post("/admin/ui/actors/blog/unlock", data={"csrf": csrf, "next": back}, headers=headers)
    assert (await store.actors.get("blog")).auto_accept_follows


def _flash_of(response: httpx.Response) -> str:
    return unquote(response.headers["set-cookie"].split(";")[0])


async def test_followers_page_by_page_and_a_wrong_state_or_actor_says_so(
    client: httpx.AsyncClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console_actor_list, "FOLLOWER_PAGE", 1)
    await store.actors.create("blog")
    for n in (1, 2):
        await add_follower(store, "blog", f"https://r.example/u/{n}", f"https://r.example/u/{n}/inbox")
    headers, _ = await _login(client)
    first = await client.get("/admin/ui/actors/blog/followers", headers=headers)
    [one] = re.findall(r'data-follower="([^"]+)"', first.text)
    link = re.search(r'id="next-page" href="([^"]+)"', first.text)
    assert link
    second = await client.get(link.group(1).replace("&amp;", "&"), headers=headers)
    [two] = re.findall(r'data-follower="([^"]+)"', second.text)
    assert {one, two} == {"https://r.example/u/1", "https://r.example/u/2"}
    assert 'id="next-page"' not in second.text
    wrong = await client.get("/admin/ui/actors/blog/followers?state=asleep", headers=headers)
    assert wrong.status_code == 400
    assert "unknown follower state" in wrong.text
    assert (await client.get("/admin/ui/actors/nobody/followers", headers=headers)).status_code == 404


async def test_pending_follows_of_every_actor_are_on_one_page_approved_from_there(
    client: httpx.AsyncClient, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(console_actor_list, "FOLLOWER_PAGE", 2)
    for name in ("blog", "news"):
        await store.actors.create(name)
    await add_pending(store, "blog", "https://r.example/u/1")
    await add_pending(store, "news", "https://r.example/u/2")
    await add_pending(store, "news", "https://r.example/u/3")
    await add_follower(store, "blog", "https://r.example/u/9", "https://r.example/u/9/inbox")
    headers, csrf = await _login(client)
    first = await client.get("/admin/ui/follows", headers=headers)
    assert first.status_code == 200
    shown = re.findall(r'data-follower="([^"]+)" data-actor="(\w+)"', first.text)
    link = re.search(r'id="next-page" href="([^"]+)"', first.text)
    assert link
    more = re.findall(
        r'data-follower="([^"]+)" data-actor="(\w+)"', (await client.get(link.group(1), headers=headers)).text
    )
    assert sorted(shown + more) == [
        ("https://r.example/u/1", "blog"),
        ("https://r.example/u/2", "news"),
        ("https://r.example/u/3", "news"),
    ]
    form = {"csrf": csrf, "next": "/admin/ui/follows", "follower": "https://r.example/u/2"}
    approved = await client.post("/admin/ui/actors/news/followers/approve", data=form, headers=headers)
    assert approved.headers["location"] == "/admin/ui/follows"
    assert (await store.followers.get("news", "https://r.example/u/2")).state == FollowerState.ACCEPTED
    after = await client.get("/admin/ui/follows", headers=headers)
    assert "https://r.example/u/2" not in after.text
    assert "https://r.example/u/9" not in after.text


async def test_a_follower_removed_from_the_console_is_gone_and_audited_as_the_admin(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("blog")
    await add_follower(store, "blog", "https://r.example/u/9", "https://r.example/u/9/inbox")
    headers, csrf = await _login(client)
    page = await client.get("/admin/ui/actors/blog/followers", headers=headers)
    assert 'aria-label="Remove https://r.example/u/9 from the followers of blog' in page.text

    form = {"csrf": csrf, "next": "/admin/ui/actors/blog/followers", "follower": "https://r.example/u/9"}
    removed = await client.post("/admin/ui/actors/blog/followers/remove", data=form, headers=headers)

    assert removed.headers["location"] == "/admin/ui/actors/blog/followers"
    with pytest.raises(NotFound):
        await store.followers.get("blog", "https://r.example/u/9")
    after = await client.get("/admin/ui/actors/blog/followers", headers=headers)
    assert "No followers yet." in after.text
    [entry, *_] = await store.admin.audit_log()
    assert (entry.action, entry.who) == ("follower_remove", WHO)
