"""Delivery POSTs on the wire (`remote/http1.py`, `remote/pool.py`): kept connections, real answers.

The server here is a raw asyncio one, so each test says byte for byte what comes back.
"""

from __future__ import annotations

import asyncio
import datetime
import ssl
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fedqueue.remote import pool as pools
from fedqueue.remote.http1 import DRAIN_BYTES, Answer, Limits
from fedqueue.remote.http_client import HttpClient, SendFailed
from fedqueue.remote.pool import Pool
from fedqueue.rules.address_guard import ForbiddenAddress
from fedqueue.settings import load_settings
from tests.loopback import EndlessServer, Script, ScriptedServer, SilentServer, serving

ACCEPTED = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
#: The defaults' caps (`max_response_head_bytes`, `max_response_headers`); refusals go unrecorded.
LIMITS = Limits(head_bytes=65_536, headers=100, refused=lambda _reason: None)


@pytest.fixture
def refusals() -> list[str]:
    """The reasons of the answers the `pool` fixture's connections refused."""
    return []


def new_pool(
    *, limits: Limits = LIMITS, allow_private: bool = True, tls: ssl.SSLContext | None = None
) -> Pool:
    """A pool of 8 requests at once, 2 per host."""
    return Pool(
        total=8,
        per_host=2,
        connect_timeout_s=5,
        allow_private=allow_private,
        user_agent="fedqueue-test",
        limits=limits,
        tls=tls,
    )


@pytest.fixture
async def pool(refusals: list[str]) -> AsyncIterator[Pool]:
    pool = new_pool(limits=Limits(LIMITS.head_bytes, LIMITS.headers, refused=refusals.append))
    yield pool
    await pool.close()


async def refused_by_client(
    script: Script,
    *,
    allow_private: bool = True,
    host: str = "127.0.0.1",
    headers: dict[str, str] | None = None,
) -> tuple[SendFailed, ScriptedServer]:
    """What `HttpClient.post` raised for a POST to a scripted server, and the server (to see what it got)."""
    client = HttpClient(load_settings(allow_private_addresses=allow_private))
    server = await serving(script)
    try:
        with pytest.raises(SendFailed) as failed:
            await client.post(server.url(host=host), b"{}", headers or {}, head_bytes=64)
    finally:
        await server.stop()
        await client.aclose()
    return failed.value, server


async def post(pool: Pool, url: str, head_limit: int = 64) -> Answer:
    return await asyncio.wait_for(
        pool.post(url, b'{"type":"Like"}', {"content-type": "application/json"}, head_limit), 10
    )


async def posted(pool: Pool, script: Script, times: int) -> tuple[list[int], ScriptedServer]:
    """The statuses of `times` POSTs in a row to a scripted server, and the server (to see what it got)."""
    server = await serving(script)
    try:
        return [(await post(pool, server.url())).status for _ in range(times)], server
    finally:
        await server.stop()


async def test_posts_to_one_inbox_share_one_kept_connection(pool: Pool) -> None:
    statuses, server = await posted(pool, lambda _n: ACCEPTED, 3)
    assert statuses == [202, 202, 202]
    assert server.connections == 1
    first = server.requests[0]
    assert first.startswith(b"POST /inbox HTTP/1.1\r\n")
    assert b"\r\nHost: 127.0.0.1:" in first and b"\r\nUser-Agent: fedqueue-test\r\n" in first
    assert first.endswith(b'Content-Length: 15\r\n\r\n{"type":"Like"}')


async def test_a_refusal_keeps_its_status_the_head_of_its_chunked_body_and_retry_after(pool: Pool) -> None:
    refusal = (
        b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 120\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"a\r\nslow down \r\n" + b"50\r\n" + b"x" * 80 + b"\r\n0\r\n\r\n"
    )
    server = await serving(lambda n: refusal if n == 0 else ACCEPTED)
    try:
        refused = await post(pool, server.url(), head_limit=16)
        accepted = await post(pool, server.url())
    finally:
        await server.stop()
    assert refused == Answer(429, b"slow down xxxxxx", "120")
    assert accepted.status == 202
    assert server.connections == 1  # the whole chunked body was read, so the connection was kept


