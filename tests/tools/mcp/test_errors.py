"""An error answer is one call's result; only a lost session restarts a server, in the background.

Against ``mcp-server-time`` (PyPI) over stdio, the hostile test server over stdio, and the SDK's
streamable HTTP server behind an HTTP front that answers some calls with 401 or 503. Each test
has its own pool, so the server processes it counts are its own.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from subprocess import Popen

import pytest

from tests.support.waiting import wait_until
from tests.tools.mcp.conftest import ROOT, free_port, start_http_server
from tools.mcp import McpPool, build_toolset
from tools.mcp.adapter import McpTool
from tools.mcp.config import parse_mcp_servers
from tools.mcp.failures import MAX_ERROR_CHARS
from tools.mcp.results import to_result

APPROVED = {"confirmed_by": "U_APPROVER"}
TIME = {"time": {"command": [sys.executable, "-m", "mcp_server_time"], "trust": "annotations"}}
TOKEN = "tok-9f8e7d6c5b4a3210"


@pytest.fixture
def pool() -> Iterator[McpPool]:
    made = McpPool()
    yield made
    made.close()


def toolset(
    pool: McpPool, servers: Mapping[str, object], env: dict[str, str] | None = None
) -> dict[str, McpTool]:
    parsed, problems = parse_mcp_servers(servers, env or {})
    assert problems == []
    return {tool.definition.name: tool for tool in build_toolset(parsed, pool).all_tools()}


def call(tool: McpTool, timeout: float = 10, /, **arguments: object) -> tuple[bool, str]:
    result = tool.execute(json.dumps(arguments), timeout=timeout)
    return result.is_error, result.output


def server_pids(marker: str) -> set[int]:
    """The live processes this test process started whose command line holds ``marker``."""
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if entry.name.isdigit() and parent == os.getpid() and marker.encode() in command:
            found.add(int(entry.name))
    return found


def test_an_error_answer_is_that_calls_result_and_the_server_stays_up(pool: McpPool) -> None:
    others = server_pids("mcp_server_time")  # an earlier test's server may still be on its way out
    now = toolset(pool, TIME)["time_get_current_time"]
    assert not call(now, timezone="UTC")[0]
    before = server_pids("mcp_server_time") - others
    assert len(before) == 1
    with ThreadPoolExecutor(8) as threads:  # unknown-tool errors and good calls at the same time
        unknown = [threads.submit(now.connection.call, "no_such_tool", {}, 10) for _ in range(4)]
        good = [threads.submit(call, now, 10, **{"timezone": "UTC"}) for _ in range(4)]
        answers = [future.result() for future in unknown]
        assert [future.result()[0] for future in good] == [False] * 4
    for answer in answers:
        shown = to_result(answer)
        assert shown.is_error and shown.output.startswith(
            "Error: MCP server time: it answered no_such_tool with JSON-RPC error -32602"
        ), shown.output
    failed, output = call(now, timezone="UTC")
    assert not failed, output
    assert server_pids("mcp_server_time") - others == before  # never restarted


def test_a_killed_server_restarts_in_the_background_and_the_next_call_waits_for_it(pool: McpPool) -> None:
    others = server_pids("mcp_server_time")  # an earlier test's server may still be on its way out
    now = toolset(pool, TIME)["time_get_current_time"]
    assert not call(now, timezone="UTC")[0]  # started
    (before,) = server_pids("mcp_server_time") - others
    os.kill(before, signal.SIGKILL)
    failed, output = call(now, timezone="UTC")
    assert failed and "unavailable" in output and "restarting it in the background" in output, output
    # Each call now has a budget shorter than a cold start on a busy machine: it waits for the
    # restart within its own budget and never cuts the restart short.
    outputs = []
    for _ in range(120):
        failed, output = call(now, 1.0, timezone="UTC")
        outputs.append(output)
        if not failed:
            break
    assert not failed, outputs
    assert not [output for output in outputs if "no session" in output], outputs
    assert server_pids("mcp_server_time") - others - {before}  # a new server process answered


@pytest.fixture
def hostile(pool: McpPool) -> dict[str, McpTool]:
    command = [sys.executable, "-m", "tests.support.mcp_servers", "hostile"]
    entry = {"command": command, "cwd": str(ROOT), "env": {"API_TOKEN": "${API_TOKEN}"}, "timeout": 30}
    return toolset(pool, {"hostile": entry}, {"API_TOKEN": TOKEN})


def test_an_error_answer_leaves_a_parallel_call_in_flight_alone(
    hostile: dict[str, McpTool], tmp_path: Path
) -> None:
    pid = call(hostile["hostile_hello"], name="a", **APPROVED)[1].split("pid ")[1]
    gate = tmp_path / "gate"
    in_flight: list[tuple[bool, str]] = []
    caller = threading.Thread(
        target=lambda: in_flight.append(call(hostile["hostile_gate"], 60, path=str(gate), **APPROVED))
    )
    caller.start()
    try:
        wait_until(lambda: (tmp_path / "gate.started").exists(), timeout=30, what="the gated call")
        failed, output = call(hostile["hostile_shout"], **APPROVED)
        assert failed and "JSON-RPC error -32602" in output
    finally:
        gate.touch()
        caller.join(60)
    assert in_flight == [(False, f"opened from pid {pid}")]
    assert call(hostile["hostile_hello"], name="b", **APPROVED) == (False, f"hello b from pid {pid}")


def test_a_giant_hostile_error_answer_is_capped_and_redacted(hostile: dict[str, McpTool]) -> None:
    failed, output = call(hostile["hostile_shout"], size=5_000_000, **APPROVED)
    assert failed and output.startswith("Error: MCP server hostile: it answered shout with JSON-RPC error")
    assert TOKEN not in output and "token=" in output
    assert len(output) < MAX_ERROR_CHARS + 200 and output.endswith("characters in all]")
    assert not call(hostile["hostile_hello"], name="c", **APPROVED)[0]  # the session stays up


def test_a_result_that_breaks_its_output_schema_is_that_calls_error(hostile: dict[str, McpTool]) -> None:
    pid = call(hostile["hostile_hello"], name="a", **APPROVED)[1].split("pid ")[1]
    failed, output = call(hostile["hostile_mislabeled"], **APPROVED)
    assert failed and "does not match the output schema it lists" in output, output
    assert call(hostile["hostile_hello"], name="b", **APPROVED) == (False, f"hello b from pid {pid}")


@pytest.fixture(scope="module")
def http_server() -> Iterator[str]:
    port = free_port()
    process: Popen[bytes] = start_http_server(port, "s3cret-token")
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(10)


def tickets(pool: McpPool, url: str, token: str) -> dict[str, McpTool]:
    servers = {"tickets": {"url": url, "headers": {"Authorization": f"Bearer {token}"}, "connect_timeout": 5}}
    listed: dict[str, McpTool] = {}

    def offered() -> bool:
        listed.update(toolset(pool, servers))
        return bool(listed)

    wait_until(offered, timeout=30, what="the HTTP server's tools")  # it needs a moment to listen
    return listed


def test_an_http_401_names_its_status_and_hides_the_url_token(http_server: str, pool: McpPool) -> None:
    tickets(pool, http_server, "s3cret-token")  # the server listens
    parsed, _ = parse_mcp_servers(
        {"tickets2": {"url": f"{http_server}?key=sekrit", "headers": {"Authorization": "Bearer wrong"}}}, {}
    )
    built = build_toolset(parsed, pool)
    error = built.statuses[0].error or ""
    assert built.tools == [] and "HTTP 401 Unauthorized from http://127.0.0.1:" in error, error
    assert "unauthorized" in error and "sekrit" not in error and "wrong" not in error


def test_an_http_4xx_on_a_call_is_its_error_and_a_5xx_restarts_the_session(
    http_server: str, pool: McpPool
) -> None:
    lookup = tickets(pool, http_server, "s3cret-token")["tickets_lookup"]
    failed, output = call(lookup, ticket=401, **APPROVED)
    assert failed and "HTTP 401 Unauthorized from http://127.0.0.1:" in output and "forced 401" in output
    assert "unavailable" not in output  # the session stays up
    assert not call(lookup, ticket=7, **APPROVED)[0]
    failed, output = call(lookup, ticket=503, **APPROVED)
    assert failed and "unavailable" in output and "HTTP 503 Service Unavailable" in output, output
    assert "restarting it in the background" in output
    failed, output = call(lookup, 30, ticket=8, **APPROVED)  # waits for the new session in its budget
    assert not failed, output


@pytest.fixture(scope="module")
def sse_server() -> Iterator[str]:
    port = free_port()
    process: Popen[bytes] = start_http_server(port, "s3cret-token", "sse")
    yield f"http://127.0.0.1:{port}/sse"
    process.terminate()
    process.wait(10)


def test_the_sse_transport_works_and_its_401_names_its_status(sse_server: str, pool: McpPool) -> None:
    entry = {"url": sse_server, "transport": "sse", "headers": {"Authorization": "Bearer s3cret-token"}}
    servers = {"oldtickets": {**entry, "connect_timeout": 5}}
    listed: dict[str, McpTool] = {}
    wait_until(lambda: listed.update(toolset(pool, servers)) or listed, timeout=30, what="the SSE tools")
    failed, output = call(listed["oldtickets_lookup"], ticket=7, **APPROVED)
    assert not failed and '"ticket": 7' in output, output
    wrong = {"url": f"{sse_server}?key=sekrit", "transport": "sse", "headers": {"Authorization": "Bearer no"}}
    parsed, _ = parse_mcp_servers({"oldtickets2": wrong}, {})
    built = build_toolset(parsed, pool)
    error = built.statuses[0].error or ""
    assert built.statuses[0].transport == "SSE" and built.tools == []
    assert "HTTP 401 Unauthorized from http://127.0.0.1:" in error and "sekrit" not in error, error
