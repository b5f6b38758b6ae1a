"""`fedqueue try-follow ACTOR`: a throwaway remote account follows a local actor, end to end.

On a laptop no real fediverse server can reach 127.0.0.1, so this command plays one: it serves
its own actor document (a fresh RSA-2048 key) and inbox on a free 127.0.0.1 port, POSTs a
signed Follow to the running server's inbox, and waits for the Accept that the server's worker
delivers, checking that Accept with the same verification code the inbox uses. Each step is
one line; a failure is one line naming the likely cause.

However the command ends (done, a failed step, Ctrl-C, SIGTERM), a Follow the server took is
undone with a signed Undo while the throwaway account still answers key fetches: an account that
stops listening would otherwise stay a follower, and every post would fail against it for days.
`--stay` keeps following and prints what arrives until Ctrl-C.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import signal
import socket
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urldefrag

import httpx
import uvicorn
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from fedqueue.cli.help import Subparsers, command
from fedqueue.inbound.receive import KEY_UNFETCHED
from fedqueue.rules.activitystreams import ACTIVITY_JSON, AS_CONTEXT, SECURITY_CONTEXT
from fedqueue.rules.address_guard import PRIVATE_REFUSAL, FetchError, with_private_hint
from fedqueue.rules.bounded_memory import RemoteKey
from fedqueue.rules.columns import check_actor_name
from fedqueue.rules.errors import FedqueueError, describe
from fedqueue.rules.remote_actor_documents import parse_actor
from fedqueue.rules.signature_parsing import InboundRequest
from fedqueue.rules.signing.keys import generate_key_pair, load_private_key
from fedqueue.rules.signing.requests import SignatureError, sign_request
from fedqueue.rules.verification import KeyRecord, TimeWindow, precheck, verify_signature
from fedqueue.settings import Settings, load_settings

#: How long a request to the server may take.
HTTP_TIMEOUT_S = 10.0


class TryFollowFailed(FedqueueError):
    """A step of the try-out failed; the message names the step and the likely cause."""


def register(commands: Subparsers) -> None:
    try_follow = command(
        commands,
        "try-follow",
        "a throwaway local account follows ACTOR; waits for the Accept",
        "Play a remote fediverse account on a free 127.0.0.1 port (fresh RSA-2048 key, actor "
        "document, inbox), send the running server a signed Follow of local actor ACTOR, and wait "
        "for the Accept its worker delivers, verifying the Accept's signature. Afterwards "
        "`fedqueue followers ACTOR` lists the throwaway account. The server must allow private "
        "addresses (FEDQUEUE_ALLOW_PRIVATE_ADDRESSES=true) to fetch this account's key: for local "
        "try-outs only. On exit (also Ctrl-C or SIGTERM) the follow is undone, so no dead follower "
        "stays behind; --stay keeps following and prints each activity that arrives until Ctrl-C. "
        "Exits 0 when the Accept arrived and verified.",
        [
            "fedqueue try-follow alice",
            "fedqueue try-follow alice --stay",
            "fedqueue try-follow alice --server http://127.0.0.1:8080",
        ],
    )
    try_follow.add_argument("actor", metavar="ACTOR", help="a local actor's name")
    try_follow.add_argument(
        "--server", help="the running server's origin (default: FEDQUEUE_BASE_URL, as `serve` uses it)"
    )
    try_follow.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for the Accept")
    try_follow.add_argument(
        "--stay",
        action="store_true",
        help="after the Accept, keep following and print each activity that arrives (type, actor, "
        "object id) until Ctrl-C, then undo the follow",
    )
    try_follow.set_defaults(run=run_try_follow)


@dataclass
class Throwaway:
    """The throwaway account: its origin, key, and the POSTs its inbox received."""

    origin: str
    private_key: PrivateKeyTypes
    public_key_pem: str
    received: asyncio.Queue[InboundRequest] = field(default_factory=asyncio.Queue)
    #: GETs of the actor document (its key) so far.
    fetched: int = 0

    @property
    def actor_id(self) -> str:
        return f"{self.origin}/actor"

    @property
    def key_id(self) -> str:
        return f"{self.actor_id}#main-key"

    def document(self) -> dict[str, Any]:
        return {
            "@context": [AS_CONTEXT, SECURITY_CONTEXT],
            "id": self.actor_id,
            "type": "Person",
            "preferredUsername": "try-follow",
            "inbox": f"{self.origin}/inbox",
            "publicKey": {"id": self.key_id, "owner": self.actor_id, "publicKeyPem": self.public_key_pem},
        }

    def app(self) -> Starlette:
        async def actor(_request: Request) -> Response:
            self.fetched += 1
            return Response(json.dumps(self.document()), media_type=ACTIVITY_JSON)

        async def inbox(request: Request) -> Response:
            headers = {name.lower(): value for name, value in request.headers.items()}
            body = await request.body()
            self.received.put_nowait(InboundRequest("POST", f"{self.origin}/inbox", headers, body))
            return Response(status_code=202)

        return Starlette(
            routes=[Route("/actor", actor, methods=["GET"]), Route("/inbox", inbox, methods=["POST"])]
        )


class _Listener(uvicorn.Server):
    """uvicorn serving the throwaway account, leaving Ctrl-C to the command."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def run_try_follow(args: argparse.Namespace) -> int:
    check_actor_name(args.actor)
    settings = load_settings()
    server = (args.server or settings.base_url).rstrip("/")
    asyncio.run(try_follow(settings, args.actor, server, args.timeout, args.stay))
    return 0


