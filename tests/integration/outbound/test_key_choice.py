"""Per-host key choice: Ed25519 (RFC 9421) to hosts that accept it, RSA to the others, learned
from what each host answers and remembered on its row (`hosts.signature_key`).

The RSA-only peer verifies with apsig (an implementation fedqueue did not write) and refuses
every Ed25519 signature with 401, as a server that cannot read the key does."""

from __future__ import annotations

from datetime import timedelta

from aiohttp import web
from apsig.draft.verify import Verifier
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import select, update

from fedqueue.metrics import Metrics
from fedqueue.rules.signing.keys import generate_key_pair, load_public_key
from fedqueue.rules.signing.multikey import encode_ed25519
from fedqueue.rules.signing.requests import parse_request_signatures, verify_parsed
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.schema import HOSTS
from fedqueue.web.app import create_app
from tests.conftest import ADMIN_TOKEN
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import fast, insert_outbox_row, run_burst

INBOXES = 12
#: The remote actors' own keys (their documents must carry some; nothing here verifies them).
_PEER_KEY = Ed25519PrivateKey.generate()
PEER_MULTIKEY = encode_ed25519(_PEER_KEY.public_key())
PEER_RSA_PEM = generate_key_pair().public_pem
ADMIN = {"Authorization": f"Bearer {ADMIN_TOKEN}"}


def is_ed25519(request: Recorded) -> bool:
    return 'alg="ed25519"' in request.headers.get("signature-input", "")


def rsa_only_peer(server: LoopbackServer, rsa_pem: str) -> None:
    """Refuses Ed25519 with 401; takes a draft-cavage RSA delivery that apsig verifies."""

    def answer(request: Recorded) -> web.Response:
        if is_ed25519(request):
            return web.Response(status=401, text="unsupported signature algorithm")
        url = server.url(request.path)
        try:
            Verifier(rsa_pem, "POST", url, request.headers, request.body).verify(raise_on_fail=True)
        except Exception as exc:
            return web.Response(status=401, text=f"signature: {exc}")
        return web.Response(status=202)

    for n in range(INBOXES):
        server.on("POST", f"/users/u{n}/inbox", answer)


def ed25519_peer(server: LoopbackServer, ed25519_pem: str, rsa_pem: str) -> None:
    """Takes a delivery whose signature verifies under the actor's Ed25519 or RSA key."""
    public = {"ed25519": load_public_key(ed25519_pem), "rsa": load_public_key(rsa_pem)}

    def answer(request: Recorded) -> web.Response:
        url = server.url(request.path)
        (signature,) = parse_request_signatures(request.headers)
        key = public["ed25519" if signature.key_id and signature.key_id.endswith("#ed25519-key") else "rsa"]
        verify_parsed(signature, "POST", url, request.headers, request.body, key)
        return web.Response(status=202)

    for n in range(INBOXES):
        server.on("POST", f"/users/u{n}/inbox", answer)


def inboxes(server: LoopbackServer) -> list[str]:
    return [server.url(f"/users/u{n}/inbox") for n in range(INBOXES)]


def posts(server: LoopbackServer) -> list[Recorded]:
    return [r for r in server.requests if r.method == "POST"]


async def host_key(store: Store, server: LoopbackServer) -> tuple[str, object]:
    async with store.database.reading() as conn:
        query = select(HOSTS.c.signature_key, HOSTS.c.key_checked_at)
        row = (await conn.execute(query.where(HOSTS.c.host == f"127.0.0.1:{server.port}"))).one()
    return row.signature_key, row.key_checked_at


async def test_an_rsa_only_host_gets_every_delivery_for_one_refused_ed25519_request_per_recheck(
    settings: Settings, store: Store, remote: LoopbackServer, other: LoopbackServer
) -> None:
    alice = (await store.actors.create("alice")).actor
    for server in (remote, other):
        rsa_only_peer(server, alice.public_key_pem)
    first = fast(settings, signature_key_policy="ed25519-first")
    await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "https://x.example/1"}, inboxes(remote) + inboxes(other)
    )
    metrics = Metrics()
    await run_burst(first, store, metrics=metrics)
    lines = metrics.render()
    assert f'fedqueue_signature_key_total{{key="rsa",scheme="cavage"}} {2 * INBOXES}' in lines
    assert 'fedqueue_signature_key_fallbacks_total{reason="refused"} 2' in lines  # one per host
    assert 'fedqueue_signature_key_fallbacks_total{reason="asked"} 0' in lines

    for server in (remote, other):
        accepted = [r for r in posts(server) if not is_ed25519(r)]
        assert sorted(r.path for r in accepted) == sorted(f"/users/u{n}/inbox" for n in range(INBOXES))
        assert len([r for r in posts(server) if is_ed25519(r)]) == 1  # the one extra request
        assert (await host_key(store, server))[0] == "rsa"

    await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "https://x.example/2"}, inboxes(remote)
    )
    await run_burst(first, store)
    assert len([r for r in posts(remote) if is_ed25519(r)]) == 1  # remembered: none within the recheck
    assert len([r for r in posts(remote) if not is_ed25519(r)]) == 2 * INBOXES

    async with store.database.transaction() as conn:  # the recheck interval has passed
        stale = utcnow() - timedelta(days=first.signature_scheme_recheck_days + 1)
        await conn.execute(update(HOSTS).values(key_checked_at=stale))
    await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "https://x.example/3"}, inboxes(remote)
    )
    await run_burst(first, store)
    assert len([r for r in posts(remote) if is_ed25519(r)]) == 2  # one more, then RSA again
    assert len([r for r in posts(remote) if not is_ed25519(r)]) == 3 * INBOXES


