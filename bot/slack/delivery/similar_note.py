"""The thread's "Similar:" note posted in Slack (``bot.slack.rendering.similar``), by the web process
for a mention's run and by the worker's alert presenter for an alert's, then recorded as the
message whose Forget buttons may forget those incidents (``IncidentStore.remember_note``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from slack_sdk import WebClient

from bot.memory.similar import Similar
from bot.slack.delivery.blocks import redacted_blocks
from bot.slack.rendering.blockkit import notification_text
from bot.slack.rendering.similar import similar_blocks


def post_similar_note(
    client: WebClient,
    channel: str,
    thread_ts: str,
    found: Sequence[Similar],
    redact: Callable[[str], str],
) -> str | None:
    """Post the note in the thread; its ts (None: nothing posted). The caller records the ts for
    the Forget buttons (``IncidentStore.remember_note``)."""
    if not found:
        return None
    blocks = redacted_blocks(similar_blocks(found), redact)
    response = client.chat_postMessage(
        channel=channel, thread_ts=thread_ts, text=notification_text(blocks), blocks=blocks
    )
    return str(response.get("ts") or "") or None
