"""Shared pieces of the benchmarks: the loopback fediverse, fresh databases, processes and their CPU.

Everything listens on and talks to 127.0.0.1 only. The remote side (`fediverse`) and the load
generator (`flood`) run in processes of their own, so that their CPU is never counted as
fedqueue's; fedqueue itself runs as a real `fedqueue serve` or `fedqueue worker` process when
its CPU is measured from /proc.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import functools
import json
import multiprocessing
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from multiprocessing.sharedctypes import Synchronized
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import uvloop
from aiohttp import web
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes
from sqlalchemy import insert, text
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

from fedqueue.remote.http_client import SigningIdentity, signed_headers
from fedqueue.rules.signing import keys
from fedqueue.rules.signing.requests import sha256_digest_header
from fedqueue.storage.column_types import utcnow
from fedqueue.storage.migrate import upgrade_to_head
from fedqueue.storage.tables import DeliveryRow, InboundActivityRow, InboxItemRow, OutboxRow, RemoteActorRow
from tests.live import stop
from tests.node import NODE
from tests.procfs import cpu_seconds, main_thread_cpu_seconds, signing_cpu_seconds

FEDQUEUE = str(Path(sys.executable).with_name("fedqueue"))
#: Every wait for a process or a count gives up after this long.
WAIT_LIMIT_S = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening_socket() -> socket.socket:
    """A socket listening on a free loopback port, for a server process to inherit."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    return sock


