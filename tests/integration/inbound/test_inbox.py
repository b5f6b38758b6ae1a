"""POST to an inbox with really signed requests: what is accepted, what is refused and why."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from sqlalchemy import select, update

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import parse_request_signatures, sha256_digest_header, verify_parsed
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.actors import ActorStore
from fedqueue.storage.tables import HostRow, InboundActivityRow, InboxItemRow
from fedqueue.web.app import create_app
from tests.fediverse import LOCAL, RemoteActor, hours_ago, post, refused_with
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer

_inbound = InboundActivityRow.__table__  # type: ignore[attr-defined]
_items = InboxItemRow.__table__  # type: ignore[attr-defined]
_hosts = HostRow.__table__  # type: ignore[attr-defined]


async def stored(store: Store) -> list[dict[str, Any]]:
    async with store.database.reading() as conn:
        rows = await conn.execute(select(_inbound).order_by(_inbound.c.id))
        return [row._asdict() for row in rows]


async def items(store: Store) -> list[tuple[str, int]]:
    async with store.database.reading() as conn:
        rows = await conn.execute(select(_items.c.actor, _items.c.inbound_id).order_by(_items.c.id))
        return [(row.actor, row.inbound_id) for row in rows]


async def test_a_post_signed_by_fedqueues_own_signer_is_stored_with_its_verified_actor(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    activity = bob.note_to("alice")
    response = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", activity))
    assert response.status_code == 202, response.text
    assert response.json() == {"status": "accepted"}
    [row] = await stored(store)
    assert row["activity_id"] == activity["id"]
    assert row["actor_uri"] == bob.uri
    assert row["key_id"] == bob.key_id
    assert row["activity_type"] == "Create"
    assert json.loads(row["body"]) == activity
    assert row["received_at"].tzinfo is not None
    assert await items(store) == [("alice", row["id"])]


async def test_a_post_shaped_exactly_like_mastodons_is_accepted_on_both_inboxes(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    await store.actors.create("carol")
    personal = await post(
        client, "/actors/alice/inbox", bob.mastodon_signed("/actors/alice/inbox", bob.note_to("alice"))
    )
    assert personal.status_code == 202, personal.text
    shared = await post(client, "/inbox", bob.mastodon_signed("/inbox", bob.note_to("carol")))
    assert shared.status_code == 202, shared.text
    assert [actor for actor, _ in await items(store)] == ["alice", "carol"]


async def test_the_key_fetch_is_signed_by_the_instance_actor_whose_key_is_served_at_slash_actor(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", bob.note_to("alice")))
    [fetch] = remote.received("GET", "/users/bob")
    [signature] = parse_request_signatures(fetch.headers)
    assert signature.key_id == f"{LOCAL}/actor#main-key"
    instance = (await client.get("/actor")).json()
    assert instance["type"] == "Application"
    public_key = keys.load_public_key(instance["publicKey"]["publicKeyPem"])
    verify_parsed(signature, "GET", remote.url("/users/bob"), fetch.headers, b"", public_key)


def _drop_signature(signed: tuple[dict[str, str], bytes]) -> tuple[dict[str, str], bytes]:
    headers, body = signed
    return {k: v for k, v in headers.items() if k != "signature"}, body


def _replace_in_signature(old: str, new: str) -> Any:
    def change(signed: tuple[dict[str, str], bytes]) -> tuple[dict[str, str], bytes]:
        headers, body = signed
        return {**headers, "signature": headers["signature"].replace(old, new)}, body

    return change


def _change_body(signed: tuple[dict[str, str], bytes]) -> tuple[dict[str, str], bytes]:
    headers, body = signed
    return headers, body.replace(b'"hi"', b'"hacked"')


def _wrong_digest(signed: tuple[dict[str, str], bytes]) -> tuple[dict[str, str], bytes]:
    headers, body = signed
    return {**headers, "digest": "SHA-256=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}, body


@pytest.mark.parametrize(
    ("tamper", "reason"),
    [
        (_drop_signature, "not signed"),
        (
            _replace_in_signature('algorithm="rsa-sha256"', 'algorithm="rsa-sha512"'),
            "unsupported signature algorithm",
        ),
        (
            _replace_in_signature(" digest content-type", " content-type"),
            "signed headers must include digest",
        ),
        (_replace_in_signature("host date", "host date x-missing"), "'x-missing' is missing"),
        (_change_body, "Digest sha-256 does not match the body"),
        (_wrong_digest, "Digest sha-256 does not match the body"),
    ],
)
async def test_a_tampered_request_is_refused_with_a_one_line_reason(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    tamper: Any,
    reason: str,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    signed = tamper(bob.signed("/actors/alice/inbox", bob.note_to("alice")))
    refused_with(await post(client, "/actors/alice/inbox", signed), 401, reason, inbox_log)
    assert await stored(store) == []


async def test_a_signature_whose_digest_header_was_rewritten_to_match_a_new_body_does_not_verify(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    headers, body = bob.signed("/actors/alice/inbox", bob.note_to("alice"))
    new_body = body.replace(b'"hi"', b'"hacked"')
    headers = {**headers, "digest": sha256_digest_header(new_body)}
    refused_with(
        await post(client, "/actors/alice/inbox", (headers, new_body)), 401, "does not verify", inbox_log
    )


@pytest.mark.parametrize(("hours", "reason"), [(13.1, "too old"), (-1.1, "in the future")])
async def test_a_date_outside_the_window_is_refused_with(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    hours: float,
    reason: str,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    signed = bob.signed("/actors/alice/inbox", bob.note_to("alice"), now=hours_ago(hours))
    refused_with(await post(client, "/actors/alice/inbox", signed), 401, reason, inbox_log)


async def test_a_key_id_whose_fetch_gives_404_is_refused_with(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    signed = bob.signed(
        "/actors/alice/inbox", bob.note_to("alice"), key_id=remote.url("/users/ghost#main-key")
    )
    refused_with(await post(client, "/actors/alice/inbox", signed), 401, "answered 404", inbox_log)


async def test_a_key_whose_owner_is_not_the_activitys_actor_is_refused_with(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    remote: LoopbackServer,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    mallory = RemoteActor(remote, name="mallory").publish()
    signed = mallory.signed("/actors/alice/inbox", bob.note_to("alice"))  # bob's activity, mallory's key
    refused_with(
        await post(client, "/actors/alice/inbox", signed), 401, "not to the activity's actor", inbox_log
    )
    assert await stored(store) == []


async def test_a_rotated_key_is_fetched_again_once_before_refusing(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    ok = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", bob.note_to("alice")))
    assert ok.status_code == 202
    bob.pair = keys.generate_key_pair()
    bob.publish()
    rotated = await post(
        client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", bob.note_to("alice"))
    )
    assert rotated.status_code == 202, rotated.text
    assert len(remote.received("GET", "/users/bob")) == 2


async def test_a_second_delivery_of_an_activity_answers_202_and_changes_nothing(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    activity = bob.note_to("alice")
    first = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", activity))
    again = await post(client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", activity))
    assert (first.status_code, again.status_code) == (202, 202)
    assert again.json() == {"status": "duplicate"}
    assert len(await stored(store)) == 1
    assert len(await items(store)) == 1


async def test_one_activity_delivered_to_two_personal_inboxes_reaches_both_actors_once(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    await store.actors.create("carol")
    activity = bob.activity("Create", to=[AS_PUBLIC_URI], object={"type": "Note", "content": "hi"})
    for name in ("alice", "carol", "alice"):
        response = await post(client, f"/actors/{name}/inbox", bob.signed(f"/actors/{name}/inbox", activity))
        assert response.status_code == 202
    assert sorted(actor for actor, _ in await items(store)) == ["alice", "carol"]


AS_PUBLIC_URI = "https://www.w3.org/ns/activitystreams#Public"


async def test_a_captured_request_replayed_within_the_window_is_harmless_and_after_it_refused_with(
    settings: Settings,
    store: Store,
    directory: RemoteDirectory,
    bob: RemoteActor,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    short = settings.model_copy(update={"signature_max_age_seconds": 3.0, "signature_max_skew_seconds": 0.0})
    captured = bob.signed("/actors/alice/inbox", bob.activity("Like", object=f"{LOCAL}/actors/alice"))
    async with asgi_client(create_app(short, store, directory=directory)) as client:
        assert (await post(client, "/actors/alice/inbox", captured)).status_code == 202
        replay = await post(client, "/actors/alice/inbox", captured)
        assert replay.json() == {"status": "duplicate"}
        await asyncio.sleep(4.1)
        refused_with(await post(client, "/actors/alice/inbox", captured), 401, "too old", inbox_log)
    assert len(await stored(store)) == 1


async def test_an_activity_without_an_id_is_stored_once_per_signed_request(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    activity = bob.note_to("alice")
    del activity["id"]
    captured = bob.signed("/actors/alice/inbox", activity)
    assert (await post(client, "/actors/alice/inbox", captured)).json() == {"status": "accepted"}
    assert (await post(client, "/actors/alice/inbox", captured)).json() == {"status": "duplicate"}
    [row] = await stored(store)
    assert row["activity_id"].startswith("urn:fedqueue:anonymous:")


async def test_a_request_signed_for_another_host_is_refused_with(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    inbox_log: pytest.LogCaptureFixture,
) -> None:
    await store.actors.create("alice")
    headers, body = bob.signed("/actors/alice/inbox", bob.note_to("alice"))
    response = await client.post(
        "/actors/alice/inbox", content=body, headers={**headers, "host": "other.example"}
    )
    refused_with(response, 401, "not this server", inbox_log)


@pytest.mark.parametrize(
    ("path", "body", "content_type", "status", "reason"),
    [
        ("/actors/nobody/inbox", b"{}", "application/activity+json", 404, "no local actor named 'nobody'"),
        ("/actors/alice/inbox", b"x" * (1024 * 1024 + 1), "application/activity+json", 413, "byte cap"),
        ("/actors/alice/inbox", b"{}", "application/json", 415, "unsupported Content-Type"),
        ("/actors/alice/inbox", b"{}", "text/html", 415, "unsupported Content-Type"),
        ("/actors/alice/inbox", b"{}", "application/ld+json", 415, "ActivityStreams profile"),
        ("/actors/alice/inbox", b"{nope", "application/activity+json", 400, "not valid UTF-8 JSON"),
        ("/actors/alice/inbox", b"[1, 2]", "application/activity+json", 400, "not a JSON object"),
        ("/actors/alice/inbox", b'{"type": "Like"}', "application/activity+json", 400, "no actor"),
        ("/actors/alice/inbox", b"[" * 40 + b"]" * 40, "application/activity+json", 400, "not a JSON object"),
        (
            "/actors/alice/inbox",
            b'{"actor": "ACTOR", "type": "Like", "x": ' + b"[" * 40 + b"]" * 40 + b"}",
            "application/activity+json",
            400,
            "nested deeper than 32",
        ),
        (
            "/actors/alice/inbox",
            b'{"actor": "ACTOR", "type": "Like", "id": "https://elsewhere.example/1"}',
            "application/activity+json",
            400,
            "not on its actor's origin",
        ),
    ],
)
async def test_limits_and_malformed_bodies_get_their_status(
    client: httpx.AsyncClient,
    store: Store,
    bob: RemoteActor,
    path: str,
    body: bytes,
    content_type: str,
    status: int,
    reason: str,
) -> None:
    await store.actors.create("alice")
    headers, body = bob.signed(path, body.replace(b"ACTOR", bob.uri.encode()))
    response = await client.post(path, content=body, headers={**headers, "content-type": content_type})
    refused_with(response, status, reason)


async def test_ld_json_with_the_activitystreams_profile_is_accepted(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    await store.actors.create("alice")
    content_type = 'application/ld+json; profile="https://www.w3.org/ns/activitystreams"'
    signed = bob.signed("/actors/alice/inbox", bob.note_to("alice"), content_type=content_type)
    response = await post(client, "/actors/alice/inbox", signed)
    assert response.status_code == 202, response.text


async def test_a_blocked_host_is_refused_with_403_before_any_key_fetch(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    async with store.database.transaction() as conn:
        await conn.execute(_hosts.insert().values(host=f"127.0.0.1:{remote.port}", blocked=True))
    response = await post(
        client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", bob.note_to("alice"))
    )
    refused_with(response, 403, "is blocked")
    assert remote.requests == []
    async with store.database.transaction() as conn:
        await conn.execute(update(_hosts).values(blocked=False))
    response = await post(
        client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", bob.note_to("alice"))
    )
    assert response.status_code == 202


async def test_a_host_blocked_after_its_requests_were_admitted_is_refused_at_its_next(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    """Admissions are remembered a moment, but a write to hosts in this process forgets them."""
    await store.actors.create("alice")
    path = "/actors/alice/inbox"
    assert (await post(client, path, bob.signed(path, bob.note_to("alice")))).status_code == 202
    async with store.database.transaction() as conn:
        await conn.execute(_hosts.insert().values(host=f"127.0.0.1:{remote.port}", blocked=True))
    refused_with(await post(client, path, bob.signed(path, bob.note_to("alice"))), 403, "is blocked")


async def test_metrics_count_every_inbox_post_by_result_and_a_short_reason(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    activity = bob.note_to("alice")
    path = "/actors/alice/inbox"
    await post(client, path, bob.signed(path, activity))
    await post(client, path, bob.signed(path, activity))  # a duplicate
    await client.post(path, content=b"{}", headers={"content-type": "application/activity+json"})
    await client.post(path, content=b"{}", headers={"content-type": "text/plain"})
    await post(client, "/actors/nobody/inbox", bob.signed("/actors/nobody/inbox", activity))
    mallory = RemoteActor(remote, name="mallory").publish()
    forged = bob.note_to("alice")
    await post(client, path, mallory.signed(path, {**forged, "id": f"{mallory.uri}/x"}, key_id=bob.key_id))
    async with store.database.transaction() as conn:
        await conn.execute(_hosts.insert().values(host=f"127.0.0.1:{remote.port}", blocked=True))
    await post(client, path, bob.signed(path, bob.note_to("alice")))

    text = (await client.get("/metrics")).text
    counted = {
        line.split(" ")[0]: line.split(" ")[1]
        for line in text.splitlines()
        if line.startswith("fedqueue_inbox_requests_total{")
    }
    assert counted == {
        'fedqueue_inbox_requests_total{result="accepted",reason="new"}': "1",
        'fedqueue_inbox_requests_total{result="accepted",reason="duplicate"}': "1",
        'fedqueue_inbox_requests_total{result="refused",reason="401_signature"}': "2",  # unsigned, forged
        'fedqueue_inbox_requests_total{result="refused",reason="415_media_type"}': "1",
        'fedqueue_inbox_requests_total{result="refused",reason="404_unknown_actor"}': "1",
        'fedqueue_inbox_requests_total{result="refused",reason="403_blocked"}': "1",
    }


class NameReads:
    """Counts how often the inbox reads the names of every local actor."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        every_name = ActorStore.names

        async def counted(actors: ActorStore) -> list[str]:
            self.count += 1
            return await every_name(actors)

        monkeypatch.setattr(ActorStore, "names", counted)


