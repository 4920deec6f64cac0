"""A hostile model's oversized turns: 1,000 calls at once, a 3 MB argument, 30,000 nested brackets (100,000 are over the size cap first).

Each is answered with an error result the model can act on; nothing crashes the run, and the
history keeps bounded copies only.
"""

from __future__ import annotations

from agent.config import RunConfig
from agent.memory import InMemoryMemory
from agent.run import run
from agent.scripted import ScriptedModel
from agent.types import Limits, Message, RunStatus, ToolCall
from tests.support.tools import RecordingTool


def results(memory: InMemoryMemory) -> list[str]:
    return [m.content or "" for m in memory.load_messages() if m.role == "tool"]


def test_calls_past_the_per_turn_cap_are_answered_with_the_cap_and_never_run() -> None:
    check = RecordingTool("disk_usage", parallel=True)
    turn = [ToolCall(id=f"c{i}", name="disk_usage", arguments=f'{{"n": {i}}}') for i in range(1000)]
    memory = InMemoryMemory([Message.user("check everything")])
    limits = Limits(max_calls_per_turn=32)
    result = run(
        RunConfig(models=[ScriptedModel([turn, "done"])], memory=memory, tools=[check], limits=limits)
    )
    assert result.status is RunStatus.COMPLETED
    assert check.executions == 32 and [c["n"] for c in check.calls] == list(range(32))
    refused = [text for text in results(memory) if "at most 32 tool calls are run per turn" in text]
    assert len(refused) == 968 and refused[0].startswith("Error: ") and "call 33" in refused[0]


def test_a_huge_argument_is_refused_and_history_keeps_a_bounded_copy() -> None:
    check = RecordingTool("tail_log")
    huge = '{"path": "' + "x" * 3_000_000 + '"}'
    memory = InMemoryMemory([Message.user("read it")])
    model = ScriptedModel([[ToolCall(id="c1", name="tail_log", arguments=huge)], "ok"])
    assert run(RunConfig(models=[model], memory=memory, tools=[check])).status is RunStatus.COMPLETED
    assert check.executions == 0
    (text,) = results(memory)
    assert text.startswith("Error: the arguments are 3,000,012 bytes, over the 65,536-byte limit")
    stored = sum(len(m.model_dump_json()) for m in memory.load_messages())
    assert stored < 10_000  # the 3 MB never reached the history
    assert len(model.requests[-1].model_dump_json()) < 10_000  # nor the next request


def test_arguments_nested_30000_deep_are_an_error_result_not_a_crash() -> None:
    check = RecordingTool("disk_usage")
    deep = '{"a": ' + "[" * 30_000 + "]" * 30_000 + "}"
    memory = InMemoryMemory([Message.user("check")])
    model = ScriptedModel([[ToolCall(id="c1", name="disk_usage", arguments=deep)], "ok"])
    result = run(RunConfig(models=[model], memory=memory, tools=[check]))
    assert result.status is RunStatus.COMPLETED and check.executions == 0
    (text,) = results(memory)
    assert text.startswith("Error: ") and "deep" in text and text.endswith("nothing ran")
    assert sum(len(m.model_dump_json()) for m in memory.load_messages()) < 10_000
