"""A real HTTP server on 127.0.0.1 with scripted answers: the "remote server" of integration tests."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass(frozen=True)
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


Handler = Callable[[Recorded], Awaitable[web.StreamResponse] | web.StreamResponse]


@dataclass
class LoopbackServer:
    """Answers each (method, path) with its handler (404 without one) and records every request."""

    handlers: dict[tuple[str, str], Handler] = field(default_factory=dict)
    requests: list[Recorded] = field(default_factory=list)
    _runner: web.AppRunner | None = None
    port: int = 0
    #: Served over TLS (`start(tls=...)`): its origin is then https://localhost:port.
    https: bool = False

    @property
    def origin(self) -> str:
        return f"https://localhost:{self.port}" if self.https else f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return f"{self.origin}{path}"

    def on(self, method: str, path: str, handler: Handler) -> None:
        self.handlers[(method.upper(), path)] = handler

    def serve_json(self, path: str, document: dict[str, Any], status: int = 200) -> None:
        """GET `path` answers `document` as application/activity+json."""
        body = json.dumps(document)
        self.on(
            "GET",
            path,
            lambda _r: web.Response(text=body, status=status, content_type="application/activity+json"),
        )

    def received(self, method: str, path: str) -> list[Recorded]:
        return [r for r in self.requests if r.method == method and r.path == path]

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        recorded = Recorded(
            method=request.method,
            path=request.path_qs,
            headers={k.lower(): v for k, v in request.headers.items()},
            body=await request.read(),
        )
        self.requests.append(recorded)
        handler = self.handlers.get((request.method, request.path))
        if handler is None:
            return web.Response(status=404, text="not found")
        result = handler(recorded)
        return result if isinstance(result, web.StreamResponse) else await result

    async def start(self, tls: ssl.SSLContext | None = None) -> LoopbackServer:
        app = web.Application(client_max_size=16 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        self.https = tls is not None
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=tls)
        await site.start()
        self.port = int(self._runner.addresses[0][1])
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@dataclass
class SilentServer:
    """Accepts connections on 127.0.0.1, reads each request head and never answers.

    Each connection is held until the client gives up or the server stops (at most 60 s).
    `most_open` is the most requests it held at one time: N means N requests were in flight at once.
    """

    request_lines: list[str] = field(default_factory=list)
    most_open: int = 0
    port: int = 0
    _open: int = 0
    _server: asyncio.Server | None = None
    _writers: set[asyncio.StreamWriter] = field(default_factory=set)
    _handlers: set[asyncio.Task[Any]] = field(default_factory=set)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _hold(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 60)
            self.request_lines.append(head.split(b"\r\n", 1)[0].decode("latin-1"))
            self._open += 1
            self.most_open = max(self.most_open, self._open)
            try:
                await asyncio.wait_for(reader.read(), 60)  # until the client closes
            finally:
                self._open -= 1
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def start(self) -> SilentServer:
        self._server = await asyncio.start_server(self._hold, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for writer in list(self._writers):
                writer.transport.abort()
            await asyncio.wait_for(asyncio.gather(*self._handlers, return_exceptions=True), 10)
            await self._server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    """One request: its head, and its body as long as its Content-Length says."""
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    return head + await reader.readexactly(length)


#: What a scripted server writes for request n (0-based, across connections); None: close at once.
Script = Callable[[int], bytes | None]


@dataclass
class ScriptedServer:
    """Reads each request (head and Content-Length body) and writes what `script` gives for it."""

    script: Script
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    most_at_once: int = 0
    delay_s: float = 0.0
    port: int = 0
    _busy: int = 0
    _server: asyncio.Server | None = None

    def url(self, path: str = "/inbox", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                self.requests.append(await read_request(reader))
                answer = self.script(len(self.requests) - 1)
                self._busy += 1
                self.most_at_once = max(self.most_at_once, self._busy)
                await asyncio.sleep(self.delay_s)
                self._busy -= 1
                if answer is None:
                    break
                writer.write(answer)
                await writer.drain()
                if b"connection: close" in answer.lower() or answer.startswith(b"HTTP/1.0"):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def start(self, tls: ssl.SSLContext | None = None) -> ScriptedServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=tls)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()


@dataclass
class GatedServer:
    """Holds each request until the test answers it (`answer`, by its path), then answers 202.

    `arrived` lists the paths of the requests in the order they came: which were in flight at
    once, and which went out next when one was answered. `hung_up_at` has the loop time at
    which each connection the client closed was seen to close.
    """

    arrived: list[str] = field(default_factory=list)
    hung_up_at: list[float] = field(default_factory=list)
    port: int = 0
    _answers: dict[str, asyncio.Event] = field(default_factory=dict)
    #: Notified as a request arrives or a connection is hung up.
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)
    _handlers: set[asyncio.Task[Any]] = field(default_factory=set)
    _server: asyncio.Server | None = None

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def answer(self, path: str) -> None:
        """Answer the request for `path`, now if it has come, else as soon as it does."""
        self._answer(path).set()

    async def arrivals(self, count: int, settle_s: float = 0.05) -> list[str]:
        """`arrived` once it has `count` paths (within 5 s) and `settle_s` passed with no more."""
        await self.until(lambda: len(self.arrived) >= count)
        await asyncio.sleep(settle_s)
        return list(self.arrived)

    async def until(self, ready: Callable[[], bool]) -> None:
        """Wait until `ready()`, looked at as requests arrive and connections close (within 5 s)."""
        async with asyncio.timeout(5), self._changed:
            await self._changed.wait_for(ready)

    async def _notify(self) -> None:
        async with self._changed:
            self._changed.notify_all()

    def _answer(self, path: str) -> asyncio.Event:
        return self._answers.setdefault(path, asyncio.Event())

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._handlers.add(task)
        try:
            while True:
                path = (await read_request(reader)).split(b" ", 2)[1].decode()
                self.arrived.append(path)
                await self._notify()
                await self._answer(path).wait()
                writer.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.hung_up_at.append(asyncio.get_running_loop().time())
            await self._notify()
        finally:
            writer.close()

    async def start(self) -> GatedServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for handler in self._handlers:
                handler.cancel()
            await asyncio.gather(*self._handlers, return_exceptions=True)


async def serving(script: Script, **options: float) -> ScriptedServer:
    server = ScriptedServer(script)
    server.delay_s = options.get("delay_s", 0.0)
    return await server.start()


@dataclass
class EndlessServer:
    """Answers each request (its head; GETs) with `head`, then `piece` again and again, each
    `interval_s` apart, until the client closes, `most_bytes` are written on the connection or
    `most_s` pass: a remote server whose answer never ends (an endless header, trailer or body).

    `written` is what it wrote in all, `requests` how many requests it answered.
    """

    head: bytes
    piece: bytes
    interval_s: float = 0.0
    most_bytes: int = 50 << 20
    most_s: float = 20.0
    written: int = 0
    requests: int = 0
    port: int = 0
    _server: asyncio.Server | None = None

    def url(self, path: str = "/users/alice") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(self.most_s):
                await reader.readuntil(b"\r\n\r\n")
                self.requests += 1
                writer.write(self.head)
                sent = len(self.head)
                while sent < self.most_bytes:
                    writer.write(self.piece)
                    sent += len(self.piece)
                    await writer.drain()
                    self.written += len(self.piece)
                    await asyncio.sleep(self.interval_s)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def start(self) -> EndlessServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
