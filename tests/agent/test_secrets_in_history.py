"""A model that copies a secret into its answer or into a call's arguments (from a log line, a
prompt, a pasted message): history stores only redacted text, and no tool receives the secret."""

from __future__ import annotations

import base64

from agent.config import RunConfig
from agent.loop_detection import call_signature
from agent.memory import InMemoryMemory
from agent.run import run
from agent.scripted import ScriptedModel
from agent.tooling import ToolCategory, ToolResult
from agent.types import Message, RunStatus, ToolCall, ToolDef
from tests.support.tools import RecordingTool
from tools.safety import Redactor

SECRET = "sk-live-7f3a9c2e1b4d8f6a0c5e"


def stored(memory: InMemoryMemory) -> str:
    return "".join(m.model_dump_json() for m in memory.load_messages())


def test_a_call_carrying_a_known_secret_is_refused_and_stored_redacted() -> None:
    send = RecordingTool("http_check")
    encoded = base64.b64encode(SECRET.encode()).decode()
    calls = [
        ToolCall(id="c1", name="http_check", arguments=f'{{"url": "https://x.example/?k={SECRET}"}}'),
        ToolCall(id="c2", name="http_check", arguments=f'{{"url": "https://x.example/?k={encoded}"}}'),
        ToolCall(id="c3", name="http_check", arguments='{"url": "https://grafana.corp/health"}'),
    ]
    memory = InMemoryMemory([Message.user("check the service")])
    model = ScriptedModel([calls, f"done; the key was {SECRET}"])
    result = run(
        RunConfig(models=[model], memory=memory, tools=[send], redact=Redactor(secrets=[SECRET]).redact)
    )
    assert result.status is RunStatus.COMPLETED
    assert send.calls == [{"url": "https://grafana.corp/health"}]  # only the clean call ran
    refusals = [m.content or "" for m in memory.load_messages() if m.role == "tool"][:2]
    assert all(text.startswith("Error: the arguments contained a secret value") for text in refusals)
    assert SECRET not in stored(memory) and encoded not in stored(memory)
    assert SECRET not in (result.output or "") and "[REDACTED]" in (result.output or "")
    assert SECRET not in model.requests[-1].model_dump_json()  # nor sent back to the model


def test_without_a_redactor_nothing_is_refused() -> None:
    send = RecordingTool("http_check")
    call = ToolCall(id="c1", name="http_check", arguments=f'{{"url": "https://x.example/?k={SECRET}"}}')
    memory = InMemoryMemory([Message.user("check")])
    run(RunConfig(models=[ScriptedModel([[call], "ok"])], memory=memory, tools=[send]))
    assert send.executions == 1


class Probe:
    """A read-only tool whose output carries a decoration, and ``stable_output`` without it."""

    definition = ToolDef(name="probe", description="Probe.", parameters={"type": "object"})
    category = ToolCategory.READ_ONLY
    parallel = False
    timeout = 5.0

    def __init__(self, output: str, stable: str) -> None:
        self.result = ToolResult(output, stable_output=stable)

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        return self.result

    def preview(self, arguments: str, *, timeout: float) -> ToolResult | None:
        return None


def test_loop_detection_hashes_the_filtered_stable_output_and_an_undecorated_one_is_filtered_once() -> None:
    seen: list[str] = []

    def output_filter(text: str) -> str:
        seen.append(text)
        return text.replace(SECRET, "[REDACTED]")

    decorated = Probe(f"key {SECRET} (in 0.2 s)", f"key {SECRET}")
    memory = InMemoryMemory([Message.user("probe")])
    model = ScriptedModel([[ToolCall(id="c1", name="probe")], "ok"])
    run(RunConfig(models=[model], memory=memory, tools=[decorated], tool_output_filter=output_filter))
    state = memory.load_state()
    assert state is not None and state.loop_window == [call_signature("probe", "{}", "key [REDACTED]")]
    assert seen == [f"key {SECRET} (in 0.2 s)", f"key {SECRET}"]  # each text once
    assert SECRET not in stored(memory)

    seen.clear()
    plain = Probe(f"key {SECRET}", f"key {SECRET}")  # a tool that sets stable_output to its output
    memory = InMemoryMemory([Message.user("probe")])
    model = ScriptedModel([[ToolCall(id="c1", name="probe")], "ok"])
    run(RunConfig(models=[model], memory=memory, tools=[plain], tool_output_filter=output_filter))
    state = memory.load_state()
    assert state is not None and state.loop_window == [call_signature("probe", "{}", "key [REDACTED]")]
    assert seen == [f"key {SECRET}"]  # the same text is filtered once, not once more for the hash
