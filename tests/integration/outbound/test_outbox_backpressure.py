"""Back-pressure: past the bound on pending outbox rows the route answers 503, SQL INSERTs still commit."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from sqlalchemy import bindparam, text
from starlette.applications import Starlette

from fedqueue.outbound.backpressure import Backlog
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import UTCDateTime
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import FakeClock, asgi_client
from tests.outbound import fast, insert_outbox_row, run_burst

ALICE = "http://127.0.0.1:8000/actors/alice"
BOUND = 2


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def app(settings: Settings, store: Store, clock: FakeClock) -> Starlette:
    bounded = settings.model_copy(update={"outbox_max_pending": BOUND})
    app = create_app(bounded, store)
    app.state.backlog = Backlog(
        store.outbox.backlog, BOUND, poll_interval_s=bounded.poll_interval_seconds, clock=clock
    )
    return app


@pytest.fixture
async def client(app: Starlette) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(app) as opened:
        yield opened


@pytest.fixture
async def headers(store: Store) -> dict[str, str]:
    return {"Authorization": f"Bearer {(await store.actors.create('alice')).token}"}


def _like(n: int) -> dict[str, Any]:
    return {"id": f"{ALICE}/activities/{n}", "type": "Like", "object": f"https://b.example/n/{n}"}


async def _outbox_rows(store: Store) -> int:
    async with store.database.reading() as conn:
        return int((await conn.execute(text("SELECT count(*) FROM outbox"))).scalar_one())


async def _post(client: httpx.AsyncClient, headers: dict[str, str], n: int) -> httpx.Response:
    return await client.post("/actors/alice/outbox", json=_like(n), headers=headers)


async def test_at_the_bound_a_new_activity_gets_503_with_retry_after_and_nothing_is_stored(
    client: httpx.AsyncClient, store: Store, headers: dict[str, str]
) -> None:
    assert [(await _post(client, headers, n)).status_code for n in range(BOUND)] == [201] * BOUND
    refused = await _post(client, headers, 99)
    assert refused.status_code == 503
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.json() == {
        "error": f"the outbox backlog is at its bound of {BOUND} activities; try again later"
    }
    assert await _outbox_rows(store) == BOUND
    assert await store.outbox.state(_like(99)["id"]) is None


async def test_a_repeat_of_a_stored_activity_still_gets_its_200_at_the_bound(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    first = [await _post(client, headers, n) for n in range(BOUND)]
    again = await _post(client, headers, 0)
    assert again.status_code == 200
    assert again.json() == first[0].json()
    assert (await _post(client, headers, 99)).status_code == 503


async def test_bad_input_at_the_bound_is_still_refused_as_bad_input(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    for n in range(BOUND):
        await _post(client, headers, n)
    response = await client.post("/actors/alice/outbox", content=b"{nope", headers=headers)
    assert response.status_code == 400


async def test_rows_inserted_by_sql_commit_past_the_bound_and_fill_it(
    client: httpx.AsyncClient, store: Store, headers: dict[str, str]
) -> None:
    ids = [await insert_outbox_row(store, "alice", _like(n)) for n in range(BOUND + 3)]
    assert len(set(ids)) == BOUND + 3
    assert await store.outbox.backlog(100) == BOUND + 3
    assert (await _post(client, headers, 99)).status_code == 503
    assert await _outbox_rows(store) == BOUND + 3


async def test_the_worker_draining_the_backlog_lets_posts_through_again(
    client: httpx.AsyncClient, settings: Settings, store: Store, headers: dict[str, str], clock: FakeClock
) -> None:
    for n in range(BOUND):
        await insert_outbox_row(store, "alice", _like(n))
    assert (await _post(client, headers, 99)).status_code == 503
    await run_burst(fast(settings), store)
    assert await store.outbox.backlog(100) == 0
    # The count is at most a second old: until it is read again the route still refuses.
    assert (await _post(client, headers, 99)).status_code == 503
    clock.now += 1.0
    assert (await _post(client, headers, 99)).status_code == 201


async def test_metrics_show_the_backlog_its_age_and_the_refusals(
    client: httpx.AsyncClient, store: Store, headers: dict[str, str]
) -> None:
    old = await insert_outbox_row(store, "alice", _like(1))
    await insert_outbox_row(store, "alice", _like(2))
    async with store.database.transaction() as conn:
        await conn.execute(
            text("UPDATE outbox SET created_at = :at WHERE id = :id").bindparams(
                bindparam("at", type_=UTCDateTime())
            ),
            {"at": datetime(2000, 1, 1, tzinfo=UTC), "id": old},
        )
    await _post(client, headers, 99)
    await _post(client, headers, 98)
    lines = (
        await client.get("/metrics", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    ).text.splitlines()
    assert "fedqueue_outbox_backlog 2" in lines
    assert 'fedqueue_outbox_refused_total{reason="backlog"} 2' in lines
    [age] = [line for line in lines if line.startswith("fedqueue_outbox_oldest_pending_age_seconds ")]
    assert float(age.split()[1]) > 20 * 365 * 86400


async def test_with_no_backlog_the_age_is_zero_and_a_bound_of_zero_never_refuses(
    settings: Settings, store: Store, headers: dict[str, str]
) -> None:
    stats = await store.stats.queue()
    assert (stats.outbox_backlog, stats.oldest_outbox_age_s) == (0, 0.0)
    for n in range(3):
        await insert_outbox_row(store, "alice", _like(n))
    unbounded = create_app(settings.model_copy(update={"outbox_max_pending": 0}), store)
    async with asgi_client(unbounded) as client:
        assert (await _post(client, headers, 99)).status_code == 201


async def test_the_backlog_is_counted_once_per_interval_and_only_up_to_the_bound() -> None:
    clock = FakeClock()
    asked: list[int] = []

    async def count(cap: int) -> int:
        asked.append(cap)
        return min(cap, 7)

    backlog = Backlog(count, 5, poll_interval_s=2.5, clock=clock)
    assert backlog.retry_after_s == 3
    assert await backlog.full()
    assert await backlog.full()
    assert asked == [5]
    clock.now += 1.0
    assert await backlog.full()
    assert asked == [5, 5]
    assert not await Backlog(count, 0, poll_interval_s=1.0).full()
    assert asked == [5, 5]
