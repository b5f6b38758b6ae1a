"""The states of deliveries, outbox rows and followers, and the named sets of them (pure).

This is the one place a state's name is spelled; storage, the flows and the edges import it.
The values are what the database stores and what the outside contract shows (the contract the
outside test suites drive fedqueue through).

Deliveries (`deliveries.state`, `DeliveryState`), with the code that makes each move::

    fanout ──────────────────────────▶ queued, or dead (inbox gone, host given up)
                                       storage/deliveries.enqueue
    queued, failed ──due, claimed────▶ sending                          storage/deliveries.claim
    sending ──lease ran out, claimed─▶ sending (its worker is gone)     storage/deliveries.claim
    sending ──the inbox answered─────▶ delivered | failed (retried later) | dead (given up, refused)
                                       outbound/record, storage/deliveries.record
    sending ──given back unsent──────▶ queued (never attempted) | failed
                                       storage/deliveries.release (shutdown, host held back),
                                       storage/histories.wait (an earlier one must arrive first),
                                       storage/deliveries.readdress (a recipient's inbox found)
    queued, failed, sending ──redundant──▶ coalesced (`sending`: only by the worker holding it)
                                       outbound/coalesce_rules, storage/histories.decide
    queued, sending, failed ──▶ dead   admin cancel (storage/admin), host blocked or given up
                                       (storage/hosts.give_up_outstanding)
    queued, failed ──▶ dead            the recipient deleted itself (storage/followers.depart),
                                       our actor deleted (storage/actor_lifecycle.delete)
    queued, failed, dead ──admin retry──▶ queued (due now, a fresh attempt budget; storage/admin)

`delivered`, `dead` and `coalesced` are `FINISHED`: only an admin retry moves a dead one again
(a retry of all dead ones leaves the cancelled ones). An activity is complete when none of its
deliveries is `UNFINISHED` (queued, sending or failed).

Outbox rows (`outbox.state`, `OutboxState`)::

    pending ──claimed──▶ expanding ──▶ expanded (its deliveries written)
                                   ──▶ rejected (refused, e.g. past max_recipients_per_activity,
                                                 or expansion failed too often)
                                   ──▶ duplicate (its activity id was submitted before)
    expanding ──lease ran out, or retried after a backoff──▶ expanding (claimed again)
    expanding ──given back unplanned, the claim uncounted──▶ pending
                                       storage/outbox.give_back (more rows wait for their
                                       recipients' fetches than a worker holds: outbound/fanout)
    pending ──its actor deleted──▶ rejected

Followers (`followers.state`, `FollowerState`): `pending` until approved, then `accepted`.

Relays (`relays.state`, `RelayState`): `pending` until the relay's Accept, then `accepted`, or
`rejected` by its Reject.

Host circuits (`hosts.circuit`, `CircuitState`): `closed`, `open`, `half_open`; the moves are in
rules/circuit.

Inbox answers (`InboxAnswer`): what became of one inbound activity, the `status` of the inbox's
202 answer (inbound/receive).

Lanes (`deliveries.lane`, `Lane`): set once at enqueue (outbound/lane_rules), never moved; a claim
takes due rows of a lower lane before any of a higher one (storage/deliveries.claim).
"""

from __future__ import annotations

from enum import IntEnum, StrEnum


class DeliveryState(StrEnum):
    """The `deliveries.state` values, in the order admin views and metrics list them."""

    QUEUED = "queued"
    SENDING = "sending"
    DELIVERED = "delivered"
    FAILED = "failed"
    DEAD = "dead"
    COALESCED = "coalesced"


#: Every delivery state, in the order of `DeliveryState`.
DELIVERY_STATES: tuple[DeliveryState, ...] = tuple(DeliveryState)
#: Waiting to be sent: new, or failed and waiting to retry; due once `next_attempt_at` passes.
UNSENT: tuple[DeliveryState, ...] = (DeliveryState.QUEUED, DeliveryState.FAILED)
#: Not settled yet: waiting or in flight. An activity is complete when none is in these.
UNFINISHED: tuple[DeliveryState, ...] = (DeliveryState.QUEUED, DeliveryState.SENDING, DeliveryState.FAILED)
#: Settled for good (unless an admin retries a dead one); retention prunes these rows.
FINISHED: tuple[DeliveryState, ...] = (DeliveryState.DELIVERED, DeliveryState.DEAD, DeliveryState.COALESCED)
#: States an admin retry may start from: anything not finished well and not in flight.
RETRYABLE: tuple[DeliveryState, ...] = (DeliveryState.QUEUED, DeliveryState.FAILED, DeliveryState.DEAD)
#: States the console offers a Retry button for: not delivered, and tried or given up. `RETRYABLE`
#: (what a retry accepts, the API's and the CLI's) adds `queued`, never tried: a retry only makes it due now.
RETRY_OFFERED: tuple[DeliveryState, ...] = (DeliveryState.FAILED, DeliveryState.DEAD)
#: States an admin cancel may start from; a `sending` row loses its lease, its result is dropped.
CANCELLABLE = UNFINISHED
#: Status pages: failing and in-flight first, then the rest.
STATUS_ORDER: tuple[DeliveryState, ...] = (
    DeliveryState.FAILED,
    DeliveryState.SENDING,
    DeliveryState.QUEUED,
    DeliveryState.DEAD,
    DeliveryState.DELIVERED,
    DeliveryState.COALESCED,
)


