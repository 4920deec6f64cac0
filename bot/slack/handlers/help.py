"""The help reply: what a bare mention, "help", a greeting or "what can you do?" gets instead of a run.

No model is asked and no run is started: the web process answers from its own text and the
inventory (the targets a run in this channel may act on, ``CHATOPS_CHANNEL_TARGETS`` applied).
Only the bot's own words and the inventory's validated names and labels appear, escaped.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable

from bot.settings import Settings
from bot.slack.rendering.mrkdwn import escape
from tools.errors import ToolError
from tools.inventory import Inventory, Target, load_inventory

log = logging.getLogger(__name__)

MAX_TARGETS = 20  # the help lists at most this many targets, then counts the rest
EXAMPLE = "web-03 is out of disk, deal with it"

# A whole message (lower-case, the bot's mention removed, punctuation and emoji shortcodes dropped)
# that asks for help or says hello; anything more ("help, web-03 is down") is a request.
_HELP = re.compile(
    r"(?:help|usage|commands|\?|"
    r"h(?:i|ello|ey|owdy)(?: there)?|yo|good (?:morning|afternoon|evening)|"
    r"what (?:can|do|could) you do|what are you|who are you|what is this|"
    r"how (?:do i use (?:you|this)|does (?:this|it) work))"
    r"(?: (?:please|pls|ops|bot))?"
)
_NOISE = re.compile(r":[a-z0-9_+-]+:|[!.,;?¿¡]+|\s+")


def asks_for_help(text: str) -> bool:
    """Whether a mention's text (without the bot's mention) is empty, "help", a greeting or "what can you do?"."""
    if not text.strip():
        return True
    if text.strip().strip("?") == "":
        return True
    words = _NOISE.sub(" ", text.lower()).strip()
    return not words or bool(_HELP.fullmatch(words))


class TargetList:
    """The inventory's targets, read once per process (a broken file is logged, never raised)."""

    def __init__(self, settings: Settings, load: Callable[[Settings], Inventory] | None = None) -> None:
        self._settings = settings
        self._load = load or (lambda s: load_inventory(s.chatops_inventory_file))
        self._inventory: Inventory | None = None
        self._failed = False
        self._lock = threading.Lock()

    def inventory(self) -> Inventory | None:
        with self._lock:
            if self._inventory is None and not self._failed:
                try:
                    self._inventory = self._load(self._settings)
                except (ToolError, OSError) as error:
                    log.warning("help: the inventory could not be read: %s", error)
                    self._failed = True
            return self._inventory

    def for_channel(self, channel: str) -> list[Target] | None:
        """The targets a run in ``channel`` may act on; ``None`` when there is no inventory to read."""
        inventory = self.inventory()
        if inventory is None:
            return None
        rule = self._settings.chatops_channel_targets.get(channel)
        if rule:
            try:
                return inventory.select(rule)
            except ToolError:
                return []
        return list(inventory)


def _target_line(target: Target) -> str:
    labels = ", ".join(f"{key}={value}" for key, value in sorted(target.labels.items()))
    shown = f"`{escape(target.name)}`" + (f" ({escape(labels)})" if labels else "")
    return shown + (" :red_circle: prod" if target.production else "")


def targets_text(targets: list[Target] | None, implicit: bool) -> str:
    if targets is None:
        return "_the inventory could not be read; ask your chatops admins_"
    if implicit:
        return "the worker's own host (no inventory is configured)"
    if not targets:
        return "_none in this channel_"
    lines = [f"• {_target_line(target)}" for target in targets[:MAX_TARGETS]]
    if len(targets) > MAX_TARGETS:
        lines.append(f"• _… and {len(targets) - MAX_TARGETS} more_")
    return "\n".join(lines)


def follow_up_text(minutes: float) -> str:
    """How a conversation goes on in the thread (``bot.slack.continuation``), in the help's words."""
    if minutes <= 0:
        window = "When I ask you something, just reply in the thread"
    else:
        shown = f"{minutes:g} minute" + ("" if minutes == 1 else "s")
        window = (
            f"After I answer, a reply in the thread within {shown} continues the conversation "
            "(any time when I asked you something)"
        )
    return (
        f"{window}: I start a follow-up run that knows the thread. "
        "Replies that mention someone else, or just say thanks, are left alone; "
        "later, mention me in the thread to continue."
    )


def help_text(
    bot_user: str | None, targets: list[Target] | None, implicit: bool = False, follow_up_minutes: float = 0
) -> str:
    """The reply: what the bot does, where it can act, an example, and where to find your runs."""
    me = f"<@{bot_user}>" if bot_user and re.fullmatch(r"[UW][A-Z0-9_]+", bot_user) else "@ops"
    return "\n".join(
        [
            f":wave: I'm {me}, the on-call assistant. Mention me with what is wrong and I will:",
            "• investigate with read-only tools (logs, disk, services, metrics, alerts),",
            "• ask for an *Approve* click before I change anything (restarts, clean-ups),",
            "• report what I found and did in the thread.",
            "Reply in the thread to steer me; press *Stop* on the run card to end a run.",
            follow_up_text(follow_up_minutes),
            "",
            "*Targets I can act on here*",
            targets_text(targets, implicit),
            "",
            f"*Example:* {me} {EXAMPLE}",
            "Your active runs and the approvals waiting for you are on my *Home* tab.",
        ]
    )
