"""Fakes of real OpenAI-compatible providers, each enforcing the documented rule a client gets wrong.

Every fake answers in its provider's documented shape (checked against the official ``openai``
package's types where the shape is OpenAI's) and refuses a request the way its provider does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from openai.types.chat import ChatCompletion

from tests.support.fake_provider import FakeAnswer, FakeRequest, chat_completion, chunks

GEMINI_SIGNATURE = "CiQB4/H/Xh+signature=="
TOOL_CALL = {"type": "function", "function": {"name": "disk_usage", "arguments": '{"path":"/"}'}}


def checked(completion: dict[str, Any]) -> dict[str, Any]:
    ChatCompletion.model_validate(completion)  # the OpenAI SDK reads it (provider extras allowed)
    return completion


def assistant_turns(body: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    return [(index, m) for index, m in enumerate(body["messages"]) if m["role"] == "assistant"]


def call_ids_answered(body: dict[str, Any]) -> bool:
    """Every tool message answers a call of an earlier assistant message."""
    ids = {call["id"] for _, m in assistant_turns(body) for call in m.get("tool_calls") or []}
    return all(m["tool_call_id"] in ids for m in body["messages"] if m["role"] == "tool")


def deepseek(request: FakeRequest) -> FakeAnswer:
    """DeepSeek in thinking mode: an assistant tool-call turn sent back without its
    ``reasoning_content`` is refused (400)."""
    body = request.body
    for index, message in assistant_turns(body):
        if message.get("tool_calls") and not message.get("reasoning_content"):
            error = {
                "message": f"Missing `reasoning_content` field in the assistant message at message index {index}.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_request_error",
            }
            return FakeAnswer(400, json={"error": error})
    if not any(m["role"] == "tool" for m in body["messages"]):
        message = {
            "content": "",
            "reasoning_content": "Check the disk first.",
            "tool_calls": [{"id": "call_00_ds", **TOOL_CALL}],
        }
        return FakeAnswer(json=checked(chat_completion(message, finish_reason="tool_calls")))
    return FakeAnswer(
        json=checked(chat_completion({"content": "/ is 97% full.", "reasoning_content": "Report it."}))
    )


def gemini(*, stream: bool = False) -> Callable[[FakeRequest], FakeAnswer]:
    """Gemini 3 on its OpenAI endpoint: calls come without ids and with a thought signature in
    ``extra_content``; a call sent back without it is refused, with an error body that is a JSON array."""

    def handle(request: FakeRequest) -> FakeAnswer:
        body = request.body
        for _, message in assistant_turns(body):
            for call in message.get("tool_calls") or []:
                signature = ((call.get("extra_content") or {}).get("google") or {}).get("thought_signature")
                if not signature:
                    error = {
                        "code": 400,
                        "message": "Function call is missing a thought_signature in functionCall parts.",
                        "status": "INVALID_ARGUMENT",
                    }
                    return FakeAnswer(400, json=[{"error": error}])
        if not call_ids_answered(body):
            return FakeAnswer(
                400,
                json=[
                    {"error": {"code": 400, "message": "tool_call_id mismatch", "status": "INVALID_ARGUMENT"}}
                ],
            )
        call = {**TOOL_CALL, "extra_content": {"google": {"thought_signature": GEMINI_SIGNATURE}}}
        if any(m["role"] == "tool" for m in body["messages"]):
            if stream:
                return FakeAnswer(
                    events=[*chunks({"role": "assistant", "content": "/ is 97% full."}), "[DONE]"]
                )
            return FakeAnswer(json=checked(chat_completion({"content": "/ is 97% full."})))
        if stream:  # whole calls, no index, no id
            return FakeAnswer(
                events=[
                    *chunks({"role": "assistant", "tool_calls": [call]}, finish_reason="tool_calls"),
                    "[DONE]",
                ]
            )
        return FakeAnswer(
            json=chat_completion({"content": None, "tool_calls": [call]}, finish_reason="tool_calls")
        )

    return handle


def gemini_overflow(request: FakeRequest) -> FakeAnswer:
    message = "The input token count (1210432) exceeds the maximum number of tokens allowed (1048576)."
    return FakeAnswer(400, json=[{"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}])


_MISTRAL_ID = re.compile(r"[a-zA-Z0-9]{9}")


def mistral(request: FakeRequest) -> FakeAnswer:
    """Mistral: tool-call ids must be nine letters or digits; reasoning models answer with
    ``content`` as a list of chunks."""
    body = request.body
    ids = [call["id"] for _, m in assistant_turns(body) for call in m.get("tool_calls") or []]
    ids += [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    for call_id in ids:
        if not _MISTRAL_ID.fullmatch(call_id):
            error = {
                "object": "error",
                "message": f"Tool call id was {call_id} but must be a-z, A-Z, 0-9, with a length of 9.",
                "type": "invalid_request_message_error",
                "param": None,
                "code": "3280",
            }
            return FakeAnswer(400, json=error)
    if not call_ids_answered(body):
        return FakeAnswer(
            400,
            json={"object": "error", "message": "Unexpected tool call id", "type": "invalid_request_error"},
        )
    content = [
        {"type": "thinking", "thinking": [{"type": "text", "text": "The disk looks full."}]},
        {"type": "text", "text": "/ is "},
        {"type": "text", "text": "97% full."},
    ]
    return FakeAnswer(json=chat_completion({"content": content}))


def legacy_function_call(request: FakeRequest) -> FakeAnswer:
    """An older server (or an Azure api-version before tools): the deprecated ``function_call``."""
    if any(m["role"] == "tool" for m in request.body["messages"]):
        return FakeAnswer(json=checked(chat_completion({"content": "done"})))
    message = {"content": None, "function_call": {"name": "disk_usage", "arguments": '{"path":"/"}'}}
    return FakeAnswer(json=checked(chat_completion(message, finish_reason="function_call")))


def openrouter_midstream_error(request: FakeRequest) -> FakeAnswer:
    """OpenRouter: the upstream provider fails after the stream began; the last chunk carries
    ``error`` and ``finish_reason: "error"``."""
    text = list(chunks({"role": "assistant", "content": ""}, finish_reason=None))
    failed = {
        "id": "gen-1",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "anthropic/claude",
        "error": {"code": "server_error", "message": "Provider disconnected"},
        "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
    }
    return FakeAnswer(events=[*text, failed, "[DONE]"])


def groq_stream(request: FakeRequest) -> FakeAnswer:
    """Groq: the streamed usage is in ``x_groq.usage`` of the last chunk, not in ``usage``."""
    usage = {"prompt_tokens": 812, "completion_tokens": 40, "total_tokens": 852}
    events = list(
        chunks(
            {"role": "assistant", "content": "web-03 "},
            {"content": "is fine."},
            x_groq={"id": "req_1", "usage": usage},
        )
    )
    return FakeAnswer(events=[*events, "[DONE]"])


def azure_classic(deployment: str, version: str, key: str) -> Callable[[FakeRequest], FakeAnswer]:
    """Azure OpenAI's classic endpoint: the deployment in the path, ``api-version`` in the query,
    the key in ``api-key`` (a bearer header is not a key)."""

    def handle(request: FakeRequest) -> FakeAnswer:
        path, _, query = request.path.partition("?")
        if path != f"/openai/deployments/{deployment}/chat/completions":
            return FakeAnswer(404, json={"error": {"code": "404", "message": "Resource not found"}})
        if query != f"api-version={version}":
            return FakeAnswer(404, json={"error": {"code": "404", "message": "Resource not found"}})
        if request.headers.get("api-key") != key:
            message = "Access denied due to invalid subscription key or wrong API endpoint."
            return FakeAnswer(401, json={"error": {"code": "401", "message": message}})
        return FakeAnswer(json=checked(chat_completion({"content": "hello from azure"})))

    return handle


def reasoning_model_probe(request: FakeRequest) -> FakeAnswer:
    """o-series and gpt-5: ``max_tokens`` is refused (``max_completion_tokens`` is the field)."""
    if "max_tokens" in request.body:
        error = {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error",
            "param": "max_tokens",
            "code": "unsupported_parameter",
        }
        return FakeAnswer(400, json={"error": error})
    if "temperature" in request.body:
        return FakeAnswer(
            400,
            json={"error": {"message": "Unsupported value: 'temperature'", "type": "invalid_request_error"}},
        )
    return FakeAnswer(json=checked(chat_completion({"content": "OK"})))


def reasoning_cut_at_length(enough: int) -> Callable[[FakeRequest], FakeAnswer]:
    """A reasoning model served by vLLM (or DeepSeek): asked with fewer than ``enough`` output tokens
    (the server's default when none is named is 1,024 here), it thinks until the limit and answers
    with ``reasoning_content`` only, empty ``content`` and ``finish_reason: "length"``."""

    def handle(request: FakeRequest) -> FakeAnswer:
        limit = request.body.get("max_completion_tokens") or 1024
        if limit < enough:
            message = {"content": "", "reasoning_content": "Let me think about the disk. " * 40}
            usage = {"prompt_tokens": 50, "completion_tokens": limit, "total_tokens": 50 + limit}
            completion = chat_completion(message, finish_reason="length", usage=usage)
        else:
            completion = chat_completion({"content": "/ is 97% full.", "reasoning_content": "Report it."})
        if request.body.get("stream"):
            choice = completion["choices"][0]
            deltas = [
                {"role": "assistant", "content": ""},
                {"reasoning_content": choice["message"]["reasoning_content"]},
                {"content": choice["message"]["content"]},
            ]
            events = list(chunks(*deltas, finish_reason=choice["finish_reason"], usage=completion["usage"]))
            return FakeAnswer(events=[*events, "[DONE]"])
        return FakeAnswer(json=checked(completion))

    return handle


def vllm_midstream_error(request: FakeRequest) -> FakeAnswer:
    """vLLM: a failure after the stream began is sent as its ``ErrorResponse`` object itself
    (``"object": "error"``, the message at the top level, no ``error`` key, no choices)."""
    started = list(chunks({"role": "assistant", "content": ""}, finish_reason=None))
    failed = {
        "object": "error",
        "message": "The decoder prompt (length 9000) is longer than the maximum model length of 8192.",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    return FakeAnswer(events=[*started, failed])
