"""Retries: which statuses, whose wait hints (every header providers and gateways use), the
ceiling, the per-request budget and the run's deadline."""

from __future__ import annotations

import random
from collections.abc import Iterator
from email.utils import formatdate
from typing import Any

import pytest

from agent.config import RunConfig
from agent.errors import RetriesExhaustedError, ServerError
from agent.memory import InMemoryMemory
from agent.models.openai_client import LLMClient
from agent.models.retry import RetryBudget, RetryPolicy, retry_after_hint
from agent.run import Run
from agent.types import Limits, Message, Request, RunStatus
from emulator.models.openai_server import OpenAIServer, Reply
from tests.support.fake_provider import FakeProvider, forwarding

NOW = 1_800_000_000.0
REQUEST = Request(model="m", messages=[Message.user("is web healthy?")])


class CeilingRandom(random.Random):
    def uniform(self, a: float, b: float) -> float:
        return b


class FakeClock:
    """A monotonic clock that the client's sleeps move forward."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(model="m") as running:
        yield running


def root(server: OpenAIServer) -> str:
    return server.url.removesuffix("/v1")


def make(url: str, clock: FakeClock, **options: Any) -> LLMClient:
    return LLMClient(url, "sk", "m", sleep=clock.sleep, monotonic=clock, rng=CeilingRandom(), **options)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"Retry-After": "7"}, 7.0),
        ({"Retry-After": formatdate(NOW + 30, usegmt=True)}, 30.0),
        ({"llm_provider-retry-after": "12"}, 12.0),  # LiteLLM's proxy passes the provider's on
        ({"x-ratelimit-reset-requests": "1m30.5s", "x-ratelimit-remaining-requests": "0"}, 90.5),
        ({"x-ratelimit-reset-tokens": "20ms"}, 0.02),
        (  # the exhausted limit decides, not the sooner one
            {
                "x-ratelimit-reset-requests": "2s",
                "x-ratelimit-remaining-requests": "5",
                "x-ratelimit-reset-tokens": "45s",
                "x-ratelimit-remaining-tokens": "0",
            },
            45.0,
        ),
        (
            {
                "anthropic-ratelimit-tokens-reset": "2027-01-15T08:00:20Z",
                "anthropic-ratelimit-tokens-remaining": "0",
            },
            20.0,
        ),
        ({"x-ratelimit-reset": str(int(NOW + 8))}, 8.0),  # a Unix time
        ({"Retry-After": "-5"}, 0.0),
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": "nan"}, None),
        ({"x-ratelimit-reset-requests": "1m30s; drop table"}, None),
        ({}, None),
    ],
)
def test_wait_hints_from_every_header_providers_use(headers: dict[str, str], expected: float | None) -> None:
    hint = retry_after_hint(headers, now=NOW)  # NOW is 2027-01-15T08:00:00Z
    if expected is None:
        assert hint is None
    else:
        assert hint == pytest.approx(expected)


@pytest.mark.parametrize("status", [408, 409, 425, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529])
def test_transient_statuses_are_retried(server: OpenAIServer, status: int) -> None:
    server.enqueue(Reply.error(status, "try again", type="server_error"), Reply(text="ok"))
    clock = FakeClock()
    with make(server.url, clock) as client:
        answer = client.complete(REQUEST)
    assert answer.message is not None and answer.message.content == "ok"
    assert len(clock.sleeps) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_client_errors_are_not_retried(server: OpenAIServer, status: int) -> None:
    server.enqueue(Reply.error(status, "no"))
    clock = FakeClock()
    with make(server.url, clock) as client, pytest.raises(Exception) as caught:
        client.complete(REQUEST)
    assert getattr(caught.value, "status_code", None) == status and clock.sleeps == []


def test_azures_retry_after_60_is_waited_out(server: OpenAIServer) -> None:
    server.enqueue(Reply.rate_limited(retry_after=60), Reply(text="ok"))
    clock = FakeClock()
    with make(server.url, clock) as client:
        assert client.complete(REQUEST).message is not None
    assert clock.sleeps == [60.0]


def test_the_hint_ceiling_is_configurable(server: OpenAIServer) -> None:
    server.enqueue(Reply.rate_limited(retry_after=90), Reply(text="ok"))
    clock = FakeClock()
    with make(server.url, clock, max_retry_wait=120) as client:
        assert client.complete(REQUEST).message is not None
    assert clock.sleeps == [90.0]


def test_behind_a_proxy_that_drops_retry_after_the_retries_back_off_exponentially(
    server: OpenAIServer,
) -> None:
    server.enqueue(*(Reply.rate_limited(retry_after=30) for _ in range(4)), Reply(text="ok"))
    clock = FakeClock()
    with (
        FakeProvider(forwarding(root(server), drop_headers=["retry-after"])) as proxy,
        make(proxy.url + "/v1", clock) as client,
    ):
        assert client.complete(REQUEST).message is not None
    assert clock.sleeps == [1.0, 2.0, 4.0, 8.0]  # full jitter's ceilings: spread over 15 s, not 1 s


def test_a_proxy_dropping_retry_after_really_drops_it(server: OpenAIServer) -> None:
    import httpx

    server.enqueue(Reply.rate_limited(retry_after=30))
    with FakeProvider(forwarding(root(server), drop_headers=["retry-after"])) as proxy:
        answer = httpx.post(proxy.url + "/v1/chat/completions", json={"model": "m", "messages": []})
    assert answer.status_code == 429 and "retry-after" not in answer.headers


def test_the_providers_hint_is_read_under_litellms_prefix(server: OpenAIServer) -> None:
    server.enqueue(Reply.rate_limited(retry_after=5), Reply(text="ok"))
    clock = FakeClock()
    proxy_handler = forwarding(root(server), drop_headers=["retry-after"], prefix="llm_provider-")
    with FakeProvider(proxy_handler) as proxy, make(proxy.url + "/v1", clock) as client:
        assert client.complete(REQUEST).message is not None
    assert clock.sleeps == [5.0]


def test_retries_stop_at_the_requests_time_budget(server: OpenAIServer) -> None:
    server.enqueue(*(Reply.server_error(503) for _ in range(6)))
    clock = FakeClock()
    with (
        make(server.url, clock, max_attempts=10, retry_budget=10.0) as client,
        pytest.raises(RetriesExhaustedError) as caught,
    ):
        client.complete(REQUEST)
    assert clock.sleeps == [1.0, 2.0, 4.0]  # the next (8 s) would pass the 10 s budget
    assert "time budget" in caught.value.message and isinstance(caught.value.last, ServerError)


def test_retries_never_wait_past_the_runs_deadline(server: OpenAIServer) -> None:
    server.enqueue(Reply.rate_limited(retry_after=30), Reply(text="too late"))
    clock = FakeClock()
    with make(server.url, clock) as client, pytest.raises(RetriesExhaustedError):
        client.complete(REQUEST.model_copy(update={"time_left": 20.0}))
    assert clock.sleeps == []


def test_a_run_hands_its_time_left_to_the_client(server: OpenAIServer) -> None:
    server.enqueue(Reply.rate_limited(retry_after=45), Reply(text="too late"))
    clock = FakeClock()
    with make(server.url, clock) as client:
        memory = InMemoryMemory([Message.user("is web healthy?")])
        result = Run(RunConfig(models=[client], memory=memory, limits=Limits(deadline_seconds=30))).execute()
    assert result.status is RunStatus.FAILED and clock.sleeps == []  # 45 s would pass the 30 s deadline


def test_jitter_is_full_and_capped() -> None:
    policy = RetryPolicy(backoff_base=1.0, backoff_max=5.0)
    rolls = [policy.jitter(attempt, random.Random(seed)) for seed in range(50) for attempt in (1, 4, 9)]
    assert all(0.0 <= roll <= 5.0 for roll in rolls) and min(rolls) < 0.5
    budget = RetryBudget(policy, rng=CeilingRandom(), monotonic=lambda: 0.0, time_left=3.0)
    assert budget.remaining() == 3.0
