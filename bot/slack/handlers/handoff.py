"""``/ops handoff [#channel ...] [--since 12h] [--post]``: the shift handoff (``bot.postmortem.handoff``)
in Slack, to the asker alone, or posted in the channel the command was typed in with ``--post``.

What it shows keeps channel boundaries (``bot.slack.memberships``, fail closed): an item of a
channel is shown only when the asker may see that channel (a private one only to its members) and
the bot serves it (``CHATOPS_CHANNELS``); the named channels narrow that. ``--post`` writes to
everyone in the channel the command came from, so it is refused unless the asker is a member of
that channel and the bot serves it, and it shows, beside that channel's own items, only the
public channels' (a private channel's incident is never posted into another channel). The change
journal's entries are those of the targets the shown channels may name
(``CHATOPS_CHANNEL_TARGETS``). ``--since`` is parsed as the CLI's (``shift_seconds``).
Every text is redacted (``WebRuntime.redact``) and shown in a code block, escaped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.postmortem.handoff import handoff_text, load_handoff, shift_seconds
from bot.slack.handlers.runtime import WebRuntime
from bot.slack.memberships import conversations, visibility
from bot.slack.rendering.mrkdwn import escape, mention

DEFAULT_SINCE = "12h"
HANDOFF_CHARS = 3500  # of the handoff shown (Slack advises messages under 4,000 characters)
USAGE = (
    "Usage: `/ops handoff [#channel ...] [--since 12h] [--post]` (`--since`: 90m, 12h, 2d; "
    "`--post`: in this channel, for everyone in it, instead of to you alone)."
)
NOT_HERE = (
    "The handoff was not posted: `--post` writes in the channel you typed it in, and only in one "
    "you are a member of and the bot works in."
)
_CHANNEL = re.compile(r"<#([CG][A-Z0-9_]+)(?:\|[^>]*)?>|([CG][A-Z0-9_]{2,})")


@dataclass(frozen=True)
class HandoffArgs:
    channels: frozenset[str]
    since: float  # seconds back
    post: bool

    @classmethod
    def parse(cls, text: str) -> HandoffArgs | None:
        """The command's words after ``handoff``; ``None`` when one of them is not understood."""
        channels: set[str] = set()
        since, post = DEFAULT_SINCE, False
        words = iter(text.split())
        for word in words:
            if word == "--post":
                post = True
            elif word == "--since" or word.startswith("--since="):
                since = word.removeprefix("--since=") if "=" in word else next(words, "")
            elif found := _CHANNEL.fullmatch(word):
                channels.add(found.group(1) or found.group(2))
            else:
                return None
        seconds = shift_seconds(since)
        return cls(frozenset(channels), seconds, post) if seconds is not None else None


def handoff_reply(user: str, channel: str, words: str, runtime: WebRuntime) -> str:
    """What the asker is told (the handoff itself, or where it was posted, or why not)."""
    args = HandoffArgs.parse(words)
    if args is None:
        return USAGE
    client = runtime.client()
    seen = visibility(client, user)
    if args.post and not (
        runtime.channel_allowed(channel)
        and channel in seen.bots
        and channel in conversations(client, "public_channel,private_channel", user)
    ):
        return NOT_HERE

    def may_see(shown: str) -> bool:
        if not (seen.may_see(shown) and runtime.channel_allowed(shown)):
            return False
        if args.channels and shown not in args.channels:
            return False
        return not args.post or shown == channel or not seen.bots.get(shown, True)

    targets = {t.name for shown in seen.bots if may_see(shown) for t in runtime.targets.for_channel(shown)}
    service = runtime.service()
    handoff = load_handoff(
        service.redis,
        runtime.keys,
        service.audit,
        service.approvals,
        since=runtime.clock() - args.since,
        redact=runtime.redact,
        may_see=may_see,
        clock=runtime.clock,
        journal=runtime.journal(),
        targets=sorted(targets),
    )
    text = handoff_text(handoff)
    if len(text) > HANDOFF_CHARS:
        text = text[:HANDOFF_CHARS] + "\n… (cut: chatops handoff shows it whole)"
    block = "```" + escape(text).replace("```", "'''") + "```"
    if not args.post:
        return block
    client.chat_postMessage(channel=channel, text=f"Shift handoff, asked for by {mention(user)}:\n{block}")
    return "The handoff is posted in this channel."
