"""The httpx transport (`http_transport = "httpx"`): the same requests, caps and guard as
`pool.Pool`, carried by httpx (and httpcore, h11) instead, and mockable with respx.

It holds what the pool holds: the address guard at its door (`check_url`) and at connect time
(`GuardedNetwork` connects only to addresses `resolver.GuardedResolver` allowed, never through
a proxy from the environment), the same per-origin and total caps (`pool.Caps`), no redirects
followed, and an answer's head refused past `Limits` (bytes and header lines; an unfinished
head also stops at h11's own 100 KiB buffer, `HTTP11_HEAD_BUFFER`). Bodies are handed on as
they came (`aiter_raw`), so that the client decodes and caps them as it does the pool's.
"""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterable, Iterator
from contextlib import asynccontextmanager, contextmanager

import httpcore
import httpx

from fedqueue.remote.http1 import (
    HEAD_TOO_LARGE,
    KEPT_HEADERS,
    TOO_MANY_HEADERS,
    Answer,
    BadAnswer,
    Limits,
    Refused,
)
from fedqueue.remote.http1_requests import BadRequestLine, target_of
from fedqueue.remote.pool import KEEPALIVE_S, Caps
from fedqueue.remote.resolver import GuardedResolver
from fedqueue.remote.transport import Fetched
from fedqueue.rules.address_guard import check_url

#: What h11 holds at most of an unfinished head (httpcore's `MAX_INCOMPLETE_EVENT_SIZE`): a
#: longer one fails there, before `Limits.head_bytes` can be checked on the whole head.
HTTP11_HEAD_BUFFER = 100 * 1024
#: What h11 says when that buffer overflows.
_H11_OVERFLOW = "Receive buffer too long"


class GuardedNetwork(httpcore.AsyncNetworkBackend):
    """httpcore's network, connecting only to the addresses the guard allows for a name."""

    def __init__(self, resolver: GuardedResolver) -> None:
        self._resolver = resolver
        self._network = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        failure: Exception | None = None
        for _family, address in await self._resolver.resolve(host, port):
            try:
                return await self._network.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure or httpcore.ConnectError(f"{host} resolves to no address")

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise ConnectionError("unix sockets are not used")

    async def sleep(self, seconds: float) -> None:
        await self._network.sleep(seconds)


class _GuardedHTTPTransport(httpx.AsyncHTTPTransport):
    """httpx's transport over a connection pool whose network is `GuardedNetwork`."""

    def __init__(self, network: GuardedNetwork, *, total: int, tls: ssl.SSLContext) -> None:
        super().__init__(trust_env=False)
        # httpx takes no network backend: its pool is replaced by one built the same way with it.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=tls,
            max_connections=total,
            max_keepalive_connections=total,
            keepalive_expiry=KEEPALIVE_S,
            network_backend=network,
        )


class HttpxTransport:
    """`transport.Transport` over httpx; `close` ends its connections."""

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
        self._allow_private = allow_private
        self._limits = limits
        self._caps = Caps(total, per_host)
        network = GuardedNetwork(GuardedResolver(allow_private=allow_private))
        self._client = httpx.AsyncClient(
            transport=_GuardedHTTPTransport(network, total=total, tls=tls or ssl.create_default_context()),
            timeout=httpx.Timeout(None, connect=connect_timeout_s),  # the client times the whole exchange
            headers={"User-Agent": user_agent},
            follow_redirects=False,
            trust_env=False,
        )

    async def post(self, url: str, body: bytes, headers: dict[str, str], head_limit: int) -> Answer:
        """POST `body` to `url` and read the answer; `check_url`'s refusals are raised first."""
        async with (
            self._capped("POST", url),
            self._client.stream("POST", url, content=body, headers=headers) as response,
        ):
            self._check_head(response)
            head = b""
            if not 200 <= response.status_code < 300:
                async for chunk in response.aiter_raw():
                    head += chunk
                    if len(head) >= head_limit:
                        break
            answered = response.headers
            return Answer(
                response.status_code,
                head[:head_limit],
                answered.get("retry-after"),
                answered.get("accept-signature"),
            )

    @asynccontextmanager
    async def get(self, url: str, headers: dict[str, str]) -> AsyncIterator[Fetched]:
        """GET `url`: its status and kept headers, its body (as sent) to read inside the block."""
        async with self._capped("GET", url), self._client.stream("GET", url, headers=headers) as response:
            kept = self._check_head(response)
            chunks = response.aiter_raw()

            async def next_chunk() -> bytes:
                with self._translated():
                    return await anext(chunks, b"")

            yield Fetched(response.status_code, kept, next_chunk)

    async def close(self) -> None:
        await self._client.aclose()

    @asynccontextmanager
    async def _capped(self, method: str, url: str) -> AsyncIterator[None]:
        """`url` checked, a place held in the caps, httpx's errors translated (`transport`)."""
        check_url(url, allow_private=self._allow_private)
        lane = (method, target_of(url).origin)
        await self._caps.acquire(lane)
        try:
            with self._translated():
                yield
        finally:
            self._caps.release(lane)

    def _check_head(self, response: httpx.Response) -> dict[bytes, str]:
        """The kept headers of an answer within `Limits`; Refused (told to `Limits.refused`) past them."""
        raw = response.headers.raw
        if len(raw) > self._limits.headers:
            raise self._refuse(TOO_MANY_HEADERS, f"the answer has over {self._limits.headers} headers")
        size = len(b"HTTP/1.1 000 \r\n\r\n") + len(response.reason_phrase)
        size += sum(len(name) + len(value) + 4 for name, value in raw)
        if size > self._limits.head_bytes:
            raise self._refuse(HEAD_TOO_LARGE, f"the answer's head is over {self._limits.head_bytes} bytes")
        return {name.lower(): value.decode("latin-1") for name, value in raw if name.lower() in KEPT_HEADERS}

    def _refuse(self, reason: str, message: str) -> Refused:
        self._limits.refused(reason)
        return Refused(reason, message)

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """httpx's errors as the builtin ones a transport raises (`transport`)."""
        try:
            yield
        except httpx.TimeoutException as exc:
            raise TimeoutError(str(exc) or "timed out") from exc
        except (httpx.UnsupportedProtocol, httpx.InvalidURL, httpx.LocalProtocolError) as exc:
            raise BadRequestLine(str(exc)) from exc
        except httpx.RemoteProtocolError as exc:
            if _H11_OVERFLOW in str(exc):
                bound = min(self._limits.head_bytes, HTTP11_HEAD_BUFFER)
                raise self._refuse(HEAD_TOO_LARGE, f"the answer's head is over {bound} bytes") from exc
            raise BadAnswer(f"not an HTTP answer: {exc}") from exc
        except (httpx.HTTPError, httpx.StreamError) as exc:
            raise ConnectionError(f"{type(exc).__name__}: {exc}") from exc
