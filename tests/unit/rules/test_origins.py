"""Which embedded objects an activity's actor speaks for (inbound.origin_rules)."""

from __future__ import annotations

from typing import Any

import pytest

from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.inbox_acceptance import Activity
from fedqueue.rules.origins import attributed_at_home, speaks_for, unvouched_object

MAL = "https://mal.example/users/mal"
VIC = "https://vic.example/users/vic"


def activity(kind: str, target: Any, actor: str = MAL) -> Activity:
    return Activity(id=f"{actor}/activities/1", actor=actor, type=kind, doc={"object": target}, text="{}")


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ({"id": f"{MAL}/notes/1", "attributedTo": MAL}, True),
        ({"id": f"{MAL}/notes/1"}, True),
        ({"id": f"{MAL}/notes/1", "attributedTo": [MAL, {"id": MAL}]}, True),
        ({"id": f"{MAL}/activities/2", "actor": MAL}, True),
        ({"id": f"{VIC}/notes/1", "attributedTo": VIC}, False),  # another origin
        ({"id": f"{VIC}/notes/1"}, False),
        ({"id": f"{MAL}/notes/1", "attributedTo": VIC}, False),  # its origin, another author
        ({"id": f"{MAL}/notes/1", "attributedTo": [MAL, VIC]}, False),
        ({"id": f"{MAL}/notes/1", "attributedTo": {"type": "Person"}}, False),
        ({"id": "https://mal.example:8443/notes/1"}, False),  # another port is another origin
        ({"attributedTo": MAL}, False),
    ],
)
def test_an_actor_speaks_only_for_objects_on_its_origin_that_it_authored(
    target: dict[str, Any], expected: bool
) -> None:
    assert speaks_for(MAL, target) is expected


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ({"id": f"{VIC}/notes/1", "attributedTo": VIC}, True),
        ({"id": f"{VIC}/notes/1"}, True),
        ({"id": f"{VIC}/notes/1", "attributedTo": MAL}, False),
        ({"id": f"{VIC}/notes/1", "attributedTo": {"type": "Person"}}, False),
    ],
)
def test_a_fetched_document_is_trusted_only_for_authors_on_its_own_origin(
    target: dict[str, Any], expected: bool
) -> None:
    assert attributed_at_home(target) is expected


@pytest.mark.parametrize(
    ("kind", "target", "kept"),
    [
        ("Create", {"id": f"{VIC}/notes/1", "attributedTo": VIC, "content": "forged"}, f"{VIC}/notes/1"),
        ("Update", {"id": f"{MAL}/notes/1", "attributedTo": VIC}, f"{MAL}/notes/1"),
        ("Create", {"id": f"{MAL}/notes/1", "attributedTo": MAL}, None),
        ("Update", {"id": MAL, "type": "Person"}, None),  # an actor's own profile
        ("Create", f"{VIC}/notes/1", None),  # only an id: nothing claimed
        ("Create", {"type": "Note", "content": "no address"}, None),
        ("Like", {"id": f"{VIC}/notes/1", "attributedTo": VIC}, None),  # not an authored type
        ("Follow", {"id": VIC, "type": "Person"}, None),
    ],
)
def test_a_create_or_update_keeps_only_the_id_of_an_object_its_actor_does_not_speak_for(
    kind: str, target: Any, kept: str | None
) -> None:
    assert unvouched_object(activity(kind, target)) == kept


def test_an_object_without_an_id_naming_another_author_is_refused() -> None:
    with pytest.raises(InvalidInput, match="no id and names another author"):
        unvouched_object(activity("Create", {"type": "Note", "attributedTo": VIC}))
