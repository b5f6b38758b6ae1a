"""Delivery POSTs over HTTP/1.1: connections kept per origin, answers parsed by llhttp.

The worker's hot path is one POST per delivery, to inboxes it POSTs to again and again. Through
aiohttp's `ClientSession` that request cost about half of the event loop's time per delivery
(its request and response models, URL and header objects, tracing, cookie handling); here a POST
is one buffer written to a kept connection and an answer parsed by llhttp (`httptools`, which
uvicorn already brings), keeping only what a delivery records: the status, Retry-After and the
head of a refusing body. README, Benchmark, has the figures.

What a pool does:
- at most `per_host` requests in flight per origin and `total` overall; `slot` lets other
  requests (the client's GETs) count against the same caps;
- connections kept per origin (scheme, host, port) while idle for up to `KEEPALIVE_S`, one
  request at a time each; a kept connection the server closed meanwhile is replaced, and the
  POST sent once more on a new one, only when the server sent nothing back on it;
- names resolved at most once per `DNS_TTL_S`, with the addresses the guard forbids dropped
  (as `GuardedResolver` does for aiohttp): the address connected to is one that was checked;
- TLS with the system's trust store and SNI.

What it does not do, because a delivery needs none of it: redirects, proxies, cookies,
compression, `Expect: 100-continue`.
"""

from __future__ import annotations

import asyncio
import re
import socket
import ssl
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import cast
from urllib.parse import quote, urlsplit

import httptools

from fedqueue.remote.guard import ForbiddenAddress, is_forbidden_ip

#: An idle kept connection is closed after this long.
KEEPALIVE_S = 15.0
#: A resolved name is used for this long before it is resolved again.
DNS_TTL_S = 60.0
#: Names kept resolved at most; past it, the expired ones are dropped.
DNS_CACHE_SIZE = 4096
#: An answer's body is read past its head, and dropped, up to this size so that its connection
#: can be kept; past it the connection is closed instead.
DRAIN_BYTES = 65_536
#: Characters left as they are in a request target; others (spaces, non-ASCII, `<>{}|^`) are %-escaped.
TARGET_SAFE = "/?=&;%:@!$'()*+,~-._"
PLAIN_TARGET = re.compile(r"[A-Za-z0-9/?=&;%:@!$'()*+,~._-]*")
#: A header name (RFC 9110 token), and what no header value may hold.
TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
UNWRITABLE = re.compile(r"[\r\n\0]")

Origin = tuple[str, str, int]


@dataclass(frozen=True)
class Answer:
    """What a POST got back: the status, the head of a non-2xx body, and Retry-After."""

    status: int
    body_head: bytes = b""
    retry_after: str | None = None


class ServerDisconnected(ConnectionError):
    """The connection closed before a whole answer's status line and headers arrived."""


class BadAnswer(ConnectionError):
    """What came back is not an HTTP/1.1 answer."""


class BadRequestLine(ValueError):
    """A header value that would end its line early, or a header not writable as Latin-1."""


@dataclass(frozen=True)
class Target:
    """Where one URL's POSTs go: its origin, its Host header and its request target."""

    origin: Origin
    netloc: str
    target: str


@lru_cache(maxsize=4096)
def target_of(url: str) -> Target:
    """Split once per URL (inboxes repeat); the URL has passed `check_url`."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if PLAIN_TARGET.fullmatch(target) is None:
        target = quote(target, safe=TARGET_SAFE)
    return Target((parts.scheme, host, port), parts.netloc, target)


def request_bytes(target: Target, headers: dict[str, str], body: bytes, user_agent: str) -> bytes:
    """The request's bytes: its line, Host, `headers`, User-Agent, Content-Length, then `body`."""
    lines = [f"POST {target.target} HTTP/1.1"]
    if "host" not in headers and "Host" not in headers:
        lines.append(f"Host: {target.netloc}")
    for name, value in headers.items():
        if TOKEN.fullmatch(name) is None or UNWRITABLE.search(value) is not None:
            raise BadRequestLine(f"header {name[:40]!r} cannot be written on one line")
        lines.append(f"{name}: {value}")
    lines.append(f"User-Agent: {user_agent}")
    lines.append(f"Content-Length: {len(body)}")
    try:
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError:
        raise BadRequestLine("a header is not writable as Latin-1") from None
    return head + body


