"""What one leased outbox row becomes (`Plan`): its facts, its targets and its lane, by reads only.

`Fanout` asks a `Planner` for each claimed row's plan. Its recipients' actors are looked up in
the cache first; those not cached yet are fetched beside the worker's rounds, within the row's
fetch budget (`addressing.fetch_budget`): until then the row is held (`HoldForFetches`).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from fedqueue.outbound.coalescer import Coalescer
from fedqueue.outbound.context import WorkerContext
from fedqueue.outbound.integrity_proofs import prove, wants_proof, without_early_signature
from fedqueue.outbound.ld_signing import sign_public, wants_signature, with_security_context
from fedqueue.outbound.recipient_fetches import ACTOR_FETCH_CONCURRENCY, Unusable, unusable
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.rules.address_guard import host_of, hosts_of
from fedqueue.rules.addressing import (
    REACHES_EARLIER,
    FetchBudget,
    InboxChoice,
    check_recipient_cap,
    fetch_budget,
    is_public,
    recipient_count,
    recipients,
    widened,
    with_earlier,
)
from fedqueue.rules.errors import FedqueueError, InvalidInput
from fedqueue.rules.intake import (
    ActivityFacts,
    dumps,
    normalize,
    parse_activity,
    parse_inboxes,
    subject_of,
)
from fedqueue.rules.lanes import is_actor_delete, is_direct, lane_of
from fedqueue.rules.states import Lane
from fedqueue.rules.urls import Urls
from fedqueue.storage import Accepted, OutboxEntry, Target

#: Recipients given up past the fetch budget: uri -> (limit, reason) (`FetchBudget.refused`).
Refused = dict[str, tuple[str, str]]


@dataclass
class Plan:
    """One leased outbox row, ready to store: facts, targets, lane, and (a raw row) its accepted activity.

    `recipients`: the actors it addresses, each follower once, as the outbox POST counts them
    (`addressing.recipient_count`, plus the relays); None for a row that names its inboxes.
    """

    entry: OutboxEntry
    facts: ActivityFacts
    accepted: Accepted | None
    targets: list[Target]
    recipients: int | None
    lane: Lane = Lane.NORMAL

    @property
    def live_inboxes(self) -> list[str]:
        """The inboxes that get a queued delivery (not dead from the start)."""
        return [t.inbox for t in self.targets if t.dead_reason is None and t.inbox is not None]


class HoldForFetches(FedqueueError):
    """A row's recipients need fetching first: it is held until they are (`RecipientFetches`)."""

    def __init__(self, budget: FetchBudget) -> None:
        super().__init__(f"{len(budget.allowed)} recipients to fetch first")
        self.budget = budget


