"""`send.post` over a swapped-in httpx transport: answers and failures become Attempts."""

from __future__ import annotations

import httpx
import pytest

from fedqueue.outbound.send import BODY_HEAD_BYTES, post, prepare_body
from fedqueue.remote.client import HttpClient, SigningIdentity
from fedqueue.settings import load_settings
from fedqueue.signing import keys
from fedqueue.storage.column_types import utcnow

INBOX = "https://remote.example/inbox"


SETTINGS = load_settings(database_url="sqlite+aiosqlite:///unused.db")


def identity() -> SigningIdentity:
    pair = keys.generate_key_pair()
    return SigningIdentity("https://q.example/actors/alice#main-key", keys.load_private_key(pair.private_pem))


async def test_a_refusal_keeps_the_status_the_body_head_and_retry_after() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(503, headers={"Retry-After": "120"}, content=b"x" * 5000)

    client = HttpClient(SETTINGS, transport=httpx.MockTransport(answer))
    try:
        attempt = await post(client, INBOX, prepare_body('{"type": "Like"}'), identity(), utcnow(), "rfc9421")
    finally:
        await client.aclose()
    assert (attempt.status, attempt.retry_after, attempt.scheme) == (503, "120", "rfc9421")
    assert attempt.body_head == "x" * BODY_HEAD_BYTES
    [request] = seen
    assert "signature-input" in request.headers and "content-digest" in request.headers


@pytest.mark.parametrize(
    ("error", "permanent"),
    [(httpx.ConnectError("refused"), False), (httpx.UnsupportedProtocol("ftp"), True)],
)
async def test_a_post_without_an_answer_is_an_attempt_with_the_reason(
    error: Exception, permanent: bool
) -> None:
    def fail(_request: httpx.Request) -> httpx.Response:
        raise error

    client = HttpClient(SETTINGS, transport=httpx.MockTransport(fail))
    try:
        attempt = await post(client, INBOX, prepare_body("{}"), identity(), utcnow())
    finally:
        await client.aclose()
    assert attempt.status is None and attempt.permanent is permanent
    assert attempt.error is not None and type(error).__name__ in attempt.error
