"""The run's pluggable parts are typed seams: a condenser or a recovery strategy of one's own is
used as given (it was once silently replaced unless it was the built-in class), and message
metadata is a typed model stored exactly as the plain object it was."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from agent.chat import ChatModel
from agent.config import RunConfig
from agent.errors import ContextOverflowError, EmptyResponseError, LLMError
from agent.memory import InMemoryMemory
from agent.recovery import RecoveryAction
from agent.run import Run
from agent.scripted import ScriptedModel
from agent.types import Message, RunStatus, ToolDef, Usage

OVERFLOW = ContextOverflowError("maximum context length exceeded", model="scripted")


@dataclass
class KeepLastTwo:
    """A condenser that is not ``agent.condense.Condenser``: drops all but the system prompt and the last two."""

    seen: list[int] = field(default_factory=list)

    def condense(
        self, messages: Sequence[Message], model: ChatModel, tools: Sequence[ToolDef]
    ) -> tuple[list[Message], Usage]:
        self.seen.append(len(messages))
        return [messages[0], *messages[-2:]], Usage()


@dataclass
class NeverRetry:
    """A recovery strategy that gives up on an empty answer, which ``RecoveryPolicy`` retries twice."""

    asked: list[str] = field(default_factory=list)

    def decide(self, error: LLMError, *, condense_count: int, empty_retries: int) -> RecoveryAction:
        self.asked.append(type(error).__name__)
        return RecoveryAction.CONDENSE if isinstance(error, ContextOverflowError) else RecoveryAction.FAIL


def history() -> list[Message]:
    return [Message.user(f"note {n}") for n in range(6)]


def test_a_condenser_of_ones_own_is_used() -> None:
    condenser = KeepLastTwo()
    memory = InMemoryMemory(history())
    config = RunConfig(models=[ScriptedModel([OVERFLOW, "done"])], memory=memory, condense=condenser)
    result = Run(config).execute()
    assert result.output == "done" and condenser.seen == [7]  # the system prompt and the six notes
    assert [m.content for m in memory.load_messages()][:3] == [config.system_prompt, "note 4", "note 5"]


def test_a_recovery_strategy_of_ones_own_is_used() -> None:
    strategy = NeverRetry()
    model = ScriptedModel([EmptyResponseError("empty"), "never asked"])
    result = Run(RunConfig(models=[model], memory=InMemoryMemory(history()), recovery=strategy)).execute()
    assert result.status is RunStatus.FAILED and strategy.asked == ["EmptyResponseError"]
    assert model.remaining == 1


def test_message_meta_is_stored_as_the_plain_object_it_was() -> None:
    tool = Message.tool("x1", "ok", tool="disk_usage", duration=0.25, category="mutating", confirmed_by="U1")
    reply = Message.user("stop", inbox_id="i1", slack_user="U2", ts="17.1")
    assert json.loads(tool.model_dump_json())["meta"] == {
        "tool": "disk_usage",
        "duration": 0.25,
        "category": "mutating",
        "confirmed_by": "U1",
    }
    assert '"meta":{"inbox_id":"i1","slack_user":"U2","ts":"17.1"}' in reply.model_dump_json()


def test_history_stored_with_keys_this_version_does_not_know_still_loads_and_keeps_them() -> None:
    stored = (
        '{"role":"user","content":"hi","meta":{"slack_user":"U1","ts":"1.2","from_an_older_version":[1,2]}}'
    )
    message = Message.model_validate_json(stored)
    assert message.meta["slack_user"] == "U1"
    assert json.loads(message.model_dump_json())["meta"] == json.loads(stored)["meta"]
