"""Tool-call ids: made up when a provider sends none, and rewritten to what each provider accepts.

Providers disagree on what an id may look like: OpenAI takes any string up to 40 characters,
Anthropic ``^[a-zA-Z0-9_-]+$``, Mistral exactly nine letters or digits. History keeps the id a
call was stored with; an encoder maps each id to its provider's form with ``IdMapper`` when the
request is built. The mapping is a pure function of the id (a hash when it must change), so the
same history always gives the same bytes (the prompt cache) and a call and its result keep
matching ids, whichever provider of the chain a run switches to.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from enum import StrEnum

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class IdStyle(StrEnum):
    OPENAI = "openai"  # any non-empty string of at most 40 characters
    ANTHROPIC = "anthropic"  # ^[a-zA-Z0-9_-]+$ (kept to 64)
    MISTRAL = "mistral"  # ^[a-zA-Z0-9]{9}$


_VALID = {
    IdStyle.OPENAI: re.compile(r"[\x21-\x7e]{1,40}"),
    IdStyle.ANTHROPIC: re.compile(r"[a-zA-Z0-9_-]{1,64}"),
    IdStyle.MISTRAL: re.compile(r"[a-zA-Z0-9]{9}"),
}


def new_call_id() -> str:
    """A fresh id for a call its provider sent without one (valid for OpenAI and Anthropic)."""
    return f"call_{uuid.uuid4().hex[:24]}"


def conforms(call_id: str, style: IdStyle) -> bool:
    return _VALID[style].fullmatch(call_id) is not None


def provider_id(call_id: str, style: IdStyle) -> str:
    """``call_id`` as ``style`` accepts it: itself when it conforms, else derived from its hash."""
    if conforms(call_id, style):
        return call_id
    digest = hashlib.sha256(call_id.encode("utf-8")).digest()
    if style is IdStyle.MISTRAL:
        number = int.from_bytes(digest[:8], "big")
        chars = []
        for _ in range(9):
            number, index = divmod(number, 62)
            chars.append(_BASE62[index])
        return "".join(chars)
    prefix = "toolu_" if style is IdStyle.ANTHROPIC else "call_"
    return prefix + digest.hex()[:24]


class IdMapper:
    """Maps the ids of one request to ``style``. Two ids that would map to the same value (a hash
    collision, or a conforming id equal to another's hash) get distinct values, in history order."""

    def __init__(self, style: IdStyle) -> None:
        self._style = style
        self._mapped: dict[str, str] = {}
        self._used: set[str] = set()

    def __call__(self, call_id: str) -> str:
        if call_id in self._mapped:
            return self._mapped[call_id]
        candidate, salt = provider_id(call_id, self._style), 0
        while candidate in self._used:
            salt += 1
            candidate = provider_id(f"{call_id}#{salt}", self._style)
        self._mapped[call_id] = candidate
        self._used.add(candidate)
        return candidate