class Planner:
    """Plans leased rows (`plan`); remembers the local actors seen to exist and not deleted."""

    def __init__(self, context: WorkerContext, directory: RemoteDirectory, coalescer: Coalescer) -> None:
        self._settings = context.settings
        self._store = context.store
        self._keyring = context.keyring
        self._clock = context.clock
        self._metrics = context.metrics
        self._directory = directory
        self._coalescer = coalescer
        self._urls = Urls(context.settings.base_url)
        #: Local actors seen to exist and not deleted. A deletion rejects the actor's pending rows
        #: in its transaction; a row an app INSERTs for it later is refused (`rejected`, "actor
        #: ... was deleted"): the actors of each claimed group that are known here are checked
        #: again first, in one statement (`forget_deleted`).
        self._known_actors: set[str] = set()

    async def plan(self, entry: OutboxEntry, earlier: list[Plan], refused: Refused | None) -> Plan:
        """What one leased row becomes: its facts and targets (reads only; InvalidInput: reject it).

        `earlier` are this round's plans before it; `refused`, its recipients given up past the
        fetch budget when it was held for the others' fetches (None: not held).
        """
        activity = parse_activity(entry.activity)
        if entry.activity_id is not None and entry.activity_type is not None:
            _subject, undoes, target = subject_of(activity)
            facts = ActivityFacts(
                entry.actor, entry.activity_id, entry.activity_type, entry.object_id, undoes, target
            )
            normalized = None
        else:
            await self._local_actor(entry.actor)
            activity, facts = normalize(activity, entry.actor, self._urls, lambda: secrets.token_urlsafe(16))
            normalized = dumps(activity)
        inboxes = None if entry.inboxes is None else parse_inboxes(entry.inboxes)
        facts = await self._coalescer.resolve_undo(facts, [p.facts for p in earlier])
        targets, recipients = await self._targets(entry, activity, inboxes, facts, refused)
        if self._settings.object_integrity_proofs:
            ld_signing = self._settings.ld_sign_public_activities
            activity = without_early_signature(activity, entry.forwarded, ld_signing)
        ld_signs = self._settings.ld_sign_public_activities and wants_signature(activity, entry.forwarded)
        if self._settings.object_integrity_proofs and wants_proof(activity, entry.forwarded):
            # First, with the LD signature's context in: the LD signature covers the proof.
            activity = await self._proved(
                entry.actor, with_security_context(activity) if ld_signs else activity
            )
            normalized = dumps(activity)
        if ld_signs:
            activity = await self._ld_signed(entry.actor, activity)
            normalized = dumps(activity)
        # A raw row gets its facts stored; a validated one, its subject if that changed: an Undo
        # naming the undone activity by id gets that activity's object, as its deliveries do
        # (`CoalescingStore.history` looks subjects up on the outbox rows). A signed one, its
        # proof and signature: every delivery sends the stored activity.
        accepted = (
            None
            if normalized is None and facts.object_id == entry.object_id
            else Accepted(entry.id, facts, normalized or entry.activity)
        )
        lane = self._lane(entry, activity, facts, len(targets))
        return Plan(entry, facts, accepted, targets, recipients, lane)

    async def _proved(self, actor: str, activity: dict[str, Any]) -> dict[str, Any]:
        """The activity with its actor's FEP-8b32 proof, made once for all its deliveries."""
        proved, outcome = prove(activity, await self._keyring.identity(actor), self._clock())
        self._metrics.proofs.made(outcome)
        return proved

    async def _ld_signed(self, actor: str, activity: dict[str, Any]) -> dict[str, Any]:
        """The public activity with its actor's LD signature, made once for all its deliveries."""
        identity = await self._keyring.identity(actor)
        signed, outcome = await sign_public(
            activity, identity, self._clock(), self._settings.ld_sign_max_values
        )
        self._metrics.ld_signed(outcome)
        return signed

    def _lane(self, entry: OutboxEntry, activity: dict[str, Any], facts: ActivityFacts, inboxes: int) -> Lane:
        """The lane all of this activity's deliveries wait in (`lane_rules`)."""
        actor_uri = self._urls.actor(entry.actor)
        wanted = recipients(activity, self._urls.followers(entry.actor), actor_uri)
        return lane_of(
            facts.activity_type,
            direct=not entry.forwarded and is_direct(activity, wanted),
            actor_delete=is_actor_delete(activity, actor_uri),
            inboxes=inboxes,
            threshold=self._settings.bulk_lane_threshold,
        )

    async def forget_deleted(self, actors: set[str]) -> None:
        """Forget the known actors among `actors` that were deleted since (by any process)."""
        self._known_actors -= await self._store.actors.deleted_among(actors & self._known_actors)

    async def _local_actor(self, name: str) -> None:
        """InvalidInput unless `name` is a local actor (remembered per worker once seen)."""
        if name in self._known_actors:
            return
        try:
            actor = await self._store.actors.get(name)
        except FedqueueError:
            raise InvalidInput(f"no local actor named {name!r}") from None
        if actor.deleted_at is not None:
            raise InvalidInput(f"actor {name!r} was deleted")
        self._known_actors.add(name)

    async def _targets(
        self,
        entry: OutboxEntry,
        activity: dict[str, Any],
        inboxes: list[str] | None,
        facts: ActivityFacts,
        refused: Refused | None,
    ) -> tuple[list[Target], int | None]:
        """The row's `inboxes` if it names them (parsed), else the activity's addressees' inboxes;
        and how many actors those are (`Plan.recipients`).

        A Delete or Update of an object also goes to every inbox an earlier activity about it
        went to; when none is kept any more, to the followers and the embedded object's addressees.
        """
        if inboxes is not None:
            return targets_of(inboxes), None
        followers_uri = self._urls.followers(entry.actor)
        wanted = recipients(activity, followers_uri, self._urls.actor(entry.actor))
        choices: list[InboxChoice] = []
        earlier: list[str] = []
        if entry.forwarded:
            # Forwarded (AP 7.1.2): to the actor's followers only; the other addressees had it already.
            wanted = replace(wanted, followers=True, actors=())
        elif facts.activity_type in REACHES_EARLIER and facts.object_id is not None:
            found = await self._store.audience.earlier_inboxes(entry.actor, facts.object_id, entry.id)
            if found is None:
                wanted = widened(wanted, activity.get("object"), followers_uri, self._urls.actor(entry.actor))
            earlier = found or []
        check_recipient_cap(wanted, self._settings.max_recipients_per_activity)
        fetched, failed = await self._resolve(wanted.actors, refused)
        followers = await self._store.audience.follower_inboxes(entry.actor) if wanted.followers else []
        choices.extend(InboxChoice(inbox, shared) for inbox, shared in followers)
        choices.extend(fetched)
        relays: list[str] = []
        if is_public(activity) and not entry.forwarded:  # FEP-ae0c: public ones go to the relays too
            relays = await self._store.relays.accepted_inboxes()
            choices.extend(InboxChoice(inbox, None) for inbox in relays)
        targets = targets_of(with_earlier(choices, earlier))
        # No inbox is known for these: the row names the actor, and a retry fetches it again.
        unknown = [
            Target(None, host_of(uri), failure.reason, recipient=uri, detail=failure.detail)
            for uri, failure in failed
        ]
        return targets + unknown, recipient_count(wanted, len(followers)) + len(relays)

    async def _resolve(
        self, uris: tuple[str, ...], refused: Refused | None
    ) -> tuple[list[InboxChoice], list[tuple[str, Unusable]]]:
        """The recipients' inboxes, once none of them needs a fetch any more; those given up
        past the fetch budget among the failures. HoldForFetches if some need fetching first."""
        if refused is None and uris:
            cached = await self._store.audience.cached_actors(uris, self._clock())
            uncached = [uri for uri in uris if uri not in cached]
            settings = self._settings
            budget = fetch_budget(
                uncached,
                hosts_of(uncached),
                settings.max_recipient_fetches_per_activity,
                settings.max_recipient_fetches_per_host,
            )
            if budget.allowed:
                raise HoldForFetches(budget)
            for limit, _reason in budget.refused.values():
                self._metrics.recipient_fetch_refused(limit)
            refused = budget.refused
        refused = refused or {}
        fetched, failed = await self._fetch_actors(tuple(uri for uri in uris if uri not in refused))
        return fetched, failed + [(uri, Unusable(reason, reason)) for uri, (_, reason) in refused.items()]

    async def _fetch_actors(
        self, uris: tuple[str, ...]
    ) -> tuple[list[InboxChoice], list[tuple[str, Unusable]]]:
        """Each addressed actor's inboxes (signed by the instance actor, cached); failures with a reason."""
        if not uris:
            return [], []
        signer = await self._keyring.instance()
        limit = asyncio.Semaphore(ACTOR_FETCH_CONCURRENCY)

        async def fetch(uri: str) -> InboxChoice | Unusable:
            async with limit:
                try:
                    found = await self._directory.actor(uri, signer)
                except Exception as exc:
                    return unusable(uri, exc, self._settings.total_timeout_seconds, self._metrics)
                return InboxChoice(found.inbox, found.shared_inbox)

        answers = await asyncio.gather(*(fetch(uri) for uri in uris))
        fetched = [answer for answer in answers if isinstance(answer, InboxChoice)]
        failed = [
            (uri, answer) for uri, answer in zip(uris, answers, strict=True) if isinstance(answer, Unusable)
        ]
        return fetched, failed


def targets_of(inboxes: Iterable[str]) -> list[Target]:
    """A target per inbox, each distinct origin's host worked out once (`hosts_of`)."""
    listed = list(inboxes)
    return [Target(inbox, host) for inbox, host in zip(listed, hosts_of(listed), strict=True)]
