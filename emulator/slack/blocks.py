"""Block Kit as Slack checks it: the limits that make ``chat.postMessage`` answer ``invalid_blocks``.

Slack reports each problem as ``"<reason> [json-pointer:/blocks/0/text/text]"`` in ``errors`` and
again, prefixed ``[ERROR]``, in ``response_metadata.messages``. Only the rules a bot is likely to
break are checked; anything else passes, as a lenient Slack would let it.
"""

from __future__ import annotations

import json
from typing import Any

MAX_MESSAGE_BLOCKS = 50
MAX_VIEW_BLOCKS = 100
# Slack refuses a message whose blocks hold too much text in all with ``msg_blocks_too_long``;
# the limit is undocumented and was measured around 12-13k characters (slackapi/bolt-js#2509:
# 13,297 characters of markdown blocks, less with a divider). The emulator refuses more than
# 12,000 characters of ``text`` strings across the blocks: at or below where Slack starts.
MAX_BLOCKS_TEXT = 12_000

MESSAGE_BLOCK_TYPES = frozenset(
    {
        "actions",
        "context",
        "context_actions",
        "divider",
        "file",
        "header",
        "image",
        "input",
        "markdown",
        "rich_text",
        "section",
        "table",
        "video",
    }
)
TEXT_TYPES = frozenset({"plain_text", "mrkdwn"})
BUTTON_STYLES = frozenset({"primary", "danger"})


class BlocksFormatError(ValueError):
    """The ``blocks`` argument is not a JSON array of objects at all (``invalid_blocks_format``)."""


def parse_blocks(raw: object) -> list[dict[str, Any]] | None:
    """``blocks`` as sent: a JSON string (form bodies) or a list (JSON bodies); ``None`` when absent."""
    if raw is None or raw == "":
        return None
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise BlocksFormatError(str(exc)) from exc
    if not isinstance(value, list):
        raise BlocksFormatError("blocks must be an array")
    return value


