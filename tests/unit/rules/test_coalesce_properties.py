"""Coalescing never changes what a receiver ends up with.

A simulated queue submits random Create, Update, Delete, Like and Undo(Like) activities from
two actors over three objects to two inboxes, coalesces at enqueue time and before every send,
honours the ordering check, and draws an outcome for every POST: delivered, failed, or timed
out (arrived or not). In the end everything left is delivered. Each model receiver must then
hold what it would hold had every activity addressed to it arrived once, in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st

from fedqueue.rules.coalescing import Coalesced, Delivery, before_send, coalesce
from fedqueue.rules.states import DeliveryState

State = DeliveryState
INBOXES = ("https://r1.example/inbox", "https://r2.example/users/bob/inbox")
ACTORS = ("alice", "carol")
#: Each object is created, updated and deleted only by its author.
AUTHORS = {
    "https://l.example/notes/1": "alice",
    "https://l.example/notes/2": "alice",
    "https://l.example/notes/3": "carol",
}
OBJECTS = tuple(AUTHORS)
#: Weighted towards what coalesces: several Updates, Likes and Undos per Create and Delete.
KINDS = ("Create", "Update", "Update", "Delete", "Like", "Like", "Undo", "Undo")


@dataclass(frozen=True)
class Activity:
    id: str
    actor: str
    type: str
    subject: str
    inboxes: tuple[str, ...]
    undoes: str | None = None


@dataclass
class Receiver:
    """A Mastodon-like inbox: notes with versions, tombstones, and likes keyed by (actor, note)."""

    notes: dict[str, str] = field(default_factory=dict)
    tombstones: set[str] = field(default_factory=set)
    likes: set[tuple[str, str]] = field(default_factory=set)

    def receive(self, activity: Activity) -> None:
        subject = activity.subject
        if activity.type == "Create":
            if subject not in self.notes and subject not in self.tombstones:
                self.notes[subject] = activity.id
        elif activity.type == "Update":
            if subject in self.notes:  # an Update of an unknown note is ignored
                self.notes[subject] = activity.id
        elif activity.type == "Delete":
            self.notes.pop(subject, None)
            self.tombstones.add(subject)
        elif activity.type == "Like":
            self.likes.add((activity.actor, subject))
        else:  # Undo(Like): removes the like of that note, whichever Like made it
            self.likes.discard((activity.actor, subject))

    def visible(self) -> tuple[dict[str, str], set[tuple[str, str]]]:
        return self.notes, self.likes


@dataclass
class Row:
    delivery_id: int
    inbox: str
    activity: Activity
    state: State = State.QUEUED
    attempted: bool = False

    def view(self) -> Delivery:
        a = self.activity
        return Delivery(
            self.delivery_id,
            self.inbox,
            a.id,
            a.actor,
            a.type,
            a.subject,
            self.state,
            self.attempted,
            a.undoes,
        )


class Queue:
    """The delivery table and worker, reduced to what coalescing and ordering see."""

    def __init__(self) -> None:
        self.rows: list[Row] = []
        self.receivers = {inbox: Receiver() for inbox in INBOXES}

    def history(self, row: Row) -> list[Delivery]:
        """Every inbox's rows about the row's subject: the module must keep the inboxes apart."""
        return [r.view() for r in self.rows if r.activity.subject == row.activity.subject]

    def record(self, decisions: tuple[Coalesced, ...], claimed: int | None = None) -> None:
        by_id = {r.delivery_id: r for r in self.rows}
        for decision in decisions:
            row = by_id[decision.delivery_id]
            assert row.state in (State.QUEUED, State.FAILED) or row.delivery_id == claimed, decision
            row.state = State.COALESCED

    def submit(self, activity: Activity) -> None:
        new = [Row(len(self.rows) + i + 1, inbox, activity) for i, inbox in enumerate(activity.inboxes)]
        self.rows.extend(new)
        for row in new:
            self.record(coalesce(self.history(row)))
            assert coalesce(self.history(row)) == (), "coalescing again decided more"

    def claim(self, row: Row) -> bool:
        """Claim and check a row; True when it is now in flight."""
        before = row.state
        row.state = State.SENDING
        check = before_send(self.history(row), row.delivery_id)
        self.record(check.coalesced, claimed=row.delivery_id)
        assert coalesce(self.history(row), claimed=row.delivery_id) == (), "coalescing again decided more"
        if row.state is State.COALESCED:
            return False
        if not check.send:
            assert check.wait_for is not None
            row.state = before
            return False
        return True

    def finish(self, row: Row, outcome: str, arrived: bool) -> None:
        row.attempted = True
        if outcome == "delivered" or (outcome == "timed out" and arrived):
            self.receivers[row.inbox].receive(row.activity)
        row.state = State.DELIVERED if outcome == "delivered" else State.FAILED

    def drain(self) -> None:
        """Everything left is delivered, in delivery id order, as a healthy inbox would see it."""
        for row in self.rows:
            if row.state is State.SENDING:
                self.finish(row, "delivered", arrived=True)
        while unsent := self.unsent():
            for row in unsent:
                if row.state in (State.QUEUED, State.FAILED) and self.claim(row):
                    self.finish(row, "delivered", arrived=True)
            assert len(self.unsent()) < len(unsent), "the ordering check blocked every unsent delivery"

    def unsent(self) -> list[Row]:
        return [r for r in self.rows if r.state in (State.QUEUED, State.FAILED)]


@st.composite
def activities(draw: st.DrawFn) -> list[Activity]:
    """Sensible sequences: authors act on their own notes, nothing after a Delete, Undo of own Likes."""
    objects = OBJECTS[: draw(st.integers(1, len(OBJECTS)))]  # few objects: dense histories
    specs = draw(
        st.lists(
            st.tuples(
                st.sampled_from(KINDS),
                st.sampled_from(ACTORS),
                st.sampled_from(objects),
                st.integers(0, 3),
                st.sets(st.sampled_from(INBOXES), min_size=1),
            ),
            min_size=3,
            max_size=16,
        )
    )
    made: list[Activity] = []
    created: set[str] = set()
    deleted: set[str] = set()
    for kind, actor, subject, pick, inboxes in specs:
        new_id = f"https://l.example/a/{len(made) + 1}"
        to = tuple(sorted(inboxes))
        if kind in ("Create", "Update", "Delete"):
            if subject in deleted or (kind == "Create" and subject in created):
                continue
            (created if kind == "Create" else deleted if kind == "Delete" else set()).add(subject)
            made.append(Activity(new_id, AUTHORS[subject], kind, subject, to))
        elif likes := [a for a in made if a.type == "Like" and a.actor == actor] if kind == "Undo" else []:
            like = likes[-1 - pick % len(likes)]  # the latest Like unless drawn otherwise
            made.append(Activity(new_id, actor, "Undo", like.subject, to, like.id))
        else:  # a Like, or an Undo with nothing to undo yet
            made.append(Activity(new_id, actor, "Like", subject, to))
    return made


@settings(max_examples=200, deadline=None)
@given(activities(), st.data())
def test_receivers_end_up_as_if_every_activity_was_sent_in_order(
    submitted: list[Activity], data: st.DataObject
) -> None:
    queue = Queue()
    to_submit = list(submitted)
    for _ in range(6 * len(submitted)):
        claimable = queue.unsent()
        in_flight = [r for r in queue.rows if r.state is State.SENDING]
        actions = ["submit"] * bool(to_submit) + ["claim"] * bool(claimable) + ["finish"] * bool(in_flight)
        if not actions:
            break
        action = data.draw(st.sampled_from(actions))
        if action == "submit":
            queue.submit(to_submit.pop(0))
        elif action == "claim":
            queue.claim(data.draw(st.sampled_from(claimable)))
        else:
            outcome = data.draw(st.sampled_from(("delivered", "failed", "timed out")))
            queue.finish(data.draw(st.sampled_from(in_flight)), outcome, arrived=data.draw(st.booleans()))
    for activity in to_submit:
        queue.submit(activity)
    queue.drain()

    for inbox in INBOXES:
        expected = Receiver()
        for activity in submitted:
            if inbox in activity.inboxes:
                expected.receive(activity)
        assert queue.receivers[inbox].visible() == expected.visible(), inbox
