"""fedqueue behind nginx (TLS, a test CA) with a real Fedify server as the peer.

Fedify (tests/fedify/interop.mjs, plain http on loopback) trusts the test CA only through
NODE_EXTRA_CA_CERTS, so every signature it verifies on fedqueue's deliveries rests on a key it
fetched over https through nginx. Needs nginx and Fedify (both installed by CI).
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from fedqueue.client import Client
from tests.e2e.test_fedify_interop import fedify_server
from tests.e2e.test_tls_proxy import make_ca, nginx, site_config
from tests.live import ADMIN_TOKEN, free_port, live_instance
from tests.node import FedifyPeer, eventually, needs_fedify

pytestmark = needs_fedify


@dataclass(frozen=True)
class Federated:
    base_url: str
    token: str
    #: A client that trusts the test CA, for fedqueue's https origin.
    https: httpx.Client
    fedify: FedifyPeer
    #: nginx's access log: who fetched what through the proxy.
    access_log: Path


@pytest.fixture
def federated(tmp_path: Path) -> Iterator[Federated]:
    """`fedqueue serve` (actor alice) behind nginx at an https origin; Fedify trusting the test CA."""
    ca = make_ca(tmp_path)
    port, redirect_port = free_port(), free_port()
    base_url = f"https://localhost:{port}"
    env = {"FEDQUEUE_BASE_URL": base_url, "FEDQUEUE_TRUSTED_PROXIES": "127.0.0.1/32"}
    # Node starts while fedqueue does; the pool is left (Fedify up) before the stack unwinds.
    with ExitStack() as stack, ThreadPoolExecutor(1) as pool:
        starting = pool.submit(
            stack.enter_context, fedify_server(tmp_path, env={"NODE_EXTRA_CA_CERTS": str(ca.ca)})
        )
        live = stack.enter_context(live_instance(tmp_path, ADMIN_TOKEN, env=env))
        stack.enter_context(
            nginx(tmp_path / "nginx", site_config(port, redirect_port, live.origin, ca), port)
        )
        https = stack.enter_context(httpx.Client(verify=ca.client(), timeout=10))  # trusts the test CA
        token = Client(base_url, ADMIN_TOKEN, http=https).create_actor("alice").token
        fedify = starting.result()
        yield Federated(base_url, token, https, fedify, tmp_path / "nginx" / "access.log")


def test_fedify_verifies_what_fedqueue_sends_from_its_https_origin_behind_nginx(
    federated: Federated,
) -> None:
    alice, fedify = f"{federated.base_url}/actors/alice", federated.fedify
    # Fedify posts its signed Follow to alice's https inbox; fedqueue verifies it behind nginx.
    followed = fedify.run(do="follow", actor="carol", object=alice, inbox=f"{alice}/inbox")
    assert followed.get("ok"), followed
    assert federated.https.get(f"{alice}/followers").json()["totalItems"] == 1

    # The Accept verifies at Fedify with alice's key, which Fedify fetched over https via nginx.
    eventually(lambda: alice in fedify.run(do="accepts")["accepts"], "Fedify verified alice's Accept")
    fetches = [line for line in federated.access_log.read_text().splitlines() if "Fedify" in line]
    assert any('"GET /actors/alice' in line and '" 200 ' in line for line in fetches), fetches

    note = {"type": "Note", "content": "hello over https", "cc": [f"{alice}/followers"]}
    created = Client(federated.base_url, federated.token, http=federated.https).post("alice", note).id

    def arrived() -> bool:
        return any(
            (item["id"], item["actor"], item["recipient"]) == (created, alice, "carol")
            for item in fedify.run(do="received")["received"]
        )

    eventually(arrived, "alice's Create reached carol and verified at Fedify")
