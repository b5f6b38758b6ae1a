"""Coalescing in the delivery engine: the pure rules of `coalesce` around the storage calls.

Two hooks. After a new activity's deliveries are inserted, `Coalescer.after_enqueue` runs the
rules on the histories of the new rows. Just before a claimed batch is sent, `Coalescer.gate`
loads the histories of the whole batch once; `SendGate.admit` then decides every row before
any is sent (coalesced, must wait, or send), and `Coalescer.finish` records the decisions
and gives waiting rows back. Several workers may decide about one row at once: every write is
guarded (unclaimed rows only while queued or failed, claimed ones only under our lease), and
deciding again on the result decides nothing new, so the first write wins and none is wrong.

Both hooks read only the histories the rules could decide anything on (contested keys): a
key whose history is one delivery, not an Undo, is left out, and that delivery is sent as it
is, which is what the rules would decide on it (`LONE_DECIDABLE_TYPES`). A fan-out's new rows
are all such keys, so neither hook turns them into `Delivery` objects or runs the rules on them.

Ordering: a claimed delivery with an earlier pending one from the same actor about the same
subject to the same inbox waits (`coalesce.must_wait_for`). It is given back without spending
an attempt, due when the earlier one is next due, and at least `recheck_s` later, so a waiting
delivery never spins.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import Enum, auto

from fedqueue.rules.attempt_results import Claimed
from fedqueue.rules.coalescing import Coalesced, Delivery, before_send, coalesce
from fedqueue.rules.intake import ActivityFacts
from fedqueue.rules.states import DeliveryState
from fedqueue.storage import Decision, HistoryRow
from fedqueue.storage.coalescing_reads import CoalescingStore

Key = tuple[str, str]


@dataclass(frozen=True)
class Added:
    """An activity whose delivery rows were just inserted, and the inboxes they go to."""

    outbox_id: int
    facts: ActivityFacts
    inboxes: Sequence[str]


class Verdict(Enum):
    """What `SendGate.admit` decides for a claimed delivery (compared by identity; no value is stored)."""

    SEND = auto()
    COALESCED = auto()
    WAIT = auto()


def _delivery(row: HistoryRow, state: str | None = None, attempts: int | None = None) -> Delivery:
    return Delivery(
        delivery_id=row.id,
        inbox=row.inbox,
        activity_id=row.activity_id,
        actor=row.actor,
        type=row.activity_type,
        subject=row.object_id,
        state=DeliveryState(state or row.state),
        attempted=(row.attempts if attempts is None else attempts) > 0,
        undoes=row.undoes,
        target=row.target,
    )


def _decision(c: Coalesced) -> Decision:
    return Decision(c.delivery_id, c.reason, c.by)


@dataclass
class SendGate:
    """One claimed batch's histories; each row is admitted (or not) just before its POST."""

    now: datetime
    recheck_s: float
    histories: dict[Key, list[Delivery]]
    due: dict[int, datetime | None]
    decided: dict[int, Coalesced] = field(default_factory=dict)
    waits: dict[int, datetime] = field(default_factory=dict)

    def admit(self, row: Claimed) -> Verdict:
        """Coalesced, must wait, or send: decided on the batch's history as it stands now."""
        if row.id in self.decided:
            return Verdict.COALESCED
        if row.object_id is None:
            return Verdict.SEND
        key = (row.inbox, row.object_id)
        history = self.histories.get(key)
        if history is None or all(d.delivery_id != row.id for d in history):
            # Alone in its history and not an Undo, or gone from the table since the claim:
            # nothing to decide on.
            return Verdict.SEND
        check = before_send(history, row.id)
        for c in check.coalesced:
            self.decided[c.delivery_id] = c
        self._set(key, {c.delivery_id: DeliveryState.COALESCED for c in check.coalesced})
        if row.id in self.decided:
            return Verdict.COALESCED
        if check.wait_for is not None:
            self.waits[row.id] = self._wait_until(check.wait_for)
            return Verdict.WAIT
        # Being sent now: for the rows checked after it, it is in flight (it may arrive).
        self._set(key, {row.id: DeliveryState.SENDING})
        return Verdict.SEND

    def _wait_until(self, blocker: Delivery) -> datetime:
        soonest = self.now + timedelta(seconds=self.recheck_s)
        blocker_due = self.due.get(blocker.delivery_id)
        in_flight = blocker.state is DeliveryState.SENDING
        if in_flight or blocker_due is None:
            return soonest
        return max(soonest, blocker_due)

    def _set(self, key: Key, states: dict[int, DeliveryState], *, attempted: bool = False) -> None:
        history = self.histories[key]
        for i, d in enumerate(history):
            if d.delivery_id in states:
                history[i] = replace(d, state=states[d.delivery_id], attempted=d.attempted or attempted)


