"""What a verified Delete changes, and which Create a tombstone drops (inbound.follows)."""

from __future__ import annotations

from typing import Any

import pytest

from fedqueue.rules.follow_effects import RecordTombstone, RemoveAllFollows, created_object, effects_for
from fedqueue.rules.inbox_acceptance import Activity
from fedqueue.rules.urls import Urls

BOB = "https://remote.example/users/bob"
NOTE = "https://remote.example/notes/1"


def activity(kind: str, target: Any) -> Activity:
    return Activity(id=f"{BOB}/a", actor=BOB, type=kind, doc={"object": target}, text="{}")


@pytest.mark.parametrize(
    ("target", "effects"),
    [
        (BOB, [RemoveAllFollows(BOB)]),
        (NOTE, [RecordTombstone(NOTE, BOB)]),
        ({"id": NOTE, "type": "Tombstone"}, [RecordTombstone(NOTE, BOB)]),
        ("https://elsewhere.example/notes/1", []),  # not its own: no tombstone
        (None, []),
    ],
)
def test_a_delete_removes_the_actors_follows_or_tombstones_its_own_object(
    target: Any, effects: list[Any]
) -> None:
    assert effects_for(activity("Delete", target), Urls("https://local.example"), {}, None) == effects


@pytest.mark.parametrize(
    ("kind", "target", "subject"),
    [
        ("Create", {"id": NOTE, "type": "Note"}, NOTE),
        ("Update", NOTE, NOTE),
        ("Announce", NOTE, None),
        ("Create", None, None),
    ],
)
def test_only_a_create_or_update_brings_an_object_a_tombstone_can_drop(
    kind: str, target: Any, subject: str | None
) -> None:
    assert created_object(activity(kind, target)) == subject
