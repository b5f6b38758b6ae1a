"""How long the pool keeps an idle connection, and how its caps hold requests back
(`remote/pool.py`), against a loopback server that answers each request when the test says."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from fedqueue.remote import pool as pools
from fedqueue.remote.http1 import Answer
from fedqueue.remote.pool import Pool
from tests.integration.remote.test_http1 import LIMITS
from tests.loopback import GatedServer

KEEPALIVE_S = 0.8
SWEEP_S = 0.1


def capped_pool(*, total: int, per_host: int) -> Pool:
    return Pool(
        total=total,
        per_host=per_host,
        connect_timeout_s=5,
        allow_private=True,
        user_agent="fedqueue-test",
        limits=LIMITS,
    )


@pytest.fixture
async def server() -> AsyncIterator[GatedServer]:
    server = await GatedServer().start()
    yield server
    await server.stop()


def posting(pool: Pool, url: str) -> asyncio.Task[Answer]:
    """A POST to `url`, as a task: tasks take their places, or their turns, in the order made."""
    return asyncio.ensure_future(pool.post(url, b"{}", {}, 64))


async def answered(server: GatedServer, pool: Pool, path: str) -> Answer:
    """POST to `path` and answer it at once."""
    server.answer(path)
    return await asyncio.wait_for(pool.post(server.url(path), b"{}", {}, 64), 5)


async def test_an_idle_connection_is_closed_after_the_keepalive_and_not_before(
    server: GatedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pools, "KEEPALIVE_S", KEEPALIVE_S)
    monkeypatch.setattr(pools, "SWEEP_S", SWEEP_S)
    loop = asyncio.get_running_loop()
    pool = capped_pool(total=8, per_host=2)
    try:
        await answered(server, pool, "/inbox/1")
        await asyncio.sleep(KEEPALIVE_S / 2)
        last_used = loop.time()
        await answered(server, pool, "/inbox/2")  # on the kept connection: idle again from now
        # The first sweep, due a keep-alive after the connection first went idle, has left it be.
        await asyncio.sleep(KEEPALIVE_S * 3 / 4)
        assert server.hung_up_at == []
        await server.until(lambda: bool(server.hung_up_at))
    finally:
        await pool.close()
    assert server.arrived == ["/inbox/1", "/inbox/2"]
    idle_s = server.hung_up_at[0] - last_used
    assert KEEPALIVE_S <= idle_s < KEEPALIVE_S + SWEEP_S + 0.25  # 0.25: for the server to see it
    assert len(server.hung_up_at) == 1


async def test_closing_the_pool_closes_its_idle_connections_and_arms_nothing_more(
    server: GatedServer,
) -> None:
    pool = capped_pool(total=8, per_host=2)
    await answered(server, pool, "/inbox/1")
    await pool.close()
    await server.until(lambda: bool(server.hung_up_at))
    assert pool._sweep_timer is None


async def test_the_caps_bound_requests_per_host_and_overall_and_serve_waiters_in_order(
    server: GatedServer,
) -> None:
    """Two hosts (two names of one server), at most 2 each and 3 in all: whichever cap is full, a
    freed place goes to the request that has waited longest for it."""
    pool = capped_pool(total=3, per_host=2)
    urls = {
        name: server.url(f"/inbox/{name}", host="127.0.0.1" if name[0] == "a" else "localhost")
        for name in ("a0", "a1", "a2", "b0", "b1", "a3", "b2")
    }
    posts = {name: posting(pool, url) for name, url in urls.items()}
    try:
        # a0 a1 b0 fill the total; b1 has its host's place and waits for the total's; a2 and a3
        # wait for host a's, b2 for host b's.
        assert sorted(await server.arrivals(3)) == ["/inbox/a0", "/inbox/a1", "/inbox/b0"]
        server.answer("/inbox/a0")  # b1 takes the total's place; a2 host a's, then waits for the total
        assert (await server.arrivals(4))[3:] == ["/inbox/b1"]
        server.answer("/inbox/b0")  # a2 goes; b2 takes host b's place and waits for the total
        assert (await server.arrivals(5))[4:] == ["/inbox/a2"]
        server.answer("/inbox/a1")  # b2 goes; a3 takes host a's place and waits for the total
        assert (await server.arrivals(6))[5:] == ["/inbox/b2"]
        server.answer("/inbox/b1")
        assert (await server.arrivals(7))[6:] == ["/inbox/a3"]
        for name in ("a2", "b2", "a3"):
            server.answer(f"/inbox/{name}")
        assert {(await asyncio.wait_for(post, 5)).status for post in posts.values()} == {202}
    finally:
        for post in posts.values():
            post.cancel()
        await asyncio.gather(*posts.values(), return_exceptions=True)
        await pool.close()


@pytest.mark.parametrize(
    ("full", "total", "per_host", "hosts"),
    [
        ("the host's cap", 8, 1, ("127.0.0.1", "127.0.0.1", "127.0.0.1")),
        ("the total cap", 1, 8, ("127.0.0.1", "localhost", "localhost")),
    ],
)
@pytest.mark.parametrize("cancelled", ["while it waits", "as its turn comes"])
async def test_a_cancelled_waiter_takes_no_place_and_the_next_in_line_goes(
    server: GatedServer, full: str, total: int, per_host: int, hosts: tuple[str, ...], cancelled: str
) -> None:
    """The first POST fills `full`; the second, waiting, is cancelled; the third goes in its stead,
    and afterwards a POST goes at once: no place was lost to the cancelled one."""
    del full  # the test's id
    pool = capped_pool(total=total, per_host=per_host)
    first_url, second_url, third_url = (
        server.url(f"/inbox/{n}", host=host) for n, host in enumerate(hosts, start=1)
    )

    async def first_then_cancel_the_second() -> Answer:
        answer = await pool.post(first_url, b"{}", {}, 64)
        if cancelled == "as its turn comes":
            second.cancel()  # handed the place as the first let it go, it has not taken it yet
        return answer

    first = asyncio.ensure_future(first_then_cancel_the_second())
    second = posting(pool, second_url)
    third = posting(pool, third_url)
    try:
        assert await server.arrivals(1) == ["/inbox/1"]
        if cancelled == "while it waits":
            second.cancel()
        server.answer("/inbox/1")
        assert (await asyncio.wait_for(first, 5)).status == 202
        with pytest.raises(asyncio.CancelledError):
            await second
        assert (await server.arrivals(2))[1:] == ["/inbox/3"]
        server.answer("/inbox/3")
        assert (await asyncio.wait_for(third, 5)).status == 202
        assert (await answered(server, pool, "/inbox/4")).status == 202  # at once: no place lost
    finally:
        for post in (first, second, third):
            post.cancel()
        await asyncio.gather(first, second, third, return_exceptions=True)
        await pool.close()
    assert server.arrived == ["/inbox/1", "/inbox/3", "/inbox/4"]
