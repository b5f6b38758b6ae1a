"""`fedqueue actor move` to a loopback or private target: one line, with the setting that allows it."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedqueue.storage.migrate import upgrade_to_head
from tests.e2e.test_cli import run_fedqueue


@pytest.mark.parametrize("target", ["http://127.0.0.1:9/users/alice2", "http://10.1.2.3/users/alice2"])
def test_actor_move_to_a_private_address_names_fedqueue_allow_private_addresses(
    tmp_path: Path, target: str
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'fedqueue.db'}"
    upgrade_to_head(url)
    env = {"FEDQUEUE_DATABASE_URL": url, "FEDQUEUE_ALLOW_PRIVATE_ADDRESSES": "false"}
    assert run_fedqueue("actor", "create", "alice", cwd=tmp_path, env=env).returncode == 0

    refused = run_fedqueue("actor", "move", "alice", "--to", target, cwd=tmp_path, env=env)

    assert refused.returncode == 2, refused.stdout
    [line] = refused.stderr.splitlines()
    assert line.startswith(f"fedqueue: cannot fetch the target {target}: ")
    assert "private or loopback address" in line
    assert line.endswith(
        "; set FEDQUEUE_ALLOW_PRIVATE_ADDRESSES=true to allow loopback and private addresses "
        "(local try-outs and tests only, never on a public server)"
    )