async def shared_post(client: httpx.AsyncClient, bob: RemoteActor, activity: dict[str, Any]) -> None:
    response = await post(client, "/inbox", bob.signed("/inbox", activity))
    assert response.status_code == 202, response.text


async def test_the_shared_inbox_gives_an_activity_only_to_the_local_actors_it_names(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("alice", "carol", "dave"):
        await store.actors.create(name)
    reads = NameReads(monkeypatch)
    await shared_post(client, bob, bob.note_to("carol", "ghost", "dave"))
    assert sorted(actor for actor, _ in await items(store)) == ["carol", "dave"]
    assert reads.count == 0  # what the activity names is looked up, not every local actor


async def test_the_shared_inbox_gives_an_activity_naming_no_local_actor_to_every_local_actor(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("alice", "carol"):
        await store.actors.create(name)
    reads = NameReads(monkeypatch)
    followers_only = bob.activity("Create", to=[f"{bob.uri}/followers"], object={"type": "Note"})
    await shared_post(client, bob, followers_only)
    await shared_post(client, bob, bob.note_to("ghost"))  # a local-looking name that is no actor
    first, second = (row["id"] for row in await stored(store))
    assert sorted(await items(store)) == [
        ("alice", first),
        ("alice", second),
        ("carol", first),
        ("carol", second),
    ]
    assert reads.count == 2


async def test_a_personal_inbox_gives_an_activity_to_its_actor_and_the_other_local_actors_named(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("alice", "carol", "dave"):
        await store.actors.create(name)
    reads = NameReads(monkeypatch)
    response = await post(
        client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", bob.note_to("carol"))
    )
    assert response.status_code == 202, response.text
    assert sorted(actor for actor, _ in await items(store)) == ["alice", "carol"]
    assert reads.count == 0


async def test_a_follow_on_the_shared_inbox_is_accepted_for_the_followed_local_actor(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor
) -> None:
    for name in ("alice", "carol"):
        await store.actors.create(name)
    await shared_post(client, bob, bob.activity("Follow", object=f"{LOCAL}/actors/carol"))
    assert (await store.followers.get("carol", bob.uri)).state == "accepted"
    assert [actor for actor, _ in await items(store)] == ["carol"]
