"""SigningProcess: deliveries signed by a child process verify, its failures reach only their
own deliveries, and a child that dies is replaced. SigningPool: a worker's signatures shared
among several such children."""

from __future__ import annotations

import asyncio
import os
import signal
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519, rsa
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from fedqueue.outbound.send import post, prepare_body
from fedqueue.outbound.worker import Worker
from fedqueue.remote import signing_process
from fedqueue.remote.http_client import HttpClient, SigningIdentity, unsigned_request
from fedqueue.remote.signing_process import Signer, SignerUnavailable, SigningPool, SigningProcess
from fedqueue.rules.signing.requests import (
    SignatureError,
    SignatureScheme,
    parse_request_signatures,
    verify_any,
)
from fedqueue.rules.signing.unsigned import SigningAlgorithm
from fedqueue.settings import Settings
from fedqueue.storage.column_types import utcnow
from tests.loopback import LoopbackServer
from tests.procfs import child_pids

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
ED25519_KEY = ed25519.Ed25519PrivateKey.generate()
INBOX = "https://remote.example/users/bob/inbox"
BODY = prepare_body('{"type":"Create"}')


@pytest.fixture
async def signer() -> AsyncIterator[SigningProcess]:
    process = SigningProcess()
    try:
        yield process
    finally:
        await process.aclose()


@pytest.fixture
async def pool() -> AsyncIterator[SigningPool]:
    two = SigningPool(2)
    try:
        yield two
    finally:
        await two.aclose()


async def signed(signer: Signer, identity: SigningIdentity, scheme: SignatureScheme) -> dict[str, str]:
    request = unsigned_request(
        "POST",
        INBOX,
        identity,
        utcnow(),
        digest=BODY.digest,
        content_digest=BODY.content_digest,
        scheme=scheme,
    )
    unsigned = request.unsigned
    return request.signed(await signer.sign(identity.private_key, unsigned.algorithm, unsigned.base))


def child_pid(signer: SigningProcess) -> int:
    process = signer._process  # the test looks at the child it kills
    assert process is not None
    return process.pid


@pytest.mark.parametrize(
    ("scheme", "key"),
    [("cavage", RSA_KEY), ("rfc9421", RSA_KEY), ("rfc9421", ED25519_KEY)],
)
async def test_signatures_made_by_the_process_verify(
    signer: SigningProcess, scheme: SignatureScheme, key: rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey
) -> None:
    identity = SigningIdentity("https://local.example/actors/alice#main-key", key)
    headers = await signed(signer, identity, scheme)
    parsed = parse_request_signatures(headers)
    verify_any(parsed, "POST", INBOX, headers, BODY.body, {identity.key_id: key.public_key()})


async def test_many_signatures_with_several_keys_each_come_back_to_their_own_caller(
    signer: SigningProcess,
) -> None:
    keys: list[PrivateKeyTypes] = [RSA_KEY, OTHER_RSA_KEY, ED25519_KEY]
    identities = [
        SigningIdentity(f"https://local.example/actors/a{n}#main-key", k) for n, k in enumerate(keys)
    ]
    chosen = [identities[n % 3] for n in range(3 * signing_process.CHUNK + 5)]
    results = await asyncio.gather(*(signed(signer, identity, "rfc9421") for identity in chosen))
    for identity, headers in zip(chosen, results, strict=True):
        public = identity.private_key.public_key()
        verify_any(
            parse_request_signatures(headers), "POST", INBOX, headers, BODY.body, {identity.key_id: public}
        )


