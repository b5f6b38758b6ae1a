"""Two fedqueue instances federating through activityrelay (PyPI), a LitePub relay real servers use
(issue 50): everything behind Debian's nginx with TLS on port 443 of its own loopback address.

B subscribes by the relay's `/actor` URI, A by its `/inbox` URI (the form Mastodon admins
paste). A posts a public Note, then updates and deletes one; each must reach B through the relay,
verified, and B's app must pull it with the typed client. A test CA signs nginx's certificate;
fedqueue trusts it by `tls_ca_file`, the relay by SSL_CERT_FILE. The steps share one federation
(starting it costs three processes and nginx); each test does its own subscription step first, so
it runs alone too, and a step that failed fails every test that needs it with the same error.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from fedqueue.client import Client
from tests.e2e.test_tls_proxy import Authority, make_ca, nginx, site_config
from tests.live import ADMIN_TOKEN, LiveInstance, fedqueue_run, free_port, live_instance
from tests.node import eventually
from tests.relay import INSTALL_TIMEOUT_S, Relay, activityrelay, loopback_https_addresses

PUBLIC = "https://www.w3.org/ns/activitystreams#Public"

#: Setting the federation up may first build the relay's venv.
pytestmark = pytest.mark.timeout(INSTALL_TIMEOUT_S + 180)


@dataclass(frozen=True)
class Instance:
    """A `fedqueue serve` behind nginx at https://{address}, with one local actor."""

    base_url: str
    live: LiveInstance
    actor: str
    token: str
    #: The settings its CLI needs besides the database (its public URL, the test CA).
    env: dict[str, str]
    directory: Path

    @property
    def actor_id(self) -> str:
        return f"{self.base_url}/actors/{self.actor}"


@dataclass
class Federation:
    relay: Relay
    a: Instance
    b: Instance
    #: A client that trusts the test CA only.
    https: httpx.Client
    nginx_log: Path
    #: Each subscription step's outcome, once tried: None when it worked, else its error.
    subscribed: dict[str, BaseException | None] = field(default_factory=dict)


def tls_site(address: str, upstream: str, ca: Authority) -> str:
    """The shipped nginx site on `address`:443 (and a free redirect port), proxying to `upstream`."""
    site = site_config(443, free_port(), upstream, ca)
    return site.replace("listen 127.0.0.1:443 ssl;", f"listen {address}:443 ssl;")


def start_instance(stack: ExitStack, directory: Path, address: str, ca: Authority, actor: str) -> Instance:
    """`fedqueue serve` for https://{address} on a fresh SQLite file, its CLI settings, no actor yet."""
    directory.mkdir()
    base_url = f"https://{address}"
    env = {"FEDQUEUE_BASE_URL": base_url, "FEDQUEUE_TLS_CA_FILE": str(ca.ca)}
    live = stack.enter_context(
        live_instance(directory, ADMIN_TOKEN, env={**env, "FEDQUEUE_TRUSTED_PROXIES": "127.0.0.1/32"})
    )
    return Instance(base_url, live, actor, "", env, directory)


@pytest.fixture(scope="module")
def federation(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Federation]:
    """activityrelay, A (actor alice) and B (actor bob), each behind nginx on its own address:443."""
    tmp = tmp_path_factory.mktemp("real-relay")
    relay_address, a_address, b_address = loopback_https_addresses(3)
    ca = make_ca(tmp, (relay_address, a_address, b_address))
    with ExitStack() as stack:
        relay = stack.enter_context(activityrelay(tmp / "relay", relay_address, ca.ca))
        a = start_instance(stack, tmp / "a", a_address, ca, "alice")
        b = start_instance(stack, tmp / "b", b_address, ca, "bob")
        sites = [tls_site(relay_address, relay.origin, ca)]
        sites += [
            tls_site(address, live.origin, ca) for address, live in ((a_address, a.live), (b_address, b.live))
        ]
        stack.enter_context(nginx(tmp / "nginx", "\n".join(sites), 443, relay_address))
        https = stack.enter_context(httpx.Client(verify=ca.client(), timeout=10))
        a, b = (
            Instance(
                one.base_url,
                one.live,
                one.actor,
                Client(one.base_url, ADMIN_TOKEN, http=https).create_actor(one.actor).token,
                one.env,
                one.directory,
            )
            for one in (a, b)
        )
        yield Federation(relay, a, b, https, tmp / "nginx" / "access.log")


def relays(instance: Instance) -> list[dict[str, Any]]:
    """`fedqueue relay list --json` on the instance."""
    done = fedqueue_run(instance.live, instance.directory, "relay", "list", "--json", env=instance.env)
    assert done.returncode == 0, done.stderr
    listed: list[dict[str, Any]] = json.loads(done.stdout)
    return listed


def add_relay(federation: Federation, instance: Instance, uri: str) -> None:
    """`fedqueue relay add URI` on the instance, then (bounded) until the relay, stored by its
    actor id whichever URI was typed, is `accepted`."""
    added = fedqueue_run(instance.live, instance.directory, "relay", "add", uri, env=instance.env)
    assert added.returncode == 0, f"relay add {uri}: {added.stderr.strip()}"
    listed: list[dict[str, Any]] = []

    def accepted() -> bool:
        listed[:] = relays(instance)
        return [(r["uri"], r["state"]) for r in listed] == [(federation.relay.actor, "accepted")]

    try:
        eventually(accepted, f"the relay accepted {instance.base_url}'s Follow of it by {uri}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}; fedqueue relay list: {listed}") from None


