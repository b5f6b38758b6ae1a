"""The rules of what one outbox activity may cost: the recipient cap, the fetch budget, and the
turns held rows take at their recipients' fetches."""

from __future__ import annotations

import asyncio

import pytest

from fedqueue.outbound.recipient_fetches import RecipientFetches
from fedqueue.rules.addressing import TooManyRecipients, check_recipient_cap, fetch_budget, recipients
from fedqueue.storage import OutboxEntry

ALICE = "https://local.example/actors/alice"
PUBLIC = "https://www.w3.org/ns/activitystreams#Public"


def test_the_cap_counts_named_actors_once_without_public_the_sender_or_its_followers() -> None:
    named = [f"https://b.example/u/{n}" for n in range(3)]
    activity = {
        "to": [PUBLIC, "as:Public", *named],
        "cc": [f"{ALICE}/followers", ALICE, named[0]],
        "bcc": named,
    }
    wanted = recipients(activity, f"{ALICE}/followers", ALICE)
    check_recipient_cap(wanted, 3)
    with pytest.raises(TooManyRecipients, match=r"^the activity names 3 recipients; at most 2 are allowed"):
        check_recipient_cap(wanted, 2)


@pytest.mark.parametrize(
    ("per_activity", "per_host", "allowed", "refused"),
    [
        (10, 10, ["a1", "a2", "a3", "b1"], {}),
        (10, 2, ["a1", "a2", "b1"], {"a3": "host"}),
        (2, 10, ["a1", "a2"], {"a3": "activity", "b1": "activity"}),
        (0, 10, [], {"a1": "activity", "a2": "activity", "a3": "activity", "b1": "activity"}),
    ],
)
def test_the_fetch_budget_takes_recipients_in_order_until_a_limit_and_names_the_limit_of_the_rest(
    per_activity: int, per_host: int, allowed: list[str], refused: dict[str, str]
) -> None:
    uris = ["a1", "a2", "a3", "b1"]
    budget = fetch_budget(uris, [uri[0] for uri in uris], per_activity, per_host)
    assert list(budget.allowed) == allowed
    assert {uri: limit for uri, (limit, _reason) in budget.refused.items()} == refused
    for uri, (limit, reason) in budget.refused.items():
        assert reason.startswith(f"recipient {uri} not fetched: ")
        assert reason.endswith(f"(max_recipient_fetches_per_{limit})")


def entry(outbox_id: int, actor: str) -> OutboxEntry:
    return OutboxEntry(outbox_id, actor, "{}", None, None, None, None, 1, None)


async def test_a_row_with_few_recipients_is_fetched_while_another_rows_many_fetches_hang() -> None:
    hang = asyncio.Event()
    fetched: list[str] = []

    async def fetch(uri: str) -> None:
        if uri.startswith("slow"):
            await hang.wait()
        fetched.append(uri)

    fetches = RecipientFetches(fetch, concurrency=4, max_rows=3)
    fetches.hold(entry(1, "mallory"), tuple(f"slow{n}" for n in range(100)), {})
    fetches.hold(entry(2, "mallory"), (), None)  # behind mallory's first row
    fetches.hold(entry(3, "alice"), ("quick",), {})
    assert fetches.full
    async with asyncio.timeout(5):
        while fetched != ["quick"]:
            await fetches.wait_for_progress(1)
    assert [held.entry.id for held in fetches.take_ready()] == [3]
    assert fetches.holds_actor("mallory") and not fetches.holds_actor("alice")
    hang.set()
    async with asyncio.timeout(5):
        while len(fetched) < 101:
            await fetches.wait_for_progress(1)
    assert [held.entry.id for held in fetches.take_ready()] == [1, 2]
    assert await fetches.aclose() == []
