"""Which unverifiable activities a gone actor may still have accepted (inbound.gone)."""

from __future__ import annotations

from typing import Any

import pytest

from fedqueue.inbound.gone import claims_departure, is_self_removal
from fedqueue.rules.inbox_acceptance import Activity

BOB = "https://remote.example/users/bob"
KEY = f"{BOB}#main-key"


def activity(kind: str, target: Any) -> Activity:
    return Activity(id=f"{BOB}/delete", actor=BOB, type=kind, doc={"object": target}, text="{}")


@pytest.mark.parametrize(
    ("kind", "target", "expected"),
    [
        ("Delete", BOB, True),
        ("Delete", {"id": BOB, "type": "Tombstone"}, True),
        ("Update", {"id": BOB, "type": "Person"}, True),
        ("Delete", f"{BOB}/notes/1", False),
        ("Delete", "https://remote.example/users/carol", False),
        ("Create", BOB, False),
        ("Delete", None, False),
    ],
)
def test_only_a_delete_or_update_of_the_actor_itself_is_a_self_removal(
    kind: str, target: Any, expected: bool
) -> None:
    assert is_self_removal(activity(kind, target)) is expected


@pytest.mark.parametrize(
    ("key_ids", "gone", "expected"),
    [
        ([KEY], {KEY}, True),
        ([KEY, f"{BOB}#other"], {KEY, f"{BOB}#other"}, True),
        ([KEY], set(), False),  # the key failed otherwise (timeout, 500) or verified badly
        ([KEY, f"{BOB}#other"], {KEY}, False),
        (["https://elsewhere.example/keys/1"], {"https://elsewhere.example/keys/1"}, False),
        ([], set(), False),
    ],
)
def test_an_unverified_self_delete_claims_a_departure_only_when_every_key_on_its_origin_is_gone(
    key_ids: list[str], gone: set[str], expected: bool
) -> None:
    assert claims_departure(activity("Delete", BOB), key_ids, gone) is expected
