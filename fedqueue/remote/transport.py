"""The seam between the client's policy and the I/O of its requests (`Transport`), as httpx
separates a Client from its transports.

`client.HttpClient` signs, guards, times out, decodes and caps; a transport only carries one
request and its answer. Two implement it: `pool.Pool` (kept connections and llhttp, the
default: docs/benchmarks/history.md, Fifth pass) and `httpx_transport.HttpxTransport`
(`http_transport = "httpx"`, which unit tests drive through respx). Both apply the address
guard at their door and at connect time (`resolver.GuardedResolver`), hold the same
concurrency caps, never follow redirects, and refuse an answer whose head is over
`max_response_head_bytes` or `max_response_headers` (`http1.Limits`).

What a transport raises, so that the client needs to know no library's errors: OSError
(ConnectionError for a connection lost or an answer that is not HTTP, `guard.ForbiddenAddress`
for a forbidden address), TimeoutError, `guard.FetchError` for a URL that is not http(s), and
ValueError for a request that cannot be written at all (`http1_requests.BadRequestLine`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

from fedqueue.remote.http1 import Answer


@dataclass(frozen=True)
class Fetched:
    """A GET's answer as it starts: status, the headers kept (`http1.KEPT_HEADERS`) and the body,
    still encoded, one chunk per call as it came (b"" at its end)."""

    status: int
    headers: dict[bytes, str]
    next_chunk: Callable[[], Awaitable[bytes]]


class Transport(Protocol):
    """Carries one request and its answer; `close` ends what it keeps open."""

    async def post(self, url: str, body: bytes, headers: dict[str, str], head_limit: int) -> Answer:
        """POST `body` and read the answer (of a non-2xx body, the first `head_limit` bytes)."""
        ...

    def get(self, url: str, headers: dict[str, str]) -> AbstractAsyncContextManager[Fetched]:
        """GET `url`: its status and kept headers, its body to read inside the block."""
        ...

    async def close(self) -> None:
        """End the connections kept."""
        ...
