"""The bounded memories of the remote directory, and the slim document it stores."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

from fedqueue.rules.bounded_memory import SLIM_LIST_ENTRIES, BoundedMemory, slim_document

NOW = datetime(2026, 1, 1)
LATER = NOW + timedelta(minutes=5)


def test_a_full_memory_drops_its_least_recently_used_entry_and_counts_the_eviction() -> None:
    memory = BoundedMemory[str, str](entries=2)
    memory.put("a", "1", LATER)
    memory.put("b", "2", LATER)
    assert memory.get("a", NOW) == "1"
    memory.put("c", "3", LATER)
    assert (memory.get("a", NOW), memory.get("b", NOW), memory.get("c", NOW)) == ("1", None, "3")
    assert (len(memory), memory.evictions) == (2, 1)


def test_a_memory_over_its_bytes_drops_entries_until_it_fits_and_refuses_one_larger_than_all() -> None:
    memory = BoundedMemory[str, str](entries=100, max_bytes=10, size=len)
    memory.put("a", "x" * 4, LATER)
    memory.put("b", "x" * 4, LATER)
    memory.put("c", "x" * 4, LATER)
    assert (memory.get("a", NOW), len(memory), memory.bytes) == (None, 2, 8)
    memory.put("huge", "x" * 11, LATER)
    assert (memory.get("huge", NOW), len(memory), memory.bytes, memory.evictions) == (None, 2, 8, 2)


def test_an_entry_expires_and_is_then_forgotten_without_counting_an_eviction() -> None:
    memory = BoundedMemory[str, str](entries=2, max_bytes=100, size=len)
    memory.put("a", "xyz", LATER)
    assert memory.get("a", LATER - timedelta(seconds=1)) == "xyz"
    assert memory.get("a", LATER) is None
    assert (len(memory), memory.bytes, memory.evictions) == (0, 0, 0)


def test_a_slim_document_keeps_only_the_fields_fedqueue_uses() -> None:
    doc = {
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": "https://a.example/u",
        "type": "Person",
        "inbox": "https://a.example/u/inbox",
        "endpoints": {"sharedInbox": "https://a.example/inbox", "oauth": "https://a.example/o"},
        "publicKey": {
            "id": "https://a.example/u#k",
            "owner": "https://a.example/u",
            "publicKeyPem": "PEM",
            "x": 1,
        },
        "followers": "https://a.example/u/followers",
        "assertionMethod": [
            {
                "id": "https://a.example/u#ed25519",
                "type": "Multikey",
                "controller": "https://a.example/u",
                "publicKeyMultibase": "z6Mk",
                "expires": "2030-01-01T00:00:00Z",
            },
            "https://a.example/u#named-only",
        ],
        "alsoKnownAs": [f"https://b.example/{index}" for index in range(50)],
        "summary": "x" * 100_000,
        "icon": {"url": "https://a.example/i.png"},
    }
    slim = slim_document(doc, 32768)
    assert slim is not None
    assert json.loads(slim) == {
        "id": "https://a.example/u",
        "type": "Person",
        "inbox": "https://a.example/u/inbox",
        "endpoints": {"sharedInbox": "https://a.example/inbox"},
        "publicKey": [{"id": "https://a.example/u#k", "owner": "https://a.example/u", "publicKeyPem": "PEM"}],
        "followers": "https://a.example/u/followers",
        "assertionMethod": [
            {
                "id": "https://a.example/u#ed25519",
                "type": "Multikey",
                "controller": "https://a.example/u",
                "publicKeyMultibase": "z6Mk",
            }
        ],
        "alsoKnownAs": [f"https://b.example/{index}" for index in range(SLIM_LIST_ENTRIES)],
    }


def test_a_slim_document_over_its_cap_gives_up_its_last_fields_first() -> None:
    doc = {"id": "https://a.example/u", "inbox": "https://a.example/u/inbox", "url": "u" * 5000}
    slim = slim_document(doc, 1024)
    assert slim is not None and json.loads(slim) == {"id": doc["id"], "inbox": doc["inbox"]}
    assert slim_document({"id": "https://a.example/" + "u" * 2000}, 1024) is None
