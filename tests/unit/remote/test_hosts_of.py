"""Hosts worked out once per origin (`hosts_of`) are the hosts `host_of` gives each URL."""

from __future__ import annotations

import pytest

from fedqueue.remote.guard import host_of, hosts_of

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
