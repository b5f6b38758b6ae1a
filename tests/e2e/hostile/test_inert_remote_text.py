"""A peer's words reach no admin's terminal as commands: an inbox answering with escape sequences
(issue 52, row 5) leaves them neither in the database nor in what `fedqueue deliveries` and
`fedqueue status` print, and a row stored raw before the fix prints inert as well."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest
from aiohttp import web
from sqlalchemy import insert, update

from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.tables import DeliveryRow, OutboxRow
from tests.e2e.test_cli import run_fedqueue
from tests.live import ADMIN_TOKEN, live_instance
from tests.loopback import LoopbackServer
from tests.outbound import insert_outbox_row

pytestmark = pytest.mark.timeout(120)

#: Clear the screen, turn red, set the window title (OSC ... BEL), and a C1 CSI (U+009B).
HOSTILE = "\x1b[2J\x1b[31mgo away\x1b]0;PWNED\x07 \u009b31m\r\nbye\x7f"


def terminal_controls(text: str) -> list[str]:
    """The control characters in printed output, line breaks aside (ESC, BEL, C1, DEL, ...)."""
    return [c for c in text if (c < " " and c != "\n") or "\x7f" <= c <= "\x9f"]


def printed(database_url: str, cwd: Path, *args: str) -> str:
    """What `fedqueue ARGS` prints for a person (no --json), checked to have succeeded."""
    done = run_fedqueue(*args, cwd=cwd, env={"FEDQUEUE_DATABASE_URL": database_url})
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_an_inbox_answering_escape_sequences_prints_inert_in_deliveries_and_status(
    settings: Settings, store: Store, remote: LoopbackServer, tmp_path: Path
) -> None:
    await store.actors.create("alice")
    remote.on("POST", "/inbox", lambda _r: web.Response(status=400, text=HOSTILE))
    with live_instance(tmp_path, ADMIN_TOKEN, database_url=settings.database_url) as live:
        outbox_id = await insert_outbox_row(
            store, "alice", {"type": "Like", "object": "x"}, [remote.url("/inbox")]
        )
        for _ in range(300):
            status = await activity_status(store, Urls(live.origin), outbox_id)
            if status["counts"].get("dead") == 1:
                break
            await asyncio.sleep(0.1)
        assert status["counts"] == {"dead": 1}
    [stored] = (await store.admin.deliveries(state="dead")).items
    assert stored.last_error is not None and "PWNED" in stored.last_error
    assert terminal_controls(stored.last_error) == []
    for args in (("deliveries",), ("status", str(outbox_id))):
        out = printed(settings.database_url, tmp_path, *args)
        assert "HTTP 400" in out and "PWNED" in out, out
        assert terminal_controls(out) == [], out


async def test_a_row_stored_raw_before_the_fix_prints_inert(
    settings: Settings, store: Store, tmp_path: Path
) -> None:
    await store.actors.create("alice")
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, ["http://127.0.0.1:9/inbox"]
    )
    async with store.database.transaction() as conn:  # as a release before the fix stored them
        await conn.execute(
            update(OutboxRow.__table__).values(state="expanded", error=f"fetch failed: {HOSTILE}")  # type: ignore[attr-defined]
        )
        await conn.execute(
            insert(DeliveryRow.__table__).values(  # type: ignore[attr-defined]
                outbox_id=outbox_id,
                inbox="http://127.0.0.1:9/inbox",
                host="127.0.0.1:9",
                actor="alice",
                activity_type="Like",
                state="dead",
                attempts=1,
                next_attempt_at=datetime.now(UTC),
                last_status=400,
                last_error=f"HTTP 400: {HOSTILE}",
                last_error_detail=HOSTILE,
            )
        )
    for args in (("deliveries",), ("deliveries", "--state", "dead"), ("status", str(outbox_id))):
        out = printed(settings.database_url, tmp_path, *args)
        assert "PWNED" in out, out
        assert terminal_controls(out) == [], out