def wait_listening_sync(
    port: int, process: subprocess.Popen[bytes] | None = None, limit_s: float = 120.0
) -> None:
    """Until something listens on `port`; an error if `process` (what should listen) exits first
    or `limit_s` passes. 30 s was too little for a `serve` starting beside a busy fan-out on a
    2-core machine whose Python runs four times slower than another's (the eleventh session's)."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            raise RuntimeError(f"the process for port {port} exited ({process.returncode}) before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on port {port} after {limit_s:.0f} s")


async def wait_listening(
    port: int, process: subprocess.Popen[bytes] | None = None, limit_s: float = 120.0
) -> None:
    """`wait_listening_sync` from a running event loop."""
    await asyncio.to_thread(wait_listening_sync, port, process, limit_s)


async def fresh_database(engine: str, pg_url: str | None, workdir: Path) -> str:
    """A new SQLite file or PostgreSQL database, schema at head."""
    if engine == "sqlite":
        url = f"sqlite+aiosqlite:///{workdir / f'bench-{uuid.uuid4().hex[:6]}.db'}"
    else:
        assert pg_url is not None
        name = f"fq_bench_{uuid.uuid4().hex[:8]}"
        await _on_postgres(pg_url, f'CREATE DATABASE "{name}"')
        url = make_url(pg_url).set(database=name).render_as_string(hide_password=False)
    await asyncio.to_thread(upgrade_to_head, url)
    return url


#: What a seeded benchmark database holds, as an instance that has federated a while would:
#: cached remote actors, inbound activities (each in one local inbox), outbox rows and their
#: deliveries, all delivered (`seed_running_instance`).
KNOWN_ACTORS = 10_000
PAST_INBOUND = 10_000
PAST_OUTBOX = 2_000
PAST_DELIVERIES_EACH = 5


async def seed_running_instance(url: str, local_actor: str) -> None:
    """Fill the tables as a running instance's are; on PostgreSQL, ANALYZE as autovacuum would have.

    On a new, empty PostgreSQL database the server's first plans are made for empty tables
    and, once prepared, kept on each pooled connection (a generic plan) until an ANALYZE of
    the table invalidates them: a lookup that a seq scan answered at 50 rows still seq-scans
    at 3,000 (1.3 ms a read, measured with pg_stat_statements), until autovacuum's first
    analyze, which a benchmark of a few seconds never sees. The same holds for the foreign-key
    checks PostgreSQL runs on each insert (inbox item -> inbound activity, delivery -> outbox
    row): analyzed while those tables were empty, each check seq-scanned the whole parent
    table, so the 4,000th inbox item cost 0.26 ms of the server's time where 0.03 ms is its
    real cost. Seeded and analyzed, every table the benchmarks write is planned as a running
    instance's is. SQLite is left without statistics, as a running instance's is (nothing
    there analyzes by itself): analyzed while the other tables were empty, its planner went on
    treating them as empty, and the inbound flood fell from 1,770 to 1,480/s. The seeded
    actors, activities and deliveries are on a host the benchmark never sends from or to
    (`seed.invalid`).
    """
    now = utcnow()
    origin = "https://seed.invalid"
    actors = [
        {
            "uri": f"{origin}/users/u{i}",
            "inbox": f"{origin}/users/u{i}/inbox",
            "shared_inbox": f"{origin}/inbox",
            "key_id": f"{origin}/users/u{i}#main-key",
            "public_key_pem": "-----BEGIN PUBLIC KEY-----\n" + "A" * 392 + "\n-----END PUBLIC KEY-----\n",
            "document": json.dumps({"id": f"{origin}/users/u{i}", "type": "Person"}),
            "fetched_at": now,
            "expires_at": now + datetime.timedelta(days=1),
        }
        for i in range(KNOWN_ACTORS)
    ]
    past = now - datetime.timedelta(hours=1)
    inbound = [
        {
            "activity_id": f"{origin}/activities/{i}",
            "actor_uri": f"{origin}/users/u{i % KNOWN_ACTORS}",
            "activity_type": "Create",
            "body": json.dumps({"id": f"{origin}/activities/{i}", "type": "Create"}),
            "key_id": f"{origin}/users/u{i % KNOWN_ACTORS}#main-key",
            "received_at": past,
        }
        for i in range(PAST_INBOUND)
    ]
    items = [{"inbound_id": i + 1, "actor": local_actor} for i in range(PAST_INBOUND)]
    outbox = [
        {
            "actor": local_actor,
            "activity": json.dumps({"id": f"https://local.invalid/activities/{i}", "type": "Create"}),
            "activity_id": f"https://local.invalid/activities/{i}",
            "activity_type": "Create",
            "state": "expanded",
            "created_at": past,
            "expanded_at": past,
        }
        for i in range(PAST_OUTBOX)
    ]
    deliveries = [
        {
            "outbox_id": i // PAST_DELIVERIES_EACH + 1,
            "inbox": f"{origin}/users/u{i}/inbox",
            "host": "seed.invalid",
            "actor": local_actor,
            "activity_type": "Create",
            "state": "delivered",
            "attempts": 1,
            "next_attempt_at": past,
            "delivered_at": past,
        }
        for i in range(PAST_OUTBOX * PAST_DELIVERIES_EACH)
    ]
    engine = create_async_engine(url)
    try:
        # A new database: the rows take ids 1, 2, ... in order, which the items and deliveries name.
        async with engine.begin() as conn:
            for table, rows in (
                (RemoteActorRow.__table__, actors),  # type: ignore[attr-defined]
                (InboundActivityRow.__table__, inbound),  # type: ignore[attr-defined]
                (InboxItemRow.__table__, items),  # type: ignore[attr-defined]
                (OutboxRow.__table__, outbox),  # type: ignore[attr-defined]
                (DeliveryRow.__table__, deliveries),  # type: ignore[attr-defined]
            ):
                await conn.execute(insert(table), rows)
        if engine.dialect.name == "postgresql":  # what autovacuum does there; SQLite has no such thing
            async with engine.connect() as conn:
                await conn.execute(text("ANALYZE"))
                await conn.commit()
    finally:
        await engine.dispose()


async def _on_postgres(url: str, sql: str, database: str | None = None) -> None:
    """Run `sql` on a benchmark's PostgreSQL server, in its database or in `database` (nothing for SQLite)."""
    parsed = make_url(url)
    if not parsed.drivername.startswith("postgresql"):
        return
    conn = await asyncpg.connect(
        parsed.set(drivername="postgresql", database=database or parsed.database).render_as_string(False)
    )
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


async def vacuum(url: str) -> None:
    """VACUUM (ANALYZE) a benchmark's PostgreSQL database, as autovacuum would."""
    await _on_postgres(url, "VACUUM (ANALYZE)")


async def drop_database(url: str) -> None:
    """Drop a benchmark's PostgreSQL database (SQLite files go with the temporary directory)."""
    await _on_postgres(url, f'DROP DATABASE IF EXISTS "{make_url(url).database}" WITH (FORCE)', "postgres")


