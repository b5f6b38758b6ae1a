"""The audit log's one write: who did what to which target, in the caller's transaction."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncConnection

from fedqueue.storage.schema import AUDIT_LOG


async def record_audit(
    conn: AsyncConnection, who: str, action: str, target: str, detail: dict[str, Any], now: datetime
) -> None:
    """One audit row, written in `conn`'s transaction with the change it describes."""
    await conn.execute(
        insert(AUDIT_LOG).values(
            who=who[:255], action=action, target=target[:2048], detail=json.dumps(detail), at=now
        )
    )
