"""The client over the httpx transport (`http_transport = "httpx"`), its remotes mocked by respx:
the same guard, decoding and bounds as over the pool (the loopback suite: test_transports)."""

from __future__ import annotations

import gzip

import httpx
import pytest
import respx

from fedqueue.remote.http_client import HttpClient, SendFailed
from fedqueue.rules.address_guard import FetchError
from fedqueue.rules.errors import TooLarge
from fedqueue.settings import load_settings

ACTOR = "https://remote.example/users/alice"
DOC = b'{"id": "https://remote.example/users/alice", "type": "Person"}'


def new_client(**settings: object) -> HttpClient:
    return HttpClient(load_settings(http_transport="httpx", max_document_bytes=65_536, **settings))


async def get(client: HttpClient, url: str = ACTOR) -> tuple[int, str, bytes]:
    async with client.get(url, {"accept": "application/activity+json"}) as reply:
        return reply.status, reply.media_type, await reply.read()


@pytest.mark.parametrize("url", ["http://10.0.0.5/inbox", "https://[::1]/inbox", "http://169.254.169.254/"])
async def test_a_private_address_is_refused_for_good_with_the_httpx_transport_too(
    respx_mock: respx.MockRouter, url: str
) -> None:
    remote = respx_mock.route().respond(202)
    client = new_client(allow_private_addresses=False)
    try:
        with pytest.raises(SendFailed, match="private or loopback address") as failed:
            await client.post(url, b"{}", {}, head_bytes=64)
        with pytest.raises(FetchError, match="private or loopback address"):
            await get(client, url)
    finally:
        await client.aclose()
    assert failed.value.permanent
    assert not remote.called


async def test_a_gzip_document_is_decoded_by_the_client_and_asked_for_as_the_pool_asks(
    respx_mock: respx.MockRouter,
) -> None:
    route = respx_mock.get(ACTOR).respond(
        200,
        content=gzip.compress(DOC),
        headers={"Content-Encoding": "gzip", "Content-Type": "application/activity+json; charset=utf-8"},
    )
    client = new_client()
    try:
        assert await get(client) == (200, "application/activity+json", DOC)
    finally:
        await client.aclose()
    request = route.calls.last.request
    assert request.headers["accept-encoding"] == "gzip, deflate"
    assert request.headers["user-agent"].startswith("fedqueue/")


async def test_a_document_over_the_cap_is_too_large_and_counted(respx_mock: respx.MockRouter) -> None:
    respx_mock.get(ACTOR).respond(200, content=b"x" * 70_000)
    client = new_client()
    try:
        with pytest.raises(TooLarge, match="65536-byte cap"):
            await get(client)
    finally:
        await client.aclose()
    assert client.metrics.client_refusals == {"body_too_large": 1}


async def test_more_headers_than_the_cap_are_refused_and_counted(respx_mock: respx.MockRouter) -> None:
    respx_mock.get(ACTOR).respond(200, content=DOC, headers={f"x-h{n}": "1" for n in range(20)})
    client = new_client(max_response_headers=10)
    try:
        with pytest.raises(FetchError, match="over 10 headers"):
            await get(client)
    finally:
        await client.aclose()
    assert client.metrics.client_refusals == {"too_many_headers": 1}


async def test_a_redirect_is_not_followed(respx_mock: respx.MockRouter) -> None:
    respx_mock.get(ACTOR).respond(301, headers={"Location": "https://elsewhere.example/"})
    elsewhere = respx_mock.get("https://elsewhere.example/").respond(200, content=DOC)
    client = new_client()
    try:
        assert (await get(client))[0] == 301
    finally:
        await client.aclose()
    assert not elsewhere.called


@pytest.mark.parametrize(
    ("error", "reason"),
    [(httpx.ConnectTimeout("slow"), "timed out"), (httpx.RemoteProtocolError("junk"), "not an HTTP answer")],
)
async def test_httpx_errors_come_out_as_the_clients_one_line(
    respx_mock: respx.MockRouter, error: Exception, reason: str
) -> None:
    respx_mock.get(ACTOR).mock(side_effect=error)
    client = new_client()
    try:
        with pytest.raises(FetchError, match=reason):
            await get(client)
    finally:
        await client.aclose()
