"""http_check, tcp_check and dns_lookup against a local server and the system resolver.

The tools are built with an egress policy that allows the loopback address and names used here
(the default allows nothing; tests/tools/test_egress.py covers the policy itself).
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Iterator

import pytest

from agent.tooling import ToolCategory
from tests.support.resolvers import StaticResolver
from tools.builtin.network import network_tools
from tools.egress import EgressPolicy

http_check, tcp_check, dns_lookup = network_tools(EgressPolicy.parse(["127.0.0.1", "localhost", "*.invalid"]))


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def listening_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


def check(**arguments: object) -> str:
    result = http_check.execute(json.dumps(arguments), timeout=10)
    assert not result.is_error
    return result.output


def test_http_check_reports_status_and_latency(http_server: str) -> None:
    output = check(url=f"{http_server}/health")
    assert re.fullmatch(rf"OK: GET {http_server}/health -> 200 OK in \d+ ms", output)


def test_http_check_with_expected_text(http_server: str) -> None:
    assert check(url=f"{http_server}/", expect_text="operational").endswith("(body contains 'operational')")
    output = check(url=f"{http_server}/", expect_text="degraded")
    assert output.startswith("FAIL: ") and "body does not contain 'degraded'" in output
    assert output.endswith("body: all systems operational")


def test_http_check_flags_error_and_unexpected_statuses(http_server: str) -> None:
    assert check(url=f"{http_server}/status/503").startswith(f"FAIL: GET {http_server}/status/503 -> 503")
    output = check(url=f"{http_server}/status/204", expect_status=200)
    assert output.startswith("FAIL: ") and "(expected status 200)" in output
    assert check(url=f"{http_server}/status/404", expect_status=404).startswith("OK: ")


def test_http_check_reports_a_refused_connection(closed_port: int) -> None:
    output = check(url=f"http://127.0.0.1:{closed_port}/")
    assert output.startswith(f"FAIL: GET http://127.0.0.1:{closed_port}/: cannot connect")


def test_http_check_gives_up_at_its_timeout(http_server: str) -> None:
    result = http_check.execute(json.dumps({"url": f"{http_server}/slow"}), timeout=0.5)
    assert result.output == f"FAIL: GET {http_server}/slow: no answer within 0.5 s"


def test_http_check_refuses_other_schemes() -> None:
    result = http_check.execute('{"url": "file:///etc/passwd"}', timeout=5)
    assert result.is_error and "not an http(s) URL" in result.output


def test_tcp_check_open_and_closed_ports(listening_port: int, closed_port: int) -> None:
    opened = tcp_check.execute(json.dumps({"host": "127.0.0.1", "port": listening_port}), timeout=5)
    assert re.fullmatch(
        rf"OK: 127\.0\.0\.1:{listening_port} accepts TCP connections \(\d+ ms\)", opened.output
    )
    closed = tcp_check.execute(json.dumps({"host": "127.0.0.1", "port": closed_port}), timeout=5)
    assert closed.output == f"FAIL: 127.0.0.1:{closed_port}: Connection refused"


def test_tcp_check_validates_the_port_and_host() -> None:
    result = tcp_check.execute('{"host": "localhost; rm -rf /", "port": 70000}', timeout=5)
    assert result.is_error
    assert (
        "host: String should match pattern" in result.output
        and "port: Input should be less than" in result.output
    )


def test_dns_lookup_forward_and_reverse() -> None:
    forward = dns_lookup.execute('{"name": "localhost"}', timeout=5)
    assert forward.output.startswith("OK: localhost resolves to ") and "127.0.0.1" in forward.output
    reverse = dns_lookup.execute('{"name": "127.0.0.1"}', timeout=5)
    assert reverse.output.startswith("OK: 127.0.0.1 is localhost")


def test_dns_lookup_of_a_name_that_does_not_exist() -> None:
    result = dns_lookup.execute('{"name": "no-such-host.invalid"}', timeout=5)
    assert not result.is_error
    assert result.output.startswith("FAIL: no-such-host.invalid")


@pytest.mark.parametrize(
    ("tool", "arguments", "reason"),
    [
        (
            "http_check",
            {"url": "https://Status.Partner.Example/x"},
            "connects to status.partner.example on port 443,",
        ),
        (
            "http_check",
            {"url": "http://status.partner.example:8080/"},
            "status.partner.example on port 8080,",
        ),
        ("http_check", {"url": "http://[fd00::1]/"}, "connects to fd00::1 on port 80,"),
        ("tcp_check", {"host": "[FD00::2]", "port": 22}, "connects to fd00::2 on port 22,"),
        ("dns_lookup", {"name": "Db.Partner.Example."}, "looks up db.partner.example in DNS"),
    ],
)
def test_under_approve_each_tool_names_the_destination_it_would_connect_to(
    tool: str, arguments: dict[str, object], reason: str
) -> None:
    """The card names what the tool itself would reach: the default port of the scheme, the host
    normalized as the connection reads it. Nothing is resolved to say so."""
    resolver = StaticResolver()
    tools = {t.name: t for t in network_tools(EgressPolicy.parse([], resolver=resolver, unlisted="approve"))}
    kind = tools[tool].category_for(json.dumps(arguments))
    assert kind.category is ToolCategory.MUTATING and tools[tool].parallel
    assert kind.reason is not None and reason in kind.reason
    assert resolver.asked == []


def test_the_default_policy_keeps_every_check_read_only() -> None:
    for tool, arguments in (
        (http_check, {"url": "http://evil.example/"}),
        (dns_lookup, {"name": "evil.example"}),
    ):
        assert tool.category_for(json.dumps(arguments)).category is ToolCategory.READ_ONLY
