"""While the database is away, a route that needs it answers 503 with Retry-After, never 500, and
so does `/healthz` (200 before and after, a worker beating on the database directly); the outage
is one WARNING line and one INFO line in `fedqueue serve`'s log, with no traceback."""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from fedqueue.rules.outages import RETRY_AFTER_S
from tests.live import fedqueue_env, fedqueue_process, live_instance

TOKEN = "database-away-admin-token-for-the-test"


class TcpProxy:
    """A loopback TCP proxy to PostgreSQL that can go away (its port closed, every connection cut)
    and come back on the same port: the database as fedqueue sees it when its server is away."""

    def __init__(self, host: str, port: int) -> None:
        self._target = (host, port)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self.port = 0

    def _run(self, coroutine: object) -> None:
        asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)  # type: ignore[arg-type]

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            writer.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream_reader, upstream_writer = await asyncio.open_connection(*self._target)
        self._writers |= {writer, upstream_writer}
        await asyncio.gather(self._pipe(reader, upstream_writer), self._pipe(upstream_reader, writer))

    async def _start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _stop(self) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.transport.abort()
        self._writers.clear()
        await self._server.wait_closed()
        await asyncio.sleep(0)  # the aborted transports close their sockets

    def up(self) -> None:
        if not self._thread.is_alive():
            self._thread.start()
        self._run(self._start())

    def away(self) -> None:
        self._run(self._stop())

    def close(self) -> None:
        if self._server is not None and self._server.is_serving():
            self.away()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@contextmanager
def proxied(database_url: str) -> Iterator[tuple[TcpProxy, str]]:
    url = make_url(database_url)
    proxy = TcpProxy(url.host or "127.0.0.1", url.port or 5432)
    proxy.up()
    try:
        yield proxy, url.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
    finally:
        proxy.close()


async def get(url: str) -> httpx.Response:
    async with httpx.AsyncClient(timeout=10) as http:
        return await http.get(url)


async def answer_while(origin: str, wanted: int) -> httpx.Response:
    """GET an actor (a database read) until it answers `wanted` (bounded: 100 tries)."""
    for _ in range(100):
        answer = await get(f"{origin}/actors/nobody")
        if answer.status_code == wanted:
            return answer
    raise AssertionError(f"never {wanted}; last {answer.status_code} {answer.text}")


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_a_route_needing_the_database_answers_503_with_retry_after_while_it_is_away(
    database_url: str, tmp_path: Path
) -> None:
    async with fedqueue_process("worker", fedqueue_env(database_url), tmp_path) as worker:
        await worker.until_healthz(200)
        with (
            proxied(database_url) as (proxy, through_proxy),
            live_instance(
                tmp_path,
                TOKEN,
                database_url=through_proxy,
                env={"FEDQUEUE_LOG_LEVEL": "INFO"},
                serve_args=["--no-worker"],
            ) as live,
        ):
            assert (await answer_while(live.origin, 404)).status_code == 404
            assert (await get(f"{live.origin}/healthz")).status_code == 200  # before: a worker beats
            proxy.away()
            away = await get(f"{live.origin}/actors/nobody")
            assert away.status_code == 503, away.text
            assert away.headers["Retry-After"] == str(RETRY_AFTER_S)
            assert (await answer_while(live.origin, 503)).status_code == 503  # and again: every request
            health = await get(f"{live.origin}/healthz")
            assert health.status_code == 503, health.text
            assert health.headers["Retry-After"] == str(RETRY_AFTER_S)
            assert "database" in health.json()["error"], health.text
            proxy.up()
            await answer_while(live.origin, 404)
            assert (await get(f"{live.origin}/healthz")).status_code == 200
    log = (tmp_path / "serve.log").read_text()
    assert "Traceback" not in log, log
    assert len(re.findall(r" WARNING fedqueue\.database: the database is unavailable", log)) == 1, log
    assert len(re.findall(r" INFO fedqueue\.database: the database is back after", log)) == 1, log