async def test_a_host_that_takes_ed25519_gets_it_and_keeps_it_under_the_default_policy(
    settings: Settings, store: Store, remote: LoopbackServer, other: LoopbackServer
) -> None:
    alice = (await store.actors.create("alice")).actor
    assert alice.ed25519_public_key_pem is not None
    for server in (remote, other):
        ed25519_peer(server, alice.ed25519_public_key_pem, alice.public_key_pem)
    await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "https://x.example/1"}, inboxes(remote)
    )
    metrics = Metrics()
    await run_burst(fast(settings, signature_key_policy="ed25519-first"), store, metrics=metrics)
    assert len(posts(remote)) == INBOXES
    assert all(is_ed25519(r) for r in posts(remote))
    assert f'fedqueue_signature_key_total{{key="ed25519",scheme="rfc9421"}} {INBOXES}' in metrics.render()
    assert all(
        'keyid="http://127.0.0.1:8000/actors/alice#ed25519-key"' in r.headers["signature-input"]
        for r in posts(remote)
    )
    assert (await host_key(store, remote))[0] == "ed25519"

    learned = fast(settings)  # ed25519-where-learned: Ed25519 where learned, RSA elsewhere
    assert learned.signature_key_policy == "ed25519-where-learned"
    note = {"type": "Like", "object": "https://x.example/2"}
    await insert_outbox_row(store, "alice", note, inboxes(remote) + inboxes(other))
    await run_burst(learned, store)
    assert len(posts(remote)) == 2 * INBOXES and all(is_ed25519(r) for r in posts(remote))
    assert len(posts(other)) == INBOXES and not any(is_ed25519(r) for r in posts(other))

    await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "https://x.example/3"}, inboxes(remote)
    )
    await run_burst(fast(settings, signature_key_policy="rsa"), store)
    assert len(posts(remote)) == 3 * INBOXES
    assert not any(is_ed25519(r) for r in posts(remote)[2 * INBOXES :])


def ed25519_asking_peer(server: LoopbackServer, ed25519_pem: str) -> None:
    """Refuses RSA with 401 and an Accept-Signature asking for Ed25519 (RFC 9421 §5.1); takes a
    delivery whose Ed25519 signature verifies."""
    public = load_public_key(ed25519_pem)

    def answer(request: Recorded) -> web.Response:
        if not is_ed25519(request):
            asks = 'sig1=("@method" "@target-uri" "content-digest");alg="ed25519"'
            return web.Response(status=401, text="signature", headers={"Accept-Signature": asks})
        (signature,) = parse_request_signatures(request.headers)
        verify_parsed(signature, "POST", server.url(request.path), request.headers, request.body, public)
        return web.Response(status=202)

    for n in range(INBOXES):
        server.on("POST", f"/users/u{n}/inbox", answer)


async def test_a_host_that_asks_for_ed25519_gets_every_delivery_signed_with_it_for_one_refused_knock(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    alice = (await store.actors.create("alice")).actor
    assert alice.ed25519_public_key_pem is not None
    ed25519_asking_peer(remote, alice.ed25519_public_key_pem)
    default = fast(settings)
    assert default.signature_key_policy == "ed25519-where-learned"
    await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "https://x.example/1"}, inboxes(remote)
    )
    metrics = Metrics()
    await run_burst(default, store, metrics=metrics)

    accepted = [r for r in posts(remote) if is_ed25519(r)]
    assert sorted(r.path for r in accepted) == sorted(f"/users/u{n}/inbox" for n in range(INBOXES))
    assert len(posts(remote)) == INBOXES + 2  # the first delivery's double knock, refused, asking
    assert (await host_key(store, remote))[0] == "ed25519"
    assert 'fedqueue_signature_key_fallbacks_total{reason="asked"} 1' in metrics.render()

    await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "https://x.example/2"}, inboxes(remote)
    )
    await run_burst(default, store)
    assert len(posts(remote)) == 2 * INBOXES + 2  # remembered: Ed25519 first, nothing refused
    assert all(is_ed25519(r) for r in posts(remote)[INBOXES + 2 :])


