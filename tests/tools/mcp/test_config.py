"""The ``mcp_servers:`` catalog section: typos, missing variables, secrets, names, schemas, categories."""

from __future__ import annotations

from pathlib import Path

import mcp_types
import pytest

from agent.tooling import ToolCategory
from tools.catalog import load_catalog
from tools.errors import CatalogError
from tools.mcp.categories import decide
from tools.mcp.config import McpToolOverride, parse_mcp_servers
from tools.mcp.pool import restart_delay
from tools.mcp.results import to_result
from tools.mcp.schemas import SchemaProblem, argument_problems, checked_schema, offered_name


def problems(servers: object, env: dict[str, str] | None = None) -> list[str]:
    return parse_mcp_servers(servers, env or {})[1]


def test_typos_and_mistakes_name_the_server_and_field() -> None:
    found = problems({"git": {"comand": ["x"]}})
    assert any("MCP server 'git'" in p and "comand" in p and "unknown key" in p for p in found)
    assert any("trust" in p for p in problems({"git": {"command": ["x"], "trust": "annotation"}}))
    assert any("exactly one" in p for p in problems({"git": {"command": ["x"], "url": "http://h/mcp"}}))
    assert any("exactly one" in p for p in problems({"git": {}}))
    assert any("http://" in p for p in problems({"t": {"url": "file:///etc/passwd"}}))
    assert any("server name" in p for p in problems({"my_git": {"command": ["x"]}}))  # '_' would be ambiguous
    assert any("server name" in p for p in problems({"g;rm -rf": {"command": ["x"]}}))
    assert any("headers" in p for p in problems({"g": {"command": ["x"], "headers": {"A": "b"}}}))
    assert any("override sets" in p for p in problems({"g": {"command": ["x"], "tools": {"t": {}}}}))
    assert any("'transport'" in p for p in problems({"g": {"command": ["x"], "transport": "sse"}}))
    assert any("'transport'" in p for p in problems({"g": {"url": "http://h/sse", "transport": "websocket"}}))
    assert problems(["git"]) == ["field 'mcp_servers': must be a mapping of server name to its entry"]


def test_environment_references_are_checked_and_their_values_are_secrets() -> None:
    spec = {"t": {"url": "https://h/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}}}
    assert any("TOKEN is not set" in p for p in problems(spec))
    servers, found = parse_mcp_servers(spec, {"TOKEN": "hunter2"})
    assert found == [] and servers[0].headers["Authorization"] == "Bearer hunter2"
    assert servers[0].secret_values == ("hunter2",)
    assert "hunter2" not in repr(servers[0])
    # A value is inserted as text: "${A}" inside a value is not expanded twice.
    servers, _ = parse_mcp_servers({"s": {"command": ["x"], "env": {"K": "${A}"}}}, {"A": "${B}", "B": "no"})
    assert servers[0].env["K"] == "${B}"


def test_the_catalog_file_takes_mcp_servers_beside_tools(tmp_path: Path) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text("mcp_servers:\n  git:\n    command: [python, -m, mcp_server_git]\n")
    catalog = load_catalog(path, env={})
    assert [server.name for server in catalog.mcp_servers] == ["git"] and catalog.tools == []
    path.write_text("mcp_server:\n  git: {command: [x]}\n")
    with pytest.raises(CatalogError, match="did you mean 'mcp_servers'"):
        load_catalog(path, env={})
    path.write_text("mcp_servers:\n  git: {command: [x], trust: always}\ntools: []\n")
    with pytest.raises(CatalogError, match=str(path)):
        load_catalog(path, env={})


def test_offered_names_follow_the_providers_rules() -> None:
    assert offered_name("git", "git_status") == "git_git_status"
    for bad in ("a" * 70, "rm -rf", "tool.name", "emoji🙂", ""):
        with pytest.raises(SchemaProblem):
            offered_name("s", bad)


def test_schemas_we_cannot_pass_on_are_refused() -> None:
    assert checked_schema({"type": "object", "properties": {"a": {"type": "string"}}})["type"] == "object"
    assert checked_schema({})["properties"] == {}
    bad: object
    for bad in (
        [],
        {"type": "array"},
        {"type": "object", "properties": []},
        {"type": "object", "properties": {"a": {"type": "strin"}}},
        {"type": "object", "properties": {"confirmed_by": {"type": "string"}}},
        {"type": "object", "properties": {"a": {"$ref": "https://evil.example/schema.json"}}},
        {"type": "object", "description": "x" * 40_000},
    ):
        with pytest.raises(SchemaProblem):
            checked_schema(bad)
    schema = checked_schema({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    assert argument_problems(schema, {"n": 1}) is None
    assert "n" in (argument_problems(schema, {"n": "1; rm -rf /"}) or "")
    assert "required" in (argument_problems(schema, {}) or "")


def hints(**values: bool) -> mcp_types.ToolAnnotations:
    return mcp_types.ToolAnnotations(**values)  # type: ignore[arg-type]


def test_categories_follow_the_issue() -> None:
    ro = hints(readOnlyHint=True)
    assert decide(ro, "annotations", None).category is ToolCategory.READ_ONLY
    assert not decide(ro, "annotations", None).parallel
    assert decide(hints(readOnlyHint=True, idempotentHint=True), "annotations", None).parallel
    assert decide(hints(destructiveHint=False), "annotations", None).category is ToolCategory.MUTATING
    assert decide(hints(destructiveHint=True), "annotations", None).category is ToolCategory.DESTRUCTIVE
    assert decide(None, "annotations", None).category is ToolCategory.DESTRUCTIVE
    assert decide(ro, "none", None).category is ToolCategory.MUTATING
    override = McpToolOverride(category=ToolCategory.READ_ONLY)
    assert decide(hints(destructiveHint=True), "annotations", override).reason == "override: read_only"
    assert (
        decide(None, "none", McpToolOverride(category=ToolCategory.DESTRUCTIVE)).category
        is ToolCategory.DESTRUCTIVE
    )


def test_restarts_back_off() -> None:
    assert [restart_delay(n) for n in range(1, 9)] == [0, 1, 2, 4, 8, 16, 30, 30]


def test_results_describe_resources_and_keep_structured_content() -> None:
    result = mcp_types.CallToolResult(
        content=[
            mcp_types.TextContent(type="text", text="two things"),
            mcp_types.EmbeddedResource(
                type="resource",
                resource=mcp_types.BlobResourceContents(
                    uri="file:///big.bin", blob="QUJD" * 10_000, mime_type="application/octet-stream"
                ),
            ),
        ],
        structured_content={"count": 2},
    )
    output = to_result(result).output
    assert (
        "two things" in output
        and "file:///big.bin" in output
        and "QUJD" not in output
        and '{"count": 2}' in output
    )