async def test_a_refusal_keeps_the_accept_signature_it_asks_for(pool: Pool) -> None:
    asks = b'sig1=("@method" "@target-uri" "content-digest");alg="ed25519"'
    refusal = b"HTTP/1.1 401 Unauthorized\r\nAccept-Signature: " + asks + b"\r\nContent-Length: 0\r\n\r\n"
    server = await serving(lambda n: refusal if n == 0 else ACCEPTED)
    try:
        refused = await post(pool, server.url())
        accepted = await post(pool, server.url())
    finally:
        await server.stop()
    assert refused == Answer(401, b"", None, asks.decode())
    assert accepted.accept_signature is None


async def test_a_kept_connection_the_server_closed_is_replaced_without_a_failed_post(pool: Pool) -> None:
    closing = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n"
    server = await serving(lambda n: closing if n == 0 else ACCEPTED)
    try:
        assert (await post(pool, server.url())).status == 202
        # The server drops the idle connection without a word, as servers do after their keep-alive timeout.
        server.script = lambda n: None if n == 1 else ACCEPTED
        assert (await post(pool, server.url())).status == 202
    finally:
        await server.stop()
    assert server.connections == 2
    assert len(server.requests) == 3


TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"


async def test_a_408_that_crossed_a_post_on_a_kept_connection_is_sent_again_on_a_new_one(pool: Pool) -> None:
    # The server times the kept connection out with a 408 as the next POST goes out on it.
    statuses, server = await posted(pool, lambda n: TIMED_OUT if n == 1 else ACCEPTED, 2)
    assert statuses == [202, 202]
    assert server.connections == 2
    assert len(server.requests) == 3
    assert server.requests[2] == server.requests[1]  # the same POST, whole, on the new connection


async def test_a_408_on_a_new_connection_is_the_posts_answer(pool: Pool) -> None:
    statuses, server = await posted(pool, lambda _n: TIMED_OUT, 1)
    assert statuses == [408]
    assert server.connections == 1
    assert len(server.requests) == 1


async def test_a_post_is_sent_again_at_most_once_after_a_408(pool: Pool) -> None:
    statuses, server = await posted(pool, lambda n: ACCEPTED if n == 0 else TIMED_OUT, 2)
    assert statuses == [202, 408]
    assert server.connections == 2
    assert len(server.requests) == 3


async def test_a_server_that_closes_a_new_connection_without_answering_is_a_failed_post() -> None:
    failed, server = await refused_by_client(lambda _n: None, headers={"content-type": "application/json"})
    assert "Server disconnected" in str(failed)
    assert not failed.permanent
    assert len(server.requests) == 1  # sent once: a new connection is never tried again


async def test_an_answer_saying_connection_close_is_not_reused(pool: Pool) -> None:
    closing = b"HTTP/1.1 202 Accepted\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"
    statuses, server = await posted(pool, lambda _n: closing, 2)
    assert statuses == [202, 202]
    assert server.connections == 2


async def test_an_interim_100_continue_is_skipped_for_the_real_answer(pool: Pool) -> None:
    statuses, _server = await posted(pool, lambda _n: b"HTTP/1.1 100 Continue\r\n\r\n" + ACCEPTED, 1)
    assert statuses == [202]


async def test_a_body_that_runs_to_the_end_of_the_connection_is_a_whole_answer(pool: Pool) -> None:
    server = await serving(lambda _n: b"HTTP/1.0 500 Internal Server Error\r\n\r\nit broke")
    try:
        answer = await post(pool, server.url())
        # An HTTP/1.0 answer without a length ends when the server closes; the next POST dials anew.
        server.script = lambda _n: ACCEPTED
        assert (await post(pool, server.url())).status == 202
    finally:
        await server.stop()
    assert answer == Answer(500, b"it broke", None)
    assert server.connections == 2


async def test_an_endless_body_is_cut_off_and_its_connection_dropped(pool: Pool) -> None:
    huge = DRAIN_BYTES * 2
    server = await serving(
        lambda n: (
            b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % huge + b"y" * huge if n == 0 else ACCEPTED
        )
    )
    try:
        assert (await post(pool, server.url())).status == 200
        assert (await post(pool, server.url())).status == 202
    finally:
        await server.stop()
    assert server.connections == 2


async def test_garbage_instead_of_an_answer_is_a_failed_post_saying_so(pool: Pool) -> None:
    server = await serving(lambda _n: b"SSH-2.0-OpenSSH_9.6\r\n")
    try:
        with pytest.raises(ConnectionError, match="not an HTTP answer"):
            await post(pool, server.url())
    finally:
        await server.stop()


