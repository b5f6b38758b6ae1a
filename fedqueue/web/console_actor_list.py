"""The console's actor list (/admin/ui/actors): one page of the local actors by name, a new actor,
a new outbox token, lock and unlock; each actor's followers and pending follows, and every actor's
pending follows (/admin/ui/follows), approved or rejected there. Every action goes through
`service.actors`, as `fedqueue actor ...` and /admin/actors do, and is audited as the admin."""

from __future__ import annotations

from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.errors import FedqueueError, InvalidInput
from fedqueue.rules.states import FollowerState
from fedqueue.service import actors as local_actors
from fedqueue.service import console_reads
from fedqueue.web.admin_auth import session_of
from fedqueue.web.console_render import render
from fedqueue.web.dashboard_actions import action, checked_form, refused
from fedqueue.web.query_params import accepts
from fedqueue.web.responses import store_of, urls_of

ACTOR_PAGE = 50
FOLLOWER_PAGE = 50
LIST = "/admin/ui/actors"
PENDING = "/admin/ui/follows"


@accepts("cursor")
async def actors_page(request: Request) -> Response:
    """One page of the local actors by name (deleted ones too), with their actions."""
    cursor = request.query_params.get("cursor") or None
    rows, next_cursor = await local_actors.list_actors(store_of(request), after=cursor, limit=ACTOR_PAGE)
    return render(
        request,
        "actors.html",
        actors=rows,
        cursor=cursor,
        next_url=f"{LIST}?{urlencode({'cursor': next_cursor})}" if next_cursor else None,
    )


def _token_page(
    request: Request, title: str, lines: list[str], name: str, token: str, status_code: int = 200
) -> Response:
    """An actor's outbox token, on this answer only: it is stored hashed (never in a cookie)."""
    outbox = f"{urls_of(request).actor(name)}/outbox"
    return render(
        request,
        "shown_once.html",
        status_code,
        title=title,
        lines=lines,
        label=f"Outbox token of {name}",
        secret=token,
        usage=f"Apps post as {name} to {outbox} with Authorization: Bearer and this token.",
        back=LIST,
        back_label="Back to the actors",
    )


@accepts()
async def create_actor(request: Request) -> Response:
    """A new actor from the form; its outbox token is on the answer, once (never in a cookie)."""
    values = await checked_form(request)
    try:
        name = check_actor_name(values.get("name", "").strip())
        created = await local_actors.create(store_of(request), name, who=session_of(request).who)
    except FedqueueError as exc:
        return refused(LIST, exc)
    actor_id = urls_of(request).actor(name)
    return _token_page(request, f"Actor {name} created", [f"Its id is {actor_id}."], name, created.token, 201)


@accepts()
async def confirm_rotate(request: Request) -> Response:
    """What a new token does to the old one, with the button that makes it."""
    name = check_actor_name(request.path_params["name"])
    await local_actors.local_actor(store_of(request), name)
    return render(
        request,
        "confirm.html",
        title=f"New outbox token for {name}?",
        consequences=[
            f"{name}'s current outbox token is refused at once: apps posting with it get 401.",
            "The new token is shown once, on the next page; it is stored hashed and cannot be shown again.",
        ],
        action=f"{LIST}/{name}/token",
        button=f"Replace the token of {name}",
        back=LIST,
    )


@accepts()
async def rotate_token(request: Request) -> Response:
    """Replace the actor's outbox token; the new one is on the answer, once."""
    await checked_form(request)
    name = check_actor_name(request.path_params["name"])
    try:
        token = await local_actors.rotate_token(store_of(request), name, session_of(request).who)
    except FedqueueError as exc:
        return refused(LIST, exc)
    lines = ["The old token is refused from now on."]
    return _token_page(request, f"New outbox token for {name}", lines, name, token)


async def _lock(request: Request, who: str) -> str:
    name = check_actor_name(request.path_params["name"])
    await local_actors.set_locked(store_of(request), name, True, who)
    return f"{name} is locked: new follows wait for your approval under Pending follows."


