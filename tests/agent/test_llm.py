"""LLMClient against the scripted OpenAI-compatible server, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Iterator
from email.utils import formatdate
from typing import Any

import pytest

from agent.chat import DonePart, StreamPart, TextPart
from agent.errors import (
    ConfigurationError,
    ContextOverflowError,
    LLMTimeoutError,
    MalformedResponseError,
    ProviderError,
    RateLimitedError,
    RetriesExhaustedError,
    ServerError,
    StreamInterruptedError,
)
from agent.models.openai_client import LLMClient, parse_retry_after
from agent.types import Message, Request, Response, ToolDef
from emulator.models.openai_server import OpenAIServer, Reply, ScriptedToolCall, ScriptedUsage
from tests.support.waiting import wait_until

MODEL = "gpt-test"
REQUEST = Request(
    model=MODEL,
    messages=[Message.system("You are the on-call bot."), Message.user("is web healthy?", slack_user="U123")],
    tools=[ToolDef(name="list_pods", description="List pods in a namespace.")],
)


class CeilingRandom(random.Random):
    """Dice that always roll the top of the range, so the jitter's ceiling is visible."""

    def uniform(self, a: float, b: float) -> float:
        return b


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer(model=MODEL) as running:
        yield running


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(server: OpenAIServer, sleeps: list[float]) -> Iterator[LLMClient]:
    with make_client(server.url, sleeps) as made:
        yield made


def make_client(url: str, sleeps: list[float], **options: Any) -> LLMClient:
    settings: dict[str, Any] = {
        "connect_timeout": 1.0,
        "read_timeout": 2.0,
        "sleep": sleeps.append,
        "rng": random.Random(7),
        "max_attempts": 3,
    }
    settings.update(options)
    return LLMClient(url, "sk-test", MODEL, **settings)


def collect(parts: Iterator[StreamPart]) -> tuple[list[str], Response]:
    texts: list[str] = []
    for part in parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
        else:
            assert isinstance(part, DonePart)
            return texts, part.response
    raise AssertionError("the stream ended without a DonePart")


# --- happy paths ----------------------------------------------------------------------------


def test_complete_returns_tool_calls_and_usage(server: OpenAIServer, client: LLMClient) -> None:
    server.enqueue(
        Reply(
            tool_calls=[ScriptedToolCall("list_pods", {"namespace": "web"}, id="call_pods")],
            usage=ScriptedUsage(prompt_tokens=1200, completion_tokens=20, cached_tokens=1024),
        )
    )

    response = client.complete(REQUEST)

    assert response.message is not None
    [call] = response.message.tool_calls
    assert (call.id, call.name, call.parsed_arguments()) == ("call_pods", "list_pods", {"namespace": "web"})
    assert response.choices[0].finish_reason == "tool_calls"
    assert response.usage.cache_read_tokens == 1024
    assert response.usage.paid_tokens == 1200 - 1024 + 20


def test_requests_go_to_chat_completions_with_the_key_and_the_clients_model(
    server: OpenAIServer, sleeps: list[float]
) -> None:
    server.enqueue(Reply(text="hi"))
    with make_client(server.url + "/", sleeps, extra_headers={"X-Tenant": "ops"}) as client:
        client.complete(REQUEST.model_copy(update={"model": "something-else"}))

    [sent] = server.requests
    assert (sent.method, sent.path) == ("POST", "/v1/chat/completions")
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["content-type"] == "application/json"
    assert sent.headers["x-tenant"] == "ops"
    assert sent.body["model"] == MODEL
    assert "stream" not in sent.body


def test_no_authorization_header_without_a_key(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="hi"))
    with LLMClient(server.url, None, MODEL) as client:
        client.complete(REQUEST)
    assert "authorization" not in server.requests[0].headers


def test_the_wire_body_is_deterministic_and_never_carries_meta(
    server: OpenAIServer, client: LLMClient
) -> None:
    server.enqueue(Reply(text="one"), Reply(text="two"))
    client.complete(REQUEST)
    client.complete(REQUEST)

    first, second = (sent.raw_body for sent in server.requests)
    assert first == second
    assert b"U123" not in first
    assert b"meta" not in first


