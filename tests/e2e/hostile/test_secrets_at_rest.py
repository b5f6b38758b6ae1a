"""Secrets kept close (issue 52, row 8): the SQLite file and its -wal/-shm are their owner's alone
whatever the umask, and private keys can be encrypted at rest under a passphrase kept in a file
outside the database; a start without it (or with another) is refused in one line."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from sqlalchemy import text

from fedqueue.rules.signing import keys
from fedqueue.rules.signing.cavage import parse_cavage_signature, verify_cavage
from fedqueue.storage import Store
from fedqueue.storage.sqlite_setup import sqlite_file
from tests.e2e.test_cli import run_fedqueue
from tests.fediverse import RemoteActor
from tests.live import ADMIN_TOKEN, free_port, live_instance
from tests.loopback import LoopbackServer
from tests.outbound import verify_delivery

pytestmark = pytest.mark.timeout(180)

PLAIN_PEM = b"-----BEGIN PRIVATE KEY-----"
LOCKED = (
    "fedqueue: the private keys are encrypted at rest: set private_key_passphrase_file"
    " (FEDQUEUE_PRIVATE_KEY_PASSPHRASE_FILE)"
)
WRONG = (
    "fedqueue: private_key_passphrase_file (FEDQUEUE_PRIVATE_KEY_PASSPHRASE_FILE): its passphrase"
    " does not decrypt the stored private keys"
)


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask (files 0644 unless made otherwise), for this test and the processes it starts."""
    before = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(before)


def passphrase_file(tmp_path: Path, passphrase: str) -> str:
    path = tmp_path / f"passphrase-{len(passphrase)}"
    path.write_text(passphrase + "\n")
    path.chmod(0o600)
    return str(path)


def cli_env(database_url: str, passphrase_path: str | None = None) -> dict[str, str]:
    env = {
        "FEDQUEUE_DATABASE_URL": database_url,
        "FEDQUEUE_ADMIN_TOKEN": ADMIN_TOKEN,
        "FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "true",
        "FEDQUEUE_LOG_LEVEL": "WARNING",
        "FEDQUEUE_PRIVATE_KEY_PASSPHRASE_FILE": passphrase_path or "",
    }
    return env


async def stored_private_keys(store: Store) -> list[str]:
    """Every private key column as stored (actors and the instance key)."""
    async with store.database.transaction() as conn:
        rows = await conn.execute(
            text("SELECT private_key_pem FROM actors UNION ALL SELECT private_key_pem FROM instance_key")
        )
        return [str(row[0]) for row in rows]


def database_bytes(database_url: str) -> bytes:
    """The SQLite file and its -wal and -shm as they lie on disk (empty for PostgreSQL)."""
    path = sqlite_file(database_url)
    if path is None:
        return b""
    return b"".join(p.read_bytes() for p in path.parent.glob(f"{path.name}*"))


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_the_sqlite_file_and_its_wal_and_shm_are_their_owners_alone_under_umask_022(
    tmp_path: Path, umask_022: None
) -> None:
    database = tmp_path / "fedqueue.db"
    url = f"sqlite+aiosqlite:///{database}"
    migrated = run_fedqueue("migrate", cwd=tmp_path, env=cli_env(url))
    assert migrated.returncode == 0, migrated.stderr
    assert mode(database) == 0o600
    database.chmod(0o644)  # as a release before the fix left it
    with live_instance(tmp_path, ADMIN_TOKEN, database_url=url):
        created = run_fedqueue("actor", "create", "alice", cwd=tmp_path, env=cli_env(url))
        assert created.returncode == 0, created.stderr
        files = sorted(tmp_path.glob("fedqueue.db*"))
        assert [f.name for f in files] == ["fedqueue.db", "fedqueue.db-shm", "fedqueue.db-wal"]
        assert {f.name: oct(mode(f)) for f in files} == {f.name: "0o600" for f in files}


