"""`Client` (blocking) and `AsyncClient`: thin shells that send `calls.Endpoint`'s requests with httpx.

Each method is one line: build the call (`calls`), send it, parse the answer. Construct with the
token of the actor the app posts and pulls for, or with the admin token for `create_actor`,
`update_profile` and `add_webhook`; pass `http=` to bring your own configured httpx client (it
is then not closed). Every failure is a `FedqueueError` (httpx's own errors are translated in
`calls.translated`), so an app catches one exception tree.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from types import TracebackType
from typing import Any, Self, TypeVar, Unpack

import httpx

from fedqueue.client.answers import ActorPage, ActorToken, CreatedActor, Posted, Profile, Webhook
from fedqueue.client.calls import Call, Endpoint, ProfileChange, WebhookOptions, translated
from fedqueue.rules.wire_delivery_status import StatusPage
from fedqueue.rules.wire_inbox_item import InboxPage

T = TypeVar("T")
DEFAULT_TIMEOUT_S = 10.0


class Client:
    """fedqueue for a blocking app (scripts, Django, Flask)."""

    def __init__(
        self, base_url: str, token: str, http: httpx.Client | None = None, timeout: float = DEFAULT_TIMEOUT_S
    ) -> None:
        self.endpoint = Endpoint(base_url, token)
        self._owned = http is None
        self._http = http or httpx.Client(timeout=timeout)

    def _run(self, call: Call[T]) -> T:
        with translated(call.request):
            response = self._http.send(call.request)
        return call.parse(response)

    def post(self, actor: str, activity: Mapping[str, Any]) -> Posted:
        """Hand an activity to `actor`'s outbox; its id and status URL."""
        return self._run(self.endpoint.post_activity(actor, activity))

    def status(
        self, ref: int | str, state: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> StatusPage:
        """One page of an activity's status (`ref`: outbox id, status_url or a page's `next`)."""
        return self._run(self.endpoint.status(ref, state, cursor, limit))

    def status_pages(
        self, ref: int | str, state: str | None = None, limit: int | None = None
    ) -> Iterator[StatusPage]:
        """Every page of an activity's status, following `next`."""
        page = self.status(ref, state, limit=limit)
        yield page
        while page.next is not None:
            page = self.status(page.next)
            yield page

    def pull(
        self, actor: str, consumer: str, cursor: int | None = None, limit: int | None = None
    ) -> InboxPage:
        """Inbox entries after `cursor` (acknowledging up to it) or after the consumer's last acknowledged."""
        return self._run(self.endpoint.pull(actor, consumer, cursor, limit))

    def ack(self, actor: str, consumer: str, cursor: int) -> None:
        """Acknowledge every entry up to `cursor` for `consumer` (a pull that keeps one entry at most)."""
        self.pull(actor, consumer, cursor, limit=1)

    def create_actor(self, name: str) -> CreatedActor:
        """A new local actor (admin token); keep its token, it is shown once."""
        return self._run(self.endpoint.create_actor(name))

    def list_actors(self, cursor: str | None = None, limit: int | None = None) -> ActorPage:
        """One page of the local actors by name (admin token); pass its `next_cursor` for the next."""
        return self._run(self.endpoint.list_actors(cursor, limit))

    def rotate_token(self, actor: str) -> ActorToken:
        """A new outbox token for `actor` (admin token), shown once; the old one is refused at once."""
        return self._run(self.endpoint.rotate_token(actor))

    def update_profile(self, actor: str, **change: Unpack[ProfileChange]) -> Profile:
        """Change `actor`'s profile (admin token): its document at once, its Update to its followers."""
        return self._run(self.endpoint.update_profile(actor, change))

    def add_webhook(self, actor: str, url: str, **options: Unpack[WebhookOptions]) -> Webhook:
        """A webhook for a consumer of `actor`'s inbox (admin token); its secret is in this answer only."""
        return self._run(self.endpoint.add_webhook(actor, url, **options))

    def close(self) -> None:
        if self._owned:
            self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class AsyncClient:
    """fedqueue for an asyncio app (Starlette, FastAPI, aiohttp): `Client`'s methods, awaited."""

    def __init__(
        self,
        base_url: str,
        token: str,
        http: httpx.AsyncClient | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.endpoint = Endpoint(base_url, token)
        self._owned = http is None
        self._http = http or httpx.AsyncClient(timeout=timeout)

    async def _run(self, call: Call[T]) -> T:
        with translated(call.request):
            response = await self._http.send(call.request)
        return call.parse(response)

    async def post(self, actor: str, activity: Mapping[str, Any]) -> Posted:
        """Hand an activity to `actor`'s outbox; its id and status URL."""
        return await self._run(self.endpoint.post_activity(actor, activity))

    async def status(
        self, ref: int | str, state: str | None = None, cursor: str | None = None, limit: int | None = None
    ) -> StatusPage:
        """One page of an activity's status (`ref`: outbox id, status_url or a page's `next`)."""
        return await self._run(self.endpoint.status(ref, state, cursor, limit))

    async def status_pages(
        self, ref: int | str, state: str | None = None, limit: int | None = None
    ) -> AsyncIterator[StatusPage]:
        """Every page of an activity's status, following `next`."""
        page = await self.status(ref, state, limit=limit)
        yield page
        while page.next is not None:
            page = await self.status(page.next)
            yield page

    async def pull(
        self, actor: str, consumer: str, cursor: int | None = None, limit: int | None = None
    ) -> InboxPage:
        """Inbox entries after `cursor` (acknowledging up to it) or after the consumer's last acknowledged."""
        return await self._run(self.endpoint.pull(actor, consumer, cursor, limit))

    async def ack(self, actor: str, consumer: str, cursor: int) -> None:
        """Acknowledge every entry up to `cursor` for `consumer` (a pull that keeps one entry at most)."""
        await self.pull(actor, consumer, cursor, limit=1)

    async def create_actor(self, name: str) -> CreatedActor:
        """A new local actor (admin token); keep its token, it is shown once."""
        return await self._run(self.endpoint.create_actor(name))

    async def list_actors(self, cursor: str | None = None, limit: int | None = None) -> ActorPage:
        """One page of the local actors by name (admin token); pass its `next_cursor` for the next."""
        return await self._run(self.endpoint.list_actors(cursor, limit))

    async def rotate_token(self, actor: str) -> ActorToken:
        """A new outbox token for `actor` (admin token), shown once; the old one is refused at once."""
        return await self._run(self.endpoint.rotate_token(actor))

    async def update_profile(self, actor: str, **change: Unpack[ProfileChange]) -> Profile:
        """Change `actor`'s profile (admin token): its document at once, its Update to its followers."""
        return await self._run(self.endpoint.update_profile(actor, change))

    async def add_webhook(self, actor: str, url: str, **options: Unpack[WebhookOptions]) -> Webhook:
        """A webhook for a consumer of `actor`'s inbox (admin token); its secret is in this answer only."""
        return await self._run(self.endpoint.add_webhook(actor, url, **options))

    async def aclose(self) -> None:
        if self._owned:
            await self._http.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
