"""The demo's activity log: a line per new message in the workspace, and per change of a bot
message's status (``Working`` -> ``Done``), printed from a thread of its own."""

from __future__ import annotations

import queue
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from emulator.slack import SlackEmulator

_MENTION = re.compile(r"<@([A-Z0-9_]+)>")


class ActivityLog:
    """Prints the workspace's messages with ``say`` from ``start()`` until ``stop()``."""

    def __init__(self, slack: SlackEmulator, say: Callable[[str], None]) -> None:
        self._slack = slack
        self._say = say
        self._notices: queue.Queue[dict[str, Any] | None] | None = None

    def start(self) -> None:
        notices = self._slack.hub.subscribe()
        self._notices = notices
        threading.Thread(target=self._print, args=(notices,), name="demo-activity", daemon=True).start()

    def stop(self) -> None:
        if self._notices is not None:
            self._slack.hub.unsubscribe(self._notices)
            self._notices.put(None)

    def _print(self, notices: queue.Queue[dict[str, Any] | None]) -> None:
        workspace = self._slack.core.ws
        shown: dict[str, str] = {}  # ts -> the status shown last for that message
        while (notice := notices.get()) is not None:
            if notice.get("type") not in ("message", "message_changed"):
                continue
            with workspace.lock:
                message = workspace.message(str(notice["channel"]), str(notice["ts"]))
                if message is None or message.ephemeral_to is not None:
                    continue
                channel = workspace.channels[message.channel].name
                names = {user.id: user.name for user in workspace.users.values()}
                text, is_bot, thread = message.text, bool(message.bot_id), message.thread_ts
            author = names.get(message.user, message.user)
            first = " ".join(_MENTION.sub(_NameOf(names), text).split("\n", 1)[0].split())
            status = first.split(":", 1)[0] if is_bot else first
            if shown.get(message.ts) == status:
                continue  # a run card counting its steps, or an edit with nothing new to say
            shown[message.ts] = status
            where = f"#{channel}" + (" (thread)" if thread else "")
            self._say(f"{time.strftime('%H:%M:%S')}  {where:<19} {author:>6}: {_cut(first, 90)}")


class _NameOf:
    """``<@U123>`` as ``@name`` (a ``re.sub`` replacement)."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def __call__(self, match: re.Match[str]) -> str:
        return "@" + self.names.get(match.group(1), match.group(1))


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
