"""Delivering to a real loopback server: signatures, retries, dead ends, host health, status."""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import replace
from datetime import timedelta

from aiohttp import web

from fedqueue.rules.signing import keys
from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import accept_all, add_follower, fast, insert_outbox_row, run_burst, verify_delivery

ALICE = "http://127.0.0.1:8000/actors/alice"
PUBLIC = "https://www.w3.org/ns/activitystreams#Public"
URLS = Urls("http://127.0.0.1:8000")


def actor_doc(remote: LoopbackServer, name: str, shared: bool = True) -> dict[str, object]:
    uri = remote.url(f"/users/{name}")
    doc: dict[str, object] = {"id": uri, "type": "Person", "inbox": f"{uri}/inbox"}
    if shared:
        doc["endpoints"] = {"sharedInbox": remote.url("/shared")}
    return doc


async def test_followers_and_addressed_actors_each_get_the_activity_once_signed_by_the_actor(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    alice = await store.actors.create("alice")
    for n in range(3):  # three followers behind one shared inbox
        await add_follower(
            store,
            "alice",
            remote.url(f"/users/f{n}"),
            remote.url(f"/users/f{n}/inbox"),
            remote.url("/shared"),
        )
    for n in range(3, 5):  # two with their own inbox only
        await add_follower(store, "alice", remote.url(f"/users/f{n}"), remote.url(f"/users/f{n}/inbox"))
    remote.serve_json("/users/bob", actor_doc(remote, "bob", shared=False))
    remote.serve_json("/users/carol", actor_doc(remote, "carol", shared=False))
    inboxes = ["/shared", "/users/f3/inbox", "/users/f4/inbox", "/users/bob/inbox", "/users/carol/inbox"]
    accept_all(remote, inboxes)
    activity = {
        "type": "Create",
        "to": [PUBLIC],
        "cc": [f"{ALICE}/followers", remote.url("/users/bob")],
        "bcc": [remote.url("/users/carol")],
        "object": {"type": "Note", "content": "hello"},
    }
    outbox_id = await insert_outbox_row(store, "alice", activity)
    await run_burst(fast(settings), store)

    posts = [r for r in remote.requests if r.method == "POST"]
    assert sorted(r.path for r in posts) == sorted(inboxes)
    for request in posts:
        body = verify_delivery(remote, request, ALICE, alice.actor.public_key_pem)
        assert "bcc" not in body
        assert body["actor"] == ALICE
    assert [r.headers.get("signature") is not None for r in remote.received("GET", "/users/bob")] == [True]
    status = await activity_status(store, URLS, outbox_id)
    assert status["complete"] is True
    assert status["counts"] == {"delivered": 5}


async def test_a_503_twice_then_202_is_delivered_on_the_third_attempt_with_growing_delays(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    answers = iter([503, 503, 202])
    remote.on("POST", "/inbox", lambda _r: web.Response(status=next(answers)))
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, [remote.url("/inbox")]
    )
    await run_burst(fast(settings, retry_base_seconds=0.1), store, jitter=lambda: 1.0)

    arrivals = [remote.requests.index(r) for r in remote.received("POST", "/inbox")]
    assert len(arrivals) == 3
    [delivery] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert (delivery["state"], delivery["attempts"], delivery["last_status"]) == ("delivered", 3, 202)


async def test_retry_delays_grow_between_attempts(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    times: list[float] = []
    answers = iter([503, 503, 202])

    def answer(_r: Recorded) -> web.Response:
        times.append(asyncio.get_running_loop().time())
        return web.Response(status=next(answers))

    remote.on("POST", "/inbox", answer)
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, [remote.url("/inbox")])
    await run_burst(fast(settings, retry_base_seconds=0.1), store, jitter=lambda: 1.0)
    assert len(times) == 3
    first_gap, second_gap = times[1] - times[0], times[2] - times[1]
    assert first_gap >= 0.1 and second_gap >= 0.2


async def test_retry_after_is_honoured(settings: Settings, store: Store, remote: LoopbackServer) -> None:
    await store.actors.create("alice")
    answers = iter([web.Response(status=429, headers={"Retry-After": "30"}), web.Response(status=202)])
    remote.on("POST", "/inbox", lambda _r: next(answers))
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, [remote.url("/inbox")]
    )
    quick = fast(settings, retry_cap_seconds=3600)
    started = utcnow()
    await run_burst(quick, store)
    [delivery] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert delivery["state"] == "failed"
    assert str(delivery["next_attempt_at"]) >= (started + timedelta(seconds=30)).isoformat()
    await run_burst(quick, store, clock=lambda: utcnow() + timedelta(seconds=31))
    [delivery] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert delivery["state"] == "delivered"


