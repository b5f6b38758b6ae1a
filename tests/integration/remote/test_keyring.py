"""One process parses each local actor's private key once, whoever signs with it: inbox or worker."""

from __future__ import annotations

from collections import Counter

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from starlette.applications import Starlette

from fedqueue.remote.documents import RemoteDirectory
from fedqueue.remote.keyring import Keyring
from fedqueue.rules.urls import Urls
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.storage.actors import ActorStore
from fedqueue.web.app import create_app
from tests.fediverse import LOCAL, RemoteActor, post
from tests.helpers import asgi_client
from tests.loopback import LoopbackServer
from tests.outbound import accept_all, fast, insert_outbox_row, run_burst, verify_delivery


@pytest.fixture
def key_loads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Which local actors' private keys were loaded from the database (and parsed), how often."""
    loads: Counter[str] = Counter()
    load = ActorStore.signing_key

    async def counted(actors: ActorStore, name: str) -> PrivateKeyTypes:
        loads[name] += 1
        return await load(actors, name)

    monkeypatch.setattr(ActorStore, "signing_key", counted)
    return loads


async def test_the_inbox_and_the_worker_of_one_process_parse_an_actors_key_once(
    settings: Settings,
    store: Store,
    directory: RemoteDirectory,
    bob: RemoteActor,
    remote: LoopbackServer,
    key_loads: Counter[str],
) -> None:
    created = await store.actors.create("alice")
    keyring = Keyring(store, Urls(settings.base_url))
    app: Starlette = create_app(settings, store, directory=directory, keyring=keyring)
    async with asgi_client(app) as client:
        for _ in range(3):
            response = await post(
                client, "/actors/alice/inbox", bob.signed("/actors/alice/inbox", bob.note_to("alice"))
            )
            assert response.status_code == 202, response.text
        response = await post(client, "/inbox", bob.signed("/inbox", bob.note_to("alice")))
        assert response.status_code == 202, response.text
    accept_all(remote, ["/users/bob/inbox"])
    await insert_outbox_row(store, "alice", {"type": "Like", "object": bob.uri}, [bob.inbox])
    await insert_outbox_row(store, "alice", {"type": "Like", "object": f"{bob.uri}/2"}, [bob.inbox])
    await run_burst(fast(settings), store, keyring=keyring)

    deliveries = remote.received("POST", "/users/bob/inbox")
    assert len(deliveries) == 2
    for delivery in deliveries:
        verify_delivery(remote, delivery, f"{LOCAL}/actors/alice", created.actor.public_key_pem)
    assert key_loads == {"alice": 1}


async def test_an_unknown_actor_is_not_found_and_a_later_created_one_is_then_found(
    settings: Settings, store: Store, client: httpx.AsyncClient, bob: RemoteActor
) -> None:
    response = await post(
        client, "/actors/carol/inbox", bob.signed("/actors/carol/inbox", bob.note_to("carol"))
    )
    assert response.status_code == 404, response.text
    await store.actors.create("carol")
    response = await post(
        client, "/actors/carol/inbox", bob.signed("/actors/carol/inbox", bob.note_to("carol"))
    )
    assert response.status_code == 202, response.text
