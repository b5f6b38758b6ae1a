"""A forwarded activity built to make its Linked Data signature costly to check, sent to a real
`fedqueue serve`: what it costs the server, in CPU seconds read from /proc.

carol (any server) HTTP-signs and sends a Create of bob's, whose `RsaSignature2017` names bob's
key: the server canonicalizes the activity before it can tell whether bob signed it. Without
bounds, 10,000 `to` entries cost about 14 s (the square of the array, in JSON-LD expansion)
and seven blank nodes naming each other about 3.5 s (URDNA2015 tries every order of them,
ten times more per node added), all on one request of a sender nobody vouched for.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.fediverse import RemoteActor, reply_by
from tests.fuzzing import blank_node_clique
from tests.live import LiveInstance, create_actor, live_instance
from tests.loopback import LoopbackServer
from tests.procfs import cpu_seconds

TOKEN = "ld-flood-admin-token-for-the-test"
#: The issue's bound is about 0.5 s; the server's other work (its worker polling) shares the figure.
MAX_CPU_S = 1.0
SHAPES: dict[str, tuple[str, Any]] = {
    "10,000 recipients": ("to", [f"https://b.example/users/u{i:05d}" for i in range(10_000)]),
    "seven interlinked blank nodes": ("tag", blank_node_clique(7)),
}


async def forward(
    http: httpx.AsyncClient, live: LiveInstance, carol: RemoteActor, activity: dict[str, Any]
) -> httpx.Response:
    """carol's POST of `activity` to alice's inbox on the live instance."""
    headers, body = carol.signed("/actors/alice/inbox", activity, origin=live.origin)
    return await http.post(f"{live.origin}/actors/alice/inbox", content=body, headers=headers)


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_forwarded_activity_costs_the_server_under_a_second_of_cpu_whatever_its_shape(
    tmp_path: Path, remote: LoopbackServer, shape: str
) -> None:
    bob, carol = RemoteActor(remote).publish(), RemoteActor(remote, name="carol").publish()
    remote.serve_json("/users/bob/notes/1", reply_by(bob)["object"])  # for the re-fetch path
    field, value = SHAPES[shape]
    with live_instance(tmp_path, TOKEN) as live:
        create_actor(live, "alice", tmp_path)
        async with httpx.AsyncClient(timeout=110) as http:
            # A genuine forwarded reply first: keys fetched, contexts loaded, threads started.
            warm = await forward(http, live, carol, reply_by(bob))
            assert warm.status_code == 202, warm.text
            hostile = reply_by(bob)  # LD-signed by bob, then changed: the check would fail
            hostile[field] = value
            before = cpu_seconds(live.process.pid)
            response = await forward(http, live, carol, hostile)
            cost_s = cpu_seconds(live.process.pid) - before
    assert cost_s < MAX_CPU_S, f"{shape}: {cost_s:.2f} s of CPU"
    assert response.status_code == 202, response.text  # stored as bob's note is re-fetched