def subscribe(federation: Federation, which: str) -> None:
    """The subscription step `which` ("b-by-actor" or "a-by-inbox"), done once; its error again after."""
    if which not in federation.subscribed:
        instance, uri = {
            "b-by-actor": (federation.b, federation.relay.actor),
            "a-by-inbox": (federation.a, federation.relay.inbox),
        }[which]
        try:
            add_relay(federation, instance, uri)
        except Exception as exc:  # kept, to fail every later step that needs it the same way
            federation.subscribed[which] = exc
        else:
            federation.subscribed[which] = None
    if (error := federation.subscribed[which]) is not None:
        raise AssertionError(f"subscription {which} failed: {error}")


def pulled(federation: Federation, wanted: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    """The first activity B's app pulls (the typed client, consumer "app") that `wanted` picks
    (bounded); failing, with what the relay logged of B's refusals."""
    b = federation.b
    found: list[dict[str, Any]] = []
    app = Client(b.base_url, b.token, http=federation.https)

    def arrived() -> bool:
        found[:] = [
            item.activity for item in app.pull(b.actor, "app", limit=100).items if wanted(item.activity)
        ]
        return bool(found)

    try:
        eventually(arrived, f"{b.actor}'s app pulled the activity")
    except AssertionError as exc:
        refusals = [line for line in federation.relay.log.read_text().splitlines() if "ERROR" in line]
        raise AssertionError(f"{exc}; the relay logged: {refusals}") from None
    activity: dict[str, Any] = found[0]
    return activity


def post(instance: Instance, https: httpx.Client, activity: dict[str, Any]) -> str:
    """The id of the activity A's app posted (the typed client)."""
    return Client(instance.base_url, instance.token, http=https).post(instance.actor, activity).id


def public_note(federation: Federation, content: str) -> str:
    """A posts a public Note (a bare object: fedqueue wraps it and mints its id); the Note's id."""
    a = federation.a
    note = {"type": "Note", "content": content, "to": [PUBLIC], "cc": [f"{a.actor_id}/followers"]}
    created = post(a, federation.https, note)
    create = federation.https.get(created, headers={"Accept": "application/activity+json"}).json()
    note_id: str = create["object"]["id"]
    return note_id


def object_id(activity: dict[str, Any]) -> object:
    """The id of the activity's object, embedded or a bare URI."""
    found = activity.get("object")
    return found.get("id") if isinstance(found, dict) else found


def subscribed_both(federation: Federation) -> None:
    subscribe(federation, "b-by-actor")
    subscribe(federation, "a-by-inbox")


def test_an_instance_that_adds_the_relay_by_its_actor_uri_is_accepted(federation: Federation) -> None:
    subscribe(federation, "b-by-actor")


def test_an_instance_that_adds_the_relay_by_its_inbox_uri_is_accepted(federation: Federation) -> None:
    subscribe(federation, "a-by-inbox")


def test_a_public_note_reaches_the_other_instance_through_the_relay_and_its_app_pulls_it(
    federation: Federation,
) -> None:
    subscribed_both(federation)
    note_id = public_note(federation, "hello through the relay")
    announce = pulled(
        federation,
        lambda x: x["type"] == "Announce" and object_id(x) == note_id,
    )
    assert announce["actor"] == federation.relay.actor
    note = announce["object"]
    assert isinstance(note, dict), f"B's app got only the Note's id: {announce}"
    assert (note["id"], note["attributedTo"], note["content"]) == (
        note_id,
        federation.a.actor_id,
        "hello through the relay",
    )


def test_an_update_reaches_the_other_instance_through_the_relay_and_its_app_pulls_it(
    federation: Federation,
) -> None:
    subscribed_both(federation)
    a = federation.a
    note_id = public_note(federation, "before the edit")
    edited: dict[str, Any] = {"id": note_id, "type": "Note", "attributedTo": a.actor_id}
    edited |= {"content": "after the edit", "to": [PUBLIC], "cc": [f"{a.actor_id}/followers"]}
    post(a, federation.https, {"type": "Update", "object": edited, "to": [PUBLIC]})
    update = pulled(
        federation,
        lambda x: x["type"] == "Update" and object_id(x) == note_id,
    )
    assert update["actor"] == a.actor_id
    assert update["object"]["content"] == "after the edit"


def test_a_delete_reaches_the_other_instance_through_the_relay_and_its_app_pulls_it(
    federation: Federation,
) -> None:
    subscribed_both(federation)
    a = federation.a
    note_id = public_note(federation, "to be deleted")
    post(a, federation.https, {"type": "Delete", "object": note_id, "to": [PUBLIC]})
    delete = pulled(
        federation,
        lambda x: x["type"] == "Delete" and object_id(x) == note_id,
    )
    assert delete["actor"] == a.actor_id
