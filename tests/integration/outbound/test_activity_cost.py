"""What one outbox activity may cost (issue 52, row 3): its named recipients are capped, their
actor fetches share a budget, back-pressure weighs its deliveries, and its fetches hold up no
other actor's activity."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp import web
from sqlalchemy import text
from starlette.applications import Starlette

from fedqueue.metrics import Metrics
from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.integration.outbound.test_delivery import actor_doc
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import accept_all, add_follower, fast, insert_outbox_row, run_burst

ALICE = "http://127.0.0.1:8000/actors/alice"
BOB = "http://127.0.0.1:8000/actors/bob"
PUBLIC = "https://www.w3.org/ns/activitystreams#Public"
CAP = 5


def bounded(settings: Settings, **overrides: Any) -> Settings:
    values = {
        "max_recipients_per_activity": CAP,
        "max_recipient_fetches_per_activity": 100,
        "max_recipient_fetches_per_host": 100,
    }
    return fast(settings, **(values | overrides))


@pytest.fixture
async def alice(store: Store) -> dict[str, str]:
    return {"Authorization": f"Bearer {(await store.actors.create('alice')).token}"}


@pytest.fixture
def app(settings: Settings, store: Store) -> Starlette:
    return create_app(bounded(settings), store)


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(app) as opened:
        yield opened


async def _outbox_rows(store: Store) -> int:
    async with store.database.reading() as conn:
        return int((await conn.execute(text("SELECT count(*) FROM outbox"))).scalar_one())


async def _metrics(client: httpx.AsyncClient) -> list[str]:
    return (
        await client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    ).text.splitlines()


def _actors(remote: LoopbackServer, count: int, prefix: str = "u") -> list[str]:
    return [remote.url(f"/users/{prefix}{n}") for n in range(count)]


async def test_an_outbox_post_naming_more_recipients_than_the_cap_gets_400_naming_both_and_stores_nothing(
    client: httpx.AsyncClient, store: Store, alice: dict[str, str], remote: LoopbackServer
) -> None:
    named = _actors(remote, CAP + 1)
    note = {"type": "Note", "content": "hi", "to": named[:3], "cc": named[2:], "bcc": named[:1]}
    response = await client.post("/actors/alice/outbox", json=note, headers=alice)
    assert response.status_code == 400
    assert response.json() == {
        "error": f"the activity names {CAP + 1} recipients; at most {CAP} are allowed"
        " (max_recipients_per_activity)"
    }
    assert await _outbox_rows(store) == 0
    assert remote.requests == []
    assert 'fedqueue_recipient_cap_refused_total{where="intake"} 1' in await _metrics(client)


async def test_the_public_collection_the_senders_followers_and_repeats_do_not_count_toward_the_cap(
    client: httpx.AsyncClient, alice: dict[str, str], remote: LoopbackServer
) -> None:
    named = _actors(remote, CAP)
    note = {"type": "Note", "to": [PUBLIC, *named], "cc": [f"{ALICE}/followers", ALICE, *named]}
    response = await client.post("/actors/alice/outbox", json=note, headers=alice)
    assert response.status_code == 201, response.text


async def test_a_row_an_app_inserts_past_the_cap_is_rejected_with_the_reason_and_nothing_is_fetched(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    row = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x", "to": _actors(remote, CAP + 2)}
    )
    metrics = Metrics()
    await run_burst(bounded(settings), store, metrics=metrics)
    state = await store.outbox.state(row)
    assert state is not None and state.state == "rejected"
    assert state.error == (
        f"the activity names {CAP + 2} recipients; at most {CAP} are allowed (max_recipients_per_activity)"
    )
    assert await store.deliveries.for_outbox(row) == []
    assert remote.requests == []
    assert metrics.recipient_cap_refusals == {"worker": 1}


@pytest.mark.parametrize(
    ("budget", "fetched", "limit", "reason"),
    [
        (
            {"max_recipient_fetches_per_host": 2},
            2,
            "host",
            "needed more than 2 actor fetches from 127.0.0.1:{port} (max_recipient_fetches_per_host)",
        ),
        (
            {"max_recipient_fetches_per_activity": 3},
            3,
            "activity",
            "needed more than 3 actor fetches (max_recipient_fetches_per_activity)",
        ),
    ],
)
async def test_an_activitys_recipient_fetches_stop_at_their_budget_and_the_rest_are_dead_with_why(
    settings: Settings,
    store: Store,
    remote: LoopbackServer,
    budget: dict[str, int],
    fetched: int,
    limit: str,
    reason: str,
) -> None:
    await store.actors.create("alice")
    named = _actors(remote, CAP)
    for n in range(CAP):
        remote.serve_json(f"/users/u{n}", actor_doc(remote, f"u{n}", shared=False))
    accept_all(remote, [f"/users/u{n}/inbox" for n in range(CAP)])
    row = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x", "to": named})
    metrics = Metrics()
    await run_burst(bounded(settings, **budget), store, metrics=metrics)

    gets = sorted(r.path for r in remote.requests if r.method == "GET")
    assert gets == [f"/users/u{n}" for n in range(fetched)]  # the first ones named, in any order
    deliveries = await store.deliveries.for_outbox(row)
    assert sorted(d.inbox or "" for d in deliveries if d.state == "delivered") == [
        remote.url(f"/users/u{n}/inbox") for n in range(fetched)
    ]
    given_up = [d for d in deliveries if d.state == "dead"]
    assert [d.recipient for d in given_up] == named[fetched:]
    why = reason.format(port=remote.port)
    assert all(d.inbox is None and why in (d.last_error or "") for d in given_up), given_up
    assert metrics.recipient_fetches_refused == {limit: CAP - fetched}


async def test_recipients_already_cached_cost_no_fetch_from_the_budget(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    named = _actors(remote, 4)
    for n in range(4):
        remote.serve_json(f"/users/u{n}", actor_doc(remote, f"u{n}", shared=False))
    accept_all(remote, [f"/users/u{n}/inbox" for n in range(4)])
    small = bounded(settings, max_recipient_fetches_per_host=2)
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "x", "to": named[:2]})
    await run_burst(small, store)
    row = await insert_outbox_row(store, "alice", {"type": "Like", "object": "y", "to": named})
    await run_burst(small, store)
    assert {d.state for d in await store.deliveries.for_outbox(row)} == {"delivered"}
    assert len([r for r in remote.requests if r.method == "GET"]) == 4


async def test_back_pressure_weighs_an_activity_by_its_deliveries_not_as_one_row(
    settings: Settings, store: Store, alice: dict[str, str], remote: LoopbackServer
) -> None:
    for n in range(6):
        await add_follower(store, "alice", remote.url(f"/users/f{n}"), remote.url(f"/users/f{n}/inbox"))
    accept_all(remote, [f"/users/f{n}/inbox" for n in range(6)])
    app = create_app(bounded(settings, outbox_max_pending_deliveries=5), store)
    to_followers = {"type": "Note", "to": [f"{ALICE}/followers"]}
    async with asgi_client(app) as client:
        assert (
            await client.post("/actors/alice/outbox", json=to_followers, headers=alice)
        ).status_code == 201
        refused = await client.post("/actors/alice/outbox", json={"type": "Note"}, headers=alice)
        assert refused.status_code == 503
        assert refused.json() == {
            "error": "the outbox backlog is at its bound of 5 deliveries; try again later"
        }
        assert int(refused.headers["retry-after"]) >= 1
        assert 'fedqueue_outbox_refused_total{reason="deliveries"} 1' in await _metrics(client)
    # Counted afresh, the activity's queued deliveries are what weighs, then nothing once sent.
    worker_settings = bounded(settings)
    client_ = HttpClient(worker_settings)
    try:
        worker = Worker(worker_settings, store, client_, metrics=Metrics())
        assert await worker.fanout.expand_pending() == 1
        assert await store.deliveries.waiting(100) == 6
        assert await store.deliveries.waiting(4) == 4
        await worker.run_burst()
    finally:
        await client_.aclose()
    assert await store.deliveries.waiting(100) == 0


async def test_a_failed_delivery_waiting_for_its_retry_does_not_weigh_on_the_outbox(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    remote.on("POST", "/inbox", lambda _r: web.Response(status=503))
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, [remote.url("/inbox")])
    assert await store.deliveries.waiting(100) == 1  # the row, not expanded yet
    await run_burst(fast(settings, retry_base_seconds=3600.0, retry_cap_seconds=3600.0), store)
    assert await store.deliveries.waiting(100) == 0


def _gated(remote: LoopbackServer, path: str, gate: asyncio.Event) -> None:
    """GET `path` answers its actor document once `gate` is set."""
    document = actor_doc(remote, path.rsplit("/", 1)[1], shared=False)

    async def answer(_request: Recorded) -> web.StreamResponse:
        await gate.wait()
        return web.json_response(document, content_type="application/activity+json")

    remote.on("GET", path, answer)


async def test_another_actors_small_activity_is_delivered_while_a_large_ones_recipients_are_still_fetched(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await store.actors.create("bob")
    gate, small_sent = asyncio.Event(), asyncio.Event()
    big = [remote.url(f"/users/big{n}") for n in range(40)]
    for n in range(40):
        _gated(remote, f"/users/big{n}", gate)
    accept_all(remote, [f"/users/big{n}/inbox" for n in range(40)] + ["/users/g/inbox"])

    def small_arrives(_request: Recorded) -> web.Response:
        small_sent.set()
        return web.Response(status=202)

    remote.on("POST", "/users/f/inbox", small_arrives)
    await add_follower(store, "bob", remote.url("/users/f"), remote.url("/users/f/inbox"))
    await add_follower(store, "alice", remote.url("/users/g"), remote.url("/users/g/inbox"))
    large = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x", "to": big})
    to_bobs = {"type": "Like", "object": "y", "cc": [f"{BOB}/followers"]}
    small = await insert_outbox_row(store, "bob", to_bobs)
    # Alice's next activity needs no fetch, yet goes out after her first: an actor's order holds.
    to_alices = {"type": "Like", "object": "z", "cc": [f"{ALICE}/followers"]}
    after = await insert_outbox_row(store, "alice", to_alices)

    wide = bounded(settings, max_recipients_per_activity=100)
    client = HttpClient(wide)
    stop = asyncio.Event()
    running = asyncio.create_task(Worker(wide, store, client, metrics=Metrics()).run(stop))
    try:
        async with asyncio.timeout(30):  # before: the worker waited on alice's fetches, bob's never went
            await small_sent.wait()
        assert not gate.is_set()
        for row in (large, after):
            state = await store.outbox.state(row)
            assert state is not None and state.state == "expanding"
            assert await store.deliveries.for_outbox(row) == []
        assert remote.received("POST", "/users/g/inbox") == []
    finally:
        gate.set()
        stop.set()
        await running
        await client.aclose()
    await run_burst(wide, store)
    assert [d.state for d in await store.deliveries.for_outbox(small)] == ["delivered"]
    rows = [*await store.deliveries.for_outbox(large), *await store.deliveries.for_outbox(after)]
    assert len(rows) == 41 and {d.state for d in rows} == {"delivered"}


async def test_past_the_held_rows_bound_a_row_awaiting_fetches_goes_back_to_pending_its_claim_uncounted(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    for name in ("alice", "carol", "bob"):
        await store.actors.create(name)
    gate = asyncio.Event()
    for name in ("x", "y"):
        _gated(remote, f"/users/{name}", gate)
    accept_all(remote, ["/users/x/inbox", "/users/y/inbox", "/users/f/inbox"])
    await add_follower(store, "bob", remote.url("/users/f"), remote.url("/users/f/inbox"))
    held = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x", "to": [remote.url("/users/x")]}
    )
    back = await insert_outbox_row(
        store, "carol", {"type": "Like", "object": "y", "to": [remote.url("/users/y")]}
    )
    small = await insert_outbox_row(store, "bob", {"type": "Like", "object": "z", "cc": [f"{BOB}/followers"]})
    one = bounded(settings, expansion_max_held_rows=1)
    client = HttpClient(one)
    worker = Worker(one, store, client, metrics=Metrics())
    try:
        assert await worker.fanout.expand_pending() == 2
        states = [await store.outbox.state(row) for row in (held, back, small)]
        assert [s.state for s in states if s is not None] == ["expanding", "pending", "expanded"]
        async with store.database.reading() as conn:
            claims = (
                await conn.execute(text(f"SELECT expansion_attempts FROM outbox WHERE id = {back}"))
            ).scalar()
        assert claims == 0
        assert worker.metrics.outbox_rows_given_back == 1
        gate.set()
        await worker.run_burst()
    finally:
        await client.aclose()
    for row in (held, back, small):
        assert [d.state for d in await store.deliveries.for_outbox(row)] == ["delivered"]
    # Given back again while alice's row still waited, then taken once it had gone out.
    given_back = worker.metrics.outbox_rows_given_back
    assert f"fedqueue_outbox_rows_given_back_total {given_back}" in worker.metrics.render()
