"""`send.post` over the httpx transport, its remote mocked by respx: answers and failures become Attempts."""

from __future__ import annotations

import httpx
import pytest
import respx

from fedqueue.outbound.send import BODY_HEAD_BYTES, post, prepare_body
from fedqueue.remote.http_client import HttpClient, SigningIdentity
from fedqueue.rules.signing import keys
from fedqueue.settings import load_settings
from fedqueue.storage.column_types import utcnow

INBOX = "https://remote.example/inbox"


SETTINGS = load_settings(database_url="sqlite+aiosqlite:///unused.db", http_transport="httpx")


def identity() -> SigningIdentity:
    pair = keys.generate_key_pair()
    return SigningIdentity("https://q.example/actors/alice#main-key", keys.load_private_key(pair.private_pem))


@respx.mock(assert_all_called=True)
async def test_a_refusal_keeps_the_status_the_body_head_and_retry_after(respx_mock: respx.MockRouter) -> None:
    inbox = respx_mock.post(INBOX).respond(503, headers={"Retry-After": "120"}, content=b"x" * 5000)
    client = HttpClient(SETTINGS)
    try:
        attempt = await post(client, INBOX, prepare_body('{"type": "Like"}'), identity(), utcnow(), "rfc9421")
    finally:
        await client.aclose()
    assert (attempt.status, attempt.retry_after, attempt.scheme) == (503, "120", "rfc9421")
    assert attempt.body_head == "x" * BODY_HEAD_BYTES
    request = inbox.calls.last.request
    assert "signature-input" in request.headers and "content-digest" in request.headers


@pytest.mark.parametrize(
    ("error", "permanent"),
    [(httpx.ConnectError("refused"), False), (httpx.LocalProtocolError("illegal header"), True)],
)
@respx.mock
async def test_a_post_without_an_answer_is_an_attempt_with_the_reason(
    respx_mock: respx.MockRouter, error: Exception, permanent: bool
) -> None:
    respx_mock.post(INBOX).mock(side_effect=error)
    client = HttpClient(SETTINGS)
    try:
        attempt = await post(client, INBOX, prepare_body("{}"), identity(), utcnow())
    finally:
        await client.aclose()
    assert attempt.status is None and attempt.permanent is permanent
    assert attempt.error is not None and str(error) in attempt.error