def test_stream_yields_text_then_whole_tool_calls_and_usage_from_the_last_chunk(
    server: OpenAIServer, client: LLMClient
) -> None:
    arguments = '{"namespace": "web", "selector": "app=frontend"}'
    server.enqueue(
        Reply(
            text="Checking the pods now.",
            tool_calls=[
                ScriptedToolCall("list_pods", arguments),
                ScriptedToolCall("list_pods", '{"namespace": "db"}'),
            ],
            argument_chunk_size=4,
            usage=ScriptedUsage(prompt_tokens=300, completion_tokens=40, cached_tokens=256),
        )
    )

    texts, response = collect(client.stream(REQUEST))

    assert "".join(texts) == "Checking the pods now."
    assert len(texts) > 1
    assert response.message is not None
    assert [call.arguments for call in response.message.tool_calls] == [arguments, '{"namespace": "db"}']
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (300, 40)
    assert response.usage.cache_read_tokens == 256
    sent = server.requests[0].body
    assert (sent["stream"], sent["stream_options"]) == (True, {"include_usage": True})
    assert server.requests[0].headers["accept"] == "text/event-stream"


# --- transient failures: retried ------------------------------------------------------------


def test_429_waits_for_retry_after_then_succeeds(
    server: OpenAIServer, client: LLMClient, sleeps: list[float]
) -> None:
    server.enqueue(Reply.rate_limited(retry_after=2), Reply(text="ok"))

    assert client.complete(REQUEST).message.content == "ok"
    assert sleeps == [2.0]
    assert len(server.requests) == 2


def test_retry_after_as_an_http_date_is_honoured(
    server: OpenAIServer, client: LLMClient, sleeps: list[float]
) -> None:
    # 30 s ahead: the date is read against the clock when the answer arrives, however long that takes
    server.enqueue(
        Reply.rate_limited(retry_after=formatdate(time.time() + 30, usegmt=True)), Reply(text="ok")
    )
    client.complete(REQUEST)
    [waited] = sleeps
    assert 15.0 < waited <= 30.0


def test_retry_after_beyond_the_jitter_cap_is_honoured_in_full(
    server: OpenAIServer, sleeps: list[float]
) -> None:
    server.enqueue(Reply.rate_limited(retry_after=45), Reply(text="ok"))
    with make_client(server.url, sleeps, backoff_max=4.0) as client:
        client.complete(REQUEST)
    assert sleeps == [45.0]  # an Azure "retry after 45 s" is waited out, not cut to the jitter's cap


def test_retry_after_over_the_ceiling_gives_up_at_once_so_a_fallback_takes_over(
    server: OpenAIServer, sleeps: list[float]
) -> None:
    server.enqueue(Reply.rate_limited(retry_after=3600), Reply(text="ok"))
    with (
        make_client(server.url, sleeps, max_retry_wait=60.0) as client,
        pytest.raises(RetriesExhaustedError) as caught,
    ):
        client.complete(REQUEST)
    assert sleeps == [] and len(server.requests) == 1
    assert "3600s, more than the 60s ceiling" in caught.value.message


def test_500_is_retried_after_a_jittered_backoff(
    server: OpenAIServer, client: LLMClient, sleeps: list[float]
) -> None:
    server.enqueue(Reply.server_error(500), Reply(text="recovered"))

    assert client.complete(REQUEST).message.content == "recovered"
    [waited] = sleeps
    assert 0.0 <= waited <= 1.0


def test_backoff_doubles_up_to_its_cap_and_then_retries_are_exhausted(
    server: OpenAIServer, sleeps: list[float]
) -> None:
    server.enqueue(*(Reply.server_error(status) for status in (500, 502, 503, 504)))
    options = {"max_attempts": 4, "backoff_base": 1.0, "backoff_max": 3.0, "rng": CeilingRandom()}
    with make_client(server.url, sleeps, **options) as client, pytest.raises(RetriesExhaustedError) as caught:
        client.complete(REQUEST)

    assert sleeps == [1.0, 2.0, 3.0]
    assert isinstance(caught.value.last, ServerError)
    assert caught.value.last.status_code == 504
    assert caught.value.model == MODEL