async def try_follow(
    settings: Settings, name: str, server: str, timeout_s: float, stay: bool = False
) -> None:
    """Follow `name` on `server` from a throwaway account, and undo it on the way out (Ctrl-C and
    SIGTERM included); TryFollowFailed names a failed step. `stay`: print what arrives until Ctrl-C."""
    loop = asyncio.get_running_loop()
    this = asyncio.current_task()
    assert this is not None  # a coroutine run by asyncio.run
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, this.cancel)
    try:
        await _follow_and_undo(settings, name, server, timeout_s, stay)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)


async def _follow_and_undo(settings: Settings, name: str, server: str, timeout_s: float, stay: bool) -> None:
    """`try_follow`'s steps; a cancellation (the signal handlers) ends the wait, not the Undo."""
    async with httpx.AsyncClient(timeout=HTTP_TIMEOUT_S) as http:
        target = await _local_actor(http, server, name)
        keys = generate_key_pair()
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        origin = f"http://127.0.0.1:{listener.getsockname()[1]}"
        throwaway = Throwaway(origin, load_private_key(keys.private_pem), keys.public_pem)
        config = uvicorn.Config(throwaway.app(), log_config=None, access_log=False, lifespan="off")
        listening = _Listener(config)
        serving = asyncio.create_task(listening.serve(sockets=[listener]))
        follow: dict[str, Any] | None = None
        verified = False
        try:
            while not listening.started:
                if serving.done():
                    await serving  # raises what stopped it
                    raise TryFollowFailed(f"the throwaway account could not listen on {origin}")
                await asyncio.sleep(0.01)
            print(f"throwaway account {throwaway.actor_id} listening", flush=True)
            follow = await _send_follow(http, throwaway, target)
            accept = await _wait_for_accept(throwaway, follow, target, timeout_s)
            await _verify(http, settings, accept, target)
            verified = True
            print("accept received, signature verified", flush=True)
            if stay:
                print(f"{throwaway.actor_id} now follows {name}: see `fedqueue followers {name}`")
                print(f"listening for what {name} sends (Ctrl-C: undo the follow and exit)", flush=True)
                await _print_arrivals(throwaway)
        except asyncio.CancelledError:
            _uncancel()  # the signal is handled here: the Undo below must not be cancelled too
            if not verified:
                raise TryFollowFailed(_interrupted(follow is not None)) from None
        finally:
            if follow is not None:
                await _send_undo(http, throwaway, target, follow, name)
            listening.should_exit = True
            await serving
            listener.close()


