"""HTTP/1.1 on the wire for delivery POSTs: framing and parsing (`remote/pool` keeps the connections).

The worker's hot path is one POST per delivery, to inboxes it POSTs to again and again. Through
aiohttp's `ClientSession` that request cost about half of the event loop's time per delivery
(its request and response models, URL and header objects, tracing, cookie handling); here a POST
is one buffer (`request_bytes`) written to a kept connection and an answer parsed by llhttp
(`httptools`, which uvicorn already brings) on a `Connection`, keeping only what a delivery
records: the status, Retry-After and the head of a refusing body. README, Benchmark, has the
figures.

What it does not do, because a delivery needs none of it: redirects, proxies, cookies,
compression, `Expect: 100-continue`.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import cast
from urllib.parse import quote, urlsplit

import httptools

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


class Connection(asyncio.Protocol):
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
        """Drop the connection; an idle one stays listed until its timer takes it out (`Pool`)."""
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