async def _unlock(request: Request, who: str) -> str:
    name = check_actor_name(request.path_params["name"])
    await local_actors.set_locked(store_of(request), name, False, who)
    return f"{name} is unlocked: new follows are accepted as they come (pending ones still wait)."


def _offset(request: Request) -> int:
    raw = request.query_params.get("offset") or "0"
    if not raw.isascii() or not raw.isdigit() or len(raw) > 9:
        raise InvalidInput("query parameter 'offset' must be a whole number")
    return int(raw)


@accepts("state", "offset")
async def followers_page(request: Request) -> Response:
    """An actor's followers (accepted) or pending follows (`?state=pending`), oldest first."""
    name = check_actor_name(request.path_params["name"])
    state = request.query_params.get("state") or FollowerState.ACCEPTED
    offset = _offset(request)
    rows, more = await console_reads.followers_page(
        store_of(request), name, state=state, offset=offset, limit=FOLLOWER_PAGE
    )
    path = f"{LIST}/{name}/followers"
    return render(
        request,
        "followers.html",
        name=name,
        state=state,
        followers=rows,
        next_url=f"{path}?{urlencode({'state': state, 'offset': offset + FOLLOWER_PAGE})}" if more else None,
        first_url=f"{path}?{urlencode({'state': state})}" if offset else None,
    )


@accepts("offset")
async def pending_page(request: Request) -> Response:
    """Follows of every actor waiting for approval, oldest first, each with Approve and Reject."""
    offset = _offset(request)
    rows, more = await console_reads.pending_follows(store_of(request), offset=offset, limit=FOLLOWER_PAGE)
    return render(
        request,
        "followers.html",
        name=None,
        state=FollowerState.PENDING,
        followers=rows,
        next_url=f"{PENDING}?{urlencode({'offset': offset + FOLLOWER_PAGE})}" if more else None,
        first_url=PENDING if offset else None,
    )


async def _follow_of(request: Request) -> tuple[str, str]:
    name = check_actor_name(request.path_params["name"])
    follower = (await request.form()).get("follower")  # the form is read once, and kept
    if not isinstance(follower, str) or not follower:
        raise InvalidInput("the form names no follower")
    return name, follower


async def _answer(request: Request, who: str, *, approve: bool) -> str:
    name, follower = await _follow_of(request)
    store, urls = store_of(request), urls_of(request)
    await local_actors.answer_follow(store, urls, name, follower, approve=approve, who=who)
    if approve:
        return f"{follower} now follows {name}: its Accept is queued."
    return f"{follower}'s follow of {name} is rejected: its Reject is queued and the follow forgotten."


async def _approve(request: Request, who: str) -> str:
    return await _answer(request, who, approve=True)


async def _reject(request: Request, who: str) -> str:
    return await _answer(request, who, approve=False)


async def _remove(request: Request, who: str) -> str:
    name, follower = await _follow_of(request)
    await local_actors.remove_follower(store_of(request), urls_of(request), name, follower, who=who)
    return f"{follower} no longer follows {name}: a Reject of its Follow is queued."


routes = [
    Route(LIST, actors_page, methods=["GET"]),
    Route(LIST, create_actor, methods=["POST"]),
    Route(LIST + "/{name}/token", confirm_rotate, methods=["GET"]),
    Route(LIST + "/{name}/token", rotate_token, methods=["POST"]),
    Route(LIST + "/{name}/lock", action(_lock), methods=["POST"]),
    Route(LIST + "/{name}/unlock", action(_unlock), methods=["POST"]),
    Route(PENDING, pending_page, methods=["GET"]),
    Route(LIST + "/{name}/followers", followers_page, methods=["GET"]),
    Route(LIST + "/{name}/followers/approve", action(_approve), methods=["POST"]),
    Route(LIST + "/{name}/followers/reject", action(_reject), methods=["POST"]),
    Route(LIST + "/{name}/followers/remove", action(_remove), methods=["POST"]),
]
