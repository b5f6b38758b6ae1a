"""Every way a client call fails is a FedqueueError: an app catches one exception tree, never httpx's.

Transport failures and 5xx are `FedqueueUnavailable` (retry later), answers the client cannot
read are `FedqueueBadAnswer`, refusals stay a plain `FedqueueError` with fedqueue's reason.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import httpx
import pytest
import respx

from fedqueue.client import AsyncClient, Client, FedqueueBadAnswer, FedqueueError, FedqueueUnavailable

BASE = "http://fedqueue.internal:8000"
NOTE = {"type": "Note", "content": "hello"}


@pytest.fixture
def fedqueue() -> Iterator[respx.MockRouter]:
    with respx.mock(base_url=BASE, assert_all_called=False) as router:
        yield router


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_post_to_a_fedqueue_that_is_not_running_raises_fedqueue_unavailable() -> None:
    origin = f"http://127.0.0.1:{closed_port()}"

    with Client(origin, "t") as client, pytest.raises(FedqueueUnavailable) as down:
        client.post("alice", NOTE)

    assert down.value.status is None
    assert down.value.reason.startswith(f"cannot reach fedqueue at {origin}: ConnectError")
    assert isinstance(down.value.__cause__, httpx.ConnectError)  # kept for the app's logs


async def test_the_async_client_to_a_fedqueue_that_is_not_running_raises_fedqueue_unavailable() -> None:
    origin = f"http://127.0.0.1:{closed_port()}"

    async with AsyncClient(origin, "t") as client:
        with pytest.raises(FedqueueUnavailable, match="cannot reach fedqueue"):
            await client.status(7)


@pytest.mark.parametrize(
    ("failure", "said"),
    [
        (httpx.ConnectTimeout("timed out"), "no answer from http://fedqueue.internal:8000 in time"),
        (httpx.ReadTimeout("timed out"), "no answer from http://fedqueue.internal:8000 in time"),
        (httpx.RemoteProtocolError("peer closed connection"), "RemoteProtocolError: peer closed"),
        (httpx.ConnectError("Name or service not known"), "ConnectError: Name or service not known"),
    ],
)
async def test_timeouts_and_dropped_connections_are_fedqueue_unavailable_in_both_clients(
    fedqueue: respx.MockRouter, failure: Exception, said: str
) -> None:
    fedqueue.post("/actors/alice/outbox").mock(side_effect=failure)

    with Client(BASE, "t") as client, pytest.raises(FedqueueUnavailable, match=said):
        client.post("alice", NOTE)
    async with AsyncClient(BASE, "t") as aclient:
        with pytest.raises(FedqueueUnavailable, match=said):
            await aclient.post("alice", NOTE)


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_a_5xx_is_fedqueue_unavailable_with_its_status_and_retry_after(
    fedqueue: respx.MockRouter, status: int
) -> None:
    fedqueue.post("/actors/alice/outbox").respond(
        status, json={"error": "outbox backlog is full: retry later"}, headers={"Retry-After": "30"}
    )

    with Client(BASE, "t") as client, pytest.raises(FedqueueUnavailable) as busy:
        client.post("alice", NOTE)

    assert (busy.value.status, busy.value.reason, busy.value.retry_after_s) == (
        status,
        "outbox backlog is full: retry later",
        30.0,
    )


def test_a_proxys_html_error_page_becomes_one_line() -> None:
    with respx.mock(base_url=BASE) as router:
        router.get("/admin/activities/9").respond(502, text="<html>\n<h1>502 Bad Gateway</h1>\n</html>\n")
        with Client(BASE, "t") as client, pytest.raises(FedqueueUnavailable) as down:
            client.status(9)

    assert down.value.reason == "<html> <h1>502 Bad Gateway</h1> </html>"


@pytest.mark.parametrize(
    "body",
    [
        '{"id": "https://social.example/a/1", "status_u',  # cut short
        "<html>a login page of a proxy</html>",  # not JSON
        '["a list, not an object"]',
    ],
)
async def test_a_2xx_the_client_cannot_read_is_fedqueue_bad_answer_in_both_clients(
    fedqueue: respx.MockRouter, body: str
) -> None:
    fedqueue.post("/actors/alice/outbox").respond(201, text=body)

    with Client(BASE, "t") as client, pytest.raises(FedqueueBadAnswer) as unread:
        client.post("alice", NOTE)
    async with AsyncClient(BASE, "t") as aclient:
        with pytest.raises(FedqueueBadAnswer):
            await aclient.post("alice", NOTE)

    assert unread.value.status == 201
    assert unread.value.reason.startswith("unexpected answer: ")


def test_a_body_that_cannot_be_decoded_is_fedqueue_bad_answer(fedqueue: respx.MockRouter) -> None:
    gzip_that_is_not = httpx.ByteStream(b"not gzip at all")
    fedqueue.post("/actors/alice/outbox").mock(
        side_effect=lambda _: httpx.Response(
            201, headers={"Content-Encoding": "gzip"}, stream=gzip_that_is_not
        )
    )

    with Client(BASE, "t") as client, pytest.raises(FedqueueBadAnswer, match="DecodingError"):
        client.post("alice", NOTE)


def test_a_refusal_is_a_plain_fedqueue_error_not_unavailable(fedqueue: respx.MockRouter) -> None:
    fedqueue.post("/actors/alice/outbox").respond(400, json={"error": "activity has no type"})

    with Client(BASE, "t") as client, pytest.raises(FedqueueError) as refused:
        client.post("alice", NOTE)

    assert type(refused.value) is FedqueueError
    assert str(refused.value) == "fedqueue answered 400: activity has no type"
