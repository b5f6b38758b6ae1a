"""The console's delivery history (/admin/ui/history): delivered, failed and dead over the last
24 hours (per hour) and 7 days (per 6 hours), server-rendered as the overview's last hour is.

Read from the deliveries rows themselves: a failure counts once, at its latest attempt, and
deliveries pruned by retention (`retention_delivered_days`, `retention_dead_days`) are no longer
counted, so the 7 days are complete only while retention keeps that long. Beside each chart, the
delivery latency (fan-out to delivery) p50 and p95 per bucket, from the same kept rows, each
bucket from at most its latest `console_reads.LATENCY_READ_PER_BUCKET` deliveries. And the backlog
over time: per bucket, the most deliveries due and the longest wait the workers sampled
(`outbound.heartbeat`, once a minute each, kept `retention_backlog_samples_days`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.rules.latency_percentiles import duration
from fedqueue.rules.states import DeliveryState
from fedqueue.service import console_reads
from fedqueue.web.console_render import CHART_SERIES, chart, render
from fedqueue.web.query_params import accepts
from fedqueue.web.responses import settings_of, store_of

#: (span, buckets, tick label, a tick every so many buckets, what a bucket is) of each chart.
SPANS = (
    ("24 hours", timedelta(hours=24), 24, "%H:%M", 3, "1-hour buckets"),
    ("7 days", timedelta(days=7), 28, "%m-%d", 4, "6-hour buckets"),
)


@accepts()
async def history_page(request: Request) -> Response:
    """Both spans' charts, with their totals per state, and their latency per bucket."""
    store, settings = store_of(request), settings_of(request)
    now = datetime.now(UTC)
    charts = []
    for name, span, buckets, clock, every, axis in SPANS:
        history = await console_reads.history(store, span, buckets, now=now)
        latency = await console_reads.latency(store, span, buckets, now=now)
        backlog = await console_reads.backlog(store, span, buckets, now=now)
        totals = {s: sum(getattr(b, s) for b in history.total) for s in CHART_SERIES}
        charts.append(
            {
                "name": name,
                "chart": chart(history.total, clock=clock, every=every),
                "axis": axis,
                "totals": totals,
                "latency": [
                    {
                        "start": f"{b.start:%m-%d %H:%M}",
                        "read": b.read,
                        "p50": duration(b.p50_s),
                        "p95": duration(b.p95_s),
                    }
                    for b in latency
                    if b.read
                ],
                "backlog": [
                    {"start": f"{b.start:%m-%d %H:%M}", "due": b.due, "age": duration(b.oldest_due_age_s)}
                    for b in backlog
                ],
            }
        )
    return render(
        request,
        "history.html",
        charts=charts,
        latency_cap=console_reads.LATENCY_READ_PER_BUCKET,
        kept_days={
            DeliveryState.DELIVERED: settings.retention_delivered_days,
            DeliveryState.DEAD: settings.retention_dead_days,
        },
        samples_kept_days=settings.retention_backlog_samples_days,
    )


routes = [Route("/admin/ui/history", history_page, methods=["GET"])]
