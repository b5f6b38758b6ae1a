"""The federation policy's rules (pure): blocks cover subdomains, the allowlist admits only its domains."""

from __future__ import annotations

from fedqueue.rules.federation_policy import Policy, covering, parse_domains


def test_a_block_of_a_domain_covers_its_subdomains_and_ports_but_not_lookalikes() -> None:
    blocks = {"spam.example": "spam waves"}
    policy = Policy(blocks)
    for host in ("spam.example", "a.spam.example", "x.y.spam.example", "spam.example:8443", "A.SPAM.example"):
        refusal = policy.refusal(host)
        assert refusal is not None and refusal.entry == "spam.example", host
    for host in ("notspam.example", "spam.example.org", "example", "127.0.0.1:8443"):
        assert policy.refusal(host) is None, host


def test_a_block_with_a_port_covers_that_port_only() -> None:
    assert covering({"spam.example:8443"}, "spam.example:8443") == "spam.example:8443"
    assert covering({"spam.example:8443"}, "spam.example") is None
    assert covering({"spam.example:8443"}, "a.spam.example:8443") is None


def test_the_admin_reason_is_for_the_admin_and_the_host_is_told_only_that_it_is_blocked() -> None:
    refusal = Policy({"spam.example": "spam waves"}).refusal("a.spam.example")
    assert refusal is not None
    assert refusal.answer == "host a.spam.example is blocked here"
    assert refusal.reason == (
        "host a.spam.example is blocked by an admin (covered by the block of spam.example): spam waves"
    )


def test_in_allowlist_mode_only_the_listed_domains_and_subdomains_federate_and_blocks_still_apply() -> None:
    policy = Policy(
        {"bad.friends.example": ""}, "allowlist", parse_domains(" friends.example , Relay.example. ")
    )
    assert policy.refusal("friends.example") is None
    assert policy.refusal("social.friends.example:8443") is None
    assert policy.refusal("relay.example") is None
    refused = policy.refusal("stranger.example")
    assert refused is not None and refused.why == "not_allowed"
    assert refused.answer == "host stranger.example is not on this server's allowlist"
    blocked = policy.refusal("x.bad.friends.example")
    assert blocked is not None and blocked.why == "blocked"
    assert policy.first_refusal(["friends.example", "stranger.example"]) == refused


def test_matching_costs_one_lookup_per_label_not_one_per_entry() -> None:
    class Counting(dict[str, str]):
        lookups = 0

        def __contains__(self, key: object) -> bool:
            Counting.lookups += 1
            return super().__contains__(key)

    blocks = Counting({f"blocked{n}.example": "" for n in range(10_000)})
    assert Policy(blocks).refusal("a.b.c.example") is None
    assert Counting.lookups <= 5
