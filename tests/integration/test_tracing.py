"""Traces (OpenTelemetry, `fedqueue[otel]`): an app's trace goes on through fan-out and sends, an
inbox POST is traced through verify and store, log lines carry the trace id, and with tracing
off nothing of opentelemetry is loaded."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from sqlalchemy import update

from fedqueue import tracing
from fedqueue.logs import JsonFormatter
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.tables import OutboxRow
from tests.conftest import ADMIN_TOKEN
from tests.fediverse import RemoteActor, post
from tests.loopback import LoopbackServer
from tests.outbound import accept_all, add_follower, fast, insert_outbox_row, run_burst

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
APP_TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
PUBLIC = "https://www.w3.org/ns/activitystreams#Public"
ALICE = "http://127.0.0.1:8000/actors/alice"
_outbox = OutboxRow.__table__  # type: ignore[attr-defined]


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on, every span ended kept in memory."""
    exporter = InMemorySpanExporter()
    tracing.start(exporter)
    try:
        yield exporter
    finally:
        tracing.stop()


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def trace_of(span: ReadableSpan) -> str:
    assert span.context is not None
    return format(span.context.trace_id, "032x")


async def two_followers(store: Store, remote: LoopbackServer) -> str:
    """alice, followed by two inboxes on the loopback server that answer 202; her token."""
    token = (await store.actors.create("alice")).token
    for n in range(2):
        await add_follower(store, "alice", remote.url(f"/users/f{n}"), remote.url(f"/users/f{n}/inbox"))
    accept_all(remote, ["/users/f0/inbox", "/users/f1/inbox"])
    return token


async def post_traced(client: httpx.AsyncClient, token: str, content: str) -> httpx.Response:
    """alice's Note to her followers, POSTed by an app with its own `traceparent`; answered 201."""
    note = {"type": "Note", "content": content, "to": [PUBLIC], "cc": [f"{ALICE}/followers"]}
    headers = {"Authorization": f"Bearer {token}", "traceparent": APP_TRACEPARENT}
    response = await client.post("/actors/alice/outbox", json=note, headers=headers)
    assert response.status_code == 201, response.text
    return response


async def test_an_apps_traceparent_on_the_outbox_post_is_the_trace_of_its_fanout_and_each_send(
    settings: Settings,
    store: Store,
    remote: LoopbackServer,
    client: httpx.AsyncClient,
    spans: InMemorySpanExporter,
) -> None:
    response = await post_traced(client, await two_followers(store, remote), "traced")
    await run_burst(fast(settings), store)

    [intake] = named(spans, "fedqueue.outbox.intake")
    [fanout] = named(spans, "fedqueue.fanout")
    sends = named(spans, "fedqueue.send")
    assert [trace_of(s) for s in (intake, fanout, *sends)] == [TRACE_ID] * 4
    assert (
        intake.attributes is not None and intake.attributes["fedqueue.activity_id"] == response.json()["id"]
    )
    assert fanout.attributes is not None and fanout.attributes["fedqueue.deliveries"] == 2
    host = remote.url("/").split("/")[2]
    attributes = sorted((dict(s.attributes or {}) for s in sends), key=lambda a: str(a["fedqueue.inbox"]))
    assert [
        (a["server.address"], a["fedqueue.inbox"], a["http.response.status_code"], a["fedqueue.attempt"])
        for a in attributes
    ] == [(host, remote.url(f"/users/f{n}/inbox"), 202, 1) for n in range(2)]


async def test_an_app_inserting_a_row_with_a_traceparent_gets_its_sends_in_that_trace(
    settings: Settings, store: Store, remote: LoopbackServer, spans: InMemorySpanExporter
) -> None:
    await two_followers(store, remote)
    outbox_id = await insert_outbox_row(store, "alice", {"type": "Note", "cc": [f"{ALICE}/followers"]})
    async with store.database.transaction() as conn:  # as an app sets the column in its INSERT
        await conn.execute(
            update(_outbox).where(_outbox.c.id == outbox_id).values(traceparent=APP_TRACEPARENT)
        )
    await run_burst(fast(settings), store)
    traced = named(spans, "fedqueue.fanout") + named(spans, "fedqueue.send")
    assert [trace_of(s) for s in traced] == [TRACE_ID] * 3