async def test_past_the_key_bound_the_process_forgets_its_keys_and_still_signs_with_the_right_one(
    signer: SigningProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(signing_process, "MAX_KEYS", 1)
    first = SigningIdentity("https://local.example/actors/a#main-key", RSA_KEY)
    second = SigningIdentity("https://local.example/actors/b#main-key", OTHER_RSA_KEY)
    for identity in (first, second, first, second):
        headers = await signed(signer, identity, "cavage")
        public = identity.private_key.public_key()
        verify_any(
            parse_request_signatures(headers), "POST", INBOX, headers, BODY.body, {identity.key_id: public}
        )
    assert len(signer._handles) == 1  # the bound holds in the parent too


async def test_a_key_that_does_not_fit_the_algorithm_fails_only_its_own_signature(
    signer: SigningProcess,
) -> None:
    failed, fine = await asyncio.gather(
        signer.sign(ED25519_KEY, "rsa-v1_5-sha256", b"base"),
        signer.sign(RSA_KEY, "rsa-v1_5-sha256", b"base"),
        return_exceptions=True,
    )
    assert isinstance(failed, SignatureError)
    assert str(failed) == "an Ed25519 key does not fit algorithm rsa-v1_5-sha256"
    assert isinstance(fine, bytes) and len(fine) == 256


async def test_a_killed_process_fails_what_waits_for_it_and_the_next_signature_starts_another(
    signer: SigningProcess,
) -> None:
    await signer.sign(RSA_KEY, "rsa-v1_5-sha256", b"warm")
    pid = child_pid(signer)
    os.kill(pid, signal.SIGSTOP)  # holds the signature below until the kill
    waiting = asyncio.ensure_future(signer.sign(RSA_KEY, "rsa-v1_5-sha256", b"held"))
    await asyncio.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    with pytest.raises(SignerUnavailable, match="the signing process ended"):
        await asyncio.wait_for(waiting, 5)
    assert len(await signer.sign(RSA_KEY, "rsa-v1_5-sha256", b"again")) == 256
    assert child_pid(signer) != pid


async def test_closing_ends_the_child_and_a_later_signature_starts_a_new_one(signer: SigningProcess) -> None:
    await signer.sign(RSA_KEY, "rsa-v1_5-sha256", b"one")
    pid = child_pid(signer)
    await signer.aclose()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert len(await signer.sign(RSA_KEY, "rsa-v1_5-sha256", b"two")) == 256


async def test_a_delivery_whose_signer_died_fails_for_a_retry_instead_of_dying(
    settings: Settings, signer: SigningProcess, remote: LoopbackServer
) -> None:
    """A dead signing process is the worker's trouble, not the delivery's: it is tried again."""
    await signer.sign(RSA_KEY, "rsa-v1_5-sha256", b"warm")
    os.kill(child_pid(signer), signal.SIGSTOP)
    client = HttpClient(settings.model_copy(update={"allow_private_addresses": True}))
    identity = SigningIdentity("https://local.example/actors/alice#main-key", RSA_KEY)
    try:
        sending = asyncio.ensure_future(
            post(client, f"{remote.origin}/inbox", prepare_body("{}"), identity, utcnow(), signer=signer)
        )
        await asyncio.sleep(0.05)
        os.kill(child_pid(signer), signal.SIGKILL)
        attempt = await asyncio.wait_for(sending, 5)
    finally:
        await client.aclose()
    assert attempt.status is None
    assert attempt.error == "the signing process ended"
    assert attempt.permanent is False
    assert remote.received("POST", "/inbox") == []


async def test_a_pool_shares_a_batch_of_signatures_evenly_among_its_processes(
    pool: SigningPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: Counter[int] = Counter()
    sign = SigningProcess.sign

    async def counted(
        child: SigningProcess, key: PrivateKeyTypes, algorithm: SigningAlgorithm, data: bytes
    ) -> bytes:
        asked[id(child)] += 1
        return await sign(child, key, algorithm, data)

    monkeypatch.setattr(SigningProcess, "sign", counted)
    identity = SigningIdentity("https://local.example/actors/alice#main-key", RSA_KEY)
    results = await asyncio.gather(*(signed(pool, identity, "cavage") for _ in range(40)))
    assert sorted(asked.values()) == [20, 20]
    for headers in results:
        verify_any(
            parse_request_signatures(headers),
            "POST",
            INBOX,
            headers,
            BODY.body,
            {identity.key_id: RSA_KEY.public_key()},
        )


async def test_a_killed_pool_process_s_share_is_signed_again_and_the_pool_signs_on(pool: SigningPool) -> None:
    await pool.start()
    first = pool._children[0]  # the test kills it
    await asyncio.gather(*(pool.sign(RSA_KEY, "rsa-v1_5-sha256", b"warm") for _ in range(2)))
    pid = child_pid(first)
    os.kill(pid, signal.SIGSTOP)  # holds its share of the batch until the kill
    batch = [asyncio.ensure_future(pool.sign(RSA_KEY, "rsa-v1_5-sha256", b"%d" % n)) for n in range(6)]
    for _ in range(250):  # up to 5 s: the other process answers its share
        if sum(task.done() for task in batch) == 3:
            break
        await asyncio.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    outcomes = await asyncio.wait_for(asyncio.gather(*batch, return_exceptions=True), 5)
    # Its share is asked again of a live child (issue 48): none fails, none is charged to a host.
    assert sum(isinstance(o, bytes) and len(o) == 256 for o in outcomes) == 6
    again = await asyncio.gather(*(pool.sign(RSA_KEY, "rsa-v1_5-sha256", b"again") for _ in range(2)))
    assert [len(signature) for signature in again] == [256, 256]
    assert child_pid(first) != pid


def signing_children() -> list[int]:
    """This process's signing processes, from /proc."""
    return [
        pid
        for pid in child_pids(os.getpid())
        if b"fedqueue.remote.signing_process" in Path(f"/proc/{pid}/cmdline").read_bytes()
    ]


async def test_a_running_worker_starts_its_signing_processes_before_its_first_delivery_and_ends_them(
    worker: Worker, settings: Settings
) -> None:
    """A long-running worker's first deliveries do not wait for its signing processes to start."""
    before = signing_children()
    stop = asyncio.Event()
    running = asyncio.create_task(worker.run(stop))
    try:
        for _ in range(500):  # up to 10 s
            if len(signing_children()) == len(before) + settings.signing_processes:
                break
            await asyncio.sleep(0.02)
        assert len(signing_children()) == len(before) + settings.signing_processes == len(before) + 2
    finally:
        stop.set()
        await running
    assert signing_children() == before


async def test_the_child_runs_this_process_s_fedqueue_whatever_the_working_directory_holds(
    signer: SigningProcess, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout of another version in the directory a worker is started from is not imported."""
    (tmp_path / "fedqueue").mkdir()
    (tmp_path / "fedqueue" / "__init__.py").write_text('raise ImportError("not this fedqueue")\n')
    monkeypatch.chdir(tmp_path)
    assert len(await signer.sign(RSA_KEY, "rsa-v1_5-sha256", b"base")) == 256
