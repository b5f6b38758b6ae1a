"""Admin commands as an operator runs them: real processes on a real SQLite file."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from fedqueue.storage import Store
from fedqueue.storage.migrate import upgrade_to_head
from tests.e2e.test_cli import run_fedqueue
from tests.seeding import SeededDelivery, seed_activity, seed_host


def _seeded(tmp_path: Path) -> tuple[dict[str, str], list[int]]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fedqueue.db'}"
    upgrade_to_head(url)

    async def seed() -> list[int]:
        store = Store.open(url)
        try:
            await seed_host(store.database, "down.example", circuit="open", consecutive_failures=5)
            _, ids = await seed_activity(
                store.database,
                "alice",
                "http://127.0.0.1:8000/actors/alice/activities/1",
                [
                    SeededDelivery("https://up.example/inbox", "delivered", attempts=1, last_status=202),
                    SeededDelivery("https://down.example/inbox", "dead", attempts=9, last_error="HTTP 502"),
                ],
            )
            return ids
        finally:
            await store.close()

    return {"FEDQUEUE_DATABASE_URL": url}, asyncio.run(seed())


def test_hosts_prints_a_table_worst_first_and_json_on_request(tmp_path: Path) -> None:
    env, _ = _seeded(tmp_path)
    result = run_fedqueue("hosts", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:3] == ["HOST", "CIRCUIT", "FAILS"]
    assert lines[1].split()[:3] == ["down.example", "open", "5"]
    as_json = json.loads(run_fedqueue("hosts", "--json", cwd=tmp_path, env=env).stdout)
    assert [h["host"] for h in as_json["items"]] == ["down.example", "up.example"]


def test_deliveries_filter_by_state_and_host(tmp_path: Path) -> None:
    env, ids = _seeded(tmp_path)
    result = run_fedqueue(
        "deliveries", "--state", "dead", "--host", "down.example", "--json", cwd=tmp_path, env=env
    )
    assert result.returncode == 0, result.stderr
    [dead] = json.loads(result.stdout)["items"]
    assert (dead["id"], dead["last_error"]) == (ids[1], "HTTP 502")
    table = run_fedqueue("deliveries", cwd=tmp_path, env=env).stdout
    assert "HTTP 502" in table
    assert "https://up.example/inbox" in table


def test_retry_pause_resume_block_act_on_the_database(tmp_path: Path) -> None:
    env, ids = _seeded(tmp_path)
    retried = run_fedqueue("retry", str(ids[1]), "--json", cwd=tmp_path, env=env)
    assert retried.returncode == 0, retried.stderr
    assert json.loads(retried.stdout)[0]["state"] == "queued"
    refused = run_fedqueue("retry", str(ids[0]), cwd=tmp_path, env=env)
    assert refused.returncode == 2
    assert refused.stderr.startswith("fedqueue: delivery")
    assert run_fedqueue("cancel", str(ids[1]), cwd=tmp_path, env=env).returncode == 0
    everything = run_fedqueue("retry", "--dead", cwd=tmp_path, env=env)
    assert everything.stdout.strip() == "retried 0 dead deliveries"
    assert (
        run_fedqueue("pause", "down.example", cwd=tmp_path, env=env).stdout.strip() == "down.example: paused"
    )
    assert (
        run_fedqueue("resume", "down.example", cwd=tmp_path, env=env).stdout.strip() == "down.example: active"
    )
    blocked = json.loads(run_fedqueue("block", "down.example", "--json", cwd=tmp_path, env=env).stdout)
    assert blocked["blocked"] is True
    activities = json.loads(run_fedqueue("activities", "--json", cwd=tmp_path, env=env).stdout)["items"]
    assert activities[0]["counts"] == {"delivered": 1, "dead": 1}