async def test_a_deliverys_json_log_line_carries_the_apps_trace_id(
    settings: Settings,
    store: Store,
    remote: LoopbackServer,
    client: httpx.AsyncClient,
    spans: InMemorySpanExporter,
) -> None:
    await post_traced(client, await two_followers(store, remote), "logged")
    lines = io.StringIO()
    handler = logging.StreamHandler(lines)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("fedqueue")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        await run_burst(fast(settings), store)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    entries = [json.loads(line) for line in lines.getvalue().splitlines()]
    deliveries = [e for e in entries if e.get("event") == "delivery"]
    assert [(e["outcome"], e["trace_id"]) for e in deliveries] == [("delivered", TRACE_ID)] * 2
    send_spans = {format(s.context.span_id, "016x") for s in named(spans, "fedqueue.send") if s.context}
    assert {e["span_id"] for e in deliveries} == send_spans


async def test_an_inbox_post_is_traced_through_receive_verify_with_its_key_fetch_and_store(
    store: Store, client: httpx.AsyncClient, bob: RemoteActor, spans: InMemorySpanExporter
) -> None:
    await store.actors.create("alice")
    activity = bob.note_to("alice")
    response = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", activity))
    assert response.status_code == 202, response.text

    [receive] = named(spans, "fedqueue.inbox.receive")
    [verify] = named(spans, "fedqueue.inbox.verify")
    [key_fetch] = named(spans, "fedqueue.key_fetch")
    [stored] = named(spans, "fedqueue.inbox.store")
    assert receive.context is not None and verify.context is not None
    assert (verify.parent, stored.parent) == (receive.context, receive.context)
    assert key_fetch.parent == verify.context
    assert dict(receive.attributes or {}) == {
        "fedqueue.inbox": "/actors/alice/inbox",
        "fedqueue.received": "accepted",
    }
    assert (verify.attributes or {})["fedqueue.key_id"] == bob.key_id
    assert (key_fetch.attributes or {})["fedqueue.key_id"] == bob.key_id
    assert dict(stored.attributes or {}) == {"fedqueue.activity_id": activity["id"], "fedqueue.stored": "new"}


NO_TRACING_SCRIPT = """
import asyncio, json, sys
import httpx
from fedqueue.logs import configure_logging
from fedqueue.settings import load_settings
from fedqueue.storage import Store
from fedqueue.storage.migrate import upgrade_to_head
from fedqueue.web.app import create_app

async def main() -> None:
    store = Store.open(settings.database_url)
    token = (await store.actors.create("alice")).token
    transport = httpx.ASGITransport(app=create_app(settings, store))
    async with httpx.AsyncClient(transport=transport, base_url=settings.base_url) as client:
        headers = {"Authorization": f"Bearer {token}", "traceparent": sys.argv[1]}
        answer = await client.post("/actors/alice/outbox", json={"type": "Note"}, headers=headers)
        assert answer.status_code == 201, answer.text
        json_type = {"Content-Type": "application/activity+json"}
        refused = await client.post("/inbox", content=b"{}", headers=json_type)
        assert refused.status_code == 401, refused.text
    await store.close()
    print(json.dumps(sorted(name for name in sys.modules if name.split(".")[0] == "opentelemetry")))

settings = load_settings()
configure_logging(settings)
upgrade_to_head(settings.database_url)
asyncio.run(main())
"""


def test_with_tracing_off_no_opentelemetry_module_is_loaded_by_the_app_or_a_request(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "FEDQUEUE_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'fedqueue.db'}",
        "FEDQUEUE_BASE_URL": "http://127.0.0.1:8000",
        "FEDQUEUE_ADMIN_TOKEN": ADMIN_TOKEN,
        "FEDQUEUE_OTEL_ENABLED": "false",
    }
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(NO_TRACING_SCRIPT), APP_TRACEPARENT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == []
