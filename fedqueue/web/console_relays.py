"""The console's relays page (/admin/ui/relays): every relay with its state, one followed (the
instance actor's Follow sent now) or unfollowed (asked first; its Undo sent), through
`service.relays` as `fedqueue relay add|remove|list` does, audited as the logged-in admin."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.rules.errors import InvalidInput, NotFound
from fedqueue.service import relays
from fedqueue.web.console_render import render
from fedqueue.web.dashboard_actions import action
from fedqueue.web.query_params import accepts
from fedqueue.web.responses import settings_of, store_of

LIST = "/admin/ui/relays"


@accepts()
async def relays_page(request: Request) -> Response:
    """Every relay with its state, and the form that follows one."""
    return render(request, "relays.html", relays=await relays.followed(store_of(request)))


async def _form_uri(request: Request) -> str:
    uri = (await request.form()).get("uri")  # the form is read once, and kept
    if not isinstance(uri, str) or not uri.strip():
        raise InvalidInput("name the relay's actor or inbox URL")
    return uri.strip()


async def _follow(request: Request, who: str) -> str:
    uri = await _form_uri(request)
    relay = await relays.follow(store_of(request), settings_of(request), uri, who=who)
    return (
        f"Following relay {relay.uri}: its Follow went to {relay.inbox}; "
        f"{relay.state} until the relay answers."
    )


@accepts("uri")
async def confirm_unfollow(request: Request) -> Response:
    """What unfollowing a relay does, with the button that does it."""
    uri = request.query_params.get("uri") or ""
    known = {r.uri: r for r in await relays.followed(store_of(request))}
    if uri not in known:
        raise NotFound(f"no relay {uri[:200]!r} is followed")
    relay = known[uri]
    return render(
        request,
        "confirm.html",
        title=f"Unfollow relay {relay.uri}?",
        consequences=[
            "Public activities stop going to it at once.",
            f"An Undo of our Follow goes to {relay.inbox} now.",
        ],
        action=f"{LIST}/remove",
        hidden={"uri": relay.uri},
        button="Unfollow the relay",
        back=LIST,
    )


async def _unfollow(request: Request, who: str) -> str:
    relay = await relays.unfollow(store_of(request), settings_of(request), await _form_uri(request), who=who)
    return f"Relay {relay.uri} is unfollowed: its Undo went to {relay.inbox}."


routes = [
    Route(LIST, relays_page, methods=["GET"]),
    Route(LIST, action(_follow), methods=["POST"]),
    Route(LIST + "/remove", confirm_unfollow, methods=["GET"]),
    Route(LIST + "/remove", action(_unfollow), methods=["POST"]),
]
