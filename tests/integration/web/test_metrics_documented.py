"""Every metric family `/metrics` exposes has a row in docs/admin.md's metrics table: what an
operator scrapes, they can look up (on both engines: some families are read from the database)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from fedqueue.storage import Store

ADMIN_DOC = Path(__file__).parents[3] / "docs" / "admin.md"


def documented_metrics() -> set[str]:
    """The metric names in the table under "### Metrics and logs"."""
    text = ADMIN_DOC.read_text()
    section = text.split("### Metrics and logs", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `fedqueue_")]
    return {name for row in rows for name in re.findall(r"`(fedqueue_[a-z_]+)", row.split(" | ")[0])}


async def test_every_metric_family_served_has_a_row_in_the_admin_guide(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("alice")
    served = await client.get("/metrics")
    assert served.status_code == 200
    families = set(re.findall(r"^# TYPE (\S+)", served.text, re.MULTILINE))
    assert len(families) > 30
    assert sorted(families - documented_metrics()) == []
