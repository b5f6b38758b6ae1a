"""Fetching remote actors and keys from a real loopback server."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import logging
import re
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any, cast

import pytest
from aiohttp import web
from sqlalchemy import insert

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient, SendFailed, SigningIdentity
from fedqueue.rules.address_guard import FetchError
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import parse_cavage_signature, verify_cavage
from fedqueue.service.retention import prune_forever
from fedqueue.settings import Settings
from fedqueue.storage import CachedRemote, Store, remote_actors
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.tables import GoneInboxRow, HostRow
from tests.forged import remote_actor_bytes
from tests.loopback import LoopbackServer

_hosts = HostRow.__table__  # type: ignore[attr-defined]
_gone = GoneInboxRow.__table__  # type: ignore[attr-defined]


def actor_doc(remote: LoopbackServer, name: str, public_pem: str) -> dict[str, object]:
    uri = remote.url(f"/users/{name}")
    return {
        "id": uri,
        "type": "Person",
        "inbox": f"{uri}/inbox",
        "endpoints": {"sharedInbox": remote.url("/inbox")},
        "publicKey": {"id": f"{uri}#main-key", "owner": uri, "publicKeyPem": public_pem},
    }


#: Longer than any test may take: an entry that lingered this long would fail the test's timeout.
FOREVER_S = 3600.0


def cache_entry(uri: str, now: datetime | None = None) -> CachedRemote:
    """A usable cache entry for `uri`, fetched `now` (default: this moment), good for an hour."""
    fetched_at = now or utcnow()
    return CachedRemote(
        uri=uri,
        inbox=f"{uri}/inbox",
        shared_inbox=None,
        key_id=f"{uri}#main-key",
        public_key_pem="PEM",
        document="{}",
        error=None,
        fetched_at=fetched_at,
        expires_at=fetched_at + timedelta(hours=1),
    )


async def test_an_actor_is_fetched_with_a_signed_get_and_then_served_from_the_cache(
    store: Store, http_client: HttpClient, remote: LoopbackServer
) -> None:
    remote_pair = keys.generate_key_pair()
    remote.serve_json("/users/bob", actor_doc(remote, "bob", remote_pair.public_pem))
    local = await store.actors.create("alice")
    signer = SigningIdentity(
        "http://127.0.0.1:8000/actors/alice#main-key", await store.actors.signing_key("alice")
    )
    directory = RemoteDirectory(store, http_client)

    actor = await directory.actor(remote.url("/users/bob"), signer)
    assert actor.inbox == remote.url("/users/bob/inbox")
    assert actor.shared_inbox == remote.url("/inbox")
    await directory.actor(remote.url("/users/bob"), signer)
    fetches = remote.received("GET", "/users/bob")
    assert len(fetches) == 1
    request = fetches[0]
    assert request.headers["user-agent"].startswith("fedqueue/")
    public = keys.load_public_key(local.actor.public_key_pem)
    verify_cavage(
        "GET",
        remote.url("/users/bob"),
        request.headers,
        parse_cavage_signature(request.headers["signature"]),
        public,
    )


async def test_a_key_id_resolves_to_the_key_and_its_owner(
    store: Store, http_client: HttpClient, remote: LoopbackServer
) -> None:
    pair = keys.generate_key_pair()
    remote.serve_json("/users/bob", actor_doc(remote, "bob", pair.public_pem))
    key = await RemoteDirectory(store, http_client).key(remote.url("/users/bob#main-key"), None)
    assert key.owner == remote.url("/users/bob")
    assert key.public_key_pem == pair.public_pem


async def test_a_separate_key_document_must_be_listed_by_its_owner(
    store: Store, http_client: HttpClient, remote: LoopbackServer
) -> None:
    pair = keys.generate_key_pair()
    remote.serve_json("/users/bob", actor_doc(remote, "bob", pair.public_pem))
    remote.serve_json(
        "/keys/stolen",
        {
            "id": remote.url("/keys/stolen"),
            "owner": remote.url("/users/bob"),
            "publicKeyPem": pair.public_pem,
        },
    )
    with pytest.raises(FetchError, match="does not list key"):
        await RemoteDirectory(store, http_client).key(remote.url("/keys/stolen"), None)


async def test_a_document_claiming_to_be_an_actor_elsewhere_on_its_origin_cannot_lend_it_a_key(
    store: Store, http_client: HttpClient, remote: LoopbackServer
) -> None:
    """An upload on bob's server whose id is bob's: its key is not bob's, and bob stays bob."""
    bobs, forgers = keys.generate_key_pair(), keys.generate_key_pair()
    remote.serve_json("/users/bob", actor_doc(remote, "bob", bobs.public_pem))
    upload = remote.url("/media/upload.json")
    forged = actor_doc(remote, "bob", forgers.public_pem)
    forged["inbox"] = remote.url("/media/drop-box")
    forged["publicKey"] = {
        "id": f"{upload}#k",
        "owner": remote.url("/users/bob"),
        "publicKeyPem": forgers.public_pem,
    }
    remote.serve_json("/media/upload.json", forged)
    directory = RemoteDirectory(store, http_client)
    with pytest.raises(FetchError, match="does not list key"):
        await directory.key(f"{upload}#k", None)
    actor = await directory.actor(upload, None)  # the actor the upload claims, as its own address serves it
    assert (actor.uri, actor.inbox, actor.public_key_pem) == (
        remote.url("/users/bob"),
        remote.url("/users/bob/inbox"),
        bobs.public_pem,
    )


