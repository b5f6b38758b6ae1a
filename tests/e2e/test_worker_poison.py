"""A real `fedqueue worker` process against poison documents: the bad ends bad, the good is delivered."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

from aiohttp import web

from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.e2e.test_worker_processes import start_worker
from tests.loopback import LoopbackServer
from tests.outbound import insert_outbox_row

URLS = Urls("http://127.0.0.1:8000")
FINAL_ROW_STATES = {"expanded", "rejected", "duplicate"}


def actor_doc(remote: LoopbackServer, name: str, inbox: str | None = None) -> dict[str, Any]:
    uri = remote.url(f"/users/{name}")
    return {"id": uri, "type": "Person", "inbox": inbox or f"{uri}/inbox"}


def serve_poison(remote: LoopbackServer) -> dict[str, str]:
    """A healthy actor and the poison ones on the loopback server; their URIs by name."""
    remote.serve_json("/users/good", actor_doc(remote, "good"))
    remote.on("POST", "/users/good/inbox", lambda _r: web.Response(status=202))
    # Valid JSON in UTF-16: json.loads accepts the bytes, decoding them as UTF-8 does not.
    utf16 = json.dumps(actor_doc(remote, "utf16")).encode("utf-16")
    remote.on(
        "GET", "/users/utf16", lambda _r: web.Response(body=utf16, content_type="application/activity+json")
    )
    nul = remote.url("/users/nul")
    remote.serve_json("/users/nul", actor_doc(remote, "nul", f"{nul}/in\u0000box"))
    return {
        "good": remote.url("/users/good"),
        "utf16": remote.url("/users/utf16"),
        "nul": nul,
        "octal": f"http://0177.0.0.1:{remote.port}/users/octal",
        "zeros": f"http://127.000.000.001:{remote.port}/users/zeros",
    }


def note(to: list[str], **fields: Any) -> dict[str, Any]:
    return {"type": "Create", "to": to, "object": {"type": "Note", "content": "hi", "to": to}, **fields}


async def wait_until_settled(store: Store, outbox_ids: list[int], timeout_s: float = 60) -> None:
    """Until every row is expanded or refused and none of its deliveries is queued or sending."""
    for _ in range(int(timeout_s / 0.2)):
        statuses = [await activity_status(store, URLS, outbox_id) for outbox_id in outbox_ids]
        rows = [await store.outbox.state(outbox_id) for outbox_id in outbox_ids]
        if all(row is not None and row.state in FINAL_ROW_STATES for row in rows) and all(
            not ({"queued", "sending"} & set(status["counts"])) for status in statuses
        ):
            return
        await asyncio.sleep(0.2)
    raise AssertionError(f"not settled: {[await store.outbox.state(i) for i in outbox_ids]}")


async def recipient_outcome(store: Store, outbox_id: int, recipient: str) -> tuple[str, str]:
    """The row's state and reason if it was refused as a whole, else the recipient's delivery's."""
    row = await store.outbox.state(outbox_id)
    assert row is not None
    if row.state == "rejected":
        return row.state, row.error or ""
    status = await activity_status(store, URLS, outbox_id)
    # A recipient whose actor document was unusable has no inbox: its row names the actor instead.
    mine = [d for d in status["deliveries"] if (d["inbox"] or d["recipient"] or "").startswith(recipient)]
    assert len(mine) == 1, status
    return mine[0]["state"], mine[0]["last_error"] or ""


async def test_poison_documents_end_their_own_rows_while_the_worker_delivers_the_rest_and_stays_up(
    settings: Settings, store: Store, remote: LoopbackServer, tmp_path: Path
) -> None:
    await store.actors.create("alice")
    uris = serve_poison(remote)
    mixed = await insert_outbox_row(store, "alice", note([uris["good"], uris["utf16"], uris["nul"]]))
    octal = await insert_outbox_row(store, "alice", note([uris["octal"]]))
    zeros = await insert_outbox_row(store, "alice", note([uris["zeros"]]))
    long_id = "http://127.0.0.1:8000/activities/" + "x" * 2100
    too_long = await insert_outbox_row(store, "alice", note([uris["good"]], id=long_id))
    good = [await insert_outbox_row(store, "alice", note([uris["good"]])) for _ in range(3)]
    worker = await start_worker(
        settings,
        tmp_path,
        FEDQUEUE_EXPANSION_RETRY_SECONDS="0.1",
        FEDQUEUE_RETRY_BASE_SECONDS="0.05",
        FEDQUEUE_RETRY_CAP_SECONDS="0.2",
    )
    try:
        await wait_until_settled(store, [mixed, octal, zeros, too_long, *good])
        assert worker.returncode is None  # still running
        worker.send_signal(signal.SIGTERM)
        await asyncio.wait_for(worker.wait(), 20)
    finally:
        if worker.returncode is None:
            worker.kill()
            await worker.wait()
    assert worker.returncode == 0

    for outbox_id in [mixed, *good]:
        assert (await recipient_outcome(store, outbox_id, uris["good"]))[0] == "delivered"
    for outbox_id, recipient in [(mixed, uris["utf16"]), (mixed, uris["nul"]), (octal, uris["octal"])]:
        state, reason = await recipient_outcome(store, outbox_id, recipient)
        assert state in ("dead", "rejected")
        assert reason and "\n" not in reason
    state, reason = await recipient_outcome(store, zeros, uris["zeros"])
    assert state in ("dead", "rejected") and reason
    row = await store.outbox.state(too_long)
    assert row is not None
    assert row.state == "rejected"  # the shared intake rules refuse it on both engines
    assert row.error and "longer than 2048" in row.error and "\n" not in row.error
