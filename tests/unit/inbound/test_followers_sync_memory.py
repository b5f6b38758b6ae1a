"""What followers synchronization remembers between deliveries (inbound.followers_sync)."""

from __future__ import annotations

from fedqueue.inbound.followers_sync import MAX_REMEMBERED_COLLECTIONS, IntervalMemory


def test_a_remembered_value_is_forgotten_once_its_interval_is_over() -> None:
    memory = IntervalMemory[str, str](interval_s=300.0)
    memory.put("bob", "digest", 10.0)
    assert memory.get("bob", 309.9) == "digest"
    assert memory.get("bob", 310.0) is None
    assert memory.get("carol", 10.0) is None


def test_a_full_memory_forgets_the_expired_values_and_keeps_the_fresh_ones() -> None:
    memory = IntervalMemory[int, int](interval_s=10.0)
    for key in range(MAX_REMEMBERED_COLLECTIONS - 1):
        memory.put(key, key, 0.0)
    memory.put(-1, -1, 5.0)
    memory.put(-2, -2, 12.0)  # full: the ones put at 0.0 are past their interval
    assert (memory.get(0, 12.0), memory.get(-1, 12.0), memory.get(-2, 12.0)) == (None, -1, -2)
    assert len(memory._entries) == 2
