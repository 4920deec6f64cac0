"""A stdio server's stderr reaches our log redacted and bounded (``tools.mcp.stderr``), never raw."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator

import pytest

from tests.support.waiting import wait_until
from tests.tools.mcp.conftest import ROOT
from tools.mcp import McpPool, build_toolset
from tools.mcp.config import parse_mcp_servers
from tools.mcp.stderr import MAX_LINES

TOKEN = "tok-4f1b9c2e7d3a8b6f0e5c"
HOSTILE = [sys.executable, "-m", "tests.support.mcp_servers", "hostile"]


@pytest.fixture
def pool() -> Iterator[McpPool]:
    made = McpPool()
    yield made
    made.close()


def leak(pool: McpPool, lines: int) -> None:
    entry = {"command": HOSTILE, "cwd": str(ROOT), "env": {"API_TOKEN": "${LEAK_TOKEN}"}}
    servers, problems = parse_mcp_servers({"hostile": entry}, {"LEAK_TOKEN": TOKEN})
    assert problems == []
    tools = {t.definition.name: t for t in build_toolset(servers, pool).all_tools()}
    arguments = json.dumps({"lines": lines, "confirmed_by": "U_APPROVER"})
    result = tools["hostile_leak"].execute(arguments, timeout=10)
    assert not result.is_error, result.output


def stderr_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "(stderr)" in r.getMessage()]


def test_a_servers_token_on_its_stderr_is_redacted_in_our_log(
    pool: McpPool, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="tools.mcp.stderr")
    leak(pool, 1)
    wait_until(lambda: any("debug 0" in line for line in stderr_lines(caplog)), 10, "the stderr line")
    (line,) = [line for line in stderr_lines(caplog) if "debug 0" in line]
    assert line.startswith("MCP server hostile (stderr): debug 0: calling the API")
    assert TOKEN not in line and "[REDACTED]" in line
    assert TOKEN not in capfd.readouterr().err  # nothing went to the worker's raw stderr


def test_a_server_flooding_stderr_is_cut_off_and_counted(
    pool: McpPool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="tools.mcp.stderr")
    leak(pool, MAX_LINES + 500)
    pool.close()  # the session ends: the relay counts what it did not log
    wait_until(lambda: any("more stderr lines" in r.getMessage() for r in caplog.records), 20, "the count")
    assert len(stderr_lines(caplog)) == MAX_LINES
    assert any("500 more stderr lines were not logged" in r.getMessage() for r in caplog.records)