async def test_404_and_410_are_dead_after_one_attempt_and_a_gone_inbox_is_skipped_later(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    remote.on("POST", "/missing", lambda _r: web.Response(status=404, text="no such inbox"))
    remote.on("POST", "/gone", lambda _r: web.Response(status=410, text="gone"))
    inboxes = [remote.url("/missing"), remote.url("/gone")]
    first = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, inboxes)
    await run_burst(fast(settings), store)
    rows = {d["inbox"]: d for d in (await activity_status(store, URLS, first))["deliveries"]}
    assert rows[remote.url("/missing")]["state"] == "dead"
    assert rows[remote.url("/missing")]["attempts"] == 1
    assert rows[remote.url("/missing")]["last_error"] == "HTTP 404: no such inbox"
    assert rows[remote.url("/gone")]["state"] == "dead"

    second = await insert_outbox_row(store, "alice", {"type": "Like", "object": "y"}, [remote.url("/gone")])
    await run_burst(fast(settings), store)
    [skipped] = (await activity_status(store, URLS, second))["deliveries"]
    assert skipped["state"] == "dead" and "410" in str(skipped["last_error"])
    assert len(remote.received("POST", "/gone")) == 1


async def test_an_unusable_recipient_is_dead_with_the_reason_and_the_others_go_on(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    remote.serve_json("/users/bob", actor_doc(remote, "bob", shared=False))
    remote.on(
        "GET", "/users/huge", lambda _r: web.Response(body=b" " * 2_000_000, content_type="application/json")
    )
    accept_all(remote, ["/users/bob/inbox"])
    to = [remote.url("/users/bob"), remote.url("/users/missing"), remote.url("/users/huge")]
    outbox_id = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x", "to": to})
    await run_burst(fast(settings), store)
    deliveries = (await activity_status(store, URLS, outbox_id))["deliveries"]
    rows = {d["inbox"] or d["recipient"]: d for d in deliveries}
    assert rows[remote.url("/users/bob/inbox")]["state"] == "delivered"
    assert "answered 404" in str(rows[remote.url("/users/missing")]["last_error"])
    assert "byte cap" in str(rows[remote.url("/users/huge")]["last_error"])
    assert rows[remote.url("/users/huge")]["state"] == "dead"
    # The actor's URL is no inbox: the unusable recipients' rows have none.
    assert [d["inbox"] for d in deliveries if d["recipient"]] == [None, None]


async def test_an_inbox_on_another_origin_than_its_actor_is_dead_with_the_rule_named(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    elsewhere = {**actor_doc(remote, "carol", shared=False), "inbox": "https://inboxes.example/carol"}
    remote.serve_json("/users/carol", elsewhere)
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x", "to": [remote.url("/users/carol")]}
    )
    await run_burst(fast(settings), store)
    [dead] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert dead["state"] == "dead"
    assert f"inbox https://inboxes.example/carol is not on the actor's origin {remote.url('')}" in (
        dead["last_error"] or ""
    ), dead["last_error"]


async def test_a_retried_unusable_recipient_is_delivered_to_the_inbox_its_actor_document_names(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    document = json.dumps(actor_doc(remote, "bob", shared=False))
    answers = iter([web.Response(status=503, text="down for maintenance")])
    remote.on(
        "GET",
        "/users/bob",
        lambda _r: (
            next(answers, None) or web.Response(text=document, content_type="application/activity+json")
        ),
    )
    accept_all(remote, ["/users/bob", "/users/bob/inbox"])
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x", "to": [remote.url("/users/bob")]}
    )
    await run_burst(fast(settings), store)
    [dead] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert (dead["state"], dead["inbox"], dead["recipient"]) == ("dead", None, remote.url("/users/bob"))
    assert "answered 503" in (dead["last_error"] or "")

    await store.admin.retry(dead["id"], who="test")
    await run_burst(fast(settings), store)
    [delivered] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert (delivered["state"], delivered["inbox"]) == ("delivered", remote.url("/users/bob/inbox"))
    assert len(remote.received("POST", "/users/bob/inbox")) == 1
    assert remote.received("POST", "/users/bob") == []  # never POSTed to the actor's URL


async def test_a_retried_recipient_whose_actor_document_still_fails_stays_dead_with_the_reason(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    remote.on("GET", "/users/bob", lambda _r: web.Response(status=404))
    accept_all(remote, ["/users/bob"])
    to = [remote.url("/users/bob")]
    outbox_id = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x", "to": to})
    await run_burst(fast(settings), store)
    [dead] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    await store.admin.retry(dead["id"], who="test")
    await run_burst(fast(settings), store)
    [still] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert (still["state"], still["inbox"], still["attempts"]) == ("dead", None, 1)
    assert "answered 404" in (still["last_error"] or "")
    assert len(remote.received("GET", "/users/bob")) == 2  # fetched again, not from the cache
    assert remote.received("POST", "/users/bob") == []


async def test_a_host_with_an_open_circuit_gets_one_probe_not_its_backlog(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    remote.on("POST", "/inbox", lambda _r: web.Response(status=503))
    quick = fast(settings, circuit_failure_threshold=3, circuit_open_seconds=3600)
    await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, [remote.url(f"/inbox?n={n}") for n in range(3)]
    )
    await run_burst(quick, store)
    [health] = await store.hosts.all()
    assert health.circuit == "open"
    before = len(remote.requests)

    await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "y"}, [remote.url(f"/inbox?m={n}") for n in range(20)]
    )
    await run_burst(quick, store, clock=lambda: utcnow() + timedelta(seconds=3601))
    assert len(remote.requests) - before == 1  # the probe, nothing else
    [health] = await store.hosts.all()
    assert health.circuit == "open"


