"""How the OpenAI-compatible emulator renders one ``Reply``: as a ``chat.completion`` object, or as
the ``chat.completion.chunk``s of a stream, the way OpenAI sends them."""

from __future__ import annotations

import json
import math
import re
import time
from typing import Any

from emulator.models.openai_replies import Reply, ScriptedUsage

FINGERPRINT = "fp_chatops_emulator"


class Completion:
    """Renders one ``Reply`` as a ``chat.completion`` object or as ``chat.completion.chunk``s."""

    def __init__(self, reply: Reply, body: dict[str, Any], number: int, default_model: str) -> None:
        self.reply = reply
        self.id = f"chatcmpl-emulated{number:06d}"
        self.created = int(time.time())
        model = body.get("model")
        self.model = model if isinstance(model, str) and model else default_model
        self.call_ids = [call.id or f"call_{number}_{index}" for index, call in enumerate(reply.tool_calls)]
        self.prompt_bytes = len(json.dumps(body.get("messages", [])))

    @property
    def finish_reason(self) -> str:
        return self.reply.finish_reason or ("tool_calls" if self.reply.tool_calls else "stop")

    def usage(self) -> dict[str, Any]:
        scripted = self.reply.usage
        if scripted is None:
            produced = len(self.reply.text or "") + sum(len(c.arguments_json) for c in self.reply.tool_calls)
            scripted = ScriptedUsage(math.ceil(self.prompt_bytes / 4), math.ceil(produced / 4))
        return {
            "prompt_tokens": scripted.prompt_tokens,
            "completion_tokens": scripted.completion_tokens,
            "total_tokens": scripted.prompt_tokens + scripted.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": scripted.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def _envelope(self, kind: str) -> dict[str, Any]:
        return {"id": self.id, "object": kind, "created": self.created, "model": self.model}

    def as_json(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.text, "refusal": None}
        if self.reply.tool_calls:
            message["tool_calls"] = [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": call.name, "arguments": call.arguments_json},
                }
                for call_id, call in zip(self.call_ids, self.reply.tool_calls, strict=True)
            ]
        choice = {"index": 0, "message": message, "logprobs": None, "finish_reason": self.finish_reason}
        choices = [] if self.reply.empty_choices else [choice]
        return {
            **self._envelope("chat.completion"),
            "choices": choices,
            "usage": self.usage(),
            "system_fingerprint": FINGERPRINT,
        }

    def chunks(self, include_usage: bool) -> list[dict[str, Any]]:
        """The stream's chunks before ``[DONE]``: role first, text, each call's header then its
        argument pieces, the finish_reason, and the usage chunk (``choices: []``) if asked for."""
        chunks = [] if self.reply.empty_choices else [self._chunk(delta) for delta in self._deltas()]
        if chunks:
            chunks.append(self._chunk({}, self.finish_reason))
        if include_usage:
            for chunk in chunks:
                chunk["usage"] = None  # OpenAI's other chunks carry a null usage
            chunks.append({**self._envelope("chat.completion.chunk"), "choices": [], "usage": self.usage()})
        return chunks

    def _deltas(self) -> list[dict[str, Any]]:
        text = self.reply.text
        deltas: list[dict[str, Any]] = [
            {"role": "assistant", "content": "" if text else None, "refusal": None}
        ]
        deltas += [{"content": piece} for piece in _text_pieces(text or "", self.reply.text_chunk_size)]
        for index, (call_id, call) in enumerate(zip(self.call_ids, self.reply.tool_calls, strict=True)):
            header = {
                "index": index,
                "id": call_id,
                "type": "function",
                "function": {"name": call.name, "arguments": ""},
            }
            deltas.append({"tool_calls": [header]})
            for piece in _pieces(call.arguments_json, self.reply.argument_chunk_size):
                deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
        return deltas

    def _chunk(self, delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {
            **self._envelope("chat.completion.chunk"),
            "system_fingerprint": FINGERPRINT,
            "choices": [choice],
        }


def _text_pieces(text: str, size: int | None) -> list[str]:
    """Text deltas: ``size`` characters each, or one word (with its trailing space) each."""
    if size is not None:
        return _pieces(text, size)
    return re.findall(r"\s*\S+\s*", text) or ([text] if text else [])


def _pieces(text: str, size: int | None) -> list[str]:
    if not text:
        return []
    if size is None or size <= 0:
        return [text]
    return [text[start : start + size] for start in range(0, len(text), size)]
