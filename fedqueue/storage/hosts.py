"""Remote hosts: health (the circuit breaker's state) and the admin flags paused and blocked.

The rules live in `fedqueue.outbound.circuit`; this module only loads and stores `HostHealth` and
hands out probes atomically, so that of many workers exactly one probes a host at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict
from datetime import datetime

from sqlalchemy import or_, select, update

from fedqueue.outbound.circuit import HALF_OPEN, OPEN, HostHealth
from fedqueue.storage.database import Database
from fedqueue.storage.tables import HostRow
from fedqueue.storage.upsert import insert_ignoring_conflicts

_hosts = HostRow.__table__  # type: ignore[attr-defined]
_FIELDS = tuple(HostHealth.__dataclass_fields__)

HealthChange = Callable[[HostHealth], HostHealth]


class HostStore:
    def __init__(self, database: Database) -> None:
        self._db = database

    async def health(self, hosts: Iterable[str]) -> dict[str, HostHealth]:
        """The stored health of each host that has a row (hosts never seen have none)."""
        names = sorted(set(hosts))
        if not names:
            return {}
        columns = [_hosts.c[name] for name in _FIELDS]
        async with self._db.reading() as conn:
            rows = (await conn.execute(select(*columns).where(_hosts.c.host.in_(names)))).all()
        return {row.host: HostHealth(**row._asdict()) for row in rows}

    async def all(self) -> list[HostHealth]:
        columns = [_hosts.c[name] for name in _FIELDS]
        async with self._db.reading() as conn:
            rows = (await conn.execute(select(*columns).order_by(_hosts.c.host))).all()
        return [HostHealth(**row._asdict()) for row in rows]

    async def take_probe(self, host: str, now: datetime, until: datetime) -> bool:
        """Claim the right to send the one probe to a host whose open circuit is due; False if taken."""
        async with self._db.transaction() as conn:
            result = await conn.execute(
                update(_hosts)
                .where(
                    _hosts.c.host == host,
                    _hosts.c.circuit.in_((OPEN, HALF_OPEN)),
                    or_(_hosts.c.circuit_until.is_(None), _hosts.c.circuit_until <= now),
                )
                .values(circuit=HALF_OPEN, circuit_until=until)
            )
        return bool(result.rowcount)

    async def probe_now(self, hosts: Iterable[str], now: datetime) -> list[str]:
        """Make the next probe of these hosts due now, if their circuit is open; the hosts changed.

        A verified inbound request shows a failing host may be back. The circuit stays open: only
        a successful probe delivery closes it (mastodon/mastodon#31118), and a probe already out
        (half_open) is left alone.
        """
        names = sorted(set(hosts))
        if not names:
            return []
        async with self._db.transaction() as conn:
            changed = await conn.execute(
                update(_hosts)
                .where(_hosts.c.host.in_(names), _hosts.c.circuit == OPEN, _hosts.c.circuit_until > now)
                .values(circuit_until=now)
                .returning(_hosts.c.host)
            )
            return sorted(changed.scalars())

    async def update(self, changes: Mapping[str, HealthChange]) -> None:
        """Apply each host's change to its current health, in one transaction (rows locked on PostgreSQL)."""
        if not changes:
            return
        names = sorted(changes)
        async with self._db.transaction() as conn:
            await conn.execute(
                insert_ignoring_conflicts(self._db, _hosts, ("host",)), [{"host": name} for name in names]
            )
            query = select(*[_hosts.c[name] for name in _FIELDS]).where(_hosts.c.host.in_(names))
            if self._db.is_postgres:
                query = query.order_by(_hosts.c.host).with_for_update()
            rows = (await conn.execute(query)).all()
            for row in rows:
                changed = changes[row.host](HostHealth(**row._asdict()))
                values = {key: value for key, value in asdict(changed).items() if key != "host"}
                await conn.execute(update(_hosts).where(_hosts.c.host == row.host).values(**values))
