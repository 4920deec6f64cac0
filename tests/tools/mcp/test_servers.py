"""``mcp-server-time`` (PyPI), a streamable HTTP server with an auth header (the SDK's own server in
a subprocess on a free port), and a hostile stdio server (tests/support/mcp_servers.py)."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator, Mapping
from subprocess import Popen

import pytest

from agent.tooling import ToolCategory
from tests.support.waiting import wait_for
from tests.tools.mcp.conftest import ROOT, free_port, start_http_server
from tools.mcp import McpPool, build_toolset
from tools.mcp.adapter import McpTool
from tools.mcp.config import parse_mcp_servers

APPROVED = {"confirmed_by": "U_APPROVER"}


def toolset(
    pool: McpPool, servers: Mapping[str, object], env: dict[str, str] | None = None
) -> dict[str, McpTool]:
    parsed, problems = parse_mcp_servers(servers, env or {})
    assert problems == []
    return {tool.definition.name: tool for tool in build_toolset(parsed, pool).all_tools()}


def call(tool: McpTool, timeout: float = 10, /, **arguments: object) -> tuple[bool, str]:
    result = tool.execute(json.dumps(arguments), timeout=timeout)
    return result.is_error, result.output


def test_the_time_server_answers(pool: McpPool) -> None:
    tools = toolset(
        pool, {"time": {"command": [sys.executable, "-m", "mcp_server_time"], "trust": "annotations"}}
    )
    now = tools["time_get_current_time"]
    assert now.category is ToolCategory.READ_ONLY
    failed, output = call(now, timezone="UTC")
    assert not failed and "UTC" in output and str(time.gmtime().tm_year) in output
    failed, output = call(now, timezone="Mars/Olympus_Mons")
    assert failed and output.startswith("Error")


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = free_port()
    process: Popen[bytes] = start_http_server(port, "s3cret-token")
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(10)


def wait_for_tools(pool: McpPool, servers: Mapping[str, object], env: dict[str, str]) -> dict[str, McpTool]:
    # The subprocess needs a moment to listen (longer on a busy machine).
    return wait_for(lambda: toolset(pool, servers, env), timeout=60, what="the HTTP server's tools")


def test_streamable_http_with_an_auth_header(http_server: str, pool: McpPool) -> None:
    servers = {
        "tickets": {"url": "${URL}", "headers": {"Authorization": "Bearer ${TOKEN}"}, "connect_timeout": 5}
    }
    tools = wait_for_tools(pool, servers, {"URL": http_server, "TOKEN": "s3cret-token"})
    lookup = tools["tickets_lookup"]
    assert lookup.category is ToolCategory.MUTATING  # trust: none (default), whatever it claims
    failed, output = call(lookup, ticket=7, **APPROVED)
    assert not failed and '"ticket": 7' in output and '"state": "open"' in output
    parsed, _ = parse_mcp_servers(servers, {"URL": http_server, "TOKEN": "s3cret-token"})
    assert parsed[0].secret_values == ("s3cret-token",)  # redacted from every output


def test_a_wrong_token_offers_nothing(http_server: str) -> None:
    pool = McpPool()
    try:
        servers = {
            "tickets2": {
                "url": http_server,
                "headers": {"Authorization": "Bearer wrong"},
                "connect_timeout": 3,
            }
        }
        parsed, _ = parse_mcp_servers(servers, {})
        built = build_toolset(parsed, pool)
        assert built.tools == [] and built.statuses[0].error
        assert "wrong" not in (built.statuses[0].error or "")
    finally:
        pool.close()


@pytest.fixture(scope="module")
def hostile(pool: McpPool) -> dict[str, McpTool]:
    command = [sys.executable, "-m", "tests.support.mcp_servers", "hostile"]
    return toolset(pool, {"hostile": {"command": command, "cwd": str(ROOT), "timeout": 1.5}})


def test_a_read_only_claim_on_an_untrusted_server_still_needs_a_card(hostile: dict[str, McpTool]) -> None:
    wipe = hostile["hostile_wipe"]
    assert wipe.category is ToolCategory.MUTATING and wipe.category.requires_confirmation
    assert not wipe.parallel
    failed, output = call(wipe, path="/")
    assert failed and "approves" in output
    assert call(wipe, path="/", **APPROVED) == (False, "wiped /")


def test_a_hanging_tool_is_cut_at_its_timeout(hostile: dict[str, McpTool]) -> None:
    started = time.monotonic()
    failed, output = call(hostile["hostile_hang"], 30, **APPROVED)
    assert failed and "timed out after 1.5 s" in output
    assert time.monotonic() - started < 30  # not the tool's hour (a bound for that alone)
    assert not call(hostile["hostile_hello"], name="again", **APPROVED)[0]  # the session survives


def test_the_run_deadline_cuts_a_call_shorter(hostile: dict[str, McpTool]) -> None:
    failed, output = call(hostile["hostile_hang"], 0.3, **APPROVED)
    assert failed and "timed out after 0.3 s" in output  # the run's 0.3 s, not the server's 1.5 s


def test_a_server_that_exits_mid_call_is_restarted_for_the_next_call(hostile: dict[str, McpTool]) -> None:
    before = call(hostile["hostile_hello"], name="a", **APPROVED)[1].split("pid ")[1]
    failed, output = call(hostile["hostile_die"], **APPROVED)
    # Answered when the server went, not at the timeout (which says "timed out after 1.5 s").
    assert failed and output.startswith("Error: MCP server hostile is unavailable:")
    failed, output = call(hostile["hostile_hello"], name="b", **APPROVED)
    assert not failed, output
    assert output.split("pid ")[1] != before  # a new server process


def test_images_are_described_and_errors_are_errors(hostile: dict[str, McpTool]) -> None:
    failed, output = call(hostile["hostile_picture"], **APPROVED)
    assert not failed, output
    assert output.startswith("[image: image/png") and "AAAA" not in output
    failed, output = call(hostile["hostile_fail"], **APPROVED)
    assert failed and output.startswith("Error: ") and "fail" in output  # isError: an error result


def test_a_server_that_cannot_start_offers_nothing_and_answers_at_once() -> None:
    pool = McpPool()
    try:
        parsed, _ = parse_mcp_servers(
            {"ghost": {"command": ["/nonexistent/mcp-server"], "connect_timeout": 30}}, {}
        )
        built = build_toolset(parsed, pool)
        assert built.tools == [] and built.statuses[0].error
        started = time.monotonic()
        with pytest.raises(Exception, match="MCP server ghost is unavailable"):
            pool.connection(parsed[0]).call("anything", {}, timeout=60)
        assert time.monotonic() - started < 15  # no wait for either timeout (a bound for that alone)
    finally:
        pool.close()
