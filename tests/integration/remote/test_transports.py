"""One conformance suite for both transports (`http_transport = "pool" | "httpx"`), on loopback:
whichever carries the requests, answers, refusals and bounds are the same."""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import pytest

from fedqueue.remote.http1 import Answer
from fedqueue.remote.http_client import HttpClient, SendFailed
from fedqueue.rules.address_guard import FetchError
from fedqueue.rules.errors import TooLarge
from fedqueue.settings import load_settings
from tests.integration.remote.test_http1_get import DOC, answer, chunked, endless, sized
from tests.loopback import Script, ScriptedServer, SilentServer, serving

CAP_BYTES = 65_536
ACCEPTED = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"


@pytest.fixture(params=["pool", "httpx"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def new_client(transport: str, **settings: Any) -> HttpClient:
    options: dict[str, Any] = {"allow_private_addresses": True, "max_document_bytes": CAP_BYTES}
    return HttpClient(load_settings(http_transport=transport, **options | settings))


@pytest.fixture
async def client(transport: str) -> AsyncIterator[HttpClient]:
    client = new_client(transport)
    yield client
    await client.aclose()


async def fetch(client: HttpClient, url: str) -> tuple[int, str, bytes]:
    async with client.get(url, {"accept": "application/activity+json"}) as reply:
        return reply.status, reply.media_type, await reply.read()


async def fetched(client: HttpClient, script: Script) -> tuple[tuple[int, str, bytes], ScriptedServer]:
    server = await serving(script)
    try:
        return await fetch(client, server.url("/users/alice")), server
    finally:
        await server.stop()


async def refused_then_accepted(client: HttpClient, refusal: bytes) -> tuple[Answer, Answer, ScriptedServer]:
    """Two POSTs to a server that answers `refusal` first, then 202: both answers, and the server."""
    server = await serving(lambda n: refusal if n == 0 else ACCEPTED)
    try:
        send = partial(client.post, server.url(), b"{}", {"content-type": "application/json"}, head_bytes=16)
        return await send(), await send(), server
    finally:
        await server.stop()


async def test_a_post_refusal_keeps_the_accept_signature_it_asks_for(client: HttpClient) -> None:
    asks = 'sig1=("@method" "@target-uri" "content-digest");alg="ed25519"'
    refusal = answer(b"", b"Accept-Signature: " + asks.encode(), b"Content-Length: 0", status=b"401 No")
    refused, accepted, _server = await refused_then_accepted(client, refusal)
    assert (refused.status, refused.accept_signature) == (401, asks)
    assert accepted.accept_signature is None


async def test_a_post_answer_keeps_its_status_body_head_and_retry_after(client: HttpClient) -> None:
    refusal = answer(
        b"slow down " + b"x" * 500, b"Retry-After: 120", b"Content-Length: 510", status=b"429 Slow"
    )
    refused, accepted, server = await refused_then_accepted(client, refusal)
    assert (refused.status, refused.body_head, refused.retry_after) == (429, b"slow down xxxxxx", "120")
    assert accepted.status == 202
    request = server.requests[0]
    assert request.startswith(b"POST /inbox HTTP/1.1\r\n") and request.endswith(b"\r\n\r\n{}")
    assert b"fedqueue/" in request  # the User-Agent


@pytest.mark.parametrize("status", [b"200 OK", b"404 Not Found", b"410 Gone"])
async def test_a_get_answer_keeps_its_status_media_type_and_body(client: HttpClient, status: bytes) -> None:
    document = answer(
        DOC, b"Content-Type: application/activity+json", b"Content-Length: %d" % len(DOC), status=status
    )
    got, server = await fetched(client, lambda _n: document)
    assert got == (int(status[:3]), "application/activity+json", DOC)
    assert b"\r\nAccept-Encoding: gzip, deflate\r\n" in server.requests[0]


async def test_a_redirect_is_answered_as_it_is_never_followed(client: HttpClient) -> None:
    moved = answer(b"", b"Location: /users/bob", b"Content-Length: 0", status=b"302 Found")
    (status, _media, body), server = await fetched(client, lambda _n: moved)
    assert (status, body) == (302, b"")
    assert len(server.requests) == 1


async def test_a_gzip_document_is_decoded(client: HttpClient) -> None:
    got, _server = await fetched(client, lambda _n: sized(gzip.compress(DOC), b"Content-Encoding: gzip"))
    assert got[2] == DOC


async def test_a_gzip_bomb_is_too_large_at_the_cap_holding_no_more(client: HttpClient) -> None:
    bomb = gzip.compress(bytes(64 << 20), 9)  # 64 MiB expanded
    tracemalloc.start()
    try:
        with pytest.raises(TooLarge, match="over the 65536-byte cap"):
            await fetched(client, lambda _n: chunked(bomb, b"Content-Encoding: gzip", piece_bytes=65_536))
        _now, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak_bytes < 16 << 20
    assert client.metrics.client_refusals == {"body_too_large": 1}


async def test_a_declared_length_over_the_cap_is_too_large(client: HttpClient) -> None:
    with pytest.raises(TooLarge, match=f"response of {CAP_BYTES + 1} bytes"):
        await fetched(client, lambda _n: sized(b"x" * (CAP_BYTES + 1)))


async def test_a_body_dripping_without_end_is_too_large_at_the_cap(client: HttpClient) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    server = await endless(head, b"1000\r\n" + b"b" * 4096 + b"\r\n", interval_s=0.01)
    try:
        with pytest.raises(TooLarge):
            await fetch(client, server.url())
    finally:
        await server.stop()
    assert server.written < 1 << 20  # let go at the cap


async def test_more_headers_than_the_cap_are_refused(client: HttpClient) -> None:
    many = answer(DOC, *(b"X-H%d: 1" % n for n in range(101)), b"Content-Length: %d" % len(DOC))
    with pytest.raises(FetchError, match="over 100 headers"):
        await fetched(client, lambda _n: many)
    assert client.metrics.client_refusals == {"too_many_headers": 1}


async def test_a_head_over_the_cap_is_refused(client: HttpClient) -> None:
    long_head = answer(DOC, b"X-Long: " + b"a" * 70_000, b"Content-Length: %d" % len(DOC))
    with pytest.raises(FetchError, match="head is over 65536 bytes"):
        await fetched(client, lambda _n: long_head)
    assert client.metrics.client_refusals == {"head_too_large": 1}


async def test_an_endless_header_is_refused_holding_no_more(client: HttpClient) -> None:
    server = await endless(b"HTTP/1.1 200 OK\r\nX-Endless: ", b"a" * 65_536)
    tracemalloc.start()
    try:
        with pytest.raises(FetchError, match="head is over 65536 bytes"):
            await fetch(client, server.url())
        _now, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await server.stop()
    assert peak_bytes < 2 << 20  # held whole, the 16 MiB header would take twice that at once
    assert server.written < 1 << 20
    assert client.metrics.client_refusals == {"head_too_large": 1}


async def test_a_server_that_never_answers_times_out(transport: str) -> None:
    client = new_client(transport, total_timeout_seconds=0.5)
    server = await SilentServer().start()
    try:
        with pytest.raises(FetchError, match="timed out"):
            await fetch(client, server.url("/users/alice"))
        with pytest.raises(SendFailed, match="timed out") as failed:
            await client.post(server.url("/inbox"), b"{}", {}, head_bytes=64)
    finally:
        await client.aclose()
        await server.stop()
    assert not failed.value.permanent


async def test_a_post_cancelled_from_outside_is_cancelled_not_failed(transport: str) -> None:
    client = new_client(transport, total_timeout_seconds=5)
    server = await SilentServer().start()
    try:
        posting = asyncio.create_task(client.post(server.url("/inbox"), b"{}", {}, head_bytes=64))
        for _ in range(100):  # up to 5 s for the request to be under way
            if server.request_lines:
                break
            await asyncio.sleep(0.05)
        posting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await posting
    finally:
        await client.aclose()
        await server.stop()


async def test_a_callers_shorter_deadline_around_a_post_ends_it_with_the_callers_timeout(
    transport: str,
) -> None:
    client = new_client(transport, total_timeout_seconds=5)
    server = await SilentServer().start()
    try:
        with pytest.raises(TimeoutError):  # the caller's own, not a failed delivery
            async with asyncio.timeout(0.3):
                await client.post(server.url("/inbox"), b"{}", {}, head_bytes=64)
    finally:
        await client.aclose()
        await server.stop()


async def test_a_post_that_timed_out_leaves_its_caller_uncancelled_within_a_longer_deadline(
    transport: str,
) -> None:
    client = new_client(transport, total_timeout_seconds=0.3)
    server = await SilentServer().start()
    task = asyncio.current_task()
    assert task is not None
    try:
        async with asyncio.timeout(5) as callers:
            with pytest.raises(SendFailed, match="timed out"):
                await client.post(server.url("/inbox"), b"{}", {}, head_bytes=64)
            assert task.cancelling() == 0
            await asyncio.sleep(0.05)  # the caller goes on
        assert not callers.expired()
    finally:
        await client.aclose()
        await server.stop()


async def test_a_post_answered_in_time_leaves_no_timeout_to_cancel_its_caller_later(transport: str) -> None:
    client = new_client(transport, total_timeout_seconds=0.5)
    server = await serving(lambda _n: ACCEPTED)
    try:
        assert (await client.post(server.url(), b"{}", {}, head_bytes=64)).status == 202
        await asyncio.sleep(0.6)  # past the POST's deadline
    finally:
        await client.aclose()
        await server.stop()


@pytest.mark.parametrize(
    ("host", "reason"),
    [
        ("127.0.0.1", "127.0.0.1 is a private or loopback address"),
        ("localhost", "localhost resolves only to private or loopback addresses"),
    ],
)
async def test_a_private_address_is_refused_for_good_and_never_reached(
    transport: str, host: str, reason: str
) -> None:
    client = new_client(transport, allow_private_addresses=False)
    server = await serving(lambda _n: ACCEPTED)
    try:
        with pytest.raises(SendFailed, match=reason) as failed:
            await client.post(server.url(host=host), b"{}", {}, head_bytes=64)
        with pytest.raises(FetchError, match=reason):
            await fetch(client, server.url("/users/alice", host=host))
    finally:
        await client.aclose()
        await server.stop()
    assert failed.value.permanent
    assert server.connections == 0


async def test_a_connection_refused_is_a_failure_worth_retrying(client: HttpClient) -> None:
    with pytest.raises(SendFailed) as failed:
        await client.post("http://127.0.0.1:9/inbox", b"{}", {}, head_bytes=64)
    assert not failed.value.permanent