def is_complete(counts: dict[str, int]) -> bool:
    """True when no delivery in `counts` (state -> number) is queued, sending or failed."""
    return not any(counts.get(state, 0) for state in UNFINISHED)


class OutboxState(StrEnum):
    """The `outbox.state` values."""

    PENDING = "pending"
    EXPANDING = "expanding"
    EXPANDED = "expanded"
    REJECTED = "rejected"
    DUPLICATE = "duplicate"


#: Not expanded yet: waiting for a worker, or being expanded.
BACKLOG: tuple[OutboxState, ...] = (OutboxState.PENDING, OutboxState.EXPANDING)
#: Done with: its deliveries written, or none will ever be.
SETTLED: tuple[OutboxState, ...] = (OutboxState.EXPANDED, OutboxState.REJECTED, OutboxState.DUPLICATE)
#: Never published: nothing of it is in the actor's outbox collection.
UNPUBLISHED: tuple[OutboxState, ...] = (OutboxState.REJECTED, OutboxState.DUPLICATE)


class FollowerState(StrEnum):
    """The `followers.state` values: a follow waits for approval, or is accepted."""

    PENDING = "pending"
    ACCEPTED = "accepted"


class RelayState(StrEnum):
    """The `relays.state` values: our Follow of a relay waits for its Accept or Reject."""

    PENDING = "pending"
    ACCEPTED = "accepted"
    REJECTED = "rejected"


class CircuitState(StrEnum):
    """The `hosts.circuit` values: a host's circuit breaker (rules/circuit)."""

    CLOSED = "closed"
    HALF_OPEN = "half_open"
    OPEN = "open"


#: Every circuit state, in the order the console and the metrics list them.
CIRCUIT_STATES: tuple[CircuitState, ...] = tuple(CircuitState)
#: Not closed: the host's deliveries wait for a probe, or for the probe out to come back.
TRIPPED: tuple[CircuitState, ...] = (CircuitState.OPEN, CircuitState.HALF_OPEN)


class SignatureKey(StrEnum):
    """The `hosts.signature_key` values: the key a host accepts deliveries signed with
    (`rules/key_choice`), learned per host like its signature scheme."""

    UNKNOWN = "unknown"
    #: Its actors list an Ed25519 Multikey (FEP-521a) but no delivery has tried one yet: what
    #: the peer says, worth one Ed25519 knock under `ed25519-where-learned`.
    LISTED = "listed"
    ED25519 = "ed25519"
    RSA = "rsa"


class DereferenceOutcome(StrEnum):
    """What became of an inbox entry's object given by its id (`inbound/dereference`): fetched and
    stored, a fetch that failed (its reason kept on the entry as `object_error`), or none made
    (refused: off its actor's origin, or forbidden by the address guard)."""

    FETCHED = "fetched"
    FAILED = "failed"
    REFUSED = "refused"


class InboxAnswer(StrEnum):
    """What became of one inbound activity: the `status` of the inbox's 202 answer.

    Only `accepted` stored something new.
    """

    ACCEPTED = "accepted"
    DUPLICATE = "duplicate"
    #: A gone actor's self-Delete (inbound/gone): its follows and deliveries end.
    GONE_ACTOR = "gone_actor"
    #: A self-Delete whose actor's own document does not say it is gone: nothing changes.
    UNPROVEN_DEPARTURE = "unproven_departure"
    #: A Create or Update of an object its actor deleted lately (a tombstone): not stored.
    DELETED_OBJECT = "deleted_object"


class Lane(IntEnum):
    """The `deliveries.lane` values: a claim serves a lower lane first, then due order within it."""

    INTERACTIVE = 0
    NORMAL = 1
    BULK = 2


#: Every lane, in claim order.
LANES: tuple[Lane, ...] = tuple(Lane)
