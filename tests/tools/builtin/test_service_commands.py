"""``service_restart`` describes for the approval card exactly the argv it then runs."""

from __future__ import annotations

import json
import shlex
from typing import Any

import pytest

from tests.tools.fakes import FakeCommands
from tools.base import FunctionTool
from tools.builtin.services import make_backend, service_tools

APPROVER = "U024BE7LH"


def restart_tool(fake: FakeCommands, backend: str) -> FunctionTool[Any]:
    for program in ("systemctl", "docker", "kubectl"):
        fake.add(program, stdout="{}")
    tools = service_tools(make_backend(backend, fake.env, kube_namespace="shop", kube_context="prod-eu"))
    (restart,) = [tool for tool in tools if tool.name == "service_restart"]
    return restart


@pytest.mark.parametrize(
    ("backend", "service", "expected"),
    [
        ("systemd", "nginx", "systemctl restart --no-ask-password nginx"),
        ("docker", "web-1", "docker restart web-1"),
        ("kubernetes", "web", "kubectl --namespace=shop --context=prod-eu rollout restart deployment/web"),
        ("kubernetes", "sts/db", "kubectl --namespace=shop --context=prod-eu rollout restart statefulset/db"),
    ],
)
def test_the_card_shows_the_argv_that_then_runs(
    fake_commands: FakeCommands, backend: str, service: str, expected: str
) -> None:
    tool = restart_tool(fake_commands, backend)
    arguments = json.dumps({"service": service})
    command = tool.describe(arguments)
    assert command == expected
    tool.execute(json.dumps({"service": service, "confirmed_by": APPROVER}), timeout=10)
    program, *argv = shlex.split(command)
    assert fake_commands.calls(program)[0] == argv


@pytest.mark.parametrize("hostile", ["ngi\u202enx", "nginx\u2028", "ng\u200binx", "nginx\ufeff"])
def test_a_restart_with_invisible_or_bidi_characters_is_refused_and_described_as_nothing(
    fake_commands: FakeCommands, hostile: str
) -> None:
    tool = restart_tool(fake_commands, "systemd")
    assert tool.describe(json.dumps({"service": hostile})) is None
    result = tool.execute(json.dumps({"service": hostile, "confirmed_by": APPROVER}), timeout=10)
    assert result.is_error and 'argument "service": U+' in result.output
    assert fake_commands.calls("systemctl") == []


def test_a_name_the_backend_refuses_has_no_command(fake_commands: FakeCommands) -> None:
    assert restart_tool(fake_commands, "systemd").describe('{"service": "dev/sda"}') is None
    assert restart_tool(fake_commands, "kubernetes").describe('{"service": "pod/x"}') is None
