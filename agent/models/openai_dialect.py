"""How far an OpenAI-compatible provider departs from OpenAI, and the fields it needs sent back.

A ``Dialect`` is what the encoder needs to know about the endpoint it writes for: the tool-call
id rule (Mistral's nine alphanumerics) and whether a call without a thought signature needs
Gemini's documented placeholder (history from another provider, after a fallback). It is
detected from the base URL and model name and can be set explicitly per endpoint.

Provider fields: DeepSeek (thinking mode), Qwen, Kimi and vLLM reasoning parsers answer with
``reasoning_content``, OpenRouter with ``reasoning_details``, Gemini 3 puts a thought signature in
each call's ``extra_content``; the first two refuse (or degrade) a later request whose tool-call
turn lacks them. They are kept on the message and sent back only to the endpoint they came from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from agent.tool_ids import IdStyle

MESSAGE_FIELDS = ("reasoning_content", "reasoning_details")
"""Assistant-message fields kept and sent back to their source."""
CALL_FIELDS = ("extra_content",)
"""Tool-call fields kept and sent back to their source."""
GEMINI_SKIP_SIGNATURE = "skip_thought_signature_validator"
"""Gemini's documented stand-in for a thought signature the history does not have."""

_MISTRAL_MODEL_PREFIXES = (
    "mistral",
    "magistral",
    "codestral",
    "devstral",
    "pixtral",
    "ministral",
    "open-mistral",
    "open-mixtral",
)


@dataclass(frozen=True)
class Dialect:
    name: str = "openai"
    id_style: IdStyle = IdStyle.OPENAI
    gemini_signatures: bool = False


OPENAI = Dialect()
MISTRAL = Dialect("mistral", IdStyle.MISTRAL)
GEMINI = Dialect("gemini", IdStyle.OPENAI, gemini_signatures=True)
DIALECTS = {dialect.name: dialect for dialect in (OPENAI, MISTRAL, GEMINI)}


def dialect_for(base_url: str, model: str, name: str | None = None) -> Dialect:
    """The dialect named ``name``, else the one the host or model name gives away, else OpenAI's."""
    if name:
        return DIALECTS[name]
    host = httpx.URL(base_url).host.lower()
    bare_model = model.lower().rsplit("/", 1)[-1]  # gateways: "mistralai/mistral-large"
    if host.endswith("mistral.ai") or bare_model.startswith(_MISTRAL_MODEL_PREFIXES):
        return MISTRAL
    if host == "generativelanguage.googleapis.com" or bare_model.startswith("gemini-3"):
        return GEMINI
    return OPENAI


def message_fields(raw: dict[str, Any]) -> dict[str, Any]:
    """The provider fields of one answered assistant message (absent or null ones left out)."""
    return {name: raw[name] for name in MESSAGE_FIELDS if raw.get(name) is not None}


def call_fields(raw: dict[str, Any]) -> dict[str, Any]:
    return {name: raw[name] for name in CALL_FIELDS if raw.get(name) is not None}


def content_text(content: Any) -> str | None:
    """A message's ``content``: a string, or a list of parts (Mistral's reasoning models send
    ``[{"type": "thinking", ...}, {"type": "text", "text": ...}]``) whose text parts are joined.
    ``None`` for anything else."""
    if content is None or isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    pieces = [
        part["text"]
        for part in content
        if isinstance(part, dict) and part.get("type", "text") == "text" and isinstance(part.get("text"), str)
    ]
    return "".join(pieces)


def is_text_content(content: Any) -> bool:
    """True when ``content`` is a form ``content_text`` can read."""
    return content is None or isinstance(content, str | list)
