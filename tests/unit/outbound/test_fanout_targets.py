"""A fan-out's targets: each inbox's deliveries are tracked under the host its URL names."""

from __future__ import annotations

import pytest

from fedqueue.outbound.fanout import targets_of
from fedqueue.remote.guard import host_of

INBOXES = [
    "https://a.example/users/1/inbox",
    "https://a.example/users/2/inbox",
    "https://A.Example/users/3/inbox",
    "https://a.example:8443/users/4/inbox",
    "https://a.example:443/inbox",
    "http://a.example/inbox",
    "https://user@b.example/inbox",
    "https://[2001:db8::1]:8443/inbox",
    "https://c.example?q=/inbox",
    "https://c.example#frag/inbox",
    "https://c.example",
    "https://[broken/inbox",
    "https://d.example:99999/inbox",
    "not-a-url",
    "",
]


@pytest.mark.parametrize("inbox", INBOXES)
def test_an_inbox_is_tracked_under_the_host_its_url_names(inbox: str) -> None:
    assert [target.host for target in targets_of([inbox])] == [host_of(inbox)]


def test_inboxes_sharing_a_host_are_each_tracked_under_it_in_order() -> None:
    targets = targets_of(INBOXES + INBOXES[::-1])

    assert [(t.inbox, t.host) for t in targets] == [(i, host_of(i)) for i in INBOXES + INBOXES[::-1]]
