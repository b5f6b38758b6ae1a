"""`fedqueue doctor`'s verdicts, from what it gathered."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fedqueue.cli.doctor_checks import (
    admin_token_check,
    allowlist_check,
    autovacuum_check,
    backlog_check,
    clock_check,
    environment_check,
    private_addresses_check,
    proxy_check,
    self_fetch_check,
    workers_check,
)

BASE = "https://fedqueue.example"
NOW = datetime(2025, 3, 1, 12, 0, 0, tzinfo=UTC)


def test_a_long_token_of_one_repeated_character_is_weak_and_a_random_one_strong() -> None:
    weak = admin_token_check("a" * 40)
    assert not weak.ok and "(weak)" in weak.line() and "token_urlsafe" in weak.line()
    strong = admin_token_check("Zq3vX9_kP0wLm2Ty7uRb-Hc5Nd8Fg1Js4AeKoWiQ6x")
    assert strong.ok and "(strong)" in strong.line()
    assert "Zq3v" not in strong.line()


def test_private_addresses_allowed_on_a_public_origin_are_a_cross() -> None:
    assert not private_addresses_check(BASE, allow_private=True).ok
    assert private_addresses_check("https://localhost:8443", allow_private=True).ok
    assert private_addresses_check("http://10.1.2.3:8000", allow_private=True).ok
    assert private_addresses_check(BASE, allow_private=False).ok


def test_a_proxy_that_turns_https_into_http_shows_in_the_self_fetch() -> None:
    actor = f"{BASE}/actors/alice"
    good = {"id": actor, "inbox": f"{actor}/inbox", "publicKey": {"id": f"{actor}#main-key"}}
    assert self_fetch_check(actor, 200, good, BASE).ok
    rewritten = {**good, "inbox": "http://fedqueue.example/actors/alice/inbox"}
    failed = self_fetch_check(actor, 200, rewritten, BASE)
    assert not failed.ok and "inbox" in failed.detail and "docs/deploy.md" in failed.line()
    assert not self_fetch_check(actor, 502, None, BASE).ok


def test_a_clock_two_minutes_off_a_peer_is_a_cross_and_a_second_is_none() -> None:
    assert (
        clock_check(BASE, "Sat, 01 Mar 2025 11:58:00 GMT", NOW, 30).line().startswith("✗ clock: 120 s ahead")
    )
    assert clock_check(BASE, "Sat, 01 Mar 2025 12:00:01 GMT", NOW, 0).ok
    assert not clock_check(BASE, None, NOW, 30).ok
    assert not clock_check(BASE, "yesterday", NOW, 30).ok


def test_autovacuum_off_is_a_cross_naming_the_setting_and_on_a_check() -> None:
    off = autovacuum_check(False)
    assert not off.ok and "never removed" in off.line() and "set `autovacuum = on`" in off.line()
    assert autovacuum_check(True).ok


@pytest.mark.parametrize(
    ("base_url", "trusted_proxies", "ok"),
    [
        (BASE, "", False),  # https: `serve` speaks plain http, so something ends TLS in front
        ("http://fedqueue.example.org", "", False),  # a public name
        (BASE, "127.0.0.1/32", True),
        ("http://127.0.0.1:8000", "", True),
        ("http://localhost:8000", "", True),
    ],
)
def test_a_likely_reverse_proxy_without_trusted_proxies_is_a_cross_naming_the_setting(
    base_url: str, trusted_proxies: str, ok: bool
) -> None:
    check = proxy_check(base_url, trusted_proxies)
    assert check.ok is ok
    if not ok:
        assert check.line().startswith("✗ trusted proxies: none, but")
        assert "fix: set FEDQUEUE_TRUSTED_PROXIES to the proxy's address" in check.line()
        assert "\n" not in check.line()


@pytest.mark.parametrize(
    "token", ["try-out-admin-token-change-me", "please-change-me-before-going-live-0123"]
)
def test_the_readme_s_example_token_or_a_placeholder_is_a_cross_not_fair(token: str) -> None:
    check = admin_token_check(token)
    assert not check.ok
    assert check.line().startswith("✗ admin token: an example token from the README or docs")
    assert token not in check.line()


def test_an_empty_allowlist_in_allowlist_mode_is_a_cross() -> None:
    assert not allowlist_check("allowlist", frozenset()).ok
    assert "FEDQUEUE_FEDERATION_ALLOWLIST" in allowlist_check("allowlist", frozenset()).fix
    assert allowlist_check("allowlist", frozenset({"friends.example"})).ok
    assert allowlist_check("blocklist", frozenset()).ok


def test_no_beating_worker_is_a_cross_and_one_a_check() -> None:
    assert workers_check(0, 0, 5).line().startswith("✗ workers: no worker has ever beaten")
    assert workers_check(2, 0, 5).line().startswith("✗ workers: none of 2 workers has beaten lately")
    assert workers_check(2, 1, 5).line() == "✓ workers: 1 of 2 workers beating"


def test_a_delivery_due_longer_than_the_bound_is_a_cross() -> None:
    assert backlog_check(299, 300).ok
    check = backlog_check(4000, 300)
    assert not check.ok and "due for 4000 s, over 300 s" in check.detail


def test_an_unknown_variable_is_a_cross_naming_it() -> None:
    line = "FEDQUEUE_BASEURL is not a fedqueue setting and is ignored (did you mean FEDQUEUE_BASE_URL?)"
    assert environment_check([line]).line().startswith(f"✗ environment: {line} — fix: ")
    assert environment_check([]).ok
