"""The HTTP working group's structured-field vectors (tests/vectors/structured-field-tests,
copied from github.com/httpwg/structured-field-tests) against `fedqueue.rules.signing.structured_fields`.

fedqueue parses dictionaries only (Signature-Input, Signature, Content-Digest) and serialises
items, inner lists and dictionaries; what it does not implement is skipped with the reason.
- dictionary vectors: parsing gives `expected` (or fails when it must), and serialising the
  result gives `canonical` (or `raw`);
- item vectors: serialising `expected` gives `canonical` (or `raw`); an item that must fail
  must fail as a dictionary member's value too (`a=<raw>`), since that is where fedqueue
  parses items;
- serialisation-tests: serialising `expected` fails when it must, else gives `canonical`.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.signing import structured_fields as sf

VECTORS = Path(__file__).resolve().parents[3] / "vectors" / "structured-field-tests"
#: Item vectors that fail for where the item stands (a whole field), not for what it is.
ITEM_FIELD_ONLY = {"trailing space": "a tab after a dictionary member is allowed whitespace"}
UNSUPPORTED_TYPES = {
    "date": "RFC 9651 dates are not implemented (refused)",
    "displaystring": "RFC 9651 display strings are not implemented (refused)",
}


class Unsupported(Exception):
    """The vector uses a type fedqueue does not implement; the message is the skip reason."""


def _bare(value: Any) -> sf.BareItem:
    if isinstance(value, float):
        raise Unsupported("decimals are not implemented (refused)")
    if isinstance(value, dict):
        kind = value["__type"]
        if kind in UNSUPPORTED_TYPES:
            raise Unsupported(UNSUPPORTED_TYPES[kind])
        if kind == "token":
            return sf.Token(value["value"])
        return base64.b32decode(value["value"])
    if isinstance(value, bool | int | str):
        return value
    raise AssertionError(f"unknown bare item {value!r}")


def _params(params: list[list[Any]]) -> sf.Parameters:
    return tuple((key, _bare(value)) for key, value in params)


def _member(value: list[Any]) -> sf.Member:
    inner, params = value
    if isinstance(inner, list):
        return sf.InnerList(tuple(sf.Item(_bare(v), _params(p)) for v, p in inner), _params(params))
    return sf.Item(_bare(inner), _params(params))


def _tagged(value: Any) -> Any:
    """A comparable form that tells a token from a string and an int from a bool."""
    if isinstance(value, sf.InnerList):
        return ("inner", tuple(_tagged(i) for i in value.items), _tagged(value.params))
    if isinstance(value, sf.Item):
        return ("item", _tagged(value.value), _tagged(value.params))
    if isinstance(value, tuple):
        return tuple(_tagged(v) for v in value)
    return (type(value).__name__, value)


def _load(*parts: str) -> list[Any]:
    cases = []
    for path in sorted((VECTORS.joinpath(*parts)).glob("*.json")):
        for vector in json.loads(path.read_text()):
            cases.append(pytest.param(vector, id=f"{path.stem}: {vector['name']}"))
    return cases


def _converted(vector: dict[str, Any]) -> Any:
    try:
        if vector["header_type"] == "dictionary":
            return {key: _member(value) for key, value in vector["expected"]}
        return _member(vector["expected"])
    except Unsupported as exc:
        pytest.skip(str(exc))


def _serialise(header_type: str, value: Any) -> str:
    if header_type == "dictionary":
        return sf.serialize_dictionary(value)
    if isinstance(value, sf.InnerList):
        pytest.skip("fedqueue serialises inner lists only as dictionary members")
    return sf.serialize_item(value)


@pytest.mark.parametrize("vector", _load())
def test_parsing_vectors(vector: dict[str, Any]) -> None:
    header_type = vector["header_type"]
    if header_type == "list":
        pytest.skip("fedqueue neither parses nor serialises a top-level list")
    if header_type == "item":
        if vector.get("must_fail"):
            if vector["name"] in ITEM_FIELD_ONLY:
                pytest.skip(ITEM_FIELD_ONLY[vector["name"]])
            with pytest.raises(InvalidInput):
                sf.parse_dictionary("Test", "a=" + ", ".join(vector["raw"]))
            return
        assert _serialise(header_type, _converted(vector)) == ", ".join(
            vector.get("canonical", vector["raw"])
        )
        return
    raw = ", ".join(vector["raw"])
    if vector.get("must_fail"):
        with pytest.raises(InvalidInput):
            sf.parse_dictionary("Test", raw)
        return
    expected = _converted(vector)
    try:
        parsed = sf.parse_dictionary("Test", raw)
    except InvalidInput as exc:
        if "appears twice" in str(exc):
            pytest.skip("a repeated key is refused on purpose (RFC 8941 keeps the last)")
        if vector.get("can_fail"):
            return
        raise
    assert _tagged(tuple(parsed.items())) == _tagged(tuple(expected.items()))
    assert _serialise(header_type, parsed) == ", ".join(vector.get("canonical", vector["raw"]))


@pytest.mark.parametrize("vector", _load("serialisation-tests"))
def test_serialisation_vectors(vector: dict[str, Any]) -> None:
    header_type = vector["header_type"]
    if header_type == "list":
        pytest.skip("fedqueue serialises no top-level list")
    expected = _converted(vector)
    if vector.get("must_fail"):
        with pytest.raises(InvalidInput):
            _serialise(header_type, expected)
        return
    assert _serialise(header_type, expected) == ", ".join(vector["canonical"])
