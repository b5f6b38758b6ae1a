"""FEP-844e: what a peer's actor document says it implements, and what fedqueue says."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import pytest
from pyld import jsonld

from fedqueue.rules.activitystreams import AS_CONTEXT
from fedqueue.rules.capabilities import (
    IMPLEMENTS_TERM,
    generator,
    implemented,
    names_signature_support,
    with_implements,
)

RFC_9421 = "https://datatracker.ietf.org/doc/html/rfc9421"
ACTOR = {"id": "https://peer.example/users/u", "type": "Person"}


@pytest.mark.parametrize(
    ("said", "supports"),
    [
        # FEP-844e's own example: an anonymous Application as the actor's generator.
        (
            {"generator": {"type": "Application", "implements": [{"href": RFC_9421, "name": "RFC-9421"}]}},
            True,
        ),
        # Mitra and tootik: the Ed25519 algorithm named by a fragment of RFC 9421.
        ({"generator": {"implements": [{"href": f"{RFC_9421}#name-eddsa-using-curve-edwards25"}]}}, True),
        ({"type": "Application", "implements": [{"href": "https://w3id.org/fep/521a"}]}, True),  # on itself
        ({"generator": {"implements": [{"id": RFC_9421}]}}, True),  # an `id` for the `href`
        ({"implements": [f"{RFC_9421}/"]}, True),  # a bare URI
        ({"implements": [{"href": "http://w3id.org/fep/521a"}]}, True),
        ({"generator": {"implements": [{"href": "https://w3id.org/fep/8fcf"}]}}, False),  # other things
        ({"generator": {"implements": [{"href": "https://datatracker.ietf.org/doc/html/rfc9421x"}]}}, False),
        ({"generator": "https://peer.example/app"}, False),  # named, not embedded: nothing said here
        ({"implements": {"href": 9421}}, False),
        ({}, False),
    ],
)
def test_an_actor_says_its_server_takes_rfc9421_or_fep521a_signatures(
    said: dict[str, Any], supports: bool
) -> None:
    assert names_signature_support(ACTOR | said) is supports


def test_only_so_many_entries_are_read() -> None:
    listed = [{"href": f"https://peer.example/feature/{n}"} for n in range(1000)] + [{"href": RFC_9421}]
    assert not names_signature_support({"implements": listed})
    assert len(implemented({"implements": listed, "generator": [{"implements": listed}] * 100})) <= 50 * 5


def shipped_as_context(url: str, _options: Any = None) -> dict[str, Any]:
    assert url == AS_CONTEXT
    text = (
        resources.files("fedqueue.rules.signing").joinpath("contexts", "activitystreams.jsonld").read_text()
    )
    return {"contextUrl": None, "documentUrl": url, "document": json.loads(text)}


def test_what_fedqueue_implements_is_kept_by_a_json_ld_reader() -> None:
    document = with_implements(
        {"@context": AS_CONTEXT, "id": "https://fq.example/actor", "type": "Application"}
    )
    (expanded,) = jsonld.expand(document, {"documentLoader": shipped_as_context})
    listed = expanded["https://w3id.org/fep/844e/implements"]
    hrefs = [link["https://www.w3.org/ns/activitystreams#href"][0]["@id"] for link in listed]
    assert sorted(hrefs) == sorted(link["href"] for link in generator()["implements"])
    assert RFC_9421 in hrefs and "https://w3id.org/fep/521a" in hrefs and "https://w3id.org/fep/8b32" in hrefs
    assert names_signature_support(document) and IMPLEMENTS_TERM in document["@context"]
