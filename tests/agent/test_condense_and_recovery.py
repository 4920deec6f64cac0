"""Recovery is its own component: context overflow -> condense once; empty -> retry twice; else stop."""

from __future__ import annotations

from typing import Any

import pytest

from agent.condense import SUMMARY_PREFIX, CondenseError, Condenser
from agent.config import RunConfig
from agent.errors import (
    ContextOverflowError,
    EmptyResponseError,
    MalformedResponseError,
    ProviderError,
    RetriesExhaustedError,
    StreamInterruptedError,
)
from agent.events import Condensed, CondenseFailed, Event
from agent.memory import InMemoryMemory
from agent.recovery import RecoveryAction, RecoveryPolicy
from agent.run import Run
from agent.scripted import ScriptedModel, tool_call
from agent.types import Message, RunStatus
from tests.support.tools import RecordingTool

OVERFLOW = ContextOverflowError("This model's maximum context length is 8192 tokens", model="scripted")


@pytest.mark.parametrize(
    ("error", "condensed", "retries", "action"),
    [
        (OVERFLOW, 0, 0, RecoveryAction.CONDENSE),
        (OVERFLOW, 1, 0, RecoveryAction.FAIL),
        (EmptyResponseError("empty"), 0, 0, RecoveryAction.RETRY),
        (StreamInterruptedError("cut"), 0, 1, RecoveryAction.RETRY),
        (EmptyResponseError("empty"), 0, 2, RecoveryAction.FAIL),
        (RetriesExhaustedError("3 attempts"), 0, 0, RecoveryAction.SWITCH_MODEL),
        (ProviderError("invalid api key", status_code=401), 0, 0, RecoveryAction.FAIL),
        (MalformedResponseError("not json"), 0, 0, RecoveryAction.FAIL),
    ],
)
def test_policy(error: Any, condensed: int, retries: int, action: RecoveryAction) -> None:
    assert RecoveryPolicy().decide(error, condense_count=condensed, empty_retries=retries) is action


def long_history() -> list[Message]:
    messages = [Message.system("You are ops."), Message.user("web-03 is out of disk")]
    for n in range(6):
        call = tool_call("probe", f"c{n}", n=n)
        messages += [Message.assistant(None, [call]), Message.tool(call.id, f"result {n}")]
    return messages


def test_condense_keeps_system_prompt_and_recent_turns_and_never_splits_a_call_from_its_result() -> None:
    messages = long_history()
    for keep in range(1, 10):
        condenser = Condenser(keep_recent=keep)
        start = condenser.split_point(messages)
        assert messages[start].role != "tool"
        model = ScriptedModel(["User asked about disk; probes 0-3 ran."])
        condensed, _ = condenser.condense(messages, model, [])
        assert condensed[0] == messages[0]
        assert condensed[1].content is not None and condensed[1].content.startswith(SUMMARY_PREFIX)
        assert condensed[2:] == messages[start:]
        # The summary request reuses the run's system prompt, so the cached prefix still matches.
        assert model.requests[0].messages[0] == messages[0]


def test_condense_fails_cleanly_when_the_model_does_not_summarise() -> None:
    with pytest.raises(CondenseError, match="did not answer"):
        Condenser(keep_recent=2).condense(long_history(), ScriptedModel([tool_call("probe")]), [])


def make_run(model: ScriptedModel, memory: InMemoryMemory, events: list[Event]) -> Run:
    return Run(
        RunConfig(
            models=[model],
            memory=memory,
            tools=[RecordingTool("probe")],
            on_event=events.append,
            condense=Condenser(keep_recent=4),
        )
    )


def test_context_overflow_condenses_once_then_the_run_goes_on() -> None:
    memory = InMemoryMemory(long_history()[1:])
    events: list[Event] = []
    model = ScriptedModel([OVERFLOW, "summary of the probes", "Disk is fine."])
    result = make_run(model, memory, events).execute()
    assert result.status is RunStatus.COMPLETED and result.output == "Disk is fine."
    assert any(isinstance(e, Condensed) for e in events)
    stored = memory.load_messages()
    assert stored[1].content is not None and stored[1].content.startswith(SUMMARY_PREFIX)
    assert memory.load_state().condense_count == 1  # type: ignore[union-attr]


def test_second_overflow_in_a_run_is_terminal() -> None:
    memory = InMemoryMemory(long_history()[1:])
    model = ScriptedModel([OVERFLOW, "summary", OVERFLOW])
    result = make_run(model, memory, []).execute()
    assert result.status is RunStatus.FAILED and "maximum context length" in (result.error or "")
    assert model.remaining == 0


def test_condense_failure_emits_an_event_and_stops() -> None:
    events: list[Event] = []
    model = ScriptedModel([OVERFLOW, ProviderError("summary refused", status_code=400)])
    result = make_run(model, InMemoryMemory(long_history()[1:]), events).execute()
    assert result.status is RunStatus.FAILED and "condensing failed" in (result.error or "")
    assert [type(e) for e in events if isinstance(e, CondenseFailed | Condensed)] == [CondenseFailed]
