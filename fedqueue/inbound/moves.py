"""An inbound Move: its target's document is fetched and must name the origin (`alsoKnownAs`);
only then does it change anything (`move_rules`)."""

from __future__ import annotations

import asyncio
import logging

from fedqueue.column_rules import URI_CHARS, check_text
from fedqueue.errors import InvalidInput
from fedqueue.inbound.follows import Effect
from fedqueue.inbound.move_rules import VerifiedMove, move_claim, move_effects
from fedqueue.inbound.receive_rules import Activity
from fedqueue.outbound.actor_rules import names_alias
from fedqueue.remote.client import SigningIdentity
from fedqueue.remote.documents import RemoteDirectory, parse_actor
from fedqueue.remote.guard import FetchError
from fedqueue.storage import Store
from fedqueue.urls import Urls

log = logging.getLogger("fedqueue.inbox")


async def effects_of_move(
    activity: Activity,
    store: Store,
    directory: RemoteDirectory,
    urls: Urls,
    signer: SigningIdentity,
    timeout_s: float,
) -> list[Effect]:
    """The effects of a verified activity that is a Move; none unless its target names its origin."""
    claim = move_claim(activity)
    if claim is None:
        return []
    origin, target = claim
    deadline = asyncio.get_running_loop().time() + timeout_s
    try:
        check_text("the Move's target", target, URI_CHARS)
        document, _raw = await directory.fetch_json(target, signer, deadline=deadline)
        target_inbox = parse_actor(document, target).inbox
        check_text("the target's inbox", target_inbox, URI_CHARS)
    except (FetchError, InvalidInput) as exc:
        log.info("Move %s from %s ignored: its target is unusable: %s", activity.id, origin, exc)
        return []
    if not names_alias(document, origin):
        log.info("Move %s ignored: %s does not list %s in alsoKnownAs", activity.id, target, origin)
        return []
    try:
        origin_inbox: str | None = (await directory.actor(origin, None)).inbox
    except FetchError:
        origin_inbox = None
    following = await store.following.of(origin)
    return move_effects(urls, VerifiedMove(origin, target, target_inbox, origin_inbox), following)
