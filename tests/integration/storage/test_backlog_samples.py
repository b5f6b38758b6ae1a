"""The backlog over time (issue 51, "also wanted"): each worker's heartbeat samples, per lane, the
deliveries due and the oldest one's wait at most once a minute; a database away loses the sample,
never the beat; samples outliving `retention_backlog_samples_days` are pruned. On both engines."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from fedqueue.outbound.heartbeat import Heartbeat
from fedqueue.rules.errors import StorageUnavailable
from fedqueue.rules.states import Lane
from fedqueue.service.retention import prune_once
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.backlog_samples import BacklogBucket, LaneBacklog
from fedqueue.storage.column_types import utcnow
from tests.seeding import SeededDelivery, seed_activity

HOUR = timedelta(hours=1)


class Clock:
    """A heartbeat clock the test moves by hand."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


async def _samples(store: Store, around: datetime) -> list[BacklogBucket]:
    """The samples of the hour either side of `around`, one bucket a minute from a whole minute."""
    since = around.replace(second=0, microsecond=0) - HOUR
    return await store.backlog_samples.per_bucket(since, timedelta(minutes=1), 120)


async def test_a_worker_samples_the_backlog_per_lane_at_most_once_a_minute(
    settings: Settings, store: Store
) -> None:
    t0 = utcnow().replace(second=0, microsecond=0)
    waiting = [
        SeededDelivery(f"https://slow.example/users/{i}/inbox", next_attempt_at=t0 - 300 * _S) for i in (1, 2)
    ]
    await seed_activity(store.database, "alice", "https://l.example/a/1", waiting, now=t0 - HOUR)
    clock = Clock(t0)
    heartbeat = Heartbeat(settings, store, "box:1:me", lambda: 0, clock=clock)

    await heartbeat.beat()
    clock.now = t0 + 30 * _S
    await heartbeat.beat()
    assert await _samples(store, t0) == [BacklogBucket(t0, 2, 300.0)]

    clock.now = t0 + 61 * _S
    await heartbeat.beat()
    assert [b.start for b in await _samples(store, t0)] == [t0, t0 + 60 * _S]
    assert heartbeat.beats_written == 3


async def test_a_wall_clock_set_back_does_not_stop_the_samples(settings: Settings, store: Store) -> None:
    t0 = utcnow().replace(second=0, microsecond=0)
    clock = Clock(t0)
    heartbeat = Heartbeat(settings, store, "box:1:me", lambda: 0, clock=clock)
    await heartbeat.beat()
    clock.now = t0 - HOUR / 2  # set back by NTP or by hand
    await heartbeat.beat()
    assert [b.start for b in await _samples(store, t0)] == [t0 - HOUR / 2, t0]


async def test_every_lane_is_sampled_with_zero_where_nothing_is_due(store: Store) -> None:
    now = utcnow()
    assert await store.workers.backlog_by_lane(now) == dict.fromkeys(
        (int(lane) for lane in Lane), LaneBacklog(0, 0.0)
    )


async def test_a_database_away_loses_the_sample_never_the_beat(
    settings: Settings, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def away(now: datetime, per_lane: object) -> None:
        raise StorageUnavailable("the database is away")

    clock = Clock(utcnow())
    heartbeat = Heartbeat(settings, store, "box:1:me", lambda: 0, clock=clock)
    with monkeypatch.context() as patched:
        patched.setattr(store.backlog_samples, "record", away)
        await heartbeat.beat()
    assert [b.id for b in await store.workers.list()] == ["box:1:me"]
    assert heartbeat.sampled_at is None
    assert await _samples(store, clock.now) == []

    clock.now += 5 * _S  # back: the next beat samples, without waiting out the minute
    await heartbeat.beat()
    assert len(await _samples(store, clock.now)) == 1


async def test_backlog_samples_are_pruned_after_retention_backlog_samples_days(
    settings: Settings, store: Store
) -> None:
    now = utcnow()
    for days in (9, 8, 6, 1):
        await store.backlog_samples.record(now - timedelta(days=days), {1: LaneBacklog(days, 60.0)})
    short = settings.model_copy(update={"retention_backlog_samples_days": 7, "prune_batch_rows": 1})

    removed = await prune_once(store, short, now)

    assert removed["backlog_samples"] == 2
    kept = await store.backlog_samples.per_bucket(now - timedelta(days=10), timedelta(days=1), 10)
    assert [b.due for b in kept] == [6, 1]


async def test_a_bucket_shows_the_most_due_at_one_sample_and_the_longest_wait(store: Store) -> None:
    t0 = utcnow().replace(second=0, microsecond=0) - 3 * HOUR
    # Two lanes at one instant add up; two workers' samples in one bucket: the larger shows.
    await store.backlog_samples.record(t0, {0: LaneBacklog(3, 10.0), 1: LaneBacklog(4, 90.0)})
    await store.backlog_samples.record(t0 + 20 * _S, {0: LaneBacklog(5, 30.0), 1: LaneBacklog(0, 0.0)})
    await store.backlog_samples.record(t0 + HOUR + 30 * _S, {1: LaneBacklog(1, 5.0)})

    buckets = await store.backlog_samples.per_bucket(t0, HOUR, 3)

    assert buckets == [BacklogBucket(t0, 7, 90.0), BacklogBucket(t0 + HOUR, 1, 5.0)]


_S = timedelta(seconds=1)
