"""Remote hosts: health (the circuit breaker's state) and the admin flags paused and blocked.

The rules live in `fedqueue.rules.circuit`; this module only loads and stores `HostHealth` and
hands out probes atomically, so that of many workers exactly one probes a host at a time.

Given up: the transaction that marks a host `unavailable` also ends its unfinished deliveries
`dead` ("host unreachable since ...") and queues their `delivery.dead` events.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from functools import partial

from sqlalchemy import bindparam, case, literal, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.rules.circuit import HostHealth, revived, unreachable_reason
from fedqueue.rules.outages import circuit_line
from fedqueue.rules.states import UNFINISHED, CircuitState, DeliveryState, SignatureKey
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.database import Database
from fedqueue.storage.schema import DELIVERIES, HOSTS
from fedqueue.storage.webhook_events import after_given_up

log = logging.getLogger("fedqueue.hosts")

_FIELDS = tuple(HostHealth.__dataclass_fields__)

HealthChange = Callable[[HostHealth], HostHealth]


@dataclass(frozen=True)
class Ended:
    """A delivery ended dead unsent (`give_up_outstanding`), for the metrics and the log."""

    id: int
    attempts: int
    inbox: str | None
    reason: str


@dataclass(frozen=True)
class Updated:
    """What `HostStore.update` did besides applying the changes.

    `answered`: the hosts found healthy whose change only moved `last_success_at` (written by
    the guarded statement); `ended`: the deliveries ended by the hosts these changes gave up.
    """

    answered: frozenset[str]
    ended: list[Ended]


async def give_up_outstanding(
    database: Database, conn: AsyncConnection, host: str, reason: str, now: datetime
) -> list[Ended]:
    """In `conn`'s transaction: every unfinished delivery to `host` becomes `dead` with `reason`
    and no HTTP status (it is our decision, not the remote's answer; a lease held is dropped, so
    its worker's result is not stored), and their `delivery.dead`
    events are queued; those deliveries. For a blocked host and a given-up one."""
    d = DELIVERIES.c
    killed = await conn.execute(
        update(DELIVERIES)
        .where(d.host == host, d.state.in_(UNFINISHED))
        .values(
            state=DeliveryState.DEAD, last_error=reason, last_status=None, lease_owner=None, lease_until=None
        )
        .returning(d.id, d.attempts, d.inbox)
    )
    ended = [Ended(row.id, row.attempts, row.inbox, reason) for row in killed]
    await after_given_up(database, conn, [e.id for e in ended], now)
    return ended


class HostStore:
    def __init__(self, database: Database) -> None:
        self._db = database
        # Built once, the same SQL for any set of hosts (read at every claim and every flush).
        self._health = select(*[HOSTS.c[name] for name in _FIELDS]).where(
            database.dialect.one_of(HOSTS.c.host, "hosts")
        )

    async def health(self, hosts: Iterable[str]) -> dict[str, HostHealth]:
        """The stored health of each host that has a row (hosts never seen have none): read before
        each batch a worker sends, so on the driver itself (`Database.fetch` says why)."""
        names = sorted(set(hosts))
        if not names:
            return {}
        health = self._db.compiled(self._health)
        rows = health.typed(await self._db.fetch(health, {"hosts": names}))
        return {row[0]: HostHealth(*row) for row in rows}

    async def all(self) -> list[HostHealth]:
        columns = [HOSTS.c[name] for name in _FIELDS]
        async with self._db.reading() as conn:
            rows = (await conn.execute(select(*columns).order_by(HOSTS.c.host))).all()
        return [HostHealth(**row._asdict()) for row in rows]

    async def take_probe(self, host: str, now: datetime, until: datetime) -> bool:
        """Claim the right to send the one probe to a host whose open circuit is due; False if taken."""
        async with self._db.transaction() as conn:
            result = await conn.execute(
                update(HOSTS)
                .where(
                    HOSTS.c.host == host,
                    HOSTS.c.circuit.in_((CircuitState.OPEN, CircuitState.HALF_OPEN)),
                    or_(HOSTS.c.circuit_until.is_(None), HOSTS.c.circuit_until <= now),
                )
                .values(circuit=CircuitState.HALF_OPEN, circuit_until=until)
            )
        return bool(result.rowcount)

    async def probe_now(self, hosts: Iterable[str], now: datetime) -> list[str]:
        """Make the next probe of these hosts due now, if their circuit is open; the hosts changed.

        A verified inbound request shows a failing host may be back. The circuit stays open: only
        a successful probe delivery closes it (mastodon/mastodon#31118), and a probe already out
        (half_open) is left alone. A given-up host is `revived`: no longer unavailable, so
        deliveries to it queue again, the first of them its probe.
        """
        names = sorted(set(hosts))
        if not names:
            return []
        given_up = [name for name, health in (await self.health(names)).items() if health.unavailable]
        if given_up:
            await self.update({name: partial(revived, now=now) for name in given_up})
        async with self._db.transaction() as conn:
            changed = await conn.execute(
                update(HOSTS)
                .where(
                    HOSTS.c.host.in_(names),
                    HOSTS.c.circuit == CircuitState.OPEN,
                    HOSTS.c.circuit_until > now,
                )
                .values(circuit_until=now)
                .returning(HOSTS.c.host)
            )
            return sorted(set(changed.scalars()) | set(given_up))

    async def due_probes(self, now: datetime, limit: int) -> list[str]:
        """Given-up hosts whose daily probe is due (none taken, or a prober's lease ran out)."""
        async with self._db.reading() as conn:
            rows = await conn.execute(
                select(HOSTS.c.host)
                .where(
                    HOSTS.c.unavailable.is_(True),
                    HOSTS.c.blocked.is_(False),
                    or_(HOSTS.c.circuit_until.is_(None), HOSTS.c.circuit_until <= now),
                )
                .order_by(HOSTS.c.circuit_until, HOSTS.c.host)
                .limit(limit)
            )
            return list(rows.scalars())

    async def known_inbox(self, host: str) -> str | None:
        """An inbox of `host` that deliveries went to (its scheme and port are the host's), if any."""
        d = DELIVERIES.c
        async with self._db.reading() as conn:
            found = await conn.execute(
                select(d.inbox)
                .where(d.host == host, d.state == DeliveryState.DEAD, d.inbox.is_not(None))
                .limit(1)
            )
            return found.scalar()

    async def signature_keys(self, hosts: Iterable[str]) -> dict[str, tuple[str, datetime | None]]:
        """The remembered key of each host that has a row: (`SignatureKey` value, when learned)."""
        names = sorted(set(hosts))
        if not names:
            return {}
        query = select(HOSTS.c.host, HOSTS.c.signature_key, HOSTS.c.key_checked_at)
        async with self._db.reading() as conn:
            rows = (await conn.execute(query.where(HOSTS.c.host.in_(names)))).all()
        return {row.host: (row.signature_key, row.key_checked_at) for row in rows}

    async def remember_key(self, host: str, key: str, at: datetime) -> None:
        """Remember the key `host` accepts (`SignatureKey`), learned at `at`; the row is made if
        the host has none yet (its first answer may be recorded after this)."""
        async with self._db.transaction() as conn:
            await conn.execute(self._db.dialect.insert_ignoring_conflicts(HOSTS, ["host"]).values(host=host))
            await conn.execute(
                update(HOSTS).where(HOSTS.c.host == host).values(signature_key=key, key_checked_at=at)
            )

    async def note_listed_key(self, host: str) -> None:
        """`host` lists an Ed25519 key (`SignatureKey.LISTED`), kept only while nothing was learned
        of it yet (`unknown`): what a delivery's answer taught always wins over what a document says."""
        async with self._db.transaction() as conn:
            await conn.execute(self._db.dialect.insert_ignoring_conflicts(HOSTS, ["host"]).values(host=host))
            await conn.execute(
                update(HOSTS)
                .where(HOSTS.c.host == host, HOSTS.c.signature_key == SignatureKey.UNKNOWN)
                .values(signature_key=SignatureKey.LISTED)
            )

    async def update(self, changes: Mapping[str, HealthChange]) -> Updated:
        """Apply each host's change to its current health, safe against other workers doing the same.

        Most changes are a healthy host answering again, which moves only `last_success_at`:
        those are written in one statement guarded by the healthy state, with no lock held
        across round trips, so workers recording answers from the same hosts do not queue
        behind each other. Any other change (and a guarded write that found the host no longer
        healthy) is read and written under row locks taken in host order (PostgreSQL), in one
        transaction. Says which hosts took the guarded write, and which deliveries hosts given up
        ended (`Updated`).
        """
        if not changes:
            return Updated(frozenset(), [])
        current = await self.health(changes)
        successes: dict[str, datetime] = {}
        for name, stored in current.items():
            changed = changes[name](stored)
            at = changed.last_success_at
            if at is not None and _healthy(stored) and changed == replace(stored, last_success_at=at):
                successes[name] = at
        answered: frozenset[str] = frozenset()
        if successes:
            when_at = {name: literal(at, HOSTS.c.last_success_at.type) for name, at in successes.items()}
            async with self._db.transaction() as conn:
                written = await conn.execute(
                    update(HOSTS)
                    .where(HOSTS.c.host.in_(sorted(successes)), *_HEALTHY)
                    .values(last_success_at=case(when_at, value=HOSTS.c.host))
                    .returning(HOSTS.c.host)
                )
                answered = frozenset(written.scalars())
        rest = {name: changes[name] for name in sorted(set(changes) - answered)}
        if not rest:
            return Updated(answered, [])
        return Updated(answered, await self._update_locked(rest, new=set(rest) - set(current)))

    async def _update_locked(self, changes: Mapping[str, HealthChange], new: set[str]) -> list[Ended]:
        """Read-modify-write each host's health under its row lock (host order), in one transaction;
        a host given up has its unfinished deliveries ended in it (`give_up_outstanding`)."""
        names = sorted(changes)
        async with self._db.transaction() as conn:
            if new:
                await conn.execute(
                    self._db.dialect.insert_ignoring_conflicts(HOSTS, ("host",)),
                    [{"host": name} for name in sorted(new)],
                )
            query = self._db.dialect.locked(
                select(*[HOSTS.c[name] for name in _FIELDS])
                .where(HOSTS.c.host.in_(names))
                .order_by(HOSTS.c.host)
            )
            rows = (await conn.execute(query)).all()
            values = []
            given_up: dict[str, str] = {}
            for row in rows:
                stored = HostHealth(**row._asdict())
                changed = changes[row.host](stored)
                if (line := circuit_line(stored, changed, utcnow())) is not None:
                    log.log(*line, extra={"event": "host_circuit", "host": row.host})
                if changed != stored:
                    values.append({f"h_{key}": value for key, value in asdict(changed).items()})
                if changed.unavailable and not stored.unavailable:
                    given_up[row.host] = unreachable_reason(changed)
            if values:
                statement = (
                    update(HOSTS)
                    .where(HOSTS.c.host == bindparam("h_host"))
                    .values({name: bindparam(f"h_{name}") for name in _FIELDS if name != "host"})
                )
                await conn.execute(statement, values)
            ended: list[Ended] = []
            for host, reason in sorted(given_up.items()):
                ended += await give_up_outstanding(self._db, conn, host, reason, utcnow())
            return ended


#: A host in good health: after a success, only its `last_success_at` moves (`circuit.after_success`).
_HEALTHY = (
    HOSTS.c.circuit == CircuitState.CLOSED,
    HOSTS.c.consecutive_failures == 0,
    HOSTS.c.first_failure_at.is_(None),
    HOSTS.c.recovery_allowance == 0,
    HOSTS.c.unavailable.is_(False),
)


def _healthy(health: HostHealth) -> bool:
    return (
        health.circuit == CircuitState.CLOSED
        and health.consecutive_failures == 0
        and health.first_failure_at is None
        and health.recovery_allowance == 0
        and not health.unavailable
    )