async def test_a_key_id_serving_an_actor_stub_resolves_through_the_actors_own_document(
    store: Store, http_client: HttpClient, remote: LoopbackServer
) -> None:
    """GoToSocial's keys: `/users/bob/main-key` serves a stub whose id is bob; bob lists the key."""
    pair = keys.generate_key_pair()
    bob, key_id = remote.url("/users/bob"), remote.url("/users/bob/main-key")
    public_key = {"id": key_id, "owner": bob, "publicKeyPem": pair.public_pem}
    remote.serve_json("/users/bob", actor_doc(remote, "bob", pair.public_pem) | {"publicKey": public_key})
    remote.serve_json("/users/bob/main-key", {"id": bob, "type": "Person", "publicKey": public_key})
    key = await RemoteDirectory(store, http_client).key(key_id, None)
    assert (key.owner, key.public_key_pem) == (bob, pair.public_pem)


async def test_a_claimed_id_whose_own_document_has_another_id_is_refused(
    store: Store, http_client: HttpClient, remote: LoopbackServer
) -> None:
    pair = keys.generate_key_pair()
    remote.serve_json("/users/alias", actor_doc(remote, "bob", pair.public_pem))
    remote.serve_json("/users/bob", actor_doc(remote, "carol", pair.public_pem))
    with pytest.raises(FetchError, match="whose document has another id"):
        await RemoteDirectory(store, http_client).actor(remote.url("/users/alias"), None)
    assert await store.remote_actors.get(remote.url("/users/bob"), utcnow()) is None


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (lambda: web.Response(status=404), "answered 404"),
        (lambda: web.Response(text="<html>", content_type="text/html"), "text/html, not JSON"),
        (lambda: web.Response(text="{nope", content_type="application/activity+json"), "malformed JSON"),
        (lambda: web.Response(text="[]", content_type="application/activity+json"), "not an object"),
        (
            lambda: web.Response(
                text='{"id": "https://elsewhere.example/x"}', content_type="application/json"
            ),
            "foreign id",
        ),
        (lambda: web.Response(body=b" " * (2 * 1024 * 1024), content_type="application/json"), "byte cap"),
    ],
)
async def test_an_unusable_actor_document_is_a_fetch_error_remembered_briefly(
    store: Store,
    http_client: HttpClient,
    remote: LoopbackServer,
    answer: Callable[[], web.Response],
    reason: str,
) -> None:
    remote.on("GET", "/users/bad", lambda _r: answer())
    directory = RemoteDirectory(store, http_client)
    with pytest.raises(FetchError, match=reason):
        await directory.actor(remote.url("/users/bad"), None)
    with pytest.raises(FetchError, match=reason):
        await directory.actor(remote.url("/users/bad"), None)
    assert len(remote.received("GET", "/users/bad")) == 1
    later = RemoteDirectory(store, http_client, clock=lambda: utcnow() + timedelta(minutes=6))
    with pytest.raises(FetchError):
        await later.actor(remote.url("/users/bad"), None)
    assert len(remote.received("GET", "/users/bad")) == 2


