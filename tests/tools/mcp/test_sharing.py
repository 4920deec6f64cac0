"""A forking worker's MCP sessions outlive its work horses (``tools.mcp.sharing``).

Each test forks children from this process the way RQ forks a work horse (``os.fork`` under
``multiprocessing``'s fork context): a child's ``process_pool()`` forwards to the host's pool, so
every horse uses one server process, started by the host. Nothing but the host's own children
can use it, and a horse whose catalog entry differs keeps its own session.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.tools.mcp.conftest import ROOT
from tools.config import ToolsConfig
from tools.errors import McpUnavailableError
from tools.mcp import McpHost, build_toolset, process_pool
from tools.mcp.config import McpServer, parse_mcp_servers
from tools.mcp.sharing import SharedConnection
from tools.registry import build_registry, shared_mcp_sessions

APPROVED = {"confirmed_by": "U_APPROVER"}
HOSTILE = {"command": [sys.executable, "-m", "tests.support.mcp_servers", "hostile"], "cwd": str(ROOT)}


def servers(name: str = "hostile", **entry: Any) -> list[McpServer]:
    # A server's (re)start is given a minute: on a busy machine it takes more than the default 15 s.
    parsed, problems = parse_mcp_servers(
        {name: {**HOSTILE, "timeout": 5, "connect_timeout": 60, **entry}}, {}
    )
    assert problems == []
    return parsed


@pytest.fixture
def host() -> Iterator[McpHost]:
    made = McpHost(servers())
    yield made
    made.close()


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def in_a_horse(job: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``job`` in a child forked from this process, as RQ forks a work horse; its answer."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)

    def main() -> None:
        try:
            sender.send(job())
        except BaseException as exc:  # shown by the test that asserts on the answer
            sender.send({"raised": f"{type(exc).__name__}: {exc}"})

    child = context.Process(target=main)
    child.start()
    sender.close()
    answer: dict[str, Any] = receiver.recv() if receiver.poll(180) else {"raised": "no answer in 180 s"}
    child.join(30)
    if child.is_alive():  # a hang: the test fails on its answer, the horse goes
        child.kill()
        child.join()
    return answer


def hello(entry: dict[str, Any] | None = None) -> Callable[[], dict[str, Any]]:
    """A job that builds the MCP tools from the catalog entry and calls ``hello`` once."""

    def job() -> dict[str, Any]:
        pool = process_pool()
        tools = {t.definition.name: t for t in build_toolset(servers(**(entry or {})), pool).all_tools()}
        result = tools["hostile_hello"].execute(json.dumps({"name": "x", **APPROVED}), timeout=90)
        server_pid = int(result.output.rsplit("pid ", 1)[1]) if not result.is_error else 0
        return {
            "pool": type(pool).__name__,
            "output": result.output,
            "pid": server_pid,
            "server_parent": parent_of(server_pid) if server_pid else 0,
            "horse": os.getpid(),
        }

    return job


def test_every_horse_uses_the_one_server_the_worker_started(host: McpHost) -> None:
    first, second = in_a_horse(hello()), in_a_horse(hello())
    assert first["pool"] == second["pool"] == "SharedPool", (first, second)
    assert first["horse"] != second["horse"]
    assert first["pid"] == second["pid"] != 0, (first, second)  # the same server process, reused
    assert parent_of(first["pid"]) == os.getpid()  # started by the worker, not by the first horse


def test_the_server_outlives_the_horse_that_started_it_and_restarts_in_the_worker(host: McpHost) -> None:
    first = in_a_horse(hello())

    def die() -> dict[str, Any]:
        tools = {t.definition.name: t for t in build_toolset(servers(), process_pool()).all_tools()}
        result = tools["hostile_die"].execute(json.dumps(APPROVED), timeout=90)
        return {"failed": result.is_error, "output": result.output}

    died = in_a_horse(die)
    assert died["failed"] and "MCP server hostile is unavailable" in died["output"], died
    again = in_a_horse(hello())
    assert again["pid"] not in (0, first["pid"]) and parent_of(again["pid"]) == os.getpid(), again


def test_an_error_answer_in_a_horse_leaves_the_workers_server_up(host: McpHost) -> None:
    first = in_a_horse(hello())

    def shout() -> dict[str, Any]:
        tools = {t.definition.name: t for t in build_toolset(servers(), process_pool()).all_tools()}
        result = tools["hostile_shout"].execute(json.dumps(APPROVED), timeout=90)
        return {"failed": result.is_error, "output": result.output}

    shouted = in_a_horse(shout)
    assert shouted["failed"] and "answered shout with JSON-RPC error -32602" in shouted["output"], shouted
    assert in_a_horse(hello())["pid"] == first["pid"]  # the same server process: never restarted


def test_a_process_that_is_not_a_horse_of_the_worker_is_refused(host: McpHost) -> None:
    connection = SharedConnection(servers()[0], host.address)
    with pytest.raises(McpUnavailableError, match="not one of its work horses"):
        connection.call("hello", {"name": "me"}, timeout=5)

    def grandchild() -> dict[str, Any]:
        # A child of a horse: it has its own pool, and the host refuses it when it asks anyway.
        answer = in_a_horse(lambda: _ask_directly(host.address))
        return {"grandchild": answer, "pool": type(process_pool()).__name__}

    answer = in_a_horse(grandchild)
    assert answer["pool"] == "SharedPool"
    assert answer["grandchild"]["pool"] == "McpPool", answer
    assert "not one of its work horses" in answer["grandchild"]["refused"], answer


def test_a_stranger_whose_request_the_host_never_reads_still_hears_why(host: McpHost) -> None:
    # Larger than the socket's buffer: the host refuses and closes before reading it, so the
    # write fails however the scheduler runs the two ends, and the refusal must still arrive.
    connection = SharedConnection(servers()[0], host.address)
    with pytest.raises(McpUnavailableError, match="not one of its work horses"):
        connection.call("hello", {"name": "x" * (8 << 20)}, timeout=5)


def _ask_directly(address: str) -> dict[str, Any]:
    try:
        SharedConnection(servers()[0], address).call("hello", {"name": "me"}, timeout=5)
    except McpUnavailableError as exc:
        return {"pool": type(process_pool()).__name__, "refused": str(exc)}
    return {"pool": type(process_pool()).__name__, "refused": ""}


def test_a_horse_whose_catalog_entry_changed_keeps_a_session_of_its_own(host: McpHost) -> None:
    shared = in_a_horse(hello())
    changed = in_a_horse(hello({"timeout": 7}))
    assert not changed.get("raised") and changed["pid"] not in (0, shared["pid"]), changed
    assert changed["server_parent"] == changed["horse"]  # the worker ran nothing the horse sent
    assert shared["server_parent"] == os.getpid()


def test_a_server_the_worker_cannot_start_answers_every_horse_at_once_with_the_reason() -> None:
    ghost = servers("ghost", command=["/nonexistent/mcp-server"], connect_timeout=2)
    host = McpHost(ghost)
    try:

        def call() -> dict[str, Any]:
            connection = process_pool().connection(ghost[0])
            try:
                connection.call("anything", {}, timeout=5)
            except McpUnavailableError as exc:
                return {"error": str(exc)}
            return {"error": ""}

        first, second = in_a_horse(call), in_a_horse(call)
    finally:
        host.close()
    assert first["error"].startswith("MCP server ghost is unavailable: starting failed"), first
    assert second["error"].startswith("MCP server ghost is unavailable"), second


def test_the_worker_shares_the_servers_of_a_catalog_that_overrides_built_in_tools(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The worker reads only the catalog's servers: checked without the built-in tools, an
    ``override: true`` entry looked unknown, the sessions were not shared and every worker start
    warned that the (valid) catalog was invalid."""
    catalog = tmp_path / "tools.yaml"
    override = {"name": "disk_usage", "description": "df", "run": ["df", "-h"], "override": True}
    catalog.write_text(yaml.safe_dump({"tools": [override], "mcp_servers": {"hostile": HOSTILE}}))
    config = ToolsConfig(tools_file=catalog)
    assert "disk_usage" in build_registry(replace(config, tools_file=None)).names()
    host = shared_mcp_sessions(config)
    try:
        assert host is not None and list(host.servers) == ["hostile"]
    finally:
        if host is not None:
            host.close()
    assert "not shared" not in caplog.text


def test_a_catalog_whose_servers_are_wrong_is_left_to_the_jobs(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(yaml.safe_dump({"mcp_servers": {"broken": {"commandd": ["x"]}}}))
    assert shared_mcp_sessions(ToolsConfig(tools_file=catalog)) is None
    assert "MCP sessions are not shared with the work horses" in caplog.text and "broken" in caplog.text