async def test_keys_encrypted_at_rest_still_sign_deliveries_and_fetches_a_peer_verifies(
    database_url: str, store: Store, remote: LoopbackServer, tmp_path: Path
) -> None:
    bob = RemoteActor(remote, name="bob").publish()
    remote.on("POST", "/users/bob/inbox", lambda _r: web.Response(status=202))
    remote.on("POST", "/inbox", lambda _r: web.Response(status=202))
    secret = passphrase_file(tmp_path, "correct horse battery staple")
    env = cli_env(database_url, secret)
    created = run_fedqueue("actor", "create", "alice", cwd=tmp_path, env=env)
    assert created.returncode == 0, created.stderr
    token = json.loads(created.stdout)["token"]
    with live_instance(tmp_path, ADMIN_TOKEN, database_url=database_url, env=env) as live:
        async with httpx.AsyncClient(base_url=live.origin, timeout=30) as client:
            posted = await client.post(
                "/actors/alice/outbox",
                json={"type": "Note", "content": "hi", "to": [bob.uri]},
                headers={"Authorization": f"Bearer {token}"},
            )
            assert posted.status_code == 201, posted.text
            for _ in range(300):
                delivered = [r for r in remote.requests if r.method == "POST"]
                if delivered:
                    break
                await asyncio.sleep(0.1)
            accept = {"Accept": "application/activity+json"}
            alice = await client.get("/actors/alice", headers=accept)
            instance = await client.get("/actor", headers=accept)
    [delivery] = delivered
    verify_delivery(remote, delivery, alice.json()["id"], alice.json()["publicKey"]["publicKeyPem"])
    [fetch] = [r for r in remote.requests if r.method == "GET" and r.path == "/users/bob"]
    fetch_signature = parse_cavage_signature(fetch.headers["signature"])
    instance_key = keys.load_public_key(instance.json()["publicKey"]["publicKeyPem"])
    verify_cavage("GET", remote.url(fetch.path), fetch.headers, fetch_signature, instance_key)

    stored = await stored_private_keys(store)
    assert len(stored) == 2 and all(keys.is_encrypted(pem) for pem in stored)
    assert PLAIN_PEM not in database_bytes(database_url)

    for command in (("serve", "--port", str(free_port())), ("worker", "--burst")):
        for passphrase, refusal in ((None, LOCKED), (passphrase_file(tmp_path, "wrong"), WRONG)):
            done = run_fedqueue(*command, cwd=tmp_path, env=cli_env(database_url, passphrase))
            assert (done.returncode, done.stderr.strip().splitlines()) == (2, [refusal])


async def test_keys_stored_in_plain_text_are_encrypted_by_keys_encrypt_and_doctor_says_so(
    database_url: str, store: Store, tmp_path: Path
) -> None:
    plain = cli_env(database_url)
    assert run_fedqueue("actor", "create", "alice", cwd=tmp_path, env=plain).returncode == 0
    doctor = run_fedqueue("doctor", cwd=tmp_path, env=plain).stdout
    assert "✓ keys at rest: 1 private key in plain text in the database" in doctor
    secret = passphrase_file(tmp_path, "correct horse battery staple")
    sealed = cli_env(database_url, secret)

    done = run_fedqueue("keys", "encrypt", cwd=tmp_path, env=sealed)
    assert done.stdout.strip() == "encrypted 1 private key now; 1 of 1 stored are encrypted at rest"
    again = run_fedqueue("keys", "encrypt", cwd=tmp_path, env=sealed)
    assert again.stdout.strip().startswith("encrypted 0 private keys now"), again.stderr
    [pem] = await stored_private_keys(store)
    assert keys.is_encrypted(pem)
    assert keys.load_private_key(pem, b"correct horse battery staple") is not None

    doctor = run_fedqueue("doctor", cwd=tmp_path, env=sealed).stdout
    assert "✓ keys at rest: every stored private key (1) is encrypted under the passphrase" in doctor
    refused = run_fedqueue("doctor", cwd=tmp_path, env=plain).stdout
    assert "✗ keys at rest: the private keys are encrypted at rest" in refused
    no_passphrase = run_fedqueue("keys", "encrypt", cwd=tmp_path, env=plain)
    assert no_passphrase.returncode == 2
    assert no_passphrase.stderr.strip().splitlines() == [
        "fedqueue: no passphrase to encrypt the private keys with: set private_key_passphrase_file"
        " (FEDQUEUE_PRIVATE_KEY_PASSPHRASE_FILE)"
    ]
