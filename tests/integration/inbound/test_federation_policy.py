"""Federation policy, both ways, on both engines: blocks that cover subdomains, with a reason,
and the allowlist mode (nothing fetched from, delivered to or accepted from other hosts)."""

from __future__ import annotations

import json

import httpx
import pytest
from aiohttp import web
from sqlalchemy import insert

from fedqueue.metrics import Metrics
from fedqueue.outbound.worker import Worker
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.address_guard import FetchError
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage import blocks as block_memory
from fedqueue.storage.admin import BLOCKED, REFUSED_BLOCKED
from fedqueue.storage.tables import HostRow
from fedqueue.web.app import create_app
from tests.fediverse import RemoteActor, post, refused_with
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer
from tests.outbound import fast, insert_outbox_row, run_burst

PATH = "/actors/alice/inbox"
_hosts = HostRow.__table__  # type: ignore[attr-defined]


def like(n: int) -> dict[str, str]:
    return {"type": "Like", "object": f"https://example.org/notes/{n}"}


async def test_a_subdomain_of_a_blocked_domain_is_refused_with_403_before_any_fetch(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    await store.admin.block("spam.example", who="test", reason="spam waves")
    # Signed by bob's key, but in the name of an actor on a subdomain of the blocked domain.
    spammer = "https://social.spam.example/users/x"
    activity = {
        "id": f"{spammer}/likes/1",
        "type": "Like",
        "actor": spammer,
        "object": "https://example.org/1",
    }
    refused_with(await post(client, PATH, bob.signed(PATH, activity)), 403, "social.spam.example is blocked")
    assert remote.requests == []  # refused before the key fetch
    await store.admin.unblock("spam.example", who="test")
    assert (await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))).status_code == 202


async def test_a_block_kills_its_subdomains_deliveries_and_later_ones_die_at_fan_out_with_its_reason(
    store: Store, worker: Worker
) -> None:
    await store.actors.create("alice")
    inboxes = [
        "https://a.spam.example/inbox",
        "https://spam.example:8443/inbox",
        "https://notspam.example/inbox",
    ]
    first = await insert_outbox_row(store, "alice", like(1), inboxes)
    assert await worker.fanout.expand_pending() == 1

    host = await store.admin.block("Spam.example", who="cli:ann", reason="spam waves")
    assert (host.host, host.blocked, host.block_reason) == ("spam.example", True, "spam waves")
    states = {d.inbox: (d.state, d.last_error) for d in await store.deliveries.for_outbox(first)}
    assert states == {
        inboxes[0]: ("dead", BLOCKED),
        inboxes[1]: ("dead", BLOCKED),
        inboxes[2]: ("queued", None),
    }
    [entry] = [e for e in await store.admin.audit_log() if e.action == "block"]
    assert entry.target == "host:spam.example"
    assert json.loads(entry.detail or "{}") == {
        "blocked": True,
        "block_reason": "spam waves",
        "deliveries_dead": 2,
    }

    later = await insert_outbox_row(store, "alice", like(2), ["https://b.spam.example/inbox", inboxes[2]])
    assert await worker.fanout.expand_pending() == 1
    [dead, queued] = await store.deliveries.for_outbox(later)
    assert (dead.state, dead.last_error, queued.state) == ("dead", REFUSED_BLOCKED, "queued")
    assert dead.last_error_detail == (
        "host b.spam.example is blocked by an admin (covered by the block of spam.example): spam waves"
    )

    assert await store.admin.killed_by_block("spam.example") == 3
    await store.admin.unblock("spam.example", who="test")
    requeued = await store.admin.requeue_blocked("spam.example", who="test")
    assert requeued.requeued == 3


