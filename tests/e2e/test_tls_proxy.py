"""fedqueue behind a real nginx that ends TLS, configured by the shipped config/nginx/fedqueue.conf.

A test CA made here signs the certificates of nginx and of the remote peer (both `localhost`);
fedqueue trusts it through `tls_ca_file`, the test's clients through their SSL context. nginx
runs as a child process with its own prefix in tmp_path (never the system service). Skipped
where nginx is missing, unless FEDQUEUE_REQUIRE_NGINX=1 (CI, which installs it).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import os
import re
import shutil
import socket
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import parse_cavage_signature, verify_cavage
from tests.fediverse import RemoteActor
from tests.live import ADMIN_TOKEN, LiveInstance, create_actor, free_port, live_instance, stop
from tests.loopback import LoopbackServer, Recorded
from tests.outbound import verify_delivery

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if Path("/usr/sbin/nginx").is_file() else None)
SHIPPED_SITE = Path(__file__).parents[2] / "config" / "nginx" / "fedqueue.conf"
#: An address on the loopback interface that is not a trusted proxy (127.0.0.1 is).
UNTRUSTED = "127.0.0.2"

#: A CA's key usage: signing certificates and CRLs, nothing else.
CA_KEY_USAGE = x509.KeyUsage(False, False, False, False, False, True, True, False, False)

if NGINX is None and os.environ.get("FEDQUEUE_REQUIRE_NGINX") != "1":
    pytest.skip("nginx is not installed (apt-get install nginx)", allow_module_level=True)


@dataclass(frozen=True)
class Authority:
    ca: Path
    certificate: Path
    key: Path

    def client(self) -> ssl.SSLContext:
        """An SSL context for clients that trusts this CA only."""
        return ssl.create_default_context(cafile=str(self.ca))

    def server(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.certificate, self.key)
        return context


def make_ca(directory: Path, addresses: Sequence[str] = ("127.0.0.1",)) -> Authority:
    """A CA, and a certificate it signed for `localhost` and `addresses`, as PEM files."""
    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(minutes=5), now + datetime.timedelta(hours=2))
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fedqueue test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName("localhost"), *(x509.IPAddress(ipaddress.ip_address(a)) for a in addresses)]
    certificate = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(valid[0])
        .not_valid_after(valid[1])
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    found = Authority(directory / "ca.pem", directory / "server.pem", directory / "server.key")
    found.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    found.certificate.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    found.key.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return found


def site_config(port: int, redirect_port: int, upstream: str, ca: Authority) -> str:
    """The shipped site, on loopback ports, with the test's certificate and upstream."""
    site = SHIPPED_SITE.read_text()
    site = site.replace("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;")
    site = site.replace("listen 80;", f"listen 127.0.0.1:{redirect_port};")
    site = re.sub(r"\n\s*listen \[::\]:\d+( ssl)?;", "", site)
    site = re.sub(r"ssl_certificate\s+\S+;", f"ssl_certificate {ca.certificate};", site)
    site = re.sub(r"ssl_certificate_key\s+\S+;", f"ssl_certificate_key {ca.key};", site)
    assert "proxy_pass http://127.0.0.1:8000;" in site
    return site.replace("proxy_pass http://127.0.0.1:8000;", f"proxy_pass {upstream};")


