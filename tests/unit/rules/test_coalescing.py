from __future__ import annotations

from dataclasses import replace

import pytest

from fedqueue.rules.coalescing import (
    RULES,
    Coalesced,
    Delivery,
    before_send,
    coalesce,
    must_wait_for,
)
from fedqueue.rules.states import DeliveryState

State = DeliveryState
INBOX = "https://remote.example/inbox"
OTHER_INBOX = "https://other.example/users/bob/inbox"
NOTE = "https://l.example/notes/1"
OTHER_NOTE = "https://l.example/notes/2"
FEATURED = "https://l.example/actors/alice/featured"


def act(n: int) -> str:
    return f"https://l.example/activities/{n}"


def d(
    n: int,
    type: str,
    *,
    state: State = State.QUEUED,
    attempted: bool = False,
    actor: str = "alice",
    subject: str = NOTE,
    inbox: str = INBOX,
    undoes: int | None = None,
    target: str | None = None,
) -> Delivery:
    """Delivery `n` of activity `act(n)`; `undoes` is the number of the undone activity."""
    undone = act(undoes) if undoes is not None else None
    return Delivery(n, inbox, act(n), actor, type, subject, state, attempted, undone, target)


def reasons(decisions: tuple[Coalesced, ...]) -> dict[int, str]:
    return {c.delivery_id: c.reason for c in decisions}


def test_the_rules_table_follows_the_numbered_list_of_the_issue() -> None:
    assert [(r.number, r.name) for r in RULES] == [
        (1, "Same activity id"),
        (2, "Newer Update"),
        (3, "Delete"),
        (4, "Undo"),
        (5, "Redundant against history"),
    ]
    assert all(r.description for r in RULES)


def test_one_delivery_per_activity_is_left_to_the_unique_constraint() -> None:
    assert coalesce([d(1, "Create"), replace(d(2, "Create"), activity_id=act(1))]) == ()


# Rule 2: Newer Update


def test_only_the_newest_of_several_updates_is_sent() -> None:
    decisions = coalesce([d(1, "Create"), d(2, "Update"), d(3, "Update"), d(4, "Update")])
    assert decisions == (
        Coalesced(3, 2, f"superseded by newer Update {act(4)}", act(4)),
        Coalesced(2, 2, f"superseded by newer Update {act(4)}", act(4)),
    )


def test_an_update_that_may_have_arrived_is_still_superseded() -> None:
    history = [d(1, "Update", state=State.FAILED, attempted=True), d(2, "Update")]
    assert reasons(coalesce(history)) == {1: f"superseded by newer Update {act(2)}"}


def test_an_update_in_flight_is_not_superseded_and_the_newer_one_waits() -> None:
    history = [d(1, "Update", state=State.SENDING, attempted=True), d(2, "Update")]
    assert coalesce(history) == ()
    assert must_wait_for(history, 2) == history[0]


def test_an_update_is_not_superseded_by_a_newer_one_that_was_given_up() -> None:
    assert (
        coalesce([d(1, "Update", state=State.FAILED, attempted=True), d(2, "Update", state=State.DEAD)]) == ()
    )


# Rule 3: Delete


def test_a_delete_cancels_the_unsent_create_and_update_and_is_not_sent_itself() -> None:
    decisions = coalesce([d(1, "Create"), d(2, "Update"), d(3, "Delete")])
    assert decisions == (
        Coalesced(1, 3, f"cancelled out by Delete {act(3)}", act(3)),
        Coalesced(2, 3, f"cancelled out by Delete {act(3)}", act(3)),
        Coalesced(3, 3, f"cancels out unsent Create {act(1)}", act(1)),
    )


def test_a_delete_is_sent_when_it_cancels_only_an_update_whose_create_row_was_pruned() -> None:
    # The Create was delivered and its row pruned after its retention: the object is at the inbox.
    assert reasons(coalesce([d(2, "Update"), d(3, "Delete")])) == {2: f"cancelled out by Delete {act(3)}"}


def test_a_delete_is_sent_when_the_create_may_have_arrived() -> None:
    history = [d(1, "Create", state=State.FAILED, attempted=True), d(2, "Update"), d(3, "Delete")]
    assert reasons(coalesce(history)) == {
        1: f"cancelled out by Delete {act(3)}",
        2: f"cancelled out by Delete {act(3)}",
    }


def test_a_delete_is_sent_when_another_actors_activity_about_the_object_reached_the_inbox() -> None:
    history = [d(1, "Create"), d(2, "Announce", actor="bob", state=State.DELIVERED, attempted=True)]
    history.append(d(3, "Delete"))
    assert reasons(coalesce(history)) == {1: f"cancelled out by Delete {act(3)}"}


# Rule 4: Undo


