"""Catalog tools describe for the approval card the argv or request they then execute."""

from __future__ import annotations

import json
import shlex
import textwrap
from pathlib import Path
from typing import Any

from tests.tools.fakes import FakeCommands
from tools.base import FunctionTool
from tools.catalog import load_catalog

TOKEN = "st-9f8e7d6c5b4a39281706"
CATALOG = """
tools:
  - name: scale
    description: Scale a deployment.
    category: mutating
    params:
      deployment: {type: string}
      replicas: {type: integer, minimum: 0, maximum: 50}
      reason: {type: string, required: false}
    run: ["kubectl", "scale", "deployment/{deployment}", "--replicas={replicas}", "--reason={reason}"]
  - name: annotate
    description: Annotate a deploy with who approved it.
    category: mutating
    params:
      note: {type: string}
    run: ["appctl", "annotate", "--by={confirmed_by}", "{note}"]
  - name: purge_queue
    description: Purge a queue.
    category: destructive
    params:
      queue: {type: string, enum: [emails, webhooks]}
    dry_run: ["queuectl", "count", "{queue}"]
    run: ["queuectl", "purge", "{queue}"]
  - name: silence_alert
    description: Silence an alert.
    category: mutating
    params:
      alert: {type: string}
      minutes: {type: integer, minimum: 1, maximum: 240, default: 30}
    http:
      method: post
      url: "https://alerts.internal/api/v2/silences/{alert}?for={minutes}"
      headers: {Authorization: "Bearer ${STATUS_TOKEN}", X-Alert: "{alert}"}
      json: {alert: "{alert}", minutes: "{minutes}", by: "{confirmed_by}"}
"""


def catalog(tmp_path: Path, fake: FakeCommands) -> dict[str, FunctionTool[Any]]:
    for program in ("kubectl", "appctl", "queuectl"):
        fake.add(program, stdout="ok")
    path = tmp_path / "tools.yaml"
    path.write_text(textwrap.dedent(CATALOG))
    loaded = load_catalog(path, env={"STATUS_TOKEN": TOKEN}, command_env=fake.env)
    return {tool.name: tool for tool in loaded.tools}


def test_a_run_tool_describes_the_argv_it_runs(tmp_path: Path, fake_commands: FakeCommands) -> None:
    tools = catalog(tmp_path, fake_commands)
    arguments = {"deployment": "web two", "replicas": 0}
    command = tools["scale"].describe(json.dumps(arguments))
    # The omitted optional parameter's element is left out, as it is when the command runs.
    assert command == "kubectl scale 'deployment/web two' --replicas=0"
    tools["scale"].execute(json.dumps({**arguments, "confirmed_by": "U1"}), timeout=10)
    assert fake_commands.calls("kubectl") == [["scale", "deployment/web two", "--replicas=0"]]
    assert shlex.split(command)[1:] == fake_commands.calls("kubectl")[0]


def test_the_approver_is_named_as_a_placeholder(tmp_path: Path, fake_commands: FakeCommands) -> None:
    tools = catalog(tmp_path, fake_commands)
    assert tools["annotate"].describe('{"note": "deploy 42"}') == (
        "appctl annotate '--by=<approver>' 'deploy 42'\n(<approver> is the Slack ID of whoever approves)"
    )


def test_a_destructive_tool_describes_its_real_command_not_its_dry_run(
    tmp_path: Path, fake_commands: FakeCommands
) -> None:
    tools = catalog(tmp_path, fake_commands)
    assert tools["purge_queue"].describe('{"queue": "emails"}') == "queuectl purge emails"


def test_an_http_tool_describes_method_url_header_names_and_body_never_secrets(
    tmp_path: Path, fake_commands: FakeCommands
) -> None:
    tools = catalog(tmp_path, fake_commands)
    text = tools["silence_alert"].describe('{"alert": "disk full/web-03"}')
    assert text is not None
    lines = text.splitlines()
    # The value is percent-encoded in the URL, exactly as it is sent.
    assert lines[0] == "POST https://alerts.internal/api/v2/silences/disk%20full%2Fweb-03?for=30"
    assert lines[1] == "headers: Authorization, X-Alert, Content-Type (values not shown)"
    assert json.loads(lines[2].removeprefix("body: ")) == {
        "alert": "disk full/web-03",
        "minutes": 30,
        "by": "<approver>",
    }
    assert TOKEN not in text and "Bearer" not in text


def test_invalid_arguments_describe_nothing(tmp_path: Path, fake_commands: FakeCommands) -> None:
    tools = catalog(tmp_path, fake_commands)
    assert tools["scale"].describe('{"deployment": "web", "replicas": 99}') is None
    assert tools["scale"].describe('{"deployment": "w\u202eeb", "replicas": 1}') is None
