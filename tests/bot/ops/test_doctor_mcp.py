"""``chatops doctor`` starts each MCP server of the catalog and lists its tools; ``chatops tools
list`` says which server a tool comes from and why it has its category."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from bot.ops.doctor import Outcome
from bot.ops.doctor_mcp import check_mcp
from bot.ops.tools_cli import tool_rows
from bot.settings import Settings


def settings_with(tmp_path: Path, servers: dict[str, object]) -> Settings:
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(yaml.safe_dump({"mcp_servers": servers}))
    return Settings(_env_file=None, chatops_tools_file=catalog)  # type: ignore[call-arg]


TIME = {
    "command": [sys.executable, "-m", "mcp_server_time", "--local-timezone", "UTC"],
    "trust": "annotations",
}


def test_doctor_lists_each_servers_tools_and_tools_list_names_the_server(tmp_path: Path) -> None:
    settings = settings_with(tmp_path, {"time": TIME})
    check = check_mcp(settings)
    assert check.outcome is Outcome.PASS and check.summary.startswith("time (stdio): ")
    assert "tools listed" in check.summary
    rows = {row.name: row for row in tool_rows(settings)}
    mcp_rows = [row for row in rows.values() if row.origin.startswith("MCP server time")]
    assert mcp_rows and all("(" in row.origin for row in mcp_rows)  # why it has its category


def test_doctor_fails_a_server_that_cannot_start(tmp_path: Path) -> None:
    broken = {"command": [str(tmp_path / "no-such-server")], "connect_timeout": 5}
    check = check_mcp(settings_with(tmp_path, {"broken": broken}))
    assert check.outcome is Outcome.FAIL and check.summary.startswith("broken (stdio): ")
    assert "broken" in check.fix
