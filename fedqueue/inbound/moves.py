"""An inbound Move: its target's document is fetched and must name the origin (`alsoKnownAs`);
only then does it change anything (`move_rules`)."""

from __future__ import annotations

import asyncio
import logging

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import SigningIdentity
from fedqueue.rules.account_moves import VerifiedMove, move_claim, move_effects
from fedqueue.rules.actor_documents import names_alias
from fedqueue.rules.address_guard import FetchError
from fedqueue.rules.columns import URI_CHARS, check_text
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.follow_effects import Effect
from fedqueue.rules.inbox_acceptance import Activity
from fedqueue.rules.remote_actor_documents import parse_actor
from fedqueue.rules.urls import Urls
from fedqueue.storage.following import FollowingStore

log = logging.getLogger("fedqueue.inbox")


async def effects_of_move(
    activity: Activity,
    following: FollowingStore,
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
    local_followers = await following.of(origin)
    return move_effects(urls, VerifiedMove(origin, target, target_inbox, origin_inbox), local_followers)
