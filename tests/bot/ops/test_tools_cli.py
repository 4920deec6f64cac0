"""``chatops tools list``: each tool with its category and where it came from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.ops.cli import build_parser
from bot.ops.tools_cli import run_cli
from bot.settings import Settings

CATALOG = """\
tools:
  - name: restart_api
    description: Restart the API deployment.
    category: mutating
    params:
      region: {type: string, enum: [eu, us]}
    run: ["echo", "restarting api in {region}"]
  - name: disk_usage
    description: Disk usage, the team's way.
    category: read_only
    override: true
    run: ["df", "-h"]
"""


def tools(settings: Settings, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = run_cli(build_parser().parse_args(["tools", "list", *argv]), settings)
    out, err = capsys.readouterr()
    return status, out, err


def test_builtins_and_catalog_tools_with_their_origin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(CATALOG)
    settings = Settings(_env_file=None, chatops_tools_file=catalog)  # type: ignore[call-arg]
    status, out, _ = tools(settings, capsys)
    assert status == 0
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in out.splitlines()[1:]}
    assert rows["restart_api"] == ["mutating", str(catalog)]
    assert rows["disk_usage"] == ["read_only", f"{catalog} (overrides the built-in)"]
    assert rows["service_restart"] == ["mutating", "built-in"]
    assert rows["clean_old_logs"] == ["destructive", "built-in"]
    assert list(rows) == sorted(rows)

    status, out, _ = tools(settings, capsys, "--json")
    by_name = {row["name"]: row for row in map(json.loads, out.splitlines())}
    assert by_name["restart_api"]["description"] == "Restart the API deployment."


def test_a_catalog_with_a_typo_names_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalog = tmp_path / "tools.yaml"
    catalog.write_text(CATALOG.replace("    category: mutating", "    categroy: mutating"))
    settings = Settings(_env_file=None, chatops_tools_file=catalog)  # type: ignore[call-arg]
    status, out, err = tools(settings, capsys)
    assert status == 1 and out == ""
    assert "unknown key 'categroy' (did you mean 'category'?)" in err
    assert "restart_api" in err and str(catalog) in err
