"""The admin API's actor actions (`/admin/actors[/{name}/...]`): the list, creation, a new outbox
token, the profile, aliases, a Move out (its status), deletion (its status), and manual approval
of followers (lock, unlock, approve, reject)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.rules.actor_documents import Deletion, check_uri
from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.key_choice import KEY_KINDS
from fedqueue.rules.profile_fields import FIELDS, MAX_PROFILE_BODY_BYTES, ProfileSaved
from fedqueue.service import actors as local_actors
from fedqueue.service.actor_changes import delete_actor, move_actor, queued_status
from fedqueue.service.admin_json import ActorJson, profile_json
from fedqueue.service.profiles import change_profile
from fedqueue.web.admin_auth import session_of
from fedqueue.web.incoming import read_json_object, string_field
from fedqueue.web.metrics import metrics_of
from fedqueue.web.query_params import accepts
from fedqueue.web.responses import JSONResponse, settings_of, store_of, urls_of

if TYPE_CHECKING:
    from fedqueue.storage import Store

#: A new actor's JSON is its name.
MAX_ACTOR_BODY_BYTES = 1024


async def actor_json(
    store: Store, name: str, deletion: Deletion | None = None, saved: ProfileSaved | None = None
) -> ActorJson:
    """The admin JSON of one local actor, with what its deletion or profile change did if it was
    just deleted or changed."""
    actor = await local_actors.local_actor(store, name)
    return {
        "name": name,
        "profile": profile_json(actor.profile),
        "update_inboxes": saved.update_inboxes if saved else 0,
        "manually_approves_followers": not actor.auto_accept_follows,
        "also_known_as": list(actor.also_known_as),
        "moved_to": actor.moved_to,
        "deleted_at": actor.deleted_at.isoformat() if actor.deleted_at else None,
        "delete_inboxes": deletion.inboxes if deletion else 0,
        "deliveries_cancelled": deletion.deliveries_cancelled if deletion else 0,
        "activities_cancelled": deletion.activities_cancelled if deletion else 0,
    }


@accepts("limit", "cursor")
async def list_actors(request: Request) -> Response:
    """GET /admin/actors[?limit=N&cursor=NAME]: one page of the local actors by name, deleted ones too."""
    limit = request.query_params.get("limit") or str(local_actors.DEFAULT_ACTOR_PAGE)
    if not limit.isascii() or not limit.isdigit() or len(limit) > 9:
        raise InvalidInput("query parameter 'limit' must be a positive integer")
    cursor = request.query_params.get("cursor") or None
    rows, next_cursor = await local_actors.list_actors(store_of(request), after=cursor, limit=int(limit))
    urls = urls_of(request)
    return JSONResponse(
        {"items": [local_actors.listing_json(r, urls) for r in rows], "next_cursor": next_cursor}
    )


@accepts()
async def rotate_token(request: Request) -> Response:
    """POST /admin/actors/{name}/token: a new outbox token, shown once; the old one is refused at once."""
    name = check_actor_name(request.path_params["name"])
    token = await local_actors.rotate_token(store_of(request), name, session_of(request).who)
    return JSONResponse({"name": name, "token": token})


@accepts("key")
async def rotate_key(request: Request) -> Response:
    """POST /admin/actors/{name}/rotate-key?key=rsa|ed25519 (rsa if not given): a new key pair
    signs from now on (in this process at once, in the others within `ROTATION_CHECK_S`); the
    actor's Update carrying it is queued for every inbox that has the actor. Audited."""
    name = check_actor_name(request.path_params["name"])
    given = request.query_params.get("key") or "rsa"
    key = KEY_KINDS.get(given)
    if key is None:
        raise InvalidInput(f"key must be one of {', '.join(KEY_KINDS)}, not {given[:40]!r}")
    urls = urls_of(request)
    rotated = await local_actors.rotate_key(store_of(request), urls, name, key, session_of(request).who)
    request.app.state.keyring.forget(name)
    return JSONResponse(local_actors.rotation_json(urls, rotated))


@accepts()
async def create_actor(request: Request) -> Response:
    """POST /admin/actors {name}: 201 {id, name, token}, as `fedqueue actor create` prints; audited."""
    body = await read_json_object(request, MAX_ACTOR_BODY_BYTES, ("name",))
    name = check_actor_name(string_field(body, "name", required=True) or "")
    created = await local_actors.create(store_of(request), name, who=session_of(request).who)
    actor_id = urls_of(request).actor(name)
    return JSONResponse({"id": actor_id, "name": name, "token": created.token}, status_code=201)


@accepts()
async def update(request: Request) -> Response:
    """PATCH /admin/actors/{name} {profile fields}: the document changes at once, its Update follows."""
    name = check_actor_name(request.path_params["name"])
    metrics = metrics_of(request)
    try:
        body = await read_json_object(request, MAX_PROFILE_BODY_BYTES, FIELDS)
    except InvalidInput:  # not a JSON object of profile fields: refused as a bad field is
        metrics.profile_update("refused")
        raise
    store = store_of(request)
    delay_s = settings_of(request).actor_update_delay_seconds
    who = session_of(request).who
    saved = await change_profile(store, urls_of(request), name, body, who, delay_s, metrics)
    return JSONResponse(await actor_json(store, name, saved=saved))


