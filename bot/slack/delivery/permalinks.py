"""Permalinks of the bot's messages (``chat.getPermalink``), cached in the process.

A step's link (in the Findings message and in the answer's citations) is the run card's
permalink: the card is the message that lists the run's steps with their evidence ids
(``bot.slack.rendering.findings``). The link is asked of Slack, never built from a workspace
domain the bot would have to guess, and asked once per message per process (a worker's work
horse serves one job: one call per run segment that shows one).

``chat.getPermalink`` needs no scope and is Tier 4. A transient failure (429, 5xx, connection)
raises, for the background sender to try again; Slack's refusal for good (``message_not_found``,
``channel_not_found``) answers ``None`` and is remembered: the evidence is then shown without a
link, its verdict unchanged. A URL of any other shape than Slack's (``https://`` and no ``<``,
``>``, ``|``, brackets or spaces) is refused too: it goes inside a link's ``<url|label>``.
"""

from __future__ import annotations

import re
import threading

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.slack.delivery.sender import is_transient

MAX_CACHED = 1000
_SAFE_URL = re.compile(r"https://[^\s<>|()\[\]]{1,500}")


class Permalinks:
    """``chat.getPermalink`` answers by (channel, ts); thread-safe."""

    def __init__(self, client: WebClient) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str], str | None] = {}

    def get(self, channel: str, ts: str | None, client: WebClient | None = None) -> str | None:
        """The message's permalink; ``None`` when there is no message or Slack refused for good.
        ``client``: another than the default (the background sender's, which waits out 429s itself)."""
        if not ts:
            return None
        key = (channel, ts)
        with self._lock:
            if key in self._known:
                return self._known[key]
        try:
            response = (client or self._client).chat_getPermalink(channel=channel, message_ts=ts)
            url = str(response.get("permalink") or "")
        except SlackApiError as error:
            if is_transient(error):
                raise
            url = ""
        link = url if _SAFE_URL.fullmatch(url) else None
        with self._lock:
            if len(self._known) >= MAX_CACHED:
                self._known.pop(next(iter(self._known)))
            self._known[key] = link
        return link
