"""The subject convention at intake: which object a delivery is about, as coalescing reads it."""

from __future__ import annotations

from typing import Any

import pytest

from fedqueue.rules.intake import normalize
from fedqueue.rules.urls import Urls

URLS = Urls("http://127.0.0.1:8000")
NOTE = "https://example.org/notes/1"
LIKE = "http://127.0.0.1:8000/actors/alice/activities/like-1"


@pytest.mark.parametrize(
    ("activity", "expected"),
    [
        ({"type": "Create", "object": {"id": NOTE, "type": "Note"}}, (NOTE, None, None)),
        ({"type": "Delete", "object": NOTE}, (NOTE, None, None)),
        ({"type": "Like", "object": NOTE}, (NOTE, None, None)),
        ({"type": "Undo", "object": {"id": LIKE, "type": "Like", "object": NOTE}}, (NOTE, LIKE, None)),
        (
            {"type": "Undo", "object": {"id": LIKE, "type": "Like", "object": {"id": NOTE}}},
            (NOTE, LIKE, None),
        ),
        ({"type": "Undo", "object": LIKE}, (LIKE, LIKE, None)),  # the fan-out looks LIKE up
        ({"type": "Add", "object": NOTE, "target": "https://h/featured"}, (NOTE, None, "https://h/featured")),
        ({"type": "Remove", "object": NOTE, "target": {"id": "https://h/f"}}, (NOTE, None, "https://h/f")),
        ({"type": "Create", "object": {"type": "Note"}}, (None, None, None)),
    ],
)
def test_a_delivery_is_about_the_object_and_an_undo_about_what_it_undoes(
    activity: dict[str, Any], expected: tuple[str | None, str | None, str | None]
) -> None:
    _activity, facts = normalize(activity, "alice", URLS, lambda: "t")
    assert (facts.object_id, facts.undoes, facts.target) == expected
