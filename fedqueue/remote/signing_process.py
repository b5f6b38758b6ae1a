"""A process of its own that signs the worker's deliveries, beside the event loop.

An RSA-2048 signature costs about as much CPU as the rest of a delivery. On threads (as
`signing_threads` still does for fetches) every signature takes the GIL back from the busy
event loop once it is made, and those handovers cost about a quarter as much CPU again as the
signature itself (docs/benchmarks/history.md, Twelfth pass). A child process has no GIL to
share: the loop builds each signature base (`signing.unsigned.Unsigned`), the child makes the
key operation, the loop frames the headers.

One child signs only as fast as one core (RSA-2048: about 1,300 signatures a second where one
takes 0.75 ms). Where a signature costs more than the rest of a delivery, that is slower than
the event loop sends, so a worker signs on a `SigningPool` of `signing_processes` children (2
by default), each signature going to the one with the fewest waiting
(docs/benchmarks/history.md, Twenty-first pass).

Ed25519 signatures (`alg="ed25519"`, `rules.key_choice`) go to the children too. Measured on
this 2-core machine (200-byte base): inline, one costs the event loop 0.034 ms of CPU (RSA-2048:
0.26 ms); through a child, the loop's share is 0.017 ms a signature when they come 8 at a time (a
fan-out's batch) and 0.014 ms at 64, against 0.068 ms for one alone. Fan-out, where the CPU goes,
signs in batches, so the child stays cheaper for the loop even for Ed25519.

Each child is `python -m fedqueue.remote.signing_process`, started on the first signature and
spoken to over its standard input and output in frames: a 4-byte big-endian length, then
records (`struct`, big-endian; both ends are this module).
- to the child: `K` handle, then a PKCS#8 DER private key (sent once per key); `F` (forget every
  key); `S` number, handle, algorithm (its index in `ALGORITHMS`), then the bytes to sign;
- back, one frame per frame that held signs: for each, its number, whether it failed, then
  the signature or the error message.
Requests made in one pass of the event loop are written together, `CHUNK` to a frame, so that
the first POSTs of a large batch need not wait for the whole batch to be signed. The child
ends when its standard input closes: when `aclose` closes it, or when the worker dies.

If a child dies, the signatures waiting for it are asked again of a live child (a new one is
started), up to `SIGN_TRIES` times in all: a signer's death is this worker's fault, not the
remote host's, and a signature that fails here would be charged to the host's circuit (one
SIGKILL of the children mid fan-out failed 100-300 deliveries at once and opened their hosts'
circuits for `circuit_open_seconds`: the issue-48 "silent worker"). Only then, or once the
pool is closed, does a signature fail with `SignerUnavailable`. A child counts as
gone as soon as any one of these says so: its answers end (or cannot be read), it exits (even
if something else still holds its pipes), writing to it fails, or it has owed an answer for
`SILENT_LIMIT_S` (stopped or stuck): then it is killed. Whatever the moment, nothing is left
waiting for a child that will not answer (issue 48).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import struct
import sys
import time
from pathlib import Path
from typing import Protocol, get_args

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from fedqueue.rules.errors import FedqueueError, SignatureError
from fedqueue.rules.signing.unsigned import SigningAlgorithm, sign_bytes

#: Sign requests written to the child in one frame (and answered in one).
CHUNK = 8
#: Keys the child holds at most; past it, it forgets them all and is sent each again on use.
MAX_KEYS = 1024
#: How long `aclose` waits for the child to end on its own before killing it.
EXIT_WAIT_S = 2.0
#: How often a child is looked at: has it exited, has it owed an answer too long.
WATCH_S = 0.5
#: How long a child may owe an answer before it is killed (one signature takes about 1 ms).
SILENT_LIMIT_S = 15.0
#: How many children one signature is asked of at most when they die before answering.
SIGN_TRIES = 8
#: The algorithms a sign record names, by their index.
ALGORITHMS: tuple[SigningAlgorithm, ...] = get_args(SigningAlgorithm)
_LENGTH = struct.Struct(">I")
_KEY = struct.Struct(">cII")  # b"K", handle, length of the DER that follows
_SIGN = struct.Struct(">cQIBI")  # b"S", number, handle, algorithm, length of the data that follows
_ANSWER = struct.Struct(">Q?I")  # number, failed, length of the signature or message that follows


class SignerUnavailable(FedqueueError):
    """The signing process ended (or could not start) before it answered: try again later."""


class SignerClosed(SignerUnavailable):
    """The signing process was closed (`aclose`) before it answered: not asked again."""


def _child_environment() -> dict[str, str]:
    """This environment, with the directory this process imported fedqueue from first on the
    child's PYTHONPATH: the child runs the same code, whatever its working directory holds."""
    here = str(Path(__file__).resolve().parents[2])
    paths = [here, *[path for path in os.environ.get("PYTHONPATH", "").split(os.pathsep) if path]]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def _frame(records: list[bytes]) -> bytes:
    body = b"".join(records)
    return _LENGTH.pack(len(body)) + body


