"""The worker feeds the metrics recorder: counts, latency and attempts, one log line per outcome."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import httpx
import pytest
from aiohttp import web

from fedqueue.metrics import Metrics
from fedqueue.settings import Settings
from fedqueue.storage import Store
from tests.live import create_actor, live_instance
from tests.loopback import LoopbackServer
from tests.outbound import accept_all, fast, insert_outbox_row, run_burst

TOKEN = "metrics-admin-token-for-the-test"


async def test_a_burst_counts_every_outcome_with_its_latency_scheme_and_one_log_line(
    settings: Settings, store: Store, remote: LoopbackServer, caplog: pytest.LogCaptureFixture
) -> None:
    await store.actors.create("alice")
    accept_all(remote, ["/inbox"])
    remote.on("POST", "/missing", lambda _r: web.Response(status=404, text="no such inbox"))
    inboxes = [remote.url(f"/inbox?n={n}") for n in range(7)] + [remote.url("/missing")]
    await insert_outbox_row(store, "alice", {"type": "Like", "object": "x"}, inboxes)
    recorder = Metrics()
    with caplog.at_level(logging.INFO, logger="fedqueue.delivery"):
        await run_burst(fast(settings), store, metrics=recorder)

    lines = recorder.render()
    for line in (
        'fedqueue_deliveries_total{outcome="delivered"} 7',
        'fedqueue_deliveries_total{outcome="dead"} 1',
        'fedqueue_signature_scheme_total{scheme="cavage"} 8',
        "fedqueue_delivery_latency_seconds_count 7",
        "fedqueue_delivery_attempts_count 8",
        'fedqueue_delivery_attempts_bucket{le="1"} 8',
    ):
        assert line in lines, line
    records = [r for r in caplog.records if r.name == "fedqueue.delivery"]
    assert sorted(str(getattr(r, "outcome", None)) for r in records) == ["dead"] + ["delivered"] * 7
    [dead] = [r for r in records if getattr(r, "outcome", None) == "dead"]
    assert (getattr(dead, "status", None), getattr(dead, "inbox", None)) == (404, remote.url("/missing"))
    assert getattr(dead, "error", None) == "HTTP 404: no such inbox"
    assert all(getattr(r, "scheme", None) == "cavage" for r in records)
    assert all(
        getattr(r, "latency_s", -1.0) >= 0 for r in records if getattr(r, "outcome", None) == "delivered"
    )


def test_serve_shows_what_its_in_process_worker_delivered_at_metrics(tmp_path: Path) -> None:
    with live_instance(tmp_path, TOKEN) as live:
        tokens = {name: create_actor(live, name, tmp_path) for name in ("alice", "bob")}
        # alice likes something of bob's: the worker signs and POSTs it to bob's inbox on this
        # same instance (a real remote as far as the worker can tell), which accepts it.
        created = httpx.post(
            f"{live.origin}/actors/alice/outbox",
            json={"type": "Like", "object": f"{live.origin}/notes/1", "to": [f"{live.origin}/actors/bob"]},
            headers={
                "Authorization": f"Bearer {tokens['alice']}",
                "Content-Type": "application/activity+json",
            },
            timeout=10,
        )
        assert created.status_code == 201, created.text
        deadline = time.monotonic() + 30
        while True:
            lines = httpx.get(f"{live.origin}/metrics", timeout=10).text.splitlines()
            if 'fedqueue_deliveries_total{outcome="delivered"} 1' in lines or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert 'fedqueue_deliveries_total{outcome="delivered"} 1' in lines
    assert "fedqueue_delivery_latency_seconds_count 1" in lines