def gzipped(body: bytes) -> Callable[[Any], web.Response]:
    headers = {"content-type": "application/activity+json", "content-encoding": "gzip"}
    return lambda _request: web.Response(body=gzip.compress(body), headers=headers)


async def test_a_compressed_document_is_decoded_and_capped_by_its_decoded_size(
    store: Store, http_client: HttpClient, remote: LoopbackServer, settings: Settings
) -> None:
    doc = actor_doc(remote, "bob", keys.generate_key_pair().public_pem)
    remote.on("GET", "/users/bob", gzipped(json.dumps(doc).encode()))
    padding = b" " * (settings.max_document_bytes + 1)
    remote.on("GET", "/users/bomb", gzipped(b'{"id": "x"' + padding + b"}"))
    directory = RemoteDirectory(store, http_client)

    assert (await directory.actor(remote.url("/users/bob"), None)).inbox == doc["inbox"]
    with pytest.raises(FetchError, match="over the 1048576-byte cap"):
        await directory.actor(remote.url("/users/bomb"), None)


async def test_private_addresses_are_refused_unless_allowed(store: Store, remote: LoopbackServer) -> None:
    remote.serve_json("/users/bob", actor_doc(remote, "bob", keys.generate_key_pair().public_pem))
    from fedqueue.settings import load_settings

    strict = load_settings(database_url=store.database.engine.url.render_as_string(hide_password=False))
    guarded = HttpClient(strict)
    try:
        directory = RemoteDirectory(store, guarded)
        with pytest.raises(FetchError, match="private or loopback"):
            await directory.actor(remote.url("/users/bob"), None)
        with pytest.raises(FetchError, match="private or loopback"):
            await directory.actor(f"http://localhost:{remote.port}/users/bob", None)
    finally:
        await guarded.aclose()
    assert remote.requests == []


def _encoded(encoding: str) -> Callable[[], web.Response]:
    body = json.dumps({"id": "x", "inbox": "y"}).encode(encoding)
    return lambda: web.Response(body=body, content_type="application/activity+json")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-32"])
async def test_a_document_in_utf16_or_utf32_is_refused_as_not_utf8_and_remembered(
    store: Store, http_client: HttpClient, remote: LoopbackServer, encoding: str
) -> None:
    remote.on("GET", "/users/bad", lambda _r: _encoded(encoding)())
    directory = RemoteDirectory(store, http_client)
    for _ in range(2):
        with pytest.raises(FetchError, match="is not UTF-8"):
            await directory.actor(remote.url("/users/bad"), None)
        with pytest.raises(FetchError, match="is not UTF-8"):
            await directory.key(remote.url("/users/bad#main-key"), None)
    assert len(remote.received("GET", "/users/bad")) == 1


def _with(doc: dict[str, Any], path: tuple[str, ...], value: object) -> dict[str, Any]:
    """A deep copy of `doc` with the field at `path` set to `value`."""
    changed: dict[str, Any] = json.loads(json.dumps(doc))
    target = changed
    for name in path[:-1]:
        target = target[name]
    target[path[-1]] = value
    return changed


@pytest.mark.parametrize(
    ("path", "value", "reason"),
    [
        (("inbox",), "{uri}/in\u0000box", "unusable inbox: contains a NUL character"),
        (("inbox",), "{uri}/" + "i" * 2100, "unusable inbox: is longer than 2048 characters"),
        (("inbox",), "{uri}/\ud800", "unusable inbox: is not valid Unicode (a lone surrogate)"),
        (("inbox",), "javascript:alert(1)", "unusable inbox: not an http(s) URL"),
        (
            ("endpoints", "sharedInbox"),
            "{origin}/in\u0000box",
            "unusable sharedInbox: contains a NUL",
        ),
        (("endpoints", "sharedInbox"), "http://0177.0.0.1/inbox", "non-canonical IPv4 spelling"),
        (("publicKey", "id"), "{uri}#main\u0000key", "unusable key id: contains a NUL character"),
        (
            ("publicKey", "publicKeyPem"),
            "-----BEGIN\u0000",
            "unusable publicKeyPem: contains a NUL",
        ),
        (("id",), "{uri}\u0000", "unusable id: contains a NUL character"),
    ],
)
async def test_an_actor_document_with_an_unstorable_field_is_refused_and_nothing_is_stored(
    store: Store,
    http_client: HttpClient,
    remote: LoopbackServer,
    path: tuple[str, ...],
    value: str,
    reason: str,
) -> None:
    uri = remote.url("/users/bob")
    doc = actor_doc(remote, "bob", keys.generate_key_pair().public_pem)
    remote.serve_json("/users/bob", _with(doc, path, value.format(uri=uri, origin=remote.origin)))
    directory = RemoteDirectory(store, http_client)
    with pytest.raises(FetchError, match=re.escape(reason)) as caught:
        await directory.actor(uri, None)
    assert "\n" not in str(caught.value)
    with pytest.raises(FetchError, match=re.escape(reason)):
        await directory.key(f"{uri}#main-key", None)
    assert await store.remote_actors.get(uri, utcnow()) is None  # the failure is remembered in memory
    assert len(remote.received("GET", "/users/bob")) == 1