async def test_in_allowlist_mode_other_hosts_are_refused_at_the_inbox_never_fetched_and_dead_at_fan_out(
    settings: Settings, store: Store, bob: RemoteActor, remote: LoopbackServer
) -> None:
    allowlist = fast(settings, federation_mode="allowlist", federation_allowlist="friends.example")
    await store.actors.create("alice")
    remote.on("POST", "/inbox", lambda _r: web.Response(status=202))
    http = HttpClient(allowlist)
    try:
        directory = RemoteDirectory(store, http)
        async with asgi_client(create_app(allowlist, store, directory=directory)) as client:
            response = await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))
        refused_with(response, 403, "is not on this server's allowlist")
        with pytest.raises(FetchError, match="allowlist"):
            await directory.actor(bob.uri, None)
    finally:
        await http.aclose()
    assert remote.requests == []  # nothing fetched from it

    row = await insert_outbox_row(
        store, "alice", like(1), [remote.url("/inbox"), "https://a.friends.example/in"]
    )
    await run_burst(allowlist, store, timeout_s=30)
    by_inbox = {d.inbox: d for d in await store.deliveries.for_outbox(row)}
    refused = by_inbox[remote.url("/inbox")]
    assert (refused.state, refused.attempts) == ("dead", 0)
    assert (
        refused.last_error
        == f"host 127.0.0.1:{remote.port} is not on this server's allowlist (federation_mode = allowlist)"
    )
    assert remote.received("POST", "/inbox") == []  # nothing delivered to it
    assert by_inbox["https://a.friends.example/in"].last_error != refused.last_error  # tried: allowed


async def test_the_block_list_is_read_once_not_per_request(
    client: httpx.AsyncClient, store: Store, bob: RemoteActor, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Domain matching adds no read per request: the blocks are matched in memory, read again
    only after a block or unblock (or `BLOCKS_MEMORY_S`, made long here)."""
    monkeypatch.setattr(block_memory, "BLOCKS_MEMORY_S", 3600.0)
    await store.actors.create("alice")
    await store.admin.block("spam.example", who="test")
    before = store.blocks.reads
    for _ in range(50):
        assert (await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))).status_code == 202
    assert store.blocks.reads - before == 1
    await store.admin.block("more-spam.example", who="test")
    for _ in range(10):
        assert (await post(client, PATH, bob.signed(PATH, bob.note_to("alice")))).status_code == 202
    assert store.blocks.reads - before == 2


async def test_after_a_restart_into_allowlist_mode_deliveries_queued_before_go_only_to_allowed_hosts(
    settings: Settings, store: Store, remote: LoopbackServer, other: LoopbackServer
) -> None:
    await store.actors.create("alice")
    for server in (remote, other):
        server.on("POST", "/inbox", lambda _r: web.Response(status=202))
    row = await insert_outbox_row(store, "alice", like(1), [remote.url("/inbox"), other.url("/inbox")])
    http = HttpClient(settings)
    try:  # queued by a worker in blocklist mode, sent by one started in allowlist mode
        assert await Worker(fast(settings), store, http, metrics=Metrics()).fanout.expand_pending() == 1
    finally:
        await http.aclose()
    allowlist = fast(settings, federation_mode="allowlist", federation_allowlist=f"127.0.0.1:{remote.port}")
    await run_burst(allowlist, store, timeout_s=30)
    by_inbox = {d.inbox: d for d in await store.deliveries.for_outbox(row)}
    assert by_inbox[remote.url("/inbox")].state == "delivered"
    refused = by_inbox[other.url("/inbox")]
    assert (refused.state, refused.attempts, refused.last_error) == (
        "dead",
        0,
        f"host 127.0.0.1:{other.port} is not on this server's allowlist (federation_mode = allowlist)",
    )
    assert other.received("POST", "/inbox") == []


async def test_queued_deliveries_to_a_subdomain_of_a_blocked_domain_die_unsent_with_the_blocks_reason(
    settings: Settings, store: Store, worker: Worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.actors.create("alice")
    row = await insert_outbox_row(store, "alice", like(1), ["https://a.spam.example/inbox"])
    assert await worker.fanout.expand_pending() == 1
    # A block whose own kill missed them (made by a version whose blocks covered no subdomains).
    async with store.database.transaction() as conn:
        await conn.execute(
            insert(_hosts).values(host="spam.example", blocked=True, block_reason="spam waves")
        )
    monkeypatch.setattr(block_memory, "BLOCKS_MEMORY_S", 0.0)
    await run_burst(fast(settings), store, timeout_s=30)
    [dead] = await store.deliveries.for_outbox(row)
    assert (dead.state, dead.attempts, dead.last_error) == ("dead", 0, REFUSED_BLOCKED)
    assert dead.last_error_detail == (
        "host a.spam.example is blocked by an admin (covered by the block of spam.example): spam waves"
    )