class Coalescer:
    """Runs the coalescing rules at both hooks for one worker (`owner`)."""

    def __init__(
        self, coalescing: CoalescingStore, owner: str, clock: Callable[[], datetime], recheck_s: float
    ) -> None:
        self._coalescing = coalescing
        self._owner = owner
        self._clock = clock
        self._recheck_s = recheck_s

    async def resolve_undo(
        self, facts: ActivityFacts, earlier: Sequence[ActivityFacts] = ()
    ) -> ActivityFacts:
        """An Undo naming the undone activity by id only: its subject is that activity's object.

        The undone activity is looked for among `earlier` (expanded in the same batch, not yet
        stored) first, then among the actor's stored activities.
        """
        if facts.activity_type != "Undo" or facts.undoes is None or facts.object_id != facts.undoes:
            return facts
        subject = next(
            (e.object_id for e in earlier if e.activity_id == facts.undoes and e.actor == facts.actor), None
        ) or await self._coalescing.undone_subject(facts.actor, facts.undoes)
        return facts if subject is None else replace(facts, object_id=subject)

    async def after_enqueue(self, added: Sequence[Added]) -> None:
        """Coalesce after activities' deliveries were inserted.

        One history load and one write for all of `added`, deciding as if each activity had been
        coalesced on its own right after its insert, in submission order: each sees the rows of
        the activities before it (and their decisions), not those after it.
        """
        keyed: dict[Key, list[tuple[int, Delivery]]] = {}
        keys = [(inbox, a.facts.object_id) for a in added if a.facts.object_id for inbox in a.inboxes]
        for row in await self._coalescing.history(keys) if keys else []:
            keyed.setdefault((row.inbox, row.object_id), []).append((row.outbox_id, _delivery(row)))
        later = {a.outbox_id for a in added}
        decided: dict[int, Coalesced] = {}
        for a in sorted(added, key=lambda a: a.outbox_id):
            later.discard(a.outbox_id)
            if a.facts.object_id is None:
                continue
            for key in dict.fromkeys((inbox, a.facts.object_id) for inbox in a.inboxes):
                history = keyed.get(key)
                if history is None:
                    continue  # not contested: the rules decide nothing on it
                for c in coalesce(d for outbox_id, d in history if outbox_id not in later):
                    decided.setdefault(c.delivery_id, c)
                keyed[key] = [
                    (outbox_id, replace(d, state=DeliveryState.COALESCED) if d.delivery_id in decided else d)
                    for outbox_id, d in history
                ]
        await self._coalescing.decide(self._owner, [_decision(c) for c in decided.values()])

    async def gate(self, claimed: Sequence[Claimed]) -> SendGate:
        """Load the histories of a claimed batch (one query per chunk of keys, not per row)."""
        keys = [(row.inbox, row.object_id) for row in claimed if row.object_id is not None]
        rows = await self._coalescing.history(keys) if keys else []
        ours = {row.id for row in claimed}
        histories: dict[Key, list[Delivery]] = {}
        for row in rows:
            # Our claimed rows not yet checked count as unsent: their lease is ours.
            unsent = row.id in ours and row.state == DeliveryState.SENDING
            state = (DeliveryState.FAILED if row.attempts else DeliveryState.QUEUED) if unsent else None
            histories.setdefault((row.inbox, row.object_id), []).append(_delivery(row, state))
        due = {row.id: row.due for row in rows}
        return SendGate(self._clock(), self._recheck_s, histories, due)

    async def finish(self, gate: SendGate) -> None:
        """Record a batch's decisions (after its results) and give waiting rows back."""
        await self._coalescing.decide(self._owner, [_decision(c) for c in gate.decided.values()])
        await self._coalescing.wait(self._owner, gate.waits)
