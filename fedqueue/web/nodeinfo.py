"""NodeInfo: `GET /.well-known/nodeinfo` and the documents it links, `/nodeinfo/2.0` and `/nodeinfo/2.1`.

Anyone may ask, unsigned (relays and other servers read it before they federate), so what it
costs is bounded: the usage figures are read from the database at most once per
`nodeinfo_cache_seconds` in each process, however many ask (`UsageCache`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue import __version__
from fedqueue.rules.errors import NotFound
from fedqueue.rules.nodeinfo_documents import VERSIONS, Usage, discovery, document, media_type
from fedqueue.service import federation_reads as reads
from fedqueue.web.metrics import metrics_of
from fedqueue.web.responses import JSONResponse, settings_of, store_of


class UsageCache:
    """The usage figures last read and when (monotonic seconds); misses at the same time read once."""

    def __init__(self, max_age_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._max_age_s = max_age_s
        self._clock = clock
        self._usage: Usage | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()

    def _fresh(self) -> Usage | None:
        if self._usage is None or self._clock() - self._read_at >= self._max_age_s:
            return None
        return self._usage

    async def get(self, read: Callable[[], Awaitable[Usage]]) -> Usage:
        """The cached figures while fresh, else those `read` gives (one reader at a time)."""
        usage = self._fresh()
        if usage is not None:
            return usage
        async with self._lock:
            usage = self._fresh()
            if usage is None:
                usage = self._usage = await read()
                self._read_at = self._clock()
            return usage


def _cache(request: Request) -> UsageCache:
    """The app's UsageCache, made by the first request that needs it."""
    state = request.app.state
    cache: UsageCache | None = getattr(state, "nodeinfo_usage", None)
    if cache is None:
        cache = state.nodeinfo_usage = UsageCache(settings_of(request).nodeinfo_cache_seconds)
    return cache


async def nodeinfo_discovery(request: Request) -> Response:
    """GET /.well-known/nodeinfo: links to the 2.0 and 2.1 documents."""
    return JSONResponse(discovery(settings_of(request).base_url))


async def nodeinfo_document(request: Request) -> Response:
    """GET /nodeinfo/{version}: the NodeInfo document of 2.0 or 2.1; 404 for any other version."""
    version = request.path_params["version"]
    if version not in VERSIONS:
        raise NotFound(f"no NodeInfo {version[:20]!r} here; versions: {', '.join(VERSIONS)}")

    async def read() -> Usage:
        metrics_of(request).nodeinfo_usage_read()
        return await reads.usage_now(store_of(request))

    usage = await _cache(request).get(read)
    settings = settings_of(request)
    doc = document(version, usage, software_version=__version__, node_name=settings.node_name)
    return JSONResponse(doc, media_type=media_type(version))


routes = [
    Route("/.well-known/nodeinfo", nodeinfo_discovery, methods=["GET"]),
    Route("/nodeinfo/{version}", nodeinfo_document, methods=["GET"]),
]
