"""The event loop `serve` and `worker` run on (`fedqueue.cli.loop`)."""

from __future__ import annotations

import gc
import sys
from collections.abc import Iterator

import pytest

from fedqueue.cli import loop


@pytest.fixture
def restored_interpreter() -> Iterator[None]:
    """`loop.run` tunes the interpreter for the whole process: put the test runner's back after."""
    threshold, interval = gc.get_threshold(), sys.getswitchinterval()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)
    sys.setswitchinterval(interval)


@pytest.mark.usefixtures("restored_interpreter")
def test_a_long_running_command_collects_young_objects_less_often_and_leaves_start_up_objects_alone() -> None:
    async def tuning() -> tuple[int, int, float]:
        return gc.get_threshold()[0], gc.get_freeze_count(), sys.getswitchinterval()

    young, frozen, interval = loop.run(tuning())

    assert young == loop.GC_YOUNG_THRESHOLD > 700
    assert frozen > 0
    assert interval == loop.GIL_SWITCH_INTERVAL_S
