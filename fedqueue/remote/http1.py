"""HTTP/1.1 on the wire for delivery POSTs and document GETs: the answers, parsed (`remote/pool`
keeps the connections; `http1_requests` frames the requests).

The worker's hot path is one POST per delivery, to inboxes it POSTs to again and again. Through
aiohttp's `ClientSession` that request cost about half of the event loop's time per delivery
(its request and response models, URL and header objects, tracing, cookie handling); here a POST
is one buffer (`http1_requests.request_bytes`) written to a kept connection and an answer parsed by llhttp
(`httptools`, which uvicorn already brings) on a `Connection`, keeping only what a delivery
records: the status, Retry-After, Accept-Signature and the head of a refusing body (the figures:
docs/benchmarks/history.md, Fifth pass). A GET (a key or actor fetch) is the same exchange
with its body streamed instead (`Connection.fetch`, `Connection.next_chunk`), decoded and
capped by the client.

What an answer may make a connection hold besides its body is bounded (`Limits`: its head's
bytes and header lines); past it, or with bytes after a whole answer, the request fails at once
(`Refused`) and the connection is closed.

What it does not do, because neither needs it: redirects, proxies, cookies, `Expect: 100-continue`.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import httptools

from fedqueue.remote.http1_requests import Origin

#: An answer's body is read past its head, and dropped, up to this size so that its connection
#: can be kept; past it the connection is closed instead.
DRAIN_BYTES = 65_536
#: A streamed body is buffered up to this size before the connection stops reading, and goes
#: on reading once the reader has taken it below `RESUME_BYTES`.
PAUSE_BYTES = 262_144
RESUME_BYTES = 65_536
#: The headers a `Connection` keeps (lowercase): the rest are parsed and dropped.
KEPT_HEADERS = frozenset(
    {
        b"retry-after",
        b"accept-signature",
        b"content-type",
        b"content-length",
        b"content-encoding",
        b"transfer-encoding",
    }
)
#: Why a `Connection` refused an answer (`Refused.reason`, the label of
#: `fedqueue_http_client_refused_total`): a head over `Limits.head_bytes`, more headers than
#: `Limits.headers`, or bytes after a whole answer that nothing asked for.
HEAD_TOO_LARGE = "head_too_large"
TOO_MANY_HEADERS = "too_many_headers"
BYTES_AFTER_ANSWER = "bytes_after_answer"


@dataclass(frozen=True)
class Limits:
    """What an answer may make its connection hold besides its body, and whom to tell of a refusal."""

    #: Bytes of head (status line and headers, with any 1xx answers before them), and of
    #: anything else but body in a row later (chunk framing, trailers).
    head_bytes: int
    #: Header lines of an answer, its trailers and 1xx answers included.
    headers: int
    #: Told the reason of each refusal (a metric label).
    refused: Callable[[str], None]


@dataclass(slots=True)  # not frozen: built per delivery, and frozen costs 0.1 µs a field
class Answer:
    """What a POST got back: the status, the head of a non-2xx body, Retry-After, and
    Accept-Signature (RFC 9421 §5.1: the signature a refusing server asks for)."""

    status: int
    body_head: bytes = b""
    retry_after: str | None = None
    accept_signature: str | None = None


class ServerDisconnected(ConnectionError):
    """The connection closed before a whole answer's status line and headers arrived."""


class BadAnswer(ConnectionError):
    """What came back is not an HTTP/1.1 answer."""


