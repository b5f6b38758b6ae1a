from __future__ import annotations

import pytest

from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.signing import structured_fields as sf


def test_a_signature_input_round_trips_to_the_same_text() -> None:
    text = '("@method" "content-type";sf);created=1618884473;keyid="k \\"q\\" \\\\";flag;t=tok/en:1;b=:AAE=:'
    [(label, member)] = sf.parse_dictionary("F", f"sig1={text}").items()
    assert label == "sig1"
    assert isinstance(member, sf.InnerList)
    assert member.items == (sf.Item("@method"), sf.Item("content-type", (("sf", True),)))
    assert dict(member.params) == {
        "created": 1618884473,
        "keyid": 'k "q" \\',
        "flag": True,
        "t": sf.Token("tok/en:1"),
        "b": b"\x00\x01",
    }
    assert sf.serialize_inner_list(member) == text


def test_whitespace_around_members_is_allowed_where_rfc_8941_allows_it() -> None:
    members = sf.parse_dictionary("F", '  a=1 ,\tb=( "x"  "y" );p=?0 , c  ')
    assert members == {
        "a": sf.Item(1),
        "b": sf.InnerList((sf.Item("x"), sf.Item("y")), (("p", False),)),
        "c": sf.Item(True),
    }


def test_an_empty_field_is_an_empty_dictionary() -> None:
    assert sf.parse_dictionary("F", "  ") == {}


def test_negative_and_fifteen_digit_integers_parse() -> None:
    assert sf.parse_dictionary("F", "a=-999999999999999") == {"a": sf.Item(-999999999999999)}


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("a=1000000000000000", "more than 15 digits"),
        ("a=-", "no digits"),
        ("a=?2", "neither"),
        ('a="unterminated', "not closed"),
        ('a="bad \\n escape"', "bad escape"),
        ('a=%"display"', "unexpected '%'"),
        ("a=@1659578233", "unexpected '@'"),
        ("a=1;", "expected a key"),
        ("a=1 b=2", "unexpected 'b'"),
        ("a=", "value is missing"),
        ("a=(1 2", "not closed"),
        ('a=("x") ;p', "unexpected ';'"),
    ],
)
def test_malformed_fields_are_refused_with_a_reason(text: str, reason: str) -> None:
    with pytest.raises(InvalidInput, match=f"F is malformed: .*{reason}"):
        sf.parse_dictionary("F", text)


def test_strings_that_cannot_be_sent_are_not_serialized() -> None:
    with pytest.raises(InvalidInput, match="printable ASCII"):
        sf.serialize_bare_item("line\nbreak")


@pytest.mark.parametrize(
    ("text", "is_key"), [("sig1", True), ("*x-y.z_1", True), ("Sig1", False), ("1a", False)]
)
def test_labels_must_be_structured_field_keys(text: str, is_key: bool) -> None:
    assert sf.is_key(text) is is_key
