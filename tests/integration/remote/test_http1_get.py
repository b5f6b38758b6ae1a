"""Document GETs on the wire (`HttpClient.get` over `remote/pool.py`): bodies framed, decoded and capped.

The server here is a raw asyncio one, so each test says byte for byte what comes back.
"""

from __future__ import annotations

import asyncio
import gzip
import tracemalloc
import zlib
from collections.abc import AsyncIterator, Callable
from typing import cast

import pytest

from fedqueue.remote.http1 import PAUSE_BYTES, Connection
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.address_guard import FetchError
from fedqueue.rules.errors import TooLarge
from fedqueue.settings import load_settings
from tests.integration.remote.test_http1 import LIMITS
from tests.loopback import EndlessServer, Script, ScriptedServer, serving

CAP_BYTES = 65_536
DOC = b'{"id": "https://remote.example/users/alice", "type": "Person"}'


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    client = HttpClient(load_settings(allow_private_addresses=True, max_document_bytes=CAP_BYTES))
    yield client
    await client.aclose()


def answer(body: bytes, *headers: bytes, status: bytes = b"200 OK") -> bytes:
    return b"HTTP/1.1 " + status + b"\r\n" + b"".join(h + b"\r\n" for h in headers) + b"\r\n" + body


def sized(body: bytes, *headers: bytes) -> bytes:
    return answer(
        body, b"Content-Type: application/activity+json", b"Content-Length: %d" % len(body), *headers
    )


def chunked(body: bytes, *headers: bytes, piece_bytes: int = 1000) -> bytes:
    pieces = [body[at : at + piece_bytes] for at in range(0, len(body), piece_bytes)]
    framed = b"".join(b"%x\r\n%s\r\n" % (len(piece), piece) for piece in pieces) + b"0\r\n\r\n"
    return answer(framed, b"Content-Type: application/json", b"Transfer-Encoding: chunked", *headers)


async def fetch(
    client: HttpClient, server: ScriptedServer | EndlessServer, *, read: bool = True
) -> tuple[int, str, bytes]:
    async with client.get(server.url("/users/alice"), {"accept": "application/activity+json"}) as reply:
        return reply.status, reply.media_type, await reply.read() if read else b""


async def fetched(client: HttpClient, script: Script, times: int = 1) -> tuple[list[bytes], ScriptedServer]:
    """The bodies of `times` GETs in a row from a scripted server, and the server."""
    server = await serving(script)
    try:
        return [(await fetch(client, server))[2] for _ in range(times)], server
    finally:
        await server.stop()


async def test_a_document_with_a_content_length_is_read_whole_and_its_connection_reused(
    client: HttpClient,
) -> None:
    server = await serving(lambda _n: sized(DOC))
    try:
        first = await fetch(client, server)
        second = await fetch(client, server)
    finally:
        await server.stop()
    assert first == second == (200, "application/activity+json", DOC)
    assert server.connections == 1
    request = server.requests[0]
    assert request.startswith(b"GET /users/alice HTTP/1.1\r\n")
    assert b"\r\naccept: application/activity+json\r\n" in request
    assert b"\r\nAccept-Encoding: gzip, deflate\r\n" in request  # what `decoded` undoes, and no more
    assert b"Content-Length" not in request


async def test_a_chunked_document_is_read_whole_and_its_connection_reused(client: HttpClient) -> None:
    doc = b'{"name": "' + b"a" * 5000 + b'"}'
    bodies, server = await fetched(client, lambda _n: chunked(doc), times=2)
    assert bodies == [doc, doc]
    assert server.connections == 1


async def test_a_document_that_runs_to_the_end_of_the_connection_is_read_whole(client: HttpClient) -> None:
    bodies, _server = await fetched(
        client, lambda _n: b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n" + DOC
    )
    assert bodies == [DOC]


async def test_a_document_cut_short_by_the_server_is_a_fetch_error(client: HttpClient) -> None:
    cut = answer(DOC[:10], b"Content-Length: %d" % len(DOC), b"Connection: close")
    with pytest.raises(FetchError, match="before the end of the body"):
        await fetched(client, lambda _n: cut)