@accepts()
async def delete(request: Request) -> Response:
    """DELETE /admin/actors/{name}: the actor's Delete is queued; it is a Tombstone from now on."""
    name = check_actor_name(request.path_params["name"])
    store = store_of(request)
    deletion = await delete_actor(store, urls_of(request), name, session_of(request).who)
    return JSONResponse(
        {**await actor_json(store, name, deletion), **queued_status(urls_of(request), deletion.status_id)}
    )


@accepts(repeatable=("add", "remove"))
async def aliases(request: Request) -> Response:
    """POST /admin/actors/{name}/aliases?add=URI&remove=URI (each repeatable): its alsoKnownAs."""
    name = check_actor_name(request.path_params["name"])
    add = [check_uri(uri, "an alias") for uri in request.query_params.getlist("add")]
    remove = request.query_params.getlist("remove")
    if not add and not remove:
        raise InvalidInput("name an alias to add (?add=URI) or to remove (?remove=URI)")
    store = store_of(request)
    await local_actors.set_aliases(store, name, add, remove, session_of(request).who)
    return JSONResponse(await actor_json(store, name))


@accepts("to")
async def move(request: Request) -> Response:
    """POST /admin/actors/{name}/move?to=URI: checked against the target's alsoKnownAs, then sent."""
    name = check_actor_name(request.path_params["name"])
    target = request.query_params.get("to")
    if not target:
        raise InvalidInput("missing query parameter 'to': the account to move to")
    store = store_of(request)
    signer = await request.app.state.keyring.instance()
    directory = request.app.state.directory
    who = session_of(request).who
    outbox_id = await move_actor(store, directory, signer, urls_of(request), name, target, who)
    return JSONResponse({**await actor_json(store, name), **queued_status(urls_of(request), outbox_id)})


@accepts()
async def lock(request: Request) -> Response:
    """POST /admin/actors/{name}/lock: new follows wait for approval (`manuallyApprovesFollowers`)."""
    return await _set_locked(request, locked=True)


@accepts()
async def unlock(request: Request) -> Response:
    """POST /admin/actors/{name}/unlock: new follows are accepted as they come."""
    return await _set_locked(request, locked=False)


async def _set_locked(request: Request, *, locked: bool) -> Response:
    name = check_actor_name(request.path_params["name"])
    store = store_of(request)
    await local_actors.set_locked(store, name, locked, session_of(request).who)
    return JSONResponse(await actor_json(store, name))


@accepts("follower")
async def approve_follower(request: Request) -> Response:
    """POST /admin/actors/{name}/followers/approve?follower=URI: its Accept is queued."""
    return await _answer_follow(request, approve=True)


@accepts("follower")
async def reject_follower(request: Request) -> Response:
    """POST /admin/actors/{name}/followers/reject?follower=URI: forgotten, its Reject queued."""
    return await _answer_follow(request, approve=False)


@accepts("follower")
async def remove_follower(request: Request) -> Response:
    """POST /admin/actors/{name}/followers/remove?follower=URI: an accepted follower forgotten, a
    Reject of its Follow queued."""
    name, follower = _follow_of(request)
    store = store_of(request)
    await local_actors.remove_follower(store, urls_of(request), name, follower, who=session_of(request).who)
    return JSONResponse(await actor_json(store, name))


def _follow_of(request: Request) -> tuple[str, str]:
    name = check_actor_name(request.path_params["name"])
    follower = request.query_params.get("follower")
    if not follower:
        raise InvalidInput("missing query parameter 'follower': the follower's actor id")
    return name, follower


async def _answer_follow(request: Request, *, approve: bool) -> Response:
    name, follower = _follow_of(request)
    store = store_of(request)
    who = session_of(request).who
    await local_actors.answer_follow(store, urls_of(request), name, follower, approve=approve, who=who)
    return JSONResponse(await actor_json(store, name))


routes = [
    Route("/admin/actors", list_actors, methods=["GET"]),
    Route("/admin/actors", create_actor, methods=["POST"]),
    Route("/admin/actors/{name}/token", rotate_token, methods=["POST"]),
    Route("/admin/actors/{name}/rotate-key", rotate_key, methods=["POST"]),
    Route("/admin/actors/{name}", update, methods=["PATCH"]),
    Route("/admin/actors/{name}", delete, methods=["DELETE"]),
    Route("/admin/actors/{name}/aliases", aliases, methods=["POST"]),
    Route("/admin/actors/{name}/move", move, methods=["POST"]),
    Route("/admin/actors/{name}/lock", lock, methods=["POST"]),
    Route("/admin/actors/{name}/unlock", unlock, methods=["POST"]),
    Route("/admin/actors/{name}/followers/approve", approve_follower, methods=["POST"]),
    Route("/admin/actors/{name}/followers/reject", reject_follower, methods=["POST"]),
    Route("/admin/actors/{name}/followers/remove", remove_follower, methods=["POST"]),
]