@pytest.mark.parametrize(
    ("type", "target"),
    [("Follow", None), ("Like", None), ("Announce", None), ("Block", None), ("Add", FEATURED)],
)
def test_an_undo_cancels_the_unsent_activity_and_is_still_sent(type: str, target: str | None) -> None:
    # An earlier A-like activity may have been delivered and its row pruned (retention): the
    # history cannot show it, so the Undo goes, and a receiver that has nothing to undo ignores it.
    history = [d(1, type, target=target), d(2, "Undo", undoes=1)]
    assert coalesce(history) == (Coalesced(1, 4, f"cancelled out by Undo {act(2)}", act(2)),)


def test_an_undo_is_sent_when_the_undone_activity_may_have_arrived() -> None:
    history = [d(1, "Like", state=State.FAILED, attempted=True), d(2, "Undo", undoes=1)]
    assert reasons(coalesce(history)) == {1: f"cancelled out by Undo {act(2)}"}


@pytest.mark.parametrize("earlier", [State.QUEUED, State.SENDING, State.DELIVERED])
def test_an_undo_is_sent_when_an_earlier_like_of_the_same_note_may_reach_the_inbox(earlier: State) -> None:
    # Receivers remove "the like of this note", whichever Like made it: the Undo must go.
    history = [d(1, "Like", state=earlier), d(2, "Like"), d(3, "Undo", undoes=2)]
    assert reasons(coalesce(history)) == {2: f"cancelled out by Undo {act(3)}"}


# Rule 5: Redundant against history


def test_a_second_like_with_no_undo_between_is_not_sent() -> None:
    history = [d(1, "Like", state=State.DELIVERED, attempted=True), d(2, "Like")]
    assert coalesce(history) == (Coalesced(2, 5, f"inbox already has it from Like {act(1)}", act(1)),)


@pytest.mark.parametrize("earlier", [State.QUEUED, State.FAILED, State.SENDING])
def test_a_second_like_is_sent_while_the_first_has_not_been_delivered(earlier: State) -> None:
    # The first may still end up dead; only a delivered one proves the inbox has the like.
    assert coalesce([d(1, "Like", state=earlier, attempted=earlier is not State.QUEUED), d(2, "Like")]) == ()


def test_an_add_to_the_collection_it_was_last_added_to_is_not_sent() -> None:
    history = [
        d(1, "Add", state=State.DELIVERED, attempted=True, target=FEATURED),
        d(2, "Add", target=FEATURED),
    ]
    assert reasons(coalesce(history)) == {2: f"inbox already has it from Add {act(1)}"}


@pytest.mark.parametrize(
    "between",
    [
        pytest.param([d(2, "Undo", state=State.DELIVERED, attempted=True, undoes=1)], id="undo-delivered"),
        pytest.param([d(2, "Undo", state=State.SENDING, attempted=True, undoes=1)], id="undo-in-flight"),
        pytest.param(
            [d(2, "Undo", state=State.COALESCED, attempted=True, undoes=1)], id="undo-maybe-arrived"
        ),
    ],
)
def test_a_like_after_an_undo_is_sent(between: list[Delivery]) -> None:
    history = [d(1, "Like", state=State.DELIVERED, attempted=True), *between, d(3, "Like")]
    assert coalesce(history) == ()


def test_an_add_to_another_collection_or_after_a_remove_is_sent() -> None:
    added = d(1, "Add", state=State.DELIVERED, attempted=True, target=FEATURED)
    assert coalesce([added, d(2, "Add", target=FEATURED + "/2")]) == ()
    removed = d(2, "Remove", state=State.DELIVERED, attempted=True, target=FEATURED)
    assert coalesce([added, removed, d(3, "Add", target=FEATURED)]) == ()


def test_a_repeated_follow_is_sent_because_it_repairs_a_lost_follow() -> None:
    assert coalesce([d(1, "Follow", state=State.DELIVERED, attempted=True), d(2, "Follow")]) == ()


# What the rules leave alone


def test_an_update_of_another_object_is_not_superseded() -> None:
    assert coalesce([d(1, "Update"), d(2, "Update", subject=OTHER_NOTE)]) == ()


@pytest.mark.parametrize(
    "history",
    [
        pytest.param([d(1, "Update"), d(2, "Update", actor="bob")], id="update"),
        pytest.param([d(1, "Create"), d(2, "Delete", actor="bob")], id="delete"),
        pytest.param([d(1, "Like"), d(2, "Undo", actor="bob", undoes=1)], id="undo"),
        pytest.param(
            [d(1, "Like", state=State.DELIVERED, attempted=True), d(2, "Like", actor="bob")], id="like"
        ),
    ],
)
def test_an_activity_of_another_actor_coalesces_nothing(history: list[Delivery]) -> None:
    assert coalesce(history) == ()


