"""What a refusal's `Accept-Signature` (RFC 9421 §5.1) teaches `KeyBook`: a host that asks for
Ed25519 gets it in the same attempt and keeps it; one that asks for RSA is settled `rsa`.

The sends are stand-ins that answer as the host would (the wire is `test_key_choice`'s); the
host rows are a real database's, on both engines."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.rsa import generate_private_key

from fedqueue.outbound.key_discovery import KeyBook
from fedqueue.outbound.scheme_discovery import Rekey, SchemeBook
from fedqueue.remote.http_client import SigningIdentity
from fedqueue.rules.key_choice import KeyPolicy
from fedqueue.rules.key_counts import KeyCounts
from fedqueue.rules.outcomes import Attempt
from fedqueue.rules.signing.requests import SignatureScheme
from fedqueue.storage import Store

HOST = "peer.example"
ACTOR = "https://fq.example/actors/alice"
ASKS_ED25519 = 'sig1=("@method" "@target-uri" "content-digest");alg="ed25519"'
ASKS_RSA = 'sig1=("@method" "@target-uri" "content-digest");alg="rsa-v1_5-sha256"'
IDENTITY = SigningIdentity(
    f"{ACTOR}#main-key",
    generate_private_key(public_exponent=65537, key_size=2048),
    Ed25519PrivateKey.generate(),
    f"{ACTOR}#ed25519-key",
)


@dataclass
class Peer:
    """Answers each POST by its key: `rsa` and `ed25519` are (status, Accept-Signature)."""

    rsa: tuple[int, str | None]
    ed25519: tuple[int, str | None] = (202, None)
    posts: list[str] = field(default_factory=list)

    async def send_rsa(self, _rekey: Rekey | None) -> Attempt:
        self.posts.append("rsa")
        status, asks = self.rsa
        return Attempt(status=status, scheme="cavage", accept_signature=asks)

    async def knock_rsa(
        self, first: SignatureScheme, second: SignatureScheme | None, _discovering: bool
    ) -> Attempt:
        """`post_knocking` as the host answers it: a refusal of `first` re-signed under `second`."""
        await asyncio.sleep(0)  # on the wire: the host's other deliveries come meanwhile
        self.posts.append(f"rsa {first}")
        status, asks = self.rsa
        if second is None or status < 400:
            return Attempt(status=status, scheme=first, accept_signature=asks)
        self.posts.append(f"rsa {second}")
        return Attempt(status=status, scheme=second, accept_signature=asks, knocks=2)

    async def send_ed25519(self, signing: SigningIdentity) -> Attempt:
        assert signing.key_id == f"{ACTOR}#ed25519-key"
        self.posts.append("ed25519")
        status, asks = self.ed25519
        return Attempt(status=status, scheme="rfc9421", key="ed25519", accept_signature=asks)


def book(store: Store, policy: KeyPolicy, counts: KeyCounts) -> KeyBook:
    return KeyBook(policy, 7.0, store.hosts, lambda: datetime.now(UTC), counts)


async def deliver(keys: KeyBook, peer: Peer, identity: SigningIdentity = IDENTITY) -> Attempt:
    return await keys.deliver(HOST, identity, peer.send_rsa, peer.send_ed25519)


async def stored_key(store: Store) -> str:
    return (await store.hosts.signature_keys([HOST]))[HOST][0]


async def test_a_host_that_refuses_rsa_asking_for_ed25519_gets_ed25519_in_the_same_attempt_and_keeps_it(
    store: Store,
) -> None:
    counts = KeyCounts()
    keys = book(store, "ed25519-where-learned", counts)
    peer = Peer(rsa=(401, ASKS_ED25519))

    first = await deliver(keys, peer)
    assert (first.status, first.key, first.knocks) == (202, "ed25519", 2)
    assert peer.posts == ["rsa", "ed25519"]  # one request more, in the same attempt
    assert await stored_key(store) == "ed25519"
    assert counts.fallbacks_by == {"asked": 1}

    second = await deliver(book(store, "ed25519-where-learned", counts), peer)  # another worker
    assert (second.status, second.knocks) == (202, 1)
    assert peer.posts == ["rsa", "ed25519", "ed25519"]


async def test_a_host_that_asks_for_ed25519_but_answers_it_with_a_5xx_stays_listed(store: Store) -> None:
    peer = Peer(rsa=(401, ASKS_ED25519), ed25519=(503, None))
    attempt = await deliver(book(store, "ed25519-where-learned", KeyCounts()), peer)
    assert (attempt.status, attempt.knocks) == (503, 2)  # retried later, as any 5xx
    assert await stored_key(store) == "listed"


async def test_an_rsa_refusal_that_asks_for_rsa_settles_the_host_rsa_and_sends_nothing_more(
    store: Store,
) -> None:
    peer = Peer(rsa=(401, ASKS_RSA))
    attempt = await deliver(book(store, "ed25519-where-learned", KeyCounts()), peer)
    assert (attempt.status, attempt.knocks) == (401, 1)
    assert peer.posts == ["rsa"]
    assert await stored_key(store) == "rsa"


async def test_an_ed25519_refusal_that_asks_for_rsa_falls_back_counted_as_asked(store: Store) -> None:
    counts = KeyCounts()
    peer = Peer(rsa=(202, None), ed25519=(401, ASKS_RSA))
    attempt = await deliver(book(store, "ed25519-first", counts), peer)
    assert (attempt.status, attempt.key, attempt.knocks) == (202, "rsa", 2)
    assert peer.posts == ["ed25519", "rsa"]
    assert await stored_key(store) == "rsa"
    assert counts.fallbacks_by == {"asked": 1}

    refused = Peer(rsa=(202, None), ed25519=(401, None))
    await store.hosts.remember_key(HOST, "unknown", datetime.now(UTC))
    await deliver(book(store, "ed25519-first", counts), refused)
    assert counts.fallbacks_by == {"asked": 1, "refused": 1}


async def test_an_ask_for_ed25519_is_not_followed_under_the_rsa_policy_nor_by_an_actor_without_the_key(
    store: Store,
) -> None:
    peer = Peer(rsa=(401, ASKS_ED25519))
    await deliver(book(store, "rsa", KeyCounts()), peer)
    rsa_only = SigningIdentity(IDENTITY.key_id, IDENTITY.private_key)
    await deliver(book(store, "ed25519-where-learned", KeyCounts()), peer, rsa_only)
    assert peer.posts == ["rsa", "rsa"]
    assert HOST not in await store.hosts.signature_keys([HOST])


async def test_a_batch_to_a_host_that_asks_for_ed25519_costs_one_refused_knock_not_one_per_delivery(
    store: Store,
) -> None:
    """The host's other deliveries wait for its first scheme knock (`SchemeBook`); that knock's
    answer asked for Ed25519, so they go with Ed25519, not RSA each refused in turn."""
    keys = book(store, "ed25519-where-learned", KeyCounts())
    down = Peer(rsa=(503, None))  # an answer that teaches nothing: the host's row is read, no more
    await keys.deliver(HOST, IDENTITY, down.send_rsa, down.send_ed25519)
    schemes = SchemeBook("cavage-first", 7.0, lambda: datetime.now(UTC))
    peer = Peer(rsa=(401, ASKS_ED25519))

    async def one() -> Attempt:
        rsa = partial(schemes.deliver, HOST, None, peer.knock_rsa)
        return await keys.deliver(HOST, IDENTITY, rsa, peer.send_ed25519)

    attempts = await asyncio.gather(*(one() for _ in range(12)))
    assert [a.status for a in attempts] == [202] * 12
    assert peer.posts.count("ed25519") == 12
    assert [p for p in peer.posts if p != "ed25519"] == ["rsa cavage", "rsa rfc9421"]  # the one double knock
    assert await stored_key(store) == "ed25519"
