"""Host health as the worker records it: fast for healthy hosts, never losing another worker's failure."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from fedqueue.rules.circuit import CircuitPolicy, HostHealth, after_failure, after_success
from fedqueue.rules.states import CircuitState
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.hosts import HostStore

POLICY = CircuitPolicy(
    failure_threshold=10,
    open_seconds=300,
    recovery_start=2,
    full_allowance=8,
    unavailable_after_days=7,
    unavailable_probe_hours=24,
)


async def test_a_success_from_a_healthy_host_moves_only_its_last_success_time(store: Store) -> None:
    now = utcnow()
    first = await store.hosts.update({"a.example": lambda h: after_success(h, now, POLICY)})
    later = now + timedelta(seconds=5)
    second = await store.hosts.update({"a.example": lambda h: after_success(h, later, POLICY)})

    health = (await store.hosts.health(["a.example"]))["a.example"]
    assert health == HostHealth("a.example", last_success_at=later)
    # Only the second was a healthy host answering again (the first made its row).
    assert (first.answered, second.answered) == (frozenset(), frozenset({"a.example"}))


async def test_a_success_after_failures_resets_the_failure_count(store: Store) -> None:
    now = utcnow()
    for _ in range(3):
        await store.hosts.update({"a.example": lambda h: after_failure(h, now, POLICY)})
    assert (await store.hosts.health(["a.example"]))["a.example"].consecutive_failures == 3
    await store.hosts.update({"a.example": lambda h: after_success(h, now, POLICY)})

    health = (await store.hosts.health(["a.example"]))["a.example"]
    assert (health.consecutive_failures, health.first_failure_at, health.circuit) == (
        0,
        None,
        CircuitState.CLOSED,
    )


async def test_a_success_read_as_healthy_does_not_overwrite_failures_another_worker_recorded_meanwhile(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = utcnow()
    await store.hosts.update({"a.example": lambda h: after_success(h, now, POLICY)})
    stale = await store.hosts.health(["a.example"])
    for _ in range(10):  # another worker: the circuit opens
        await store.hosts.update({"a.example": lambda h: after_failure(h, now, POLICY)})
    real = HostStore.health

    async def stale_health(self: HostStore, hosts: object) -> dict[str, HostHealth]:
        return stale

    monkeypatch.setattr(HostStore, "health", stale_health)
    later = now + timedelta(seconds=1)
    updated = await store.hosts.update({"a.example": lambda h: after_success(h, later, POLICY)})
    monkeypatch.setattr(HostStore, "health", real)
    assert updated.answered == frozenset()  # its guarded write found it failing

    health = (await store.hosts.health(["a.example"]))["a.example"]
    # The success was applied to the open circuit, not to the stale healthy read: recovery starts.
    assert health == replace(
        health,
        consecutive_failures=0,
        circuit=CircuitState.CLOSED,
        recovery_allowance=2,
        last_success_at=later,
    )
    assert health.last_failure_at == now
