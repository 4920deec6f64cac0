"""Where a tool runs: on the loop's own thread when it keeps its own deadline, else on the pool,
whose wait cuts it off at its timeout (issue 29: two thread hand-offs a call saved)."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from agent.config import RunConfig
from agent.memory import InMemoryMemory
from agent.run import Run
from agent.scripted import ScriptedModel, tool_call
from agent.tooling import ToolResult, enforces_own_timeout
from agent.types import Message, RunStatus
from tests.support.tools import RecordingTool


@dataclass
class ThreadRecordingTool(RecordingTool):
    enforces_timeout: bool = False
    threads: list[str] | None = None

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        (self.threads if self.threads is not None else []).append(threading.current_thread().name)
        return super().execute(arguments, timeout=timeout)


class Raising(RecordingTool):
    enforces_timeout = True

    def execute(self, arguments: str, *, timeout: float) -> ToolResult:
        raise OSError("the disk went away")


class SaysSoWrongly(RecordingTool):
    enforces_timeout: Any = "yes"  # only ``True`` itself counts: a truthy string is no promise


def run(model: ScriptedModel, *tools: RecordingTool) -> tuple[RunStatus, list[Message]]:
    memory = InMemoryMemory([Message.user("check web-03")])
    result = Run(RunConfig(models=[model], memory=memory, tools=list(tools))).execute()
    return result.status, memory.load_messages()


def test_a_tool_that_keeps_its_own_deadline_runs_on_the_loops_thread_and_others_on_the_pool() -> None:
    own = ThreadRecordingTool("own", enforces_timeout=True, threads=[])
    pooled = ThreadRecordingTool("pooled", threads=[])
    status, _ = run(ScriptedModel([tool_call("own"), tool_call("pooled"), "done"]), own, pooled)
    assert status is RunStatus.COMPLETED
    assert own.threads == [threading.current_thread().name]
    assert pooled.threads is not None and len(pooled.threads) == 1
    assert pooled.threads[0].startswith("chatops-tool")


def test_a_tool_on_the_loops_thread_that_raises_is_an_error_result_and_the_run_goes_on() -> None:
    status, history = run(ScriptedModel([tool_call("disk"), "the disk tool failed"]), Raising("disk"))
    assert status is RunStatus.COMPLETED
    tool_messages = [m for m in history if m.role == "tool"]
    assert tool_messages[0].content == "Error: disk failed: OSError: the disk went away"


def test_only_a_true_claim_moves_a_tool_off_the_pool() -> None:
    assert enforces_own_timeout(ThreadRecordingTool("x", enforces_timeout=True))
    assert not enforces_own_timeout(ThreadRecordingTool("x"))
    assert not enforces_own_timeout(SaysSoWrongly("x"))
    assert not enforces_own_timeout(RecordingTool("x"))