async def test_no_more_than_the_per_host_cap_are_in_flight_to_one_host(pool: Pool) -> None:
    server = await serving(lambda _n: ACCEPTED, delay_s=0.05)
    try:
        answers = await asyncio.gather(*(post(pool, server.url()) for _ in range(8)))
    finally:
        await server.stop()
    assert {answer.status for answer in answers} == {202}
    assert server.most_at_once == 2  # per_host=2
    assert server.connections == 2


async def test_a_fetch_is_not_kept_waiting_behind_deliveries_that_fill_the_hosts_cap(pool: Pool) -> None:
    """A host's answers to POSTs hang: a key fetch from it still goes out, a third POST waits (per_host=2)."""

    async def fetch(url: str) -> None:
        async with pool.get(url, {}):
            pass

    silent = await SilentServer().start()
    requests = [
        asyncio.create_task(pool.post(silent.url("/inbox"), b"{}", {}, 64)),
        asyncio.create_task(pool.post(silent.url("/inbox"), b"{}", {}, 64)),
        asyncio.create_task(fetch(silent.url("/users/a"))),
        asyncio.create_task(pool.post(silent.url("/inbox"), b"{}", {}, 64)),
    ]
    try:
        for _ in range(100):  # up to 5 s for three request heads to arrive
            if len(silent.request_lines) >= 3:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.1)  # a fourth, if it went out, arrives meanwhile
        assert sorted(line.split()[0] for line in silent.request_lines) == ["GET", "POST", "POST"]
    finally:
        for request in requests:
            request.cancel()
        await asyncio.gather(*requests, return_exceptions=True)
        await silent.stop()


async def test_a_post_that_timed_out_leaves_no_connection_behind_for_the_next(pool: Pool) -> None:
    silent = await SilentServer().start()
    try:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(pool.post(silent.url("/inbox"), b"{}", {}, 64), 0.2)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(pool.post(silent.url("/inbox"), b"{}", {}, 64), 0.2)
    finally:
        await silent.stop()
    assert len(silent.request_lines) == 2


async def test_a_target_with_spaces_or_non_ascii_is_escaped_on_the_request_line(pool: Pool) -> None:
    server = await serving(lambda _n: ACCEPTED)
    try:
        await post(pool, server.url("/users/zoë/in box?a=1"))
    finally:
        await server.stop()
    assert server.requests[0].startswith(b"POST /users/zo%C3%AB/in%20box?a=1 HTTP/1.1\r\n")


@pytest.mark.parametrize(
    "header",
    [("x-sync", "a\r\nInjected: yes"), ("x-sync", "a\0b"), ("x:y", "1"), ("x y", "1"), ("", "1")],
)
async def test_a_header_that_would_break_its_line_is_refused_before_anything_is_sent(
    header: tuple[str, str],
) -> None:
    name, value = header
    failed, server = await refused_by_client(lambda _n: ACCEPTED, headers={"x-ok": "1", name: value})
    assert "cannot be written on one line" in str(failed)
    assert failed.permanent
    assert server.requests == []


async def test_a_name_that_resolves_only_to_loopback_is_refused() -> None:
    failed, server = await refused_by_client(lambda _n: ACCEPTED, allow_private=False, host="localhost")
    assert "resolves only to private or loopback" in str(failed)
    assert failed.permanent
    assert server.requests == []


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for `localhost` and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


async def test_https_checks_the_certificate_against_the_host_name(tmp_path: Path) -> None:
    cert_path, key_path = _self_signed(tmp_path)
    serving_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving_tls.load_cert_chain(cert_path, key_path)
    server = await ScriptedServer(lambda _n: ACCEPTED).start(tls=serving_tls)
    url = f"https://localhost:{server.port}/inbox"
    trusting = new_pool(tls=ssl.create_default_context(cafile=str(cert_path)))
    default = new_pool()
    try:
        assert (await post(trusting, url)).status == 202
        with pytest.raises(ConnectionError, match="certificate verify failed"):
            await post(default, url)
    finally:
        await trusting.close()
        await default.close()
        await server.stop()
    assert len(server.requests) == 1


async def test_a_switch_of_protocols_is_a_failed_post_to_try_again() -> None:
    switching = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n"
    failed, _server = await refused_by_client(lambda _n: switching)
    assert "switched protocols" in str(failed)
    assert not failed.permanent


