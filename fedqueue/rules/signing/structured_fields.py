"""A strict parser and serializer for the part of RFC 8941 structured fields that signatures use (pure).

Signature-Input, Signature and Content-Digest are dictionaries whose members are inner lists of
strings or byte sequences, with parameters that are integers, strings, tokens, booleans or byte
sequences. That is all this module understands: decimals and the RFC 9651 additions (dates,
display strings) are refused rather than half-supported. It is stricter than RFC 8941 in one way
on purpose: a repeated dictionary key or parameter is an error instead of "last one wins", so a
proxy and fedqueue can never disagree about which signature or digest a header carries.
"""

from __future__ import annotations

import base64
import binascii
import re
import string
from dataclasses import dataclass

from fedqueue.rules.errors import InvalidInput


class Token(str):
    """An sf-token (unquoted), kept apart from an sf-string so it serializes back unquoted."""


BareItem = bool | int | str | bytes
Parameters = tuple[tuple[str, BareItem], ...]


@dataclass(frozen=True)
class Item:
    value: BareItem
    params: Parameters = ()


@dataclass(frozen=True)
class InnerList:
    items: tuple[Item, ...]
    params: Parameters = ()


Member = Item | InnerList

_DIGITS = frozenset(string.digits)
_KEY_START = frozenset(string.ascii_lowercase + "*")
_KEY_CHARS = frozenset(string.ascii_lowercase + string.digits + "_-.*")
_TOKEN_START = frozenset(string.ascii_letters + "*")
_TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~:/")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
# The same sets as regular expressions, for whole values being serialised (one C-level scan).
_KEY = re.compile(r"[a-z*][a-z0-9_.*-]*")
_TOKEN = re.compile(r"[A-Za-z*][A-Za-z0-9!#$%&'*+.^_`|~:/-]*")
_STRING = re.compile(r"[ -~]*")
_MAX_INTEGER_DIGITS = 15
_MAX_INTEGER = 999_999_999_999_999


class _Parser:
    def __init__(self, field: str, text: str) -> None:
        self.field = field
        self.text = text
        self.pos = 0

    def fail(self, reason: str) -> InvalidInput:
        return InvalidInput(f"{self.field} is malformed: {reason}")

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def skip(self, chars: str) -> None:
        # peek() is "" at the end, and "" is `in` every str: test it first.
        while self.peek() and self.peek() in chars:
            self.pos += 1

    def dictionary(self) -> dict[str, Member]:
        members: dict[str, Member] = {}
        self.skip(" ")
        while self.pos < len(self.text):
            key = self.key()
            if key in members:
                raise self.fail(f"key {key!r} appears twice")
            if self.peek() == "=":
                self.pos += 1
                members[key] = self.inner_list() if self.peek() == "(" else self.item()
            else:
                members[key] = Item(True, self.parameters())
            self.skip(" \t")
            if self.pos == len(self.text):
                break
            if self.peek() != ",":
                raise self.fail(f"unexpected {self.peek()!r} after member {key!r}")
            self.pos += 1
            self.skip(" \t")
            if self.pos == len(self.text):
                raise self.fail("trailing comma")
        return members

    def inner_list(self) -> InnerList:
        self.pos += 1  # the "("
        items: list[Item] = []
        while True:
            self.skip(" ")
            if not self.peek():
                raise self.fail("inner list is not closed")
            if self.peek() == ")":
                self.pos += 1
                return InnerList(tuple(items), self.parameters())
            items.append(self.item())
            if not self.peek():
                raise self.fail("inner list is not closed")
            if self.peek() not in (" ", ")"):
                raise self.fail("inner list items must be separated by spaces")

    def item(self) -> Item:
        return Item(self.bare_item(), self.parameters())

    def parameters(self) -> Parameters:
        params: dict[str, BareItem] = {}
        while self.peek() == ";":
            self.pos += 1
            self.skip(" ")
            key = self.key()
            if key in params:
                raise self.fail(f"parameter {key!r} appears twice")
            value: BareItem = True
            if self.peek() == "=":
                self.pos += 1
                value = self.bare_item()
            params[key] = value
        return tuple(params.items())

    def key(self) -> str:
        start = self.pos
        if self.peek() not in _KEY_START or not self.peek():
            raise self.fail("expected a key (lower-case letters, digits, _-.*)")
        while self.peek() and self.peek() in _KEY_CHARS:
            self.pos += 1
        return self.text[start : self.pos]

    def bare_item(self) -> BareItem:
        char = self.peek()
        if char == "-" or char in _DIGITS:
            return self.integer()
        if char == '"':
            return self.string()
        if char == ":":
            return self.byte_sequence()
        if char == "?":
            return self.boolean()
        if char and char in _TOKEN_START:
            return self.token()
        raise self.fail(f"unexpected {char!r} where a value was expected" if char else "value is missing")

    def integer(self) -> int:
        start = self.pos
        if self.peek() == "-":
            self.pos += 1
        digits_start = self.pos
        while self.peek() in _DIGITS:
            self.pos += 1
        digits = self.text[digits_start : self.pos]
        if not digits:
            raise self.fail("an integer has no digits")
        if self.peek() == ".":
            raise self.fail("decimals are not supported")
        if len(digits) > _MAX_INTEGER_DIGITS:
            raise self.fail("an integer has more than 15 digits")
        return int(self.text[start : self.pos])

    def string(self) -> str:
        self.pos += 1  # the opening quote
        chars: list[str] = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            self.pos += 1
            if char == "\\":
                escaped = self.peek()
                if escaped not in ('"', "\\") or not escaped:
                    raise self.fail("a string has a bad escape")
                chars.append(escaped)
                self.pos += 1
            elif char == '"':
                return "".join(chars)
            elif not " " <= char <= "~":
                raise self.fail("a string has a character outside printable ASCII")
            else:
                chars.append(char)
        raise self.fail("a string is not closed")

    def token(self) -> Token:
        start = self.pos
        while self.peek() and self.peek() in _TOKEN_CHARS:
            self.pos += 1
        return Token(self.text[start : self.pos])

    def boolean(self) -> bool:
        value = self.text[self.pos + 1 : self.pos + 2]
        if value not in ("0", "1"):
            raise self.fail("a boolean is neither ?0 nor ?1")
        self.pos += 2
        return value == "1"

    def byte_sequence(self) -> bytes:
        end = self.text.find(":", self.pos + 1)
        if end < 0:
            raise self.fail("a byte sequence is not closed")
        encoded = self.text[self.pos + 1 : end]
        self.pos = end + 1
        if not _BASE64.fullmatch(encoded):
            raise self.fail("a byte sequence is not base64")
        # RFC 8941 4.2.7 asks parsers to accept missing "=" padding; present padding must be right.
        if "=" not in encoded:
            encoded += "=" * (-len(encoded) % 4)
        try:
            return base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raise self.fail("a byte sequence is not valid base64") from None