def spread(values: Sequence[float], digits: int = 0) -> str:
    """Median [lowest-highest]."""
    fmt = f"{{:.{digits}f}}"
    low, mid, high = (fmt.format(v) for v in (min(values), statistics.median(values), max(values)))
    return f"{mid} [{low}-{high}]"


def load_average() -> str:
    return "{:.1f}/{:.1f}/{:.1f}".format(*os.getloadavg())


def machine_line(samples: int = 200) -> str:
    """This machine's cores and RSA-2048 costs, so figures from different machines compare.

    Signing is the floor of every delivery and key fetch; it differs several-fold between
    machines (0.25 ms on some, 0.7 ms on others), so each benchmark prints it first.
    """
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    message, pad, digest = b"(request-target): post /inbox", padding.PKCS1v15(), hashes.SHA256()
    started = time.process_time()
    for _ in range(samples):
        signature = key.sign(message, pad, digest)
    sign_ms = (time.process_time() - started) / samples * 1000
    started = time.process_time()
    for _ in range(samples):
        key.public_key().verify(signature, message, pad, digest)
    verify_us = (time.process_time() - started) / samples * 1_000_000
    cores = os.cpu_count()
    return f"# machine: {cores} cores; RSA-2048 sign {sign_ms:.2f} ms, verify {verify_us:.0f} µs (one core)"


def engines(pg_url: str | None, only: str | None = None) -> list[str]:
    names = ["sqlite"] + (["postgres"] if pg_url else [])
    return [name for name in names if only is None or name == only]


