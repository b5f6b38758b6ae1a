"""The in-process memory of remote actors and their keys: bounded, expiring, one key per actor."""

from __future__ import annotations

from datetime import datetime, timedelta

from fedqueue.rules.bounded_memory import ActorMemory, RemoteActor

NOW = datetime(2026, 1, 1)
LATER = NOW + timedelta(hours=24)


def actor(uri: str, key_id: str | None = None) -> RemoteActor:
    return RemoteActor(
        uri=uri,
        inbox=f"{uri}/inbox",
        shared_inbox=None,
        key_id=key_id or f"{uri}#main-key",
        public_key_pem="PEM",
    )


def test_a_remembered_actor_and_its_key_are_found_until_the_memory_ttl_passes() -> None:
    memory = ActorMemory(ttl=timedelta(minutes=5))
    memory.put(actor("https://a.example/u/1"), NOW, LATER)
    soon = NOW + timedelta(minutes=4)
    assert memory.actor("https://a.example/u/1", soon) == actor("https://a.example/u/1")
    found = memory.key("https://a.example/u/1#main-key", soon)
    assert found is not None
    assert (found.owner, found.public_key_pem) == ("https://a.example/u/1", "PEM")
    assert memory.key("https://a.example/u/1#main-key", NOW + timedelta(minutes=5)) is None
    assert memory.actor("https://a.example/u/1", NOW + timedelta(minutes=5)) is None


def test_an_actor_never_outlives_its_database_entry() -> None:
    memory = ActorMemory(ttl=timedelta(minutes=5))
    memory.put(actor("https://a.example/u/1"), NOW, NOW + timedelta(minutes=1))
    assert memory.key("https://a.example/u/1#main-key", NOW + timedelta(minutes=2)) is None
    assert memory.actor("https://a.example/u/1", NOW + timedelta(minutes=2)) is None


def test_an_actors_new_key_replaces_its_old_one() -> None:
    memory = ActorMemory()
    memory.put(actor("https://a.example/u/1", "https://a.example/u/1#old"), NOW, LATER)
    memory.put(actor("https://a.example/u/1", "https://a.example/u/1#new"), NOW, LATER)
    assert memory.key("https://a.example/u/1#old", NOW) is None
    assert memory.key("https://a.example/u/1#new", NOW) is not None


def test_a_failed_fetch_of_the_actor_forgets_it_and_its_key() -> None:
    memory = ActorMemory()
    memory.put(actor("https://a.example/u/1"), NOW, LATER)
    memory.forget("https://a.example/u/1")
    assert memory.key("https://a.example/u/1#main-key", NOW) is None
    assert memory.actor("https://a.example/u/1", NOW) is None


def test_the_least_recently_used_actor_goes_first_when_full() -> None:
    memory = ActorMemory(size=2)
    memory.put(actor("https://a.example/u/1"), NOW, LATER)
    memory.put(actor("https://a.example/u/2"), NOW, LATER)
    memory.key("https://a.example/u/1#main-key", NOW)
    memory.put(actor("https://a.example/u/3"), NOW, LATER)
    assert memory.key("https://a.example/u/2#main-key", NOW) is None
    assert memory.key("https://a.example/u/1#main-key", NOW) is not None
    assert memory.actor("https://a.example/u/3", NOW) is not None
