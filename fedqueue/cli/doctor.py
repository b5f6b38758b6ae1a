"""`fedqueue doctor`: checks a deployment from the outside in, one ✓/✗ line each with its fix.

The verdicts are `cli.doctor_rules`; this module only gathers what they judge: the settings,
the database's revision and actors, and two fetches (our own actor through `base_url`, and
the Date of a configured peer). It never creates or migrates a database.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
from datetime import UTC, datetime

import httpx

from fedqueue.cli.doctor_checks import (
    Check,
    admin_token_check,
    allowlist_check,
    autovacuum_check,
    backlog_check,
    base_url_check,
    clock_check,
    database_check,
    database_file_check,
    environment_check,
    failed,
    keys_at_rest_check,
    keys_check,
    private_addresses_check,
    proxy_check,
    self_fetch_check,
    settings_check,
    workers_check,
)
from fedqueue.cli.help import Subparsers, command
from fedqueue.remote.http_client import tls_context
from fedqueue.rules.activitystreams import ACCEPT_ACTIVITY
from fedqueue.rules.errors import SettingsError, StorageUnavailable
from fedqueue.rules.urls import Urls
from fedqueue.service.database import (
    database_file,
    describe_database,
    loose_database_files,
    schema_revisions,
    survey_keys,
)
from fedqueue.service.deployment import survey_workers
from fedqueue.settings import Settings, config_path, load_settings, setting_sources, unknown_environment


def register(commands: Subparsers) -> None:
    doctor = command(
        commands,
        "doctor",
        "check the deployment: settings, database, base_url, clock, keys, autovacuum, admin token",
        "Check, one line each with ✓ or ✗ and the fix: where the settings came from; that the "
        "database is reachable and at the migration head; that base_url is https (unless private "
        "addresses are allowed); that fetching an actor through base_url answers its own document; "
        "the clock against the Date of FEDQUEUE_DOCTOR_PEER_URL (if set); that every local actor "
        "has a key, and whether the keys are encrypted at rest; that the SQLite file is its "
        "owner's alone; on PostgreSQL, that autovacuum is on; the admin token's strength; whether "
        "private addresses are allowed; that a likely reverse proxy (an https base_url) is in "
        "trusted_proxies; unknown FEDQUEUE_* variables; an example admin token; an empty allowlist in "
        "allowlist mode; that some worker beats; that no delivery has been due longer than "
        "worker_stall_seconds. Exits 1 on "
        "any ✗. Run it where `fedqueue serve` runs, with the same settings.",
        ["fedqueue doctor", "FEDQUEUE_DOCTOR_PEER_URL=https://mastodon.social fedqueue doctor"],
    )
    doctor.set_defaults(run=run_doctor)


def run_doctor(args: argparse.Namespace) -> int:
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(
            Check(
                False,
                "settings",
                str(exc),
                "correct what it names (`fedqueue config show` lists every setting)",
            ).line()
        )
        return 1
    checks = [
        settings_check(setting_sources(), str(config_path())),
        environment_check(unknown_environment()),
    ]
    database = _database(settings.database_url)
    checks.append(database)
    checks.append(base_url_check(settings.base_url, settings.allow_private_addresses))
    checks.extend(asyncio.run(_live_checks(settings, database.ok)))
    checks.append(admin_token_check(settings.admin_token))
    checks.append(private_addresses_check(settings.base_url, settings.allow_private_addresses))
    checks.append(proxy_check(settings.base_url, settings.trusted_proxies))
    checks.append(allowlist_check(settings.federation_mode, settings.allowed_domains))
    for check in checks:
        print(check.line(), flush=True)
    return 1 if failed(checks) else 0


def _database(url: str) -> Check:
    where = describe_database(url)
    path = database_file(url)
    if path is not None and not path.is_file():  # connecting would create it
        return Check(False, "database", f"{where} does not exist", "run `fedqueue migrate`")
    try:
        revisions = schema_revisions(url)
    except StorageUnavailable as exc:
        return Check(False, "database", str(exc), "check FEDQUEUE_DATABASE_URL")
    return database_check(where, revisions.current, revisions.head)


async def _live_checks(settings: Settings, database_ok: bool) -> list[Check]:
    urls = Urls(settings.base_url)
    checks: list[Check] = []
    actor_url = urls.instance_actor()
    path = database_file(settings.database_url)
    if database_ok and path is not None:
        loose = loose_database_files(path)
        checks.append(database_file_check(str(path), [str(file) for file in loose]))
    passphrase, problem = None, None
    try:
        passphrase = settings.private_key_passphrase()
    except SettingsError as exc:
        problem = str(exc)
    if database_ok:
        survey = await survey_keys(settings.database_url, passphrase, problem)
        names = survey.actor_names
        checks.append(keys_check(len(names), survey.without_usable_keys))
        at_rest = survey.at_rest
        checks.append(
            keys_at_rest_check(
                at_rest.encrypted, at_rest.plain, passphrase is not None, survey.passphrase_problem
            )
        )
        if survey.autovacuum is not None:
            checks.append(autovacuum_check(survey.autovacuum))
        if names:
            actor_url = urls.actor(names[0])
        view = await survey_workers(settings, datetime.now(UTC))
        checks.append(workers_check(len(view.beats), view.beating, settings.worker_heartbeat_seconds))
        oldest = max(view.oldest_due_s.values(), default=0.0)
        checks.append(backlog_check(oldest, settings.worker_stall_seconds))
    else:
        for label in ("actor keys", "workers", "backlog"):
            checks.append(Check(False, label, "not checked: the database is not ready", skipped=True))
    verify: ssl.SSLContext | bool = tls_context(settings.tls_ca_file) or True
    timeout = httpx.Timeout(settings.total_timeout_seconds, connect=settings.connect_timeout_seconds)
    async with httpx.AsyncClient(verify=verify, timeout=timeout, follow_redirects=False) as client:
        checks.insert(0, await _self_fetch(client, actor_url, settings.base_url))
        checks.append(await _clock(client, settings))
    return checks


async def _self_fetch(client: httpx.AsyncClient, url: str, base_url: str) -> Check:
    try:
        response = await client.get(url, headers={"Accept": ACCEPT_ACTIVITY})
        document = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError) as exc:
        return Check(
            False,
            "self fetch",
            f"GET {url} failed: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}",
            "start `fedqueue serve` and check the reverse proxy and its certificate (docs/deploy.md)",
        )
    return self_fetch_check(url, response.status_code, document, base_url)


async def _clock(client: httpx.AsyncClient, settings: Settings) -> Check:
    peer = settings.doctor_peer_url
    if not peer:
        return Check(
            True,
            "clock",
            "not checked: set FEDQUEUE_DOCTOR_PEER_URL to a server to compare with",
            skipped=True,
        )
    try:
        response = await client.head(peer)
    except httpx.HTTPError as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return Check(
            False,
            "clock",
            f"HEAD {peer} failed: {reason}",
            "set FEDQUEUE_DOCTOR_PEER_URL to a reachable server",
        )
    now = datetime.now(UTC)
    return clock_check(peer, response.headers.get("date"), now, settings.doctor_max_clock_skew_seconds)
