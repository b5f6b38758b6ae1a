"""A fan-out's targets: each inbox's deliveries are tracked under the host its URL names."""

from __future__ import annotations

from fedqueue.outbound.fanout_plan import targets_of
from fedqueue.rules.address_guard import host_of
from tests.unit.remote.test_hosts_of import AWKWARD_URLS


def test_each_inbox_is_tracked_under_the_host_its_url_names_in_order() -> None:
    targets = targets_of(AWKWARD_URLS + AWKWARD_URLS[::-1])

    assert [(t.inbox, t.host) for t in targets] == [
        (i, host_of(i)) for i in AWKWARD_URLS + AWKWARD_URLS[::-1]
    ]
