"""Random and hostile bodies and headers thrown at the inbox never get a 5xx, on both engines;
among them forwarded activities whose Linked Data signature was made costly to check."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import respx
from cryptography.hazmat.primitives.asymmetric import rsa
from hypothesis import given
from hypothesis import strategies as st

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient, SigningIdentity, signed_headers
from fedqueue.rules.signing import keys, ld_signatures
from fedqueue.rules.signing.requests import sha256_digest_header
from fedqueue.settings import load_settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.web.app import create_app
from tests.fuzzing import (
    check_answer,
    costly_ld_fields,
    fuzz_settings,
    hostile_bodies,
    hostile_text,
    odd_ip_urls,
)
from tests.helpers import asgi_client

BOB = "https://remote.example/users/bob"
BOB_KEYS = keys.generate_key_pair()
#: A remote actor whose document's inbox holds a NUL: its Follow must not reach the database.
CAROL = "https://remote.example/users/carol"
CAROL_KEYS = keys.generate_key_pair()
#: A relay: forwards bob's LD-signed activities under its own HTTP signature.
DAVE = "https://remote.example/users/dave"
SIGNERS = {BOB: BOB_KEYS, CAROL: CAROL_KEYS, DAVE: keys.generate_key_pair()}
LOCAL = "http://127.0.0.1:8000"
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
        "id": st.sampled_from([f"{BOB}/a/1", "https://elsewhere.example/1", "", "not a uri"])
        | st.builds(lambda text: f"{BOB}/a/{text}", hostile_text)
        | odd_ip_urls
        | json_values,
        "type": st.sampled_from(["Follow", "Undo", "Delete", "Create", "Accept"])
        | hostile_text
        | json_values,
        "actor": st.sampled_from([BOB, CAROL, {"id": BOB}, "https://elsewhere.example/u", ""])
        | odd_ip_urls
        | hostile_text
        | json_values,
        "object": st.sampled_from(["http://127.0.0.1:8000/actors/alice", BOB]) | hostile_text | json_values,
        "to": st.lists(st.sampled_from(["http://127.0.0.1:8000/actors/alice", "x"]) | odd_ip_urls, max_size=3)
        | json_values,
    },
)
bodies = st.one_of(
    st.binary(max_size=300),
    json_values.map(lambda value: json.dumps(value).encode()),
    activities.map(lambda value: json.dumps(value).encode()),
    hostile_bodies(activities),
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
Request = tuple[str, bytes, dict[str, str], str | None]


def _signed_activity(path: str, signer: str, kind: str, suffix: str) -> Request:
    """A well-formed activity by its signer, so the storing path (a Follow's follower) is reached."""
    doc = {"id": f"{signer}/a/{suffix}", "type": kind, "actor": signer, "object": f"{LOCAL}/actors/alice"}
    return path, json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass"), {}, signer


signed_activities = st.builds(
    _signed_activity,
    st.sampled_from(PATHS[:2]),
    st.sampled_from([BOB, CAROL]),
    st.sampled_from(["Follow", "Like", "Undo"]),
    st.sampled_from(["1", "2"]) | hostile_text,
)


def _ld_signed_create() -> dict[str, Any]:
    """bob's Create of a note, LD-signed by bob (signed once: the examples change copies of it)."""
    note = {"id": f"{BOB}/notes/1", "type": "Note", "attributedTo": BOB, "content": "hi"}
    doc = {"id": f"{BOB}/a/forwarded", "type": "Create", "actor": BOB, "object": note}
    doc["@context"] = ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"]
    private_key = keys.load_private_key(BOB_KEYS.private_pem)
    assert isinstance(private_key, rsa.RSAPrivateKey)
    return ld_signatures.sign(doc, f"{BOB}#main-key", private_key, utcnow())


LD_SIGNED_CREATE = _ld_signed_create()


def _forwarded(path: str, field: tuple[str, Any]) -> Request:
    """bob's LD-signed Create with a field made costly to check (`costly_ld_fields`), sent by dave."""
    name, value = field
    doc = {**LD_SIGNED_CREATE, name: value}
    return path, json.dumps(doc).encode(), {}, DAVE


forwarded_activities = st.builds(_forwarded, st.sampled_from(PATHS[:2]), costly_ld_fields)
requests = st.one_of(
    st.tuples(
        st.sampled_from(PATHS),
        bodies,
        st.fixed_dictionaries({}, optional=header_values),
        st.sampled_from([None, BOB, CAROL]),
    ),
    signed_activities,
    forwarded_activities,
)


def remote_documents(request: httpx.Request) -> httpx.Response:
    """The only remotes: bob's, carol's (NUL in the inbox) and dave's actor documents, and bob's
    note (forwarded activities' re-fetch); everything else is 404."""
    uri = str(request.url)
    if uri == LD_SIGNED_CREATE["object"]["id"]:
        return httpx.Response(200, json=LD_SIGNED_CREATE["object"])
    if uri in SIGNERS:
        doc = {
            "id": uri,
            "type": "Person",
            "inbox": f"{uri}/inbox\x00" if uri == CAROL else f"{uri}/inbox",
            "publicKey": {"id": f"{uri}#main-key", "owner": uri, "publicKeyPem": SIGNERS[uri].public_pem},
        }
        return httpx.Response(200, json=doc, headers={"content-type": "application/activity+json"})
    return httpx.Response(404)


def test_random_requests_to_the_inbox_never_get_a_5xx(database_url: str) -> None:
    config = load_settings(
        database_url=database_url, base_url="http://127.0.0.1:8000", http_transport="httpx"
    )
    loop = asyncio.new_event_loop()
    store = Store.open(database_url)
    remotes = respx.mock(assert_all_called=False)  # the only remotes: `remote_documents`
    remotes.route().mock(side_effect=remote_documents)
    remotes.start()
    client = HttpClient(config)
    app = create_app(config, store, directory=RemoteDirectory(store, client))
    http = asgi_client(app)
    loop.run_until_complete(store.actors.create("alice"))
    identities = {
        uri: SigningIdentity(f"{uri}#main-key", keys.load_private_key(pair.private_pem))
        for uri, pair in SIGNERS.items()
    }

    @fuzz_settings(max_examples=200)
    @given(requests)
    def fuzz(request: Request) -> None:
        path, body, headers, signer = request
        sent: dict[str, Any] = {"content-type": "application/activity+json"}
        if signer is not None:  # really signed, then overridden by the random headers
            sent.update(
                signed_headers(
                    "POST",
                    f"http://127.0.0.1:8000{path}",
                    identities[signer],
                    utcnow(),
                    digest=sha256_digest_header(body),
                )
            )
        sent.update(headers)
        response = loop.run_until_complete(http.post(path, content=body, headers=sent))
        check_answer(response)
        assert response.status_code in (202, 400, 401, 403, 404, 413, 415)

    try:
        fuzz()
    finally:
        loop.run_until_complete(http.aclose())
        loop.run_until_complete(client.aclose())
        loop.run_until_complete(store.close())
        loop.close()
        remotes.stop()
