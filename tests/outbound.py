"""Helpers for outbound tests: fast settings, a burst worker run, raw outbox rows, signature checks."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

from aiohttp import web
from sqlalchemy import text

from fedqueue.outbound.worker import Worker
from fedqueue.remote.http_client import HttpClient
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import parse_cavage_signature, sha256_digest_header, verify_cavage
from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.loopback import LoopbackServer, Recorded


def fast(settings: Settings, **overrides: Any) -> Settings:
    """Tiny retry delays and poll interval, so retries happen within a test."""
    values: dict[str, Any] = {
        "retry_base_seconds": 0.05,
        "retry_cap_seconds": 1.0,
        "poll_interval_seconds": 0.3,
        "lease_seconds": 30.0,
    }
    values.update(overrides)
    return settings.model_copy(update=values)


async def run_burst(settings: Settings, store: Store, *, timeout_s: float = 60, **worker_args: Any) -> None:
    client = HttpClient(settings)
    try:
        async with asyncio.timeout(timeout_s):
            await Worker(settings, store, client, **worker_args).run_burst()
    finally:
        await client.aclose()


async def insert_outbox_row(
    store: Store, actor: str, activity: dict[str, Any], inboxes: list[str] | None = None
) -> int:
    """What an app does inside its own transaction (the transactional outbox contract)."""
    async with store.database.transaction() as conn:
        result = await conn.execute(
            text(
                "INSERT INTO outbox (actor, activity, inboxes)"
                " VALUES (:actor, :activity, :inboxes) RETURNING id"
            ),
            {
                "actor": actor,
                "activity": json.dumps(activity),
                "inboxes": json.dumps(inboxes) if inboxes else None,
            },
        )
        return int(result.scalar_one())


async def add_follower(
    store: Store, actor: str, uri: str, inbox: str, shared_inbox: str | None = None
) -> None:
    async with store.database.transaction() as conn:
        await conn.execute(
            text("INSERT INTO followers (actor, follower_uri, inbox, shared_inbox) VALUES (:a, :u, :i, :s)"),
            {"a": actor, "u": uri, "i": inbox, "s": shared_inbox},
        )


def accept_all(remote: LoopbackServer, paths: list[str], status: int = 202) -> None:
    for path in paths:
        remote.on("POST", path, lambda _r: web.Response(status=status))


def scripted(*answers: web.Response) -> Iterator[web.Response]:
    return iter(answers)


def verify_delivery(
    remote: LoopbackServer, request: Recorded, actor_uri: str, public_pem: str
) -> dict[str, Any]:
    """Assert the request is a Mastodon-style signed delivery by `actor_uri`; return its body."""
    signature = parse_cavage_signature(request.headers["signature"])
    assert signature.key_id == f"{actor_uri}#main-key"
    assert signature.headers == ("(request-target)", "host", "date", "digest", "content-type")
    assert request.headers["digest"] == sha256_digest_header(request.body)
    assert request.headers["content-type"] == "application/activity+json"
    assert request.headers["user-agent"].startswith("fedqueue/")
    verify_cavage(
        "POST", remote.url(request.path), request.headers, signature, keys.load_public_key(public_pem)
    )
    body: dict[str, Any] = json.loads(request.body)
    return body
