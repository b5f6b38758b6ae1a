"""The console's blocks page (/admin/ui/blocks): the federation mode and its allowlist (settings,
shown), every blocked host or domain with its reason, a block added (a whole top-level domain or
public suffix asked about first, as the CLI's --yes and the API's confirm_tld=true do) or lifted,
through `service.admin_actions.change_host`, audited as the logged-in admin."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from fedqueue.rules.errors import FedqueueError
from fedqueue.rules.wording import plural
from fedqueue.service import admin_actions, console_reads
from fedqueue.service.admin_actions import HostChange, TldBlockUnconfirmed
from fedqueue.web.admin_auth import session_of
from fedqueue.web.console_render import render, set_flash
from fedqueue.web.dashboard_actions import action, checked_form, refused
from fedqueue.web.query_params import accepts
from fedqueue.web.responses import settings_of, store_of

LIST = "/admin/ui/blocks"


@accepts()
async def blocks_page(request: Request) -> Response:
    """The federation mode, its allowlist, the blocks, and the form that adds one."""
    settings = settings_of(request)
    return render(
        request,
        "blocks.html",
        mode=settings.federation_mode,
        allowed=sorted(settings.allowed_domains),
        blocks=await console_reads.blocks(store_of(request)),
    )


def _blocked(change: HostChange) -> str:
    host = change.host.host
    said = (
        f"{host} and its subdomains are blocked: "
        f"{plural(change.deliveries_dead or 0, 'pending delivery', 'pending deliveries')} became dead."
    )
    if change.reason_replaced is not None:
        old, new = change.reason_replaced.old or "(none)", change.reason_replaced.new or "(none)"
        said += f" Its reason was replaced: {old} → {new}."
    return said


@accepts()
async def add_block(request: Request) -> Response:
    """Block the domain the form names; a TLD-wide one shows what it means first, with the button
    that confirms it (the same form with confirm_tld=true)."""
    values = await checked_form(request)
    domain, reason = values.get("domain", "").strip(), values.get("reason", "").strip() or None
    try:
        change = await admin_actions.change_host(
            store_of(request),
            "block",
            domain,
            who=session_of(request).who,
            reason=reason,
            confirm_tld=values.get("confirm_tld") == "true",
        )
    except TldBlockUnconfirmed:
        return render(
            request,
            "confirm.html",
            title=f"Block every host under {domain}?",
            consequences=[
                f"{domain} is a whole top-level domain or public suffix: every host under it is blocked.",
                "Their pending deliveries become dead and their traffic to our inboxes is refused.",
            ],
            action=LIST,
            hidden={"domain": domain, "reason": reason or "", "confirm_tld": "true"},
            button=f"Block all of {domain}",
            back=LIST,
        )
    except FedqueueError as exc:
        return refused(LIST, exc)
    response = RedirectResponse(LIST, status_code=303)
    set_flash(response, _blocked(change))
    return response


async def _unblock(request: Request, who: str) -> str:
    domain = (await request.form()).get("domain")  # the form is read once, and kept
    change = await admin_actions.change_host(store_of(request), "unblock", str(domain or ""), who=who)
    return (
        f"{change.host.host} is unblocked; deliveries the block made dead stay dead until you Retry dead "
        "on its host page."
    )


routes = [
    Route(LIST, blocks_page, methods=["GET"]),
    Route(LIST, add_block, methods=["POST"]),
    Route(LIST + "/unblock", action(_unblock), methods=["POST"]),
]
