"""Recipients' actor documents fetched beside the worker, so one activity's fetches hold up no other.

An outbox row whose recipients need actor documents fetched (`Fanout`) is not planned in the
worker's round: it is held here under its expansion lease while its fetches run in the
background, and planned in a later round once all of them have ended (every result is then
in the directory's cache or its memory of failures). Meanwhile the worker goes on expanding
other rows and sending. The fetches of all held rows share `concurrency` slots, taken in
turn, one recipient of each row at a time, and one row takes at most half of them: a row with
three recipients is not queued behind one with three hundred on a slow host.

Order: an actor's rows are planned in the order they were submitted. Once one of its rows is
held, its later rows are held behind it (with nothing to fetch) and come out after it.

Bound: at most `max_rows` rows are held; past it the fan-out gives a row back to `pending`
without counting the claim (`OutboxStore.give_back`), and a later round takes it again.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from fedqueue.metrics import Metrics
from fedqueue.rules.address_guard import FetchError
from fedqueue.rules.errors import describe
from fedqueue.rules.outcomes import readable_error
from fedqueue.storage import OutboxEntry

#: Remote actor documents fetched at once while addressing activities (for one worker).
ACTOR_FETCH_CONCURRENCY = 16


@dataclass
class Held:
    """One held outbox row: the recipients still to fetch, those being fetched, and those
    given up past the fetch budget (uri: (limit, reason)), decided once when it was held
    (None: held only behind its actor's earlier row, nothing decided yet)."""

    entry: OutboxEntry
    refused: dict[str, tuple[str, str]] | None
    to_fetch: deque[str] = field(default_factory=deque)
    in_flight: int = 0

    @property
    def fetched(self) -> bool:
        return not self.to_fetch and not self.in_flight


class RecipientFetches:
    """The rows one worker holds for their recipients' fetches, and the fetches themselves."""

    def __init__(self, fetch: Callable[[str], Awaitable[None]], concurrency: int, max_rows: int) -> None:
        #: Fetches one recipient into the directory's cache; never raises (a failure is remembered).
        self._fetch = fetch
        self._concurrency = concurrency
        self._per_row = max(1, concurrency // 2)
        self._max_rows = max_rows
        self._held: dict[int, Held] = {}
        #: Held rows' ids, in turn: the next fetch is for the row at the front.
        self._turns: deque[int] = deque()
        self._pumps: set[asyncio.Task[None]] = set()
        self._progress = asyncio.Event()

    @property
    def full(self) -> bool:
        return len(self._held) >= self._max_rows

    @property
    def held_ids(self) -> list[int]:
        return sorted(self._held)

    def holds_actor(self, actor: str) -> bool:
        """Whether a row of `actor` is held: its later rows must wait behind it."""
        return any(held.entry.actor == actor for held in self._held.values())

    def hold(
        self, entry: OutboxEntry, to_fetch: tuple[str, ...], refused: dict[str, tuple[str, str]] | None
    ) -> None:
        """Hold `entry` until `to_fetch` have been fetched (at once if there are none)."""
        self._held[entry.id] = Held(entry, refused, deque(to_fetch))
        self._turns.append(entry.id)
        self._start()

    def take_ready(self) -> list[Held]:
        """The held rows ready to plan, each actor's in submission order; no longer held."""
        ready: list[Held] = []
        waiting: set[str] = set()
        for outbox_id in sorted(self._held):
            held = self._held[outbox_id]
            actor = held.entry.actor
            if actor in waiting or not held.fetched:
                waiting.add(actor)
                continue
            ready.append(self._held.pop(outbox_id))
        self._progress.clear()
        return ready

    def forget(self, outbox_ids: set[int]) -> None:
        """Stop holding these rows (their lease was lost): their fetches left are dropped."""
        for outbox_id in outbox_ids:
            self._held.pop(outbox_id, None)

    async def wait_for_progress(self, timeout_s: float | None) -> None:
        """Until a held row's fetches have ended (or `timeout_s` passes; None: no limit)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._progress.wait(), timeout_s)

    async def aclose(self) -> list[int]:
        """Stop every fetch; the ids of the rows that were still held (to be given back)."""
        for pump in self._pumps:
            pump.cancel()
        if self._pumps:
            await asyncio.wait(self._pumps)
        self._pumps.clear()
        ids = self.held_ids
        self._held.clear()
        self._turns.clear()
        return ids

    def _start(self) -> None:
        """Start fetching in the background, up to `concurrency` at once."""
        self._pumps = {pump for pump in self._pumps if not pump.done()}
        # A pump waiting on a fetch is busy: one more for each recipient still to fetch.
        wanted = sum(len(held.to_fetch) + held.in_flight for held in self._held.values())
        while len(self._pumps) < min(self._concurrency, wanted):
            self._pumps.add(asyncio.create_task(self._pump()))
        if any(held.fetched for held in self._held.values()):
            self._progress.set()

    def _next(self) -> tuple[Held, str] | None:
        """The next recipient to fetch: one of the row whose turn it is, then that row goes last."""
        for _ in range(len(self._turns)):
            held = self._held.get(self._turns[0])
            if held is None:
                self._turns.popleft()  # no longer held
                continue
            self._turns.rotate(-1)
            if held.to_fetch and held.in_flight < self._per_row:
                held.in_flight += 1
                return held, held.to_fetch.popleft()
        return None

    async def _pump(self) -> None:
        while (turn := self._next()) is not None:
            held, uri = turn
            try:
                await self._fetch(uri)
            finally:
                held.in_flight -= 1
                if held.fetched:
                    self._progress.set()


@dataclass(frozen=True)
class Unusable:
    """Why a recipient's actor document could not be used: for a person, and the raw text."""

    reason: str
    detail: str


def unusable(uri: str, exc: Exception, timeout_s: float, metrics: Metrics) -> Unusable:
    """Why fetching `uri`'s actor document failed, one line each (capped, without NUL).

    A FetchError is an answer about the recipient; anything else is also logged and counted.
    """
    raw = str(exc) if isinstance(exc, FetchError) else describe(exc)
    if not isinstance(exc, FetchError):
        metrics.worker_error("expand", exc, "recipient %s: unexpected error", uri[:200])

    def line(text: str) -> str:
        return text.replace("\x00", "\\x00")[:600]

    return Unusable(line(f"recipient {uri[:200]} unusable: {readable_error(raw, timeout_s)}"), line(raw))
