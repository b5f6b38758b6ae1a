"""Settings' words: secrets never shown, every missing key at once, typos of variables named."""

from __future__ import annotations

import pytest

from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.federation_policy import check_block_pattern, check_domain_entry
from fedqueue.rules.setting_checks import mask_secrets, missing_keys_line, shown_value, unknown_variables

SETTINGS = ("base_url", "database_url", "admin_token", "retry_base_seconds")


def test_a_database_password_is_masked_wherever_a_url_appears() -> None:
    text = "got 'postgresql+asyncpg://fq:hunter2pass@db/fq' and http://u:p@h/"
    masked = mask_secrets(text)
    assert "hunter2pass" not in masked and ":p@" not in masked
    assert "postgresql+asyncpg://fq:********@db/fq" in masked


@pytest.mark.parametrize("name", ["admin_token", "metrics_token", "webhook_secret", "key_passphrase"])
def test_a_secret_setting_s_value_is_never_shown(name: str) -> None:
    assert shown_value(name, "super-secret-value") == ""


def test_a_plain_value_is_shown_and_a_whole_mapping_of_settings_never() -> None:
    assert shown_value("retry_base_seconds", "soon") == " (got 'soon')"
    assert shown_value("base_url", {"database_url": "x", "admin_token": "y"}) == ""


def test_every_missing_key_is_named_at_once_and_a_file_of_ones_own_replaces_the_defaults() -> None:
    line = missing_keys_line("/etc/fq.toml", ["worker_stall_seconds", "base_url"], own_file=True)
    assert line.startswith("config file /etc/fq.toml lacks 2 keys: base_url, worker_stall_seconds")
    assert "replaces fedqueue/defaults.toml, it does not merge" in line
    assert "\n" not in line


def test_a_misspelt_variable_is_one_line_naming_the_closest_setting() -> None:
    lines = unknown_variables({"FEDQUEUE_BASEURL": "x", "FEDQUEUE_BASE_URL": "y"}, "FEDQUEUE_", SETTINGS)
    assert lines == [
        "FEDQUEUE_BASEURL is not a fedqueue setting and is ignored (did you mean FEDQUEUE_BASE_URL?)"
    ]
    assert unknown_variables({"FEDQUEUE_ZZZ": ""}, "FEDQUEUE_", SETTINGS) == [
        "FEDQUEUE_ZZZ is not a fedqueue setting and is ignored"
    ]


@pytest.mark.parametrize(
    "variable",
    [
        "FEDQUEUE_CONFIG",
        "FEDQUEUE_TEST_DATABASE_URL",
        "FEDQUEUE_REQUIRE_POSTGRES",
        "FEDQUEUE_URL",
        "FEDQUEUE_ACTOR",
        "FEDQUEUE_TOKEN",
        "FEDQUEUE_WEBHOOK_SECRET",
        "OTHER_BASEURL",
    ],
)
def test_variables_fedqueue_its_tests_or_its_apps_read_are_no_warning(variable: str) -> None:
    assert unknown_variables({variable: "1"}, "FEDQUEUE_", SETTINGS) == []


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        (
            "https://friends.example/",
            "'https://friends.example/' is a URL: give its host only, friends.example",
        ),
        ("bad host", "'bad host' is not a host or domain"),
        ("alice@friends.example", "'alice@friends.example' is not a host or domain"),
    ],
)
def test_an_allowlist_or_block_entry_that_is_no_host_is_refused_naming_it(entry: str, said: str) -> None:
    with pytest.raises(InvalidInput, match="^" + said.replace("?", r"\?")):
        check_domain_entry(entry)
    with pytest.raises(InvalidInput, match=repr(entry)):
        check_block_pattern(entry)


@pytest.mark.parametrize(
    "entry", ["friends.example", "relay.example:8443", "[2001:db8::1]:443", "xn--bcher-kva.example"]
)
def test_hosts_domains_and_ports_are_entries(entry: str) -> None:
    assert check_domain_entry(entry) == entry
