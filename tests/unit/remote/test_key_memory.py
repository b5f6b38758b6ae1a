"""The in-process memory of remote keys: bounded, expiring, one key per owner."""

from __future__ import annotations

from datetime import datetime, timedelta

from fedqueue.remote.documents import KeyMemory, RemoteKey

NOW = datetime(2026, 1, 1)
LATER = NOW + timedelta(hours=24)


def key(owner: str, key_id: str | None = None) -> RemoteKey:
    return RemoteKey(key_id=key_id or f"{owner}#main-key", owner=owner, public_key_pem="PEM")


def test_a_remembered_key_is_found_until_the_memory_ttl_passes() -> None:
    memory = KeyMemory(ttl=timedelta(minutes=5))
    memory.put(key("https://a.example/u/1"), NOW, LATER)
    assert memory.get("https://a.example/u/1#main-key", NOW + timedelta(minutes=4)) is not None
    assert memory.get("https://a.example/u/1#main-key", NOW + timedelta(minutes=5)) is None


def test_a_key_never_outlives_its_database_entry() -> None:
    memory = KeyMemory(ttl=timedelta(minutes=5))
    memory.put(key("https://a.example/u/1"), NOW, NOW + timedelta(minutes=1))
    assert memory.get("https://a.example/u/1#main-key", NOW + timedelta(minutes=2)) is None


def test_an_owners_new_key_replaces_its_old_one() -> None:
    memory = KeyMemory()
    memory.put(key("https://a.example/u/1", "https://a.example/u/1#old"), NOW, LATER)
    memory.put(key("https://a.example/u/1", "https://a.example/u/1#new"), NOW, LATER)
    assert memory.get("https://a.example/u/1#old", NOW) is None
    assert memory.get("https://a.example/u/1#new", NOW) is not None


def test_a_failed_fetch_of_the_owner_forgets_its_key() -> None:
    memory = KeyMemory()
    memory.put(key("https://a.example/u/1"), NOW, LATER)
    memory.forget_owner("https://a.example/u/1")
    assert memory.get("https://a.example/u/1#main-key", NOW) is None


def test_the_least_recently_used_key_goes_first_when_full() -> None:
    memory = KeyMemory(size=2)
    memory.put(key("https://a.example/u/1"), NOW, LATER)
    memory.put(key("https://a.example/u/2"), NOW, LATER)
    memory.get("https://a.example/u/1#main-key", NOW)
    memory.put(key("https://a.example/u/3"), NOW, LATER)
    assert memory.get("https://a.example/u/2#main-key", NOW) is None
    assert memory.get("https://a.example/u/1#main-key", NOW) is not None
    assert memory.get("https://a.example/u/3#main-key", NOW) is not None
