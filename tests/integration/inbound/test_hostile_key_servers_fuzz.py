"""Forged inbox POSTs whose keyIds name a hostile server, fuzzed: whatever that server answers the
key fetch with (an over-long head, too many headers, a near-1 MiB document listing another key,
two answers in one write, garbage), the inbox answers a 4xx, never a 5xx, and stores nothing
(`remote_actors` stays empty), on both engines. The real HTTP/1.1 client fetches the keys."""

from __future__ import annotations

import asyncio
import json
from itertools import count

from hypothesis import given
from hypothesis import strategies as st

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.http_client import HttpClient, SigningIdentity, signed_headers
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import sha256_digest_header
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.web.app import create_app
from tests.forged import remote_actor_bytes
from tests.fuzzing import check_answer, fuzz_settings
from tests.helpers import asgi_client
from tests.loopback import ScriptedServer

LOCAL = "http://127.0.0.1:8000"
#: The forger signs with this key; the documents its keyIds name list another one, or none.
FORGER = keys.generate_key_pair()
LISTED = keys.generate_key_pair()


def _answer(status: bytes, headers: list[bytes], body: bytes) -> bytes:
    head = [b"HTTP/1.1 " + status, *headers, b"content-length: %d" % len(body)]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def _document(key_id: str, summary_bytes: int) -> bytes:
    uri = key_id.split("#")[0]
    return json.dumps(
        {
            "@context": "https://www.w3.org/ns/activitystreams",
            "id": uri,
            "type": "Person",
            "inbox": f"{uri}/inbox",
            "summary": "x" * summary_bytes,
            "publicKey": {"id": key_id, "owner": uri, "publicKeyPem": LISTED.public_pem},
        }
    ).encode()


JSON = b"content-type: application/activity+json"
#: What the keyId's server answers, given the key id it is asked for: each a hostile shape.
answers = st.one_of(
    st.integers(70_000, 2_000_000).map(lambda n: lambda _: b"HTTP/1.1 200 OK\r\nx-a: " + b"a" * n),
    st.integers(101, 3_000).map(
        lambda n: lambda _: _answer(b"200 OK", [b"x-h%d: v" % i for i in range(n)], b"{}")
    ),
    st.integers(0, 900_000).map(lambda n: lambda key_id: _answer(b"200 OK", [JSON], _document(key_id, n))),
    st.just(
        lambda key_id: (
            _answer(b"200 OK", [JSON], _document(key_id, 10))
            + _answer(b"200 OK", [JSON], _document(key_id, 10))
        )
    ),
    st.binary(max_size=200).map(lambda junk: lambda _: junk + b"\r\n\r\n"),
    st.just(lambda key_id: _answer(b"302 Found", [b"location: " + key_id.encode()], b"")),
)


def test_forged_keyids_naming_hostile_servers_get_a_4xx_and_store_nothing(settings: Settings) -> None:
    loop = asyncio.new_event_loop()
    store = Store.open(settings.database_url)
    client = HttpClient(settings)
    app = create_app(settings, store, directory=RemoteDirectory(store, client))
    http = asgi_client(app)
    current: list[bytes] = [b""]
    server = loop.run_until_complete(ScriptedServer(lambda _: current[0]).start())
    loop.run_until_complete(store.actors.create("alice"))
    forger = keys.load_private_key(FORGER.private_pem)
    numbers = count()

    @fuzz_settings(max_examples=40)
    @given(answers)
    def fuzz(answer_for: object) -> None:
        assert callable(answer_for)
        key_id = server.url(f"/users/p{next(numbers)}") + "#main-key"  # a new key: fetched each time
        current[0] = answer_for(key_id)
        body = json.dumps({"id": f"{key_id}/a", "type": "Like", "actor": key_id.split("#")[0]}).encode()
        headers = signed_headers(
            "POST",
            f"{LOCAL}/inbox",
            SigningIdentity(key_id, forger),
            utcnow(),
            digest=sha256_digest_header(body),
        )
        headers["content-type"] = "application/activity+json"
        response = loop.run_until_complete(http.post("/inbox", content=body, headers=headers))
        check_answer(response)
        assert response.status_code == 401, response.text

    try:
        fuzz()
        assert loop.run_until_complete(remote_actor_bytes(store)) == (0, 0)
    finally:
        loop.run_until_complete(server.stop())
        loop.run_until_complete(http.aclose())
        loop.run_until_complete(client.aclose())
        loop.run_until_complete(store.close())
        loop.close()
