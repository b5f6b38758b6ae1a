"""The JSON shape of each admin view, below both edges, so the admin API and the CLI print the same fields."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from typing import Any

from fedqueue.storage.admin_views import ActivitySummary, AuditEntry, DeliveryView, HostView
from fedqueue.urls import Urls


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def activity_json(item: ActivitySummary, urls: Urls) -> dict[str, Any]:
    return {
        "id": item.outbox_id,
        "activity": item.activity_id,
        "actor": item.actor,
        "type": item.activity_type,
        "state": item.state,
        "error": item.error,
        "created_at": iso(item.created_at),
        "counts": item.counts,
        "total": item.total,
        "complete": item.complete,
        "status_url": urls.status(item.outbox_id),
    }


def delivery_json(item: DeliveryView) -> dict[str, Any]:
    data = asdict(item)
    for key in ("next_attempt_at", "created_at", "last_attempt_at", "delivered_at"):
        data[key] = iso(data[key])
    data["activity"] = data.pop("activity_id")
    return data


def host_json(item: HostView) -> dict[str, Any]:
    return {
        "host": item.host,
        "circuit": item.circuit,
        "consecutive_failures": item.consecutive_failures,
        "failing_since": iso(item.failing_since),
        "last_failure_at": iso(item.last_failure_at),
        "last_success_at": iso(item.last_success_at),
        "paused": item.paused,
        "blocked": item.blocked,
        "unavailable": item.unavailable,
        "signature_scheme": item.signature_scheme,
        "counts": item.counts,
        "in_trouble": item.in_trouble,
    }


def audit_json(item: AuditEntry) -> dict[str, Any]:
    return {**asdict(item), "at": iso(item.at)}