async def test_a_recovering_host_gets_the_probe_first_then_growing_concurrency(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    in_flight = {"now": 0}
    peaks: list[int] = []

    async def slow_ok(_r: Recorded) -> web.Response:
        in_flight["now"] += 1
        peaks.append(in_flight["now"])
        await asyncio.sleep(0.05)
        in_flight["now"] -= 1
        return web.Response(status=202)

    remote.on("POST", "/inbox", slow_ok)
    host = f"127.0.0.1:{remote.port}"
    await store.hosts.update(
        {host: lambda h: replace(h, circuit="open", consecutive_failures=50, circuit_until=utcnow())}
    )
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, [remote.url(f"/inbox?n={n}") for n in range(40)]
    )
    await run_burst(fast(settings, poll_interval_seconds=0.05), store)
    assert (await activity_status(store, URLS, outbox_id))["counts"] == {"delivered": 40}
    assert peaks[0] == 1  # the probe alone
    assert max(peaks[1:3]) <= 2  # then the recovery start allowance
    [health] = await store.hosts.all()
    assert health.circuit == "closed" and health.consecutive_failures == 0


async def test_paused_hosts_wait_without_attempts_and_blocked_hosts_are_refused(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    accept_all(remote, ["/inbox"])
    host = f"127.0.0.1:{remote.port}"
    await store.hosts.update({host: lambda h: replace(h, paused=True)})
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, [remote.url("/inbox")]
    )
    await run_burst(fast(settings), store)
    [waiting] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert (waiting["state"], waiting["attempts"]) == ("queued", 0)
    await store.hosts.update({host: lambda h: replace(h, paused=False, blocked=True)})
    await run_burst(fast(settings), store)
    [refused] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert (refused["state"], refused["attempts"], refused["last_error"]) == (
        "dead",
        0,
        "host is blocked by an admin",
    )
    assert remote.requests == []