@pytest.mark.parametrize(
    ("uri", "reason"),
    [
        ("http://0177.0.0.1:{port}/users/bob", "non-canonical IPv4 spelling"),
        ("http://127.000.000.001:{port}/users/bob", "non-canonical IPv4 spelling"),
        ("http://127.1:{port}/users/bob", "non-canonical IPv4 spelling"),
        ("http://0x7f.0.0.1:{port}/users/bob", "non-canonical IPv4 spelling"),
        ("http://127.0.0.1:{port}/users/bob\u0000", "contains a NUL character"),
        ("http://127.0.0.1:{port}/users/" + "b" * 2100, "longer than 2048 characters"),
        ("http://[::1:{port}/users/bob", "not a valid URL"),
    ],
)
async def test_an_unusable_actor_uri_or_key_id_is_refused_without_a_request(
    store: Store, http_client: HttpClient, remote: LoopbackServer, uri: str, reason: str
) -> None:
    remote.serve_json("/users/bob", actor_doc(remote, "bob", keys.generate_key_pair().public_pem))
    directory = RemoteDirectory(store, http_client)
    target = uri.format(port=remote.port)
    with pytest.raises(FetchError, match=re.escape(reason)):
        await directory.actor(target, None)
    with pytest.raises(FetchError, match=re.escape(reason)):
        await directory.key(f"{target}#main-key", None)
    assert remote.requests == []


async def test_a_url_no_client_can_use_is_a_fetch_error_or_a_permanent_send_failure(
    http_client: HttpClient,
) -> None:
    url = "http://127.0.0.1:9/in\u0000box"  # httpx raised InvalidURL, which is no HTTPError
    with pytest.raises(FetchError, match=r"GET .* failed: "):
        async with http_client.get(url, {}):
            pass
    with pytest.raises(SendFailed, match="non-canonical IPv4 spelling") as caught:
        await http_client.post("http://0177.0.0.1:9/inbox", b"{}", {}, head_bytes=10)
    assert caught.value.permanent


async def test_concurrent_cache_writes_are_all_stored_and_the_last_of_one_actor_wins(store: Store) -> None:
    now = utcnow()
    answered = [f"https://r.example/u/{index % 5}/inbox-{index}" for index in range(20)]
    still_gone = "https://r.example/u/9/inbox"
    async with store.database.transaction() as conn:
        await conn.execute(
            insert(_gone), [{"inbox": inbox, "gone_at": now} for inbox in [*answered, still_gone]]
        )

    def entry(index: int) -> CachedRemote:
        uri = f"https://r.example/u/{index % 5}"
        return replace(cache_entry(uri, now), inbox=f"{uri}/inbox-{index}")

    await asyncio.gather(*(store.remote_actors.put(entry(index)) for index in range(20)))
    for actor in range(5):
        cached = await store.remote_actors.get(f"https://r.example/u/{actor}", now)
        assert cached is not None
        assert cached.inbox == f"https://r.example/u/{actor}/inbox-{15 + actor}"
    # Every inbox that answered is delivered to again, a later entry's as well as an earlier one's.
    assert await store.audience.gone([*answered, still_gone]) == {still_gone}