async def test_the_admin_host_json_shows_the_key_a_host_is_signed_for(
    settings: Settings, store: Store
) -> None:
    await store.hosts.remember_key("ed.example", "ed25519", utcnow())
    await store.hosts.remember_key("rsa.example", "rsa", utcnow())
    async with asgi_client(create_app(settings, store)) as client:
        for host, key in (("ed.example", "ed25519"), ("rsa.example", "rsa")):
            response = await client.get(f"/admin/hosts/{host}", headers=ADMIN)
            assert response.status_code == 200, response.text
            assert response.json()["signature_key"] == key


def publish_actors(server: LoopbackServer, multikey: bool, implements: bool = False) -> list[str]:
    """The documents of u0..u11 on `server`, each listing an Ed25519 Multikey (FEP-521a) if asked,
    and, if asked, a `generator` that implements RFC 9421 (FEP-844e, as Mitra's actors say it)."""
    uris = []
    for n in range(INBOXES):
        uri = server.url(f"/users/u{n}")
        document: dict[str, object] = {
            "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"],
            "id": uri,
            "type": "Person",
            "inbox": f"{uri}/inbox",
            "publicKey": {"id": f"{uri}#main-key", "owner": uri, "publicKeyPem": PEER_RSA_PEM},
        }
        if multikey:
            document["assertionMethod"] = [
                {
                    "id": f"{uri}#ed",
                    "type": "Multikey",
                    "controller": uri,
                    "publicKeyMultibase": PEER_MULTIKEY,
                }
            ]
        if implements:
            document["generator"] = {
                "type": "Application",
                "implements": [{"href": "https://datatracker.ietf.org/doc/html/rfc9421", "name": "RFC-9421"}],
            }
        server.serve_json(f"/users/u{n}", document)
        uris.append(uri)
    return uris


async def test_under_the_default_policy_a_host_whose_actors_list_an_ed25519_key_is_tried_with_ed25519(
    settings: Settings, store: Store, remote: LoopbackServer, other: LoopbackServer
) -> None:
    alice = (await store.actors.create("alice")).actor
    assert alice.ed25519_public_key_pem is not None
    ed25519_peer(remote, alice.ed25519_public_key_pem, alice.public_key_pem)
    rsa_only_peer(other, alice.public_key_pem)
    recipients = publish_actors(remote, multikey=True) + publish_actors(other, multikey=True)
    default = fast(settings)
    assert default.signature_key_policy == "ed25519-where-learned"

    await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "https://x.example/1", "to": recipients}
    )
    await run_burst(default, store)

    assert len(posts(remote)) == INBOXES and all(is_ed25519(r) for r in posts(remote))
    assert (await host_key(store, remote))[0] == "ed25519"
    # Listed but refused: one Ed25519 knock, every delivery through RSA, then remembered as rsa.
    assert len([r for r in posts(other) if is_ed25519(r)]) == 1
    assert len([r for r in posts(other) if not is_ed25519(r)]) == INBOXES
    assert (await host_key(store, other))[0] == "rsa"


async def test_under_the_default_policy_a_host_that_lists_no_ed25519_key_is_never_knocked_with_one(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    alice = (await store.actors.create("alice")).actor
    rsa_only_peer(remote, alice.public_key_pem)
    recipients = publish_actors(remote, multikey=False)
    await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "https://x.example/1", "to": recipients}
    )
    await run_burst(fast(settings), store)
    assert len(posts(remote)) == INBOXES and not any(is_ed25519(r) for r in posts(remote))
    assert (await host_key(store, remote))[0] == "unknown"


async def test_under_the_default_policy_a_host_whose_actors_say_they_implement_rfc9421_is_tried_with_ed25519(
    settings: Settings, store: Store, remote: LoopbackServer
) -> None:
    alice = (await store.actors.create("alice")).actor
    assert alice.ed25519_public_key_pem is not None
    ed25519_peer(remote, alice.ed25519_public_key_pem, alice.public_key_pem)
    recipients = publish_actors(remote, multikey=False, implements=True)
    await insert_outbox_row(
        store, "alice", {"type": "Like", "object": "https://x.example/1", "to": recipients}
    )
    await run_burst(fast(settings), store)
    assert len(posts(remote)) == INBOXES and all(is_ed25519(r) for r in posts(remote))
    assert (await host_key(store, remote))[0] == "ed25519"
