"""`fedqueue relay add` to a loopback or private address: one line, with the setting that allows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedqueue.storage.migrate import upgrade_to_head
from tests.e2e.test_cli import run_fedqueue


@pytest.mark.parametrize(
    "uri", ["http://127.0.0.1:9/actor", "http://10.1.2.3/inbox", "http://localhost:9/actor"]
)
def test_relay_add_to_a_private_address_names_fedqueue_allow_private_addresses(
    tmp_path: Path, uri: str
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fedqueue.db'}"
    upgrade_to_head(url)
    env = {"FEDQUEUE_DATABASE_URL": url, "FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "false"}

    refused = run_fedqueue("relay", "add", uri, cwd=tmp_path, env=env)

    assert refused.returncode == 2, refused.stdout
    [line] = refused.stderr.splitlines()
    assert line.startswith(f"fedqueue: relay {uri} cannot be used: ")
    assert "private or loopback address" in line
    assert line.endswith(
        "; set FEDQUEUE_ALLOW_PRIVATE_ADDRESSES=true to allow loopback and private addresses "
        "(local try-outs and tests only, never on a public server)"
    )