def postgres_backends(database: str) -> list[int]:
    """Pids of the PostgreSQL backends connected to `database` (cmdline "postgres: user db ...")."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # the process ended between the listing and the read
        if cmdline.startswith("postgres:") and f" {database} " in cmdline:
            pids.append(int(entry.name))
    return pids


def postgres_cpu_seconds(database: str) -> float:
    """CPU of the PostgreSQL backends serving `database` (other databases' backends excluded)."""
    total = 0.0
    for pid in postgres_backends(database):
        try:
            total += cpu_seconds(pid)
        except OSError:
            continue  # the backend ended since the listing
    return total


@dataclass
class CpuMeter:
    """CPU seconds used by some processes (their signing processes included) and a database's
    PostgreSQL backends, between two reads."""

    pids: Sequence[int]
    database: str | None = None

    def read(self) -> tuple[float, float, float, float]:
        signing = sum(signing_cpu_seconds(pid) for pid in self.pids)
        own = sum(cpu_seconds(pid) for pid in self.pids) + signing
        main = sum(main_thread_cpu_seconds(pid) for pid in self.pids)
        return own, postgres_cpu_seconds(self.database) if self.database else 0.0, main, signing

    @contextmanager
    def measure(self) -> Iterator[list[float]]:
        """Yields a list that holds [processes' CPU s, PostgreSQL CPU s, the processes' main
        threads' CPU s, their signing processes' CPU s] once the block ends."""
        result: list[float] = []
        before = self.read()
        yield result
        after = self.read()
        result.extend(end - start for start, end in zip(before, after, strict=True))


def database_name(url: str) -> str | None:
    parsed = make_url(url)
    return parsed.database if parsed.drivername.startswith("postgresql") else None


# --- fedqueue processes -------------------------------------------------------------------


def fedqueue_env(url: str, base_url: str = "http://127.0.0.1:8000", **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        FEDQUEUE_DATABASE_URL=url,
        FEDQUEUE_BASE_URL=base_url,
        FEDQUEUE_ALLOW_PRIVATE_ADDRESSES="true",
        FEDQUEUE_LOG_LEVEL="WARNING",
        # The benchmarks' senders share a few loopback hosts, where real floods come from many:
        # the per-host inbox throttle would measure itself, not the inbox.
        FEDQUEUE_INBOX_THROTTLE_PER_SECOND="0",
    )
    env.update({f"FEDQUEUE_{k.upper()}": v for k, v in extra.items()})
    return env


@contextmanager
def running(
    args: Sequence[str], env: dict[str, str] | None = None, cwd: Path | None = None, log: Path | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """A child process (in `cwd`, if given), terminated (then killed) when the block ends; its
    standard error appended to `log` (as a service's goes to its journal), else ours."""
    with log.open("ab") if log else nullcontext() as stderr:
        process = subprocess.Popen(list(args), env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=stderr)
        try:
            yield process
        finally:
            stop(process)


def taskset(cpu: int | None, args: list[str]) -> list[str]:
    return args if cpu is None else ["taskset", "-c", str(cpu), *args]


# --- the loopback fediverse -----------------------------------------------------------------


def key_pool(size: int) -> list[keys.KeyPair]:
    """A few RSA-2048 pairs; remote actor i uses pair i % size (generating thousands takes minutes)."""
    return [keys.generate_key_pair() for _ in range(size)]


def actor_document(origin: str, name: str, public_pem: str) -> dict[str, Any]:
    uri = f"{origin}/users/{name}"
    return {
        "@context": ["https://www.w3.org/ns/activitystreams", "https://w3id.org/security/v1"],
        "id": uri,
        "type": "Person",
        "preferredUsername": name,
        "inbox": f"{uri}/inbox",
        "endpoints": {"sharedInbox": f"{origin}/inbox"},
        "publicKey": {"id": f"{uri}#main-key", "owner": uri, "publicKeyPem": public_pem},
    }


def _fediverse(
    sockets: list[socket.socket], public_pems: list[str], delay_s: float, count: Synchronized[int]
) -> None:
    """Remote servers: actor documents for GET /users/s{i}, 202 for every POST, GET /count."""

    async def inbox(request: web.Request) -> web.Response:
        await request.read()
        if delay_s:
            await asyncio.sleep(delay_s)
        count.value += 1  # this process's one thread is the only writer
        return web.Response(status=202)

    async def counted(_request: web.Request) -> web.Response:
        return web.Response(text=str(count.value))

    async def actor(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        index = int(name.lstrip("s")) if name.lstrip("s").isdigit() else 0
        doc = actor_document(f"http://{request.host}", name, public_pems[index % len(public_pems)])
        return web.Response(text=json.dumps(doc), content_type="application/activity+json")

    async def serve() -> None:
        app = web.Application()
        app.router.add_post("/{tail:.*}", inbox)
        app.router.add_get("/count", counted)
        app.router.add_get("/users/{name}", actor)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        for sock in sockets:
            await web.SockSite(runner, sock).start()
        await asyncio.Event().wait()

    asyncio.run(serve())


@dataclass
class Fediverse:
    """The remote side in its own process: one host per port, all sharing one POST counter."""

    ports: list[int]
    pairs: list[keys.KeyPair]
    process: multiprocessing.Process
    #: POSTs received, in shared memory: reading it costs the measured process nothing.
    counter: Synchronized[int]

    @property
    def pid(self) -> int:
        assert self.process.pid is not None, "started on entering `fediverse`"
        return self.process.pid

    def origin(self, host: int = 0) -> str:
        return f"http://127.0.0.1:{self.ports[host]}"

    async def count(self) -> int:
        return int(self.counter.value)

    async def wait_count(self, target: int, limit_s: float = WAIT_LIMIT_S) -> tuple[int, float]:
        """(count, seconds) once the counter reaches `target` or `limit_s` has passed (polled every 20 ms)."""
        started = time.perf_counter()
        count = await self.count()
        for _ in range(int(limit_s / 0.02)):
            if count >= target or time.perf_counter() - started > limit_s:
                break
            await asyncio.sleep(0.02)
            count = await self.count()
        return count, time.perf_counter() - started


@contextmanager
def fediverse(
    hosts: int = 1, pairs: list[keys.KeyPair] | None = None, delay_s: float = 0.0
) -> Iterator[Fediverse]:
    # Bound and listening here, before the fork: ports taken one by one with `free_port` could
    # be handed out twice, and a clash made a run fail with "address already in use".
    sockets = [listening_socket() for _ in range(hosts)]
    ports = [int(sock.getsockname()[1]) for sock in sockets]
    pairs = pairs or key_pool(1)
    counter: Synchronized[int] = multiprocessing.Value("q", 0)
    process = multiprocessing.Process(
        target=_fediverse, args=(sockets, [p.public_pem for p in pairs], delay_s, counter), daemon=True
    )
    try:
        process.start()
        yield Fediverse(ports, pairs, process, counter)
    finally:
        for sock in sockets:
            sock.close()
        process.terminate()
        process.join(5)


# --- pre-signed requests and the load generator -------------------------------------------------

SignedRequest = tuple[str, dict[str, str], bytes]


@functools.cache
def _private_key(pem: str) -> PrivateKeyTypes:
    """Parsing a PEM key costs tens of milliseconds (OpenSSL checks it): once per key."""
    return keys.load_private_key(pem)


def signed_post(url: str, doc: dict[str, Any], key_id: str, pair: keys.KeyPair) -> SignedRequest:
    """A draft-cavage signed POST as Mastodon sends it, signed now (before any timing starts)."""
    body = json.dumps(doc).encode()
    identity = SigningIdentity(key_id, _private_key(pair.private_pem))
    headers = signed_headers(
        "POST", url, identity, utcnow(), digest=sha256_digest_header(body), content_type=None
    )
    headers.pop("host")  # aiohttp sets the same Host from the URL
    return url, headers, body


def create_note(remote_origin: str, sender: str, n: int, to: str) -> dict[str, Any]:
    uri = f"{remote_origin}/users/{sender}"
    return {
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": f"{uri}/activities/{n}",
        "type": "Create",
        "actor": uri,
        "to": [to],
        "object": {
            "id": f"{uri}/notes/{n}",
            "type": "Note",
            "attributedTo": uri,
            "content": f"note {n}",
            "to": [to],
        },
    }


def follow(remote_origin: str, sender: str, target: str) -> dict[str, Any]:
    uri = f"{remote_origin}/users/{sender}"
    return {
        "@context": "https://www.w3.org/ns/activitystreams",
        "id": f"{uri}/follows/1",
        "type": "Follow",
        "actor": uri,
        "object": target,
    }


@dataclass(frozen=True)
class FloodResult:
    seconds: float
    latencies_s: list[float]
    statuses: dict[int, int]
    #: CPU seconds the load generator itself spent (its share of the same two cores).
    sender_cpu_s: float = 0.0

    @property
    def rate(self) -> float:
        return len(self.latencies_s) / self.seconds

    def percentile(self, p: float) -> float:
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


async def _send_all(requests: list[SignedRequest], connections: int, limit_s: float) -> FloodResult:
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    pending = iter(requests)
    started = time.perf_counter()
    connector = aiohttp.TCPConnector(limit=connections, force_close=False)
    timeout = aiohttp.ClientTimeout(total=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def lane() -> None:
            for url, headers, body in pending:
                if time.perf_counter() - started > limit_s:
                    return
                sent = time.perf_counter()
                try:
                    async with session.post(url, data=body, headers=headers) as response:
                        await response.read()
                        statuses[response.status] += 1
                except (aiohttp.ClientError, TimeoutError):
                    statuses[0] += 1
                latencies.append(time.perf_counter() - sent)

        await asyncio.gather(*(lane() for _ in range(connections)))
    return FloodResult(time.perf_counter() - started, latencies, dict(statuses))


def _flood_process(
    requests: list[SignedRequest], connections: int, limit_s: float, out: multiprocessing.Queue[FloodResult]
) -> None:
    before = time.process_time()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        result = runner.run(_send_all(requests, connections, limit_s))
    out.put(dataclasses.replace(result, sender_cpu_s=time.process_time() - before))


def flood(requests: list[SignedRequest], connections: int, limit_s: float) -> FloodResult:
    """Send pre-signed requests from a separate process, `connections` at a time, within `limit_s`."""
    context = multiprocessing.get_context("fork")
    out: multiprocessing.Queue[FloodResult] = context.Queue()
    process = context.Process(target=_flood_process, args=(requests, connections, limit_s, out))
    process.start()
    try:
        return out.get(timeout=limit_s + 90)
    finally:
        process.join(10)


async def flood_async(requests: list[SignedRequest], connections: int, limit_s: float) -> FloodResult:
    return await asyncio.to_thread(flood, requests, connections, limit_s)


# --- the Fedify peer ------------------------------------------------------------------------

FEDIFY_PEER = Path(__file__).parent.parent / "fedify" / "peer.mjs"


def fedify_installed() -> bool:
    """True once `npm ci` has run in tests/fedify (the benchmarks skip Fedify otherwise)."""
    return (FEDIFY_PEER.parent / "node_modules" / "@fedify" / "fedify").is_dir()


@contextmanager
def fedify_inbox(port: int, mode: str = "inline") -> Iterator[subprocess.Popen[bytes]]:
    """Fedify's inbox for `alice` on 127.0.0.1:`port`, in its own Node process (`mode`: peer.mjs)."""
    with running([NODE, str(FEDIFY_PEER), "inbox", str(port), mode]) as process:
        wait_listening_sync(port, process)
        yield process


def fedify_fanout(
    mode: str,
    n: int,
    count_url: str,
    origins: Sequence[str],
    command: str = "fanout",
    first_knock: str | None = None,
    node: str = NODE,
    warm_up: bool = False,
) -> dict[str, float]:
    """Fedify's sendActivity to `n` recipients over `origins`: {"seconds", "cpu_s", "delivered"}.

    `command` "fanout" sends one activity to all of them, "small" one activity to each (peer.mjs).
    `first_knock`: the scheme Fedify signs with first ("draft-cavage-http-signatures-12" or its
    default, "rfc9421"). `node`: the Node.js executable (tests/node.py's by default). `warm_up`:
    the same is sent once before, unmeasured, by the same process.
    """
    env = dict(os.environ)
    if first_knock:
        env["FEDIFY_FIRST_KNOCK"] = first_knock
    if warm_up:
        env["FEDIFY_WARM_UP"] = "1"
    done = subprocess.run(
        [node, str(FEDIFY_PEER), command, mode, str(n), count_url, ",".join(origins)],
        preexec_fn=_many_open_files,
        capture_output=True,
        text=True,
        timeout=(max(WAIT_LIMIT_S, n / FEDIFY_FLOOR_RATE) + 30) * (2 if warm_up else 1),
        check=True,
        env=env,
    )
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


#: The slowest rate (deliveries a second) a Fedify send is waited for at: on a machine signing
#: RSA-2048 in 0.8 ms it sends about 250 a second, so 50,000 recipients outlast WAIT_LIMIT_S.
FEDIFY_FLOOR_RATE = 100


#: Open files Fedify's process asks for: `immediate` opens a socket per recipient at once, and
#: at 50,000 recipients it fails with EMFILE where the hard limit is lower (20,000 on the
#: benchmark machine, which a sandboxed root cannot raise): its queue modes are then its best.
FEDIFY_OPEN_FILES = 200_000


def _many_open_files() -> None:
    """In the Fedify child, before exec: raise its open-files limit (as far as allowed)."""
    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = max(hard, FEDIFY_OPEN_FILES)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, wanted))
    except (ValueError, OSError):  # not root: only up to the hard limit
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


# --- profiles -----------------------------------------------------------------------------------


@contextmanager
def profiled(pid: int, out: Path | None) -> Iterator[None]:
    """py-spy samples `pid` (all threads) into `out` as collapsed stacks, only while they hold the GIL.

    Without `--gil` a thread waiting for the GIL is sampled as busy wherever it waits: under a
    Follow flood the event loop's `parsedate_to_datetime` showed 2.6 % of its samples for a
    3 µs call made once per request (0.5 % with `--gil`). Work done with the GIL released
    (RSA signing, the drivers' I/O) is not sampled: /proc's CPU figures count it.
    Nothing happens when `out` is None. py-spy is not a dependency: `pip install py-spy`.
    """
    if out is None:
        yield
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    spy = Path(sys.executable).with_name("py-spy")
    command = [str(spy), "record", "--format", "raw", "--rate", "250", "--threads", "--subprocesses", "--gil"]
    command += ["-o", str(out)]
    with running([*command, "--pid", str(pid)]) as recorder:
        time.sleep(1.0)  # py-spy attaches before the load starts
        yield
        recorder.send_signal(signal.SIGINT)
        recorder.wait(timeout=30)
