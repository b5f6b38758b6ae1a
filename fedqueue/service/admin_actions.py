"""The admin actions on deliveries and hosts, one function each, for the admin API, the console
and the CLI alike: retry, cancel, retry every dead delivery, and pause, resume, reset, block and
unblock a host. Each is audited as `who` in storage's transaction.

A block also counts the deliveries it made dead, and an unblock may queue them again
(`requeue`): the three edges report both, so the counting lives here, once.
"""

from __future__ import annotations

import dataclasses
from typing import Literal, cast

from fedqueue.rules.admin_views import DeliveryView, HostView
from fedqueue.rules.errors import InvalidInput, NotFound
from fedqueue.rules.federation_policy import check_block_pattern, tld_wide
from fedqueue.service.admin_json import HostAction, host_json
from fedqueue.storage import Store
from fedqueue.storage.admin import Progress, Requeued
from fedqueue.storage.consumers import Consumer

#: What an admin can do to a host.
HostActionName = Literal["pause", "resume", "block", "unblock", "reset"]
HOST_ACTIONS: tuple[HostActionName, ...] = ("pause", "resume", "block", "unblock", "reset")


async def retry(store: Store, delivery_id: int, *, who: str) -> DeliveryView:
    """Queue one delivery (queued, failed or dead) again, due now; InvalidInput in another state."""
    return await store.admin.retry(delivery_id, who=who)


async def cancel(store: Store, delivery_id: int, *, who: str) -> DeliveryView:
    """Give up one delivery (dead, 'cancelled by admin'); InvalidInput unless queued, sending or failed."""
    return await store.admin.cancel(delivery_id, who=who)


async def retry_dead(
    store: Store, *, who: str, host: str | None = None, progress: Progress | None = None
) -> int:
    """Queue every dead delivery again (of one host, or all) except cancelled ones; how many."""
    return await store.admin.retry_dead(who=who, host=host, progress=progress)


@dataclasses.dataclass(frozen=True)
class ReasonReplaced:
    """A block made again over one with another reason: the reason it had, and the one it has now."""

    old: str | None
    new: str | None


@dataclasses.dataclass(frozen=True)
class HostChange:
    """A host after an action: after a block, the deliveries it made dead (and the reason it replaced);
    after an unblock with requeue, those queued again."""

    host: HostView
    deliveries_dead: int | None = None
    requeued: Requeued | None = None
    reason_replaced: ReasonReplaced | None = None


class TldBlockUnconfirmed(InvalidInput):
    """A block of a whole top-level domain or public suffix asked for without its confirmation."""


async def change_host(
    store: Store,
    action: HostActionName,
    host: str,
    *,
    who: str,
    reason: str | None = None,
    requeue: bool = False,
    confirm_tld: bool = False,
) -> HostChange:
    """Perform one host action; `reason` goes with a block, `requeue` with an unblock.

    A block names a host or domain (InvalidInput for `.` or an empty one); one of a whole
    top-level domain or public suffix (`com`, `co.uk`) needs `confirm_tld` (else TldBlockUnconfirmed).
    """
    if action == "block":
        return await _block(store, host, who=who, reason=reason, confirm_tld=confirm_tld)
    changed = await getattr(store.admin, action)(host, who=who)
    if action == "unblock" and requeue:
        return HostChange(changed, requeued=await store.admin.requeue_blocked(host, who=who))
    return HostChange(changed)


async def _block(store: Store, host: str, *, who: str, reason: str | None, confirm_tld: bool) -> HostChange:
    pattern = check_block_pattern(host)
    if tld_wide(pattern) and not confirm_tld:
        raise TldBlockUnconfirmed(
            f"blocking {pattern[:100]!r} blocks every host under it, a whole top-level domain or public "
            "suffix: confirm to block it anyway (CLI: --yes; admin API: confirm_tld=true)"
        )
    try:
        before = await store.admin.host(pattern)
    except NotFound:
        before = None
    blocked = await store.admin.block(pattern, who=who, reason=reason)
    replaced = None
    if before is not None and before.blocked and before.block_reason != blocked.block_reason:
        replaced = ReasonReplaced(before.block_reason, blocked.block_reason)
    dead = await store.admin.killed_by_block(pattern)
    return HostChange(blocked, deliveries_dead=dead, reason_replaced=replaced)


def host_change_json(change: HostChange) -> HostAction:
    """The host's JSON, with `deliveries_dead` (and `reason_replaced`) after a block and
    `requeued`/`still_dead` after a requeue."""
    data = cast(HostAction, host_json(change.host))
    if change.deliveries_dead is not None:
        data["deliveries_dead"] = change.deliveries_dead
    if change.reason_replaced is not None:
        data["reason_replaced"] = {"old": change.reason_replaced.old, "new": change.reason_replaced.new}
    if change.requeued is not None:
        data["requeued"], data["still_dead"] = change.requeued.requeued, change.requeued.still_dead
    return data


async def end_console_sessions(store: Store, *, who: str) -> int:
    """Log every console out: the session version moves on, so every cookie issued before is refused."""
    return await store.console_sessions.end_all(who=who)


async def delete_consumer(store: Store, actor: str, consumer: str, *, who: str) -> Consumer:
    """Forget one consumer of `actor`'s events (its cursor); NotFound if there is none."""
    return await store.consumers.delete(actor, consumer, who=who)
