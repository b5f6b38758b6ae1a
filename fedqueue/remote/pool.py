"""Kept connections and concurrency caps for one process's outbound requests (`Pool`).

What a pool does:
- at most `per_host` POSTs and, apart from them, `per_host` GETs (until their body is read) in
  flight per origin, and `total` requests overall: a key fetch for an inbound request never
  waits behind deliveries filling the cap of the host it comes from;
- connections kept per origin (scheme, host, port), one request at a time each
  (`http1.Connection`), and closed once idle for `KEEPALIVE_S` (within `SWEEP_S` more: one
  timer sweeps them all, `Pool._sweep`); a kept connection the server closed meanwhile
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
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import TypeVar

from fedqueue.remote.http1 import Answer, Connection, Limits
from fedqueue.remote.http1_requests import Origin, request_bytes, target_of
from fedqueue.remote.resolver import GuardedResolver
from fedqueue.remote.transport import Fetched
from fedqueue.rules.address_guard import check_url
from fedqueue.rules.lease_margin import STILL_SENDABLE, LeaseLapsed

T = TypeVar("T")

#: An idle kept connection is closed once idle this long, by the next sweep (`SWEEP_S`).
KEEPALIVE_S = 15.0
#: The least time between two sweeps of the idle connections: one is closed between
#: `KEEPALIVE_S` and `KEEPALIVE_S + SWEEP_S` after it was last used.
SWEEP_S = 1.0
#: The status of an idle connection timed out by its server (RFC 9110, 15.5.9).
REQUEST_TIMEOUT = 408


#: What a per-origin cap counts: one kind of request (its method) to one origin.
_Lane = tuple[str, Origin]


class Caps:
    """At most `per_lane` holders per lane and `total` overall; waiters are served in order.

    A request takes a place in its lane, then one of the total's, as from two semaphores: while
    it waits for the total it holds its lane's place, and a full lane keeps no other lane waiting.
    `take` is the fast path, both places at once without awaiting; `wait` queues for them.

    A released place is handed to the first waiter for it, never left free while someone waits:
    so a lane with room has no waiters, nor has the total when it has room, and `take` needs
    only the counts. A waiter cancelled before it is handed a place takes none; one cancelled
    just after passes its place on (as `asyncio.Semaphore` does). A lane is dropped once nobody
    holds or waits for it, so lanes cost memory only while in use.
    """

    def __init__(self, total: int, per_lane: int) -> None:
        self._per_lane = per_lane
        #: Places of the total not held.
        self._free = total
        #: Holders of each lane's places (waiters for the total among them), while any.
        self._held: dict[_Lane, int] = {}
        #: Waiters for a lane's place (while any), and for one of the total's, first come first.
        self._lane_waiters: dict[_Lane, deque[asyncio.Future[None]]] = {}
        self._total_waiters: deque[asyncio.Future[None]] = deque()

    def take(self, lane: _Lane) -> bool:
        """Take a place in `lane` and one of the total's if both have room now; else take none."""
        held = self._held.get(lane, 0)
        if held < self._per_lane and self._free:
            self._held[lane] = held + 1
            self._free -= 1
            return True
        return False

    async def wait(self, lane: _Lane) -> None:
        """Take a place in `lane`, then one of the total's, each waiting in line if it must."""
        held = self._held.get(lane, 0)
        if held < self._per_lane:
            self._held[lane] = held + 1
        else:
            waiters = self._lane_waiters.setdefault(lane, deque())
            try:
                await _handed(waiters, lambda: self._release_lane(lane))
            finally:
                if not waiters and self._lane_waiters.get(lane) is waiters:
                    del self._lane_waiters[lane]
        try:
            if self._free:
                self._free -= 1
            else:
                await _handed(self._total_waiters, self._release_total)
        except BaseException:
            self._release_lane(lane)
            raise

    async def acquire(self, lane: _Lane) -> None:
        """Take a place in `lane` and one of the total's (`take`, else `wait`)."""
        if not self.take(lane):
            await self.wait(lane)

    def release(self, lane: _Lane) -> None:
        """Give back the places `take` or `wait` took, each to the first waiter for it if any."""
        self._release_total()
        self._release_lane(lane)

    def _release_total(self) -> None:
        waiters = self._total_waiters
        if not (waiters and _hand_over(waiters)):
            self._free += 1

    def _release_lane(self, lane: _Lane) -> None:
        waiters = self._lane_waiters.get(lane)
        if waiters and _hand_over(waiters):
            return
        held = self._held[lane] - 1
        if held:
            self._held[lane] = held
        else:
            del self._held[lane]


async def _handed(waiters: deque[asyncio.Future[None]], give_back: Callable[[], None]) -> None:
    """Wait in line in `waiters` until a release hands over its place (`_hand_over`).

    Cancelled before that, take no place; cancelled as it was handed one, `give_back` it.
    """
    waiter = asyncio.get_running_loop().create_future()
    waiters.append(waiter)
    try:
        await waiter
    except BaseException:
        if waiter.done() and not waiter.cancelled():
            give_back()
        elif waiter in waiters:
            waiters.remove(waiter)
        raise