@pytest.mark.parametrize(
    "encoding, compress",
    [
        (b"gzip", gzip.compress),
        (b"x-gzip", gzip.compress),
        (b"deflate", zlib.compress),
        (b"deflate", lambda data: zlib.compress(data)[2:-4]),  # raw deflate, as some servers send it
    ],
)
async def test_a_compressed_document_is_decoded(
    client: HttpClient, encoding: bytes, compress: Callable[[bytes], bytes]
) -> None:
    bodies, server = await fetched(
        client, lambda _n: sized(compress(DOC), b"Content-Encoding: " + encoding), 2
    )
    assert bodies == [DOC, DOC]
    assert server.connections == 1


@pytest.mark.parametrize("piece_bytes", [1, 7, 1 << 20])  # members split anywhere, or all in one piece
async def test_a_gzip_body_of_several_members_is_decoded_whole(client: HttpClient, piece_bytes: int) -> None:
    # RFC 1952 2.2: a gzip file is a series of members, which some servers and proxies send.
    members = gzip.compress(DOC[:20]) + gzip.compress(b"") + gzip.compress(DOC[20:])
    bodies, _server = await fetched(
        client, lambda _n: chunked(members, b"Content-Encoding: gzip", piece_bytes=piece_bytes)
    )
    assert bodies == [DOC]


@pytest.mark.parametrize("piece_bytes", [1, 1 << 20])
async def test_zero_padding_after_a_gzip_member_is_skipped(client: HttpClient, piece_bytes: int) -> None:
    # As gzip(1) and Python's gzip module do; between members too.
    padded = gzip.compress(DOC[:20]) + bytes(8) + gzip.compress(DOC[20:]) + bytes(5)
    bodies, _server = await fetched(
        client, lambda _n: chunked(padded, b"Content-Encoding: gzip", piece_bytes=piece_bytes)
    )
    assert bodies == [DOC]


NOT_A_MEMBER = "gzip body goes on after its end with bytes that are not a gzip member"


@pytest.mark.parametrize(
    "body, reason",
    [
        pytest.param(gzip.compress(DOC) + b"trailing junk", NOT_A_MEMBER, id="gzip-then-junk"),
        pytest.param(
            gzip.compress(DOC) + b"\x1f\x8b junk", "gzip body could not be decoded", id="bad-member"
        ),
        pytest.param(gzip.compress(DOC) + gzip.compress(DOC)[:12], "ended before", id="cut-member"),
        pytest.param(zlib.compress(DOC) + b"junk", "deflate body goes on after its end", id="deflate"),
        pytest.param(
            zlib.compress(DOC)[2:-4] + b"junk", "deflate body goes on after its end", id="raw-deflate"
        ),
    ],
)
async def test_bytes_after_a_compressed_stream_that_do_not_decode_are_a_fetch_error(
    client: HttpClient, body: bytes, reason: str
) -> None:
    coding = b"deflate" if body[:2] != b"\x1f\x8b" else b"gzip"
    with pytest.raises(FetchError, match=reason):
        await fetched(client, lambda _n: sized(body, b"Content-Encoding: " + coding))


async def peak_bytes_refusing(
    client: HttpClient,
    bomb: bytes,
    *,
    server: EndlessServer | None = None,
    refusal: type[Exception] = TooLarge,
    match: str = "over the 65536-byte cap",
) -> int:
    """The most memory traced while a GET of the gzip `bomb`, or from the endless `server`, is
    refused (`refusal`, saying `match`): as too large at the cap unless told otherwise.

    The bomb's body is chunked, so no declared length refuses it before it is read.
    """
    tracemalloc.start()
    try:
        with pytest.raises(refusal, match=match):
            if server is None:
                await fetched(client, lambda _n: chunked(bomb, b"Content-Encoding: gzip", piece_bytes=65_536))
            else:
                await fetch(client, server)
        _now, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak_bytes


