"""schemathesis against /admin/openapi.json of a live instance: no generated request gets a 5xx."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import Case
from schemathesis.core.result import Ok

from fedqueue.storage import Store
from fedqueue.storage.seeding import SeededDelivery, seed_activity, seed_host
from tests.live import live_instance

TOKEN = "fuzz-admin-token"


async def _seed(database_url: str) -> None:
    store = Store.open(database_url)
    try:
        await seed_host(store.database, "example.org", circuit="open", consecutive_failures=3)
        await seed_activity(
            store.database,
            "alice",
            "http://127.0.0.1/actors/alice/activities/1",
            [SeededDelivery("https://example.org/inbox", "dead", attempts=5, last_error="HTTP 500")],
        )
    finally:
        await store.close()


def test_schemathesis_finds_no_server_error_in_the_admin_api(tmp_path: Path) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    with live_instance(tmp_path, TOKEN) as live:
        asyncio.run(_seed(live.database_url))
        schema = schemathesis.openapi.from_url(f"{live.origin}/admin/openapi.json", headers=headers)
        operations = [result.ok() for result in schema.get_all_operations() if isinstance(result, Ok)]
        assert len(operations) >= 12
        failures: list[str] = []
        for operation in operations:

            @given(case=operation.as_strategy())
            @settings(
                max_examples=15,
                deadline=None,
                database=None,
                suppress_health_check=list(HealthCheck),
            )
            def fuzz(case: Case[Any]) -> None:
                response = case.call(base_url=live.origin, headers=headers, timeout=10)
                if response.status_code >= 500:
                    failures.append(
                        f"{case.method} {case.formatted_path} {case.query}: {response.status_code}"
                    )

            fuzz()
        assert failures == []
