"""The one outbound HTTP client: connection reuse, concurrency caps, size caps, address guard.

Policy lives here (signing, timeouts, decoding and capping bodies, what a failure means); the
I/O of each request is a transport's (`remote.transport.Transport`), chosen by `http_transport`:
`remote.pool.Pool`, the default, with kept connections and llhttp parsing (`remote.http1`),
measured at a fraction of aiohttp's CPU per request (docs/benchmarks/history.md, Fifth and
Sixth pass), or `remote.httpx_transport.HttpxTransport`, which unit tests drive through respx.
Delivery POSTs and document GETs (streamed, decoded as they come by `remote.decoding`, capped)
go through it alike, and its per-host and total caps hold across both.

The address guard (`guard`) works at two depths in either transport. `check_url` refuses URLs
whose host is an IP literal in a forbidden range before any request is made; the transport's
resolver (`remote.resolver`) refuses names that resolve to such addresses at connect time
(`allowed_addresses`), so a DNS answer that changes between a check and the connection
(rebinding) cannot slip through.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from typing_extensions import TypedDict, Unpack

from fedqueue import __version__
from fedqueue.metrics import Metrics
from fedqueue.remote.capped import read_capped
from fedqueue.remote.decoding import ACCEPT_ENCODING, coding_of, decoded
from fedqueue.remote.http1 import Answer, Limits
from fedqueue.remote.http1_requests import BadRequestLine
from fedqueue.remote.httpx_transport import HttpxTransport
from fedqueue.remote.pool import Pool
from fedqueue.remote.signing_threads import SigningThreads
from fedqueue.remote.transport import Transport
from fedqueue.rules.activitystreams import ACTIVITY_JSON
from fedqueue.rules.address_guard import FetchError, forbidden_cause
from fedqueue.rules.errors import FedqueueError, TooLarge
from fedqueue.rules.signing.requests import (
    SignatureScheme,
    Unsigned,
    authority,
    http_date,
    signing_algorithm,
    unsigned_digested,
)
from fedqueue.rules.signing.unsigned import sign_bytes
from fedqueue.settings import Settings

#: Threads that sign GETs (`HttpClient.signing`): a key fetch's signature then costs the event
#: loop nothing. Each signature takes the GIL twice (around OpenSSL's work) and waits for it up
#: to the switch interval each time while the event loop is busy: one thread, near its limit
#: at 500-580 signatures a second, kept a key fetch waiting 17-21 ms for its own, and Follows
#: from new senders near that rate (docs/benchmarks/history.md, Ninth pass). Two keep up; a
#: third added nothing.
FETCH_SIGNING_THREADS = 2


@dataclass(frozen=True)
class SigningIdentity:
    """Who signs an outbound request: a local actor's key id and private key (RSA), and its
    Ed25519 key and key id (`<actor>#ed25519-key`, FEP-521a) when it has one."""

    key_id: str
    private_key: PrivateKeyTypes
    ed25519_key: Ed25519PrivateKey | None = None
    ed25519_key_id: str | None = None
    #: When the actor's key was last rotated (`key_rotated_at`): a refusal soon after is retried.
    rotated_at: datetime | None = None

    def as_ed25519(self) -> SigningIdentity | None:
        """The identity that signs with the Ed25519 key (RFC 9421 only); None without one."""
        if self.ed25519_key is None or self.ed25519_key_id is None:
            return None
        return SigningIdentity(self.ed25519_key_id, self.ed25519_key)


#: The label of `fedqueue_http_client_refused_total` for a document over `max_document_bytes`
#: (the others are `http1`'s refusals).
BODY_TOO_LARGE = "body_too_large"

#: What a request can raise besides our own errors (`remote.transport`): sockets', timeouts, and
#: ValueError for what URL or header parsers refuse.
CLIENT_ERRORS = (OSError, TimeoutError, ValueError)


@dataclass(frozen=True)
class Reply:
    """A GET's answer: its status, its media type (lowercase, no parameters) and its body,
    read when awaited (TooLarge past `max_document_bytes`)."""

    status: int
    media_type: str
    read: Callable[[], Awaitable[bytes]]


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


class SendFailed(FedqueueError):
    """A POST got no answer; `permanent`: trying again cannot help (a forbidden address, a bad URL)."""

    def __init__(self, message: str, *, permanent: bool) -> None:
        super().__init__(message)
        self.permanent = permanent


def tls_context(ca_file: str) -> ssl.SSLContext | None:
    """The system's CAs, and those of `ca_file` if set (None: the pool makes the default one)."""
    if not ca_file:
        return None
    context = ssl.create_default_context()
    context.load_verify_locations(cafile=ca_file)
    return context


