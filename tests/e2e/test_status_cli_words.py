"""`fedqueue status` lists each delivery once, and says what it counts: recipients (actors) and inboxes."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web

from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.e2e.test_cli import run_fedqueue
from tests.loopback import LoopbackServer
from tests.outbound import add_follower, fast, insert_outbox_row, run_burst

PUBLIC = "https://www.w3.org/ns/activitystreams#Public"


async def test_a_failing_delivery_is_listed_once_with_its_reason_and_its_backoff(
    settings: Settings, store: Store, remote: LoopbackServer, tmp_path: Path
) -> None:
    await store.actors.create("alice")
    shared = remote.url("/shared")
    for n in range(3):
        await add_follower(store, "alice", remote.url(f"/users/{n}"), remote.url(f"/users/{n}/inbox"), shared)
    remote.on("POST", "/shared", lambda _r: web.Response(status=503, text="busy"))
    outbox_id = await insert_outbox_row(
        store,
        "alice",
        {
            "type": "Create",
            "to": [PUBLIC],
            "cc": ["http://127.0.0.1:8000/actors/alice/followers"],
            "object": {"type": "Note", "content": "hello"},
        },
    )
    # One attempt, then a backoff far beyond the burst: the delivery stays failed and waiting.
    await run_burst(fast(settings, retry_base_seconds=3600, retry_cap_seconds=7200), store)

    shown = await asyncio.to_thread(
        run_fedqueue,
        "status",
        str(outbox_id),
        cwd=tmp_path,
        env={"FEDQUEUE_DATABASE_URL": settings.database_url},
    )

    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    note = "(one delivery per inbox: followers behind one shared inbox are one)"
    assert f"to        3 recipients, 1 inbox {note}" in lines
    rows = [line for line in lines if shared in line]
    assert len(rows) == 1, shown.stdout
    assert "failed" in rows[0] and "HTTP 503" in rows[0] and "backoff until" in rows[0]
    assert "waiting:" not in lines
