"""Profile changes: one parser for every edge, one-line refusals, and how the document shows them."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from fedqueue.rules.actor_documents import ActorFacts, actor_document, profile_update
from fedqueue.rules.errors import InvalidInput
from fedqueue.rules.profile_fields import Profile, changed, parse_change, parse_field_option
from fedqueue.rules.urls import Urls

URLS = Urls("https://here.example")
FACTS = ActorFacts("blog", "PEM", False, datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=UTC))


def test_a_change_sets_only_the_fields_it_names_and_an_empty_value_clears_one() -> None:
    profile = changed(Profile(), parse_change({"name": "Blog", "url": "https://blog.example/"}))
    profile = changed(profile, parse_change({"url": "", "discoverable": True}))

    assert profile == Profile(name="Blog", discoverable=True)


def test_a_bare_actor_document_is_a_person_not_discoverable_with_its_creation_time() -> None:
    document = actor_document(URLS, FACTS, Profile())

    assert (document["type"], document["discoverable"], document["indexable"]) == ("Person", False, False)
    assert document["published"] == "2026-01-02T03:04:05Z"
    assert not {"name", "summary", "icon", "image", "url", "attachment"} & set(document)


def test_the_update_carries_the_whole_document_without_its_context() -> None:
    document = actor_document(URLS, FACTS, Profile(name="Blog", fields=(("Site", "x"),)))
    update = profile_update(URLS, document, "t0")

    assert update["id"] == "https://here.example/actors/blog/activities/t0"
    assert (update["type"], update["actor"]) == ("Update", "https://here.example/actors/blog")
    assert update["object"] == {k: v for k, v in document.items() if k != "@context"}
    assert update["object"]["attachment"] == [{"type": "PropertyValue", "name": "Site", "value": "x"}]


@pytest.mark.parametrize(
    ("option", "expected"),
    [
        ("Website=https://x.example/", {"name": "Website", "value": "https://x.example/"}),
        ("Pronouns=", {"name": "Pronouns", "value": ""}),
        ("a=b=c", {"name": "a", "value": "b=c"}),
    ],
)
def test_a_field_option_is_label_equals_value(option: str, expected: dict[str, str]) -> None:
    assert parse_field_option(option) == expected


@pytest.mark.parametrize("option", ["no-equals", "=value"])
def test_a_field_option_without_a_label_is_refused_in_one_line(option: str) -> None:
    with pytest.raises(InvalidInput, match="LABEL=VALUE"):
        parse_field_option(option)


def test_field_values_are_sanitised_like_the_summary() -> None:
    change = parse_change(
        {"fields": [{"name": "Site", "value": '<a href="javascript:x">x</a><script>y</script>'}]}
    )

    assert change["fields"] == (("Site", "<a>x</a>"),)