@pytest.mark.parametrize(
    "history",
    [
        pytest.param([d(1, "Update", state=State.DELIVERED, attempted=True), d(2, "Update")], id="update"),
        pytest.param([d(1, "Create", state=State.DELIVERED, attempted=True), d(2, "Delete")], id="delete"),
        pytest.param(
            [d(1, "Like", state=State.DELIVERED, attempted=True), d(2, "Undo", undoes=1)], id="undo"
        ),
        pytest.param([d(1, "Like", state=State.DEAD, attempted=True), d(2, "Undo", undoes=1)], id="dead"),
    ],
)
def test_an_activity_already_delivered_or_given_up_is_left_alone_and_its_successor_sent(
    history: list[Delivery],
) -> None:
    assert coalesce(history) == ()


def test_each_inbox_is_coalesced_on_its_own_history() -> None:
    history = [
        d(1, "Like", state=State.DELIVERED, attempted=True),
        d(2, "Update", inbox=OTHER_INBOX),
        d(3, "Like"),
        d(4, "Like", inbox=OTHER_INBOX),
        d(5, "Update"),
    ]
    assert reasons(coalesce(history)) == {3: f"inbox already has it from Like {act(1)}"}


def test_coalescing_again_decides_nothing_new() -> None:
    history = [d(1, "Create"), d(2, "Update"), d(3, "Update"), d(4, "Like"), d(5, "Undo", undoes=4)]
    decided = {c.delivery_id for c in coalesce(history)}
    assert decided == {2, 4}
    after = [replace(e, state=State.COALESCED) if e.delivery_id in decided else e for e in history]
    assert coalesce(after) == ()


# Ordering and the check before sending


def test_a_retried_create_is_not_overtaken_by_the_delete_queued_after_it() -> None:
    create = d(1, "Create", state=State.FAILED, attempted=True)
    history = [create, d(2, "Delete")]
    assert must_wait_for(history, 2) == create
    check = before_send([create, d(2, "Delete", state=State.SENDING)], 2)
    # The Create is never retried after the Delete: it is cancelled, and the Delete goes.
    assert check.coalesced == (Coalesced(1, 3, f"cancelled out by Delete {act(2)}", act(2)),)
    assert check.send


def test_a_delete_waits_while_the_create_before_it_is_in_flight() -> None:
    create = d(1, "Create", state=State.SENDING, attempted=True)
    check = before_send([create, d(2, "Delete", state=State.SENDING)], 2)
    assert (check.coalesced, check.wait_for, check.send) == ((), create, False)


def test_an_undo_waits_for_the_like_it_undoes() -> None:
    like = d(1, "Like", state=State.SENDING, attempted=True)
    assert must_wait_for([like, d(2, "Undo", undoes=1)], 2) == like


@pytest.mark.parametrize(
    "earlier",
    [
        pytest.param(d(1, "Create", state=State.QUEUED, actor="bob"), id="another-actor"),
        pytest.param(d(1, "Create", state=State.QUEUED, subject=OTHER_NOTE), id="another-object"),
        pytest.param(d(1, "Create", state=State.QUEUED, inbox=OTHER_INBOX), id="another-inbox"),
        pytest.param(d(1, "Create", state=State.DELIVERED, attempted=True), id="delivered"),
        pytest.param(d(1, "Create", state=State.DEAD, attempted=True), id="dead"),
        pytest.param(d(1, "Create", state=State.COALESCED), id="coalesced"),
    ],
)
def test_nothing_but_a_pending_earlier_activity_of_the_same_actor_and_object_holds_one_back(
    earlier: Delivery,
) -> None:
    assert must_wait_for([earlier, d(2, "Update")], 2) is None


def test_a_claimed_update_superseded_while_it_waited_is_not_sent() -> None:
    history = [d(1, "Update", state=State.SENDING, attempted=True), d(2, "Update")]
    check = before_send(history, 1)
    assert reasons(check.coalesced) == {1: f"superseded by newer Update {act(2)}"}
    assert not check.send


def test_a_claimed_delivery_already_coalesced_is_not_decided_again() -> None:
    history = [d(1, "Update", state=State.COALESCED, attempted=True), d(2, "Update")]
    assert coalesce(history, claimed=1) == ()


def test_a_claimed_like_with_nothing_in_its_way_is_sent() -> None:
    check = before_send(
        [d(1, "Create", state=State.DELIVERED, attempted=True), d(2, "Like", state=State.SENDING)], 2
    )
    assert (check.coalesced, check.wait_for, check.send) == ((), None, True)


def test_checking_a_delivery_missing_from_the_history_is_an_error() -> None:
    with pytest.raises(ValueError, match="delivery 9 is not in the history"):
        must_wait_for([d(1, "Like")], 9)