def _hand_over(waiters: deque[asyncio.Future[None]]) -> bool:
    """Wake the first of `waiters` still waiting, with the place being released; False if none is."""
    while waiters:
        waiter = waiters.popleft()
        if not waiter.done():
            waiter.set_result(None)
            return True
    return False


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
        #: Idle connections per origin, the longest idle first (`_kept` takes the last).
        self._idle: dict[Origin, list[Connection]] = {}
        #: The next sweep of `_idle`, armed while any connection is idle (`_keep`, `_sweep`).
        self._sweep_timer: asyncio.TimerHandle | None = None
        self._closed = False

    async def post(self, url: str, body: bytes, headers: dict[str, str], head_limit: int) -> Answer:
        """POST `body` to `url` and read the answer; `check_url`'s refusals are raised first."""
        origin, request = self._request("POST", url, headers, body)
        lane = ("POST", origin)
        # The hot path: `_capped`'s work without its context manager, the caps' fast path first.
        caps = self._caps
        if not caps.take(lane):
            await caps.wait(lane)
            if (sendable := STILL_SENDABLE.get()) is not None and not sendable():
                caps.release(lane)  # waited past its sender's lease: not sent (issue 48)
                raise LeaseLapsed(url)
        try:
            connection, answer = await self._on_a_connection(
                origin, lambda kept: kept.exchange(request, head_limit)
            )
            self._done_with(connection)
            return answer
        finally:
            caps.release(lane)

    @asynccontextmanager
    async def get(self, url: str, headers: dict[str, str]) -> AsyncIterator[Fetched]:
        """GET `url`: the answer's status and headers, its body to read inside the block, which
        holds a place in the caps. `check_url`'s refusals are raised first.

        The connection is kept afterwards only if the whole answer has arrived by the end of the
        block: one whose body was left unread in mid-flow is closed, never reused out of step.
        """
        origin, request = self._request("GET", url, headers, None)
        async with self._capped(("GET", origin)):
            connection, status = await self._on_a_connection(origin, lambda kept: kept.fetch(request))
            try:
                yield Fetched(status, connection.headers, connection.next_chunk)
            finally:
                self._done_with(connection)

    def _request(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[Origin, bytes]:
        """The request's origin and bytes, `url` checked first."""
        check_url(url, allow_private=self._allow_private)
        target = target_of(url)
        return target.origin, request_bytes(method, target, headers, body, self.user_agent)

    @asynccontextmanager
    async def _capped(self, lane: _Lane) -> AsyncIterator[None]:
        """Holding a place in the caps for `lane`."""
        await self._caps.acquire(lane)
        try:
            yield
        finally:
            self._caps.release(lane)

    async def close(self) -> None:
        """Close the idle connections and stop their sweep; none is kept afterwards."""
        self._closed = True
        if self._sweep_timer is not None:
            self._sweep_timer.cancel()
            self._sweep_timer = None
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
            if not connection.closed:
                if not connections:
                    del self._idle[origin]
                return connection
        self._idle.pop(origin, None)
        return None

    def _keep(self, connection: Connection) -> None:
        """List `connection` as idle since now; the sweep, if none is armed, is due when it expires.

        One timer for the pool rather than one per connection put back: arming and cancelling a
        timer for each request cost the event loop more than the rest of keeping the connection.
        """
        loop = asyncio.get_running_loop()
        connection.idle_since = loop.time()
        self._idle.setdefault(connection.origin, []).append(connection)
        if self._sweep_timer is None:
            self._sweep_timer = loop.call_at(connection.idle_since + KEEPALIVE_S, self._sweep)

    def _sweep(self) -> None:
        """Close the connections idle for `KEEPALIVE_S` or more, and arm the next sweep while any
        stay idle: when the longest idle of them expires, but not within `SWEEP_S` of this one.

        Each origin's list is in the order its connections went idle (`_keep` appends, `_kept`
        takes the last), so the expired ones are at its start, and its first is its longest idle.
        A connection the server closed while idle stays listed until it expires, as `_kept`
        passes it by.
        """
        loop = asyncio.get_running_loop()
        now = loop.time()
        oldest = now
        for origin, connections in list(self._idle.items()):
            expired = 0
            while expired < len(connections) and connections[expired].idle_since + KEEPALIVE_S <= now:
                connections[expired].close()
                expired += 1
            del connections[:expired]
            if connections:
                oldest = min(oldest, connections[0].idle_since)
            else:
                del self._idle[origin]
        self._sweep_timer = None
        if self._idle:
            self._sweep_timer = loop.call_at(max(oldest + KEEPALIVE_S, now + SWEEP_S), self._sweep)

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