async def test_concurrent_lookups_each_get_their_own_entry_key_owner_and_host_scheme(store: Store) -> None:
    now = utcnow()

    def entry(
        uri: str, *, error: str | None = None, expires_in: timedelta = timedelta(hours=1)
    ) -> CachedRemote:
        return CachedRemote(
            uri=uri,
            inbox=None if error else f"{uri}/inbox",
            shared_inbox=None,
            key_id=None if error else f"{uri}#main-key",
            public_key_pem=None if error else "PEM",
            document=None if error else "{}",
            error=error,
            fetched_at=now,
            expires_at=now + expires_in,
        )

    await store.remote_actors.put(entry("https://a.example/u"))
    await store.remote_actors.put(entry("https://b.example/u", error="GET answered 500"))
    await store.remote_actors.put(entry("https://c.example/u", expires_in=timedelta(seconds=-1)))
    async with store.database.transaction() as conn:
        await conn.execute(insert(_hosts).values(host="a.example", signature_scheme="rfc9421"))
    asked = [
        ("https://a.example/u", "https://a.example/u#main-key", "a.example"),
        ("https://b.example/u", "https://b.example/u#main-key", "b.example"),
        ("https://c.example/u", "https://c.example/u#main-key", "c.example"),
        ("https://a.example/u", None, "a.example"),
        ("https://d.example/u", "https://a.example/u#main-key", "d.example"),
    ]
    found = await asyncio.gather(*(store.remote_actors.lookup(*one, now) for one in asked))
    assert [(f.entry.uri if f.entry else None, f.entry.error if f.entry else None) for f in found] == [
        ("https://a.example/u", None),
        ("https://b.example/u", "GET answered 500"),
        (None, None),
        ("https://a.example/u", None),
        (None, None),
    ]
    assert [f.key_owner.uri if f.key_owner else None for f in found] == [
        "https://a.example/u",
        None,
        None,
        None,
        "https://a.example/u",
    ]
    assert [f.host_scheme for f in found] == ["rfc9421", "unknown", "unknown", "rfc9421", "unknown"]


