"""What a message's blocks go through on their way to Slack: redaction, and a plainer form when
Slack refuses them for their form (``bot.slack.delivery.presenter``, the web process's redraws)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from slack_sdk.errors import SlackApiError

from bot.slack.rendering.blockkit import Block
from bot.slack.rendering.mrkdwn import truncate

# A form refusal: a plainer message follows. msg_blocks_too_long: the blocks' text in all is over
# Slack's (undocumented, about 12k characters) limit, which rendering keeps messages under.
BLOCK_ERRORS = frozenset({"invalid_blocks", "invalid_blocks_format", "msg_blocks_too_long"})


def slack_error(error: SlackApiError) -> str | None:
    """Slack's error code (``invalid_blocks``, ``ratelimited``, ...) of a failed call."""
    response = error.response
    return str(response.get("error")) if response is not None and response.get("error") else None


def redacted_blocks(blocks: list[Block], redact: Callable[[str], str]) -> list[Block]:
    """``blocks`` with every ``text`` (all a person reads in Block Kit) passed through ``redact``."""

    def scrub(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                key: redact_within(value) if key == "text" and isinstance(value, str) else scrub(value)
                for key, value in node.items()
            }
        if isinstance(node, list):
            return [scrub(item) for item in node]
        return node

    def redact_within(text: str) -> str:
        # A marker can be longer than what it hides: never past the length render cut the text to.
        redacted = redact(text)
        return truncate(redacted, len(text)) if len(redacted) > len(text) else redacted

    scrubbed: list[Block] = scrub(blocks)
    return scrubbed


def plainer_blocks(blocks: list[Block]) -> list[Block]:
    """A card's first block (its one-line header) and its buttons: what must survive a refusal."""
    return [blocks[0], *(block for block in blocks[1:] if block.get("type") == "actions")] if blocks else []