def test_three_500s_exhaust_the_retries(server: OpenAIServer, client: LLMClient, sleeps: list[float]) -> None:
    server.enqueue(Reply.server_error(), Reply.server_error(), Reply.server_error(), Reply(text="too late"))

    with pytest.raises(RetriesExhaustedError) as caught:
        client.complete(REQUEST)

    assert caught.value.model == MODEL
    assert isinstance(caught.value.last, ServerError)
    assert "had an error while processing" in caught.value.message
    assert len(server.requests) == 3
    assert len(sleeps) == 2


def test_a_read_timeout_is_retried(server: OpenAIServer, sleeps: list[float]) -> None:
    server.enqueue(Reply(text="too slow", delay=1.0), Reply(text="on time"))
    with make_client(server.url, sleeps, read_timeout=0.1) as client:
        assert client.complete(REQUEST).message.content == "on time"
    assert len(server.requests) == 2
    assert len(sleeps) == 1


def test_a_refused_connection_is_transient(sleeps: list[float]) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with (
        make_client(f"http://127.0.0.1:{port}/v1", sleeps, max_attempts=2) as client,
        pytest.raises(RetriesExhaustedError) as caught,
    ):
        client.complete(REQUEST)
    assert caught.value.model == MODEL
    assert len(sleeps) == 1


@pytest.mark.parametrize("empty", [Reply(empty_choices=True), Reply(text=None)])
def test_an_empty_answer_is_retried(server: OpenAIServer, client: LLMClient, empty: Reply) -> None:
    server.enqueue(empty, Reply(text="here it is"))
    assert client.complete(REQUEST).message.content == "here it is"
    assert len(server.requests) == 2


def test_an_empty_stream_is_retried(server: OpenAIServer, client: LLMClient) -> None:
    server.enqueue(Reply(empty_choices=True), Reply(text="here it is"))
    texts, _ = collect(client.stream(REQUEST))
    assert "".join(texts) == "here it is"
    assert len(server.requests) == 2


@pytest.mark.parametrize("close_delimited", [False, True], ids=["chunked-dropped", "eof-without-done"])
def test_a_stream_cut_before_any_text_is_retried(
    server: OpenAIServer, client: LLMClient, sleeps: list[float], close_delimited: bool
) -> None:
    server.enqueue(
        Reply(text="lost", truncate_after=1, close_delimited=close_delimited), Reply(text="whole answer")
    )

    texts, response = collect(client.stream(REQUEST))

    assert "".join(texts) == "whole answer"
    assert response.choices[0].finish_reason == "stop"
    assert server.requests[0].outcome == "truncated"
    assert len(sleeps) == 1


def test_a_stream_cut_after_text_raises_stream_interrupted(server: OpenAIServer, client: LLMClient) -> None:
    server.enqueue(Reply(text="one two three four", truncate_after=3), Reply(text="never asked"))
    texts: list[str] = []

    with pytest.raises(StreamInterruptedError) as caught:
        for part in client.stream(REQUEST):
            assert isinstance(part, TextPart)
            texts.append(part.text)

    assert texts == ["one ", "two "]
    assert caught.value.model == MODEL
    assert len(server.requests) == 1


def test_a_stream_that_fails_before_text_exhausts_retries_like_complete(
    server: OpenAIServer, client: LLMClient
) -> None:
    server.enqueue(Reply.server_error(503), Reply.rate_limited(0), Reply(text="x", truncate_after=0))
    with pytest.raises(RetriesExhaustedError) as caught:
        collect(client.stream(REQUEST))
    assert caught.value.model == MODEL
    assert len(server.requests) == 3


# --- non-transient failures: raised at once -------------------------------------------------


def test_malformed_json_is_not_retried(server: OpenAIServer, client: LLMClient) -> None:
    server.enqueue(Reply(malformed=True), Reply(text="never asked"))
    with pytest.raises(MalformedResponseError) as caught:
        client.complete(REQUEST)
    assert caught.value.model == MODEL
    assert len(server.requests) == 1


def test_a_malformed_stream_chunk_is_not_retried(server: OpenAIServer, client: LLMClient) -> None:
    server.enqueue(Reply(text="x", malformed=True), Reply(text="never asked"))
    with pytest.raises(MalformedResponseError):
        collect(client.stream(REQUEST))
    assert len(server.requests) == 1


