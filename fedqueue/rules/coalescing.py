"""Coalescing: which unsent deliveries are redundant, and which must wait (pure: no I/O).

The rules are in `RULES`, numbered as in the Coalescing table of docs/architecture.md. They read a
*history*: every delivery row to one inbox about one subject, in any state, in submission
order (outbox id).
The storage layer fetches it with one indexed lookup on (inbox, object_id); deliveries of
several inboxes or subjects may be passed at once, they are grouped here and never mixed.

Subject convention: a delivery's subject is the id of its activity's object, except for an
Undo, whose subject is the object of the activity it undoes. Undo(Like X) has subject X like
the Like itself, so an activity, its Undo and everything else about X share one lookup.

The receiver the rules assume behaves like Mastodon: an Update replaces the whole object, a
Delete removes it, and the state left by a Like, Announce, Block, Follow, Add, ... is keyed by
(actor, type, object, target), so sending a second Like of a liked note changes nothing and
an Undo of any Like of X removes the like.

Invariants: an attempted delivery may have arrived (a timeout is no refusal), and no rule
relies on it not having arrived. Decisions only add `coalesced` states; running the rules
again on the result decides nothing new. Ordering is `must_wait_for`'s business.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from fedqueue.rules.states import UNFINISHED, UNSENT, DeliveryState

#: Types whose effect a receiver keeps once per (actor, object, target): a repeat changes nothing.
#: Follow is left out on purpose: a repeated Follow is how a follower repairs a lost follow.
RESTATING_TYPES = frozenset({"Like", "Dislike", "Announce", "Block", "Add", "Remove"})
#: The only types a history of one delivery can be decided on for: an Undo naming itself is
#: cancelled out by itself (rule 4). Every other rule needs a second row (a newer Update, a
#: Delete after what it cancels, an earlier delivered one), and so does `must_wait_for`: a lone
#: delivery of any other type is sent as it is, so the histories of such keys need not be read.
LONE_DECIDABLE_TYPES = frozenset({"Undo"})


@dataclass(frozen=True)
class Delivery:
    """One delivery row as the rules see it.

    `subject`: the activity's object id (for an Undo: the object of the undone activity).
    `attempted`: a POST of it was ever started (attempts > 0), not counting a claim being checked.
    `undoes`: for an Undo, the id of the undone activity. `target`: for Add and Remove, the collection.
    """

    delivery_id: int
    inbox: str
    activity_id: str
    actor: str
    type: str
    subject: str
    state: DeliveryState
    attempted: bool = False
    undoes: str | None = None
    target: str | None = None


@dataclass(frozen=True)
class Coalesced:
    """A decision: do not send this delivery; `by` is the activity that made it redundant."""

    delivery_id: int
    rule: int
    reason: str
    by: str


@dataclass(frozen=True)
class SendCheck:
    """The verdict on a claimed delivery: decisions to record, and what it must wait for."""

    delivery_id: int
    coalesced: tuple[Coalesced, ...]
    wait_for: Delivery | None

    @property
    def send(self) -> bool:
        """Send it now: it was not coalesced and nothing before it is pending."""
        return self.wait_for is None and all(c.delivery_id != self.delivery_id for c in self.coalesced)


class _History:
    """One (inbox, subject) history while the rules run; each rule sees the decisions before it."""

    def __init__(self, entries: Sequence[Delivery], claimed: int | None) -> None:
        self.entries = entries
        self.claimed = claimed
        self.decided: dict[int, Coalesced] = {}

    def unsent(self, e: Delivery) -> bool:
        """Still to be sent and not decided yet: what a rule may coalesce."""
        if e.delivery_id in self.decided:
            return False
        return e.state in UNSENT or (e.state is DeliveryState.SENDING and e.delivery_id == self.claimed)

    def in_flight(self, e: Delivery) -> bool:
        return e.state is DeliveryState.SENDING and e.delivery_id != self.claimed

    def may_have_arrived(self, e: Delivery) -> bool:
        return e.attempted or e.state is DeliveryState.DELIVERED or self.in_flight(e)

    def reaches(self, e: Delivery) -> bool:
        """Delivered, or still to be sent: its effect will be at the inbox, barring failure."""
        return self.unsent(e) or self.in_flight(e) or e.state is DeliveryState.DELIVERED

    def live(self, e: Delivery) -> bool:
        """It may be at the inbox now or later."""
        return self.may_have_arrived(e) or self.reaches(e)


#: A rule yields (delivery to coalesce, reason, id of the activity that made it redundant).
RuleCheck = Callable[[_History], Iterator[tuple[Delivery, str, str]]]


def _same_activity_id(history: _History) -> Iterator[tuple[Delivery, str, str]]:
    # The unique constraint uq_deliveries_outbox_inbox (and outbox.activity_id) already does it.
    return iter(())


def _newer_update(history: _History) -> Iterator[tuple[Delivery, str, str]]:
    newest: dict[str, Delivery] = {}  # actor -> its newest Update that reaches the inbox
    for e in reversed(history.entries):
        if e.type != "Update":
            continue
        newer = newest.get(e.actor)
        if newer is not None and history.unsent(e):
            yield e, f"superseded by newer Update {newer.activity_id}", newer.activity_id
        elif history.reaches(e):
            newest.setdefault(e.actor, e)


def _delete(history: _History) -> Iterator[tuple[Delivery, str, str]]:
    for i, delete in enumerate(history.entries):
        if delete.type != "Delete" or not history.reaches(delete):
            continue
        earlier = [e for e in history.entries[:i] if e.actor == delete.actor and history.unsent(e)]
        cancelled = [e for e in earlier if e.type in ("Create", "Update")]
        for e in cancelled:
            yield e, f"cancelled out by Delete {delete.activity_id}", delete.activity_id
        # The Delete is dropped only with the unsent Create it cancels: the object never left
        # for this inbox. An Update alone proves nothing: its Create may have been delivered and
        # its row pruned since (retention), so the history cannot show that it arrived.
        # Anything about X that may have arrived (from any actor) may have left X at the inbox.
        creates = [e for e in cancelled if e.type == "Create"]
        nothing_arrived = not any(history.may_have_arrived(e) for e in history.entries)
        if creates and history.unsent(delete) and nothing_arrived:
            yield delete, f"cancels out unsent Create {creates[0].activity_id}", creates[0].activity_id


def _undo(history: _History) -> Iterator[tuple[Delivery, str, str]]:
    """The Undo itself is always sent: receivers remove "the like of this note" whichever Like
    made it, and an earlier one may have been delivered and its row pruned since (retention),
    so the history cannot prove that nothing alike reached the inbox."""
    position = {e.activity_id: i for i, e in enumerate(history.entries)}
    for i, undo in enumerate(history.entries):
        if undo.type != "Undo" or undo.undoes is None or not history.reaches(undo):
            continue
        j = position.get(undo.undoes)
        if j is None or j > i:
            continue
        undone = history.entries[j]
        if undone.actor == undo.actor and history.unsent(undone):
            yield undone, f"cancelled out by Undo {undo.activity_id}", undo.activity_id


def _redundant_against_history(history: _History) -> Iterator[tuple[Delivery, str, str]]:
    last_live: dict[str, Delivery] = {}  # actor -> its last activity that may be at the inbox
    for e in history.entries:
        previous = last_live.get(e.actor)
        if (
            e.type in RESTATING_TYPES
            and history.unsent(e)
            and previous is not None
            and previous.state is DeliveryState.DELIVERED
            and (previous.type, previous.target) == (e.type, e.target)
        ):
            yield e, f"inbox already has it from {e.type} {previous.activity_id}", previous.activity_id
        if history.live(e):
            last_live[e.actor] = e


@dataclass(frozen=True)
class Rule:
    """One numbered coalescing rule."""

    number: int
    name: str
    description: str
    check: RuleCheck


#: The rules, in the order they run; a delivery is coalesced by the first rule that finds it redundant.
RULES: tuple[Rule, ...] = (
    Rule(
        1,
        "Same activity id",
        "One delivery per activity and inbox; the deliveries table's unique constraint enforces it.",
        _same_activity_id,
    ),
    Rule(
        2,
        "Newer Update",
        "An unsent Update of X is superseded by a newer Update of X from the same actor; "
        "only the newest is sent.",
        _newer_update,
    ),
    Rule(
        3,
        "Delete",
        "A Delete of X cancels the unsent Creates and Updates of X before it from the same actor; "
        "the Delete is dropped too if it cancelled an unsent Create and nothing about X was ever "
        "attempted to the inbox.",
        _delete,
    ),
    Rule(
        4,
        "Undo",
        "An Undo of A cancels A while A is unsent; the Undo is still sent, since an earlier A-like "
        "activity (same actor, type, target) may have reached the inbox and its row been pruned.",
        _undo,
    ),
    Rule(
        5,
        "Redundant against history",
        "A Like, Dislike, Announce, Block, Add or Remove is dropped when the last activity from its "
        "actor about X that may reach the inbox was delivered and has the same type and target.",
        _redundant_against_history,
    ),
)


def _histories(deliveries: Iterable[Delivery]) -> Iterator[list[Delivery]]:
    grouped: dict[tuple[str, str], list[Delivery]] = {}
    for d in deliveries:
        grouped.setdefault((d.inbox, d.subject), []).append(d)
    return iter(grouped.values())


def coalesce(deliveries: Iterable[Delivery], *, claimed: int | None = None) -> tuple[Coalesced, ...]:
    """The unsent deliveries made redundant, by `RULES`; `claimed` (state `sending`) counts as unsent.

    Run it after a new activity's deliveries are inserted and, with `claimed`, before a claimed
    delivery is sent (`before_send` does that). Record every decision, not only the claimed one's.
    """
    decisions: list[Coalesced] = []
    for entries in _histories(deliveries):
        history = _History(entries, claimed)
        for rule in RULES:
            for delivery, reason, by in rule.check(history):
                history.decided[delivery.delivery_id] = Coalesced(
                    delivery.delivery_id, rule.number, reason, by
                )
        decisions.extend(history.decided.values())
    return tuple(decisions)


def must_wait_for(deliveries: Sequence[Delivery], delivery_id: int) -> Delivery | None:
    """The earliest pending delivery that must reach the inbox before `delivery_id`, else None.

    That is one to the same inbox, from the same actor, about the same subject, submitted before
    it and still queued, failed or sending. Delivered, dead and coalesced ones never hold it back.
    """
    index = next((i for i, d in enumerate(deliveries) if d.delivery_id == delivery_id), None)
    if index is None:
        raise ValueError(f"delivery {delivery_id} is not in the history given")
    key = (deliveries[index].inbox, deliveries[index].actor, deliveries[index].subject)
    earlier = deliveries[:index]
    return next((d for d in earlier if (d.inbox, d.actor, d.subject) == key and d.state in UNFINISHED), None)


def before_send(deliveries: Iterable[Delivery], delivery_id: int) -> SendCheck:
    """Coalesce with `delivery_id` claimed, then check ordering against what is left to send."""
    history = tuple(deliveries)
    decisions = coalesce(history, claimed=delivery_id)
    decided = {c.delivery_id for c in decisions}
    if delivery_id in decided:
        return SendCheck(delivery_id, decisions, None)
    remaining = [
        replace(d, state=DeliveryState.COALESCED) if d.delivery_id in decided else d for d in history
    ]
    return SendCheck(delivery_id, decisions, must_wait_for(remaining, delivery_id))
