"""Each client call as data (pure): the HTTP request to send and how to read its answer.

`Client` and `AsyncClient` only send `Call.request` and hand the response to `Call.parse`, so
both share every URL, parameter and answer shape written here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Generic, TypedDict, TypeVar, Unpack
from urllib.parse import quote, urlsplit

import httpx

from fedqueue.client.answers import (
    ActorPage,
    ActorToken,
    CreatedActor,
    FedqueueBadAnswer,
    FedqueueError,
    FedqueueUnavailable,
    ListedActor,
    Posted,
    Profile,
    ProfileField,
    Webhook,
    build,
)
from fedqueue.rules.wire_delivery_status import Delivery, StatusPage
from fedqueue.rules.wire_inbox_item import InboxItem, InboxPage

T = TypeVar("T")


class WebhookOptions(TypedDict, total=False):
    """A new webhook's optional fields (docs/inbox.md, Webhooks); fedqueue's defaults when absent."""

    #: The pull API consumer whose cursor its ACKs move (default `default`).
    consumer: str
    #: The HMAC key, 16-256 printable ASCII characters; generated when absent.
    secret: str
    #: The events it gets; all when absent.
    events: list[str]
    #: Its URL may be on a loopback or private address (an app on this machine).
    allow_private: bool


class ProfileChange(TypedDict, total=False):
    """A profile change (docs/apps.md, Your actor's profile): only the keys given change; None or
    "" clears a field; `fields` replaces every profile field."""

    name: str | None
    #: HTML; fedqueue keeps what Mastodon keeps of a bio (p, br, a, span and a few inline tags).
    summary: str | None
    #: http(s) URLs: the avatar, the header image, and the app's page for the actor.
    icon: str | None
    image: str | None
    url: str | None
    #: Person, Service, Group, Application or Organization.
    type: str
    #: At most 16 {"name": label, "value": HTML}.
    fields: list[dict[str, str]]
    discoverable: bool
    indexable: bool


@dataclass(frozen=True)
class Call(Generic[T]):
    """A request to fedqueue and the reader of its answer (which raises a FedqueueError on a refusal)."""

    request: httpx.Request
    read: Callable[[httpx.Response], T]

    def parse(self, response: httpx.Response) -> T:
        """The answer as `T`: FedqueueUnavailable for a 5xx, FedqueueError with fedqueue's one-line
        reason for a 4xx (or any other non-2xx), FedqueueBadAnswer for a 2xx it cannot read."""
        status = response.status_code
        try:
            if response.is_server_error:
                raise FedqueueUnavailable(status, _reason(response), _retry_after_s(response))
            if not response.is_success:
                raise FedqueueError(status, _reason(response))
            return self.read(response)
        except httpx.DecodingError as exc:  # a body its Content-Encoding does not decode
            raise FedqueueBadAnswer(status, f"unreadable answer: {_described(exc)}") from None
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise FedqueueBadAnswer(status, f"unexpected answer: {exc}") from None


@contextmanager
def translated(request: httpx.Request) -> Iterator[None]:
    """httpx's errors while `request` is sent, as the client's own: FedqueueUnavailable when fedqueue
    was not reached or its answer did not arrive whole, FedqueueBadAnswer when it could not be decoded.

    The one boundary both clients send through (`with translated(call.request): ...`), sync and async
    alike; the httpx error stays as the cause.
    """
    origin = f"{request.url.scheme}://{request.url.netloc.decode('ascii', 'replace')}"
    try:
        yield
    except httpx.TimeoutException as exc:
        raise FedqueueUnavailable(None, f"no answer from {origin} in time ({type(exc).__name__})") from exc
    except httpx.TransportError as exc:  # refused, DNS, TLS, dropped mid-answer, unsupported scheme
        raise FedqueueUnavailable(None, f"cannot reach fedqueue at {origin}: {_described(exc)}") from exc
    except httpx.HTTPError as exc:  # a body it cannot decode, too many redirects
        raise FedqueueBadAnswer(None, f"unreadable answer from {origin}: {_described(exc)}") from exc


def _described(exc: Exception) -> str:
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _retry_after_s(response: httpx.Response) -> float | None:
    raw = response.headers.get("retry-after", "").strip()
    return float(raw) if raw.isascii() and raw.isdigit() else None


def _reason(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    text = " ".join(response.text[:200].split())  # one line, also for a proxy's HTML page
    return error if isinstance(error, str) else (text or response.reason_phrase)


class Endpoint:
    """fedqueue at `base_url` (the address the app reaches it at), called with one bearer token."""

    def __init__(self, base_url: str, token: str) -> None:
        self.base_url = base_url.rstrip("/")
        self._headers = {"authorization": f"Bearer {token}", "accept": "application/json"}

    def _request(
        self, method: str, target: str, params: Mapping[str, Any] | None = None, body: Any = None
    ) -> httpx.Request:
        """`target` is a path, or a URL fedqueue gave (a status_url): only its path and query are kept,
        so an app that reaches fedqueue at another address than its public one follows it too."""
        if target.startswith(("http://", "https://")):
            parts = urlsplit(target)
            target = f"{parts.path}?{parts.query}" if parts.query else parts.path
        # httpx drops a URL's own query when given params, even none: merge them here.
        url = httpx.URL(f"{self.base_url}{target}")
        url = url.copy_merge_params({k: v for k, v in (params or {}).items() if v is not None})
        return httpx.Request(method, url, json=body, headers=self._headers)

    def post_activity(self, actor: str, activity: Mapping[str, Any]) -> Call[Posted]:
        """POST an activity (or a bare object, wrapped in a Create) to the actor's outbox."""
        request = self._request("POST", f"/actors/{quote(actor)}/outbox", body=dict(activity))
        return Call(request, lambda r: build(Posted, r.json(), created=r.status_code == 201))

    def status(
        self, ref: int | str, state: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> Call[StatusPage]:
        """One page of an activity's status: `ref` is its outbox id, its status_url or a `next` URL."""
        target = f"/admin/activities/{ref}" if isinstance(ref, int) else ref
        params = {"state": state, "cursor": cursor, "limit": limit}
        return Call(self._request("GET", target, params), _status_page)

    def pull(
        self, actor: str, consumer: str, cursor: int | None = None, limit: int | None = None
    ) -> Call[InboxPage]:
        """The actor's inbox entries after `cursor` (else after the consumer's acknowledged one).

        Passing `cursor` acknowledges every entry up to it for `consumer`.
        """
        params = {"consumer": consumer, "cursor": cursor, "limit": limit}
        return Call(self._request("GET", f"/actors/{quote(actor)}/inbox", params), _inbox_page)

    def create_actor(self, name: str) -> Call[CreatedActor]:
        """POST /admin/actors (admin token): a new local actor and its outbox token."""
        return Call(self._request("POST", "/admin/actors", body={"name": name}), _reader(CreatedActor))

    def list_actors(self, cursor: str | None = None, limit: int | None = None) -> Call[ActorPage]:
        """GET /admin/actors (admin token): one page of the local actors by name, deleted ones too."""
        params = {"cursor": cursor, "limit": limit}
        return Call(self._request("GET", "/admin/actors", params), _actor_page)

    def rotate_token(self, actor: str) -> Call[ActorToken]:
        """POST /admin/actors/{actor}/token (admin token): a new outbox token; the old one stops working."""
        return Call(self._request("POST", f"/admin/actors/{quote(actor)}/token"), _reader(ActorToken))

    def update_profile(self, actor: str, change: ProfileChange) -> Call[Profile]:
        """PATCH /admin/actors/{actor} (admin token): its profile; the actor's Update follows."""
        request = self._request("PATCH", f"/admin/actors/{quote(actor)}", body=dict(change))
        return Call(request, _profile)

    def add_webhook(self, actor: str, url: str, **options: Unpack[WebhookOptions]) -> Call[Webhook]:
        """POST /admin/webhooks (admin token): the answer holds the secret, shown this once."""
        body = {"actor": actor, "url": url, **options}
        return Call(self._request("POST", "/admin/webhooks", body=body), _reader(Webhook))


def _reader(cls: type[T]) -> Callable[[httpx.Response], T]:
    return lambda response: build(cls, response.json())


def _actor_page(response: httpx.Response) -> ActorPage:
    data = response.json()
    return build(ActorPage, data, items=tuple(build(ListedActor, item) for item in data["items"]))


def _profile(response: httpx.Response) -> Profile:
    data = response.json()["profile"]
    return build(Profile, data, fields=tuple(build(ProfileField, item) for item in data["fields"]))


def _status_page(response: httpx.Response) -> StatusPage:
    data = response.json()
    deliveries = [build(Delivery, d) for d in data["deliveries"]]
    return build(StatusPage, data, deliveries=deliveries, counts=dict(data["counts"]))


def _inbox_page(response: httpx.Response) -> InboxPage:
    data = response.json()
    return build(InboxPage, data, items=[build(InboxItem, item) for item in data["items"]])
