"""Which patterns a block takes (pure): one that names no host is refused, and one that covers a
whole top-level domain or public suffix is told apart so the edges can ask first."""

from __future__ import annotations

import pytest

from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.federation_policy import check_block_pattern, tld_wide


@pytest.mark.parametrize(
    "pattern", ["", " ", ".", "..", " . ", ".com", "com.", "example..org", "*.spam.example"]
)
def test_a_pattern_that_names_no_host_is_refused_in_one_line(pattern: str) -> None:
    with pytest.raises(InvalidInput) as refused:
        check_block_pattern(pattern)

    assert "\n" not in str(refused.value)


@pytest.mark.parametrize(
    ("pattern", "kept"),
    [
        ("Spam.Example", "spam.example"),
        (" spam.example:8443 ", "spam.example:8443"),
        ("[::1]:8443", "[::1]:8443"),
    ],
)
def test_a_host_or_domain_is_kept_lower_case(pattern: str, kept: str) -> None:
    assert check_block_pattern(pattern) == kept


@pytest.mark.parametrize(
    ("pattern", "wide"),
    [
        ("com", True),
        ("COM", True),
        ("localhost", True),
        ("localhost:8000", True),
        ("co.uk", True),
        ("com.au", True),
        ("example.com", False),
        ("example.co.uk", False),
        ("spam.example:8443", False),
        ("192.0.2.7", False),
        ("[2001:db8::1]:443", False),
    ],
)
def test_a_tld_or_public_suffix_is_tld_wide_and_a_domain_is_not(pattern: str, wide: bool) -> None:
    assert tld_wide(pattern) is wide
