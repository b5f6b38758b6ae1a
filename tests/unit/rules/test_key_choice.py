"""The key a delivery is signed with first, per host and policy, and what an answer teaches."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fedqueue.rules.key_choice import (
    ROTATION_GRACE,
    KeyPolicy,
    asked_key,
    falls_back,
    is_settled,
    learned_from,
    refused_after_rotation,
    signs_ed25519,
    wakes_refused,
)

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)
RECHECK_DAYS = 7.0


@pytest.mark.parametrize(
    ("policy", "known", "checked_days_ago", "ed25519"),
    [
        ("rsa", "ed25519", 0, False),
        ("rsa", "unknown", None, False),
        ("ed25519-where-learned", "ed25519", 30, True),  # learned: kept until refused
        ("ed25519-where-learned", "unknown", None, False),
        ("ed25519-where-learned", "rsa", 30, False),
        ("ed25519-where-learned", "listed", None, True),  # its actors list an Ed25519 key: one knock
        ("rsa", "listed", None, False),
        ("ed25519-first", "listed", None, True),
        ("ed25519-first", "unknown", None, True),
        ("ed25519-first", "rsa", 1, False),  # refused lately: RSA until the recheck
        ("ed25519-first", "rsa", 8, True),  # the recheck is due: one more Ed25519 knock
    ],
)
def test_which_key_a_host_gets_first(
    policy: KeyPolicy, known: str, checked_days_ago: int | None, ed25519: bool
) -> None:
    checked_at = None if checked_days_ago is None else NOW - timedelta(days=checked_days_ago)
    assert signs_ed25519(policy, known, checked_at, RECHECK_DAYS, NOW) is ed25519


def test_an_answer_teaches_ed25519_on_a_2xx_and_rsa_on_a_signature_refusal_only() -> None:
    assert learned_from(202, "") == "ed25519"
    assert learned_from(401, "") == "rsa"
    assert learned_from(403, "") == "rsa"
    assert learned_from(400, "Signature verification failed") == "rsa"
    assert learned_from(400, "bad JSON") is None
    assert learned_from(503, "") is None
    assert learned_from(None, "") is None


def test_a_refusal_falls_back_at_once_and_a_5xx_only_on_a_discovery_knock() -> None:
    assert falls_back(401, "", discovering=False)
    assert falls_back(500, "", discovering=True)
    assert not falls_back(500, "", discovering=False)
    assert not falls_back(202, "", discovering=True)


def test_a_listed_key_is_a_discovery_knock_not_a_settled_one() -> None:
    assert not is_settled("listed", None, RECHECK_DAYS, NOW)
    assert is_settled("ed25519", NOW - timedelta(days=30), RECHECK_DAYS, NOW)


def test_a_signature_refusal_within_the_grace_after_a_rotation_is_retried_not_given_up() -> None:
    lately = NOW - timedelta(minutes=5)
    assert refused_after_rotation(401, "", lately, NOW)
    assert refused_after_rotation(400, "Signature verification failed", lately, NOW)
    assert not refused_after_rotation(404, "", lately, NOW)  # not about the key
    assert not refused_after_rotation(401, "", None, NOW)  # never rotated
    assert not refused_after_rotation(401, "", NOW - ROTATION_GRACE, NOW)  # long enough ago
    assert not refused_after_rotation(401, "", NOW + timedelta(minutes=1), NOW)  # a clock ahead


def test_an_update_a_host_took_after_a_rotation_wakes_what_it_refused_meanwhile() -> None:
    lately = NOW - timedelta(minutes=5)
    assert wakes_refused("Update", 202, lately, NOW)
    assert not wakes_refused("Create", 202, lately, NOW)  # only the Update carries the new key
    assert not wakes_refused("Update", 401, lately, NOW)  # not taken
    assert not wakes_refused("Update", 202, None, NOW)  # never rotated: a profile Update
    assert not wakes_refused("Update", 202, NOW - ROTATION_GRACE, NOW)  # long enough ago


@pytest.mark.parametrize(
    ("accept_signature", "asked"),
    [
        ('sig1=("@method" "@target-uri" "content-digest");alg="ed25519"', "ed25519"),
        ('sig1=("@method" "@authority" "@path");keyid="https://a.example/u#ed25519-key"', "ed25519"),
        ('sig1=("@method" "@target-uri");alg="rsa-v1_5-sha256"', "rsa"),
        ('sig1=("@method");alg="rsa-pss-sha512"', "rsa"),
        ('rsa=("@method");alg="rsa-v1_5-sha256", ed=("@method");alg="ed25519"', "ed25519"),  # either
        ('sig1=("@method" "@target-uri");keyid="https://a.example/u#main-key"', None),  # no alg said
        ('sig1=("@method");alg="hmac-sha256"', None),
        ('sig1=("@method"', None),  # unreadable: nothing learned
        ("", None),
        (None, None),
    ],
)
def test_an_accept_signature_says_which_key_the_host_asks_for(
    accept_signature: str | None, asked: str | None
) -> None:
    assert asked_key(accept_signature) == asked