async def test_a_fetched_actor_reaches_the_shared_cache_behind_the_fetch(
    store: Store, http_client: HttpClient, remote: LoopbackServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fetch returns before the cache write commits; another process's directory then finds it."""
    monkeypatch.setattr(remote_actors, "BEHIND_LINGER_S", FOREVER_S)
    store = Store(store.database)
    remote.serve_json("/users/bob", actor_doc(remote, "bob", keys.generate_key_pair().public_pem))
    await RemoteDirectory(store, http_client).actor(remote.url("/users/bob"), None)
    assert await store.remote_actors.get(remote.url("/users/bob"), utcnow()) is None  # still behind
    await store.remote_actors.flushed()

    other_process = RemoteDirectory(store, http_client)  # nothing in its memory
    actor = await other_process.actor(remote.url("/users/bob"), None)
    assert actor.inbox == remote.url("/users/bob/inbox")
    assert len(remote.received("GET", "/users/bob")) == 1


async def test_a_cache_write_that_fails_behind_is_logged_and_the_others_of_its_batch_are_stored(
    store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    unstorable = replace(cache_entry("https://r.example/u/bad"), expires_at=cast(datetime, None))
    with caplog.at_level(logging.WARNING, logger="fedqueue.storage"):
        for entry in (cache_entry("https://r.example/u/1"), unstorable, cache_entry("https://r.example/u/2")):
            await store.remote_actors.put_behind(entry)
        await store.remote_actors.flushed()
    now = utcnow()
    assert await store.remote_actors.get("https://r.example/u/1", now) is not None
    assert await store.remote_actors.get("https://r.example/u/2", now) is not None
    assert await store.remote_actors.get("https://r.example/u/bad", now) is None
    (warning,) = [record.getMessage() for record in caplog.records if record.name == "fedqueue.storage"]
    assert warning.startswith("remote actor cache: an entry was not stored")


async def test_cache_writes_behind_are_bounded_and_past_the_bound_a_caller_waits_for_its_own(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Counted by entry, not by actor: a key refetched on every bad signature is bounded too."""
    monkeypatch.setattr(remote_actors, "MAX_BEHIND", 1)
    first = cache_entry("https://r.example/u/1")
    await store.remote_actors.put_behind(first)  # queued: returns at once
    again = replace(first, inbox="https://r.example/u/1/new-inbox")
    second = asyncio.ensure_future(store.remote_actors.put_behind(again))
    await asyncio.sleep(0)
    assert not second.done()  # one already waits: this one waits for its commit
    await second
    cached = await store.remote_actors.get("https://r.example/u/1", utcnow())
    assert cached is not None and cached.inbox == "https://r.example/u/1/new-inbox"


async def test_a_read_that_must_see_a_just_fetched_actor_waits_for_its_entry_alone(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Entries written behind linger for company; `written` sends this one's batch at once."""
    monkeypatch.setattr(remote_actors, "BEHIND_LINGER_S", FOREVER_S)
    store = Store(store.database)  # a hang here fails the test's timeout
    await store.remote_actors.written("https://r.example/u/never")  # nothing queued: at once
    await store.remote_actors.put_behind(cache_entry("https://r.example/u/1"))
    await store.remote_actors.written("https://r.example/u/1")
    assert await store.remote_actors.get("https://r.example/u/1", utcnow()) is not None


async def test_a_cache_write_clears_only_the_gone_marks_older_than_its_fetch(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 410 answered after the fetch is news its cache write, landing later, cannot undo."""
    monkeypatch.setattr(remote_actors, "BEHIND_LINGER_S", FOREVER_S)
    store = Store(store.database)
    entry = replace(cache_entry("https://r.example/u/1"), shared_inbox="https://r.example/inbox")
    assert entry.inbox is not None and entry.shared_inbox is not None
    await store.remote_actors.put_behind(entry)
    async with store.database.transaction() as conn:
        await conn.execute(
            insert(_gone),
            [
                {"inbox": entry.inbox, "gone_at": entry.fetched_at - timedelta(minutes=1)},
                {"inbox": entry.shared_inbox, "gone_at": entry.fetched_at + timedelta(seconds=1)},
            ],
        )
    await store.remote_actors.flushed()
    assert await store.audience.gone([entry.inbox, entry.shared_inbox]) == {entry.shared_inbox}


async def test_cached_actors_not_fetched_for_the_retention_and_expired_failures_are_pruned(
    store: Store, settings: Settings
) -> None:
    """The inbox pruning bounds remote_actors: what no request or delivery needed lately goes."""
    now = utcnow()
    old = cache_entry("https://r.example/u/old", now - timedelta(days=31))
    recent = cache_entry("https://r.example/u/recent", now - timedelta(days=29))
    failed = CachedRemote(
        uri="https://r.example/u/failed",
        inbox=None,
        shared_inbox=None,
        key_id=None,
        public_key_pem=None,
        document=None,
        error="GET answered 500",
        fetched_at=now - timedelta(minutes=6),
        expires_at=now - timedelta(minutes=1),
    )
    for entry in (old, recent, failed):
        await store.remote_actors.put(entry)
    pruning = asyncio.create_task(prune_forever(store, settings))
    try:
        for _ in range(100):
            if await store.remote_actors.get(old.uri, old.fetched_at) is None:
                break
            await asyncio.sleep(0.05)
    finally:
        pruning.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await pruning
    assert settings.retention_remote_actors_days == 30
    assert await store.remote_actors.get(old.uri, old.fetched_at) is None
    assert await store.remote_actors.get(failed.uri, failed.fetched_at) is None
    assert await store.remote_actors.get(recent.uri, recent.fetched_at) is not None


async def test_remembered_failures_are_bounded_in_count_the_oldest_forgotten_first(
    store: Store, remote: LoopbackServer, settings: Settings
) -> None:
    small = settings.model_copy(update={"remote_failure_cache_entries": 2})
    http = HttpClient(small)
    try:
        directory = RemoteDirectory(store, http)
        for name in ("a", "b", "c", "c", "a"):
            with pytest.raises(FetchError, match="answered 404"):
                await directory.key(remote.url(f"/users/{name}#main-key"), None)
        figures = directory.figures()
    finally:
        await http.aclose()
    assert [len(remote.received("GET", f"/users/{name}")) for name in "abc"] == [2, 1, 1]
    assert (figures.failures, figures.failure_evictions) == (2, 2)
    assert await remote_actor_bytes(store) == (0, 0)