class HttpClient:
    """Shared by every fetch and delivery of a process; close it with `aclose`.

    `signing`: threads for the signatures of its fetches (started on first use). `metrics`: the
    process's recorder, told of each answer refused (over a cap, or out of step).
    """

    def __init__(
        self, settings: Settings, transport: Transport | None = None, *, metrics: Metrics | None = None
    ) -> None:
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.user_agent = f"fedqueue/{__version__} (+{settings.base_url})"
        self.max_document_bytes = settings.max_document_bytes
        self._total_timeout_s = settings.total_timeout_seconds
        self._deadlines = Deadlines(settings.total_timeout_seconds)
        self._transport = transport or new_transport(settings, self.user_agent, self.metrics)
        self.signing = SigningThreads(FETCH_SIGNING_THREADS)

    async def post(self, url: str, content: bytes, headers: dict[str, str], *, head_bytes: int) -> Answer:
        """POST `content` (guarded, with the total timeout): the answer, or SendFailed saying why.

        Of a non-2xx answer's body only the first `head_bytes` are read.

        The total timeout is `asyncio.timeout`'s, unrolled: its object, its two coroutines and
        its rescheduled timer were a measurable part of the client's work for each POST. As
        there, the deadline cancels the task (`Deadlines`), and on the way out a cancellation
        that was only the deadline's (`uncancel` back to the count at the start) is a timeout;
        one from outside, or an enclosing timeout's, goes on as CancelledError.
        """
        loop = asyncio.get_running_loop()
        task = asyncio.current_task(loop)
        assert task is not None, "HttpClient.post runs in a task"
        cancelling = task.cancelling()
        deadline = self._deadlines.start(loop, task)
        try:
            try:
                return await self._transport.post(url, content, headers, head_bytes)  # guarded at its door
            finally:
                deadline.task = None
                timed_out = deadline.expired and task.uncancel() <= cancelling
        except asyncio.CancelledError:
            if not timed_out:
                raise
            failure: Exception = TimeoutError()
        except FetchError as exc:  # not an http(s) URL
            raise SendFailed(str(exc), permanent=True) from None
        except CLIENT_ERRORS as exc:
            failure = exc
        permanent = forbidden_cause(failure) is not None or isinstance(failure, BadRequestLine)
        raise SendFailed(describe_http_error(failure), permanent=permanent) from None

    @asynccontextmanager
    async def get(
        self, url: str, headers: dict[str, str], *, timeout_s: float | None = None
    ) -> AsyncIterator[Reply]:
        """A guarded GET whose whole exchange (connect to last byte) has the total timeout.

        `timeout_s`, when shorter, replaces it. Every failure of the client, including reading
        the body inside the block, comes out as one FetchError.
        """
        limit_s = self._total_timeout_s if timeout_s is None else min(timeout_s, self._total_timeout_s)
        cap = self.max_document_bytes
        try:
            async with asyncio.timeout(limit_s):
                asked = {**headers, "Accept-Encoding": ACCEPT_ENCODING}
                async with self._transport.get(url, asked) as fetched:  # guarded at its door
                    answer = fetched.headers.get
                    body = decoded(fetched.next_chunk, coding_of(answer(b"content-encoding")))
                    yield Reply(
                        fetched.status,
                        _media_type(answer(b"content-type")),
                        partial(read_capped, body, answer(b"content-length"), cap, "response"),
                    )
        except TooLarge:
            self.metrics.client_refused(BODY_TOO_LARGE)
            raise
        except CLIENT_ERRORS as exc:
            raise FetchError(f"GET {url} failed: {describe_http_error(exc)}") from None

    async def aclose(self) -> None:
        self.signing.close()
        await self._transport.close()


@dataclass(slots=True)  # not frozen: built per POST, and ended by setting `task` to None
class Deadline:
    """When one POST's task is cancelled unless it has ended (`task` None) by then."""

    at: float
    task: asyncio.Task[Any] | None
    expired: bool = False


#: Deadlines the line holds before it is first swept of ended ones (`Deadlines`).
SWEEP_MIN = 4096