def parse_dictionary(field: str, value: str) -> dict[str, Member]:
    """Parse a dictionary field value; InvalidInput naming `field` if it is not one.

    Only spaces around the value are discarded (RFC 8941 4.2); HTTP strips tabs around a field
    value before it gets here, so a tab that is left is part of the value, and not allowed first.
    """
    parser = _Parser(field, value.strip(" "))
    return parser.dictionary()


def serialize_bare_item(value: BareItem) -> str:
    """The RFC 8941 text of one bare item."""
    # bool before int (bool is an int) and Token before str (Token is a str).
    if isinstance(value, bool):
        return "?1" if value else "?0"
    if isinstance(value, int):
        if not -_MAX_INTEGER <= value <= _MAX_INTEGER:
            raise InvalidInput("a structured-field integer has at most 15 digits")
        return str(value)
    if isinstance(value, bytes):
        return ":" + base64.b64encode(value).decode() + ":"
    if isinstance(value, Token):
        if not _TOKEN.fullmatch(value):
            raise InvalidInput(f"{value!r} is not a structured-field token")
        return str(value)
    if not _STRING.fullmatch(value):
        raise InvalidInput("a structured-field string must be printable ASCII")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _checked_key(key: str) -> str:
    if not is_key(key):
        raise InvalidInput(f"{key!r} is not a structured-field key (lower-case letters, digits, _-.*)")
    return key


def serialize_parameters(params: Parameters) -> str:
    """The RFC 8941 text of parameters, `;key=value` each, `;key` alone for true."""
    return "".join(
        f";{_checked_key(key)}" if value is True else f";{_checked_key(key)}={serialize_bare_item(value)}"
        for key, value in params
    )


def serialize_item(item: Item) -> str:
    """The RFC 8941 text of an item with its parameters."""
    return serialize_bare_item(item.value) + serialize_parameters(item.params)


def serialize_inner_list(inner: InnerList) -> str:
    """The RFC 8941 text of an inner list with its parameters."""
    items = " ".join(serialize_item(item) for item in inner.items)
    return f"({items}){serialize_parameters(inner.params)}"


def serialize_dictionary(members: dict[str, Member]) -> str:
    """The RFC 8941 text of a dictionary; a member that is true alone is written as its key."""
    return ", ".join(
        _checked_key(key)
        + (
            serialize_parameters(member.params)
            if isinstance(member, Item) and member.value is True
            else "="
            + (serialize_inner_list(member) if isinstance(member, InnerList) else serialize_item(member))
        )
        for key, member in members.items()
    )


def is_key(text: str) -> bool:
    """Whether `text` can be a dictionary key (a signature label, a digest algorithm)."""
    return _KEY.fullmatch(text) is not None