async def _local_actor(http: httpx.AsyncClient, server: str, name: str) -> dict[str, Any]:
    """The followed actor's document; one line when the server or the actor is not there."""
    try:
        response = await http.get(f"{server}/actors/{name}", headers={"Accept": ACTIVITY_JSON})
    except httpx.HTTPError as exc:
        raise TryFollowFailed(
            f"cannot reach {server} ({describe(exc)}): is `fedqueue serve` running there? (--server)"
        ) from None
    if response.status_code == 404:
        raise TryFollowFailed(f"no actor {name!r} on {server}: create it with `fedqueue actor create {name}`")
    if response.status_code != 200:
        raise TryFollowFailed(
            f"GET {server}/actors/{name} answered {response.status_code}: {_reason(response)}"
        )
    try:
        doc = response.json()
    except ValueError:
        doc = None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(f), str) for f in ("id", "inbox")):
        raise TryFollowFailed(f"{server}/actors/{name} is not an actor document with an id and an inbox")
    if doc.get("manuallyApprovesFollowers"):
        raise TryFollowFailed(
            f"{name} does not auto-accept follows (manuallyApprovesFollowers): no Accept would come"
        )
    return doc


def _uncancel() -> None:
    """Take back the signal handler's cancellation of this task, once it is handled."""
    task = asyncio.current_task()
    if task is not None:
        task.uncancel()


def _interrupted(followed: bool) -> str:
    """What an interruption before the verified Accept left behind."""
    return "interrupted before the Accept" + ("; the follow was undone" if followed else "")


async def _post_signed(
    http: httpx.AsyncClient, throwaway: Throwaway, inbox: str, activity: dict[str, Any]
) -> httpx.Response:
    """POST `activity` to `inbox`, signed draft-cavage by the throwaway account."""
    body = json.dumps(activity).encode()
    headers = {"Content-Type": ACTIVITY_JSON}
    headers |= sign_request(
        "cavage", "POST", inbox, headers, body, throwaway.private_key, throwaway.key_id, datetime.now(UTC)
    )
    try:
        return await http.post(inbox, content=body, headers=headers)
    except httpx.HTTPError as exc:
        raise TryFollowFailed(f"cannot POST the {activity['type']} to {inbox}: {describe(exc)}") from None


async def _send_follow(
    http: httpx.AsyncClient, throwaway: Throwaway, target: dict[str, Any]
) -> dict[str, Any]:
    """POST a signed Follow of `target` to its inbox; the server must answer 202."""
    follow = {
        "@context": AS_CONTEXT,
        "id": f"{throwaway.origin}/follows/{secrets.token_hex(8)}",
        "type": "Follow",
        "actor": throwaway.actor_id,
        "object": target["id"],
    }
    response = await _post_signed(http, throwaway, str(target["inbox"]), follow)
    if response.status_code != 202:
        reason = _reason(response)
        # The server tells only that the key could not be fetched; that it never asked for it says
        # why (a server before that told the address guard's finding).
        if (reason == KEY_UNFETCHED and throwaway.fetched == 0) or PRIVATE_REFUSAL in reason:
            reason = with_private_hint(
                f"the server may not fetch this account's key from 127.0.0.1, a {PRIVATE_REFUSAL} "
                "(it never asked for it)"
            )
        raise TryFollowFailed(f"follow refused: {response.status_code}: {reason}")
    print(f"follow sent: {response.status_code}", flush=True)
    return follow


