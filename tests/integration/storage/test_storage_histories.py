"""Coalescing histories: every delivery to each (inbox, subject) key asked for, and nothing else."""

from __future__ import annotations

import json

import pytest

from fedqueue.rules.intake import ActivityFacts
from fedqueue.storage import Store, coalescing_reads
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.deliveries import Enqueued, Target
from tests.helpers import driver_statements, statements

INBOX_A = "https://a.example/inbox"
#: Quotes, a backslash and non-ASCII text travel inside the one bound value intact.
INBOX_B = 'https://b.example/in"box\\ü'
NOTE_1 = "https://here.example/notes/1"
NOTE_2 = "https://here.example/notes/2"


async def _activity(store: Store, number: int, kind: str, subject: str, inboxes: list[str]) -> int:
    facts = ActivityFacts("alice", f"https://here.example/activities/{number}", kind, subject)
    submitted = await store.outbox.submit(facts, json.dumps({"id": facts.activity_id}), None)
    targets = [Target(inbox, inbox.split("/")[2]) for inbox in inboxes]
    await store.deliveries.enqueue([Enqueued(submitted.outbox_id, facts, targets)], utcnow())
    return submitted.outbox_id


async def test_a_history_holds_each_keys_deliveries_in_submission_order_and_no_other_key(
    store: Store,
) -> None:
    await store.actors.create("alice")
    like = await _activity(store, 1, "Like", NOTE_1, [INBOX_A, INBOX_B])
    undo = await _activity(store, 2, "Undo", NOTE_1, [INBOX_A, INBOX_B])
    await _activity(store, 3, "Like", NOTE_2, [INBOX_A])

    # (INBOX_B, NOTE_2) matches an inbox and a subject of stored rows, but no row has both.
    rows = await store.coalescing.history([(INBOX_A, NOTE_1), (INBOX_B, NOTE_2), (INBOX_A, NOTE_1)])

    assert [(row.outbox_id, row.inbox, row.object_id, row.activity_type) for row in rows] == [
        (like, INBOX_A, NOTE_1, "Like"),
        (undo, INBOX_A, NOTE_1, "Undo"),
    ]
    assert {row.activity_id for row in rows} == {
        "https://here.example/activities/1",
        "https://here.example/activities/2",
    }
    assert all(row.state == "queued" and row.due is not None for row in rows)
    only_b = await store.coalescing.history([(INBOX_B, NOTE_1)])
    assert [(row.outbox_id, row.inbox) for row in only_b] == [(like, INBOX_B), (undo, INBOX_B)]


async def test_a_history_of_more_keys_than_one_query_reads_them_all(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(coalescing_reads, "HISTORY_CHUNK", 2)
    await store.actors.create("alice")
    inboxes = [f"https://h{n}.example/inbox" for n in range(5)]
    await _activity(store, 1, "Undo", NOTE_1, inboxes)

    rows = await store.coalescing.history([(inbox, NOTE_1) for inbox in inboxes])

    assert sorted(row.inbox for row in rows) == sorted(inboxes)


async def test_contested_histories_leave_out_only_the_keys_holding_one_delivery_that_is_not_an_undo(
    store: Store,
) -> None:
    await store.actors.create("alice")
    inbox_c = "https://c.example/inbox"
    create = await _activity(store, 1, "Create", NOTE_1, [INBOX_A, INBOX_B, inbox_c])
    delete = await _activity(store, 2, "Delete", NOTE_1, [INBOX_A])
    undo = await _activity(store, 3, "Undo", NOTE_2, [INBOX_B])
    keys = [(INBOX_A, NOTE_1), (INBOX_B, NOTE_1), (inbox_c, NOTE_1), (INBOX_B, NOTE_2)]

    contested = await store.coalescing.history(keys)

    # INBOX_A's history is whole (two rows, in order); a lone Undo is kept, lone Creates are not.
    assert [(row.outbox_id, row.inbox) for row in contested] == [
        (create, INBOX_A),
        (delete, INBOX_A),
        (undo, INBOX_B),
    ]


async def test_keys_whose_subject_only_one_activity_names_are_answered_without_reading_deliveries(
    store: Store,
) -> None:
    await store.actors.create("alice")
    inboxes = [f"https://h{n}.example/inbox" for n in range(50)]
    await _activity(store, 1, "Create", NOTE_1, inboxes)
    await _activity(store, 2, "Create", NOTE_2, inboxes)  # the same inboxes, another subject
    async with driver_statements(store) as on_the_driver:
        with statements(store) as seen:
            # A fan-out's claimed batch: one delivery per key, and no other activity about the note.
            assert await store.coalescing.history([(inbox, NOTE_1) for inbox in inboxes]) == []

    ran = seen + [sql for sql, _arguments in on_the_driver]
    assert [sql for sql in ran if "outbox" in sql], "the subjects' read was not seen"
    assert not [sql for sql in ran if "deliveries" in sql]