async def test_private_addresses_are_never_delivered_to_unless_allowed(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    accept_all(remote, ["/inbox"])
    outbox_id = await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "x"}, [remote.url("/inbox")]
    )
    await run_burst(fast(settings, allow_private_addresses=False), store)
    [refused] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert refused["state"] == "dead" and "private or loopback" in str(refused["last_error"])
    assert remote.requests == []


async def test_keys_verify_and_the_body_is_identical_for_every_inbox(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    alice = await store.actors.create("alice")
    paths = [f"/inbox/{n}" for n in range(25)]
    accept_all(remote, paths)
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, [remote.url(p) for p in paths])
    await run_burst(fast(settings), store)
    assert sorted(r.path for r in remote.requests) == sorted(paths)
    assert len({r.body for r in remote.requests}) == 1
    for request in remote.requests:
        verify_delivery(remote, request, ALICE, alice.actor.public_key_pem)
    assert keys.load_public_key(alice.actor.public_key_pem)


async def test_a_hanging_inbox_does_not_hold_up_deliveries_claimed_after_it(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    others_done = asyncio.Event()
    delivered: list[str] = []

    async def hanging(_r: Recorded) -> web.Response:
        try:  # answers only once every other delivery got through meanwhile
            await asyncio.wait_for(others_done.wait(), 20)
        except TimeoutError:
            return web.Response(status=503)
        return web.Response(status=202)

    def quick(request: Recorded) -> web.Response:
        delivered.append(request.path)
        if len(delivered) == 20:
            others_done.set()
        return web.Response(status=202)

    remote.on("POST", "/slow", hanging)
    remote.on("POST", "/inbox", quick)
    inboxes = [remote.url("/slow")] + [remote.url(f"/inbox?n={n}") for n in range(20)]
    outbox_id = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, inboxes)
    await run_burst(fast(settings, claim_batch_size=4), store)
    assert (await activity_status(store, URLS, outbox_id))["counts"] == {"delivered": 21}


async def test_an_update_never_overtakes_the_create_of_the_same_object_to_the_same_inbox(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    events: list[str] = []

    async def inbox(request: Recorded) -> web.Response:
        kind = json.loads(request.body)["type"]
        events.append(f"{kind} arrived")
        if kind == "Create":
            await asyncio.sleep(0.3)  # the Update is claimed meanwhile, in a batch of its own
        events.append(f"{kind} answered")
        return web.Response(status=202)

    remote.on("POST", "/inbox", inbox)
    note = {"id": "http://127.0.0.1:8000/notes/1", "type": "Note", "content": "v1"}
    await insert_outbox_row(store, "alice", {"type": "Create", "object": note}, [remote.url("/inbox")])
    await insert_outbox_row(
        store, "alice", {"type": "Update", "object": {**note, "content": "v2"}}, [remote.url("/inbox")]
    )
    # cavage-only: no discovery knock, which would hold the Update back on its own.
    await run_burst(fast(settings, claim_batch_size=1, signature_scheme_policy="cavage-only"), store)
    assert events == ["Create arrived", "Create answered", "Update arrived", "Update answered"]


async def test_a_refused_connection_reads_connection_refused_with_the_raw_text_kept(
    settings: Settings, store: Store
) -> None:
    await store.actors.create("alice")
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    inbox = f"http://127.0.0.1:{port}/inbox"
    outbox_id = await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, [inbox])
    await run_burst(fast(settings, retry_max_attempts=1), store)
    [row] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    assert (row["state"], row["last_error"]) == ("dead", "gave up after 1 attempt: connection refused")
    assert str(port) in (row["last_error_detail"] or "") and row["last_error_detail"] != "connection refused"
