"""What the incident memory must know of a channel (``bot.runs.incident_capture.ChannelFacts``),
from Slack: whether it is private (``conversations.info``: ``is_private``, or a direct message),
and the thread's permalink (``chat.getPermalink``, ``bot.slack.delivery.permalinks``).

Anything Slack does not answer clearly (an error, a missing field, a channel the bot cannot see)
makes the channel private: its incidents then stay in it (fail closed).
"""

from __future__ import annotations

import logging

from slack_sdk import WebClient

from bot.slack.delivery.permalinks import Permalinks

log = logging.getLogger(__name__)


class SlackChannelFacts:
    def __init__(self, client: WebClient) -> None:
        self._client = client
        self._permalinks = Permalinks(client)

    def is_private(self, channel: str) -> bool:
        try:
            info = self._client.conversations_info(channel=channel).get("channel") or {}
        except Exception as error:
            log.warning("channel %s: conversations.info failed (%s); counted as private", channel, error)
            return True
        if not isinstance(info, dict) or info.get("is_private") is not False:
            return True
        return bool(info.get("is_im") or info.get("is_mpim"))

    def permalink(self, channel: str, ts: str) -> str:
        try:
            return self._permalinks.get(channel, ts) or ""
        except Exception as error:
            log.warning("thread %s/%s: no permalink (%s)", channel, ts, error)
            return ""
