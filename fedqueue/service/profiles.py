"""A local actor's profile change, for every edge: the admin API's PATCH and the console's form
give a mapping (`change_profile`: one parser, one count), the CLI its options parsed
(`save_profile`); both save it and queue its Update the same way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedqueue.metrics import Metrics
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.profile_fields import ProfileSaved, parse_change
from fedqueue.rules.states import DeliveryState
from fedqueue.rules.urls import Urls
from fedqueue.service.actor_changes import update_profile
from fedqueue.storage import Store


async def change_profile(
    store: Store,
    urls: Urls,
    name: str,
    body: Mapping[str, Any],
    who: str,
    delay_seconds: float,
    metrics: Metrics,
) -> ProfileSaved:
    """Check `body` (`profile_rules.parse_change`) and save it; its Update follows. Counted in
    `profile_updates` by result; InvalidInput (one line, nothing stored) for a bad field."""
    try:
        change = parse_change(body)
    except InvalidInput:
        metrics.profile_update("refused")
        raise
    return await save_profile(store, urls, name, change, who, delay_seconds, metrics)


async def save_profile(
    store: Store,
    urls: Urls,
    name: str,
    change: Mapping[str, Any],
    who: str,
    delay_seconds: float,
    metrics: Metrics | None = None,
) -> ProfileSaved:
    """Save a checked change (`parse_change`); its Update follows after `delay_seconds`. Counted
    in `metrics` if given (the CLI's process keeps no metrics)."""
    saved = await update_profile(store, urls, name, change, who, delay_seconds)
    if metrics is not None:
        queued = DeliveryState.QUEUED if saved.update_inboxes else "unsent"
        metrics.profile_update("merged" if saved.merged else queued)
    return saved
