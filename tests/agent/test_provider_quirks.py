"""The OpenAI-compatible client on the providers SRE teams use, each against a fake that enforces
that provider's documented rule (``tests/agent/provider_fakes.py``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent.chat import DonePart, StreamPart, TextPart
from agent.config import RunConfig
from agent.errors import (
    ContextOverflowError,
    OutputSpentThinkingError,
    ProviderError,
    RetriesExhaustedError,
    ServerError,
)
from agent.memory import InMemoryMemory
from agent.models.openai_client import LLMClient
from agent.run import Run
from agent.types import Message, Request, Response, RunStatus, ToolCall
from tests.agent import provider_fakes
from tests.support.fake_provider import FakeAnswer, FakeProvider, FakeRequest
from tests.support.tools import RecordingTool


@pytest.fixture
def fake() -> Iterator[Callable[[Callable[[FakeRequest], FakeAnswer]], FakeProvider]]:
    started: list[FakeProvider] = []

    def start(handler: Callable[[FakeRequest], FakeAnswer]) -> FakeProvider:
        started.append(FakeProvider(handler))
        return started[-1]

    yield start
    for provider in started:
        provider.close()


def client(url: str, model: str = "fake-model", **options: Any) -> LLMClient:
    return LLMClient(url, "sk-fake", model, sleep=lambda _: None, max_attempts=2, **options)


def run_disk_check(model: LLMClient, *, stream: bool = False) -> tuple[RunStatus, str | None, RecordingTool]:
    """The loop: one disk_usage call, then an answer; history kept as JSON between requests."""
    tool = RecordingTool("disk_usage", respond=lambda _: "/ 97% used")
    memory = InMemoryMemory([Message.user("web-03 is out of disk")])
    result = Run(RunConfig(models=[model], memory=memory, tools=[tool], stream=stream)).execute()
    return result.status, result.output or result.error, tool


def collect(parts: Iterator[StreamPart]) -> tuple[str, Response]:
    texts = []
    for part in parts:
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, DonePart):
            return "".join(texts), part.response
    raise AssertionError("no DonePart")


REQUEST = Request(model="fake-model", messages=[Message.user("disk?")])


# --- DeepSeek: reasoning_content goes back ------------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_deepseek_thinking_mode_gets_its_reasoning_content_back(fake: Any, stream: bool) -> None:
    deepseek = fake(_streamed(provider_fakes.deepseek) if stream else provider_fakes.deepseek)
    with client(deepseek.url, "deepseek-reasoner") as model:
        status, output, tool = run_disk_check(model, stream=stream)
    assert status is RunStatus.COMPLETED, output
    assert output == "/ is 97% full." and tool.calls == [{"path": "/"}]
    _system, _user, assistant, result = deepseek.requests[1].body["messages"]
    assert assistant["reasoning_content"] == "Check the disk first." and result["role"] == "tool"


def test_reasoning_content_is_never_sent_to_another_endpoint() -> None:
    from agent.models import openai_wire as wire

    message = Message.assistant(None, [ToolCall(id="x1", name="disk_usage")]).model_copy(
        update={
            "provider_source": "openai:https://api.deepseek.com/chat/completions",
            "provider_fields": {"reasoning_content": "secret plan"},
        }
    )
    request = Request(model="m", messages=[message, Message.tool("x1", "ok")])
    assert b"secret plan" not in wire.encode_request(
        request, source="openai:https://api.mistral.ai/v1/chat/completions"
    )
    assert b"secret plan" in wire.encode_request(
        request, source="openai:https://api.deepseek.com/chat/completions"
    )


# --- Gemini: id-less calls, thought signatures, array errors, its overflow message ---------------


@pytest.mark.parametrize("stream", [False, True])
def test_gemini_calls_without_ids_and_with_thought_signatures_work(fake: Any, stream: bool) -> None:
    gemini = fake(provider_fakes.gemini(stream=stream))
    with client(gemini.url, "gemini-3-pro-preview") as model:
        status, output, tool = run_disk_check(model, stream=stream)
    assert status is RunStatus.COMPLETED, output
    assert tool.calls == [{"path": "/"}]
    _system, _user, assistant, result = gemini.requests[1].body["messages"]
    [call] = assistant["tool_calls"]
    assert call["extra_content"]["google"]["thought_signature"] == provider_fakes.GEMINI_SIGNATURE
    assert call["id"] and result["tool_call_id"] == call["id"]


def test_a_gemini_error_array_keeps_its_message(fake: Any) -> None:
    gemini = fake(provider_fakes.gemini())
    foreign = Message.assistant(
        None, [ToolCall(id="x1", name="disk_usage")]
    )  # no signature, and sent as OpenAI would
    with client(gemini.url, "gemini-2.5-pro") as model, pytest.raises(ProviderError) as caught:
        model.complete(
            Request(model="m", messages=[Message.user("disk?"), foreign, Message.tool("x1", "ok")])
        )
    assert caught.value.message == "Function call is missing a thought_signature in functionCall parts."
    assert caught.value.status_code == 400


def test_calls_from_another_model_get_geminis_documented_placeholder_signature(fake: Any) -> None:
    gemini = fake(provider_fakes.gemini())
    foreign = Message.assistant(
        None, [ToolCall(id="x1", name="disk_usage")]
    )  # made by the primary, before a fallback
    with client(gemini.url, "gemini-3-pro-preview") as model:
        answer = model.complete(
            Request(model="m", messages=[Message.user("disk?"), foreign, Message.tool("x1", "ok")])
        )
    assert answer.message is not None and answer.message.content == "/ is 97% full."
    [call] = gemini.requests[0].body["messages"][1]["tool_calls"]
    assert call["extra_content"] == {"google": {"thought_signature": "skip_thought_signature_validator"}}


def test_geminis_context_overflow_is_recognised(fake: Any) -> None:
    gemini = fake(provider_fakes.gemini_overflow)
    with (
        client(gemini.url) as model,
        pytest.raises(ContextOverflowError, match="exceeds the maximum number of tokens"),
    ):
        model.complete(REQUEST)


# --- Mistral: content lists, nine-character ids -------------------------------------------------


def test_mistral_content_as_a_list_is_read_as_its_text(fake: Any) -> None:
    mistral = fake(provider_fakes.mistral)
    with client(mistral.url, "magistral-medium-latest") as model:
        answer = model.complete(REQUEST)
    assert answer.message is not None and answer.message.content == "/ is 97% full."


def test_mistral_gets_ids_it_accepts_for_a_history_begun_elsewhere(fake: Any) -> None:
    mistral = fake(provider_fakes.mistral)
    history = [
        Message.user("disk?"),
        Message.assistant(
            None,
            [
                ToolCall(id="call_8f2b1c9d0e4a", name="disk_usage"),
                ToolCall(id="toolu_01XyZ", name="disk_usage"),
            ],
        ),
        Message.tool("call_8f2b1c9d0e4a", "/ 97%"),
        Message.tool("toolu_01XyZ", "/var 40%"),
    ]
    with client(mistral.url, "mistral-large-latest") as model:
        answer = model.complete(Request(model="m", messages=history))
    assert answer.message is not None and answer.message.content == "/ is 97% full."
    sent = mistral.requests[0].body["messages"]
    ids = [call["id"] for call in sent[1]["tool_calls"]]
    assert [m["tool_call_id"] for m in sent[2:]] == ids and len(set(ids)) == 2


def test_ids_are_mapped_the_same_way_in_every_request(fake: Any) -> None:
    mistral = fake(provider_fakes.mistral)
    history = [
        Message.user("disk?"),
        Message.assistant(None, [ToolCall(id="call_abc", name="disk_usage")]),
        Message.tool("call_abc", "x"),
    ]
    with client(mistral.url, "mistral-small") as model:
        model.complete(Request(model="m", messages=history))
        model.complete(Request(model="m", messages=[*history, Message.assistant("ok"), Message.user("more")]))
    first, second = (r.raw for r in mistral.requests)
    assert (
        second.startswith(first[: first.index(b',"messages"')])
        and json.loads(first)["messages"] == json.loads(second)["messages"][:3]
    )


# --- the legacy function_call, OpenRouter's mid-stream error, Groq's usage ------------------------


def test_a_legacy_function_call_is_a_tool_call(fake: Any) -> None:
    legacy = fake(provider_fakes.legacy_function_call)
    with client(legacy.url) as model:
        status, output, tool = run_disk_check(model)
    assert status is RunStatus.COMPLETED and output == "done"
    assert tool.calls == [{"path": "/"}]


def test_openrouters_finish_reason_error_is_an_error_not_a_short_answer(fake: Any) -> None:
    router = fake(provider_fakes.openrouter_midstream_error)
    with client(router.url) as model, pytest.raises(RetriesExhaustedError) as caught:
        collect(model.stream(REQUEST))
    assert isinstance(caught.value.last, ServerError) and "Provider disconnected" in caught.value.last.message
    assert len(router.requests) == 2  # retried: no text had reached the caller


def test_groqs_streamed_usage_is_read_from_x_groq(fake: Any) -> None:
    groq = fake(provider_fakes.groq_stream)
    with client(groq.url, "llama-3.3-70b-versatile") as model:
        text, response = collect(model.stream(REQUEST))
    assert text == "web-03 is fine."
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (812, 40)


# --- Azure classic and extra headers -------------------------------------------------------------


def test_azure_classic_deployment_url_api_version_and_api_key(fake: Any) -> None:
    azure = fake(provider_fakes.azure_classic("gpt4o-prod", "2024-10-21", "azure-key"))
    base = f"{azure.url}/openai/deployments/gpt4o-prod"
    with LLMClient(
        base, "azure-key", "gpt-4o", azure_api_version="2024-10-21", sleep=lambda _: None
    ) as model:
        answer = model.complete(REQUEST)
    assert answer.message is not None and answer.message.content == "hello from azure"
    assert "authorization" not in azure.requests[0].headers


def test_a_base_url_with_a_query_keeps_it_after_the_path(fake: Any) -> None:
    azure = fake(provider_fakes.azure_classic("dep", "2024-06-01", "k"))
    with LLMClient(
        f"{azure.url}/openai/deployments/dep?api-version=2024-06-01",
        None,
        "m",
        extra_headers={"api-key": "k"},
    ) as model:
        assert model.complete(REQUEST).message is not None
    assert azure.requests[0].path == "/openai/deployments/dep/chat/completions?api-version=2024-06-01"


def test_reasoning_models_accept_what_the_doctor_sends(fake: Any) -> None:
    from bot.ops.doctor import PROBE_TEXT

    probe = fake(provider_fakes.reasoning_model_probe)
    with client(probe.url, "o4-mini") as model:
        assert (
            model.complete(Request(model="o4-mini", messages=[Message.user(PROBE_TEXT)])).message is not None
        )
        # An output limit goes as ``max_completion_tokens``, the field these models take.
        limited = Request(model="o4-mini", messages=[Message.user(PROBE_TEXT)], max_tokens=16)
        assert model.complete(limited).message is not None
    assert (
        probe.requests[-1].body["max_completion_tokens"] == 16 and "max_tokens" not in probe.requests[-1].body
    )


def _streamed(handler: Callable[[FakeRequest], FakeAnswer]) -> Callable[[FakeRequest], FakeAnswer]:
    """The same fake, answering as SSE chunks (reasoning in pieces, the call in two deltas)."""

    def handle(request: FakeRequest) -> FakeAnswer:
        answer = handler(request)
        if answer.status != 200 or not request.body.get("stream"):
            return answer
        message = answer.json["choices"][0]["message"]
        deltas: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
        reasoning = message.get("reasoning_content") or ""
        deltas += [{"reasoning_content": reasoning[i : i + 5]} for i in range(0, len(reasoning), 5)]
        for index, call in enumerate(message.get("tool_calls") or []):
            deltas.append(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
            deltas.append(
                {"tool_calls": [{"index": index, "function": {"arguments": call["function"]["arguments"]}}]}
            )
        if message.get("content"):
            deltas.append({"content": message["content"]})
        finish = answer.json["choices"][0]["finish_reason"]
        from tests.support.fake_provider import chunks

        return FakeAnswer(events=[*chunks(*deltas, finish_reason=finish), "[DONE]"])

    return handle


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_cut_while_thinking_is_asked_once_more_with_the_configured_limit(
    fake: Any, stream: bool
) -> None:
    vllm = fake(provider_fakes.reasoning_cut_at_length(enough=4096))
    with client(vllm.url, "qwen3-32b", max_output_tokens=8192) as model:
        status, output, _ = run_disk_check(model, stream=stream)
    assert status is RunStatus.COMPLETED and output == "/ is 97% full."
    # Not the same request three times: the second names the configured limit.
    assert [r.body.get("max_completion_tokens") for r in vllm.requests] == [None, 8192]


@pytest.mark.parametrize("stream", [False, True])
def test_an_answer_cut_while_thinking_within_the_limit_is_reported_not_retried_blindly(
    fake: Any, stream: bool
) -> None:
    vllm = fake(provider_fakes.reasoning_cut_at_length(enough=100_000))
    with client(vllm.url, "qwen3-32b", max_output_tokens=8192) as model:
        status, error, tool = run_disk_check(model, stream=stream)
    assert status is RunStatus.FAILED and tool.calls == []
    assert error is not None and "used its whole output budget thinking (8192 output tokens)" in error
    assert [r.body.get("max_completion_tokens") for r in vllm.requests] == [None, 8192]


def test_an_answer_cut_at_the_limit_already_asked_is_reported_at_once(fake: Any) -> None:
    vllm = fake(provider_fakes.reasoning_cut_at_length(enough=100_000))
    with (
        client(vllm.url, "qwen3-32b", max_output_tokens=1024) as model,
        pytest.raises(OutputSpentThinkingError, match="1024 output tokens"),
    ):
        model.complete(REQUEST)
    assert len(vllm.requests) == 1  # a larger limit is not configured: asking again would cut again


def test_a_vllm_error_chunk_in_the_stream_keeps_its_message(fake: Any) -> None:
    vllm = fake(provider_fakes.vllm_midstream_error)
    with client(vllm.url) as model:
        status, error, _ = run_disk_check(model, stream=True)
    assert status is RunStatus.FAILED
    assert error is not None and "longer than the maximum model length of 8192" in error
    assert len(vllm.requests) == 1  # a 400 in the stream is the request's fault: not retried
