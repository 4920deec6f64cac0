"""SSE decoding and the assembly of streamed Chat Completions chunks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent.errors import ContextOverflowError, MalformedResponseError, ServerError, TransientLLMError
from agent.models.sse import ServerSentEvent, SSEDecoder, StreamAssembler, iter_sse_events

# --- decoding -------------------------------------------------------------------------------

STREAM = (
    b": keep-alive comment\r\n"
    b'data: {"a": 1}\r\n'
    b"\r\n"
    b"event: ping\n"
    b"id: 7\n"
    b"data:first line\n"
    b"data: second line\n"
    b"\n"
    b"data: caf\xc3\xa9\r\r"
    b"data: [DONE]\n\n"
)
EXPECTED = [
    ServerSentEvent(data='{"a": 1}'),
    ServerSentEvent(data="first line\nsecond line", event="ping", id="7"),
    ServerSentEvent(data="café", id="7"),
    ServerSentEvent(data="[DONE]", id="7"),
]


def test_events_are_decoded_with_comments_fields_and_every_line_ending() -> None:
    assert list(iter_sse_events([STREAM])) == EXPECTED


def test_events_survive_any_split_of_the_bytes() -> None:
    for cut in range(1, len(STREAM)):
        assert list(iter_sse_events([STREAM[:cut], STREAM[cut:]])) == EXPECTED, f"split at byte {cut}"


def test_events_survive_byte_by_byte_delivery() -> None:
    assert list(iter_sse_events(STREAM[i : i + 1] for i in range(len(STREAM)))) == EXPECTED


def test_an_unfinished_last_event_is_dropped() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b'data: {"whole": true}\n\ndata: {"cut') == [ServerSentEvent(data='{"whole": true}')]
    assert decoder.has_partial_event


def test_a_leading_byte_order_mark_is_ignored() -> None:
    assert list(iter_sse_events([b"\xef\xbb\xbfdata: x\n\n"])) == [ServerSentEvent(data="x")]


def test_blank_lines_without_data_dispatch_nothing() -> None:
    assert list(iter_sse_events([b"\n\n: only a comment\n\nevent: x\n\n"])) == []


# --- assembly -------------------------------------------------------------------------------


def chunk(delta: dict[str, Any] | None = None, finish: str | None = None, **extra: Any) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return json.dumps(
        {"id": "chatcmpl-9", "object": "chat.completion.chunk", "model": "gpt-x", "choices": choices, **extra}
    )


def feed(assembler: StreamAssembler, *events: str) -> list[str]:
    return [text for text in (assembler.add_event(event) for event in events) if text]


def test_text_deltas_come_out_as_they_arrive_and_assemble_into_the_message() -> None:
    assembler = StreamAssembler(model="gpt-x")
    texts = feed(
        assembler,
        chunk({"role": "assistant", "content": ""}),
        chunk({"content": "Pods "}),
        chunk({"content": "are fine."}),
        chunk({}, "stop"),
        "[DONE]",
    )
    response = assembler.finish()

    assert texts == ["Pods ", "are fine."]
    assert response.message is not None
    assert response.message.content == "Pods are fine."
    assert response.choices[0].finish_reason == "stop"
    assert response.id == "chatcmpl-9"


def test_tool_call_deltas_split_across_chunks_become_whole_calls() -> None:
    assembler = StreamAssembler()
    feed(
        assembler,
        chunk({"role": "assistant", "content": None}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_a",
                        "type": "function",
                        "function": {"name": "get", "arguments": ""},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"na'}}]}),
        chunk(
            {
                "tool_calls": [
                    {
                        "index": 1,
                        "id": "call_b",
                        "type": "function",
                        "function": {"name": "put", "arguments": "{}"},
                    }
                ]
            }
        ),
        chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'me": "web"}'}}]}),
        chunk({}, "tool_calls"),
        "[DONE]",
    )
    message = assembler.finish().message

    assert message is not None
    assert message.content is None
    assert [(c.id, c.name, c.arguments) for c in message.tool_calls] == [
        ("call_a", "get", '{"name": "web"}'),
        ("call_b", "put", "{}"),
    ]
    assert assembler.finish_reason == "tool_calls"


def test_tool_call_deltas_without_index_are_merged_by_id() -> None:
    assembler = StreamAssembler()
    feed(
        assembler,
        chunk({"tool_calls": [{"id": "c1", "function": {"name": "a", "arguments": '{"x":'}}]}),
        chunk({"tool_calls": [{"function": {"arguments": "1}"}}]}),
        chunk({"tool_calls": [{"id": "c2", "function": {"name": "b"}}]}),
        chunk({}, "tool_calls"),
    )
    message = assembler.finish().message
    assert message is not None
    assert [(c.id, c.arguments) for c in message.tool_calls] == [("c1", '{"x":1}'), ("c2", "{}")]


def test_usage_comes_from_the_final_chunk_without_choices() -> None:
    assembler = StreamAssembler()
    usage = {"prompt_tokens": 900, "completion_tokens": 12, "prompt_tokens_details": {"cached_tokens": 640}}
    feed(
        assembler,
        chunk({"content": "ok"}, usage=None),
        chunk({}, "stop", usage=None),
        chunk(None, usage=usage),
        "[DONE]",
    )

    response = assembler.finish()
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (900, 12)
    assert response.usage.cache_read_tokens == 640


def test_a_stream_without_choices_assembles_to_no_message() -> None:
    assembler = StreamAssembler()
    feed(assembler, chunk(None, usage={"prompt_tokens": 3, "completion_tokens": 0}), "[DONE]")
    assert assembler.finish().message is None


def test_a_finish_reason_is_enough_without_done() -> None:
    assembler = StreamAssembler()
    feed(assembler, chunk({"content": "hi"}), chunk({}, "length"))
    assert assembler.finish().choices[0].finish_reason == "length"


def test_a_stream_that_stops_without_done_or_finish_reason_is_transient() -> None:
    assembler = StreamAssembler(model="gpt-x")
    feed(assembler, chunk({"content": "half an ans"}))
    with pytest.raises(TransientLLMError) as caught:
        assembler.finish()
    assert caught.value.model == "gpt-x"


@pytest.mark.parametrize(
    ("event", "complaint"),
    [
        ('{"id": "x", "choices": [', "not JSON"),
        ("[1]", "not a JSON object"),
        ('{"choices": {"index": 0}}', "not a list"),
        ('{"choices": [{"index": 0, "delta": {"content": 7}}]}', "content is not a string"),
        ('{"choices": [{"index": 0, "delta": {"tool_calls": ["x"]}}]}', "tool-call delta"),
    ],
)
def test_malformed_chunks_are_reported(event: str, complaint: str) -> None:
    with pytest.raises(MalformedResponseError, match=complaint):
        StreamAssembler(model="m").add_event(event)


def test_a_tool_call_that_never_got_a_name_is_malformed() -> None:
    assembler = StreamAssembler()
    feed(
        assembler,
        chunk({"tool_calls": [{"index": 0, "id": "c", "function": {"arguments": "{}"}}]}),
        chunk({}, "tool_calls"),
    )
    with pytest.raises(MalformedResponseError, match="no name"):
        assembler.finish()


def test_an_error_event_in_the_stream_is_raised_as_its_kind() -> None:
    with pytest.raises(ServerError, match="upstream overloaded"):
        StreamAssembler().add_event('{"error": {"message": "upstream overloaded", "code": 502}}')
    with pytest.raises(ContextOverflowError):
        StreamAssembler().add_event('{"error": {"message": "maximum context length is 4096 tokens"}}')
