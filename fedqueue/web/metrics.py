"""GET /metrics: this process's counters plus queue gauges read from the database at scrape time.

Public unless `metrics_token` is set; then only `Authorization: Bearer <metrics_token>` reads it
(401 otherwise), compared as the admin token is (`admin_auth.token_matches`)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

from fedqueue.metrics import Metrics
from fedqueue.remote.documents import RemoteDirectory
from fedqueue.rules.admin_views import EXACT_COUNT_BELOW
from fedqueue.rules.bounded_memory import CacheFigures
from fedqueue.rules.errors import Unauthorized
from fedqueue.rules.prometheus_text import counter, gauge
from fedqueue.rules.states import CIRCUIT_STATES, DELIVERY_STATES
from fedqueue.service.workers import WorkersView, workers_view
from fedqueue.web.admin_auth import bearer_of, token_matches
from fedqueue.web.responses import settings_of, store_of

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Rows per table are read at most this often (a count of a large SQLite table takes a scan).
TABLE_ROWS_EVERY_S = 60.0


def metrics_of(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


async def metrics_endpoint(request: Request) -> Response:
    """The Prometheus text; 401 without the metrics token when one is set."""
    required = settings_of(request).metrics_token
    if required and not token_matches(bearer_of(request) or "", required):
        raise Unauthorized("metrics token required (Authorization: Bearer ...)")
    stats = await store_of(request).stats.queue()
    lines = metrics_of(request).render()
    lines += gauge(
        "fedqueue_queue_depth",
        "Deliveries per state.",
        (({"state": s}, stats.by_state.get(s, 0)) for s in DELIVERY_STATES),
    )
    lines += gauge(
        "fedqueue_oldest_due_delivery_age_seconds",
        "Age of the oldest queued or failed delivery that is due now (0: none).",
        [({}, round(stats.oldest_due_age_s, 3))],
    )
    lines += gauge(
        "fedqueue_hosts",
        "Remote hosts per circuit state.",
        (({"circuit": c}, stats.hosts_by_circuit.get(c, 0)) for c in CIRCUIT_STATES),
    )
    lines += gauge(
        "fedqueue_hosts_flagged",
        "Remote hosts an admin paused or blocked.",
        [({"flag": "paused"}, stats.hosts_paused), ({"flag": "blocked"}, stats.hosts_blocked)],
    )
    lines += gauge(
        "fedqueue_hosts_unavailable",
        "Remote hosts given up as unreachable (failing for host_unavailable_after_days).",
        [({}, stats.hosts_unavailable)],
    )
    lines += gauge(
        "fedqueue_outbox_backlog",
        "Outbox rows the worker has not finished expanding (pending or expanding).",
        [({}, stats.outbox_backlog)],
    )
    lines += gauge(
        "fedqueue_outbox_oldest_pending_age_seconds",
        "Age of the oldest outbox row pending or expanding (0: none).",
        [({}, round(stats.oldest_outbox_age_s, 3))],
    )
    lines += workers_lines(await workers_view_of(request))
    lines += await retention_lines(request)
    directory: RemoteDirectory | None = request.app.state.directory
    if directory is not None:
        lines += remote_cache_lines(directory.figures())
    return PlainTextResponse("\n".join(lines) + "\n", media_type=CONTENT_TYPE)


async def retention_lines(request: Request) -> list[str]:
    """Rows per table (read at most once per `TABLE_ROWS_EVERY_S`) and webhook events dropped."""
    store = store_of(request)
    now = time.monotonic()
    remembered: tuple[float, dict[str, int]] | None = getattr(request.app.state, "table_rows", None)
    if remembered is None or now - remembered[0] >= TABLE_ROWS_EVERY_S:
        remembered = (now, await store.retention.row_counts())
        request.app.state.table_rows = remembered
    lines = gauge(
        "fedqueue_table_rows",
        f"Rows per table (PostgreSQL: the planner's estimate past {EXACT_COUNT_BELOW}); "
        f"read at most once per {TABLE_ROWS_EVERY_S:.0f} s.",
        (({"table": t}, n) for t, n in remembered[1].items()),
    )
    lines += counter(
        "fedqueue_webhook_events_dropped_total",
        "Webhook events dropped unsent, oldest first, past retention_webhook_backlog, per webhook.",
        (
            ({"webhook": str(h.id), "consumer": h.consumer}, h.dropped_events)
            for h in await store.webhooks.list()
        ),
    )
    return lines


async def workers_view_of(request: Request) -> WorkersView:
    """The workers' rows and the queue's wait, judged as of now (`service.workers.workers_view`)."""
    started: float = getattr(request.app.state, "started_monotonic", 0.0)
    watching_s = time.monotonic() - started
    return await workers_view(store_of(request), settings_of(request), datetime.now(UTC), watching_s)


def workers_lines(view: WorkersView) -> list[str]:
    """Workers beating or silent (rows kept until `worker_forget_seconds`), and each lane's wait."""
    lines = gauge(
        "fedqueue_workers",
        "Workers by heartbeat: beating, or silent (missed 3 beats; removed after worker_forget_seconds).",
        [({"state": "beating"}, view.beating), ({"state": "silent"}, len(view.beats) - view.beating)],
    )
    lines += gauge(
        "fedqueue_lane_oldest_due_delivery_age_seconds",
        "Per lane: age of the oldest queued or failed delivery due now, held hosts aside (0: none).",
        (({"lane": lane}, round(age_s, 3)) for lane, age_s in view.oldest_due_s.items()),
    )
    return lines


def remote_cache_lines(figures: CacheFigures) -> list[str]:
    """The remote actor directory's memories: what unverified requests made this process hold."""
    lines = gauge(
        "fedqueue_remote_unverified_keys",
        "Keys fetched for requests whose signature has not verified, held in memory (this process).",
        [({}, figures.unverified_entries)],
    )
    lines += gauge(
        "fedqueue_remote_unverified_bytes",
        "Characters of the documents and keys those entries hold (this process).",
        [({}, figures.unverified_bytes)],
    )
    lines += gauge(
        "fedqueue_remote_failures_remembered",
        "Failed actor and key fetches remembered in memory (this process).",
        [({}, figures.failures)],
    )
    lines += counter(
        "fedqueue_remote_cache_evictions_total",
        "Entries dropped from a full memory, least recently used first (this process).",
        [
            ({"cache": "unverified"}, figures.unverified_evictions),
            ({"cache": "failures"}, figures.failure_evictions),
        ],
    )
    lines += counter(
        "fedqueue_key_refetches_skipped_total",
        "Key refetches not made because the key was fetched within key_refetch_cooldown_seconds.",
        [({}, figures.refetches_skipped)],
    )
    return lines


routes = [Route("/metrics", metrics_endpoint, methods=["GET"])]
