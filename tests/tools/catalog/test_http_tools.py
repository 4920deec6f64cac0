"""Catalog ``http`` tools against a local server: templates, env headers, JSON bodies, expectations."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest

from bot.settings import Settings
from tools.base import FunctionTool
from tools.catalog import load_catalog
from tools.config import ToolsConfig
from tools.egress import EgressPolicy
from tools.registry import build_output_filter, build_registry

TOKEN = "st-9f8e7d6c5b4a39281706"


def catalog_text(base: str) -> str:
    return textwrap.dedent(
        f"""
        tools:
          - name: check_health
            description: GET a URL and report its status.
            category: read_only
            parallel: true
            params:
              url: {{type: string}}
            http: {{method: GET, url: "{{url}}", expect_status: 200}}
          - name: item
            description: Look an item up.
            category: read_only
            params:
              name: {{type: string}}
            http:
              url: "{base}/echo/{{name}}?verbose=1"
              headers: {{Authorization: "Bearer ${{STATUS_TOKEN}}", X-Item: "{{name}}"}}
          - name: silence_alert
            description: Silence an alert.
            category: mutating
            params:
              alert: {{type: string}}
              minutes: {{type: integer, minimum: 1, maximum: 240, default: 30}}
            http:
              method: post
              url: "{base}/silences"
              json: {{alert: "{{alert}}", minutes: "{{minutes}}", by: "{{confirmed_by}}", note: "for {{minutes}} min"}}
              expect_status: [200, 201]
        """
    )


@pytest.fixture
def tools(tmp_path: Path, http_server: str) -> dict[str, FunctionTool[Any]]:
    path = tmp_path / "tools.yaml"
    path.write_text(catalog_text(http_server))
    # "{url}" comes from the model: it reaches only what egress allows (tests/tools/test_egress.py).
    egress = EgressPolicy.parse(["127.0.0.1"])
    return {tool.name: tool for tool in load_catalog(path, env={"STATUS_TOKEN": TOKEN}, egress=egress).tools}


def test_a_get_tool_reports_status_latency_and_body(
    tools: dict[str, FunctionTool[Any]], http_server: str
) -> None:
    result = tools["check_health"].execute(json.dumps({"url": f"{http_server}/"}), timeout=10)
    assert not result.is_error
    first, body = result.output.splitlines()
    assert first.startswith(f"GET {http_server}/ -> 200 OK in ") and first.endswith(" ms")
    assert body == "all systems operational"


def test_an_unexpected_status_is_an_error(tools: dict[str, FunctionTool[Any]], http_server: str) -> None:
    result = tools["check_health"].execute(json.dumps({"url": f"{http_server}/status/503"}), timeout=10)
    assert result.is_error and result.output.startswith("Error: expected status 200: GET ")


def test_a_whole_url_parameter_must_be_http(tools: dict[str, FunctionTool[Any]]) -> None:
    result = tools["check_health"].execute('{"url": "file:///etc/passwd"}', timeout=10)
    assert result.is_error and "not an http(s) URL" in result.output


def test_values_inside_a_url_are_percent_encoded_and_headers_come_from_env(
    tools: dict[str, FunctionTool[Any]],
) -> None:
    result = tools["item"].execute(json.dumps({"name": "../admin?all=1#x"}), timeout=10)
    echoed = json.loads(result.output.splitlines()[1])
    assert echoed["path"] == "/echo/..%2Fadmin%3Fall%3D1%23x?verbose=1"
    assert echoed["headers"]["Authorization"] == f"Bearer {TOKEN}"
    assert echoed["headers"]["X-Item"] == "../admin?all=1#x"


def test_a_json_body_keeps_types_and_carries_the_approver(tools: dict[str, FunctionTool[Any]]) -> None:
    result = tools["silence_alert"].execute('{"alert": "DiskFull", "confirmed_by": "U024BE7LH"}', timeout=10)
    assert not result.is_error
    assert " -> 201 Created in " in result.output.splitlines()[0]
    sent = json.loads(json.loads(result.output.splitlines()[1])["body"])
    assert sent == {"alert": "DiskFull", "minutes": 30, "by": "U024BE7LH", "note": "for 30 min"}


def test_a_refused_connection_is_an_error(tools: dict[str, FunctionTool[Any]]) -> None:
    result = tools["check_health"].execute('{"url": "http://127.0.0.1:9/"}', timeout=5)
    assert result.is_error and "cannot connect" in result.output


def test_header_secrets_from_env_are_redacted_from_every_output(tmp_path: Path, http_server: str) -> None:
    path = tmp_path / "tools.yaml"
    path.write_text(catalog_text(http_server))
    env = {"STATUS_TOKEN": TOKEN, "PATH": "/usr/bin:/bin"}
    registry = build_registry(ToolsConfig(tools_file=path, log_dirs=(tmp_path,), env=env))
    assert TOKEN in registry.secret_values
    output_filter = build_output_filter(Settings(_env_file=None), registry, env=env)  # type: ignore[call-arg]
    raw = registry["item"].execute('{"name": "x"}', timeout=10).output
    assert TOKEN in raw  # the echo server sends the header back...
    assert TOKEN not in output_filter(raw)  # ...and the filter hides it