class Refused(BadAnswer):
    """An answer past one of the `Limits`, or followed by more: its connection is closed at once."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class Connection(asyncio.Protocol):
    """One kept connection, one request at a time: a POST's whole answer (`exchange`), or a
    GET's status and headers (`fetch`) and then its body chunk by chunk (`next_chunk`)."""

    def __init__(self, origin: Origin, limits: Limits) -> None:
        self.origin = origin
        self._limits = limits
        self.transport: asyncio.Transport | None = None
        self.closed = False
        #: Whether the last answer was read to its end and left the connection fit for the next request.
        self.reusable = False
        #: Whether anything came back since the current request was written.
        self.answered = False
        #: The current answer's headers among `KEPT_HEADERS`, as sent (Latin-1).
        self.headers: dict[bytes, str] = {}
        #: When it was last put back idle, in the event loop's time (`Pool`).
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        #: From a request's write until its answer is whole: bytes coming at any other time are out of step.
        self._busy = False
        #: Settled with the answer: whole for a POST, its status and headers for a GET (`_streaming`).
        self._waiter: asyncio.Future[Answer] | None = None
        self._streaming = False
        self._head_limit = 0
        #: Bytes fed since the last progress (a head's end, body, an answer's end), and header
        #: lines since the request: what `Limits` bounds.
        self._stalled = 0
        self._progressed = False
        self._header_count = 0
        self._status = 0
        self._head = bytearray()
        self._read = 0
        # A streamed body: chunks not yet taken, their size, and how it ended.
        self._chunks: deque[bytes] = deque()
        self._buffered = 0
        self._paused = False
        self._body_done = False
        self._body_error: BaseException | None = None
        self._more: asyncio.Future[None] | None = None

    # --- asyncio.Protocol ---
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        self.answered = True
        if not self._busy:
            self.close()  # nothing was asked: the connection is out of step
            return
        try:
            self._feed(data)
        except httptools.HttpParserUpgrade:
            self._fail(BadAnswer("the server switched protocols (101) instead of answering"))
        except httptools.HttpParserCallbackError as exc:
            refused = exc.__context__  # what a callback raised
            self._fail(refused if isinstance(refused, Refused) else BadAnswer(f"not an HTTP answer: {exc}"))
        except httptools.HttpParserError as exc:
            self._fail(BadAnswer(f"not an HTTP answer: {exc}"))
        except Refused as exc:
            self._fail(exc)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if not self._busy:
            return
        if self._status >= 200 and (not self._streaming or self._ends_with_connection()):
            self._busy = False
            self._settle()  # the body ran to the end of the connection: the answer is whole
            self._end_body()
        elif exc is not None:
            self._fail(exc)
        elif self._status >= 200:
            self._fail(ServerDisconnected("Server disconnected before the end of the body"))
        else:
            self._fail(ServerDisconnected("Server disconnected"))

    # --- httptools callbacks ---
    def on_message_begin(self) -> None:
        if not self._busy:
            # More came after the whole answer, in the same read: the connection is out of step.
            # Parsing stops here, so that the answer given keeps its own headers and body.
            self.reusable = False
            raise self._refuse(BYTES_AFTER_ANSWER, "the server sent more after its whole answer")

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self._limits.headers:
            raise self._refuse(TOO_MANY_HEADERS, f"the answer has over {self._limits.headers} headers")
        name = name.lower()
        if name in KEPT_HEADERS:
            self.headers[name] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self._progressed = True
        self._status = self._parser.get_status_code()
        if self._streaming and self._status >= 200:
            self._settle()

    def on_body(self, body: bytes) -> None:
        self._progressed = True
        if self._streaming:
            self._chunks.append(body)
            self._buffered += len(body)
            if self._buffered > PAUSE_BYTES and not self._paused and self.transport is not None:
                self._paused = True
                self.transport.pause_reading()
            self._wake()
            return
        room = self._head_limit - len(self._head)
        if room > 0 and not 200 <= self._status < 300:
            self._head += body[:room]
        self._read += len(body)
        if self._read > DRAIN_BYTES:
            self._settle()
            self.close()

    def on_message_complete(self) -> None:
        self._progressed = True
        if self._status < 200:  # 1xx: an interim answer, the real one follows
            self._status = 0
            self.headers = {}
            return
        self._busy = False
        self.reusable = self._parser.should_keep_alive()
        self._settle()
        self._end_body()

    # ---
    @property
    def status(self) -> int:
        """The current answer's status once its head has arrived (0 before)."""
        return self._status

    async def exchange(self, request: bytes, head_limit: int) -> Answer:
        """Write `request` and wait for its answer (of a non-2xx body, the first `head_limit` bytes)."""
        self._streaming = False
        self._head_limit = head_limit
        self._read = 0
        return await self._send(request)

    async def fetch(self, request: bytes) -> int:
        """Write `request` and wait for its answer's status and `headers`; `next_chunk` gives its body."""
        self._streaming = True
        self._chunks.clear()
        self._buffered = 0
        self._body_done = False
        self._body_error = None
        return (await self._send(request)).status

    async def next_chunk(self) -> bytes:
        """The next piece of a fetched body as it came, or b"" at its end (ConnectionError if cut short)."""
        while not self._chunks:
            if self._body_error is not None:
                raise self._body_error
            if self._body_done:
                return b""
            self._more = asyncio.get_running_loop().create_future()
            await self._more
        chunk = self._chunks.popleft()
        self._buffered -= len(chunk)
        if self._buffered < RESUME_BYTES:
            self._resume()
        return chunk

    def close(self) -> None:
        """Drop the connection; an idle one stays listed until the pool's sweep takes it out."""
        self.closed = True
        if self.transport is not None:
            self.transport.abort()

    async def _send(self, request: bytes) -> Answer:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._status = 0
        self.headers = {}
        self._head = bytearray()
        self.answered = False
        self.reusable = False
        self._stalled = 0
        self._header_count = 0
        self._busy = True
        self.transport.write(request)
        return await self._waiter

    def _feed(self, data: bytes) -> None:
        """Parse `data` in pieces of at most `Limits.head_bytes`, refusing the answer once a whole
        piece or more went by without progress (a head's end, body, an answer's end): httptools
        holds a header's name and value whole until its end, and would hold an endless one
        endlessly. A head over the limit is refused at its first byte past it; framing or
        trailers after body, within twice the limit (progress counts for its whole piece)."""
        view = memoryview(data)
        while view and not self.closed:
            room = self._limits.head_bytes - self._stalled
            if room <= 0:
                raise self._refuse(
                    HEAD_TOO_LARGE, f"the answer's head is over {self._limits.head_bytes} bytes"
                )
            piece, view = view[:room], view[room:]
            self._progressed = False
            self._parser.feed_data(piece)
            self._stalled = 0 if self._progressed else self._stalled + len(piece)

    def _refuse(self, reason: str, message: str) -> Refused:
        """The refusal to raise, told to `Limits.refused` first."""
        self._limits.refused(reason)
        return Refused(reason, message)

    def _ends_with_connection(self) -> bool:
        """Whether the answer's body is delimited by the end of the connection (no length, not chunked)."""
        return b"content-length" not in self.headers and b"transfer-encoding" not in self.headers

    def _settle(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            headers = self.headers
            self._waiter.set_result(
                Answer(
                    self._status,
                    bytes(self._head),
                    headers.get(b"retry-after"),
                    headers.get(b"accept-signature"),
                )
            )

    def _end_body(self) -> None:
        if self._streaming:
            self._body_done = True
            self._wake()
            self._resume()  # the answer is whole: an idle connection must see the server close it

    def _resume(self) -> None:
        if self._paused and self.transport is not None:
            self._paused = False
            self.transport.resume_reading()

    def _wake(self) -> None:
        if self._more is not None and not self._more.done():
            self._more.set_result(None)

    def _fail(self, exc: BaseException) -> None:
        self._busy = False
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(exc)
        elif self._streaming and not self._body_done:
            self._body_error = exc
            self._wake()
        self.close()
