"""A fetched body's Content-Encoding undone as it arrives, so that a compressed body is capped by
what it expands to: a gzip bomb stops at the cap, one piece past it, instead of filling memory."""

from __future__ import annotations

import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

from fedqueue.remote.http1 import BadAnswer

#: What a GET says it takes (Accept-Encoding): exactly the codings `decoded` undoes.
ACCEPT_ENCODING = "gzip, deflate"
#: Decoded output comes in pieces of at most this size.
PIECE_BYTES = 65_536
#: How each gzip member starts (RFC 1952, 2.3.1).
GZIP_MAGIC = b"\x1f\x8b"
CODINGS = {"identity": "identity", "gzip": "gzip", "x-gzip": "gzip", "deflate": "deflate"}


def coding_of(content_encoding: str | None) -> str:
    """The coding to undo ("identity", "gzip" or "deflate"); BadAnswer naming any other."""
    named = (content_encoding or "identity").strip().lower()
    coding = CODINGS.get(named)
    if coding is None:
        raise BadAnswer(f"content-encoding {named[:40]!r} is not one fedqueue decodes")
    return coding


async def decoded(next_chunk: Callable[[], Awaitable[bytes]], coding: str) -> AsyncIterator[bytes]:
    """The body from `next_chunk` (b"" at its end) with `coding` undone; BadAnswer if it cannot be.

    A gzip body may be several members one after another (RFC 1952, 2.2): each is decoded in
    turn, by a decompressor of its own; zero bytes between or after members are padding, and
    other bytes after a member that start no other are refused.
    A deflate stream has no members: bytes after its end are refused.
    """
    if coding == "identity":
        while chunk := await next_chunk():
            yield chunk
        return
    decompressor: zlib._Decompress | None = None
    while data := await next_chunk():
        while data:
            if decompressor is not None and decompressor.eof:
                data = _after_the_end(coding, data)
                if not data:
                    break
                decompressor = None  # a new gzip member starts
            if decompressor is None:
                decompressor = zlib.decompressobj(_wbits(coding, data[0]))
            for piece in _expanded(decompressor, data, coding):
                yield piece
            data = decompressor.unused_data  # what came after the end of its stream, if it ended
    if decompressor is not None and not decompressor.eof:
        raise BadAnswer(f"the {coding} body ended before its compressed stream did")


def _wbits(coding: str, first_byte: int) -> int:
    """zlib's `wbits` for a body in `coding` whose first byte is `first_byte`."""
    # deflate should be zlib-wrapped (RFC 9110, 8.4.1.2), but some servers send it raw:
    # told apart by the first byte's compression method, as browsers and aiohttp do.
    zlib_wrapped = coding == "gzip" or first_byte & 0x0F == 8
    return (16 if coding == "gzip" else 0) + (zlib.MAX_WBITS if zlib_wrapped else -zlib.MAX_WBITS)


def _after_the_end(coding: str, data: bytes) -> bytes:
    """What of `data`, come after a compressed stream ended, starts the next gzip member (b"" if
    nothing yet); BadAnswer if it cannot be one."""
    if coding != "gzip":
        raise BadAnswer(f"the {coding} body goes on after its end")
    # Zero bytes after a member are padding (gzip(1) and Python's gzip skip them).
    data = data.lstrip(b"\x00")
    # `data` may hold only the first byte of the next member's magic number.
    if not GZIP_MAGIC.startswith(data[: len(GZIP_MAGIC)]):
        raise BadAnswer("the gzip body goes on after its end with bytes that are not a gzip member")
    return data


def _expanded(decompressor: zlib._Decompress, data: bytes, coding: str) -> Iterator[bytes]:
    """What `data` expands to, in pieces of at most PIECE_BYTES, never more at once."""
    try:
        while True:
            piece = decompressor.decompress(data, PIECE_BYTES)
            data = decompressor.unconsumed_tail
            if piece:
                yield piece
            if not data and len(piece) < PIECE_BYTES:
                return
    except zlib.error:
        raise BadAnswer(f"the {coding} body could not be decoded") from None
