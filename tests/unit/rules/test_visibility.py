"""Who may see what a minted id serves, and which version it serves (pure)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from fedqueue.rules.visibility import ANONYMOUS, Version, Viewer, admits, answer, page_of

ALICE = "https://fq.example/actors/alice"
FOLLOWERS = f"{ALICE}/followers"
PUBLIC = "https://www.w3.org/ns/activitystreams#Public"
NOTE = f"{ALICE}/activities/note"
BOB = "https://b.example/users/bob"
AT = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)

FOLLOWER = Viewer(BOB, follows=True, follower_host=True)
FOLLOWERS_SERVER = Viewer("https://b.example/actor", follows=False, follower_host=True)
STRANGER = Viewer("https://c.example/users/carol")
BOBS_SERVER = Viewer("https://b.example/actor")


@pytest.mark.parametrize(
    ("addressing", "viewer", "seen"),
    [
        ({"to": [PUBLIC]}, ANONYMOUS, True),
        ({"to": [FOLLOWERS], "cc": ["as:Public"]}, ANONYMOUS, True),  # unlisted
        ({"to": [FOLLOWERS]}, ANONYMOUS, False),
        ({"to": [FOLLOWERS]}, FOLLOWER, True),
        ({"to": [FOLLOWERS]}, FOLLOWERS_SERVER, True),
        ({"to": [FOLLOWERS]}, STRANGER, False),
        ({"to": [BOB]}, ANONYMOUS, False),
        ({"to": [BOB]}, Viewer(BOB), True),
        ({"bcc": [BOB]}, Viewer(BOB), True),
        ({"to": [BOB]}, BOBS_SERVER, True),
        ({"to": [BOB]}, STRANGER, False),
        ({"to": [BOB]}, Viewer("https://b.example.evil/users/bob"), False),
        ({"to": ["https://c.example/users/dave"]}, FOLLOWER, False),  # a follower, not addressed
        ({}, FOLLOWER, False),
    ],
)
def test_who_may_see_what_a_local_actor_addressed(
    addressing: dict[str, Any], viewer: Viewer, seen: bool
) -> None:
    assert admits(addressing, viewer, ALICE, FOLLOWERS) is seen


def create(note: dict[str, Any], **addressing: Any) -> Version:
    return Version("Create", {"@context": "ctx", "type": "Create", "object": note, **addressing}, AT)


def test_an_objects_id_serves_it_as_its_latest_version_carried_it_without_bto_or_bcc() -> None:
    first = create({"id": NOTE, "type": "Note", "content": "a", "bcc": [BOB]}, to=[PUBLIC])
    edited = Version("Update", {"type": "Update", "to": [PUBLIC], "object": {"id": NOTE, "content": "b"}}, AT)
    served = answer(NOTE, None, [edited, first])
    assert served is not None and not served.gone and served.public
    assert served.document == {
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": NOTE,
        "content": "b",
    }
    only = answer(NOTE, None, [first])
    assert only is not None and only.document == {
        "@context": "ctx",
        "id": NOTE,
        "type": "Note",
        "content": "a",
    }


def test_an_object_addressed_more_narrowly_than_its_create_is_shown_as_narrowly() -> None:
    version = create({"id": NOTE, "type": "Note", "to": [FOLLOWERS]}, to=[PUBLIC])
    served = answer(NOTE, None, [version])
    assert served is not None and not served.public
    assert not served.shown_to(ANONYMOUS, ALICE, FOLLOWERS) and served.shown_to(FOLLOWER, ALICE, FOLLOWERS)


def test_a_deleted_object_and_its_create_are_tombstones_shown_to_whoever_saw_the_object() -> None:
    carried = create({"id": NOTE, "type": "Article"}, to=[FOLLOWERS])
    deletion = Version("Delete", {"type": "Delete", "object": NOTE}, AT)
    gone = answer(NOTE, None, [deletion, carried])
    assert gone is not None and gone.gone
    assert gone.document == {
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": NOTE,
        "type": "Tombstone",
        "formerType": "Article",
        "deleted": "2025-01-02T03:04:05Z",
    }
    assert gone.shown_to(FOLLOWER, ALICE, FOLLOWERS) and not gone.shown_to(STRANGER, ALICE, FOLLOWERS)
    created = answer(f"{ALICE}/activities/create", carried, [deletion])
    assert created is not None and created.gone and created.document["formerType"] == "Create"
    itself = answer(f"{ALICE}/activities/delete", deletion, [deletion])
    assert itself is not None and not itself.gone and itself.document["type"] == "Delete"


def test_nothing_is_served_for_an_id_nothing_carries() -> None:
    assert answer(NOTE, None, []) is None
    bare = Version("Update", {"type": "Update", "to": [PUBLIC], "object": NOTE}, AT)
    assert answer(NOTE, None, [bare]) is None


@pytest.mark.parametrize(
    ("document", "page"),
    [
        ({"type": "Note", "url": "https://blog.example/1"}, "https://blog.example/1"),
        (
            {"type": "Create", "object": {"url": [{"type": "Link", "href": "https://blog.example/2"}]}},
            "https://blog.example/2",
        ),
        ({"type": "Note", "url": "javascript:alert(1)"}, None),
        ({"type": "Note"}, None),
    ],
)
def test_a_browser_is_sent_only_to_an_http_page(document: dict[str, Any], page: str | None) -> None:
    assert page_of(document) == page
