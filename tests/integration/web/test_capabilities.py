"""FEP-844e: every local actor says, through its `generator`, what fedqueue implements of the
signatures and keys (RFC 9421, FEP-521a, FEP-8b32); the instance actor, an `Application`, says it
itself. Another fedqueue reading either learns that the server takes Ed25519 signatures."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from fedqueue.rules.capabilities import names_signature_support
from fedqueue.settings import Settings
from fedqueue.storage import Store
from fedqueue.web.app import create_app
from tests.helpers import asgi_client

ACTIVITY = {"Accept": "application/activity+json"}
SAID = {
    "https://datatracker.ietf.org/doc/html/rfc9421",
    "https://datatracker.ietf.org/doc/html/rfc9421#name-eddsa-using-curve-edwards25",
    "https://w3id.org/fep/521a",
    "https://w3id.org/fep/8b32",
}


@pytest.fixture
async def client(settings: Settings, store: Store) -> AsyncIterator[httpx.AsyncClient]:
    async with asgi_client(create_app(settings, store)) as opened:
        yield opened


async def test_an_actor_document_says_what_fedqueue_implements_through_its_generator(
    client: httpx.AsyncClient, store: Store
) -> None:
    await store.actors.create("alice")
    document = (await client.get("/actors/alice", headers=ACTIVITY)).json()
    made_by = document["generator"]
    assert made_by["type"] == "Application"
    assert {link["href"] for link in made_by["implements"]} == SAID
    assert all(link["name"] for link in made_by["implements"])
    assert any(isinstance(c, dict) and "implements" in c for c in document["@context"])  # a defined term
    assert names_signature_support(document)


async def test_the_instance_actor_says_what_it_implements_itself(client: httpx.AsyncClient) -> None:
    document = (await client.get("/actor", headers=ACTIVITY)).json()
    assert document["type"] == "Application"
    assert {link["href"] for link in document["implements"]} == SAID
    assert any(isinstance(c, dict) and "implements" in c for c in document["@context"])
    assert document["assertionMethod"][0]["type"] == "Multikey"  # FEP-521a's key kept beside it
