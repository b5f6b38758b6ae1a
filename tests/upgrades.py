"""Databases as earlier releases left them: built at a shipped schema head, filled with plain SQL
that matches that head's schema, upgraded by the real `fedqueue migrate`.

Each row stands for something an operator would lose on a bad upgrade: an actor and its key, its
followers and the accounts it follows, a delivery waiting for its retry, unread inbox entries, a
webhook with an event on its way, a host whose circuit is open.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import asyncpg
import pytest
from sqlalchemy import BindParameter, DateTime, bindparam, text
from sqlalchemy.engine import Connection, make_url

from fedqueue.rules.signing import keys
from fedqueue.rules.states import CircuitState, DeliveryState, FollowerState, OutboxState
from fedqueue.storage.migrate import inspect_schema

#: The schema head of each landing a release shipped from: 4270e01 (0.1.0's passes), 0e68ee7
#: (the landing before the 0.2.0 renovation) and 2ea07d9 (the base 0.2.0 was built on).
#: `git ls-tree <commit> fedqueue/storage/migrations/versions/` shows each one's newest file.
RELEASED_HEADS = {"4270e01": "0009", "0e68ee7": "0020", "2ea07d9": "0022"}
PG_URL_ENV = "FEDQUEUE_TEST_DATABASE_URL"
BASE_URL = "http://127.0.0.1:8000"
ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def empty_database(engine: str, tmp_path: Path) -> Iterator[str]:
    """A database with no schema at all, on `engine` (`sqlite` or `postgres`); dropped after."""
    if engine == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp_path / 'upgraded.db'}"
        return
    base = os.environ.get(PG_URL_ENV)
    if not base:
        pytest.skip(f"{PG_URL_ENV} is not set")
    name = f"fq_up_{uuid.uuid4().hex[:12]}"
    admin_dsn = make_url(base).set(drivername="postgresql").render_as_string(hide_password=False)
    asyncio.run(_pg_admin(admin_dsn, f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_pg_admin(admin_dsn, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


async def _pg_admin(dsn: str, statement: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(statement)
    finally:
        await conn.close()


def fedqueue_command(
    database_url: str, *args: str, pythonpath: Path | None = None, timeout_s: float = 120
) -> subprocess.CompletedProcess[str]:
    """Run `python -m fedqueue ARGS` as an operator would, on `database_url`; from the source
    tree `pythonpath` (an earlier release) instead of this one when given."""
    env = {**os.environ, "FEDQUEUE_DATABASE_URL": database_url, "FEDQUEUE_BASE_URL": BASE_URL}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    return subprocess.run(
        [sys.executable, "-m", "fedqueue", *args],
        env=env,
        cwd=pythonpath or ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )


def migrate(database_url: str) -> None:
    """`fedqueue migrate`, the real command; it must exit 0 without a traceback."""
    done = fedqueue_command(database_url, "migrate")
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr


@dataclass(frozen=True)
class OldRows:
    """What the seeded database holds, to compare with what the upgraded one answers."""

    token: str
    public_pem: str
    followers: tuple[str, ...]
    followed: str
    outbox_id: int
    activity_id: str
    waiting_delivery: int
    waiting_since: datetime
    inbound_ids: tuple[str, ...]
    webhook_id: int
    webhook_event_delivery: int
    down_host: str
    down_until: datetime


def _when(name: str) -> BindParameter[datetime]:
    return bindparam(name, type_=DateTime(timezone=True))


def _insert(conn: Connection, sql: str, params: dict[str, object], *times: str) -> int:
    """One INSERT of plain SQL; the new row's id where the table has one."""
    statement = text(sql).bindparams(*(_when(t) for t in times))
    result = conn.execute(statement, params)
    return int(result.scalar_one()) if sql.rstrip().endswith("RETURNING id") else 0


