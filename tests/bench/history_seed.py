"""A long-lived instance's history, inserted in bulk for `bench_history`: set-based INSERTs, no Python rows.

Each table is filled by one `INSERT ... SELECT` over a series of integers (`generate_series`
on PostgreSQL, a recursive CTE on SQLite). Rows are dated `old` (past every default retention,
so a prune removes them) or, one in ten, `recent` (kept).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import bindparam, text
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.storage.column_types import UTCDateTime

#: Host of every seeded remote actor and activity; deliveries go to h0.seed.invalid .. h{HOSTS-1}.
ORIGIN = "https://seed.invalid"
HOSTS = 1000
#: Deliveries per seeded outbox row.
FANOUT = 100
#: One row in this many is recent (kept by a prune); the rest are old.
RECENT_EVERY = 10


@dataclass(frozen=True)
class History:
    """How much history: delivered deliveries, cached remote actors, inbox entries."""

    delivered: int
    actors: int
    inbox: int

    @classmethod
    def scaled(cls, scale: float) -> History:
        return cls(int(1_000_000 * scale), int(100_000 * scale), int(1_000_000 * scale))


def _series(conn: AsyncConnection, n: int) -> tuple[str, str]:
    """(prefix, source): `prefix INSERT ... SELECT ... FROM source` reads i = 1..n."""
    if conn.dialect.name == "postgresql":
        return "", f"generate_series(1, {n}) AS g(i)"
    return f"WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < {n}) ", "g"


async def _insert(
    conn: AsyncConnection, n: int, table: str, columns: dict[str, str], **params: object
) -> None:
    """INSERT INTO `table` one row per i in 1..n, each column the SQL expression given (of `i`)."""
    if n <= 0:
        return
    prefix, source = _series(conn, n)
    names, values = ", ".join(columns), ", ".join(columns.values())
    statement = text(f"{prefix}INSERT INTO {table} ({names}) SELECT {values} FROM {source}")
    typed = [bindparam(k, type_=UTCDateTime()) for k, v in params.items() if isinstance(v, datetime)]
    await conn.execute(statement.bindparams(*typed), params)


def _dated(key: str) -> str:
    """`:recent` for one `key` in RECENT_EVERY, else `:old`."""
    return f"CASE WHEN ({key}) % {RECENT_EVERY} = 0 THEN :recent ELSE :old END"


def actor_uri(name: str) -> str:
    return f"{ORIGIN}/users/{name}"


async def remote_actors(
    conn: AsyncConnection,
    n: int,
    pem: str,
    now: datetime,
    old: datetime,
    recent: datetime,
    *,
    prefix: str = "u",
) -> None:
    """Cached remote actors {prefix}1 .. {prefix}n, all holding the public key `pem` (one in ten recent)."""
    uri = f"'{ORIGIN}/users/{prefix}' || i"
    await _insert(
        conn,
        n,
        "remote_actors",
        {
            "uri": uri,
            "inbox": f"{uri} || '/inbox'",
            "shared_inbox": f"'{ORIGIN}/inbox'",
            "key_id": f"{uri} || '#main-key'",
            "public_key_pem": ":pem",
            "document": f"""'{{"id": "' || {uri} || '", "type": "Person"}}'""",
            "fetched_at": _dated("i"),
            "expires_at": ":expires",
        },
        pem=pem,
        old=old,
        recent=recent,
        expires=now.replace(year=now.year + 1),
    )


async def history(
    conn: AsyncConnection, size: History, pem: str, now: datetime, old: datetime, recent: datetime
) -> None:
    """alice's delivered fan-outs and their hosts, cached actors, inbox entries read by `app`."""
    dates = {"old": old, "recent": recent}
    await _insert(
        conn,
        HOSTS,
        "hosts",
        {"host": "'h' || (i - 1) || '.seed.invalid'", "last_success_at": ":recent"},
        recent=recent,
    )
    activities = size.delivered // FANOUT
    await _insert(
        conn,
        activities,
        "outbox",
        {
            "actor": "'alice'",
            "activity": """'{"id": "https://local.invalid/a/' || i || '", "type": "Create"}'""",
            "activity_id": "'https://local.invalid/a/' || i",
            "activity_type": "'Create'",
            "state": "'expanded'",
            "created_at": _dated("i"),
            "expanded_at": _dated("i"),
        },
        **dates,
    )
    outbox_id = f"((i - 1) / {FANOUT} + 1)"
    await _insert(
        conn,
        activities * FANOUT,
        "deliveries",
        {
            "outbox_id": outbox_id,
            "inbox": f"'https://h' || (i % {HOSTS}) || '.seed.invalid/users/u' || i || '/inbox'",
            "host": f"'h' || (i % {HOSTS}) || '.seed.invalid'",
            "actor": "'alice'",
            "activity_type": "'Create'",
            "state": "'delivered'",
            "attempts": "1",
            "next_attempt_at": _dated(outbox_id),
            "created_at": _dated(outbox_id),
            "last_attempt_at": _dated(outbox_id),
            "delivered_at": _dated(outbox_id),
        },
        **dates,
    )
    await remote_actors(conn, size.actors, pem, now, old, recent)
    await _insert(
        conn,
        size.inbox,
        "inbound_activities",
        {
            "activity_id": f"'{ORIGIN}/activities/' || i",
            "actor_uri": f"'{ORIGIN}/users/u' || (i % {max(size.actors, 1)})",
            "activity_type": "'Create'",
            "body": f"""'{{"id": "{ORIGIN}/activities/' || i || '", "type": "Create"}}'""",
            "key_id": f"'{ORIGIN}/users/u' || (i % {max(size.actors, 1)}) || '#main-key'",
            "received_at": _dated("i"),
        },
        **dates,
    )
    await _insert(conn, size.inbox, "inbox_items", {"inbound_id": "i", "actor": "'alice'"})
    await _insert(
        conn,
        1 if size.inbox else 0,
        "inbox_cursors",
        {"actor": "'alice'", "consumer": "'app'", "last_item_id": str(size.inbox), "updated_at": ":recent"},
        recent=recent,
    )


async def backlog(conn: AsyncConnection, n: int, due: datetime) -> None:
    """n queued deliveries of one activity of alice, due at `due`, over 50 hosts: what claims take."""
    activity_id = "https://local.invalid/backlog"
    await _insert(
        conn,
        1,
        "outbox",
        {"actor": "'alice'", "activity": "'{}'", "activity_id": f"'{activity_id}'", "state": "'expanded'"},
    )
    await _insert(
        conn,
        n,
        "deliveries",
        {
            "outbox_id": f"(SELECT id FROM outbox WHERE activity_id = '{activity_id}')",
            "inbox": "'https://q' || (i % 50) || '.example/users/u' || i || '/inbox'",
            "host": "'q' || (i % 50) || '.example'",
            "actor": "'alice'",
            "activity_type": "'Create'",
            "state": "'queued'",
            "next_attempt_at": ":due",
        },
        due=due,
    )