async def test_a_gzip_bomb_of_many_members_is_too_large_at_the_cap_without_expanding_further(
    client: HttpClient,
) -> None:
    member = gzip.compress(bytes(1 << 20), 9)
    bomb = member * 256  # 256 MiB expanded, one MiB a member
    assert await peak_bytes_refusing(client, bomb) < 16 << 20


async def test_a_408_that_crossed_a_get_on_a_kept_connection_is_asked_again_on_a_new_one(
    client: HttpClient,
) -> None:
    timed_out = answer(b"", b"Connection: close", b"Content-Length: 0", status=b"408 Request Timeout")
    bodies, server = await fetched(client, lambda n: timed_out if n == 1 else sized(DOC), times=2)
    assert bodies == [DOC, DOC]
    assert server.connections == 2
    assert len(server.requests) == 3


async def test_a_gzip_bomb_is_too_large_once_it_expands_past_the_cap_without_expanding_further(
    client: HttpClient,
) -> None:
    squeezer = zlib.compressobj(9, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    zeros = bytes(1 << 20)
    bomb = b"".join(squeezer.compress(zeros) for _ in range(256)) + squeezer.flush()  # 256 MiB expanded
    # Expanded in full, it would hold well over 100 MiB at once.
    assert await peak_bytes_refusing(client, bomb) < 16 << 20


async def test_a_plain_document_over_the_cap_is_too_large_and_its_connection_let_go(
    client: HttpClient,
) -> None:
    big = b"x" * (4 << 20)
    server = await serving(lambda n: chunked(big, piece_bytes=65_536) if n == 0 else sized(DOC))
    try:
        with pytest.raises(TooLarge):
            await fetch(client, server)
        assert (await fetch(client, server))[2] == DOC
    finally:
        await server.stop()
    assert server.connections == 2  # the first was left mid-body: never reused out of step


async def test_a_declared_length_over_the_cap_is_too_large_before_the_body_is_read(
    client: HttpClient,
) -> None:
    big = b"x" * (CAP_BYTES + 1)
    with pytest.raises(TooLarge, match=f"response of {CAP_BYTES + 1} bytes"):
        await fetched(client, lambda _n: sized(big))


async def test_a_body_left_unread_in_mid_flow_lets_its_connection_go(client: HttpClient) -> None:
    server = await serving(lambda n: chunked(b"x" * (4 << 20), piece_bytes=65_536) if n == 0 else sized(DOC))
    try:
        assert (await fetch(client, server, read=False))[0] == 200
        assert (await fetch(client, server))[2] == DOC
    finally:
        await server.stop()
    assert server.connections == 2


async def test_a_small_unread_answer_that_arrived_whole_leaves_its_connection_for_the_next(
    client: HttpClient,
) -> None:
    gone = answer(b"gone", b"Content-Length: 4", status=b"410 Gone")
    server = await serving(lambda n: gone if n == 0 else sized(DOC))
    try:
        assert (await fetch(client, server, read=False))[0] == 410
        assert (await fetch(client, server))[2] == DOC
    finally:
        await server.stop()
    assert server.connections == 1


async def test_an_encoding_fedqueue_cannot_decode_is_a_fetch_error_naming_it(client: HttpClient) -> None:
    with pytest.raises(FetchError, match="content-encoding 'br'"):
        await fetched(client, lambda _n: sized(b"\x1b\x00", b"Content-Encoding: br"))


async def test_a_corrupt_gzip_body_is_a_fetch_error(client: HttpClient) -> None:
    with pytest.raises(FetchError, match="gzip body could not be decoded"):
        await fetched(client, lambda _n: sized(b"\x1f\x8b\x08\x00garbage" * 4, b"Content-Encoding: gzip"))


@pytest.mark.parametrize("status", [b"204 No Content", b"304 Not Modified"])
async def test_an_answer_without_a_body_reads_as_empty_and_keeps_its_connection(
    client: HttpClient, status: bytes
) -> None:
    server = await serving(lambda n: answer(b"", b'ETag: "1"', status=status) if n == 0 else sized(DOC))
    try:
        first = await fetch(client, server)
        second = await fetch(client, server)
    finally:
        await server.stop()
    assert first == (int(status[:3]), "", b"")
    assert second[2] == DOC
    assert server.connections == 1


class PausableTransport:
    """Just enough of a transport to see whether a connection is reading."""

    paused = False

    def pause_reading(self) -> None:
        self.paused = True

    def resume_reading(self) -> None:
        self.paused = False

    def write(self, data: bytes) -> None:
        pass

    def abort(self) -> None:
        pass


async def test_a_large_answer_that_arrived_whole_leaves_its_kept_connection_reading() -> None:
    connection = Connection(("http", "remote.example", 80), LIMITS)
    transport = PausableTransport()
    connection.connection_made(cast(asyncio.Transport, transport))
    status = asyncio.ensure_future(connection.fetch(b"GET / HTTP/1.1\r\n\r\n"))
    await asyncio.sleep(0)
    connection.data_received(sized(b"x" * (2 * PAUSE_BYTES)))  # unread, over the buffer's pause mark
    assert await status == 200
    assert connection.reusable
    assert not transport.paused  # else, kept idle, it would not see the server close it


async def endless(head: bytes, piece: bytes, interval_s: float = 0.0) -> EndlessServer:
    """A server answering every GET with `head` and then `piece` without end (16 MiB, 20 s at most)."""
    return await EndlessServer(head, piece, interval_s=interval_s, most_bytes=16 << 20).start()


async def test_an_endless_header_is_a_fetch_error_at_the_head_cap_holding_no_more(client: HttpClient) -> None:
    server = await endless(b"HTTP/1.1 200 OK\r\nX-Endless: ", b"a" * 65_536)
    try:
        peak_bytes = await peak_bytes_refusing(
            client, b"", server=server, refusal=FetchError, match="head is over 65536 bytes"
        )
    finally:
        await server.stop()
    assert peak_bytes < 2 << 20  # held whole, the 16 MiB header would take twice that at once
    assert client.metrics.client_refusals == {"head_too_large": 1}


async def test_an_endless_trailer_after_a_document_is_a_fetch_error_holding_no_more(
    client: HttpClient,
) -> None:
    head = chunked(DOC)[: -len(b"\r\n")] + b"X-Trailer: "  # the last chunk, then a trailer never ending
    server = await endless(head, b"t" * 65_536)
    try:
        peak_bytes = await peak_bytes_refusing(
            client, b"", server=server, refusal=FetchError, match="head is over 65536 bytes"
        )
    finally:
        await server.stop()
    assert peak_bytes < 2 << 20


async def test_a_body_dripping_without_end_is_too_large_at_the_cap_holding_no_more(
    client: HttpClient,
) -> None:
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    # 4 KiB every 10 ms: the cap is passed in about 0.2 s, long before any timeout.
    server = await endless(head, b"1000\r\n" + b"b" * 4096 + b"\r\n", interval_s=0.01)
    try:
        peak_bytes = await peak_bytes_refusing(client, b"", server=server)
    finally:
        await server.stop()
    assert peak_bytes < 2 << 20
    assert server.written < 1 << 20  # the client let go at the cap
    assert client.metrics.client_refusals == {"body_too_large": 1}


async def test_a_second_answer_in_the_same_write_lends_nothing_to_the_first_and_retires_the_connection(
    client: HttpClient,
) -> None:
    # Were its headers lent to the first, the first would be gzip, and not decode.
    unasked = answer(gzip.compress(b"<html>"), b"Content-Encoding: gzip", b"Transfer-Encoding: chunked")
    bodies, server = await fetched(client, lambda n: sized(DOC) + unasked if n == 0 else sized(DOC), 2)
    assert bodies == [DOC, DOC]
    assert server.connections == 2  # the first connection, out of step, was never reused
    assert client.metrics.client_refusals == {"bytes_after_answer": 1}
