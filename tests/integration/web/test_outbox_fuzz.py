"""Hostile bodies and parameters thrown at the outbox, pull and public routes never get a 5xx."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

from hypothesis import given
from hypothesis import strategies as st

from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.fuzzing import (
    check_answer,
    fuzz_settings,
    hostile_bodies,
    hostile_params,
    hostile_text,
    json_scalars,
    odd_ip_urls,
)
from tests.helpers import asgi_client

ALICE = "http://127.0.0.1:8000/actors/alice"
uris = st.one_of(st.sampled_from([f"{ALICE}/activities/1", "https://b.example/n/1"]), hostile_text)
activities = st.fixed_dictionaries(
    {},
    optional={
        "id": uris | json_scalars,
        "type": st.sampled_from(["Note", "Like", "Undo", "Add", "Create"]) | hostile_text | json_scalars,
        "actor": st.sampled_from([ALICE, {"id": ALICE}]) | uris,
        "object": uris | st.fixed_dictionaries({"id": uris, "type": hostile_text}),
        "target": uris,
        "to": st.lists(uris | odd_ip_urls, max_size=3),
        "content": hostile_text,
    },
)
routes = st.one_of(
    st.tuples(st.just("POST outbox"), hostile_bodies(activities | json_scalars)),
    st.tuples(
        st.sampled_from(["pull", "collection", "activity", "followers", "webfinger", "actor"]),
        st.lists(hostile_params, min_size=1, max_size=3),
    ),
)


def _q(value: str) -> str:
    """Percent-encoded as a client would send it; lone surrogates as their (invalid) UTF-8 bytes."""
    return quote(value, safe="", errors="surrogatepass")


def _request(kind: str, values: Any, token: str) -> tuple[str, str, dict[str, Any]]:
    """(method, path with query, httpx keyword arguments) of one generated request."""
    auth = {"Authorization": f"Bearer {token}"}
    if kind == "POST outbox":
        return "POST", "/actors/alice/outbox", {"content": values, "headers": auth}
    first = _q(values[0])
    if kind == "pull":
        names = ("cursor", "consumer", "limit")
        query = "&".join(f"{name}={_q(v)}" for name, v in zip(names, values, strict=False))
        return "GET", f"/actors/alice/inbox?{query}", {"headers": auth}
    paths = {
        "collection": f"/actors/alice/outbox?page=true&max_id={first}",
        "activity": f"/actors/alice/activities/{first}",
        "followers": f"/actors/alice/followers?page={first}",
        "webfinger": f"/.well-known/webfinger?resource=acct:{first}@127.0.0.1:8000",
        "actor": f"/actors/{first}",
    }
    return "GET", paths[kind], {}


def test_hostile_requests_to_the_outbox_and_pull_routes_never_get_a_5xx(settings: Settings) -> None:
    loop = asyncio.new_event_loop()
    store = Store.open(settings.database_url)
    http = asgi_client(create_app(settings, store))
    token = loop.run_until_complete(store.actors.create("alice")).token

    @fuzz_settings(max_examples=120)
    @given(routes)
    def fuzz(route: tuple[str, Any]) -> None:
        method, path, kwargs = _request(*route, token)
        check_answer(loop.run_until_complete(http.request(method, path, **kwargs)))

    try:
        fuzz()
    finally:
        loop.run_until_complete(http.aclose())
        loop.run_until_complete(store.close())
        loop.close()
