"""An inbox POST whose keys are hostile or unreachable: a one-line 401, in bounded time, remembered."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from aiohttp import web
from sqlalchemy import select

from fedqueue.inbound.receive import KEY_UNFETCHED
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.digests import content_digest_header
from fedqueue.rules.signing.requests import RFC9421_POST_COMPONENTS, sign_rfc9421
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import InboundActivityRow, RemoteActorRow
from fedqueue.web.app import create_app
from tests.fediverse import LOCAL, POST_HEADERS, RemoteActor, post, refused_with
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer, SilentServer

_inbound = InboundActivityRow.__table__  # type: ignore[attr-defined]
_remote = RemoteActorRow.__table__  # type: ignore[attr-defined]
PATH = "/actors/alice/inbox"


async def nothing_stored(store: Store) -> bool:
    async with store.database.reading() as conn:
        inbound = (await conn.execute(select(_inbound))).all()
        usable = (await conn.execute(select(_remote).where(_remote.c.error.is_(None)))).all()
    return inbound == [] and usable == []


def bob_document(bob: RemoteActor, **changes: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "id": bob.uri,
        "type": "Person",
        "inbox": bob.inbox,
        "endpoints": {"sharedInbox": bob.server.url("/inbox")},
        "publicKey": {"id": bob.key_id, "owner": bob.uri, "publicKeyPem": bob.pair.public_pem},
    }
    return doc | changes


async def test_a_key_document_in_utf16_is_a_401_remembered_so_a_retry_fetches_nothing(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    body = json.dumps(bob_document(bob)).encode("utf-16")
    remote.on(
        "GET", "/users/bob", lambda _r: web.Response(body=body, content_type="application/activity+json")
    )
    activity = bob.note_to("alice")
    for _ in range(2):
        refused_with(await post(client, PATH, bob.signed(PATH, activity)), 401, "is not UTF-8", inbox_log)
    assert len(remote.received("GET", "/users/bob")) == 1
    assert await nothing_stored(store)


@pytest.mark.parametrize("host", ["0177.0.0.1", "127.000.000.001", "127.1", "0x7f.0.0.1"])
async def test_a_key_id_on_a_non_canonical_ipv4_spelling_is_a_401(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    host: str,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    key_id = f"http://{host}:{remote.port}/users/bob#main-key"
    signed = bob.signed(PATH, bob.note_to("alice"), key_id=key_id)
    refused_with(await post(client, PATH, signed), 401, "non-canonical IPv4 spelling", inbox_log)
    assert remote.requests == []
    assert await nothing_stored(store)


async def test_a_key_id_on_a_name_resolving_to_loopback_is_a_401_that_does_not_say_what_the_guard_found(
    settings: Settings,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    guarded = settings.model_copy(update={"allow_private_addresses": False})
    key_id = f"http://localhost:{remote.port}/users/bob#main-key"
    http = HttpClient(guarded)
    try:
        async with asgi_client(create_app(guarded, store, directory=RemoteDirectory(store, http))) as client:
            response = await post(client, PATH, bob.signed(PATH, bob.note_to("alice"), key_id=key_id))
    finally:
        await http.aclose()
    assert response.status_code == 401, response.text
    assert response.json()["error"] == KEY_UNFETCHED
    assert "resolves only to private or loopback addresses" not in response.text
    assert "resolves only to private or loopback addresses" in inbox_log.text
    assert key_id in inbox_log.text  # the log names the request's keyId
    assert remote.requests == []


async def test_a_follow_from_an_actor_whose_inbox_has_nul_is_a_401_and_nothing_is_stored(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    remote.serve_json("/users/bob", bob_document(bob, inbox=f"{bob.uri}/in\u0000box"))
    follow = bob.activity("Follow", object=f"{LOCAL}/actors/alice")
    refused_with(
        await post(client, PATH, bob.signed(PATH, follow)), 401, "unusable inbox: contains a NUL", inbox_log
    )
    assert await nothing_stored(store)


@pytest.fixture
async def silent() -> AsyncIterator[SilentServer]:
    server = await SilentServer().start()
    try:
        yield server
    finally:
        await server.stop()


def labelled(bob: RemoteActor, key_ids: list[str]) -> tuple[dict[str, str], bytes]:
    """One RFC 9421 POST with a label per key id, signed by bob, whatever key each names."""
    body = json.dumps(bob.note_to("alice")).encode()
    sent = POST_HEADERS | {"Content-Digest": content_digest_header(body)}
    private = keys.load_private_key(bob.pair.private_pem)
    created = int(utcnow().timestamp())
    inputs: list[str] = []
    signatures: list[str] = []
    for number, key_id in enumerate(key_ids, start=1):
        label = f"sig{number}"
        added = sign_rfc9421(
            "POST", f"{LOCAL}{PATH}", sent, private, key_id, RFC9421_POST_COMPONENTS, created, label=label
        )
        inputs.append(added["Signature-Input"])
        signatures.append(added["Signature"])
    return sent | {"Signature-Input": ", ".join(inputs), "Signature": ", ".join(signatures)}, body


async def test_keys_on_a_server_that_never_answers_cost_one_short_deadline_and_only_three_fetches(
    settings: Settings,
    store: Store,
    directory: RemoteDirectory,
    bob: RemoteActor,
    silent: SilentServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    short = settings.model_copy(update={"inbound_verify_timeout_seconds": 1.0})
    key_ids = [silent.url(f"/keys/{number}") for number in range(1, 6)]
    async with asgi_client(create_app(short, store, directory=directory)) as client:
        response = await post(client, PATH, labelled(bob, key_ids))
        refused_with(response, 401, "timed out", inbox_log)
        # Five labels, three considered, their keys fetched at once (never one after another).
        assert sorted(silent.request_lines) == [f"GET /keys/{number} HTTP/1.1" for number in (1, 2, 3)]
        assert silent.most_open == 3
        # The timeouts are remembered: the sender's retry is refused without a fetch.
        refused_with(await post(client, PATH, labelled(bob, key_ids)), 401, "timed out", inbox_log)
        assert len(silent.request_lines) == 3
    assert await nothing_stored(store)


@pytest.mark.timeout(15)  # the bound: waiting out the hanging fetch would take 30 s
async def test_a_good_signature_is_accepted_while_another_labels_key_server_hangs(
    settings: Settings, store: Store, directory: RemoteDirectory, bob: RemoteActor, silent: SilentServer
) -> None:
    await store.actors.create("alice")
    short = settings.model_copy(update={"inbound_verify_timeout_seconds": 60.0})
    async with asgi_client(create_app(short, store, directory=directory)) as client:
        response = await post(client, PATH, labelled(bob, [silent.url("/keys/1"), bob.key_id]))
        assert response.status_code == 202, response.text
    assert silent.request_lines == ["GET /keys/1 HTTP/1.1"]
