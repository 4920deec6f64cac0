"""Scenario files drive the OpenAI-compatible server like an ops model, over real HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import RunConfig
from agent.memory import InMemoryMemory
from agent.models.openai_client import LLMClient
from agent.run import Run
from agent.types import Message, RunStatus
from emulator.models.openai_server import OpenAIServer
from emulator.models.scenario import ScenarioError, load_scenario
from tests.support.tools import RecordingTool

SCENARIO = """
name: test
rules:
  - when: {role: user, contains: "logs first"}
    reply: {tool_calls: [{name: tail_log, arguments: {path: /var/log/app.log}}]}
  - when: {tool: tail_log}
    reply: {text: "Log says: {last_tool_result}"}
turns:
  - tool_calls: [{name: disk_usage, arguments: {path: /}}]
  - text: "Disk: {tool_result[disk_usage]} (asked: {last_user_message})"
faults:
  - {request: 1, status: 429, retry_after: 0}
"""


def run_against(scenario_text: str, tmp_path: Path, prompt: str) -> tuple[str | None, OpenAIServer]:
    path = tmp_path / "s.yaml"
    path.write_text(scenario_text)
    tools = [
        RecordingTool("disk_usage", respond=lambda a: "97% used"),
        RecordingTool("tail_log", respond=lambda a: "OOM"),
    ]
    with OpenAIServer(fallback=load_scenario(path)) as server:
        with LLMClient(server.url, "", "scripted", sleep=lambda s: None) as client:
            memory = InMemoryMemory([Message.user(prompt)])
            result = Run(RunConfig(models=[client], memory=memory, tools=tools)).execute()
        assert result.status is RunStatus.COMPLETED
        return result.output, server


def test_turns_in_order_quote_tool_results_and_faults_are_injected(tmp_path: Path) -> None:
    output, server = run_against(SCENARIO, tmp_path, "web-03 is out of disk")
    assert output == "Disk: 97% used (asked: web-03 is out of disk)"
    assert len(server.requests) == 3  # two turns, plus the injected 429 that the client retried


def test_rules_match_the_newest_message_before_turns(tmp_path: Path) -> None:
    output, _ = run_against(SCENARIO, tmp_path, "don't restart it, show me the logs first")
    assert output == "Log says: OOM"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("turns: [{txt: hi}]", "turns[0]: unknown key 'txt'"),
        ("rules: [{when: {rol: user}, reply: {text: x}}]", "rules[0].when: unknown key 'rol'"),
        ("turns: [{tool_calls: [{arguments: {}}]}]", "turns[0].tool_calls[0]: name is required"),
        ("turns: [{}]", "turns[0]: a reply needs text, tool_calls or findings"),
        ("turns: [", "not valid YAML"),
    ],
)
def test_mistakes_name_the_file_and_the_place(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as error:
        load_scenario(path)
    assert str(path) in str(error.value) and message in str(error.value)
