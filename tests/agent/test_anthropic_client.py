"""AnthropicClient against the Anthropic emulator over real HTTP; every request it sends is checked
against the official SDK's request types, and the emulator refuses what the API refuses."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

import pytest

from agent.chat import DonePart, StreamPart, TextPart
from agent.errors import (
    ContextOverflowError,
    RateLimitedError,
    RetriesExhaustedError,
    ServerError,
    StreamInterruptedError,
)
from agent.models.anthropic_client import AnthropicClient, messages_url
from agent.models.anthropic_wire import THINKING_FIELD
from agent.types import Message, Request, Response, ToolCall, ToolDef
from emulator.models.anthropic_server import AnthropicReply, AnthropicServer, ScriptedToolCall
from tests.support.anthropic_types import check_request

KEY = "sk-ant-test"
MODEL = "claude-test"
TOOLS = [
    ToolDef(
        name="restart_service",
        description="Restart a service.",
        parameters={"type": "object", "properties": {"name": {"type": "string"}}},
    ),
    ToolDef(name="disk_usage", description="Disk usage of a path."),
]
SYSTEM = "You are the on-call bot. " * 40


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer(api_key=KEY) as running:
        yield running


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(server: AnthropicServer, sleeps: list[float]) -> Iterator[AnthropicClient]:
    with AnthropicClient(
        server.url, KEY, MODEL, sleep=sleeps.append, rng=random.Random(3), max_attempts=3
    ) as made:
        yield made


def request(*history: Message) -> Request:
    return Request(
        model=MODEL,
        messages=[Message.system(SYSTEM), Message.user("web-03 is out of disk"), *history],
        tools=TOOLS,
    )


def bodies(server: AnthropicServer) -> list[dict[str, Any]]:
    found = [record.body for record in server.requests]
    for body in found:
        check_request(body)  # the SDK's own request types, no unknown field anywhere
    return found


def collect(parts: Iterator[StreamPart]) -> tuple[str, Response]:
    texts = []
    for part in parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, DonePart):
            return "".join(texts), part.response
    raise AssertionError("no DonePart")


def test_the_request_has_the_messages_api_shape(server: AnthropicServer, client: AnthropicClient) -> None:
    call = ToolCall(id="x00000001", name="restart_service", arguments='{"name":"nginx"}')
    failed = ToolCall(id="x00000002", name="disk_usage", arguments="{}")
    server.enqueue(AnthropicReply(text="Restarted nginx."))
    history = [
        Message.assistant("Restarting.", [call, failed]),
        Message.tool("x00000001", "nginx restarted", tool="restart_service"),
        Message.tool("x00000002", "Error: disk_usage timed out after 5.0s"),
        Message.user("thanks", slack_user="U1"),
    ]
    client.complete(request(*history))

    [body] = bodies(server)
    [sent] = server.requests
    assert sent.path == "/v1/messages"
    assert sent.headers["x-api-key"] == KEY and sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert body["system"] == [{"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral"}}]
    assert body["tools"][0] == {
        "name": "restart_service",
        "description": "Restart a service.",
        "input_schema": TOOLS[0].parameters,
    }
    assert body["max_tokens"] == 4096 and body["model"] == MODEL
    user, assistant, results = body["messages"]
    # The end of the previous request's history (before the newest assistant turn) is a breakpoint.
    assert user == {
        "role": "user",
        "content": [
            {"type": "text", "text": "web-03 is out of disk", "cache_control": {"type": "ephemeral"}}
        ],
    }
    assert assistant["content"] == [
        {"type": "text", "text": "Restarting."},
        {"type": "tool_use", "id": "x00000001", "name": "restart_service", "input": {"name": "nginx"}},
        {"type": "tool_use", "id": "x00000002", "name": "disk_usage", "input": {}},
    ]
    # One user turn: both results first (the failed one flagged), then the reply; the end is a breakpoint.
    assert [block["type"] for block in results["content"]] == ["tool_result", "tool_result", "text"]
    assert results["content"][0] == {
        "type": "tool_result",
        "tool_use_id": "x00000001",
        "content": "nginx restarted",
    }
    assert results["content"][1]["is_error"] is True
    assert results["content"][2] == {"type": "text", "text": "thanks", "cache_control": {"type": "ephemeral"}}
    assert b"U1" not in sent.raw_body  # meta stays home


def test_an_answer_with_tool_use_and_cache_usage(server: AnthropicServer, client: AnthropicClient) -> None:
    server.enqueue(
        AnthropicReply(
            text="Checking.", tool_calls=[ScriptedToolCall("disk_usage", {"path": "/"}, id="toolu_01A")]
        )
    )
    response = client.complete(request())
    message = response.message
    assert message is not None and message.content == "Checking."
    [call] = message.tool_calls
    assert (call.id, call.name, call.parsed_arguments()) == ("toolu_01A", "disk_usage", {"path": "/"})
    assert response.choices[0].finish_reason == "tool_calls"
    usage = response.usage
    assert usage.cache_write_tokens > 0 and usage.cache_read_tokens == 0
    assert usage.prompt_tokens >= usage.cache_write_tokens  # input_tokens + the cache write
    assert usage.paid_tokens == usage.prompt_tokens + usage.completion_tokens
    assert message.provider_source == client.source


def test_streaming_assembles_text_and_tool_input_deltas(
    server: AnthropicServer, client: AnthropicClient
) -> None:
    arguments = {"name": "nginx", "reason": "disk full, logs rotated"}
    server.enqueue(
        AnthropicReply(
            text="Restarting nginx now.",
            tool_calls=[ScriptedToolCall("restart_service", arguments)],
            text_chunk_size=4,
            argument_chunk_size=5,
        )
    )
    text, response = collect(client.stream(request()))
    assert text == "Restarting nginx now."
    assert response.message is not None and response.message.tool_calls[0].parsed_arguments() == arguments
    assert response.usage.completion_tokens > 1 and response.usage.cache_write_tokens > 0
    [body] = bodies(server)
    assert body["stream"] is True
    assert server.requests[0].headers["accept"] == "text/event-stream"


def test_thinking_blocks_go_back_only_to_the_endpoint_that_made_them(
    server: AnthropicServer, client: AnthropicClient
) -> None:
    server.enqueue(
        AnthropicReply(thinking="disk first", tool_calls=[ScriptedToolCall("disk_usage", {})]),
        AnthropicReply(text="ok"),
    )
    answer = client.complete(request()).message
    assert answer is not None and answer.provider_fields[THINKING_FIELD][0]["type"] == "thinking"
    stored = answer.model_copy(
        update={"tool_calls": [answer.tool_calls[0].model_copy(update={"id": "x00000001"})]}
    )
    client.complete(request(stored, Message.tool("x00000001", "12% used")))
    sent = bodies(server)[1]["messages"][1]["content"]
    assert [block["type"] for block in sent] == ["thinking", "tool_use"]
    assert sent[0]["signature"].startswith("sig-")
    foreign = stored.model_copy(update={"provider_source": "anthropic:https://elsewhere.example/v1/messages"})
    server.enqueue(AnthropicReply(text="ok"))
    client.complete(request(foreign, Message.tool("x00000001", "12% used")))
    assert [block["type"] for block in bodies(server)[2]["messages"][1]["content"]] == ["tool_use"]


def test_ids_from_another_provider_are_rewritten_to_what_anthropic_accepts(
    server: AnthropicServer, client: AnthropicClient
) -> None:
    hostile = "call:1/../../etc passwd"  # whatever a model or an older run stored
    server.enqueue(AnthropicReply(text="done"))
    client.complete(
        request(
            Message.assistant(None, [ToolCall(id=hostile, name="disk_usage")]), Message.tool(hostile, "ok")
        )
    )
    messages = bodies(server)[0]["messages"]
    use_id = messages[1]["content"][0]["id"]
    assert messages[2]["content"][0]["tool_use_id"] == use_id != hostile  # the emulator accepted the pair
    assert server.requests[0].outcome == "answered"


def test_unparsable_arguments_still_make_an_object_input(
    server: AnthropicServer, client: AnthropicClient
) -> None:
    server.enqueue(AnthropicReply(text="done"))
    bad = ToolCall(id="x1", name="disk_usage", arguments='{"path": "/"')  # a model's broken JSON
    client.complete(request(Message.assistant(None, [bad]), Message.tool("x1", "Error: invalid arguments")))
    assert bodies(server)[0]["messages"][1]["content"][0]["input"] == {"_unparsed_arguments": '{"path": "/"'}


def test_cache_breakpoints_make_each_request_read_the_last_ones_cache(
    server: AnthropicServer, client: AnthropicClient
) -> None:
    server.enqueue(*(AnthropicReply(text=f"answer {n}") for n in range(3)))
    first = client.complete(request()).usage
    call = ToolCall(id="x00000001", name="disk_usage")
    turn = [
        Message.assistant("answer 0", [call]),
        *(Message.tool("x00000001", "97% used " * 30) for _ in range(1)),
    ]
    second = client.complete(request(*turn)).usage
    third = client.complete(request(*turn, Message.assistant("answer 1"), Message.user("and now?"))).usage
    assert first.cache_read_tokens == 0 and first.cache_write_tokens > 0
    assert second.cache_read_tokens == first.cache_write_tokens  # everything the first request wrote
    assert third.cache_read_tokens == second.cache_read_tokens + second.cache_write_tokens
    sent = bodies(server)
    # The prefix (tools + system) is byte-identical, and the breakpoints stay within the API's four.
    assert len({json.dumps([body["tools"], body["system"]]) for body in sent}) == 1
    assert all(json.dumps(body).count("cache_control") <= 4 for body in sent)


def test_529_overloaded_is_retried_with_the_providers_retry_after(
    server: AnthropicServer, client: AnthropicClient, sleeps: list[float]
) -> None:
    server.enqueue(
        AnthropicReply.overloaded(retry_after=7),
        AnthropicReply.rate_limited(retry_after=2),
        AnthropicReply(text="back"),
    )
    response = client.complete(request())
    assert response.message is not None and response.message.content == "back"
    assert sleeps == [7.0, 2.0]


def test_529_without_a_hint_backs_off_and_gives_up_for_the_fallback(
    server: AnthropicServer, client: AnthropicClient, sleeps: list[float]
) -> None:
    server.enqueue(*(AnthropicReply.overloaded() for _ in range(3)))
    with pytest.raises(RetriesExhaustedError) as caught:
        client.complete(request())
    assert isinstance(caught.value.last, ServerError) and caught.value.last.status_code == 529
    assert len(sleeps) == 2 and len(server.requests) == 3


def test_prompt_too_long_is_a_context_overflow(server: AnthropicServer, client: AnthropicClient) -> None:
    server.enqueue(AnthropicReply.prompt_too_long())
    with pytest.raises(ContextOverflowError, match="prompt is too long"):
        client.complete(request())


def test_a_rate_limit_error_event_mid_stream_before_text_is_retried(
    server: AnthropicServer, client: AnthropicClient, sleeps: list[float]
) -> None:
    server.enqueue(AnthropicReply(text="partial", error_after=2), AnthropicReply(text="whole"))
    text, _ = collect(client.stream(request()))
    assert text == "whole" and len(sleeps) == 1


def test_an_error_event_after_text_is_an_interrupted_stream(
    server: AnthropicServer, client: AnthropicClient
) -> None:
    server.enqueue(AnthropicReply(text="a long partial answer", text_chunk_size=3, error_after=5))
    with pytest.raises(StreamInterruptedError, match="Overloaded"):
        collect(client.stream(request()))


def test_a_stream_cut_before_its_stop_reason_is_retried(
    server: AnthropicServer, client: AnthropicClient, sleeps: list[float]
) -> None:
    server.enqueue(
        AnthropicReply(tool_calls=[ScriptedToolCall("disk_usage", {})], truncate_after=4),
        AnthropicReply(text="ok"),
    )
    text, _ = collect(client.stream(request()))
    assert text == "ok" and len(sleeps) == 1


def test_a_bad_key_is_a_provider_error_not_retried(server: AnthropicServer, sleeps: list[float]) -> None:
    with (
        AnthropicClient(server.url, "sk-wrong", MODEL, sleep=sleeps.append) as client,
        pytest.raises(Exception) as caught,
    ):
        client.complete(request())
    assert getattr(caught.value, "status_code", None) == 401 and sleeps == []
    assert not isinstance(caught.value, RateLimitedError)


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("https://api.anthropic.com", "https://api.anthropic.com/v1/messages"),
        ("https://gateway.example/anthropic/v1/", "https://gateway.example/anthropic/v1/messages"),
        ("https://gateway.example/v1/messages", "https://gateway.example/v1/messages"),
    ],
)
def test_the_messages_url(base: str, expected: str) -> None:
    assert str(messages_url(base)) == expected


def test_a_thinking_block_goes_back_with_only_the_apis_fields() -> None:
    from agent.models.anthropic_wire import parse_response

    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [
            {
                "type": "thinking",
                "thinking": "t",
                "signature": "s",
                "cache_control": {"type": "ephemeral"},
                "x": 1,
            },
            {"type": "tool_use", "id": "toolu_1", "name": "disk_usage", "input": {}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    message = parse_response(json.dumps(answer)).message
    assert message is not None
    assert message.provider_fields[THINKING_FIELD] == [
        {"type": "thinking", "thinking": "t", "signature": "s"}
    ]
