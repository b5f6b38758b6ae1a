from __future__ import annotations

from pathlib import Path

import pytest

from fedqueue.rules.errors import SettingsError
from fedqueue.settings import load_settings


def test_defaults_come_from_the_toml_file() -> None:
    settings = load_settings()
    assert settings.base_url == "http://127.0.0.1:8000"
    assert settings.database_url == "sqlite+aiosqlite:///fedqueue.db"
    assert settings.retry_base_seconds == 30


def test_environment_overrides_the_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDQUEUE_BASE_URL", "https://social.example/")
    monkeypatch.setenv("FEDQUEUE_RETRY_MAX_ATTEMPTS", "7")
    settings = load_settings()
    assert settings.base_url == "https://social.example"
    assert settings.host == "social.example"
    assert settings.retry_max_attempts == 7


@pytest.mark.parametrize(
    ("variable", "value", "complaint"),
    [
        ("FEDQUEUE_RETRY_BASE_SECONDS", "soon", "valid number"),
        ("FEDQUEUE_RETRY_BASE_SECONDS", "-1", "greater than 0"),
        ("FEDQUEUE_BASE_URL", "ftp://example.org", "http(s) origin"),
        ("FEDQUEUE_BASE_URL", "https://example.org/app", "origin only"),
        ("FEDQUEUE_DATABASE_URL", "mysql://x", "sqlite+aiosqlite://"),
        ("FEDQUEUE_ALLOW_PRIVATE_ADDRESSES", "maybe", "valid boolean"),
        ("FEDQUEUE_LOG_FORMAT", "xml", "'text' or 'json'"),
    ],
)
def test_a_bad_setting_is_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str, complaint: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(variable)
    assert complaint in message


def test_an_unknown_key_in_the_config_file_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    original = Path(__file__).parents[2] / "config" / "fedqueue.toml"
    config = tmp_path / "fedqueue.toml"
    config.write_text(original.read_text() + "\nretry_bse_seconds = 3\n")
    monkeypatch.setenv("FEDQUEUE_CONFIG", str(config))
    with pytest.raises(
        SettingsError,
        match=r"FEDQUEUE_RETRY_BSE_SECONDS: unknown setting retry_bse_seconds in .*"
        r"\(did you mean retry_base_seconds\?\)",
    ):
        load_settings()


def test_a_missing_config_file_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("FEDQUEUE_CONFIG", str(tmp_path / "nope.toml"))
    with pytest.raises(SettingsError, match=r"nope\.toml not found"):
        load_settings()


def test_a_config_file_that_is_not_toml_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    config = tmp_path / "broken.toml"
    config.write_text("retry_base_seconds = \n")
    monkeypatch.setenv("FEDQUEUE_CONFIG", str(config))
    with pytest.raises(SettingsError, match=r"broken\.toml is not valid TOML: ") as raised:
        load_settings()
    assert "\n" not in str(raised.value)


def test_an_admin_token_under_24_characters_is_refused_in_one_line_that_does_not_repeat_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FEDQUEUE_ADMIN_TOKEN", "x" * 23)
    with pytest.raises(SettingsError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith("FEDQUEUE_ADMIN_TOKEN: must be at least 24 characters")
    assert "\n" not in message and "x" * 23 not in message
    monkeypatch.setenv("FEDQUEUE_ADMIN_TOKEN", "x" * 24)
    assert load_settings().admin_token == "x" * 24
    monkeypatch.setenv("FEDQUEUE_ADMIN_TOKEN", "")
    assert load_settings().admin_token == ""  # unset: /admin refuses everything, serve starts


def test_a_check_across_settings_does_not_print_them_all(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDQUEUE_ADMIN_TOKEN", "a-secret-admin-token-of-some-length")
    monkeypatch.setenv("FEDQUEUE_INBOX_RETENTION_DAYS", "0.1")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert "inbox_retention_days must be longer" in str(caught.value)
    assert "a-secret-admin-token" not in str(caught.value)


def test_login_failures_must_be_remembered_at_least_as_long_as_the_longest_refusal(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("FEDQUEUE_ADMIN_LOGIN_FORGET_SECONDS", "60")
    with pytest.raises(
        SettingsError, match="FEDQUEUE_ADMIN_LOGIN_FORGET_SECONDS: must be at least admin_login"
    ):
        load_settings()


def test_a_config_file_lacking_keys_names_them_all_and_shows_no_secret(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = tmp_path / "partial.toml"
    config.write_text(
        'database_url = "postgresql+asyncpg://fq:hunter2pass@db/fq"\n'
        'admin_token = "super-secret-admin-token-of-the-test"\n'
    )
    monkeypatch.setenv("FEDQUEUE_CONFIG", str(config))
    with pytest.raises(SettingsError) as caught:
        load_settings()
    message = str(caught.value)
    assert "hunter2pass" not in message and "super-secret" not in message
    assert "\n" not in message
    assert f"config file {config} lacks " in message
    assert "base_url, " in message and "worker_stall_seconds" in message
    assert "does not merge" in message


def test_a_bad_database_url_is_shown_without_its_password(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDQUEUE_DATABASE_URL", "mysql://fq:hunter2pass@db/fq")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert "hunter2pass" not in str(caught.value)
    assert "mysql://fq:********@db/fq" in str(caught.value)


@pytest.mark.parametrize("entry", ["https://friends.example/", "bad host"])
def test_an_allowlist_entry_that_is_no_domain_is_refused_naming_it(
    monkeypatch: pytest.MonkeyPatch, entry: str
) -> None:
    monkeypatch.setenv("FEDQUEUE_FEDERATION_ALLOWLIST", f"ok.example, {entry}")
    with pytest.raises(SettingsError) as caught:
        load_settings()
    assert str(caught.value).startswith(f"FEDQUEUE_FEDERATION_ALLOWLIST: {entry!r} ")
