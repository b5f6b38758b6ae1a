"""Random bodies and headers thrown at the inbox never get a 5xx."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from fedqueue import keys
from fedqueue.net import HttpClient, SigningIdentity, signed_headers
from fedqueue.remote import RemoteDirectory
from fedqueue.settings import load_settings
from fedqueue.signatures import sha256_digest_header
from fedqueue.storage import Store
from fedqueue.storage.types import utcnow
from fedqueue.web.app import create_app
from tests.helpers import asgi_client

BOB = "https://remote.example/users/bob"
BOB_KEYS = keys.generate_key_pair()
PATHS = ["/inbox", "/actors/alice/inbox", "/actors/nobody/inbox", "/actors/Bad-Name/inbox"]
printable = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=80)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)
activities = st.fixed_dictionaries(
    {},
    optional={
        "id": st.sampled_from([f"{BOB}/a/1", "https://elsewhere.example/1", "", "not a uri"]) | json_values,
        "type": st.sampled_from(["Follow", "Undo", "Delete", "Create", "Accept"]) | json_values,
        "actor": st.sampled_from([BOB, {"id": BOB}, "https://elsewhere.example/u", ""]) | json_values,
        "object": st.sampled_from(["http://127.0.0.1:8000/actors/alice", BOB]) | json_values,
        "to": st.lists(st.sampled_from(["http://127.0.0.1:8000/actors/alice", "x"]), max_size=3)
        | json_values,
    },
)
bodies = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda value: json.dumps(value).encode()),
    activities.map(lambda value: json.dumps(value).encode()),
)
header_values = {
    "content-type": st.sampled_from(
        [
            "application/activity+json",
            'application/ld+json; profile="https://www.w3.org/ns/activitystreams"',
            "application/ld+json; profile",
            "text/plain",
        ]
    )
    | printable,
    "date": st.sampled_from(["Sun, 05 Jan 2014 21:31:40 GMT", "yesterday", ""]) | printable,
    "digest": st.sampled_from(["SHA-256=", "SHA-256=AAAA", "MD5=x", "SHA-256=a=b,,="]) | printable,
    "signature": st.sampled_from(
        [
            'keyId="https://remote.example/users/bob#main-key",signature="AAAA"',
            'keyId="x",algorithm="hs2019",headers="(created) (expires)",created=1,expires=99999999999,'
            'signature="AAAA"',
            'keyId="https://remote.example/users/bob#main-key",headers="",signature="AAAA"',
        ]
    )
    | printable,
    "content-length": st.sampled_from(["0", "-1", "99999999999", "abc"]),
    "host": st.sampled_from(["127.0.0.1:8000", "other.example"]),
}
requests = st.tuples(
    st.sampled_from(PATHS),
    bodies,
    st.fixed_dictionaries({}, optional=header_values),
    st.booleans(),
)


def remote_documents(request: httpx.Request) -> httpx.Response:
    """The only remote: bob's actor document; everything else is 404."""
    if str(request.url) == BOB:
        doc = {
            "id": BOB,
            "type": "Person",
            "inbox": f"{BOB}/inbox",
            "publicKey": {"id": f"{BOB}#main-key", "owner": BOB, "publicKeyPem": BOB_KEYS.public_pem},
        }
        return httpx.Response(200, json=doc, headers={"content-type": "application/activity+json"})
    return httpx.Response(404)


@pytest.fixture
def sqlite_url(sqlite_template: Path, tmp_path: Path) -> Iterator[str]:
    path = tmp_path / "fuzz.db"
    shutil.copyfile(sqlite_template, path)
    yield f"sqlite+aiosqlite:///{path}"


def test_random_requests_to_the_inbox_never_get_a_5xx(sqlite_url: str) -> None:
    config = load_settings(database_url=sqlite_url, base_url="http://127.0.0.1:8000")
    loop = asyncio.new_event_loop()
    store = Store.open(sqlite_url)
    client = HttpClient(config, transport=httpx.MockTransport(remote_documents))
    app = create_app(config, store, directory=RemoteDirectory(store, client))
    http = asgi_client(app)
    loop.run_until_complete(store.actors.create("alice"))
    identity = SigningIdentity(f"{BOB}#main-key", keys.load_private_key(BOB_KEYS.private_pem))

    @hypothesis_settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
    @given(requests)
    def fuzz(request: tuple[str, bytes, dict[str, str], bool]) -> None:
        path, body, headers, sign = request
        sent: dict[str, Any] = {"content-type": "application/activity+json"}
        if sign:  # really signed by bob, then overridden by the random headers
            sent.update(
                signed_headers(
                    "POST",
                    f"http://127.0.0.1:8000{path}",
                    identity,
                    utcnow(),
                    digest=sha256_digest_header(body),
                )
            )
        sent.update(headers)
        response = loop.run_until_complete(http.post(path, content=body, headers=sent))
        assert response.status_code < 500, (response.status_code, response.text)
        assert response.status_code in (202, 400, 401, 403, 404, 413, 415)

    try:
        fuzz()
    finally:
        loop.run_until_complete(http.aclose())
        loop.run_until_complete(client.aclose())
        loop.run_until_complete(store.close())
        loop.close()
