"""Kept connections and concurrency caps for one process's outbound requests (`Pool`).

What a pool does:
- at most `per_host` POSTs and, apart from them, `per_host` GETs (until their body is read) in
  flight per origin, and `total` requests overall: a key fetch for an inbound request never
  waits behind deliveries filling the cap of the host it comes from;
- connections kept per origin (scheme, host, port) while idle for up to `KEEPALIVE_S`, one
  request at a time each (`http1.Connection`); a kept connection the server closed meanwhile
  is replaced, and the request sent once more on a new one, only when the server sent nothing
  back on it or a 408 (it timed the connection out as the request crossed it);
- the address guard at its door (`check_url`), and names resolved by `resolver.GuardedResolver`
  (at most once per `DNS_TTL_S`, the addresses the guard forbids dropped): the address
  connected to is one that was checked;
- TLS with the system's trust store and SNI;
- each answer's head bounded by `limits` (`http1.Limits`): past it, the request fails at once
  and its connection is closed.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from fedqueue.remote.guard import check_url
from fedqueue.remote.http1 import Answer, Connection, Limits, Origin, request_bytes, target_of
from fedqueue.remote.resolver import GuardedResolver
from fedqueue.remote.transport import Fetched

T = TypeVar("T")

#: An idle kept connection is closed after this long.
KEEPALIVE_S = 15.0
#: The status of an idle connection timed out by its server (RFC 9110, 15.5.9).
REQUEST_TIMEOUT = 408


#: What a per-origin cap counts: one kind of request (its method) to one origin.
_Lane = tuple[str, Origin]


class Caps:
    """At most `per_lane` holders per lane and `total` overall; waiters are served in order."""

    def __init__(self, total: int, per_lane: int) -> None:
        self._total = asyncio.Semaphore(total)
        self._per_lane = per_lane
        self._lanes: dict[_Lane, asyncio.Semaphore] = {}
        #: Holders and waiters per lane: a lane's semaphore is dropped once nobody uses it.
        self._users: Counter[_Lane] = Counter()

    async def acquire(self, lane: _Lane) -> None:
        semaphore = self._lanes.get(lane)
        if semaphore is None:
            semaphore = self._lanes[lane] = asyncio.Semaphore(self._per_lane)
        self._users[lane] += 1
        try:
            await semaphore.acquire()
        except BaseException:
            self._leave(lane)
            raise
        try:
            await self._total.acquire()
        except BaseException:
            semaphore.release()
            self._leave(lane)
            raise

    def release(self, lane: _Lane) -> None:
        self._total.release()
        self._lanes[lane].release()
        self._leave(lane)

    def _leave(self, lane: _Lane) -> None:
        self._users[lane] -= 1
        if not self._users[lane]:
            del self._users[lane]
            del self._lanes[lane]


class Pool:
    """Kept connections and the concurrency caps of one process's outbound requests; `close` ends them."""

    def __init__(
        self,
        *,
        total: int,
        per_host: int,
        connect_timeout_s: float,
        allow_private: bool,
        user_agent: str,
        limits: Limits,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.user_agent = user_agent
        self._limits = limits
        self._caps = Caps(total, per_host)
        self._connect_timeout_s = connect_timeout_s
        self._allow_private = allow_private
        self._resolver = GuardedResolver(allow_private=allow_private)
        self._tls = tls
        self._idle: dict[Origin, list[Connection]] = {}
        self._closed = False

    async def post(self, url: str, body: bytes, headers: dict[str, str], head_limit: int) -> Answer:
        """POST `body` to `url` and read the answer; `check_url`'s refusals are raised first."""
        async with self._capped("POST", url, headers, body) as (origin, request):
            connection, answer = await self._on_a_connection(
                origin, lambda kept: kept.exchange(request, head_limit)
            )
            self._done_with(connection)
            return answer

    @asynccontextmanager
    async def get(self, url: str, headers: dict[str, str]) -> AsyncIterator[Fetched]:
        """GET `url`: the answer's status and headers, its body to read inside the block, which
        holds a place in the caps. `check_url`'s refusals are raised first.

        The connection is kept afterwards only if the whole answer has arrived by the end of the
        block: one whose body was left unread in mid-flow is closed, never reused out of step.
        """
        async with self._capped("GET", url, headers, None) as (origin, request):
            connection, status = await self._on_a_connection(origin, lambda kept: kept.fetch(request))
            try:
                yield Fetched(status, connection.headers, connection.next_chunk)
            finally:
                self._done_with(connection)

    @asynccontextmanager
    async def _capped(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None
    ) -> AsyncIterator[tuple[Origin, bytes]]:
        """The request's origin and bytes, `url` checked first, holding a place in the caps."""
        check_url(url, allow_private=self._allow_private)
        target = target_of(url)
        request = request_bytes(method, target, headers, body, self.user_agent)
        lane = (method, target.origin)
        await self._caps.acquire(lane)
        try:
            yield target.origin, request
        finally:
            self._caps.release(lane)

    async def close(self) -> None:
        self._closed = True
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()

    async def _on_a_connection(
        self, origin: Origin, send: Callable[[Connection], Awaitable[T]]
    ) -> tuple[Connection, T]:
        """`send` on a kept connection, or on a new one; a connection that failed is closed.

        A kept connection is replaced and the request sent once more, and only once, when it
        fails with nothing come back on it or when it answers 408: most likely the server closed
        it while it was idle, or timed it out with an unasked 408 (Request Timeout), before the
        request reached it. A 408 says the request was not processed (RFC 9110, 15.5.9); one on a
        new connection is the request's answer. A server that read a POST and then closed without
        a word gets it twice; inboxes dedupe by activity id.
        """
        connection = self._kept(origin)
        if connection is not None:
            try:
                sent = await self._sent(connection, send)
            except ConnectionError:
                if connection.answered:
                    raise
            else:
                if connection.status != REQUEST_TIMEOUT:
                    return connection, sent
                connection.close()
        connection = await self._connect(origin)
        return connection, await self._sent(connection, send)

    @staticmethod
    async def _sent(connection: Connection, send: Callable[[Connection], Awaitable[T]]) -> T:
        try:
            return await send(connection)
        except BaseException:
            connection.close()  # cancelled or failed mid-answer: never reused
            raise

    def _done_with(self, connection: Connection) -> None:
        """Keep `connection` for the next request if its answer was whole and it may be reused."""
        if connection.reusable and not connection.closed and not self._closed:
            self._keep(connection)
        else:
            connection.close()

    def _kept(self, origin: Origin) -> Connection | None:
        """An idle kept connection to `origin`, the most recently used first."""
        connections = self._idle.get(origin)
        while connections:
            connection = connections.pop()
            if connection.idle_timer is not None:
                connection.idle_timer.cancel()
                connection.idle_timer = None
            if not connection.closed:
                if not connections:
                    del self._idle[origin]
                return connection
        self._idle.pop(origin, None)
        return None

    def _keep(self, connection: Connection) -> None:
        self._idle.setdefault(connection.origin, []).append(connection)
        connection.idle_timer = asyncio.get_running_loop().call_later(KEEPALIVE_S, self._expire, connection)

    def _expire(self, connection: Connection) -> None:
        connections = self._idle.get(connection.origin, [])
        if connection in connections:
            connections.remove(connection)
            if not connections:
                del self._idle[connection.origin]
        connection.idle_timer = None
        connection.close()

    async def _connect(self, origin: Origin) -> Connection:
        scheme, host, port = origin
        tls = None
        if scheme == "https":
            if self._tls is None:
                self._tls = ssl.create_default_context()
            tls = self._tls
        loop = asyncio.get_running_loop()
        failure: OSError | None = None
        for family, address in await self._resolver.resolve(host, port):
            try:
                async with asyncio.timeout(self._connect_timeout_s):
                    _transport, connection = await loop.create_connection(
                        lambda: Connection(origin, self._limits),
                        address,
                        port,
                        family=family,
                        ssl=tls,
                        server_hostname=host if tls is not None else None,
                    )
                return connection
            except TimeoutError:
                failure = TimeoutError(f"Connection timeout to host {host}:{port}")
            except ssl.SSLError as exc:  # the host's other addresses would show the same certificate
                raise ConnectionError(f"Cannot connect to host {host}:{port} [{exc}]") from None
            except OSError as exc:
                failure = exc
        if isinstance(failure, TimeoutError):
            raise failure
        raise ConnectionError(f"Cannot connect to host {host}:{port} [{failure}]")
