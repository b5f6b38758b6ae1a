"""Choosing the signature scheme per host: the double knock, remembering it, rechecking it.

The remotes here are real loopback servers that check signatures with fedqueue's own
verification (`parse_request_signatures` + `verify_parsed`) and accept only one scheme.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from dataclasses import replace
from datetime import timedelta

import pytest
from aiohttp import web

from fedqueue.rules.circuit import HostHealth
from fedqueue.rules.errors import SignatureError
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import SignatureScheme, parse_request_signatures, verify_parsed
from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import fast, insert_outbox_row, run_burst

URLS = Urls("http://127.0.0.1:8000")
KEY_ID = "http://127.0.0.1:8000/actors/alice#main-key"


def scheme_of(request: Recorded) -> SignatureScheme:
    return "rfc9421" if "signature-input" in request.headers else "cavage"


def only(remote: LoopbackServer, accepted: SignatureScheme, public_pem: str, path: str = "/inbox") -> None:
    """`path` answers 202 to a request that verifies under `accepted`, else 401 naming the signature."""
    public_key = keys.load_public_key(public_pem)

    def answer(request: Recorded) -> web.Response:
        if scheme_of(request) != accepted:
            return web.Response(status=401, text=f"signature: only {accepted} is understood here")
        try:
            [signature] = parse_request_signatures(request.headers)
            assert signature.key_id == KEY_ID
            body = request.body if request.method == "POST" else b""
            verify_parsed(
                signature, request.method, remote.url(request.path), request.headers, body, public_key
            )
        except SignatureError as exc:
            return web.Response(status=401, text=f"signature: {exc}")
        return web.Response(status=202)

    remote.on("POST", path, answer)


def posts(remote: LoopbackServer) -> list[SignatureScheme]:
    return [scheme_of(r) for r in remote.requests if r.method == "POST"]


async def host_row(store: Store) -> HostHealth:
    [health] = await store.hosts.all()
    return health


def inboxes(remote: LoopbackServer, n: int, tag: str) -> list[str]:
    return [remote.url(f"/inbox?{tag}={i}") for i in range(n)]


async def test_a_cavage_only_remote_gets_the_delivery_after_one_double_knock_then_cavage_at_once(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    alice = await store.actors.create("alice")
    only(remote, "cavage", alice.actor.public_key_pem)
    quick = fast(settings, signature_scheme_policy="rfc9421-first")
    first = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, inboxes(remote, 5, "a"))
    await run_burst(quick, store)

    # The first delivery knocked twice; the host's other four waited for its answer.
    assert posts(remote) == ["rfc9421", "cavage", "cavage", "cavage", "cavage", "cavage"]
    status = await activity_status(store, URLS, first)
    assert status["counts"] == {"delivered": 5}
    assert {d["attempts"] for d in status["deliveries"]} == {1}  # the second knock spent no attempt
    health = await host_row(store)
    assert health.signature_scheme == "cavage" and health.scheme_checked_at is not None
    assert health.consecutive_failures == 0

    remote.requests.clear()
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "y"}, inboxes(remote, 3, "b"))
    await run_burst(quick, store)
    assert posts(remote) == ["cavage", "cavage", "cavage"]


@pytest.mark.parametrize(("policy", "knocks"), [("cavage-first", 1), ("rfc9421-first", 0)])
async def test_an_rfc9421_only_remote_gets_its_deliveries_and_key_fetches_signed_rfc9421(
    settings: Settings, store: Store, remote: LoopbackServer, policy: str, knocks: int
) -> None:
    alice = await store.actors.create("alice")
    only(remote, "rfc9421", alice.actor.public_key_pem)
    quick = fast(settings, signature_scheme_policy=policy)
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, inboxes(remote, 4, "a"))
    await run_burst(quick, store)
    assert posts(remote) == ["cavage"] * knocks + ["rfc9421"] * 4
    assert (await host_row(store)).signature_scheme == "rfc9421"

    # Now that the host is known to speak RFC 9421, an actor fetch there (signed by the instance
    # actor) is signed that way too.
    remote.requests.clear()
    public_key = keys.load_public_key(await store.actors.instance_public_key())

    def actor(request: Recorded) -> web.Response:
        [signature] = parse_request_signatures(request.headers)
        verify_parsed(signature, "GET", remote.url(request.path), request.headers, b"", public_key)
        return web.json_response(
            {"id": remote.url("/users/bob"), "type": "Person", "inbox": remote.url("/inbox")},
            content_type="application/activity+json",
        )

    remote.on("GET", "/users/bob", actor)
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "y", "to": [remote.url("/users/bob")]}
    )
    await run_burst(quick, store)
    assert [(r.method, scheme_of(r)) for r in remote.requests] == [("GET", "rfc9421"), ("POST", "rfc9421")]
    assert (await activity_status(store, URLS, outbox_id))["counts"] == {"delivered": 1}


@pytest.mark.parametrize(
    ("status", "text", "knocks"),
    [(401, "", 2), (403, "", 2), (400, "Signature-Input header missing", 2), (400, "malformed JSON", 1)],
)
async def test_a_remote_refusing_both_schemes_is_dead_after_one_knock_of_each(
    settings: Settings, store: Store, remote: LoopbackServer, status: int, text: str, knocks: int
) -> None:
    await store.actors.create("alice")
    remote.on("POST", "/inbox", lambda _r: web.Response(status=status, text=text))
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, [remote.url("/inbox")]
    )
    await run_burst(fast(settings, signature_scheme_policy="cavage-first"), store)

    assert posts(remote) == ["cavage", "rfc9421"][:knocks]
    [delivery] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert (delivery["state"], delivery["attempts"], delivery["last_status"]) == ("dead", 1, status)
    assert (await host_row(store)).signature_scheme == "unknown"


async def test_a_refused_second_knock_that_fails_for_another_reason_is_retried_per_the_outcome_rules(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    answers = iter([503, 202])

    def answer(request: Recorded) -> web.Response:
        if scheme_of(request) == "rfc9421":
            return web.Response(status=401, text="signature refused")
        return web.Response(status=next(answers))

    remote.on("POST", "/inbox", answer)
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, [remote.url("/inbox")]
    )
    await run_burst(fast(settings, signature_scheme_policy="rfc9421-first", retry_base_seconds=0.05), store)

    # rfc9421 refused, cavage 503 (one failed attempt); the retry knocks both again, cavage 202.
    assert posts(remote) == ["rfc9421", "cavage", "rfc9421", "cavage"]
    [delivery] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert (delivery["state"], delivery["attempts"]) == ("delivered", 2)
    assert (await host_row(store)).signature_scheme == "cavage"


async def test_a_remote_crashing_on_rfc9421_gets_cavage_at_once_under_rfc9421_first(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    alice = await store.actors.create("alice")
    only(remote, "cavage", alice.actor.public_key_pem)
    verifying = remote.handlers[("POST", "/inbox")]

    def answer(request: Recorded) -> Awaitable[web.StreamResponse] | web.StreamResponse:
        if scheme_of(request) == "rfc9421":
            return web.Response(status=500, text="undefined method 'split' for nil")
        return verifying(request)

    remote.on("POST", "/inbox", answer)
    quick = fast(settings, signature_scheme_policy="rfc9421-first")
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, inboxes(remote, 3, "a")
    )
    await run_burst(quick, store)

    # One 500 to the discovery knock, cavage at once in the same attempt, remembered for the rest.
    assert posts(remote) == ["rfc9421", "cavage", "cavage", "cavage"]
    status = await activity_status(store, URLS, outbox_id)
    assert status["counts"] == {"delivered": 3}
    assert {d["attempts"] for d in status["deliveries"]} == {1}
    assert (await host_row(store)).signature_scheme == "cavage"


@pytest.mark.parametrize(
    ("policy", "expected"), [("rfc9421-first", ["rfc9421", "cavage"]), ("cavage-first", ["cavage"])]
)
async def test_a_remote_answering_500_to_both_schemes_is_retried_later_per_the_outcome_rules(
    settings: Settings, store: Store, remote: LoopbackServer, policy: str, expected: list[str]
) -> None:
    await store.actors.create("alice")
    remote.on("POST", "/inbox", lambda _r: web.Response(status=500))
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, [remote.url("/inbox")]
    )
    await run_burst(fast(settings, signature_scheme_policy=policy, retry_max_attempts=1), store)

    assert posts(remote) == expected  # never more than one extra knock
    [delivery] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert (delivery["state"], delivery["attempts"], delivery["last_status"]) == ("dead", 1, 500)
    assert (await host_row(store)).signature_scheme == "unknown"


async def test_cavage_only_never_knocks_twice(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    alice = await store.actors.create("alice")
    only(remote, "rfc9421", alice.actor.public_key_pem)
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, [remote.url("/inbox")]
    )
    await run_burst(fast(settings, signature_scheme_policy="cavage-only"), store)
    assert posts(remote) == ["cavage"]
    [delivery] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert (delivery["state"], delivery["last_status"]) == ("dead", 401)


async def test_a_remembered_scheme_is_knocked_for_afresh_after_the_recheck_time(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    alice = await store.actors.create("alice")
    only(remote, "rfc9421", alice.actor.public_key_pem)  # the host has learned RFC 9421 meanwhile
    host = f"127.0.0.1:{remote.port}"
    quick = fast(settings, signature_scheme_policy="rfc9421-first", signature_scheme_recheck_days=7)
    checked = utcnow() - timedelta(days=3)
    await store.hosts.update(
        {host: lambda h: replace(h, signature_scheme="cavage", scheme_checked_at=checked)}
    )

    await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, [remote.url("/inbox")])
    await run_burst(quick, store)
    assert posts(remote) == ["cavage", "rfc9421"]  # still trusted: cavage first, refused, switched
    assert (await host_row(store)).signature_scheme == "rfc9421"

    stale = utcnow() - timedelta(days=8)
    await store.hosts.update({host: lambda h: replace(h, signature_scheme="cavage", scheme_checked_at=stale)})
    remote.requests.clear()
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "y"}, [remote.url("/inbox")])
    await run_burst(quick, store)
    assert posts(remote) == ["rfc9421"]  # due for a recheck: knocked as an unknown host
    health = await host_row(store)
    assert health.signature_scheme == "rfc9421"
    assert health.scheme_checked_at is not None and health.scheme_checked_at > stale + timedelta(days=7)


async def test_each_scheme_carries_the_digest_it_covers_and_the_body_is_the_same(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    alice = await store.actors.create("alice")
    only(remote, "rfc9421", alice.actor.public_key_pem)
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, inboxes(remote, 3, "a"))
    await run_burst(fast(settings, signature_scheme_policy="cavage-first"), store)
    [cavage, *rfc9421] = [r for r in remote.requests if r.method == "POST"]
    assert cavage.headers["digest"].startswith("SHA-256=") and "content-digest" not in cavage.headers
    assert {r.headers["content-digest"] for r in rfc9421} == {rfc9421[0].headers["content-digest"]}
    assert all("digest" not in r.headers for r in rfc9421)
    assert len({r.body for r in remote.requests}) == 1


async def test_a_host_slow_to_answer_its_first_knock_does_not_hold_its_other_deliveries(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    others_arrived = asyncio.Event()
    arrivals: list[str] = []

    async def answer(request: Recorded) -> web.Response:
        arrivals.append(request.path)
        if len(arrivals) == 3:
            others_arrived.set()
        if len(arrivals) > 1:
            return web.Response(status=202)
        try:  # the first knock answers only once the host's other deliveries went out meanwhile
            await asyncio.wait_for(others_arrived.wait(), 20)
        except TimeoutError:
            return web.Response(status=503)
        return web.Response(status=202)

    remote.on("POST", "/inbox", answer)
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, inboxes(remote, 3, "a")
    )
    await run_burst(fast(settings), store)
    assert (await activity_status(store, URLS, outbox_id))["counts"] == {"delivered": 3}
    assert len(arrivals) == 3