async def _send_undo(
    http: httpx.AsyncClient, throwaway: Throwaway, target: dict[str, Any], follow: dict[str, Any], name: str
) -> None:
    """POST the Undo of `follow`, so the server drops the throwaway follower; one line either way."""
    undo = {
        "@context": AS_CONTEXT,
        "id": f"{throwaway.origin}/undos/{secrets.token_hex(8)}",
        "type": "Undo",
        "actor": throwaway.actor_id,
        "object": {key: value for key, value in follow.items() if key != "@context"},
    }
    try:
        response = await _post_signed(http, throwaway, str(target["inbox"]), undo)
    except TryFollowFailed as exc:
        print(f"fedqueue: {exc}; remove the follower by hand", file=sys.stderr, flush=True)
        return
    if response.status_code != 202:
        print(
            f"fedqueue: undo refused: {response.status_code}: {_reason(response)}; "
            f"remove the follower by hand",
            file=sys.stderr,
            flush=True,
        )
        return
    print(f"follow undone: {throwaway.actor_id} no longer follows {name}", flush=True)


async def _print_arrivals(throwaway: Throwaway) -> None:
    """Print each activity POSTed to the throwaway inbox, one line (type, actor, object id), for ever."""
    while True:
        request = await throwaway.received.get()
        print(arrival_line(request.body), flush=True)


def arrival_line(body: bytes) -> str:
    """One arrival as a line: its type, its actor and its object's id (`-` for what is missing)."""
    try:
        activity = json.loads(body)
    except ValueError:
        return f"(not JSON: {len(body)} bytes)"
    if not isinstance(activity, dict):
        return "(not an activity)"
    thing = activity.get("object")
    object_id = thing.get("id") if isinstance(thing, dict) else thing
    actor = activity.get("actor")
    actor_id = actor.get("id") if isinstance(actor, dict) else actor
    return " ".join(
        str(part) if isinstance(part, str) else "-" for part in (activity.get("type"), actor_id, object_id)
    )


async def _wait_for_accept(
    throwaway: Throwaway, follow: dict[str, Any], target: dict[str, Any], timeout_s: float
) -> InboundRequest:
    """The first POST to the throwaway inbox that accepts `follow`, within `timeout_s`."""
    try:
        async with asyncio.timeout(timeout_s):
            while True:
                request = await throwaway.received.get()
                try:
                    activity = json.loads(request.body)
                except ValueError:
                    continue
                if not isinstance(activity, dict):
                    continue
                accepted = activity.get("object")
                accepted_id = accepted.get("id") if isinstance(accepted, dict) else accepted
                if activity.get("type") == "Accept" and accepted_id == follow["id"]:
                    return request
    except TimeoutError:
        raise TryFollowFailed(
            f"no Accept from {target['id']} within {timeout_s:g} s: is the server's worker running "
            "(`fedqueue serve` without --no-worker, or `fedqueue worker`)?"
        ) from None


async def _verify(
    http: httpx.AsyncClient, settings: Settings, accept: InboundRequest, target: dict[str, Any]
) -> None:
    """The Accept's signature verifies under a key of the followed actor, as the inbox checks it."""
    window = TimeWindow(settings.signature_max_age_seconds, settings.signature_max_skew_seconds)

    async def resolve(key_id: str, refresh: bool) -> KeyRecord:
        url = urldefrag(key_id).url
        try:
            response = await http.get(url, headers={"Accept": ACTIVITY_JSON})
            response.raise_for_status()
            actor = parse_actor(response.json(), url, key_id)
        except (httpx.HTTPError, ValueError, FetchError) as exc:
            raise SignatureError(f"cannot fetch key {key_id}: {describe(exc)}") from None
        if actor.key_id != key_id or actor.public_key_pem is None:
            raise SignatureError(f"{url} does not list key {key_id}")
        return RemoteKey(key_id=key_id, owner=actor.uri, public_key_pem=actor.public_key_pem)

    try:
        candidates = precheck(accept, datetime.now(UTC), window)
        await verify_signature(candidates, resolve, str(target["id"]))
    except SignatureError as exc:
        raise TryFollowFailed(f"accept received, but its signature does not verify: {exc}") from None


def _reason(response: httpx.Response) -> str:
    """The server's one-line refusal (`{"error": ...}`), or the start of its body."""
    try:
        return str(response.json()["error"])
    except (ValueError, KeyError, TypeError):
        return response.text.strip().splitlines()[0][:200] if response.text.strip() else "(empty body)"
