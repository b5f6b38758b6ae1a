"""Which lane a delivery waits in: interactive answers first, bulk fan-outs and actor Deletes last."""

from __future__ import annotations

from typing import Any

import pytest

from fedqueue.rules.activitystreams import PUBLIC
from fedqueue.rules.addressing import recipients
from fedqueue.rules.lanes import is_actor_delete, is_direct, lane_of
from fedqueue.rules.states import Lane

ME = "https://here.example/actors/alice"
FOLLOWERS = f"{ME}/followers"
BOB = "https://there.example/users/bob"


def direct(activity: dict[str, Any]) -> bool:
    return is_direct(activity, recipients(activity, FOLLOWERS, ME))


@pytest.mark.parametrize("kind", ["Accept", "Reject", "Follow", "Undo", "TentativeAccept"])
def test_answers_follows_and_undos_go_in_the_interactive_lane(kind: str) -> None:
    assert lane_of(kind, direct=False, actor_delete=False, inboxes=1, threshold=1000) is Lane.INTERACTIVE


def test_a_post_to_followers_goes_in_the_normal_lane_up_to_the_threshold_and_in_bulk_beyond() -> None:
    assert lane_of("Create", direct=False, actor_delete=False, inboxes=1000, threshold=1000) is Lane.NORMAL
    assert lane_of("Create", direct=False, actor_delete=False, inboxes=1001, threshold=1000) is Lane.BULK


def test_a_fan_out_over_the_threshold_is_bulk_whatever_its_type() -> None:
    assert lane_of("Undo", direct=False, actor_delete=False, inboxes=20_000, threshold=1000) is Lane.BULK
    assert lane_of("Create", direct=True, actor_delete=False, inboxes=5000, threshold=1000) is Lane.BULK


def test_an_actor_deleting_itself_goes_in_the_bulk_lane_however_few_its_followers() -> None:
    assert lane_of("Delete", direct=False, actor_delete=True, inboxes=3, threshold=1000) is Lane.BULK
    assert lane_of("Delete", direct=False, actor_delete=False, inboxes=3, threshold=1000) is Lane.NORMAL


def test_a_direct_message_goes_in_the_interactive_lane() -> None:
    assert lane_of("Create", direct=True, actor_delete=False, inboxes=1, threshold=1000) is Lane.INTERACTIVE


def test_only_an_activity_to_named_actors_alone_is_direct() -> None:
    assert direct({"type": "Create", "to": [BOB]})
    assert not direct({"type": "Create", "to": [BOB], "cc": [PUBLIC]})
    assert not direct({"type": "Create", "to": [FOLLOWERS], "cc": [BOB]})
    assert not direct({"type": "Create", "to": [ME]})  # nobody but the sender


def test_a_delete_or_update_is_about_the_actor_itself_only_when_its_object_is_the_actor() -> None:
    assert is_actor_delete({"type": "Delete", "object": ME}, ME)
    assert is_actor_delete({"type": "Delete", "object": {"id": ME, "type": "Person"}}, ME)
    assert not is_actor_delete({"type": "Delete", "object": f"{ME}/notes/1"}, ME)
    # A profile Update (its object the whole actor document) goes in the bulk lane, as a Delete.
    assert is_actor_delete({"type": "Update", "object": {"id": ME, "type": "Service"}}, ME)
    assert not is_actor_delete({"type": "Update", "object": {"id": f"{ME}/notes/1"}}, ME)
    assert not is_actor_delete({"type": "Move", "object": ME}, ME)


def test_the_lanes_are_claimed_interactive_then_normal_then_bulk() -> None:
    assert [int(lane) for lane in sorted(Lane)] == [0, 1, 2]
