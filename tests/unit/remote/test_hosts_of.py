"""What is worked out once per origin (`split_origin`) is what each URL's own split gives.

Hosts (`hosts_of`), the address guard's verdicts (`check_url`), where requests go and their
Host header (`target_of`, `authority`): a fan-out's inboxes are thousands of URLs on a few
origins, so these are remembered per origin, and must not differ from working them out per URL.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import quote, urlsplit

import pytest

from fedqueue.remote.http1_requests import TARGET_SAFE, target_of
from fedqueue.rules.address_guard import _check, check_url, host_of, hosts_of, path_and_query, split_origin
from fedqueue.rules.errors import FedqueueError
from fedqueue.rules.signing.cavage import request_target
from fedqueue.rules.signing.rfc9421 import _authority, authority

#: URLs whose host a shortcut could get wrong: case, ports (default, leading zeros, out of
#: range, empty), user info, IPv6 and malformed brackets, a query or fragment before any path,
#: stray whitespace and control characters, non-ASCII names, other schemes, no scheme at all.
AWKWARD_URLS = [
    "https://a.example/users/1/inbox",
    "https://A.Example/u/1",
    "HTTPS://a.example/u/2",
    "https://a.example:443/u/3",
    "https://a.example:0443/u/4",
    "https://a.example:99999/u/5",
    "https://a.example:99999?x=/u/6",
    "https://a.example:/u/7",
    "https://bob@a.example/u/8",
    "https://[::1]:8443/u/9",
    "https://[2001:db8::1]:8443/inbox",
    "https://[::1/u/10",
    "https://a.example?q=1/u/11",
    "https://a.example#f/u/12",
    "https://a.example",
    "https://a.example ",
    " https://a.example/u/13",
    "https://a.ex\tample/u/14",
    "https://a.example/u\t/15",
    "https://a.exämple/u/16",
    "http://a.example/u/17",
    "ftp://a.example/u/18",
    "a.example/u/19",
    "https://a.example:8443",
    "https://a.example.:8443/u/20",
    "not-a-url",
    "",
]


@pytest.mark.parametrize("url", AWKWARD_URLS)
def test_a_url_is_given_the_host_its_own_split_names(url: str) -> None:
    assert hosts_of(["https://a.example/u/0", url, "https://z.example/u/0"])[1] == host_of(url)


def test_urls_sharing_origins_each_get_their_host_in_order() -> None:
    urls = [f"https://h{n % 7}.example:{8000 + n % 3}/users/{n}" for n in range(100)] + AWKWARD_URLS
    urls += urls[::-1]

    assert hosts_of(urls) == [host_of(url) for url in urls]


@pytest.mark.parametrize("url", AWKWARD_URLS)
def test_a_plain_url_splits_where_urlsplit_ends_its_authority(url: str) -> None:
    split = split_origin(url)
    if split is None:
        return  # not plain: everything is worked out from the whole URL
    origin, rest = split
    assert origin + rest == url
    try:
        whole = urlsplit(url)
    except ValueError:
        return  # the guard refuses it (`check_url`) before anything else is asked of it
    assert urlsplit(origin)[:2] == whole[:2]
    assert urlsplit("http://x" + rest)[2:] == whole[2:]


@pytest.mark.parametrize("allow_private", [False, True])
@pytest.mark.parametrize("url", AWKWARD_URLS)
def test_the_guard_gives_each_url_its_own_verdict_after_its_origin_was_judged(
    url: str, allow_private: bool
) -> None:
    split = split_origin(url)
    if split is not None:
        check_verdict(split[0] + "/another/path", allow_private)  # remembered by origin
    assert check_verdict(url, allow_private) == verdict(url, allow_private)


@pytest.mark.parametrize("url", AWKWARD_URLS)
def test_requests_go_where_each_url_alone_says(url: str) -> None:
    if check_verdict(url, allow_private=True) is not None:
        return  # refused: no request is made
    target_of("https://z.example/u/0")  # another origin remembered first
    parts = urlsplit(url)
    default_port = 443 if parts.scheme == "https" else 80
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    sent = target_of(url)

    assert sent.origin == (parts.scheme, parts.hostname or "", parts.port or default_port)
    assert sent.netloc == authority(url) == _authority(url)
    assert sent.target in (path, quote(path, safe=TARGET_SAFE))
    assert path_and_query(url, split_origin(url)) == (parts.path, parts.query)
    assert request_target("POST", url) == "post " + path


def check_verdict(url: str, allow_private: bool) -> str | None:
    """`check_url`'s refusal, or None."""
    return refusal(lambda: check_url(url, allow_private=allow_private))


def verdict(url: str, allow_private: bool) -> str | None:
    """The guard's refusal of `url` worked out from the whole URL, remembering nothing, or None."""
    return refusal(lambda: _check(url, allow_private))


def refusal(check: Callable[[], None]) -> str | None:
    """The error `check` raised, as "Type: message", or None."""
    try:
        check()
    except FedqueueError as exc:
        return f"{type(exc).__name__}: {exc}"
    return None
