"""Who an activity goes to (pure): recipients from its audience fields, inboxes from recipients.

CONTRACT.md, Addressing: recipients come from to, cc, bto, bcc and audience; bto and bcc are
stripped before sending; the public collection is no recipient; the sender's own followers
collection expands to its followers; a sharedInbox is used where several recipients share it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from fedqueue.rules.activitystreams import PUBLIC
from fedqueue.rules.errors import InvalidInput

AUDIENCE_FIELDS = ("to", "cc", "bto", "bcc", "audience")
HIDDEN_FIELDS = ("bto", "bcc")
PUBLIC_FORMS = frozenset({PUBLIC, "as:Public", "Public"})
#: Activities that also go to every inbox an earlier activity about their object went to.
REACHES_EARLIER = frozenset({"Delete", "Update"})
#: Said on the outbox's answer and the status document when an activity goes nowhere.
NO_RECIPIENTS = (
    "0 recipients: the activity addresses no one but the public collection, the sender itself "
    "or followers it does not have; nothing will be delivered"
)


@dataclass(frozen=True)
class Recipients:
    """The audience of an activity: whether it addresses the sender's followers, and other URIs."""

    followers: bool
    actors: tuple[str, ...]


@dataclass(frozen=True)
class InboxChoice:
    """One recipient's inboxes, as its actor document (or follower row) names them."""

    inbox: str
    shared_inbox: str | None


def _uris(value: Any) -> Iterable[str]:
    items = value if isinstance(value, list) else [value]
    for item in items:
        if isinstance(item, str):
            yield item
        elif isinstance(item, dict) and isinstance(item.get("id"), str):
            yield item["id"]


def recipients(activity: dict[str, Any], followers_uri: str, sender_uri: str) -> Recipients:
    """The recipients of `activity`, in first-seen order, without Public, the sender and repeats."""
    seen: dict[str, None] = {}
    followers = False
    for name in AUDIENCE_FIELDS:
        for uri in _uris(activity.get(name)):
            if uri in PUBLIC_FORMS or uri == sender_uri:
                continue
            if uri == followers_uri:
                followers = True
                continue
            seen.setdefault(uri, None)
    return Recipients(followers=followers, actors=tuple(seen))


def recipient_count(wanted: Recipients, follower_count: int) -> int:
    """How many actors an activity addresses: each other actor, and each follower if followers are."""
    return len(wanted.actors) + (follower_count if wanted.followers else 0)


class TooManyRecipients(InvalidInput):
    """An activity names more recipients than `max_recipients_per_activity` allows."""


def check_recipient_cap(wanted: Recipients, cap: int) -> None:
    """TooManyRecipients (one line, the count and the cap) if `wanted` names more than `cap` actors.

    Counted as fan-out sees them: after repeats, the public collection, the sender and its own
    followers collection are left out (`recipients`); the followers themselves are not counted.
    """
    named = len(wanted.actors)
    if named > cap:
        raise TooManyRecipients(
            f"the activity names {named:,} recipients; at most {cap:,} are allowed"
            " (max_recipients_per_activity)"
        )


@dataclass(frozen=True)
class FetchBudget:
    """Which of one activity's uncached recipients fan-out may fetch; the rest, each with the
    limit it went past (`activity` or `host`) and a one-line reason."""

    allowed: tuple[str, ...]
    refused: dict[str, tuple[str, str]]


def fetch_budget(
    uncached: Sequence[str], hosts: Sequence[str], per_activity: int, per_host: int
) -> FetchBudget:
    """Split `uncached` recipients (their `hosts` beside them) into those fetched, in order, at
    most `per_activity` in all and `per_host` from one host, and those given up, each with why."""
    taken: Counter[str] = Counter()
    allowed: list[str] = []
    refused: dict[str, tuple[str, str]] = {}
    for uri, host in zip(uncached, hosts, strict=True):
        if len(allowed) >= per_activity:
            refused[uri] = (
                "activity",
                f"recipient {uri[:200]} not fetched: this activity's recipients needed more than"
                f" {per_activity:,} actor fetches (max_recipient_fetches_per_activity)",
            )
        elif taken[host] >= per_host:
            refused[uri] = (
                "host",
                f"recipient {uri[:200]} not fetched: this activity's recipients needed more than"
                f" {per_host:,} actor fetches from {host[:100]} (max_recipient_fetches_per_host)",
            )
        else:
            taken[host] += 1
            allowed.append(uri)
    return FetchBudget(tuple(allowed), refused)


def addresses(activity: dict[str, Any], uri: str) -> bool:
    """Whether `uri` is among the activity's audience (to, cc, bto, bcc, audience)."""
    return any(uri in _uris(activity.get(name)) for name in AUDIENCE_FIELDS)


def strip_hidden(activity: dict[str, Any]) -> dict[str, Any]:
    """A copy of `activity` without bto and bcc, at the top and on an embedded object."""
    stripped = {key: value for key, value in activity.items() if key not in HIDDEN_FIELDS}
    inner = stripped.get("object")
    if isinstance(inner, dict):
        stripped["object"] = {key: value for key, value in inner.items() if key not in HIDDEN_FIELDS}
    return stripped


def choose_inboxes(choices: Sequence[InboxChoice]) -> list[str]:
    """Distinct inboxes: a sharedInbox where two or more recipients share it, else each own inbox."""
    sharing = Counter(choice.shared_inbox for choice in choices if choice.shared_inbox)
    chosen: dict[str, None] = {}
    for choice in choices:
        shared = choice.shared_inbox
        chosen.setdefault(shared if shared and sharing[shared] >= 2 else choice.inbox, None)
    return list(chosen)


def is_public(activity: dict[str, Any]) -> bool:
    """Whether `activity` is addressed to the public collection (in to, cc or audience)."""
    return any(uri in PUBLIC_FORMS for name in ("to", "cc", "audience") for uri in _uris(activity.get(name)))


def widened(wanted: Recipients, inner: Any, followers_uri: str, sender_uri: str) -> Recipients:
    """`wanted` plus the followers and the embedded object's addressees: a Delete or Update of an
    object whose earlier recipients are no longer known."""
    extra = recipients(inner, followers_uri, sender_uri) if isinstance(inner, dict) else None
    actors = dict.fromkeys(wanted.actors + (extra.actors if extra else ()))
    return Recipients(followers=True, actors=tuple(actors))


def with_earlier(choices: Sequence[InboxChoice], earlier: Sequence[str]) -> list[str]:
    """`choose_inboxes(choices)` plus the `earlier` inboxes, once each; a recipient whose shared
    inbox is among the earlier ones gets it there rather than at its own inbox as well."""
    known = set(earlier)
    picked = [
        InboxChoice(choice.shared_inbox, choice.shared_inbox) if choice.shared_inbox in known else choice
        for choice in choices
    ]
    return list(dict.fromkeys([*choose_inboxes(picked), *earlier]))
