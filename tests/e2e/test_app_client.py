"""`fedqueue.client` against a real `fedqueue serve`: post, page status, pull, verify webhooks."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
from aiohttp import web

from fedqueue.client import AsyncClient, Client, WebhookEvent, verify_webhook
from tests.fediverse import RemoteActor
from tests.live import ADMIN_TOKEN, live_instance
from tests.loopback import LoopbackServer


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout_s:g} s: {what}")
        await asyncio.sleep(0.2)


async def test_an_app_posts_pages_status_pulls_and_verifies_webhooks_through_the_client(
    tmp_path: Path, remote: LoopbackServer, bob: RemoteActor
) -> None:
    remote.on("POST", "/hook", lambda _r: web.Response(status=204))
    missing = [remote.url(f"/users/gone{i}") for i in range(3)]  # 404: three dead deliveries
    with live_instance(tmp_path, ADMIN_TOKEN) as live:
        async with AsyncClient(live.origin, ADMIN_TOKEN) as admin:
            alice = await admin.create_actor("alice")
            hook = await admin.add_webhook("alice", remote.url("/hook"), consumer="app", allow_private=True)
        assert hook.secret is not None
        async with AsyncClient(live.origin, alice.token) as app:
            posted = await app.post("alice", {"type": "Note", "content": "hello", "to": missing})

            async def complete() -> bool:
                return (await app.status(posted.status_url)).complete

            await eventually(complete, "the three deliveries end")
            pages = [page async for page in app.status_pages(posted.status_url, limit=1)]

            signed = bob.signed(
                "/actors/alice/inbox",
                bob.note_to("alice"),
                origin=live.origin,
                content_type="application/activity+json",
            )
            async with httpx.AsyncClient() as remote_server:  # fedqueue fetches bob's key meanwhile
                sent = await remote_server.post(
                    f"{live.origin}/actors/alice/inbox", content=signed[1], headers=signed[0]
                )
            assert sent.status_code == 202, sent.text
            first = await app.pull("alice", "reader")
            await app.ack("alice", "reader", first.next_cursor)
            after_ack = await app.pull("alice", "reader")

            def hooks() -> list[WebhookEvent]:
                return [
                    verify_webhook(hook.secret or "", r.headers, r.body)
                    for r in remote.received("POST", "/hook")
                ]

            async def both_events() -> bool:
                return {"inbox.new", "activity.complete"} <= {e.event for e in hooks()}

            await eventually(both_events, "the webhook POSTs an inbox.new and an activity.complete")
        with Client(live.origin, alice.token) as blocking:
            again = blocking.status(posted.status_url)

    assert [len(p.deliveries) for p in pages] == [1, 1, 1]
    assert {d.recipient for p in pages for d in p.deliveries} == set(missing)
    assert pages[0].counts == {"dead": 3} == again.counts
    assert [(i.type, i.actor) for i in first.items] == [("Create", bob.uri)]
    assert after_ack.items == []
    events = {e.event: e for e in hooks()}
    assert events["inbox.new"].data["id"] == first.items[0].id
    assert events["activity.complete"].data["id"] == pages[0].outbox_id
