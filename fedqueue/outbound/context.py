"""What the stages of one delivery worker share (`WorkerContext`), built once by `Worker`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from fedqueue.metrics import Metrics
from fedqueue.remote.keyring import Keyring
from fedqueue.settings import Settings
from fedqueue.storage import Store


@dataclass(frozen=True)
class WorkerContext:
    """One worker's settings, store, local actors' keys, lease owner name, clock and metrics.

    `Fanout`, `Readdresser`, `Dispatcher` and `Attempts` take it instead of the same six
    parameters each; what only some of them need (the directory, the client, the jitter)
    they take beside it.
    """

    settings: Settings
    store: Store
    keyring: Keyring
    owner: str
    clock: Callable[[], datetime]
    metrics: Metrics
