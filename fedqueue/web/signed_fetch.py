"""Signed GETs: who signed a fetch, and authorized fetch (`FEDQUEUE_AUTHORIZED_FETCH`).

A GET's signature is verified by the inbound code (`inbound.verify`), with the rules of an
inbox POST but the body's: it must cover the target, the host and a date (or `created`),
within the same time window. Any remote actor may sign; its key is fetched as the instance
actor, so a remote server in authorized-fetch mode answers that fetch too.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from starlette.requests import Request

from fedqueue.inbound.receive import key_resolver, opaque
from fedqueue.inbound.throttle import InboxThrottle
from fedqueue.rules.errors import Unauthorized
from fedqueue.rules.signing.requests import SignatureError
from fedqueue.rules.verification import TimeWindow, Verdict, precheck, verify_signature
from fedqueue.web.inbox import directory_of, inbound_request, keyring_of
from fedqueue.web.incoming import client_of
from fedqueue.web.responses import settings_of


def is_signed(request: Request) -> bool:
    """Whether the request carries a signature at all (either scheme)."""
    return "signature" in request.headers or "signature-input" in request.headers


async def fetch_signer(request: Request) -> Verdict | None:
    """The verified signature of a GET; None if it carries none; SignatureError (401) if it fails.

    A failure's reason goes to the log; the sender gets one fixed line (`inbound.receive.opaque`).
    """
    if not is_signed(request):
        return None
    settings = settings_of(request)
    signed = inbound_request(request, settings.base_url, b"")
    if signed.headers.get("host", "").lower() != settings.host.lower():
        raise Unauthorized(f"request is for host {signed.headers.get('host', '')[:100]!r}, not this server")
    window = TimeWindow(settings.signature_max_age_seconds, settings.signature_max_skew_seconds)
    candidates = precheck(signed, datetime.now(UTC), window, limit=settings.inbound_max_signatures)
    # As on the inbox, the address pays for the key fetches of what does not verify (`inbound.throttle`).
    throttle: InboxThrottle = request.app.state.inbox_throttle
    address, clock = client_of(request), asyncio.get_running_loop()
    throttle.screen(address, (), clock.time())
    signer = await keyring_of(request).instance()
    directory = directory_of(request)
    unfetched: set[str] = set()
    timeout_s = settings.inbound_verify_timeout_seconds
    resolve = key_resolver(directory, signer, timeout_s, unfetched=unfetched)
    throttle.reserve(address, clock.time())
    try:
        verdict = await verify_signature(candidates, resolve, None)
    except SignatureError as exc:
        raise opaque(exc, [parsed.key_id for parsed in candidates], unfetched, address) from None
    throttle.verified(address, (), clock.time())  # a signed GET is not charged to its signer's host
    await directory.verified(verdict.key_id)  # a genuine key: its actor is stored now
    return verdict


async def require_signer(request: Request, what: str) -> Verdict:
    """The verified signature of a GET of `what`; 401 with the reason when it is unsigned or fails."""
    verdict = await fetch_signer(request)
    if verdict is None:
        raise Unauthorized(f"{what} is served only to signed requests (authorized fetch)")
    return verdict


async def authorize_fetch(request: Request, what: str) -> None:
    """Under authorized fetch, refuse (401) a GET of `what` that is unsigned or badly signed."""
    if settings_of(request).authorized_fetch:
        await require_signer(request, what)
