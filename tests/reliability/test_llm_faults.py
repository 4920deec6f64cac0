"""The model endpoint misbehaves: what the thread shows, through the real HTTP client.

The bot (web app, Slack emulator, an in-process RQ worker) talks to the scripted OpenAI server
over HTTP with ``agent.models.openai_client.LLMClient``. Transient faults (429 with Retry-After, 5xx bursts, read
timeouts, truncated streams) must be absorbed: one answer, once. Faults that cannot be absorbed
(malformed JSON, every model of the chain down) must end the run with a clear message in the
thread. A context overflow is condensed and the run goes on.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent.condense import SUMMARY_INSTRUCTION, SUMMARY_PREFIX
from agent.config import RunConfig
from agent.events import Event, TextDelta
from agent.memory import InMemoryMemory
from agent.models.openai_client import LLMClient
from agent.run import Run
from agent.types import Message, RunStatus
from bot.observability.audit import AuditKind
from emulator.models.openai_server import OpenAIServer, Reply, ScriptedToolCall
from tests.support.slack_bot import SlackBot

pytestmark = pytest.mark.reliability

MODEL = "gpt-test"


@pytest.fixture
def llm() -> Iterator[OpenAIServer]:
    with OpenAIServer(model=MODEL) as server:
        yield server


def client(server: OpenAIServer, model: str = MODEL, **options: Any) -> LLMClient:
    defaults: dict[str, Any] = {"backoff_base": 0.05, "read_timeout": 5.0, "max_attempts": 3}
    return LLMClient(server.url, "sk-test", model, **{**defaults, **options})


def run_in_slack(
    make_bot: Callable[..., SlackBot], models: list[LLMClient], text: str = "is web-03 ok?"
) -> tuple[SlackBot, str, str]:
    bot = make_bot(models=models)
    ts = bot.mention(text)
    run_id = bot.run_id(ts)
    bot.work()
    return bot, ts, run_id


def replies(bot: SlackBot, ts: str) -> list[str]:
    return [str(m["text"]) for m in bot.bot_replies(ts)]


def card_blocks(bot: SlackBot, ts: str) -> str:
    return json.dumps(bot.bot_replies(ts)[0]["blocks"])


def test_a_429_with_retry_after_is_waited_out_and_answered_once(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot]
) -> None:
    times: list[float] = []
    llm.enqueue(timed(Reply.rate_limited(retry_after=1), times), timed(Reply(text="web-03 is fine"), times))
    bot, ts, run_id = run_in_slack(make_bot, [client(llm)])
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert replies(bot, ts)[1:] == ["web-03 is fine"]
    assert len(llm.requests) == 2
    waited = times[1] - times[0]
    assert waited >= 0.9, f"Retry-After: 1 was not honoured (retried after {waited:.2f}s)"


def test_a_burst_of_500s_is_retried_and_answered_once(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot]
) -> None:
    llm.enqueue(Reply.server_error(500), Reply.server_error(503), Reply(text="web-03 is fine"))
    bot, ts, run_id = run_in_slack(make_bot, [client(llm)])
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert replies(bot, ts)[1:] == ["web-03 is fine"]
    assert len(llm.requests) == 3


def test_a_burst_longer_than_the_retries_moves_to_the_fallback_model(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot]
) -> None:
    llm.enqueue(*[Reply.server_error(502)] * 3, Reply(text="answered by the fallback"))
    bot, ts, run_id = run_in_slack(make_bot, [client(llm), client(llm, "gpt-fallback")])
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert replies(bot, ts)[1:] == ["answered by the fallback"]
    assert [r.body["model"] for r in llm.requests] == [MODEL] * 3 + ["gpt-fallback"]


def test_a_read_timeout_is_retried_and_answered_once(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot]
) -> None:
    llm.enqueue(Reply(text="too late", delay=2.0), Reply(text="web-03 is fine"))
    bot, ts, run_id = run_in_slack(make_bot, [client(llm, read_timeout=0.5)])
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert replies(bot, ts)[1:] == ["web-03 is fine"]  # the late answer is never shown
    assert len(llm.requests) == 2


def test_malformed_json_ends_the_run_with_a_clear_message(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot]
) -> None:
    llm.enqueue(Reply(malformed=True))
    bot, ts, run_id = run_in_slack(make_bot, [client(llm)])
    assert bot.status(run_id) is RunStatus.FAILED
    _card, notice = replies(bot, ts)
    assert "Failed" in card_blocks(bot, ts)
    assert "Failed" in notice and f"model {MODEL}" in notice and "JSON" in notice
    assert len(llm.requests) == 1  # not retried: the same request would get the same body
    assert bot.service.audit.entries(run_id)[-1].kind is AuditKind.RUN_FINISHED


def test_every_model_of_the_chain_down_ends_the_run_saying_which(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot]
) -> None:
    llm.fallback = lambda body: Reply.server_error(503)
    bot, ts, run_id = run_in_slack(make_bot, [client(llm), client(llm, "gpt-fallback")])
    assert bot.status(run_id) is RunStatus.FAILED
    _card, notice = replies(bot, ts)
    assert "every model failed" in notice and MODEL in notice and "gpt-fallback" in notice
    assert "Failed" in card_blocks(bot, ts)
    assert len(llm.requests) == 6  # three attempts each, then it stopped
    finished = bot.service.audit.entries(run_id)[-1]
    assert finished.kind is AuditKind.RUN_FINISHED and finished.fields["status"] == "failed"


def test_a_context_overflow_is_condensed_and_the_run_answers(
    llm: OpenAIServer, make_bot: Callable[..., SlackBot]
) -> None:
    def reply(body: dict[str, Any]) -> Reply:
        messages = body["messages"]
        texts = [str(m.get("content") or "") for m in messages]
        if texts[-1] == SUMMARY_INSTRUCTION:
            return Reply(text="checked web-03 three times: healthy")
        if sum(1 for m in messages if m["role"] == "tool") < 3 and not any(
            t.startswith(SUMMARY_PREFIX) for t in texts
        ):
            return Reply(tool_calls=[ScriptedToolCall("check_health", {"n": len(messages)})])
        if not any(t.startswith(SUMMARY_PREFIX) for t in texts):
            return Reply.context_overflow()
        return Reply(text="web-03 is healthy")

    llm.fallback = reply
    bot, ts, run_id = run_in_slack(make_bot, [client(llm)])
    assert bot.status(run_id) is RunStatus.COMPLETED
    assert replies(bot, ts)[-1] == "web-03 is healthy"
    assert len(bot.executions("check_health")) == 3  # nothing ran again after condensing
    history = bot.service.history(run_id)
    assert any((m.content or "").startswith(SUMMARY_PREFIX) for m in history)


@pytest.mark.parametrize("cut_after", [1, 3], ids=["before-any-text", "after-some-text"])
def test_a_truncated_stream_is_retried_and_the_answer_is_whole_once(
    llm: OpenAIServer, cut_after: int
) -> None:
    answer = "web-03 is fine and its disk is at 41 percent"
    llm.enqueue(Reply(text=answer, truncate_after=cut_after), Reply(text=answer))
    deltas: list[str] = []

    def on_event(event: Event) -> None:
        if isinstance(event, TextDelta):
            deltas.append(event.text)

    config = RunConfig(
        models=[client(llm)],
        memory=InMemoryMemory([Message.user("is web-03 ok?")]),
        tools=[],
        stream=True,
        on_event=on_event,
    )
    result = Run(config).execute()
    assert result.status is RunStatus.COMPLETED
    assert result.output == answer  # whole, and not doubled by the retry
    assert len(llm.requests) == 2 and llm.requests[0].outcome == "truncated"


def timed(reply: Reply, times: list[float]) -> Callable[[dict[str, Any]], Reply]:
    """A script item that notes when the server received its request."""

    def answer(body: dict[str, Any]) -> Reply:
        times.append(time.monotonic())
        return reply

    return answer
