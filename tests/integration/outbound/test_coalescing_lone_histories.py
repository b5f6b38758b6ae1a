"""The coalescer reads only contested histories and decides as the rules do on whole ones.

A fan-out's rows are each alone in their (inbox, subject) history; both hooks skip them
(`LONE_DECIDABLE_TYPES`). These cases are the ones a wrong skip would get wrong: a Create and
its Delete decided together (at enqueue, in one claimed batch) or apart (across batches), and
an Undo alone in its history that cancels itself out.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from fedqueue.outbound.coalescer import Added, Coalescer, Verdict
from fedqueue.rules.intake import ActivityFacts
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.deliveries import Enqueued, Target

OWNER = "worker-1"
NOTE = "https://here.example/notes/1"
LONE = "https://lone.example/inbox"
PAIRED = "https://paired.example/inbox"
SELF_UNDO = "https://undo.example/inbox"


def facts(number: int, kind: str, subject: str = NOTE, undoes: str | None = None) -> ActivityFacts:
    return ActivityFacts("alice", f"https://here.example/activities/{number}", kind, subject, undoes)


async def enqueue(store: Store, activity: ActivityFacts, inboxes: Sequence[str]) -> Added:
    submitted = await store.outbox.submit(activity, json.dumps({"id": activity.activity_id}), None)
    targets = [Target(inbox, inbox.split("/")[2]) for inbox in inboxes]
    await store.deliveries.enqueue([Enqueued(submitted.outbox_id, activity, targets)], utcnow())
    return Added(submitted.outbox_id, activity, inboxes)


async def claim_and_gate(store: Store, coalescer: Coalescer) -> dict[tuple[str, str], Verdict]:
    """Claim every due delivery as one batch and decide it: (inbox, activity type) -> verdict."""
    claimed = await store.deliveries.claim(OWNER, utcnow(), 60, 100)
    gate = await coalescer.gate(claimed)
    verdicts = {(row.inbox, row.activity_type): gate.admit(row) for row in claimed}
    await coalescer.finish(gate)
    return verdicts


def coalescer(store: Store) -> Coalescer:
    return Coalescer(store.coalescing, OWNER, utcnow, 1.0)


async def test_a_create_and_its_delete_claimed_together_send_nothing_while_a_lone_create_is_sent(
    store: Store,
) -> None:
    await store.actors.create("alice")
    await enqueue(store, facts(1, "Create"), [LONE, PAIRED])
    await enqueue(store, facts(2, "Delete"), [PAIRED])

    assert await claim_and_gate(store, coalescer(store)) == {
        (LONE, "Create"): Verdict.SEND,
        (PAIRED, "Create"): Verdict.COALESCED,
        (PAIRED, "Delete"): Verdict.COALESCED,
    }


async def test_a_delete_claimed_while_its_create_is_in_flight_waits_for_it(store: Store) -> None:
    await store.actors.create("alice")
    gating = coalescer(store)
    await enqueue(store, facts(1, "Create"), [LONE, PAIRED])
    assert await claim_and_gate(store, gating) == {
        (LONE, "Create"): Verdict.SEND,
        (PAIRED, "Create"): Verdict.SEND,
    }

    await enqueue(store, facts(2, "Delete"), [PAIRED])

    # The Create may arrive: the Delete is neither dropped nor sent before it.
    assert await claim_and_gate(store, gating) == {(PAIRED, "Delete"): Verdict.WAIT}


async def test_a_create_and_its_delete_enqueued_together_are_coalesced_at_once_and_a_lone_create_is_not(
    store: Store,
) -> None:
    await store.actors.create("alice")
    create = await enqueue(store, facts(1, "Create"), [LONE, PAIRED])
    delete = await enqueue(store, facts(2, "Delete"), [PAIRED])

    await coalescer(store).after_enqueue([create, delete])

    assert {row.inbox for row in await store.deliveries.claim(OWNER, utcnow(), 60, 100)} == {LONE}


async def test_an_undo_that_undoes_itself_is_coalesced_alone_at_enqueue_and_before_sending(
    store: Store,
) -> None:
    await store.actors.create("alice")
    first, second = (f"https://here.example/activities/{n}" for n in (1, 2))
    enqueued = await enqueue(store, facts(1, "Undo", subject=first, undoes=first), [SELF_UNDO])
    await coalescer(store).after_enqueue([enqueued])
    assert await store.deliveries.claim(OWNER, utcnow(), 60, 100) == []

    # Not seen at enqueue (another worker's hook failed, say): decided before sending. An Undo
    # of a Like with no row here is alone in its history too, and sent.
    await enqueue(store, facts(2, "Undo", subject=second, undoes=second), [SELF_UNDO])
    await enqueue(store, facts(3, "Undo", undoes="https://here.example/likes/9"), [LONE])
    assert await claim_and_gate(store, coalescer(store)) == {
        (SELF_UNDO, "Undo"): Verdict.COALESCED,
        (LONE, "Undo"): Verdict.SEND,
    }