def _key_record(handle: int, der: bytes) -> bytes:
    return _KEY.pack(b"K", handle, len(der)) + der


def _sign_record(number: int, handle: int, algorithm: SigningAlgorithm, data: bytes) -> bytes:
    return _SIGN.pack(b"S", number, handle, ALGORITHMS.index(algorithm), len(data)) + data


class Signer(Protocol):
    """What a delivery is signed on (`outbound.send.post`): a `SigningPool` or one `SigningProcess`."""

    async def sign(self, private_key: PrivateKeyTypes, algorithm: SigningAlgorithm, data: bytes) -> bytes: ...


class SigningProcess:
    """Signs on a child process, started on first use; `aclose` ends it."""

    def __init__(self) -> None:
        self._process: asyncio.subprocess.Process | None = None
        self._starting: asyncio.Lock | None = None
        #: Each child's reader and watcher: they end once the child has ended and been waited for.
        self._readers: set[asyncio.Task[None]] = set()
        #: id(key) -> (the key, kept so that the id is not reused; its handle in the child).
        self._handles: dict[int, tuple[PrivateKeyTypes, int]] = {}
        self._numbers = itertools.count()
        self._handle_numbers = itertools.count()
        self._pending: dict[int, asyncio.Future[bytes]] = {}
        #: Records of this pass of the event loop, written together by `_hand_over` (to the child
        #: that is current then: a child's end empties it).
        self._waiting: list[bytes] = []
        self._handing_over: asyncio.Handle | None = None
        #: When the child last answered, or was asked while it owed nothing (time.monotonic).
        self._heard_at = 0.0

    async def sign(self, private_key: PrivateKeyTypes, algorithm: SigningAlgorithm, data: bytes) -> bytes:
        """`data` signed with `private_key` under `algorithm`, by the child.

        SignatureError if the key does not fit the algorithm; SignerUnavailable if the child ended first.
        """
        if self._process is None:
            await self.start()
        handle = self._handle(private_key)
        number = next(self._numbers)
        future: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._pending[number] = future
        self._waiting.append(_sign_record(number, handle, algorithm, data))
        if self._handing_over is None:
            self._handing_over = asyncio.get_running_loop().call_soon(self._hand_over)
        try:
            return await future
        finally:
            self._pending.pop(number, None)

    async def aclose(self) -> None:
        """End the child (it exits once its input closes; killed if it has not within
        `EXIT_WAIT_S`), and wait until every child started has been waited for."""
        process, self._process = self._process, None
        if process is not None:
            self._ended(SignerClosed("the signing process was closed"))
            assert process.stdin is not None
            process.stdin.close()
            try:
                await asyncio.wait_for(process.wait(), EXIT_WAIT_S)
            except TimeoutError:
                _kill(process)
                await process.wait()
        if self._readers:
            await asyncio.wait(set(self._readers))

    async def start(self) -> asyncio.subprocess.Process:
        """The running child, started by the first caller (the others wait for it); SignerUnavailable
        if it cannot start."""
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._process is not None:
                return self._process
            try:
                process = await asyncio.create_subprocess_exec(
                    sys.executable,
                    "-P",  # not the working directory's packages: this process's (`_child_environment`)
                    "-m",
                    __name__,
                    stdin=asyncio.subprocess.PIPE,
                    stdout=asyncio.subprocess.PIPE,
                    env=_child_environment(),
                )
            except Exception as exc:  # OSError, or the loop's own refusal: the next signature tries again
                raise SignerUnavailable(f"the signing process could not start: {exc}") from None
            self._process = process
            self._handles.clear()
            self._waiting = []  # nothing can wait without a child, but a stale record must not reach this one
            self._heard_at = time.monotonic()
            for watch in (self._read(process), self._watch(process)):
                task = asyncio.create_task(watch)
                self._readers.add(task)
                task.add_done_callback(self._readers.discard)
            return process

    def _handle(self, private_key: PrivateKeyTypes) -> int:
        """The child's handle for `private_key`, sending the key first if the child lacks it."""
        known = self._handles.get(id(private_key))
        if known is not None:
            return known[1]
        if len(self._handles) >= MAX_KEYS:
            self._handles.clear()
            self._waiting.append(b"F")
        handle = next(self._handle_numbers)
        der = private_key.private_bytes(
            serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        self._handles[id(private_key)] = (private_key, handle)
        self._waiting.append(_key_record(handle, der))
        return handle

    def _hand_over(self) -> None:
        """Write what waits to the current child; a child that cannot take it is gone."""
        self._handing_over = None
        records, self._waiting = self._waiting, []
        process = self._process
        if not records or process is None:
            return  # a child's end failed its signatures already
        frames: list[bytes] = []
        start = signs = 0
        for end, record in enumerate(records, 1):
            signs += record[:1] == b"S"
            if signs == CHUNK or end == len(records):
                frames.append(_frame(records[start:end]))
                start, signs = end, 0
        if len(self._pending) <= signs:
            self._heard_at = time.monotonic()  # it owed nothing before these
        try:
            if process.stdin is None or process.stdin.is_closing():
                raise ConnectionResetError("its input is closed")
            process.stdin.write(b"".join(frames))
        except Exception as exc:
            self._lost(process, f"the signing process could not be written to: {exc}")

    async def _read(self, process: asyncio.subprocess.Process) -> None:
        """Settle each signature as its frame comes back; when the child ends, fail the rest."""
        assert process.stdout is not None
        stdout = process.stdout
        try:
            while True:
                (size,) = _LENGTH.unpack(await stdout.readexactly(_LENGTH.size))
                body = await stdout.readexactly(size)
                self._heard_at = time.monotonic()
                self._settle(body)
        except Exception:  # its end (EOF, a reset, a torn frame): whatever it was, it is gone
            self._lost(process, "the signing process ended")
        await process.wait()

    def _settle(self, body: bytes) -> None:
        at = 0
        while at < len(body):
            number, failed, length = _ANSWER.unpack_from(body, at)
            at += _ANSWER.size + length
            value = body[at - length : at]
            future = self._pending.get(number)
            if future is None or future.done():
                continue
            if failed:
                future.set_exception(SignatureError(value.decode()))
            else:
                future.set_result(value)

    async def _watch(self, process: asyncio.subprocess.Process) -> None:
        """The child is gone once it exits, even while something else still holds its pipes; one
        that has owed an answer for `SILENT_LIMIT_S` (stopped, stuck) is killed."""
        exited = asyncio.ensure_future(process.wait())
        while not (await asyncio.wait({exited}, timeout=WATCH_S))[0]:
            silent_s = time.monotonic() - self._heard_at
            if self._process is process and self._pending and silent_s > SILENT_LIMIT_S:
                self._lost(process, f"the signing process did not answer for {SILENT_LIMIT_S:g} s")
        self._lost(process, "the signing process exited")

    def _lost(self, process: asyncio.subprocess.Process, why: str) -> None:
        """`process` is gone: if it is the current child, fail what waits for it and kill it (the
        next signature starts another)."""
        if self._process is not process:
            return
        self._process = None
        self._ended(SignerUnavailable(why))
        _kill(process)

    def _ended(self, error: SignerUnavailable) -> None:
        """Fail every signature still waiting for the child with `error`."""
        self._waiting = []
        for future in self._pending.values():
            if not future.done():
                future.set_exception(error)
        self._pending.clear()


def _kill(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()


class SigningPool:
    """Signs on `size` children (`SigningProcess`), each started on its first signature; `aclose`
    ends them. Each signature goes to the child with the fewest waiting, so a batch made in one
    pass of the event loop is shared among them and one child's death fails only its share."""

    def __init__(self, size: int) -> None:
        self._children = [SigningProcess() for _ in range(size)]
        #: Signatures asked of each child and not yet answered (counted from the ask, so that
        #: those waiting for a child to start count too).
        self._waiting = [0] * size

    async def sign(self, private_key: PrivateKeyTypes, algorithm: SigningAlgorithm, data: bytes) -> bytes:
        """As `SigningProcess.sign`, on the child with the fewest signatures waiting; asked again
        (of whichever child then has the fewest, started anew if it died) when the child dies
        first, `SIGN_TRIES` times in all, unless the pool was closed."""
        for tries_left in range(SIGN_TRIES - 1, -1, -1):
            index = self._waiting.index(min(self._waiting))
            self._waiting[index] += 1
            try:
                return await self._children[index].sign(private_key, algorithm, data)
            except SignerClosed:
                raise
            except SignerUnavailable:
                if not tries_left:
                    raise
            finally:
                self._waiting[index] -= 1
        raise AssertionError("unreachable")  # pragma: no cover

    async def start(self) -> None:
        """Start every child now; SignerUnavailable if one cannot start (the others are started)."""
        started = await asyncio.gather(*(child.start() for child in self._children), return_exceptions=True)
        for outcome in started:
            if isinstance(outcome, BaseException):
                raise outcome

    async def aclose(self) -> None:
        """End every child (`SigningProcess.aclose`); a later signature starts its child again."""
        await asyncio.gather(*(child.aclose() for child in self._children))


def _serve() -> None:
    """The child: sign what comes in on standard input until it closes."""
    keys: dict[int, PrivateKeyTypes] = {}
    requests_in, answers_out = sys.stdin.buffer, sys.stdout.buffer
    while len(head := requests_in.read(_LENGTH.size)) == _LENGTH.size:
        (size,) = _LENGTH.unpack(head)
        body = requests_in.read(size)
        answers: list[bytes] = []
        at = 0
        while at < size:
            kind = body[at : at + 1]
            if kind == b"F":
                keys.clear()
                at += 1
            elif kind == b"K":
                _, handle, length = _KEY.unpack_from(body, at)
                at += _KEY.size + length
                keys[handle] = serialization.load_der_private_key(
                    body[at - length : at], None, unsafe_skip_rsa_key_validation=True
                )
            else:
                _, number, handle, algorithm, length = _SIGN.unpack_from(body, at)
                at += _SIGN.size + length
                data = body[at - length : at]
                try:
                    value, failed = sign_bytes(ALGORITHMS[algorithm], keys[handle], data), False
                except Exception as exc:  # told to the waiting delivery
                    value, failed = (str(exc) or type(exc).__name__).encode(), True
                answers.append(_ANSWER.pack(number, failed, len(value)) + value)
        if answers:
            answers_out.write(_frame(answers))
            answers_out.flush()


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt, BrokenPipeError):
        _serve()
