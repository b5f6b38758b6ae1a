"""The LD signature checker's deadline and its few threads: a check answers within the deadline,
and checks beyond what its threads can do in time are refused, counted, not queued forever."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from fedqueue.inbound.ld_verifier import LdVerifier
from fedqueue.rules.signing import keys
from fedqueue.rules.signing import ld_signatures as ld
from fedqueue.settings import load_settings


def costly(n: int = 960) -> dict[str, Any]:
    """Under every count bound, yet about 0.2 s of expansion: the costliest shape allowed."""
    return {
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": "https://a.example/a/1",
        "type": "Create",
        "actor": "https://a.example/u",
        "to": list(range(n)),
        "signature": {
            "type": ld.SIGNATURE_TYPE,
            "creator": "https://a.example/u#k",
            "signatureValue": "AAAA",
        },
    }


@pytest.fixture(scope="module")
def public_pem() -> str:
    return keys.generate_key_pair().public_pem


def verifier(refusals: Counter[str], **settings: Any) -> LdVerifier:
    config = load_settings(database_url="sqlite+aiosqlite:///unused.db", **settings)
    return LdVerifier(config, lambda reason: refusals.update([reason]))


async def test_a_check_longer_than_the_deadline_is_answered_at_the_deadline(public_pem: str) -> None:
    refusals: Counter[str] = Counter()
    checker = verifier(refusals, ld_deadline_seconds=0.01)
    with pytest.raises(ld.TooCostly, match=r"not checked within 0\.01 s"):  # not waited for
        await checker.verify(costly(), public_pem)
    assert refusals == {"deadline": 1}
    checker.close()


async def test_checks_beyond_what_the_threads_do_in_time_are_refused_not_queued(public_pem: str) -> None:
    refusals: Counter[str] = Counter()
    checker = verifier(refusals, ld_deadline_seconds=0.5, ld_max_concurrent=1)
    outcomes = await asyncio.gather(
        *(checker.verify(costly(), public_pem) for _ in range(10)), return_exceptions=True
    )
    # One thread, ~0.2 s a check, 0.5 s each: at most three are checked (and found forged).
    assert sum(isinstance(outcome, ld.Forged) for outcome in outcomes) <= 3
    assert all(isinstance(outcome, (ld.Forged, ld.TooCostly)) for outcome in outcomes)
    assert refusals["deadline"] >= 7
    checker.close()


async def test_a_cheap_check_is_done(public_pem: str) -> None:
    refusals: Counter[str] = Counter()
    checker = verifier(refusals)
    with pytest.raises(ld.Forged):
        await checker.verify(costly(3), public_pem)
    assert refusals == {}
    checker.close()