class _Checker:
    """Walks blocks collecting ``reason [json-pointer:...]`` strings."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def fail(self, reason: str, path: str) -> None:
        self.errors.append(f"{reason} [json-pointer:{path}]")

    def max_len(self, value: object, limit: int, path: str) -> None:
        if isinstance(value, str) and len(value) > limit:
            self.fail(f"must be less than {limit + 1} characters", path)

    def text_object(self, obj: object, path: str, limit: int, *, plain_only: bool = False) -> None:
        if not isinstance(obj, dict):
            self.fail("must be an object", path)
            return
        kind = obj.get("type")
        allowed = {"plain_text"} if plain_only else TEXT_TYPES
        if kind not in allowed:
            self.fail(f"must be one of {', '.join(sorted(allowed))}", f"{path}/type")
        text = obj.get("text")
        if not isinstance(text, str) or not text:
            self.fail("must provide a non-empty string", f"{path}/text")
            return
        self.max_len(text, limit, f"{path}/text")

    def confirm(self, obj: object, path: str) -> None:
        if not isinstance(obj, dict):
            self.fail("must be an object", path)
            return
        # All four are required, and all four are plain_text in Slack's current reference
        # (docs.slack.dev/reference/block-kit/composition-objects/confirmation-dialog-object:
        # "text: A plain_text text object"); older docs allowed mrkdwn in ``text``.
        for key, limit in (("title", 100), ("text", 300), ("confirm", 30), ("deny", 30)):
            self.text_object(obj.get(key), f"{path}/{key}", limit, plain_only=True)
        if "style" in obj and obj["style"] not in BUTTON_STYLES:
            self.fail("must be one of primary, danger", f"{path}/style")

    def element(self, obj: object, path: str) -> None:
        if not isinstance(obj, dict):
            self.fail("must be an object", path)
            return
        self.max_len(obj.get("action_id"), 255, f"{path}/action_id")
        if obj.get("type") == "overflow":
            self.overflow(obj, path)
            return
        if obj.get("type") != "button":
            return
        self.text_object(obj.get("text"), f"{path}/text", 75, plain_only=True)
        self.max_len(obj.get("value"), 2000, f"{path}/value")
        self.max_len(obj.get("url"), 3000, f"{path}/url")
        if "style" in obj and obj["style"] not in BUTTON_STYLES:
            self.fail("must be one of primary, danger", f"{path}/style")
        if "confirm" in obj:
            self.confirm(obj["confirm"], f"{path}/confirm")

    def overflow(self, obj: dict[str, Any], path: str) -> None:
        """An overflow menu: 2 to 5 options (Slack's older reference says at least two; the newer
        "up to five": the stricter of both), each a ``plain_text`` label of at most 75 characters
        and a value of at most 150 (the option object's limits)."""
        options = obj.get("options")
        if not isinstance(options, list) or not 2 <= len(options) <= 5:
            self.fail("must provide 2 to 5 options", f"{path}/options")
            return
        for i, option in enumerate(options):
            where = f"{path}/options/{i}"
            if not isinstance(option, dict):
                self.fail("must be an object", where)
                continue
            self.text_object(option.get("text"), f"{where}/text", 75, plain_only=True)
            value = option.get("value")
            if not isinstance(value, str) or not value:
                self.fail("must provide a non-empty string", f"{where}/value")
            self.max_len(value, 150, f"{where}/value")
        if "confirm" in obj:
            self.confirm(obj["confirm"], f"{path}/confirm")

    def block(self, block: object, path: str, allowed_types: frozenset[str]) -> None:
        if not isinstance(block, dict):
            self.fail("must be an object", path)
            return
        kind = block.get("type")
        if not isinstance(kind, str):
            self.fail("missing required field: type", path)
            return
        if kind not in allowed_types:
            self.fail(f"unsupported type: {kind}", f"{path}/type")
            return
        self.max_len(block.get("block_id"), 255, f"{path}/block_id")
        check = getattr(self, f"_{kind}", None)
        if check is not None:
            check(block, path)

    def _section(self, block: dict[str, Any], path: str) -> None:
        if "text" not in block and "fields" not in block:
            self.fail("must provide either text or fields", path)
        if "text" in block:
            self.text_object(block["text"], f"{path}/text", 3000)
        fields = block.get("fields")
        if fields is not None:
            if not isinstance(fields, list) or len(fields) > 10:
                self.fail("no more than 10 items allowed", f"{path}/fields")
            else:
                for i, field in enumerate(fields):
                    self.text_object(field, f"{path}/fields/{i}", 2000)
        if "accessory" in block:
            self.element(block["accessory"], f"{path}/accessory")

    def _header(self, block: dict[str, Any], path: str) -> None:
        self.text_object(block.get("text"), f"{path}/text", 150, plain_only=True)

    def _context(self, block: dict[str, Any], path: str) -> None:
        elements = block.get("elements")
        if not isinstance(elements, list) or not elements:
            self.fail("must provide a non-empty array", f"{path}/elements")
        elif len(elements) > 10:
            self.fail("no more than 10 items allowed", f"{path}/elements")
        else:
            for i, element in enumerate(elements):
                if isinstance(element, dict) and element.get("type") in TEXT_TYPES:
                    self.text_object(element, f"{path}/elements/{i}", 3000)

    def _actions(self, block: dict[str, Any], path: str) -> None:
        elements = block.get("elements")
        if not isinstance(elements, list) or not elements:
            self.fail("must provide a non-empty array", f"{path}/elements")
        elif len(elements) > 25:
            self.fail("no more than 25 items allowed", f"{path}/elements")
        else:
            for i, element in enumerate(elements):
                self.element(element, f"{path}/elements/{i}")

    def _markdown(self, block: dict[str, Any], path: str) -> None:
        text = block.get("text")
        if not isinstance(text, str) or not text:
            self.fail("must provide a non-empty string", f"{path}/text")
        self.max_len(text, 12000, f"{path}/text")


def block_errors(blocks: list[Any], *, limit: int = MAX_MESSAGE_BLOCKS, root: str = "/blocks") -> list[str]:
    """The reasons Slack would reject these blocks, empty when they would be accepted."""
    checker = _Checker()
    if len(blocks) > limit:
        checker.fail(f"no more than {limit} items allowed", root)
        return checker.errors
    for i, block in enumerate(blocks):
        checker.block(block, f"{root}/{i}", MESSAGE_BLOCK_TYPES)
    return checker.errors


def blocks_text_length(node: object) -> int:
    """The characters of every ``text`` string in ``node``: what ``msg_blocks_too_long`` counts."""
    if isinstance(node, dict):
        return sum(
            len(value) if key == "text" and isinstance(value, str) else blocks_text_length(value)
            for key, value in node.items()
        )
    if isinstance(node, list):
        return sum(blocks_text_length(item) for item in node)
    return 0


def error_body(error: str, reasons: list[str]) -> dict[str, Any]:
    """Slack's failure body for a Block Kit problem: ``errors`` plus ``response_metadata.messages``."""
    return {
        "ok": False,
        "error": error,
        "errors": reasons,
        "response_metadata": {"messages": [f"[ERROR] {reason}" for reason in reasons]},
    }