@pytest.mark.parametrize("streaming", [False, True], ids=["complete", "stream"])
def test_401_is_a_provider_error_with_the_providers_message(
    server: OpenAIServer, client: LLMClient, sleeps: list[float], streaming: bool
) -> None:
    server.enqueue(
        Reply.error(401, "Incorrect API key provided: sk-test.", code="invalid_api_key"), Reply(text="no")
    )

    with pytest.raises(ProviderError) as caught:
        client.complete(REQUEST) if not streaming else collect(client.stream(REQUEST))

    assert caught.value.message == "Incorrect API key provided: sk-test."
    assert (caught.value.status_code, caught.value.model) == (401, MODEL)
    assert len(server.requests) == 1
    assert sleeps == []


@pytest.mark.parametrize(
    "overflow",
    [
        Reply.context_overflow(limit=8192, requested=9100),
        Reply.error(
            400, "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens."
        ),
        Reply.error(413, "Request too large"),
    ],
    ids=["openai", "vllm", "http-413"],
)
def test_context_overflow_is_its_own_error_and_not_retried(
    server: OpenAIServer, client: LLMClient, overflow: Reply
) -> None:
    server.enqueue(overflow, Reply(text="never asked"))
    with pytest.raises(ContextOverflowError) as caught:
        client.complete(REQUEST)
    assert caught.value.model == MODEL
    assert len(server.requests) == 1


def test_rate_limit_error_keeps_the_hint_when_retries_run_out(
    server: OpenAIServer, sleeps: list[float]
) -> None:
    server.enqueue(Reply.rate_limited(retry_after=1.5))
    with (
        make_client(server.url, sleeps, max_attempts=1) as client,
        pytest.raises(RetriesExhaustedError) as caught,
    ):
        client.complete(REQUEST)
    assert isinstance(caught.value.last, RateLimitedError)
    assert caught.value.last.retry_after == 1.5
    assert caught.value.status_code == 429


# --- releasing the connection ---------------------------------------------------------------


def test_closing_a_stream_early_releases_the_connection(server: OpenAIServer, client: LLMClient) -> None:
    server.enqueue(Reply(text="x" * 400, text_chunk_size=1, chunk_delay=0.01), Reply(text="next"))

    parts = client.stream(REQUEST)
    assert isinstance(next(parts), TextPart)
    parts.close()  # what the loop does to cancel a degenerate stream

    wait_until(
        lambda: server.requests[0].outcome == "client_disconnected", what="the server to see the close"
    )
    assert client.complete(REQUEST).message.content == "next"


def test_a_completed_stream_leaves_the_connection_reusable(server: OpenAIServer, client: LLMClient) -> None:
    server.enqueue(Reply(text="first"), Reply(text="second"))
    collect(client.stream(REQUEST))
    collect(client.stream(REQUEST))
    first, second = server.requests
    assert (first.outcome, second.outcome) == ("answered", "answered")
    assert first.client_port == second.client_port


# --- configuration and helpers --------------------------------------------------------------


@pytest.mark.parametrize("options", [{"base_url": "localhost:8000/v1"}, {"model": ""}, {"max_attempts": 0}])
def test_misconfiguration_is_refused_at_construction(options: dict[str, Any]) -> None:
    settings: dict[str, Any] = {"base_url": "http://127.0.0.1:1/v1", "api_key": None, "model": MODEL}
    settings.update(options)
    with pytest.raises(ConfigurationError):
        LLMClient(**settings)


def test_timeout_errors_name_the_model(server: OpenAIServer, sleeps: list[float]) -> None:
    server.enqueue(Reply(text="slow", delay=1.0))
    with (
        make_client(server.url, sleeps, read_timeout=0.05, max_attempts=1) as client,
        pytest.raises(RetriesExhaustedError) as caught,
    ):
        client.complete(REQUEST)
    assert isinstance(caught.value.last, LLMTimeoutError)
    assert caught.value.last.model == MODEL


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after": "0.25"}, 0.25),
        ({"Retry-After": "-3"}, 0.0),
        ({"retry-after-ms": "1500", "Retry-After": "9"}, 1.5),
        ({"Retry-After": "Wed, 21 Oct 2015 07:28:10 GMT"}, 10.0),
        ({"Retry-After": "Wed, 21 Oct 2015 07:27:00 GMT"}, 0.0),
        ({"Retry-After": "soon"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    now = 1445412480.0  # Wed, 21 Oct 2015 07:28:00 GMT
    assert parse_retry_after(headers, now=now) == expected