class _Connection(asyncio.Protocol):
    """One kept connection: one request at a time; `exchange` gives its answer."""

    def __init__(self, origin: Origin) -> None:
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.closed = False
        #: Whether the last answer left the connection fit for the next request.
        self.reusable = False
        #: Whether anything came back since the current request was written.
        self.answered = False
        self.idle_timer: asyncio.TimerHandle | None = None
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[Answer] | None = None
        self._head_limit = 0
        self._status = 0
        self._retry_after: str | None = None
        self._head = bytearray()
        self._read = 0

    # --- asyncio.Protocol ---
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.answered = True
        if self._waiter is None or self._waiter.done():
            self.close()  # nothing was asked: the connection is out of step
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(BadAnswer("the server switched protocols (101) instead of answering"))
        except httptools.HttpParserError as exc:
            self._fail(BadAnswer(f"not an HTTP answer: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self._waiter is None or self._waiter.done():
            return
        if self._status >= 200:
            self._settle()  # the body ran to the end of the connection: the answer is whole
        elif exc is not None:
            self._fail(exc)
        else:
            self._fail(ServerDisconnected("Server disconnected"))

    # --- httptools callbacks ---
    def on_message_begin(self) -> None:
        if self._waiter is not None and self._waiter.done():
            self.reusable = False  # more came after the whole answer: the connection is out of step

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"retry-after":
            self._retry_after = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._status = self._parser.get_status_code()

    def on_body(self, body: bytes) -> None:
        room = self._head_limit - len(self._head)
        if room > 0 and not 200 <= self._status < 300:
            self._head += body[:room]
        self._read += len(body)
        if self._read > DRAIN_BYTES:
            self._settle()
            self.close()

    def on_message_complete(self) -> None:
        if self._status < 200:  # 1xx: an interim answer, the real one follows
            self._status = 0
            self._retry_after = None
            return
        self.reusable = self._parser.should_keep_alive()
        self._settle()

    # ---
    async def exchange(self, request: bytes, head_limit: int) -> Answer:
        """Write `request` and wait for its answer (of a non-2xx body, the first `head_limit` bytes)."""
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._head_limit = head_limit
        self._status = 0
        self._retry_after = None
        self._head = bytearray()
        self._read = 0
        self.answered = False
        self.reusable = False
        self.transport.write(request)
        return await self._waiter

    def close(self) -> None:
        """Drop the connection; an idle one stays listed until its timer takes it out (`Pool._expire`)."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    def _settle(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(Answer(self._status, bytes(self._head), self._retry_after))

    def _fail(self, exc: BaseException) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        self.close()


class _Caps:
    """At most `per_origin` holders per origin and `total` overall; waiters are served in order."""

    def __init__(self, total: int, per_origin: int) -> None:
        self._total = asyncio.Semaphore(total)
        self._per_origin = per_origin
        self._origins: dict[Origin, asyncio.Semaphore] = {}
        #: Holders and waiters per origin: an origin's semaphore is dropped once nobody uses it.
        self._users: Counter[Origin] = Counter()

    async def acquire(self, origin: Origin) -> None:
        semaphore = self._origins.get(origin)
        if semaphore is None:
            semaphore = self._origins[origin] = asyncio.Semaphore(self._per_origin)
        self._users[origin] += 1
        try:
            await semaphore.acquire()
        except BaseException:
            self._leave(origin)
            raise
        try:
            await self._total.acquire()
        except BaseException:
            semaphore.release()
            self._leave(origin)
            raise

    def release(self, origin: Origin) -> None:
        self._total.release()
        self._origins[origin].release()
        self._leave(origin)

    def _leave(self, origin: Origin) -> None:
        self._users[origin] -= 1
        if not self._users[origin]:
            del self._users[origin]
            del self._origins[origin]


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
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.user_agent = user_agent
        self._caps = _Caps(total, per_host)
        self._connect_timeout_s = connect_timeout_s
        self._allow_private = allow_private
        self._tls = tls
        self._idle: dict[Origin, list[_Connection]] = {}
        self._closed = False
        #: (host, port) -> (resolved at, addresses as (family, address)).
        self._addresses: dict[tuple[str, int], tuple[float, list[tuple[int, str]]]] = {}

    @asynccontextmanager
    async def slot(self, url: str) -> AsyncIterator[None]:
        """Hold one of the caps' places for `url`'s origin, for a request made elsewhere."""
        origin = target_of(url).origin
        await self._caps.acquire(origin)
        try:
            yield
        finally:
            self._caps.release(origin)

    async def post(self, url: str, body: bytes, headers: dict[str, str], head_limit: int) -> Answer:
        """POST `body` to `url` (which has passed `check_url`) and read the answer."""
        target = target_of(url)
        request = request_bytes(target, headers, body, self.user_agent)
        origin = target.origin
        await self._caps.acquire(origin)
        try:
            connection = self._kept(origin)
            if connection is not None:
                try:
                    return await self._exchange(connection, request, head_limit)
                except ConnectionError:
                    if connection.answered:
                        raise
                    # Nothing came back: most likely the server closed the kept connection while
                    # it was idle, before the POST reached it. A server that read the POST and
                    # then closed without a word gets it twice; inboxes dedupe by activity id.
            connection = await self._connect(origin)
            return await self._exchange(connection, request, head_limit)
        finally:
            self._caps.release(origin)

    async def close(self) -> None:
        self._closed = True
        for connections in self._idle.values():
            for connection in connections:
                connection.close()
        self._idle.clear()

    async def _exchange(self, connection: _Connection, request: bytes, head_limit: int) -> Answer:
        try:
            answer = await connection.exchange(request, head_limit)
        except BaseException:
            connection.close()  # cancelled or failed mid-answer: never reused
            raise
        if connection.reusable and not connection.closed and not self._closed:
            self._keep(connection)
        else:
            connection.close()
        return answer

    def _kept(self, origin: Origin) -> _Connection | None:
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

    def _keep(self, connection: _Connection) -> None:
        self._idle.setdefault(connection.origin, []).append(connection)
        connection.idle_timer = asyncio.get_running_loop().call_later(KEEPALIVE_S, self._expire, connection)

    def _expire(self, connection: _Connection) -> None:
        connections = self._idle.get(connection.origin, [])
        if connection in connections:
            connections.remove(connection)
            if not connections:
                del self._idle[connection.origin]
        connection.idle_timer = None
        connection.close()

    async def _connect(self, origin: Origin) -> _Connection:
        scheme, host, port = origin
        tls = None
        if scheme == "https":
            if self._tls is None:
                self._tls = ssl.create_default_context()
            tls = self._tls
        loop = asyncio.get_running_loop()
        failure: OSError | None = None
        for family, address in await self._resolve(host, port):
            try:
                async with asyncio.timeout(self._connect_timeout_s):
                    _transport, connection = await loop.create_connection(
                        lambda: _Connection(origin),
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

    async def _resolve(self, host: str, port: int) -> list[tuple[int, str]]:
        """The addresses to try for `host`, forbidden ones dropped (unless private ones are allowed)."""
        bare = host.strip("[]")
        literal = socket.AF_INET6 if ":" in bare else socket.AF_INET
        try:
            socket.inet_pton(literal, bare)
        except OSError:
            pass
        else:
            if not self._allow_private and is_forbidden_ip(bare):
                raise ForbiddenAddress(f"{bare} is a private or loopback address")
            return [(literal, bare)]
        now = time.monotonic()
        cached = self._addresses.get((host, port))
        if cached is not None and now - cached[0] < DNS_TTL_S:
            return cached[1]
        found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        addresses = list(dict.fromkeys((int(family), str(address[0])) for family, _, _, _, address in found))
        if not self._allow_private:
            addresses = [(family, address) for family, address in addresses if not is_forbidden_ip(address)]
            if not addresses:
                raise ForbiddenAddress(f"{host} resolves only to private or loopback addresses")
        if len(self._addresses) >= DNS_CACHE_SIZE:
            fresh = {key: seen for key, seen in self._addresses.items() if now - seen[0] < DNS_TTL_S}
            self._addresses = fresh if len(fresh) < DNS_CACHE_SIZE // 2 else {}
        self._addresses[(host, port)] = (now, addresses)
        return addresses
