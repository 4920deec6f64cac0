"""What the Anthropic emulator checks in a request, and how it simulates the prompt cache.

The checks follow the Messages API's documented rules, as strictly as the API itself or more:
unknown top-level fields; ``max_tokens`` required; roles alternating (the emulator does not merge
consecutive turns for the client); no empty text; ``tool_use`` ids ``^[a-zA-Z0-9_-]+$`` and
unique; every ``tool_use`` answered by a ``tool_result`` at the start of the very next user turn,
and no ``tool_result`` without its ``tool_use``; tool names ``^[a-zA-Z0-9_-]{1,64}$`` with an
object ``input_schema``; at most four ``cache_control`` breakpoints.

The cache: the prompt is the sequence tools, system blocks, message blocks. At each breakpoint
the prefix up to and including that block is hashed (``cache_control`` itself left out, as it
does not change the content). A request reads the longest prefix an earlier request wrote and
writes the prefix up to its last breakpoint; only explicit breakpoints are looked up (the real
API also looks a few blocks back from each), so a client that moves its breakpoints carelessly
misses here first. Token counts are about a token per four bytes of canonical JSON.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from dataclasses import dataclass
from typing import Any

TOP_LEVEL = frozenset(
    {
        "model",
        "max_tokens",
        "messages",
        "system",
        "tools",
        "tool_choice",
        "temperature",
        "top_p",
        "top_k",
        "stop_sequences",
        "stream",
        "metadata",
        "thinking",
        "service_tier",
    }
)
_ID = re.compile(r"[a-zA-Z0-9_-]+")
_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
MAX_BREAKPOINTS = 4


class RequestRejected(Exception):
    """A request the real API would refuse: answered 400 ``invalid_request_error`` with this text."""


def check_request(body: Any) -> None:
    """Raise ``RequestRejected`` for the first documented rule ``body`` breaks."""
    if not isinstance(body, dict):
        raise RequestRejected("the request body must be a JSON object")
    extra = sorted(set(body) - TOP_LEVEL)
    if extra:
        raise RequestRejected(f"{extra[0]}: Extra inputs are not permitted")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise RequestRejected("model: Field required")
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        raise RequestRejected("max_tokens: Field required (an integer of at least 1)")
    _check_tools(body.get("tools", []))
    _check_system(body.get("system"))
    _check_messages(body.get("messages"))
    breakpoints = sum(1 for _, block in prompt_blocks(body) if "cache_control" in block)
    if breakpoints > MAX_BREAKPOINTS:
        raise RequestRejected(
            f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {breakpoints}."
        )


def _check_tools(tools: Any) -> None:
    if not isinstance(tools, list):
        raise RequestRejected("tools: Input should be a valid list")
    names = set()
    for position, tool in enumerate(tools):
        if not isinstance(tool, dict) or not _TOOL_NAME.fullmatch(str(tool.get("name", ""))):
            raise RequestRejected(
                f"tools.{position}.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
            )
        schema = tool.get("input_schema")
        if not isinstance(schema, dict) or schema.get("type") != "object":
            raise RequestRejected(
                f"tools.{position}.input_schema: the schema must be an object of type 'object'"
            )
        if tool["name"] in names:
            raise RequestRejected(f"tools: Tool names must be unique ({tool['name']})")
        names.add(tool["name"])
        _check_cache_control(tool, f"tools.{position}")


def _check_system(system: Any) -> None:
    if system is None or isinstance(system, str):
        return
    if not isinstance(system, list):
        raise RequestRejected("system: Input should be a valid string or list of text blocks")
    for position, block in enumerate(system):
        if not isinstance(block, dict) or block.get("type") != "text":
            raise RequestRejected(f"system.{position}: system blocks must be text blocks")
        _check_text(block, f"system.{position}")


def _check_messages(messages: Any) -> None:
    if not isinstance(messages, list) or not messages:
        raise RequestRejected("messages: at least one message is required")
    previous_role = None
    open_calls: list[str] = []
    seen_ids: set[str] = set()
    for position, message in enumerate(messages):
        where = f"messages.{position}"
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            raise RequestRejected(f"{where}.role: Input should be 'user' or 'assistant'")
        if set(message) - {"role", "content"}:
            raise RequestRejected(f"{where}: Extra inputs are not permitted")
        if message["role"] == previous_role:
            raise RequestRejected(f"{where}: roles must alternate between 'user' and 'assistant'")
        previous_role = message["role"]
        blocks = _blocks(message.get("content"), where)
        if position == 0 and message["role"] != "user":
            raise RequestRejected("messages.0: the first message must use the user role")
        if message["role"] == "user":
            _check_results(blocks, open_calls, where)
            open_calls = []
        else:
            if open_calls:
                raise RequestRejected(f"{where}: tool_use ids {open_calls} have no tool_result after them")
            open_calls = _check_calls(blocks, seen_ids, where)
    if open_calls:
        raise RequestRejected(f"messages: tool_use ids {open_calls} were found without tool_result blocks")


def _blocks(content: Any, where: str) -> list[dict[str, Any]]:
    if isinstance(content, str):
        if not content:
            raise RequestRejected(f"{where}: messages must have non-empty content")
        return [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        raise RequestRejected(f"{where}.content: messages must have non-empty content")
    for index, block in enumerate(content):
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            raise RequestRejected(f"{where}.content.{index}: a content block needs a type")
        if block["type"] == "text":
            _check_text(block, f"{where}.content.{index}")
        _check_cache_control(block, f"{where}.content.{index}")
    return content


def _check_text(block: dict[str, Any], where: str) -> None:
    text = block.get("text")
    if not isinstance(text, str) or not text.strip():
        raise RequestRejected(f"{where}: text content blocks must contain non-whitespace text")
    _check_cache_control(block, where)


def _check_cache_control(block: dict[str, Any], where: str) -> None:
    control = block.get("cache_control")
    if control is None:
        return
    if not isinstance(control, dict) or control.get("type") != "ephemeral" or set(control) - {"type", "ttl"}:
        raise RequestRejected(f"{where}.cache_control: Input tag does not match the expected tag 'ephemeral'")


def _check_calls(blocks: list[dict[str, Any]], seen: set[str], where: str) -> list[str]:
    calls = []
    for index, block in enumerate(blocks):
        if block["type"] == "tool_result":
            raise RequestRejected(f"{where}.content.{index}: tool_result blocks belong in user messages")
        if block["type"] != "tool_use":
            continue
        call_id = block.get("id")
        if not isinstance(call_id, str) or not _ID.fullmatch(call_id):
            raise RequestRejected(
                f"{where}.content.{index}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
            )
        if call_id in seen:
            raise RequestRejected(f"{where}.content.{index}: tool_use ids must be unique ({call_id})")
        if not isinstance(block.get("input"), dict):
            raise RequestRejected(f"{where}.content.{index}.input: Input should be a valid dictionary")
        seen.add(call_id)
        calls.append(call_id)
    return calls


def _check_results(blocks: list[dict[str, Any]], expected: list[str], where: str) -> None:
    results = [block for block in blocks if block["type"] == "tool_result"]
    leading = blocks[: len(results)]
    if results and leading != results:
        raise RequestRejected(f"{where}: tool_result blocks must come first in the content, before any text")
    answered = [block.get("tool_use_id") for block in results]
    unexpected = [call_id for call_id in answered if call_id not in expected]
    if unexpected:
        raise RequestRejected(
            f"{where}: unexpected tool_use_id found in tool_result blocks: {unexpected[0]}. Each tool_result "
            "block must have a corresponding tool_use block in the previous message."
        )
    missing = [call_id for call_id in expected if call_id not in answered]
    if missing:
        raise RequestRejected(
            f"{where}: tool_use ids were found without tool_result blocks immediately after: {missing}"
        )


# --- the prompt cache -----------------------------------------------------------------------------


def prompt_blocks(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The prompt in cache order: tools, system blocks, message blocks (with their role)."""
    blocks: list[tuple[str, dict[str, Any]]] = [("tool", tool) for tool in body.get("tools") or []]
    system = body.get("system")
    if isinstance(system, str):
        blocks.append(("system", {"type": "text", "text": system}))
    elif isinstance(system, list):
        blocks += [("system", block) for block in system]
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        blocks += [(str(message.get("role")), block) for block in content or []]
    return blocks


