"""Senders with forged signatures: actors whose documents list another key than the one they sign with."""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from sqlalchemy import func, select

from fedqueue.rules.signing import keys
from fedqueue.storage import Store
from fedqueue.storage.tables import RemoteActorRow
from tests.fediverse import RemoteActor
from tests.loopback import LoopbackServer

_remote = RemoteActorRow.__table__  # type: ignore[attr-defined]
#: The size of the `summary` a forged sender's document carries: under the 1 MiB document cap.
BIG_SUMMARY_BYTES = 900_000
#: The key the forged senders' documents list; they sign with their own `pair`.
_LISTED = keys.generate_key_pair()


def actor_document(actor: RemoteActor, public_pem: str, **extra: Any) -> dict[str, Any]:
    """`actor`'s document listing `public_pem` as its key, with `extra` fields."""
    return {
        "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"],
        "id": actor.uri,
        "type": "Person",
        "inbox": actor.inbox,
        "followers": f"{actor.uri}/followers",
        "endpoints": {"sharedInbox": actor.server.url("/inbox")},
        "publicKey": {"id": actor.key_id, "owner": actor.uri, "publicKeyPem": public_pem},
        **extra,
    }


def forged_sender(server: LoopbackServer, summary_bytes: int = BIG_SUMMARY_BYTES) -> RemoteActor:
    """A new actor on `server` with a `summary` of `summary_bytes`, whose every signature is forged
    (its document lists a key it does not have)."""
    actor = RemoteActor(server, name=f"p-{uuid4().hex}")
    server.serve_json(
        f"/users/{actor.name}", actor_document(actor, _LISTED.public_pem, summary="x" * summary_bytes)
    )
    return actor


async def remote_actor_bytes(store: Store) -> tuple[int, int]:
    """How many remote_actors rows there are and the characters of their documents."""
    async with store.database.reading() as conn:
        row = (
            await conn.execute(
                select(func.count(), func.coalesce(func.sum(func.length(_remote.c.document)), 0))
            )
        ).one()
    return int(row[0]), int(row[1])
