"""``CHATOPS_EGRESS_UNLISTED=approve``: an unlisted destination is a mutating call; the approved
execution reaches exactly that host and port, once; the deny rules are never approvable.

Real network tools against a local listener that counts connections, and an injected resolver
that records every name it is asked about (so "judged before resolving" is checked, not assumed).
The loopback CIDR is listed so the listener can be reached at all; the *name* used for it is not,
so the name check is what asks for the approval.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agent.tooling import ToolCategory
from bot.settings import Settings
from tests.support.listeners import CountingServer, counting_server
from tests.support.resolvers import StaticResolver
from tests.support.waiting import wait_for
from tools.base import FunctionTool
from tools.builtin.network import network_tools
from tools.catalog import load_catalog
from tools.config import ToolsConfig
from tools.egress import Destination, EgressPolicy, protected_endpoints
from tools.errors import EgressRefusedError

PARTNER = "status.partner.example"
NOT_ALLOWED = "is not allowed (CHATOPS_EGRESS_ALLOW)"


@pytest.fixture
def listener() -> Iterator[CountingServer]:
    with counting_server() as server:
        yield server


def policy(allow: list[str], resolver: StaticResolver, **protected: Any) -> EgressPolicy:
    endpoints = protected_endpoints(resolver=resolver, **protected) if protected else []
    return EgressPolicy.parse(allow, protected=endpoints, resolver=resolver, unlisted="approve")


def tools_of(egress: EgressPolicy) -> dict[str, FunctionTool[Any]]:
    return {tool.name: tool for tool in network_tools(egress)}


def approved(arguments: Mapping[str, object]) -> str:
    return json.dumps({**arguments, "confirmed_by": "U_BOB"})


# -- the judgement, before anything is resolved ----------------------------------------------------


def test_refuse_mode_asks_nobody_and_refuses_as_before(listener: CountingServer) -> None:
    resolver = StaticResolver({PARTNER: ["127.0.0.1"]})
    refusing = EgressPolicy.parse(["127.0.0.0/8"], resolver=resolver)  # the default mode
    http_check = tools_of(refusing)["http_check"]
    arguments = {"url": f"http://{PARTNER}:{listener.port}/health"}
    assert not refusing.needs_approval(Destination.of(PARTNER, listener.port))
    assert http_check.category_for(json.dumps(arguments)).category is ToolCategory.READ_ONLY
    for text in (json.dumps(arguments), approved(arguments)):  # a confirmed_by opens nothing
        assert (
            http_check.execute(text, timeout=5).output
            == f"Error: egress to {PARTNER} {NOT_ALLOWED}; ask a human to add it"
        )
    assert refusing.approving(Destination.of(PARTNER, listener.port)) is refusing
    assert resolver.asked == [] and listener.connections == 0


@pytest.mark.parametrize(
    ("host", "port"),
    [
        (PARTNER, 443),
        ("cust-4111.exfil.example", None),
        ("10.9.8.7", 22),
        ("fd00::7", 443),
        ("8.8.8.8", None),
    ],
)
def test_an_unlisted_name_or_address_needs_approval_and_nothing_is_resolved(
    host: str, port: int | None
) -> None:
    resolver = StaticResolver({PARTNER: ["10.1.2.3"]})
    assert policy(["grafana.corp", "10.0.0.0/16"], resolver).needs_approval(Destination.of(host, port))
    assert resolver.asked == []


@pytest.mark.parametrize(
    "destination",
    [
        Destination.of("grafana.corp", 3000),  # listed: runs at once, vetted at connect time
        Destination.of("10.0.3.4", 5432),
        Destination.of("127.0.0.1", 8080),  # loopback
        Destination.of("::ffff:127.0.0.1", 8080),  # loopback, IPv4-mapped
        Destination.of("[::1]", 80),
        Destination.of("localhost", 8080),  # a name that always means loopback
        Destination.of("api.localhost", 80),
        Destination.of("169.254.169.254", 80),  # cloud metadata
        Destination.of("0.0.0.0", 80),
        Destination.of("224.0.0.1", 80),
        Destination.of("redis.internal", 6379),  # the bot's own Redis, by name
        Destination.of("10.0.9.9", 6379),  # the bot's own Redis, by address
        Destination.of("bad`host", 80),  # no host name: nothing to show a person
        Destination.of("a%2eb", 80),
        Destination.of("2130706433", 80),  # addresses the resolver would read as 127.0.0.1
        Destination.of("127.1", 80),
        Destination.of("0x7f.1", 80),
    ],
    ids=str,
)
def test_what_is_listed_or_can_never_be_opened_asks_nobody(destination: Destination) -> None:
    resolver = StaticResolver({"redis.internal": ["10.0.9.9"]})
    egress = policy(
        ["grafana.corp", "10.0.3.0/24"], resolver, redis_url="redis://redis.internal:6379/0", web_port=None
    )
    resolver.asked.clear()  # the bot's own endpoints are looked up once, at start-up
    assert not egress.needs_approval(destination)
    assert egress.approving(destination) is egress  # nothing to open
    assert resolver.asked == []


def test_loopback_is_approvable_only_when_an_exact_entry_already_opens_it() -> None:
    resolver = StaticResolver()
    assert not policy([], resolver).needs_approval(Destination.of("127.0.0.1", 8080))
    assert not policy(["0.0.0.0/0"], resolver).needs_approval(Destination.of("localhost", 8080))
    assert policy(["127.0.0.0/8"], resolver).needs_approval(Destination.of("localhost", 8080))


# -- the approved execution: exactly that destination ------------------------------------------------


def test_approving_opens_that_host_and_port_only_and_is_not_remembered() -> None:
    resolver = StaticResolver({PARTNER: ["10.1.2.3"], "other.partner.example": ["10.1.2.4"]})
    egress = policy([], resolver)
    granted = egress.approving(Destination.of(PARTNER, 443))
    assert granted.vet(PARTNER, 443, timeout=1) == ["10.1.2.3"]
    for host, port in ((PARTNER, 80), ("other.partner.example", 443), ("10.1.2.3", 443)):
        with pytest.raises(EgressRefusedError):
            granted.vet(host, port, timeout=1)
    with pytest.raises(EgressRefusedError):
        granted.check_lookup(PARTNER)  # a connection's grant is no lookup's
    with pytest.raises(EgressRefusedError):
        egress.vet(PARTNER, 443, timeout=1)  # the policy itself is unchanged
    assert resolver.asked == [PARTNER]


@pytest.mark.parametrize(
    ("address", "allow", "reason"),
    [
        ("169.254.169.254", ["0.0.0.0/0"], "link-local"),
        ("127.0.0.1", [], "loopback"),
        ("127.0.0.1", ["127.0.0.0/8"], "the bot's own Redis"),
    ],
)
def test_an_approved_name_resolving_to_a_denied_address_is_still_refused(
    address: str, allow: list[str], reason: str, redis_url: str
) -> None:
    redis_port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    resolver = StaticResolver({PARTNER: [address]})
    egress = policy(allow, resolver, redis_url=redis_url, web_port=None)
    destination = Destination.of(PARTNER, redis_port)
    assert egress.needs_approval(destination)  # a name: nobody can tell before resolving it
    with pytest.raises(EgressRefusedError, match=reason):
        egress.approving(destination).vet(PARTNER, redis_port, timeout=1)


# -- the network tools -------------------------------------------------------------------------------


def test_http_check_of_an_unlisted_name_is_mutating_until_approved_then_reaches_only_it(
    listener: CountingServer,
) -> None:
    resolver = StaticResolver({PARTNER: ["127.0.0.1"], "other.partner.example": ["127.0.0.1"]})
    http_check = tools_of(policy(["127.0.0.0/8"], resolver))["http_check"]
    arguments = {"url": f"http://{PARTNER}:{listener.port}/health"}
    kind = http_check.category_for(json.dumps(arguments))
    assert kind.category is ToolCategory.MUTATING
    assert (
        kind.reason is not None
        and f"connects to {PARTNER} on port {listener.port}, which is not on" in kind.reason
    )
    unapproved = http_check.execute(json.dumps(arguments), timeout=5)
    assert unapproved.is_error and "runs only after a person approves it" in unapproved.output
    assert resolver.asked == [] and listener.connections == 0

    result = http_check.execute(approved(arguments), timeout=5)
    assert result.output.startswith(f"OK: GET http://{PARTNER}:{listener.port}/health -> 200 OK")
    assert result.output.endswith("(approved by U_BOB)")
    assert listener.paths == ["/health"] and listener.connections == 1
    # Exactly that destination: a redirect to another unlisted name is refused after the click.
    hop = f"http://other.partner.example:{listener.port}/leak"
    redirected = {"url": f"http://{PARTNER}:{listener.port}/redirect?to={hop}", "follow_redirects": True}
    refused = http_check.execute(approved(redirected), timeout=5)
    assert refused.output.startswith(f"Error: egress to other.partner.example {NOT_ALLOWED}; ask a human")
    assert listener.paths == ["/health", f"/redirect?to={hop}"]


def test_tcp_check_approved_for_one_port_reaches_that_port(listener: CountingServer) -> None:
    resolver = StaticResolver({PARTNER: ["127.0.0.1"]})
    tcp_check = tools_of(policy(["127.0.0.0/8"], resolver))["tcp_check"]
    arguments = {"host": PARTNER, "port": listener.port}
    assert tcp_check.category_for(json.dumps(arguments)).category is ToolCategory.MUTATING
    assert tcp_check.execute(approved(arguments), timeout=5).output.startswith(
        f"OK: {PARTNER}:{listener.port} (127.0.0.1) accepts TCP connections"
    )
    wait_for(lambda: listener.connections == 1 or None, what="the approved connection accepted")


def test_the_bot_s_own_redis_and_metadata_are_refused_with_no_card(redis_url: str) -> None:
    redis_port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    resolver = StaticResolver()
    network = tools_of(policy(["127.0.0.0/8"], resolver, redis_url=redis_url, web_port=None))
    for tool, arguments in (
        ("tcp_check", {"host": "127.0.0.1", "port": redis_port}),
        ("tcp_check", {"host": "localhost", "port": redis_port}),
        ("http_check", {"url": "http://169.254.169.254/latest/meta-data/"}),
        ("http_check", {"url": f"http://[::ffff:127.0.0.1]:{redis_port}/"}),
    ):
        assert network[tool].category_for(json.dumps(arguments)).category is ToolCategory.READ_ONLY
        result = network[tool].execute(approved(arguments), timeout=5)  # even with a forged approval
        assert result.is_error and NOT_ALLOWED in result.output, result.output


def test_dns_lookup_of_an_unlisted_name_is_sent_only_after_approval() -> None:
    resolver = StaticResolver({"db.partner.example": ["10.4.4.4"]})
    dns_lookup = tools_of(policy([], resolver))["dns_lookup"]
    arguments = {"name": "db.partner.example"}
    kind = dns_lookup.category_for(json.dumps(arguments))
    assert kind.category is ToolCategory.MUTATING and kind.reason is not None
    assert "looks up db.partner.example in DNS" in kind.reason
    assert dns_lookup.execute(json.dumps(arguments), timeout=5).is_error
    assert resolver.asked == []
    answer = dns_lookup.execute(approved(arguments), timeout=5)
    assert answer.output.startswith("OK: db.partner.example resolves to 10.4.4.4")
    assert resolver.asked == ["db.partner.example"]


# -- catalog http tools ------------------------------------------------------------------------------


def test_a_read_only_catalog_http_tool_asks_and_a_mutating_one_opens_nothing(
    tmp_path: Path, listener: CountingServer
) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(
        textwrap.dedent(
            """
            tools:
              - name: fetch
                description: Any URL.
                category: read_only
                params: {url: {type: string}}
                http: {url: "{url}"}
              - name: notify
                description: Post to any URL.
                category: mutating
                params: {url: {type: string}}
                http: {method: post, url: "{url}"}
            """
        )
    )
    resolver = StaticResolver({PARTNER: ["127.0.0.1"]})
    catalog = {t.name: t for t in load_catalog(path, env={}, egress=policy(["127.0.0.0/8"], resolver)).tools}
    arguments = {"url": f"http://{PARTNER}:{listener.port}/status"}
    fetch, notify = catalog["fetch"], catalog["notify"]
    assert fetch.category_for(json.dumps(arguments)).category is ToolCategory.MUTATING
    assert fetch.execute(approved(arguments), timeout=5).output.startswith(
        f"GET {arguments['url']} -> 200 OK"
    )
    assert listener.paths == ["/status"]
    # A mutating tool is approved for what it does; its host must still be listed.
    assert notify.category_for(json.dumps(arguments)).reason is None
    refused = notify.execute(approved(arguments), timeout=5)
    assert refused.output.startswith(f"Error: egress to {PARTNER} {NOT_ALLOWED}; ask a human to add it")
    assert listener.connections == 1


# -- configuration -----------------------------------------------------------------------------------


def test_the_setting_reaches_the_policy_and_only_refuse_or_approve_are_accepted() -> None:
    settings = Settings(_env_file=None, chatops_egress_unlisted="approve")  # type: ignore[call-arg]
    assert ToolsConfig.from_settings(settings).egress_policy().unlisted == "approve"
    assert ToolsConfig.from_settings(Settings(_env_file=None)).egress_policy().unlisted == "refuse"  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        Settings(_env_file=None, chatops_egress_unlisted="allow")  # type: ignore[call-arg, arg-type]