class Deadlines:
    """The POSTs' total timeouts, on one timer for them all rather than one each.

    Arming and cancelling a loop timer per POST cost the event loop more than the rest of the
    timeout's work. Every POST gets the same timeout, so the deadlines come in the order the
    POSTs start: they wait in that order, and one timer is armed, for the earliest. When it
    fires, each POST whose deadline has come and that has not ended is cancelled, the ended
    ones are dropped, and the timer is armed for the next. Ended ones at the head are also
    dropped as POSTs start, and behind a POST that lasts (a host slow to answer) the line is
    swept of them whenever it has doubled, so it holds at most about twice what is in flight
    (and `SWEEP_MIN`) rather than every POST made within a timeout.
    """

    def __init__(self, timeout_s: float) -> None:
        self._timeout_s = timeout_s
        self._waiting: deque[Deadline] = deque()
        self._timer: asyncio.TimerHandle | None = None
        #: When the armed timer is due: those whose deadline is no later have come.
        self._timer_at = 0.0
        #: The loop the waiting deadlines and the timer are of (a client may outlive one).
        self._loop: asyncio.AbstractEventLoop | None = None
        #: The length at which the line is next swept of ended deadlines.
        self._sweep_at = SWEEP_MIN

    def start(self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[Any]) -> Deadline:
        """`task`'s deadline, the timeout from now; set its `task` to None once the POST ends."""
        if loop is not self._loop:
            self._forget(loop)
        deadline = Deadline(loop.time() + self._timeout_s, task)
        waiting = self._waiting
        while waiting and waiting[0].task is None:
            waiting.popleft()
        if len(waiting) >= self._sweep_at:
            waiting = self._waiting = deque(d for d in waiting if d.task is not None)
            self._sweep_at = max(SWEEP_MIN, 2 * len(waiting))
        waiting.append(deadline)
        if self._timer is None:
            self._arm(loop, deadline.at)
        return deadline

    def __len__(self) -> int:
        """The deadlines held: those of the POSTs in flight, and ended ones not yet dropped."""
        return len(self._waiting)

    def _forget(self, loop: asyncio.AbstractEventLoop) -> None:
        """Forget every deadline and disarm the timer: POSTs run on `loop` now, not on theirs."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._waiting.clear()
        self._loop = loop

    def _arm(self, loop: asyncio.AbstractEventLoop, at: float) -> None:
        self._timer_at = at
        self._timer = loop.call_at(at, self._expire, loop)

    def _expire(self, loop: asyncio.AbstractEventLoop) -> None:
        self._timer = None
        now = max(loop.time(), self._timer_at)  # a timer may fire a hair before its time
        waiting = self._waiting
        while waiting and (waiting[0].task is None or waiting[0].at <= now):
            deadline = waiting.popleft()
            if deadline.task is not None:
                deadline.expired = True
                deadline.task.cancel()
        if waiting:
            self._arm(loop, waiting[0].at)


def new_transport(settings: Settings, user_agent: str, metrics: Metrics) -> Transport:
    """The transport `http_transport` names, with the settings' caps and bounds."""
    make = HttpxTransport if settings.http_transport == "httpx" else Pool
    return make(
        total=settings.max_concurrency,
        per_host=settings.max_concurrency_per_host,
        connect_timeout_s=settings.connect_timeout_seconds,
        allow_private=settings.allow_private_addresses,
        user_agent=user_agent,
        limits=Limits(
            head_bytes=settings.max_response_head_bytes,
            headers=settings.max_response_headers,
            refused=metrics.client_refused,
        ),
        tls=tls_context(settings.tls_ca_file),
    )


def describe_http_error(exc: BaseException) -> str:
    """One line for a failed exchange, for logs and delivery rows."""
    forbidden = forbidden_cause(exc)
    if forbidden is not None:
        return str(forbidden)
    if isinstance(exc, TimeoutError):
        return "timed out"
    text: Any = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


class RequestSigning(TypedDict, total=False):
    """How `unsigned_request` and `signed_headers` sign: the body's digests and type, the scheme."""

    digest: str | None
    content_digest: str | None
    content_type: str | None
    scheme: SignatureScheme


def signed_headers(
    method: str, url: str, identity: SigningIdentity, now: datetime, **signing: Unpack[RequestSigning]
) -> dict[str, str]:
    """Host and Date, the body's headers, and a signature over them under `scheme` (`unsigned_request`)."""
    return unsigned_request(method, url, identity, now, **signing).sign_with(identity.private_key)


@dataclass(slots=True)  # not frozen: built per delivery, and frozen costs 0.1 µs a field
class UnsignedRequest:
    """A request's headers (lower-case names) with its signature still to be made."""

    headers: dict[str, str]
    unsigned: Unsigned

    def signed(self, signature: bytes) -> dict[str, str]:
        """Every header, the signature's included, given the signature over `unsigned.base`."""
        headers = self.headers.copy()
        for name, value in self.unsigned.signed(signature).items():
            headers[name.lower()] = value
        return headers

    def sign_with(self, private_key: PrivateKeyTypes) -> dict[str, str]:
        """Every header, signing here and now with `private_key`."""
        return self.signed(sign_bytes(self.unsigned.algorithm, private_key, self.unsigned.base))


def unsigned_request(
    method: str, url: str, identity: SigningIdentity, now: datetime, **signing: Unpack[RequestSigning]
) -> UnsignedRequest:
    """Host and Date, the body's headers, and what a signature over them under `scheme` signs.

    cavage: `Digest` and Content-Type for a body, then `Signature` (rsa-sha256) over
    `(request-target) host date [digest content-type]`. rfc9421: `Content-Digest` and
    Content-Type for a body, then `Signature-Input`/`Signature` (label sig1, `created`, keyid,
    alg) over `@method @target-uri [content-digest]`, as Mastodon accepts them.
    The digests are passed in so that a body sent to many inboxes is hashed once, not per inbox.
    SignatureError if the identity's key cannot sign under `scheme`.
    """
    scheme = signing.get("scheme", "cavage")
    headers = {"host": authority(url), "date": http_date(now)}
    body_digest = signing.get("content_digest") if scheme == "rfc9421" else signing.get("digest")
    if body_digest is not None:
        headers["content-type"] = signing.get("content_type") or ACTIVITY_JSON
    algorithm = signing_algorithm(scheme, identity.private_key)
    unsigned = unsigned_digested(scheme, method, url, headers, body_digest, identity.key_id, now, algorithm)
    return UnsignedRequest(headers, unsigned)
