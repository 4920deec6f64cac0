"""The scripted OpenAI-compatible server, checked with a plain HTTP client against OpenAI's shapes."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from emulator.models.openai_server import OpenAIServer, Reply, ScriptedToolCall, ScriptedUsage

BODY = {"model": "gpt-test", "messages": [{"role": "user", "content": "status of web?"}]}
STREAM_BODY = {**BODY, "stream": True, "stream_options": {"include_usage": True}}


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as running:
        yield running


@pytest.fixture
def http(server: OpenAIServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url + "/", timeout=2.0) as client:
        yield client


def sse_events(response: httpx.Response) -> list[str]:
    """The data of every event, checking the framing: ``data: `` lines, blank-line separated."""
    assert response.text.endswith("\n\n")
    events = response.text.split("\n\n")[:-1]
    assert all(event.startswith("data: ") and "\n" not in event for event in events)
    return [event.removeprefix("data: ") for event in events]


def test_a_json_completion_has_openais_shape(server: OpenAIServer, http: httpx.Client) -> None:
    server.enqueue(Reply(text="web is healthy", usage=ScriptedUsage(100, 4, cached_tokens=64)))

    response = http.post("chat/completions", json=BODY)

    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["content-length"]) == len(response.content)
    answer = response.json()
    assert answer["object"] == "chat.completion"
    assert answer["id"].startswith("chatcmpl-")
    assert isinstance(answer["created"], int)
    assert answer["model"] == "gpt-test"
    assert answer["choices"] == [
        {
            "index": 0,
            "message": {"role": "assistant", "content": "web is healthy", "refusal": None},
            "logprobs": None,
            "finish_reason": "stop",
        }
    ]
    assert answer["usage"]["prompt_tokens"] == 100
    assert answer["usage"]["completion_tokens"] == 4
    assert answer["usage"]["total_tokens"] == 104
    assert answer["usage"]["prompt_tokens_details"]["cached_tokens"] == 64


def test_tool_calls_in_json_have_ids_and_string_arguments(server: OpenAIServer, http: httpx.Client) -> None:
    server.enqueue(
        Reply(tool_calls=[ScriptedToolCall("list_pods", {"ns": "web"}), ScriptedToolCall("f", id="mine")])
    )

    message = http.post("chat/completions", json=BODY).json()["choices"][0]["message"]

    assert message["content"] is None
    assert message["tool_calls"] == [
        {
            "id": "call_1_0",
            "type": "function",
            "function": {"name": "list_pods", "arguments": '{"ns":"web"}'},
        },
        {"id": "mine", "type": "function", "function": {"name": "f", "arguments": "{}"}},
    ]


def test_a_stream_has_openais_chunks_and_ends_with_usage_then_done(
    server: OpenAIServer, http: httpx.Client
) -> None:
    server.enqueue(
        Reply(
            text="Checking now.",
            tool_calls=[ScriptedToolCall("list_pods", '{"namespace":"web"}')],
            argument_chunk_size=5,
            usage=ScriptedUsage(50, 9, cached_tokens=32),
        )
    )

    response = http.post("chat/completions", json=STREAM_BODY)

    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["transfer-encoding"] == "chunked"
    *chunk_data, done = sse_events(response)
    assert done == "[DONE]"
    chunks = [json.loads(data) for data in chunk_data]
    assert {chunk["object"] for chunk in chunks} == {"chat.completion.chunk"}
    assert len({chunk["id"] for chunk in chunks}) == 1
    first, *middle, finish, usage = chunks
    assert first["choices"][0]["delta"]["role"] == "assistant"
    deltas = [chunk["choices"][0]["delta"] for chunk in middle]
    assert "".join(delta.get("content") or "" for delta in deltas) == "Checking now."
    call_deltas = [delta["tool_calls"][0] for delta in deltas if "tool_calls" in delta]
    assert call_deltas[0] == {
        "index": 0,
        "id": "call_1_0",
        "type": "function",
        "function": {"name": "list_pods", "arguments": ""},
    }
    pieces = [delta["function"]["arguments"] for delta in call_deltas[1:]]
    assert pieces == ['{"nam', "espac", 'e":"w', 'eb"}']
    assert all(set(delta) == {"index", "function"} for delta in call_deltas[1:])
    assert finish["choices"][0] == {"index": 0, "delta": {}, "logprobs": None, "finish_reason": "tool_calls"}
    assert all(chunk["usage"] is None for chunk in chunks[:-1])
    assert usage["choices"] == []
    assert usage["usage"]["prompt_tokens_details"]["cached_tokens"] == 32


def test_no_usage_chunk_unless_asked_for(server: OpenAIServer, http: httpx.Client) -> None:
    server.enqueue(Reply(text="hi"))
    *chunk_data, _ = sse_events(http.post("chat/completions", json={**BODY, "stream": True}))
    chunks = [json.loads(data) for data in chunk_data]
    assert all(chunk["choices"] and "usage" not in chunk for chunk in chunks)


def test_faults_are_sent_with_openais_error_body_and_headers(
    server: OpenAIServer, http: httpx.Client
) -> None:
    server.enqueue(Reply.rate_limited(retry_after=3), Reply.context_overflow(limit=4096, requested=5000))

    limited = http.post("chat/completions", json=BODY)
    overflow = http.post("chat/completions", json=STREAM_BODY)

    assert limited.status_code == 429
    assert limited.headers["retry-after"] == "3"
    assert limited.json()["error"]["code"] == "rate_limit_exceeded"
    assert set(limited.json()["error"]) == {"message", "type", "param", "code"}
    assert overflow.status_code == 400
    assert overflow.headers["content-type"] == "application/json"
    assert overflow.json()["error"]["code"] == "context_length_exceeded"
    assert "maximum context length is 4096 tokens" in overflow.json()["error"]["message"]


def test_malformed_and_empty_replies(server: OpenAIServer, http: httpx.Client) -> None:
    server.enqueue(Reply(malformed=True), Reply(empty_choices=True))

    broken = http.post("chat/completions", json=BODY)
    with pytest.raises(ValueError):
        json.loads(broken.content)
    assert http.post("chat/completions", json=BODY).json()["choices"] == []


def test_a_truncated_stream_drops_the_connection_before_done(
    server: OpenAIServer, http: httpx.Client
) -> None:
    server.enqueue(
        Reply(text="one two three", truncate_after=2), Reply(text="x", truncate_after=2, close_delimited=True)
    )
    received: list[bytes] = []

    with (
        pytest.raises(httpx.RemoteProtocolError),
        http.stream("POST", "chat/completions", json=STREAM_BODY) as cut,
    ):
        received.extend(cut.iter_bytes())
    clean_end = http.post("chat/completions", json=STREAM_BODY)

    assert b"one " in b"".join(received)
    assert b"[DONE]" not in b"".join(received)
    assert len(sse_events(clean_end)) == 2
    assert [sent.outcome for sent in server.requests] == ["truncated", "truncated"]


def test_an_exhausted_script_says_so(server: OpenAIServer, http: httpx.Client) -> None:
    response = http.post("chat/completions", json=BODY)
    assert response.status_code == 500
    assert "script ran out" in response.json()["error"]["message"]


def test_replies_can_be_computed_from_the_request(server: OpenAIServer, http: httpx.Client) -> None:
    def echo_last(body: dict[str, Any]) -> Reply:
        return Reply(text=f"you said: {body['messages'][-1]['content']}")

    server.enqueue(echo_last)
    server.fallback = lambda body: Reply(text=f"fallback for {body['model']}")

    first = http.post("chat/completions", json=BODY).json()
    second = http.post("chat/completions", json=BODY).json()

    assert first["choices"][0]["message"]["content"] == "you said: status of web?"
    assert second["choices"][0]["message"]["content"] == "fallback for gpt-test"
    assert server.pending == 0


def test_a_failing_reply_function_is_a_500_not_a_hang(server: OpenAIServer, http: httpx.Client) -> None:
    server.enqueue(lambda body: body["missing"])
    response = http.post("chat/completions", json=BODY)
    assert response.status_code == 500
    assert "reply function failed" in response.json()["error"]["message"]


def test_every_request_is_recorded(server: OpenAIServer, http: httpx.Client) -> None:
    server.enqueue(Reply(text="ok"))
    http.post("chat/completions", content=b'{"model":"m","messages":[]}', headers={"X-Trace": "abc"})

    [recorded] = server.requests
    assert (recorded.method, recorded.path) == ("POST", "/v1/chat/completions")
    assert recorded.raw_body == b'{"model":"m","messages":[]}'
    assert recorded.body == {"model": "m", "messages": []}
    assert recorded.headers["x-trace"] == "abc"
    assert recorded.outcome == "answered"


def test_models_lists_the_served_model() -> None:
    with OpenAIServer(model="local-llama") as server:
        listing = httpx.get(server.url + "/models").json()
    assert listing["object"] == "list"
    assert [entry["id"] for entry in listing["data"]] == ["local-llama"]


def test_the_api_key_is_checked_when_configured() -> None:
    with OpenAIServer(api_key="sk-right", script=[Reply(text="welcome")]) as server:
        wrong = httpx.post(
            server.url + "/chat/completions", json=BODY, headers={"Authorization": "Bearer sk-wrong"}
        )
        right = httpx.post(
            server.url + "/chat/completions", json=BODY, headers={"Authorization": "Bearer sk-right"}
        )
    assert wrong.status_code == 401
    assert wrong.json()["error"]["code"] == "invalid_api_key"
    assert right.json()["choices"][0]["message"]["content"] == "welcome"


def test_bad_requests_get_openai_shaped_errors(server: OpenAIServer, http: httpx.Client) -> None:
    not_json = http.post("chat/completions", content=b"{nope")
    unknown = http.post("embeddings", json={})
    assert not_json.status_code == 400
    assert unknown.status_code == 404
    assert "Invalid URL" in unknown.json()["error"]["message"]


def test_a_delayed_reply_outlasts_a_short_client_timeout(server: OpenAIServer) -> None:
    server.enqueue(Reply(text="late", delay=0.5))
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/chat/completions", json=BODY, timeout=0.05)


def test_close_stops_serving_promptly_even_with_a_reply_waiting(capsys: pytest.CaptureFixture[str]) -> None:
    server = OpenAIServer(script=[Reply(text="never", delay=30)])
    port = int(server.url.rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(server.url + "/chat/completions", json=BODY, timeout=0.05)

    started = time.monotonic()
    server.close()

    assert time.monotonic() - started < 15.0  # not the waiting reply's 30 s (a bound for that alone)
    with socket.socket() as probe, pytest.raises(ConnectionRefusedError):
        probe.connect(("127.0.0.1", port))
    assert "Traceback" not in capsys.readouterr().err
