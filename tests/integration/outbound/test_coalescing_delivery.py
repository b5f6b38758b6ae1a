"""Coalescing end to end: a real loopback receiver, the burst worker, both engines."""

from __future__ import annotations

import itertools
import json
import secrets
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import httpx
import pytest
from aiohttp import web

from fedqueue.cli.status import status_text
from fedqueue.rules.intake import normalize
from fedqueue.rules.urls import Urls
from fedqueue.service.fanout_status import activity_status
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import fast, insert_outbox_row, run_burst

URLS = Urls("http://127.0.0.1:8000")
NOTE = "http://127.0.0.1:8000/notes/1"
OTHER_NOTE = "http://127.0.0.1:8000/notes/2"


@dataclass
class Receiver:
    """The remote inbox: answers 503 while `down`, 202 otherwise, and remembers every POST."""

    remote: LoopbackServer
    down: bool = False
    fail_next: int = 0
    posts: list[tuple[int, dict[str, Any]]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.remote.on("POST", "/inbox", self._answer)

    def _answer(self, request: Recorded) -> web.Response:
        status = 503 if self.down or self.fail_next > 0 else 202
        self.fail_next = max(0, self.fail_next - 1)
        self.posts.append((status, json.loads(request.body)))
        return web.Response(status=status)

    def about(self, subject: str) -> list[tuple[int, str, Any]]:
        """(status, type, content or object) of every POST about `subject`, in arrival order."""
        found = []
        for status, body in self.posts:
            obj = body.get("object")
            obj_id = obj.get("id") if isinstance(obj, dict) else obj
            if obj_id == subject:
                found.append((status, body["type"], obj.get("content") if isinstance(obj, dict) else obj))
        return found


def note(content: str, subject: str = NOTE) -> dict[str, Any]:
    return {"id": subject, "type": "Note", "content": content}


async def queue(store: Store, remote: LoopbackServer, activity: dict[str, Any]) -> int:
    return await insert_outbox_row(store, "alice", activity, [remote.url("/inbox")])


async def submit(store: Store, remote: LoopbackServer, activity: dict[str, Any]) -> int:
    """As `POST /actors/alice/outbox` stores it: validated, normalized and its facts stored at once."""
    stored, facts = normalize(activity, "alice", URLS, lambda: secrets.token_urlsafe(8))
    inboxes = json.dumps([remote.url("/inbox")])
    return (await store.outbox.submit(facts, json.dumps(stored), inboxes)).outbox_id


async def hold_host(store: Store, remote: LoopbackServer) -> None:
    """The host is known to be down: circuit open, so deliveries wait without attempts."""
    until = utcnow() + timedelta(hours=1)
    await store.hosts.update(
        {remote.origin.removeprefix("http://"): lambda h: replace(h, circuit="open", circuit_until=until)}
    )


async def host_is_back(store: Store, remote: LoopbackServer) -> None:
    await store.hosts.update(
        {
            remote.origin.removeprefix("http://"): lambda h: replace(
                h, circuit="closed", circuit_until=None, consecutive_failures=0
            )
        }
    )


async def delivery(store: Store, outbox_id: int) -> dict[str, Any]:
    [row] = (await activity_status(store, URLS, outbox_id))["deliveries"]
    return dict(row)


async def activity_id(store: Store, outbox_id: int) -> str:
    return str((await activity_status(store, URLS, outbox_id))["activity"])


def slow_retries(settings: Settings) -> Settings:
    """A failed attempt is retried a minute later, so a burst run stops after it."""
    return fast(settings, retry_base_seconds=60, retry_cap_seconds=60)


async def run_later(settings: Settings, store: Store) -> None:
    """A burst run two minutes on: the failed attempts are due again."""
    await run_burst(settings, store, clock=lambda: utcnow() + timedelta(seconds=120), jitter=lambda: 1.0)


async def test_create_updates_and_delete_queued_while_the_receiver_is_down_send_nothing_about_the_note(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    receiver = Receiver(remote, down=True)
    await hold_host(store, remote)
    create = await queue(store, remote, {"type": "Create", "object": note("v0")})
    updates = [await queue(store, remote, {"type": "Update", "object": note(f"v{n}")}) for n in range(1, 6)]
    delete = await queue(store, remote, {"type": "Delete", "object": NOTE})
    other = await queue(store, remote, {"type": "Update", "object": note("other", OTHER_NOTE)})
    await run_burst(fast(settings), store)

    receiver.down = False
    await host_is_back(store, remote)
    await run_burst(fast(settings), store)

    assert receiver.about(NOTE) == []
    assert receiver.about(OTHER_NOTE) == [(202, "Update", "other")]
    for outbox_id in (create, *updates, delete):
        assert (await delivery(store, outbox_id))["state"] == "coalesced"
    assert (await delivery(store, other))["state"] == "delivered"
    gone = await delivery(store, delete)
    assert gone["coalesced_by"] == await activity_id(store, create)
    assert gone["coalesced_reason"].startswith("cancels out unsent Create")


async def test_five_updates_queued_while_the_receiver_is_down_send_only_the_newest(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    receiver = Receiver(remote)
    quick = slow_retries(settings)
    await queue(store, remote, {"type": "Create", "object": note("v0")})
    await run_burst(quick, store)
    assert receiver.about(NOTE) == [(202, "Create", "v0")]

    receiver.down = True
    updates = [await queue(store, remote, {"type": "Update", "object": note("v1")})]
    await run_burst(quick, store, jitter=lambda: 1.0)  # v1 is tried and fails: waiting to retry
    updates += [await queue(store, remote, {"type": "Update", "object": note(f"v{n}")}) for n in range(2, 6)]
    await run_burst(quick, store, jitter=lambda: 1.0)

    receiver.down = False
    await run_later(quick, store)
    accepted = [post for post in receiver.about(NOTE) if post[0] == 202]
    assert accepted == [(202, "Create", "v0"), (202, "Update", "v5")]
    assert (await delivery(store, updates[-1]))["state"] == "delivered"
    for older, newer in itertools.pairwise(updates):
        row = await delivery(store, older)
        newer_id = await activity_id(store, newer)
        assert row["state"] == "coalesced"
        assert (row["coalesced_by"], row["coalesced_reason"]) == (
            newer_id,
            f"superseded by newer Update {newer_id}",
        )


@pytest.mark.parametrize("handed_in", [queue, submit], ids=["outbox table", "outbox POST"])
async def test_a_like_then_its_undo_queued_while_the_receiver_is_down_send_only_the_undo(
    settings: Settings, store: Store, remote: LoopbackServer, handed_in: Any
) -> None:
    await store.actors.create("alice")
    receiver = Receiver(remote, down=True)
    await hold_host(store, remote)
    like_id = "http://127.0.0.1:8000/actors/alice/activities/like-1"
    like = await handed_in(store, remote, {"id": like_id, "type": "Like", "object": NOTE})
    undo = await handed_in(store, remote, {"type": "Undo", "object": like_id})  # the undone one by id only
    await run_burst(fast(settings), store)
    receiver.down = False
    await host_is_back(store, remote)
    await run_burst(fast(settings), store)

    # An earlier Like of the note may have been delivered and its row pruned since: the Undo goes.
    assert [(status, body["type"]) for status, body in receiver.posts] == [(202, "Undo")]
    undo_id = await activity_id(store, undo)
    assert (await delivery(store, like))["coalesced_by"] == undo_id
    assert (await delivery(store, undo))["state"] == "delivered"


async def test_a_retried_create_is_not_overtaken_by_the_delete_queued_after_it(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    receiver = Receiver(remote, fail_next=1)
    quick = slow_retries(settings)
    create = await queue(store, remote, {"type": "Create", "object": note("v0")})
    await run_burst(quick, store, jitter=lambda: 1.0)
    delete = await queue(store, remote, {"type": "Delete", "object": NOTE})
    await run_later(quick, store)

    kinds = [kind for _status, kind, _content in receiver.about(NOTE)]
    # The Create may have arrived (a 503 is no proof), so the Delete is sent; after it nothing.
    assert kinds == ["Create", "Delete"]
    assert (await delivery(store, create))["coalesced_by"] == await activity_id(store, delete)
    assert (await delivery(store, delete))["state"] == "delivered"


async def test_a_like_waits_for_the_failed_create_of_its_note_without_spending_attempts(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    receiver = Receiver(remote, fail_next=1)
    quick = slow_retries(settings)
    create = await queue(store, remote, {"type": "Create", "object": note("v0")})
    await run_burst(quick, store, jitter=lambda: 1.0)
    like = await queue(store, remote, {"type": "Like", "object": NOTE})
    await run_burst(quick, store, jitter=lambda: 1.0)

    waiting = await delivery(store, like)
    assert (waiting["state"], waiting["attempts"]) == ("queued", 0)
    assert [kind for _s, kind, _c in receiver.about(NOTE)] == ["Create"]

    await run_later(quick, store)
    assert [(s, kind) for s, kind, _c in receiver.about(NOTE)] == [
        (503, "Create"),
        (202, "Create"),
        (202, "Like"),
    ]
    assert (await delivery(store, create))["state"] == "delivered"
    sent = await delivery(store, like)
    assert (sent["state"], sent["attempts"]) == ("delivered", 1)


async def test_the_status_api_and_cli_show_why_and_by_what_a_delivery_was_coalesced(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    await store.actors.create("alice")
    Receiver(remote, down=True)
    await hold_host(store, remote)
    first = await queue(store, remote, {"type": "Update", "object": note("v1")})
    second = await queue(store, remote, {"type": "Update", "object": note("v2")})
    await run_burst(fast(settings), store)
    second_id = await activity_id(store, second)

    async with asgi_client(create_app(settings, store)) as client:
        answer = await client.get(URLS.status(first), headers={"Authorization": f"Bearer {ADMIN_TOKEN}"})
    assert answer.status_code == httpx.codes.OK
    doc = answer.json()
    [row] = doc["deliveries"]
    assert (row["state"], row["coalesced_by"], row["coalesced_reason"]) == (
        "coalesced",
        second_id,
        f"superseded by newer Update {second_id}",
    )
    assert doc["complete"] is True
    assert f"superseded by newer Update {second_id}; by {second_id}" in status_text(doc)