def tokens(size: int) -> int:
    """About a token per four bytes."""
    return math.ceil(size / 4)


@dataclass(frozen=True)
class CacheUsage:
    input_tokens: int
    cache_read_input_tokens: int
    cache_creation_input_tokens: int


class PromptCache:
    """Prefixes written at breakpoints, by hash; shared by every request to one server."""

    def __init__(self, min_tokens: int = 0) -> None:
        self._min_tokens = min_tokens
        self._written: dict[str, int] = {}
        self._lock = threading.Lock()

    def account(self, body: dict[str, Any]) -> CacheUsage:
        """Read the longest cached prefix, write the prefix up to the last breakpoint."""
        model = str(body.get("model"))
        digest = hashlib.sha256(model.encode())
        size = 0
        marks: list[tuple[str, int]] = []
        for role, block in prompt_blocks(body):
            content = {key: value for key, value in block.items() if key != "cache_control"}
            piece = json.dumps([role, content], sort_keys=True, separators=(",", ":")).encode()
            digest.update(piece)
            size += len(piece)
            if "cache_control" in block:
                marks.append((digest.hexdigest(), tokens(size)))
        total = tokens(size)
        with self._lock:
            read = max((count for key, count in marks if key in self._written), default=0)
            written = 0
            if marks and marks[-1][1] >= self._min_tokens and marks[-1][0] not in self._written:
                written = marks[-1][1] - read
            for key, count in marks:
                if count >= self._min_tokens:
                    self._written[key] = count
        return CacheUsage(total - read - written, read, written)
