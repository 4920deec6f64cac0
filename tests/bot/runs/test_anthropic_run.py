"""A whole run on the Anthropic emulator through real RQ jobs and Redis: tool use, an approval, the
resume; the cache breakpoints stay put across the run's requests, and the budget and the metrics
count cache reads and writes as the design says (paid = uncached input + cache writes + output)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest

from agent.models.anthropic_client import AnthropicClient
from agent.redis_memory import RedisMemory
from agent.types import Limits, Request, Response, RunStatus, Usage
from bot.observability.metrics import LLM_TOKENS, MetricsStore
from bot.runs.presenter import InMemoryPresenter
from emulator.models.anthropic_rules import PromptCache
from emulator.models.anthropic_server import AnthropicReply, AnthropicServer, ScriptedToolCall
from tests.support.anthropic_types import check_request
from tests.support.harness import Harness

KEY = "sk-ant-run"
PLAN_PREFIX = "plan:"


def plan_reply(body: dict[str, Any]) -> AnthropicReply:
    """Follow ``plan: tool_a tool_b`` in the first user turn: one tool per turn, then answer with
    the last tool result (read from the Anthropic-shaped history the client sent)."""
    messages = body["messages"]
    first = messages[0]["content"][0]["text"]
    plan = first.removeprefix(PLAN_PREFIX).split()
    done = sum(
        1 for m in messages if m["role"] == "assistant" and any(b["type"] == "tool_use" for b in m["content"])
    )
    if done < len(plan):
        return AnthropicReply(text=f"Step {done}.", tool_calls=[ScriptedToolCall(plan[done], {"step": done})])
    results = [b for m in messages if m["role"] == "user" for b in m["content"] if b["type"] == "tool_result"]
    return AnthropicReply(text=f"done: {results[-1]['content']}")


class Recording:
    """The client, with every answer's usage kept (to check the run's arithmetic against)."""

    def __init__(self, inner: AnthropicClient) -> None:
        self.inner = inner
        self.usages: list[Usage] = []

    @property
    def model(self) -> str:
        return self.inner.model

    def complete(self, request: Request) -> Response:
        response = self.inner.complete(request)
        self.usages.append(response.usage)
        return response

    def stream(self, request: Request) -> Any:
        raise AssertionError("the job does not stream")


@pytest.fixture
def claude() -> Iterator[AnthropicServer]:
    with AnthropicServer(api_key=KEY, fallback=plan_reply) as server:
        yield server


@pytest.fixture
def anthropic_harness(harness: Harness, claude: AnthropicServer) -> Iterator[Harness]:
    client = AnthropicClient(claude.url, KEY, "claude-test", sleep=lambda _: None)
    harness.models = [Recording(client)]
    yield harness
    client.close()


def requests_of(server: AnthropicServer) -> list[dict[str, Any]]:
    bodies = [record.body for record in server.requests]
    for body in bodies:
        check_request(body)
    return bodies


def test_tool_use_approval_and_resume_on_the_anthropic_api(
    anthropic_harness: Harness, claude: AnthropicServer
) -> None:
    harness = anthropic_harness
    run_id = harness.submit("plan: check_health restart_service")
    harness.work()
    assert harness.status(run_id) is RunStatus.AWAITING_APPROVAL
    presenter = harness.presenter
    assert isinstance(presenter, InMemoryPresenter)
    [approval] = presenter.of("ask_approval", run_id)
    assert approval.tool == "restart_service" and harness.executions("restart_service") == []

    harness.service.lifecycle.decide(approval.id, user="U_APPROVER", approve=True)
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    # The model read the result with its evidence id.
    assert presenter.of("post_answer", run_id) == ["done: [E2] restart_service ok"]
    [execution] = harness.executions("restart_service")
    assert execution["arguments"] == {"step": 1, "confirmed_by": "U_APPROVER"}

    bodies = requests_of(claude)
    assert len(bodies) == 3
    # The stable prefix is byte-identical in every request, before and after the resume.
    assert len({json.dumps([body["tools"], body["system"]]) for body in bodies}) == 1
    assert bodies[0]["system"][-1]["cache_control"] == {"type": "ephemeral"}
    # Each request marks its end and the previous request's end, so it reads what that one wrote.
    for before, after in itertools.pairwise(bodies):
        end = len(before["messages"]) - 1
        assert "cache_control" in after["messages"][end]["content"][-1]
        assert "cache_control" in after["messages"][-1]["content"][-1]
    model = harness.models[0]
    assert isinstance(model, Recording)
    first, second, third = model.usages
    assert first.cache_read_tokens == 0 and first.cache_write_tokens > 0
    assert second.cache_read_tokens == first.cache_write_tokens
    assert (
        third.cache_read_tokens == second.cache_read_tokens + second.cache_write_tokens
    )  # across the resume
    # The tool results went back as tool_result blocks, in the user turn after each tool_use.
    last = bodies[-1]["messages"]
    uses = [
        b["id"] for m in last if m["role"] == "assistant" for b in m["content"] if b["type"] == "tool_use"
    ]
    results = [
        b["tool_use_id"]
        for m in last
        if m["role"] == "user"
        for b in m["content"]
        if b["type"] == "tool_result"
    ]
    assert uses == results and len(uses) == 2


def test_the_budget_counts_cache_writes_but_not_cache_reads(
    anthropic_harness: Harness, claude: AnthropicServer
) -> None:
    harness = anthropic_harness
    run_id = harness.submit("plan: check_health check_health")
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    model = harness.models[0]
    assert isinstance(model, Recording)
    total = sum(model.usages, Usage())
    state = RedisMemory(harness.redis, harness.keys, run_id).load_state()
    assert state is not None and state.usage == total  # the run counted exactly what the API reported
    reads, writes = total.cache_read_tokens, total.cache_write_tokens
    uncached = total.prompt_tokens - reads - writes
    assert reads > 0 and writes > 0 and uncached >= 0  # the end breakpoint leaves little uncached
    assert total.paid_tokens == uncached + writes + total.completion_tokens

    # The same run again, on a cold cache (so it is billed the same): a budget of exactly its paid
    # tokens lets it finish, though its prompts with the cache reads came to more...
    assert total.prompt_tokens + total.completion_tokens > total.paid_tokens
    claude.cache = PromptCache()
    harness.options = replace(
        harness.options, limits=Limits(max_iterations=40, deadline_seconds=60, token_budget=total.paid_tokens)
    )
    enough = harness.submit("plan: check_health check_health", thread_ts="200.1")
    harness.work()
    assert harness.status(enough) is RunStatus.COMPLETED
    # ... and a budget its first answer passes makes it wait for a person before its next request
    # (``budget``: the budget card's Extend or Stop decides), having paid for that answer only.
    claude.cache = PromptCache()
    harness.options = replace(
        harness.options, limits=Limits(max_iterations=40, deadline_seconds=60, token_budget=1)
    )
    short = harness.submit("plan: check_health check_health", thread_ts="300.1")
    harness.work()
    assert harness.status(short) is RunStatus.AWAITING_BUDGET
    state = harness.service.memory(short).load_state()
    assert state is not None and 1 < state.usage.paid_tokens < total.paid_tokens


def test_cache_reads_and_writes_reach_the_metrics(anthropic_harness: Harness) -> None:
    harness = anthropic_harness
    run_id = harness.submit("plan: check_health")
    harness.work()
    assert harness.status(run_id) is RunStatus.COMPLETED
    tokens = MetricsStore(harness.redis, harness.keys).read()[LLM_TOKENS]
    model = harness.models[0]
    assert isinstance(model, Recording)
    counted = {
        kind: sum(float(v) for k, v in tokens.items() if kind in k) for kind in ("cache_write", "cache_read")
    }
    assert counted["cache_write"] == sum(usage.cache_write_tokens for usage in model.usages) > 0
