"""Settings: defaults from the packaged fedqueue/defaults.toml (or FEDQUEUE_CONFIG), overridden by
FEDQUEUE_* environment variables. A checkout's config/fedqueue.toml is a link to the packaged file.

Validation happens once at start-up; any problem becomes a single-line SettingsError naming
the setting, so `fedqueue serve` never starts half-configured.
"""

from __future__ import annotations

import os
import tomllib
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from fedqueue.rules.errors import InvalidInput, SettingsError
from fedqueue.rules.federation_policy import FederationMode, check_domain_entry, parse_domains
from fedqueue.rules.key_choice import KeyPolicy
from fedqueue.rules.peer_address import Network, parse_networks
from fedqueue.rules.scheme_choice import SchemePolicy
from fedqueue.rules.setting_checks import (
    closest,
    mask_secrets,
    missing_keys_line,
    shown_value,
    unknown_variables,
)

ENV_PREFIX = "FEDQUEUE_"
CONFIG_ENV = f"{ENV_PREFIX}CONFIG"
#: Shortest admin token accepted: 24 characters of a random token are ~140 bits and beyond guessing
#: even at the login throttle's first rate; a word or two is not.
MIN_ADMIN_TOKEN_CHARS = 24


class Settings(BaseSettings):
    """Every setting fedqueue reads. Defaults live only in fedqueue/defaults.toml."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="forbid", frozen=True)

    base_url: str
    database_url: str
    admin_token: str
    metrics_token: str
    allow_private_addresses: bool
    log_format: Literal["text", "json"]
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"]
    otel_enabled: bool

    retry_base_seconds: float = Field(gt=0)
    retry_max_attempts: int = Field(ge=1, le=100)
    retry_cap_seconds: float = Field(gt=0)

    lease_seconds: float = Field(gt=0)
    claim_batch_size: int = Field(ge=1, le=10_000)
    signing_processes: int = Field(ge=1, le=64)
    poll_interval_seconds: float = Field(gt=0)
    shutdown_grace_seconds: float = Field(ge=0)
    worker_heartbeat_seconds: float = Field(gt=0, le=3600)
    worker_stall_seconds: float = Field(gt=0)
    worker_forget_seconds: float = Field(gt=0)
    expansion_max_attempts: int = Field(ge=1, le=100)
    expansion_retry_seconds: float = Field(gt=0)
    expansion_batch_size: int = Field(ge=1, le=10_000)
    bulk_lane_threshold: int = Field(ge=1)

    outbox_max_pending: int = Field(ge=0)
    outbox_max_pending_deliveries: int = Field(ge=0)
    max_recipients_per_activity: int = Field(ge=1)
    max_recipient_fetches_per_activity: int = Field(ge=0)
    max_recipient_fetches_per_host: int = Field(ge=0)
    expansion_max_held_rows: int = Field(ge=1, le=10_000)

    circuit_failure_threshold: int = Field(ge=1)
    circuit_open_seconds: float = Field(gt=0)
    circuit_recovery_start: int = Field(ge=1)
    host_unavailable_after_days: float = Field(gt=0)
    host_unavailable_probe_hours: float = Field(gt=0)
    host_success_write_seconds: float = Field(ge=0)
    host_success_memory_entries: int = Field(ge=1)

    connect_timeout_seconds: float = Field(gt=0)
    total_timeout_seconds: float = Field(gt=0)
    http_transport: Literal["pool", "httpx"]
    max_concurrency: int = Field(ge=1)
    max_concurrency_per_host: int = Field(ge=1)
    max_document_bytes: int = Field(ge=1024)
    max_response_head_bytes: int = Field(ge=1024, le=16 * 1024 * 1024)
    max_response_headers: int = Field(ge=10, le=10_000)
    tls_ca_file: str
    private_key_passphrase_file: str
    remote_unverified_cache_entries: int = Field(ge=1)
    remote_unverified_cache_bytes: int = Field(ge=1024)
    remote_actor_document_max_bytes: int = Field(ge=1024)
    remote_failure_cache_entries: int = Field(ge=1)
    key_refetch_cooldown_seconds: float = Field(ge=0)
    retention_remote_actors_days: float = Field(ge=0)
    signature_scheme_policy: SchemePolicy
    signature_key_policy: KeyPolicy
    retention_delivered_days: float = Field(ge=0)
    retention_dead_days: float = Field(ge=0)
    retention_webhook_events_days: float = Field(ge=0)
    retention_webhook_backlog: int = Field(ge=1)
    retention_outbox_days: float = Field(ge=0)
    retention_audit_days: float = Field(ge=0)
    retention_consumer_idle_days: float = Field(ge=0)
    retention_backlog_samples_days: float = Field(ge=0)
    prune_batch_rows: int = Field(ge=1, le=100_000)
    signature_scheme_recheck_days: float = Field(gt=0)

    dashboard_session_hours: float = Field(gt=0, le=24 * 30)
    admin_login_free_failures: int = Field(ge=1, le=1000)
    admin_login_backoff_cap_seconds: float = Field(ge=1, le=86400)
    admin_login_forget_seconds: float = Field(gt=0)
    admin_login_tracked_addresses: int = Field(ge=1, le=1_000_000)
    inbox_max_body_bytes: int = Field(ge=1024, le=64 * 1024 * 1024)
    inbox_max_json_depth: int = Field(ge=4, le=512)
    signature_max_age_seconds: float = Field(gt=0)
    signature_max_skew_seconds: float = Field(ge=0)
    inbound_max_signatures: int = Field(ge=1, le=20)
    inbound_verify_timeout_seconds: float = Field(gt=0, le=60)
    inbound_dereference_attempts: int = Field(ge=1, le=5)
    inbound_dereference_timeout_seconds: float = Field(gt=0, le=30)
    ld_max_values: int = Field(ge=10, le=100_000)
    ld_max_triples: int = Field(ge=10, le=100_000)
    ld_max_blank_node_steps: int = Field(ge=0, le=10_000_000)
    ld_deadline_seconds: float = Field(gt=0, le=30)
    ld_max_concurrent: int = Field(ge=1, le=64)
    ld_sign_public_activities: bool
    ld_sign_max_values: int = Field(ge=10, le=100_000)
    object_integrity_proofs: bool
    inbox_retention_days: float = Field(gt=0)
    inbox_prune_interval_seconds: float = Field(gt=0)
    inbox_tombstone_hours: float = Field(gt=0)
    actor_tombstone_days: float = Field(gt=0)
    actor_update_delay_seconds: float = Field(ge=0, le=86_400)
    inbox_followers_sync_interval_seconds: float = Field(ge=0)
    inbox_throttle_per_second: float = Field(ge=0)
    inbox_throttle_burst: int = Field(ge=1)
    inbox_throttle_bytes_per_second: float = Field(ge=0)
    inbox_throttle_bytes_burst: int = Field(ge=1024)
    inbox_trusted_hosts: str
    federation_mode: FederationMode
    federation_allowlist: str
    inbox_unverified_per_second: float = Field(ge=0)
    inbox_unverified_burst: int = Field(ge=1)
    trusted_proxies: str
    inbox_pull_max_items: int = Field(ge=1, le=10_000)
    followers_page_size: int = Field(ge=1, le=1000)
    authorized_fetch: bool
    doctor_peer_url: str
    doctor_max_clock_skew_seconds: float = Field(ge=0)
    node_name: str = Field(max_length=200)
    nodeinfo_cache_seconds: float = Field(ge=0, le=3600)

    @field_validator("base_url")
    @classmethod
    def _origin_only(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("must be an http(s) origin such as https://example.org")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise ValueError("must be an origin only, without a path, query or fragment")
        return f"{parts.scheme}://{parts.netloc}"

    @field_validator("admin_token")
    @classmethod
    def _long_enough(cls, value: str) -> str:
        if value and len(value) < MIN_ADMIN_TOKEN_CHARS:
            raise ValueError(
                f"must be at least {MIN_ADMIN_TOKEN_CHARS} characters, or empty to turn /admin off"
                f" (a short token can be guessed; this one has {len(value)}); make one with"
                " `python3 -c 'import secrets; print(secrets.token_urlsafe(32))'`"
            )
        return value

    @field_validator("metrics_token")
    @classmethod
    def _unguessable(cls, value: str) -> str:
        if value and len(value) < MIN_ADMIN_TOKEN_CHARS:
            raise ValueError(
                f"must be at least {MIN_ADMIN_TOKEN_CHARS} characters, or empty to leave /metrics public"
                f" (this one has {len(value)})"
            )
        return value

    @field_validator("admin_login_forget_seconds")
    @classmethod
    def _failures_outlive_their_backoff(cls, value: float, info: ValidationInfo) -> float:
        # Forgetting an address's failures before its refusal ends would end the refusal early.
        cap = info.data.get("admin_login_backoff_cap_seconds")
        if cap is not None and value < cap:
            raise ValueError("must be at least admin_login_backoff_cap_seconds")
        return value

    @field_validator("inbox_throttle_bytes_burst")
    @classmethod
    def _holds_the_largest_body(cls, value: int, info: ValidationInfo) -> int:
        # A bucket smaller than one body would refuse the largest activities forever.
        largest = info.data.get("inbox_max_body_bytes")
        if largest is not None and value < largest:
            raise ValueError("must be at least inbox_max_body_bytes")
        return value

    @field_validator("database_url")
    @classmethod
    def _async_driver(cls, value: str) -> str:
        if not value.startswith(("sqlite+aiosqlite://", "postgresql+asyncpg://")):
            raise ValueError("must start with sqlite+aiosqlite:// or postgresql+asyncpg://")
        return value

    @field_validator("private_key_passphrase_file")
    @classmethod
    def _passphrase_file(cls, value: str) -> str:
        if value and not Path(value).is_file():
            raise ValueError(
                "must name a file holding the private keys' passphrase (no such file), or be empty"
            )
        return value

    def private_key_passphrase(self) -> bytes | None:
        """The passphrase the private keys are encrypted under at rest (the file's first line), or
        None if `private_key_passphrase_file` is empty; SettingsError naming the setting if unusable."""
        if not self.private_key_passphrase_file:
            return None
        try:
            lines = Path(self.private_key_passphrase_file).read_bytes().splitlines()
        except OSError as exc:
            raise SettingsError(
                f"FEDQUEUE_PRIVATE_KEY_PASSPHRASE_FILE: cannot read it: {exc.strerror}"
            ) from None
        if not lines or not lines[0].strip():
            raise SettingsError("FEDQUEUE_PRIVATE_KEY_PASSPHRASE_FILE: the file's first line is empty")
        return lines[0]

    @field_validator("tls_ca_file")
    @classmethod
    def _readable_pem(cls, value: str) -> str:
        if value and not Path(value).is_file():
            raise ValueError("must name a PEM file of CA certificates (no such file), or be empty")
        return value

    @field_validator("federation_allowlist")
    @classmethod
    def _domains(cls, value: str) -> str:
        for entry in value.split(","):
            if entry.strip():
                try:
                    check_domain_entry(entry.strip())
                except InvalidInput as exc:
                    raise ValueError(str(exc)) from None
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: str) -> str:
        parse_networks(value)
        return value

    @model_validator(mode="after")
    def _retention_outlives_the_signature_window(self) -> Settings:
        # Pruned activity ids are forgotten; a replay must be refused by its date by then.
        window = self.signature_max_age_seconds + self.signature_max_skew_seconds
        if self.inbox_retention_days * 86400 <= window:
            raise ValueError("inbox_retention_days must be longer than the signature window")
        return self

    @property
    def trusted_inbox_hosts(self) -> frozenset[str]:
        """`inbox_trusted_hosts` (comma-separated) as host names, lower-case."""
        return frozenset(h.strip().lower() for h in self.inbox_trusted_hosts.split(",") if h.strip())

    @property
    def allowed_domains(self) -> frozenset[str]:
        """`federation_allowlist` (comma-separated) as domains, lower-case."""
        return parse_domains(self.federation_allowlist)

    @property
    def trusted_proxy_networks(self) -> tuple[Network, ...]:
        """`trusted_proxies` (comma-separated CIDRs) as networks."""
        return parse_networks(self.trusted_proxies)

    @property
    def host(self) -> str:
        """The host (with port, if any) of base_url: the domain part of acct: URIs."""
        return urlsplit(self.base_url).netloc

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _toml_defaults(settings_cls))


def _toml_defaults(settings_cls: type[BaseSettings]) -> TomlConfigSettingsSource:
    """The lowest-priority source: the TOML defaults file, which must exist (pydantic-settings
    would quietly read a missing file as empty)."""
    path = config_path()
    if not path.is_file():
        raise SettingsError(f"config file {path} not found (set FEDQUEUE_CONFIG)")
    try:
        with resources.as_file(path) as file:  # read now: the source loads the file when built
            return TomlConfigSettingsSource(settings_cls, toml_file=file)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"config file {path} is not valid TOML: {exc}") from None


def config_path() -> Traversable:
    """The file FEDQUEUE_CONFIG names, else the defaults shipped in the package (any working directory)."""
    explicit = os.environ.get(CONFIG_ENV)
    return Path(explicit) if explicit else resources.files("fedqueue") / "defaults.toml"


def setting_sources() -> dict[str, str]:
    """Where each setting's value comes from: its environment variable, else the config file."""
    environment = {key.upper() for key in os.environ}
    file = f"{CONFIG_ENV} file" if os.environ.get(CONFIG_ENV) else "default file"
    return {
        name: f"environment {ENV_PREFIX}{name.upper()}"
        if f"{ENV_PREFIX}{name.upper()}" in environment
        else file
        for name in Settings.model_fields
    }


def load_settings(**overrides: Any) -> Settings:
    """Read and validate all settings; raise SettingsError with one line: every key the config
    file lacks at once, else the first problem, never a secret's value nor a URL's password."""
    try:
        return Settings(**overrides)
    except ValidationError as exc:
        raise SettingsError(_one_line(exc.errors())) from None


def _one_line(errors: list[Any]) -> str:
    missing = [str(e["loc"][0]) for e in errors if e["type"] == "missing" and e["loc"]]
    if missing:
        return missing_keys_line(str(config_path()), missing, bool(os.environ.get(CONFIG_ENV)))
    error = errors[0]
    name = str(error["loc"][0]) if error["loc"] else "settings"
    variable = f"{ENV_PREFIX}{name.upper()}"
    if error["type"] == "extra_forbidden":
        near = closest(name, Settings.model_fields)
        hint = f" (did you mean {near}?)" if near else ""
        return f"{variable}: unknown setting {name} in {config_path()}{hint}"
    message = mask_secrets(error["msg"].removeprefix("Value error, "))
    # A secret is never echoed, nor are all settings at once (a check across several).
    shown = shown_value(name, error.get("input")) if error["loc"] else ""
    return f"{variable}: {message}{shown}"


def unknown_environment() -> list[str]:
    """One warning line per FEDQUEUE_* environment variable that names no setting (it is ignored)."""
    return unknown_variables(os.environ, ENV_PREFIX, Settings.model_fields)