@contextmanager
def nginx(prefix: Path, site: str, port: int, address: str = "127.0.0.1") -> Iterator[None]:
    """nginx in the foreground with everything (pid, logs, temp files) under `prefix`, once it
    listens on `address`:`port`."""
    prefix.mkdir()
    (prefix / "site.conf").write_text(site)
    temp = " ".join(
        f"{kind}_temp_path {prefix / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    user = "user root;\n" if os.geteuid() == 0 else ""  # workers read the temp files written here
    (prefix / "nginx.conf").write_text(
        f"{user}worker_processes 1;\npid {prefix / 'nginx.pid'};\nerror_log {prefix / 'error.log'};\n"
        "events { worker_connections 64; }\n"
        f"http {{\n  access_log {prefix / 'access.log'};\n  {temp}\n  include {prefix / 'site.conf'};\n}}\n"
    )
    assert NGINX is not None
    process = subprocess.Popen(
        [NGINX, "-e", prefix / "error.log", "-c", prefix / "nginx.conf", "-p", prefix, "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 20
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"nginx exited: {(prefix / 'error.log').read_text()}")
            try:
                socket.create_connection((address, port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError("nginx did not listen in time") from None
                time.sleep(0.05)
        yield
    finally:
        stop(process)


@dataclass(frozen=True)
class Proxied:
    base_url: str
    live: LiveInstance
    ca: Authority
    token: str
    bob: RemoteActor
    #: nginx's plain-http port, which only redirects.
    redirect_port: int


async def received(server: LoopbackServer, method: str, path: str, timeout_s: float = 30) -> list[Recorded]:
    """The requests `server` got for (method, path), waiting (bounded) for the first one."""
    deadline = time.monotonic() + timeout_s
    while not server.received(method, path):
        assert time.monotonic() < deadline, f"no {method} {path} within {timeout_s} s"
        await asyncio.sleep(0.1)
    return server.received(method, path)


async def key_through_proxy(client: httpx.AsyncClient, key_id: str) -> str:
    """The public key PEM that `key_id` names, fetched as a peer would: over https, through nginx."""
    document = (await client.get(key_id, headers={"Accept": "application/activity+json"})).json()
    assert document["publicKey"]["id"] == key_id
    pem: str = document["publicKey"]["publicKeyPem"]
    return pem


@pytest.fixture
async def proxied(tmp_path: Path) -> AsyncIterator[Proxied]:
    ca = make_ca(tmp_path)
    peer = await LoopbackServer().start(tls=ca.server())
    for path in ("/users/bob/inbox", "/inbox"):
        peer.on("POST", path, lambda _r: web.Response(status=202))
    bob = RemoteActor(peer).publish()
    port, redirect_port = free_port(), free_port()
    base_url = f"https://localhost:{port}"
    env = {
        "FEDQUEUE_BASE_URL": base_url,
        "FEDQUEUE_TRUSTED_PROXIES": "127.0.0.1/32",
        "FEDQUEUE_TLS_CA_FILE": str(ca.ca),
    }
    try:
        with live_instance(tmp_path, ADMIN_TOKEN, env=env) as live:
            token = create_actor(live, "alice", tmp_path)
            with nginx(tmp_path / "nginx", site_config(port, redirect_port, live.origin, ca), port):
                yield Proxied(base_url, live, ca, token, bob, redirect_port)
    finally:
        await peer.stop()


async def test_behind_nginx_signatures_verify_both_ways_and_every_url_is_https(proxied: Proxied) -> None:
    base, bob = proxied.base_url, proxied.bob
    alice = f"{base}/actors/alice"
    async with httpx.AsyncClient(verify=proxied.ca.client(), timeout=30) as client:
        finger = await client.get(
            f"{base}/.well-known/webfinger",
            params={"resource": f"acct:alice@localhost:{base.rsplit(':', 1)[1]}"},
        )
        assert finger.status_code == 200, finger.text
        assert {link["href"] for link in finger.json()["links"] if link.get("rel") == "self"} == {alice}
        actor = (await client.get(alice, headers={"Accept": "application/activity+json"})).json()
        assert (actor["id"], actor["inbox"], actor["publicKey"]["id"]) == (
            alice,
            f"{alice}/inbox",
            f"{alice}#main-key",
        )

        # bob signs for the https URL he posts to; nginx hands fedqueue plain http.
        follow = bob.activity("Follow", object=alice)
        headers, body = bob.signed("/actors/alice/inbox", follow, origin=base)
        answer = await client.post(f"{alice}/inbox", content=body, headers=headers)
        assert answer.status_code == 202, answer.text

        # fedqueue fetched bob's key over https (trusting the CA by tls_ca_file), signing the fetch.
        [fetch] = (await received(bob.server, "GET", "/users/bob"))[:1]
        signature = parse_cavage_signature(fetch.headers["signature"])
        assert signature.key_id.startswith(f"{base}/")
        fetch_key = keys.load_public_key(await key_through_proxy(client, signature.key_id))
        verify_cavage("GET", bob.server.url(fetch.path), fetch.headers, signature, fetch_key)

        # Its Accept reaches bob over https, signed with a key bob fetches through nginx.
        [accept] = await received(bob.server, "POST", "/users/bob/inbox")
        pem = await key_through_proxy(client, f"{alice}#main-key")
        delivered = verify_delivery(bob.server, accept, alice, pem)
        assert delivered["type"] == "Accept" and delivered["actor"] == alice

        # Plain http is only a redirect to the https URL.
        plain = await client.get(f"http://127.0.0.1:{proxied.redirect_port}/actors/alice")
        assert plain.status_code == 301


async def test_a_forged_x_forwarded_for_from_an_untrusted_address_changes_nothing(
    proxied: Proxied, tmp_path: Path
) -> None:
    wrong = {"Authorization": "Bearer " + "x" * 30}
    statuses = []
    through_nginx = httpx.AsyncHTTPTransport(verify=proxied.ca.client(), local_address=UNTRUSTED)
    async with httpx.AsyncClient(transport=through_nginx, timeout=30) as client:
        for n in range(6):  # admin_login_free_failures (5) answered 401, then 429
            forged = {"X-Forwarded-For": f"203.0.113.{n}", "X-Forwarded-Proto": "https"}
            response = await client.get(f"{proxied.base_url}/admin/deliveries", headers=wrong | forged)
            statuses.append(response.status_code)
    assert statuses == [401] * 5 + [429]
    # Straight to fedqueue from the same untrusted address, forging a fresh client: still refused.
    direct = httpx.AsyncHTTPTransport(local_address=UNTRUSTED)
    async with httpx.AsyncClient(transport=direct, timeout=30) as client:
        response = await client.get(
            f"{proxied.live.origin}/admin/deliveries", headers=wrong | {"X-Forwarded-For": "198.51.100.7"}
        )
    assert response.status_code == 429, response.text
    log = (tmp_path / "serve.log").read_text()
    assert f"wrong admin token from {UNTRUSTED}" in log
    assert "203.0.113." not in log and "198.51.100." not in log