async def test_bytes_after_a_whole_answer_retire_its_connection(pool: Pool) -> None:
    server = await serving(lambda n: ACCEPTED + b"HTTP/1.1 20" if n == 0 else ACCEPTED)
    try:
        assert (await post(pool, server.url())).status == 202
        assert (await post(pool, server.url())).status == 202
    finally:
        await server.stop()
    assert server.connections == 2


async def test_an_idle_connection_the_server_gave_up_on_is_let_go(
    pool: Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pools, "KEEPALIVE_S", 0.1)
    server = await serving(lambda _n: ACCEPTED)
    try:
        assert (await post(pool, server.url())).status == 202
        [kept] = pool._idle[("http", "127.0.0.1", server.port)]
        kept.data_received(b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n")  # unasked
        await asyncio.sleep(0.3)
    finally:
        await server.stop()
    assert kept.closed
    assert pool._idle == {}


async def test_the_pool_refuses_a_forbidden_address_literal_itself() -> None:
    guarded = new_pool(allow_private=False)
    server = await serving(lambda _n: ACCEPTED)
    try:
        with pytest.raises(ForbiddenAddress):
            await post(guarded, server.url())
    finally:
        await guarded.close()
        await server.stop()
    assert server.requests == []


def with_headers(count: int) -> bytes:
    """A 202 with `count` header lines in all."""
    extra = b"".join(b"X-Filler-%d: %d\r\n" % (n, n) for n in range(count - 1))
    return b"HTTP/1.1 202 Accepted\r\n" + extra + b"Content-Length: 0\r\n\r\n"


async def test_an_answer_with_the_most_headers_allowed_is_taken(pool: Pool, refusals: list[str]) -> None:
    statuses, server = await posted(pool, lambda _n: with_headers(LIMITS.headers), 2)
    assert statuses == [202, 202]
    assert server.connections == 1
    assert refusals == []


async def test_an_answer_with_more_headers_than_allowed_is_a_failed_post_and_its_connection_closed(
    pool: Pool, refusals: list[str]
) -> None:
    server = await serving(lambda n: with_headers(LIMITS.headers + 1) if n == 0 else ACCEPTED)
    try:
        with pytest.raises(ConnectionError, match=f"over {LIMITS.headers} headers"):
            await post(pool, server.url())
        assert (await post(pool, server.url())).status == 202
    finally:
        await server.stop()
    assert server.connections == 2
    assert refusals == ["too_many_headers"]


async def test_an_endless_header_is_a_failed_post_at_the_head_cap_holding_no_more(
    pool: Pool, refusals: list[str]
) -> None:
    endless = await EndlessServer(
        b"HTTP/1.1 202 Accepted\r\nX-Endless: ", b"a" * 65_536, most_bytes=16 << 20
    ).start()
    tracemalloc.start()
    try:
        with pytest.raises(ConnectionError, match="head is over 65536 bytes"):
            await post(pool, endless.url("/inbox"))
        _now, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        await endless.stop()
    assert refusals == ["head_too_large"]
    assert peak_bytes < 2 << 20  # held whole, the 16 MiB header would take twice that at once
    assert pool._idle == {}


async def test_a_head_of_exactly_the_cap_is_taken(pool: Pool, refusals: list[str]) -> None:
    head = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nX-Pad: \r\n\r\n"
    padded = head.replace(b"X-Pad: ", b"X-Pad: " + b"p" * (LIMITS.head_bytes - len(head)))
    assert len(padded) == LIMITS.head_bytes
    statuses, _server = await posted(pool, lambda _n: padded, 1)
    assert statuses == [202]
    with pytest.raises(ConnectionError, match="head is over"):
        await posted(pool, lambda _n: padded.replace(b"X-Pad: ", b"X-Pad: p"), 1)
    assert refusals == ["head_too_large"]


async def test_a_second_answer_in_the_same_write_retires_the_connection_and_lends_nothing_to_the_first(
    pool: Pool, refusals: list[str]
) -> None:
    busy = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"
    unasked = b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 999\r\nContent-Length: 5\r\n\r\nother"
    server = await serving(lambda n: busy + unasked if n == 0 else ACCEPTED)
    try:
        first = await post(pool, server.url())
        second = await post(pool, server.url())
    finally:
        await server.stop()
    assert first == Answer(503, b"busy", None)
    assert second.status == 202
    assert server.connections == 2  # the first connection, out of step, was never reused
    assert refusals == ["bytes_after_answer"]
