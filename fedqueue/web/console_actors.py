"""The admin console's actor page: a local actor's profile in a form, saved as
PATCH /admin/actors/{name} saves it (`service.profiles.change_profile`), then Post/Redirect/Get."""

from __future__ import annotations

from itertools import zip_longest
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.profile_fields import (
    ACTOR_TYPES,
    FLAG_FIELDS,
    MAX_PROFILE_BODY_BYTES,
    Profile,
    ProfileSaved,
)
from fedqueue.rules.wording import plural
from fedqueue.service import actors as local_actors
from fedqueue.service.profiles import change_profile
from fedqueue.web.admin_auth import check_csrf, session_of
from fedqueue.web.console_render import render, set_flash
from fedqueue.web.incoming import read_body
from fedqueue.web.metrics import metrics_of
from fedqueue.web.query_params import accepts
from fedqueue.web.responses import settings_of, store_of, urls_of

#: Empty label/value rows the form offers below an actor's profile fields.
EMPTY_FIELD_ROWS = 4
#: The form's text inputs, each the profile field of the same name ("" clears it).
TEXT_FIELDS = ("name", "summary", "icon", "image", "url", "type")


def _shown(profile: Profile) -> dict[str, Any]:
    """A stored profile as the form's values."""
    return {
        **{field: getattr(profile, field) or "" for field in TEXT_FIELDS},
        "fields": [{"name": label, "value": value} for label, value in profile.fields],
        **{flag: getattr(profile, flag) for flag in FLAG_FIELDS},
    }


def _body(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """The profile change a submitted form asks for: every field, as PATCH takes them. A field
    row with neither label nor value is no field."""
    form = dict(pairs)
    labels = [value for key, value in pairs if key == "field_name"]
    values = [value for key, value in pairs if key == "field_value"]
    return {
        **{field: form.get(field, "") for field in TEXT_FIELDS},
        "fields": [{"name": n, "value": v} for n, v in zip_longest(labels, values, fillvalue="") if n or v],
        **{flag: flag in form for flag in FLAG_FIELDS},
    }


def _page(
    request: Request, name: str, shown: dict[str, Any], status_code: int = 200, **context: Any
) -> Response:
    rows = [*shown["fields"], *({"name": "", "value": ""} for _ in range(EMPTY_FIELD_ROWS))]
    return render(
        request, "actor.html", status_code, name=name, profile=shown, rows=rows, types=ACTOR_TYPES, **context
    )


def _saved(name: str, saved: ProfileSaved, delay_s: float) -> str:
    if not saved.update_inboxes:
        return f"Profile of {name} saved; nobody has the actor yet, so no Update is sent."
    if saved.merged:
        return f"Profile of {name} saved; the Update still waiting to be sent carries this change too."
    inboxes = plural(saved.update_inboxes, "inbox", "inboxes")
    return f"Profile of {name} saved; its Update goes to {inboxes} in {delay_s:g} s."


@accepts()
async def actor_page(request: Request) -> Response:
    """One local actor's profile, in the form that changes it."""
    name = check_actor_name(request.path_params["name"])
    actor = await local_actors.local_actor(store_of(request), name)
    return _page(request, name, _shown(actor.profile), deleted_at=actor.deleted_at)


@accepts()
async def save_profile(request: Request) -> Response:
    """Save the form (CSRF-checked) through the admin API's parser and store call; a bad field
    shows the form again, as submitted, with the one-line reason (400)."""
    name = check_actor_name(request.path_params["name"])
    raw = await read_body(request, MAX_PROFILE_BODY_BYTES)
    try:
        pairs = parse_qsl(raw.decode(), keep_blank_values=True, errors="strict")
    except ValueError:  # UnicodeDecodeError included
        pairs = []
    check_csrf(request, dict(pairs).get("csrf"))
    metrics, delay_s = metrics_of(request), settings_of(request).actor_update_delay_seconds
    body, who = _body(pairs), session_of(request).who
    try:
        saved = await change_profile(store_of(request), urls_of(request), name, body, who, delay_s, metrics)
    except InvalidInput as exc:
        return _page(request, name, body, 400, error=str(exc))
    response = RedirectResponse(f"/admin/ui/actors/{name}", status_code=303)
    set_flash(response, _saved(name, saved, delay_s))
    return response


routes = [
    Route("/admin/ui/actors/{name}", actor_page, methods=["GET"]),
    Route("/admin/ui/actors/{name}", save_profile, methods=["POST"]),
]
