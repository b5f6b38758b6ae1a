"""`fedqueue status` as a person runs it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from fedqueue.storage import Store
from fedqueue.storage.migrate import upgrade_to_head
from tests.e2e.test_cli import run_fedqueue
from tests.outbound import insert_outbox_row


async def _one_activity(url: str) -> int:
    store = Store.open(url)
    try:
        await store.actors.create("alice")
        return await insert_outbox_row(
            store, "alice", {"type": "Like", "object": "x"}, ["https://b.example/inbox"]
        )
    finally:
        await store.close()


def test_status_prints_counts_and_json_for_an_activity(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fedqueue.db'}"
    upgrade_to_head(url)
    outbox_id = asyncio.run(_one_activity(url))
    shown = run_fedqueue("status", str(outbox_id), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "complete  no" in shown.stdout
    as_json = run_fedqueue("status", str(outbox_id), "--json", cwd=tmp_path)
    assert json.loads(as_json.stdout)["state"] == "pending"
    missing = run_fedqueue("status", "999", cwd=tmp_path)
    assert missing.returncode == 2 and missing.stderr.strip() == "fedqueue: no activity 999"
