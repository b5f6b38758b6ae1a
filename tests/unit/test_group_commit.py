"""Group commit's batching rules, with in-memory writes: who shares a batch, whose error is whose."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from fedqueue.rules.errors import StorageUnavailable
from fedqueue.storage.group_commit import GroupCommit


class Recorder:
    """Stores ints; 13 cannot be stored. Records each batch and each write stored alone."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.alone: list[int] = []

    async def store_batch(self, writes: Sequence[int]) -> list[int]:
        self.batches.append(list(writes))
        if 13 in writes:
            raise ValueError("13 cannot be stored")
        await asyncio.sleep(0)
        return [write * 2 for write in writes]

    async def store_one(self, write: int) -> int:
        self.alone.append(write)
        if write == 13:
            raise ValueError("13 cannot be stored")
        return write * 2


async def test_writes_arriving_together_share_one_batch_and_each_gets_its_own_result() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder.store_batch, recorder.store_one, max_batch=64)
    results = await asyncio.gather(*(group.submit(n) for n in range(1, 6)))
    assert results == [2, 4, 6, 8, 10]
    assert sum(len(batch) for batch in recorder.batches) + len(recorder.alone) == 5
    assert any(len(batch) > 1 for batch in recorder.batches)


async def test_a_write_that_fails_its_batch_fails_alone_and_the_rest_are_stored() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder.store_batch, recorder.store_one, max_batch=64)
    results = await asyncio.gather(*(group.submit(n) for n in (11, 12, 13, 14)), return_exceptions=True)
    assert results[:2] == [22, 24] and results[3] == 28
    assert isinstance(results[2], ValueError)


async def test_an_unavailable_database_fails_every_write_of_the_batch_at_once() -> None:
    """Stored one by one, each would wait out the same timeout again."""
    alone: list[int] = []

    async def unavailable(_writes: Sequence[int]) -> list[int]:
        raise StorageUnavailable("database error: connection refused")

    async def store_one(write: int) -> int:
        alone.append(write)
        return write

    group = GroupCommit(unavailable, store_one, max_batch=64)
    results = await asyncio.gather(*(group.submit(n) for n in range(1, 5)), return_exceptions=True)
    assert all(isinstance(result, StorageUnavailable) for result in results)
    assert alone == []


async def test_a_write_whose_caller_gave_up_is_not_stored_alone_after_its_batch_failed() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder.store_batch, recorder.store_one, max_batch=64)
    given_up = asyncio.ensure_future(group.submit(12))
    kept = asyncio.ensure_future(group.submit(13))
    await asyncio.sleep(0)  # both are waiting in one batch, which 13 fails
    given_up.cancel()
    with pytest.raises(ValueError, match="13 cannot"):
        await kept
    assert recorder.batches == [[12, 13]] and recorder.alone == [13]


async def test_without_a_store_one_each_write_of_a_failed_batch_goes_as_a_batch_of_one() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder.store_batch, max_batch=64)
    results = await asyncio.gather(*(group.submit(n) for n in (11, 13, 14)), return_exceptions=True)
    assert results[0] == 22 and results[2] == 28
    assert isinstance(results[1], ValueError)
    assert recorder.batches == [[11, 13, 14], [11], [13], [14]] and recorder.alone == []


async def test_a_write_alone_is_stored_as_one_and_its_error_is_its_own() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder.store_batch, recorder.store_one, max_batch=64)
    with pytest.raises(ValueError, match="13 cannot"):
        await group.submit(13)
    assert recorder.alone == [13] and recorder.batches == []


async def test_no_batch_is_larger_than_the_bound() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder.store_batch, recorder.store_one, max_batch=3)
    await asyncio.gather(*(group.submit(n) for n in range(20) if n != 13))
    assert max(len(batch) for batch in recorder.batches) <= 3


async def test_writes_queued_without_waiting_are_all_stored_once_flushed() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder.store_batch, recorder.store_one, max_batch=2)
    await group.flushed()  # nothing queued: returns at once
    queued = [group.enqueue(n) for n in range(1, 6)]
    assert not any(future.done() for future in queued)
    await group.flushed()
    assert [future.result() for future in queued] == [2, 4, 6, 8, 10]
    assert recorder.batches == [[1, 2], [3, 4]] and recorder.alone == [5]


#: Longer than any test may take: a write that lingered this long would fail the test's timeout.
FOREVER_S = 3600.0


async def test_writes_nobody_waits_for_linger_until_one_someone_waits_for_joins_them() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder.store_batch, recorder.store_one, max_batch=64, linger_s=FOREVER_S)
    first = group.enqueue(1, behind=True)
    await asyncio.sleep(0.01)  # the drainer runs, and lingers
    second = group.enqueue(2, behind=True)
    await asyncio.sleep(0.01)
    assert recorder.batches == [] and not first.done()
    assert await asyncio.wait_for(group.submit(3), 5) == 6
    assert (first.result(), second.result()) == (2, 4)
    assert recorder.batches == [[1, 2, 3]]


async def test_writes_nobody_waits_for_go_at_once_when_the_batch_is_full_or_when_flushed() -> None:
    recorder = Recorder()
    group = GroupCommit(recorder.store_batch, recorder.store_one, max_batch=2, linger_s=FOREVER_S)
    full = [group.enqueue(n, behind=True) for n in (1, 2)]
    assert await asyncio.wait_for(asyncio.gather(*full), 5) == [2, 4]
    alone = group.enqueue(3, behind=True)
    await asyncio.sleep(0.01)  # lingering
    await asyncio.wait_for(group.flushed(), 5)
    assert alone.result() == 6
    just_queued = group.enqueue(4, behind=True)
    await group.flushed()  # before the drainer even started (a hang fails the test's timeout)
    assert just_queued.result() == 8
    assert recorder.batches == [[1, 2]] and recorder.alone == [3, 4]


async def test_flushed_waits_for_the_writes_queued_before_it_not_for_those_queued_after() -> None:
    """Under a steady flow of writes it still returns."""
    release = asyncio.Event()

    async def store_batch(writes: Sequence[int]) -> list[int]:
        if 2 in writes:
            await release.wait()
        return [write * 2 for write in writes]

    group = GroupCommit(store_batch, max_batch=64)
    first = group.enqueue(1, behind=True)
    flushing = asyncio.ensure_future(group.flushed())
    await asyncio.sleep(0)
    later = group.enqueue(2, behind=True)
    await asyncio.wait_for(flushing, 5)
    assert first.result() == 2 and not later.done()
    release.set()
    assert await later == 4
