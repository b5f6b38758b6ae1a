"""A history of one delivery: what the coalescer may skip reading (`LONE_DECIDABLE_TYPES`).

Both coalescing hooks leave out the keys whose history is a single delivery of a type not in
`LONE_DECIDABLE_TYPES`, and send that delivery as it is. That is right only while the rules
decide nothing on such a history, whatever the delivery's state: these tests fail the day a
rule does (its type then belongs in the set).
"""

from __future__ import annotations

import pytest

from fedqueue.rules.coalescing import (
    LONE_DECIDABLE_TYPES,
    RESTATING_TYPES,
    Delivery,
    before_send,
    coalesce,
    must_wait_for,
)
from fedqueue.rules.states import DeliveryState

ACTIVITY = "https://l.example/activities/1"
#: Every type an outbox row may carry that the rules name, and some they do not.
TYPES = sorted(
    RESTATING_TYPES
    | LONE_DECIDABLE_TYPES
    | {"Create", "Update", "Delete", "Follow", "Accept", "Reject", "Move", "Flag", "Question"}
)


def lone(kind: str, state: DeliveryState, attempted: bool) -> Delivery:
    """One delivery that names itself wherever a rule could look (undone activity, target, subject)."""
    return Delivery(
        1, "https://r.example/inbox", ACTIVITY, "alice", kind, ACTIVITY, state, attempted, ACTIVITY, ACTIVITY
    )


@pytest.mark.parametrize("kind", sorted(set(TYPES) - LONE_DECIDABLE_TYPES))
@pytest.mark.parametrize("state", list(DeliveryState))
@pytest.mark.parametrize("attempted", [False, True])
def test_a_lone_delivery_of_any_other_type_is_sent_as_it_is(
    kind: str, state: DeliveryState, attempted: bool
) -> None:
    delivery = lone(kind, state, attempted)

    assert coalesce([delivery]) == ()
    assert coalesce([delivery], claimed=delivery.delivery_id) == ()
    assert must_wait_for([delivery], delivery.delivery_id) is None
    assert before_send([delivery], delivery.delivery_id).send


def test_an_undo_naming_itself_is_cancelled_out_alone_so_lone_undos_are_read() -> None:
    undo = lone("Undo", DeliveryState.QUEUED, attempted=False)

    [decision] = coalesce([undo])
    assert (decision.delivery_id, decision.rule) == (undo.delivery_id, 4)
    assert not before_send([undo], undo.delivery_id).send
    assert "Undo" in LONE_DECIDABLE_TYPES
