"""The Anthropic emulator speaks the real protocol: its answers pass the official SDK's types (and
the SDK's own client), it refuses what the API refuses, and its prompt cache behaves like one."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from agent.models.sse import iter_sse_events
from emulator.models.anthropic_server import AnthropicReply, AnthropicServer, ScriptedToolCall
from tests.support.anthropic_types import check_event, check_message

KEY = "sk-ant-emulator"
HEADERS = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
TOOLS = [
    {"name": "disk_usage", "description": "Disk usage.", "input_schema": {"type": "object", "properties": {}}}
]


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    with AnthropicServer(api_key=KEY) as running:
        yield running


def body(**overrides: Any) -> dict[str, Any]:
    return {
        "model": "claude-test",
        "max_tokens": 256,
        "messages": [{"role": "user", "content": "hi"}],
        **overrides,
    }


def post(
    server: AnthropicServer, payload: dict[str, Any], headers: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/messages", json=payload, headers=HEADERS if headers is None else headers
    )


def test_a_json_answer_is_a_valid_sdk_message(server: AnthropicServer) -> None:
    server.enqueue(
        AnthropicReply(
            thinking="check disk",
            text="Checking.",
            tool_calls=[ScriptedToolCall("disk_usage", {"path": "/"})],
        )
    )
    answer = post(server, body(tools=TOOLS))
    assert answer.status_code == 200
    message = check_message(answer.json())
    assert [block.type for block in message.content] == ["thinking", "text", "tool_use"]
    assert message.stop_reason == "tool_use"
    assert message.usage.input_tokens > 0 and message.usage.output_tokens > 0


def test_every_streamed_event_is_a_valid_sdk_event(server: AnthropicServer) -> None:
    server.enqueue(
        AnthropicReply(text="Disk is fine.", tool_calls=[ScriptedToolCall("disk_usage", {"path": "/"})])
    )
    with httpx.stream(
        "POST", f"{server.url}/v1/messages", json=body(stream=True, tools=TOOLS), headers=HEADERS
    ) as answer:
        events = list(iter_sse_events(answer.iter_bytes()))
    names = [event.event for event in events]
    assert names[0] == "message_start" and names[-1] == "message_stop" and "ping" in names
    for event in events:
        data = json.loads(event.data)
        assert data["type"] == event.event
        check_event(data)


def test_a_mid_stream_error_event_is_a_valid_sdk_error(server: AnthropicServer) -> None:
    server.enqueue(AnthropicReply(text="partial", error_after=3))
    with httpx.stream("POST", f"{server.url}/v1/messages", json=body(stream=True), headers=HEADERS) as answer:
        events = list(iter_sse_events(answer.iter_bytes()))
    assert events[-1].event == "error"
    check_event(json.loads(events[-1].data))


def test_the_official_sdk_client_reads_the_emulator(server: AnthropicServer) -> None:
    server.enqueue(
        AnthropicReply(text="All good.", tool_calls=[ScriptedToolCall("disk_usage", {"path": "/var"})]),
        AnthropicReply(text="Streamed answer, word by word.", text_chunk_size=5),
    )
    client = anthropic.Anthropic(base_url=server.url, api_key=KEY, max_retries=0)
    message = client.messages.create(
        model="claude-test",
        max_tokens=64,
        messages=[{"role": "user", "content": "disk?"}],
        tools=TOOLS,  # type: ignore[list-item]
    )
    assert message.content[1].type == "tool_use" and message.content[1].input == {"path": "/var"}
    with client.messages.stream(
        model="claude-test", max_tokens=64, messages=[{"role": "user", "content": "go"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Streamed answer, word by word." and final.stop_reason == "end_turn"


def test_errors_have_the_apis_shape_and_headers(server: AnthropicServer) -> None:
    server.enqueue(AnthropicReply.overloaded(retry_after=3))
    answer = post(server, body())
    assert answer.status_code == 529 and answer.headers["retry-after"] == "3"
    error = anthropic.types.ErrorResponse.model_validate(answer.json())
    assert error.error.type == "overloaded_error"


@pytest.mark.parametrize(
    ("payload", "headers", "complaint"),
    [
        (body(), {"anthropic-version": "2023-06-01"}, "invalid x-api-key"),
        (body(), {"x-api-key": KEY}, "anthropic-version"),
        ({k: v for k, v in body().items() if k != "max_tokens"}, None, "max_tokens"),
        (body(top_k_typo=1), None, "Extra inputs"),
        (
            body(messages=[{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]),
            None,
            "alternate",
        ),
        (
            body(messages=[{"role": "user", "content": [{"type": "text", "text": " "}]}]),
            None,
            "non-whitespace",
        ),
        (
            body(
                messages=[
                    {"role": "user", "content": "a"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "call.1", "name": "f", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "call.1", "content": "x"}],
                    },
                ]
            ),
            None,
            "pattern",
        ),
        (
            body(
                messages=[
                    {"role": "user", "content": "a"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
                    },
                    {
                        "role": "user",
                        "content": [
                            {"type": "text", "text": "and"},
                            {"type": "tool_result", "tool_use_id": "t1", "content": "x"},
                        ],
                    },
                ]
            ),
            None,
            "must come first",
        ),
        (
            body(
                messages=[
                    {"role": "user", "content": "a"},
                    {
                        "role": "assistant",
                        "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
                    },
                    {"role": "user", "content": "no result"},
                ]
            ),
            None,
            "without tool_result",
        ),
        (
            body(
                messages=[
                    {
                        "role": "user",
                        "content": [{"type": "tool_result", "tool_use_id": "t9", "content": "x"}],
                    }
                ]
            ),
            None,
            "unexpected tool_use_id",
        ),
        (
            body(
                system=[
                    {"type": "text", "text": f"s{i}", "cache_control": {"type": "ephemeral"}}
                    for i in range(5)
                ]
            ),
            None,
            "maximum of 4",
        ),
        (
            body(tools=[{"name": "bad name", "description": "", "input_schema": {"type": "object"}}]),
            None,
            "pattern",
        ),
    ],
)
def test_requests_the_api_refuses_are_refused(
    server: AnthropicServer, payload: dict[str, Any], headers: dict[str, str] | None, complaint: str
) -> None:
    server.enqueue(AnthropicReply(text="should not be used"))
    answer = post(server, payload, headers)
    assert answer.status_code in (400, 401)
    assert complaint in answer.json()["error"]["message"]


def test_the_cache_reads_what_an_earlier_request_wrote_up_to_a_breakpoint(server: AnthropicServer) -> None:
    system = [{"type": "text", "text": "You are ops. " * 50, "cache_control": {"type": "ephemeral"}}]
    first = body(system=system, messages=[{"role": "user", "content": "q1"}])
    second = body(
        system=system,
        messages=[
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "a1"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "q2", "cache_control": {"type": "ephemeral"}}],
            },
        ],
    )
    server.enqueue(AnthropicReply(text="a1"), AnthropicReply(text="a2"), AnthropicReply(text="a3"))
    one = post(server, first).json()["usage"]
    two = post(server, second).json()["usage"]
    three = post(server, second).json()["usage"]
    assert one["cache_read_input_tokens"] == 0 and one["cache_creation_input_tokens"] > 0
    assert two["cache_read_input_tokens"] == one["cache_creation_input_tokens"]  # the system prompt
    assert two["cache_creation_input_tokens"] > 0  # the history up to q2
    assert three["cache_creation_input_tokens"] == 0
    assert (
        three["cache_read_input_tokens"]
        == two["cache_read_input_tokens"] + two["cache_creation_input_tokens"]
    )
    changed = json.loads(json.dumps(second))
    changed["system"][0]["text"] += "!"
    server.enqueue(AnthropicReply(text="a4"))
    assert post(server, changed).json()["usage"]["cache_read_input_tokens"] == 0  # one byte changed: a miss
