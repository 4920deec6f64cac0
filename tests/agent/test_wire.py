"""The Chat Completions wire format: what we send and how we read what comes back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.errors import (
    ConfigurationError,
    ContextOverflowError,
    MalformedResponseError,
    ProviderError,
    RateLimitedError,
    ServerError,
)
from agent.models.openai_wire import (
    encode_request,
    error_for_status,
    error_from_payload,
    parse_response,
    request_body,
)
from agent.types import Message, Request, ToolCall, ToolDef

TOOLS = [
    ToolDef(
        name="restart_service",
        description="Restart a service.",
        parameters={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
    ),
    ToolDef(name="list_pods", description="List pods."),
]


def make_request(*extra: Message) -> Request:
    return Request(
        model="gpt-test",
        messages=[
            Message.system("You are the on-call bot."),
            Message.user("restart web", slack_ts="17.1"),
            *extra,
        ],
        tools=TOOLS,
    )


def wire_messages(request: Request) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = json.loads(encode_request(request))["messages"]
    return messages


# --- requests -------------------------------------------------------------------------------


def test_messages_have_the_api_shape_and_no_empty_fields() -> None:
    call = ToolCall(id="call_1", name="restart_service", arguments='{"name":"web"}')
    request = make_request(
        Message.assistant(tool_calls=[call]), Message.tool("call_1", "restarted", tool="x")
    )

    assert wire_messages(request) == [
        {"role": "system", "content": "You are the on-call bot."},
        {"role": "user", "content": "restart web"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "restart_service", "arguments": '{"name":"web"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "restarted"},
    ]


def test_meta_never_reaches_the_wire() -> None:
    request = make_request(Message.tool("call_1", "ok", secret_marker="do-not-send"))
    request.messages[1].meta["inbox"] = "redirect-inbox-marker"

    encoded = encode_request(request)

    assert b"meta" not in encoded
    assert b"do-not-send" not in encoded
    assert b"redirect-inbox-marker" not in encoded


def test_assistant_text_without_tool_calls_sends_no_tool_calls_key() -> None:
    assert wire_messages(make_request(Message.assistant("done")))[-1] == {
        "role": "assistant",
        "content": "done",
    }


def test_name_is_sent_only_when_set() -> None:
    named = Message(role="user", content="hi", name="alice")
    assert wire_messages(make_request(named))[-1] == {"role": "user", "content": "hi", "name": "alice"}


def test_tools_have_the_function_shape() -> None:
    body = request_body(make_request())
    assert body["tools"][0] == {
        "type": "function",
        "function": {
            "name": "restart_service",
            "description": "Restart a service.",
            "parameters": {
                "type": "object",
                "properties": {"name": {"type": "string"}},
                "required": ["name"],
            },
        },
    }
    assert body["tools"][1]["function"]["parameters"] == {"type": "object", "properties": {}}


def test_optional_fields_are_omitted_until_set() -> None:
    bare = request_body(Request(model="m", messages=[Message.user("hi")]))
    assert set(bare) == {"model", "messages"}

    tuned = request_body(Request(model="m", messages=[Message.user("hi")], temperature=0.0, max_tokens=50))
    assert tuned["temperature"] == 0.0
    assert tuned["max_completion_tokens"] == 50 and "max_tokens" not in tuned  # refused by reasoning models


def test_stream_asks_for_the_usage_chunk() -> None:
    body = request_body(make_request(), stream=True)
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


def test_the_same_request_always_encodes_to_the_same_bytes() -> None:
    assert encode_request(make_request()) == encode_request(make_request())


def test_system_prompt_and_tools_are_byte_identical_as_history_grows() -> None:
    first = encode_request(make_request())
    later = encode_request(make_request(Message.assistant("thinking"), Message.user("and db?")))

    system = b'{"role":"system","content":"You are the on-call bot."}'
    head = first[: first.index(system) + len(system)]
    tools = first[first.index(b',"tools":') :]
    assert later.startswith(head)
    assert later.endswith(tools)


def test_non_ascii_text_is_sent_as_utf8() -> None:
    encoded = encode_request(Request(model="m", messages=[Message.user("déploiement ✅")]))
    assert "déploiement ✅".encode() in encoded


@pytest.mark.parametrize(
    "message",
    [
        Message(role="tool", content="orphan"),
        Message(role="user", content="hi", tool_calls=[ToolCall(id="c", name="n")]),
    ],
)
def test_impossible_messages_are_a_configuration_error(message: Message) -> None:
    with pytest.raises(ConfigurationError):
        encode_request(Request(model="m", messages=[message]))


def test_a_nan_temperature_is_a_configuration_error() -> None:
    with pytest.raises(ConfigurationError):
        encode_request(Request(model="m", messages=[Message.user("hi")], temperature=float("nan")))


# --- answers --------------------------------------------------------------------------------


def completion(message: dict[str, Any], usage: dict[str, Any] | None = None, **extra: Any) -> str:
    body = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-test-2024",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        **extra,
    }
    if usage is not None:
        body["usage"] = usage
    return json.dumps(body)


def test_text_answer_and_usage_with_cached_tokens() -> None:
    usage = {"prompt_tokens": 120, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 100}}
    response = parse_response(completion({"role": "assistant", "content": "All good."}, usage))

    assert response.message is not None
    assert response.message.content == "All good."
    assert response.choices[0].finish_reason == "stop"
    assert response.model == "gpt-test-2024"
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (120, 7)
    assert response.usage.cache_read_tokens == 100


def test_missing_cache_details_count_as_zero() -> None:
    response = parse_response(
        completion({"role": "assistant", "content": "x"}, {"prompt_tokens": 5, "completion_tokens": 1})
    )
    assert response.usage.cache_read_tokens == 0


def test_deepseek_cache_hits_are_read_too() -> None:
    usage = {"prompt_tokens": 50, "completion_tokens": 1, "prompt_cache_hit_tokens": 32}
    assert parse_response(completion({"content": "x"}, usage)).usage.cache_read_tokens == 32


def test_tool_calls_are_read_whole() -> None:
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_a",
                "type": "function",
                "function": {"name": "list_pods", "arguments": '{"ns":"web"}'},
            },
            {
                "id": "call_b",
                "type": "function",
                "function": {"name": "list_pods", "arguments": {"ns": "db"}},
            },
            {"id": "call_c", "type": "function", "function": {"name": "list_pods", "arguments": ""}},
        ],
    }
    response = parse_response(completion(message))

    assert response.message is not None
    assert response.message.content is None
    assert [(c.id, c.parsed_arguments()) for c in response.message.tool_calls] == [
        ("call_a", {"ns": "web"}),
        ("call_b", {"ns": "db"}),
        ("call_c", {}),
    ]


def test_an_empty_choices_list_is_a_response_without_a_message() -> None:
    assert parse_response(json.dumps({"id": "x", "choices": []})).message is None


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ("<html>Bad gateway</html>", "not JSON"),
        ("[1, 2]", "not a JSON object"),
        ('{"id": "x"}', "no 'choices'"),
        ('{"choices": {"index": 0}}', "not a list"),
        ('{"choices": [{"index": 0}]}', "message is not a JSON object"),
        ('{"choices": [{"message": {"content": 5}}]}', "'content' is a int"),
        ('{"choices": [{"message": {"tool_calls": [{"id": 7, "function": {"name": "f"}}]}}]}', "id is a int"),
        ('{"choices": [{"message": {"tool_calls": [{"id": "c", "function": {}}]}}]}', "no function name"),
        (
            '{"choices": [{"message": {"tool_calls": [{"id": "c", "function": {"name": "f", "arguments": 3}}]}}]}',
            "int",
        ),
        ('{"choices": [], "usage": {"prompt_tokens": "many"}}', "prompt_tokens"),
    ],
)
def test_malformed_answers_say_what_is_wrong(body: str, complaint: str) -> None:
    with pytest.raises(MalformedResponseError) as caught:
        parse_response(body, model="gpt-test")
    assert complaint in caught.value.message
    assert caught.value.model == "gpt-test"


def test_an_error_object_sent_with_200_is_raised_as_that_error() -> None:
    body = json.dumps(
        {"error": {"message": "Invalid tool schema", "type": "invalid_request_error", "code": 400}}
    )
    with pytest.raises(ProviderError, match="Invalid tool schema"):
        parse_response(body)


# --- errors ---------------------------------------------------------------------------------


def openai_error(message: str, code: str | None = None, kind: str = "invalid_request_error") -> bytes:
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": code}}).encode()


def test_http_errors_keep_the_providers_message_status_and_model() -> None:
    error = error_for_status(401, openai_error("Incorrect API key provided"), model="gpt-test")

    assert type(error) is ProviderError
    assert error.message == "Incorrect API key provided"
    assert (error.status_code, error.model) == (401, "gpt-test")


def test_429_is_rate_limited_with_the_hint_but_an_empty_quota_is_not_retryable() -> None:
    limited = error_for_status(
        429, openai_error("slow down", "rate_limit_exceeded"), model="m", retry_after=3.0
    )
    assert isinstance(limited, RateLimitedError)
    assert limited.retry_after == 3.0

    broke = error_for_status(
        429, openai_error("You exceeded your current quota", "insufficient_quota"), model="m"
    )
    assert type(broke) is ProviderError


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_server_statuses_are_server_errors(status: int) -> None:
    assert isinstance(error_for_status(status, b"<html>upstream died</html>", model="m"), ServerError)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, openai_error("This model's maximum context length is 8192 tokens.", "context_length_exceeded")),
        (
            400,
            json.dumps({"object": "error", "message": "This model's maximum context length is 4096 tokens"}),
        ),
        (500, json.dumps({"error": "the input length exceeds the context length"})),
        (400, json.dumps({"error": {"message": "prompt is too long: 210000 tokens > 200000 maximum"}})),
        (400, json.dumps({"detail": "ContextWindowExceededError: too many tokens"})),
        (413, b"Request Entity Too Large"),
    ],
)
def test_context_overflow_is_recognised_across_providers(status: int, body: str | bytes) -> None:
    error = error_for_status(status, body, model="m")
    assert isinstance(error, ContextOverflowError)
    assert error.status_code == status


def test_a_plain_text_error_body_becomes_the_message_and_an_empty_one_the_status() -> None:
    assert error_for_status(403, b"Forbidden by policy", model="m").message == "Forbidden by policy"
    assert "HTTP 404" in error_for_status(404, b"", model="m").message


def test_error_objects_inside_a_stream_are_classified_by_their_code() -> None:
    assert isinstance(
        error_from_payload({"error": {"message": "overloaded", "code": 503}}, status=None, model="m"),
        ServerError,
    )
    assert (
        type(error_from_payload({"error": {"message": "bad", "code": 400}}, status=None, model="m"))
        is ProviderError
    )
    overflow = {"error": {"message": "x", "code": "context_length_exceeded"}}
    assert isinstance(error_from_payload(overflow, status=None, model="m"), ContextOverflowError)
    assert isinstance(error_from_payload({"error": {"message": "boom"}}, status=None, model="m"), ServerError)
