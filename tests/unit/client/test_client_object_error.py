"""The typed client shows why a pulled activity's object is still only a URI (`object_error`)."""

from __future__ import annotations

import respx

from fedqueue.client import Client

BASE = "http://fedqueue.internal:8000"


def test_a_pulled_item_says_why_its_object_is_only_a_uri_and_others_say_nothing() -> None:
    base = {
        "id": "https://b.example/c/1",
        "type": "Announce",
        "actor": "https://relay.example/actor",
        "key_id": "https://relay.example/actor#main-key",
        "received_at": "2026-01-01T00:00:00+00:00",
        "activity": {"type": "Announce", "object": "https://b.example/n/1"},
    }
    items = [
        {**base, "cursor": 1, "object_error": "GET https://b.example/n/1 answered 500"},
        {**base, "cursor": 2},
    ]
    with respx.mock(base_url=BASE) as router:
        router.get("/actors/alice/inbox").respond(
            200, json={"consumer": "app", "items": items, "next_cursor": 2}
        )
        with Client(BASE, "alice-token") as client:
            page = client.pull("alice", "app")
    assert [item.object_error for item in page.items] == ["GET https://b.example/n/1 answered 500", None]