def seed_released_rows(database_url: str, inbox_url: str, hook_url: str) -> OldRows:
    """Fill a database at any released head (0009 or later) with one of everything, in plain SQL
    that names only columns 0009 already had."""
    pair = keys.generate_key_pair()
    token = keys.new_token()
    now = datetime.now(UTC).replace(microsecond=0)
    actor_uri = f"{BASE_URL}/actors/alice"
    followers = ("https://a.example/users/ann", "https://b.example/users/bo")
    activity_id = f"{BASE_URL}/activities/upgrade-1"
    inbound_ids = ("https://a.example/activities/1", "https://b.example/activities/2")
    host = inbox_url.split("/")[2]

    def seed(conn: Connection) -> OldRows:
        _insert(
            conn,
            "INSERT INTO actors (name, private_key_pem, public_key_pem, token_hash)"
            " VALUES ('alice', :private, :public, :token_hash)",
            {"private": pair.private_pem, "public": pair.public_pem, "token_hash": keys.hash_token(token)},
        )
        for uri in followers:
            _insert(
                conn,
                "INSERT INTO followers (actor, follower_uri, inbox, shared_inbox, follow_activity_id, state)"
                " VALUES ('alice', :uri, :inbox, NULL, :follow, :state)",
                {
                    "uri": uri,
                    "inbox": f"{uri}/inbox",
                    "follow": f"{uri}#follow",
                    "state": FollowerState.ACCEPTED,
                },
            )
        _insert(
            conn,
            "INSERT INTO following (actor, followed_uri, follow_activity_id, accepted_at)"
            " VALUES ('alice', 'https://c.example/users/cy', :follow, :at)",
            {"follow": f"{BASE_URL}/activities/follow-cy", "at": now},
            "at",
        )
        activity = {
            "@context": "https://www.w3.org/ns/activitystreams",
            "id": activity_id,
            "type": "Create",
            "actor": actor_uri,
            "to": ["https://www.w3.org/ns/activitystreams#Public"],
            "object": {"id": f"{BASE_URL}/notes/1", "type": "Note", "content": "kept across upgrades"},
        }
        outbox_id = _insert(
            conn,
            "INSERT INTO outbox (actor, activity, activity_id, activity_type, object_id, state, expanded_at)"
            " VALUES ('alice', :activity, :activity_id, 'Create', :object_id, :state, :at) RETURNING id",
            {
                "activity": json.dumps(activity),
                "activity_id": activity_id,
                "object_id": f"{BASE_URL}/notes/1",
                "state": OutboxState.EXPANDED,
                "at": now - timedelta(minutes=10),
            },
            "at",
        )
        waiting_since = now - timedelta(minutes=1)
        waiting = _insert(
            conn,
            "INSERT INTO deliveries (outbox_id, inbox, host, actor, activity_type, object_id, state,"
            " attempts, next_attempt_at, last_status, last_error, last_attempt_at, recipient)"
            " VALUES (:outbox_id, :inbox, :host, 'alice', 'Create', :object_id, :state, 2, :due, 503,"
            " 'HTTP 503 Service Unavailable', :tried, :inbox) RETURNING id",
            {
                "outbox_id": outbox_id,
                "inbox": inbox_url,
                "host": host,
                "object_id": f"{BASE_URL}/notes/1",
                "state": DeliveryState.FAILED,
                "due": waiting_since,
                "tried": now - timedelta(minutes=5),
            },
            "due",
            "tried",
        )
        for number, inbound_id in enumerate(inbound_ids, 1):
            body = {"id": inbound_id, "type": "Create", "actor": followers[number - 1], "object": "x"}
            inbound = _insert(
                conn,
                "INSERT INTO inbound_activities (activity_id, actor_uri, activity_type, body, key_id)"
                " VALUES (:id, :actor, 'Create', :body, :key) RETURNING id",
                {
                    "id": inbound_id,
                    "actor": followers[number - 1],
                    "body": json.dumps(body),
                    "key": f"{followers[number - 1]}#main-key",
                },
            )
            _insert(
                conn, "INSERT INTO inbox_items (inbound_id, actor) VALUES (:id, 'alice')", {"id": inbound}
            )
        webhook_id = _insert(
            conn,
            "INSERT INTO webhooks (actor, consumer, url, secret, events)"
            " VALUES ('alice', 'blog', :url, 'a-webhook-secret-of-some-length', 'inbox.new') RETURNING id",
            {"url": hook_url},
        )
        event_id = _insert(
            conn,
            "INSERT INTO webhook_events (webhook_id, kind, body, dedupe_key)"
            " VALUES (:hook, 'inbox.new', :body, 'upgrade-event') RETURNING id",
            {"hook": webhook_id, "body": json.dumps({"kind": "inbox.new", "marker": "kept across upgrades"})},
        )
        event_delivery = _insert(
            conn,
            "INSERT INTO deliveries (inbox, host, actor, activity_type, state, next_attempt_at,"
            " webhook_id, webhook_event_id) VALUES (:url, :host, 'alice', 'inbox.new', :state, :due,"
            " :hook, :event) RETURNING id",
            {
                "url": hook_url,
                "host": host,
                "state": DeliveryState.QUEUED,
                "due": now - timedelta(seconds=30),
                "hook": webhook_id,
                "event": event_id,
            },
            "due",
        )
        down_until = now + timedelta(hours=2)
        _insert(
            conn,
            "INSERT INTO hosts (host, consecutive_failures, first_failure_at, last_failure_at, circuit,"
            " circuit_until) VALUES ('down.example', 7, :first, :last, :circuit, :until)",
            {
                "first": now - timedelta(hours=1),
                "last": now - timedelta(minutes=3),
                "circuit": CircuitState.OPEN,
                "until": down_until,
            },
            "first",
            "last",
            "until",
        )
        conn.commit()
        return OldRows(
            token=token,
            public_pem=pair.public_pem,
            followers=followers,
            followed="https://c.example/users/cy",
            outbox_id=outbox_id,
            activity_id=activity_id,
            waiting_delivery=waiting,
            waiting_since=waiting_since,
            inbound_ids=inbound_ids,
            webhook_id=webhook_id,
            webhook_event_delivery=event_delivery,
            down_host="down.example",
            down_until=down_until,
        )

    return inspect_schema(database_url, seed)
