"""A model that copies a secret into its answer or into a call's arguments (from a log line, a
prompt, a pasted message): history stores only redacted text, and no tool receives the secret."""

from __future__ import annotations

import base64

from agent.config import RunConfig
from agent.memory import InMemoryMemory
from agent.run import run
from agent.scripted import ScriptedModel
from agent.types import Message, RunStatus, ToolCall
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
